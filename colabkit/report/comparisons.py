"""Differences along one parameter (AXES): each combination against the one that differs from it in that parameter
alone and has its REFERENCE value, on the headline: the ratio of the medians, its interval and verdict."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from colabkit.experiments import all_experiments
from colabkit.report.common import (column, comparison_fields, interval_texts, run_backend, samples_column, title_of,
                                    work_differs, work_key)
from colabkit.report.records import ReportData
from colabkit.report.section import ReportTable, Section
from colabkit.report.writers import format_number

AXES = ("batch_size", "jit_compile", "mixed_precision", "dtype", "steps_per_execution")
# Each axis's reference, in order of preference: XLA off (else "auto", off on a CPU), no mixed precision, float32;
# the backend that ran (backends.py): TensorFlow.
REFERENCE: dict[str, tuple[Any, ...]] = {"jit_compile": (False, "auto"), "mixed_precision": ("none",),
                                         "dtype": ("float32",), "backend": ("tensorflow",)}
COLUMNS = ["notebook", "parameter", "device", "reference", "candidate", "configuration", "measure", "runs_reference",
           "runs_candidate", "ratio", "ratio_low", "ratio_high", "verdict"]


def _reference(values: list[Any], axis: str) -> Any:
    """The axis's reference value among `values`: REFERENCE's first present, else the smallest number."""
    for choice in REFERENCE.get(axis, ()):
        if any(type(value) is type(choice) and value == choice for value in values):
            return choice
    numbers = [value for value in values if isinstance(value, (int, float)) and not isinstance(value, bool)]
    return min(numbers) if numbers else None


def pairs_along(data: ReportData, axes: tuple[str, ...] = AXES) -> pd.DataFrame:
    """Every pair of combinations of the same work on the same device but for one parameter of `axes`: candidate /
    reference on the headline (samples/s where the work differed); COLUMNS and unit, config, each side's median."""
    rows = []
    for experiment in all_experiments():
        ok, headline = data.ok(experiment.name), experiment.headline
        if f"metrics.{headline.metric}" not in ok or not len(ok):
            continue
        runs, throughput = samples_column(ok, headline.metric), samples_column(ok, "samples_per_s")
        work = pd.DataFrame({name: column(ok, f"metrics.{name}") for name in ("samples_per_epoch", "epochs_run")})
        for axis in axes:
            values = run_backend(ok) if axis == "backend" else column(ok, f"params.{axis}")
            reference = _reference(list(values.dropna()), axis) if values.map(str).nunique() > 1 else None
            if reference is None:
                continue
            rest, config = work_key(ok, (axis,)), work_key(ok, ("device", axis))  # rest: the same work but the axis
            same = [type(value) is type(reference) and value == reference for value in values]
            base = {key: index for key, index, is_reference in zip(rest, ok.index, same) if is_reference}
            for (index, key), is_reference in zip(rest.items(), same):
                if is_reference or key not in base or not runs[index] or not runs[base[key]]:
                    continue
                samples, higher, measure = runs, headline.higher_is_better, headline.label
                if work_differs(work.loc[index], work.loc[base[key]]):  # epoch times of other work: not comparable
                    samples, higher = throughput, True
                    measure = f"samples/s (the work per epoch differed: {headline.label} not comparable)"
                mine, theirs = samples[index], samples[base[key]]
                fields = comparison_fields(mine, theirs, higher, "ratio", oriented=False)
                rows.append({"notebook": experiment.name, "parameter": axis, "device": ok.at[index, "device_label"],
                             "reference": reference, "candidate": values[index],
                             "configuration": ok.at[index, "combination"], "measure": measure,
                             "runs_reference": len(theirs), "runs_candidate": len(mine), **fields,
                             "verdict": fields["ratio_verdict"], "unit": headline.unit, "config": config[index],
                             "median_reference": float(np.median(theirs)), "median_candidate": float(np.median(mine))})
    return pd.DataFrame(rows, columns=[*COLUMNS, "unit", "config", "median_reference", "median_candidate"])


def axis_comparisons(data: ReportData) -> pd.DataFrame:
    """Every pair of combinations that differ in one parameter of AXES alone (pairs_along): COLUMNS."""
    table = pairs_along(data)
    return table.assign(notebook=table["notebook"].map(title_of))[COLUMNS]


def comparisons_section(data: ReportData) -> Section:
    """A short table in the body, the whole one in the appendix; or why there is none."""
    section = Section("comparisons", "Along one parameter")
    table = axis_comparisons(data)
    if not len(table):
        section.empty = "no two combinations differ in one of " + ", ".join(AXES) + " alone."
        return section
    short = pd.DataFrame({
        "experiment": table["notebook"], "device": table["device"], "parameter": table["parameter"],
        "values": [f"{format_number(reference)} -> {format_number(candidate)}"
                   for reference, candidate in zip(table["reference"], table["candidate"])],
        "measure": table["measure"].str.replace(r" \(the work per epoch differed.*", " (other work per epoch)",
                                                regex=True),
        "ratio": table["ratio"],
        "interval": interval_texts(table, "ratio_low", "ratio_high"),
        "verdict": table["verdict"]})
    section.items.append(ReportTable("comparisons", short, "Each combination against the one that differs in one "
                                     "parameter alone: the ratio of the headline's medians (second over first), its "
                                     "interval and verdict in the headline's direction (Methods).", body=True))
    section.items.append(ReportTable("comparisons_along_one_parameter", table,
                                     "Differences along one parameter (batch, XLA, mixed precision, dtype, steps "
                                     "per execution): ratio of the headline's medians, interval and verdict."))
    return section
