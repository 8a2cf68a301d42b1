"""A combination's runs together (colabkit.records.merging: its repeats, from any folder): `collapse` gives the
sections one row per combination, `headline_columns` every record its combination's headline over runs,
`figures_over_runs` any declared figures over runs."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from colabkit.experiments import find
from colabkit.experiments.declaration import Headline
from colabkit.experiments.inference import headline_for
from colabkit.statistics import cv, finite, median_ci

HEADLINE_FIELDS = ("n", "median", "ci_low", "ci_high", "level", "note", "between_cv", "within_cv")


def _numeric(values: pd.Series) -> bool:
    """Whether a column holds numbers (and not flags or text) wherever it holds anything."""
    present = list(values.dropna())
    return bool(present) and all(isinstance(value, numbers.Real) and not isinstance(value, bool) for value in present)


def within_run_cv(runs: pd.DataFrame, metric: str) -> pd.Series:
    """Each run's spread inside itself for `metric` (CV of its epochs, calls, steps or models; NaN without any)."""
    base, _, unit = metric.rpartition("_")
    candidates = [(f"metrics.{base}_std_{unit}", f"metrics.{metric}"), ("timings.matmul.std_s", "timings.matmul.median_s"),
                  ("timings.step_s_steady.std", "timings.step_s_steady.median")]
    spread = pd.Series(np.nan, index=runs.index, dtype=float)
    for std, centre in candidates:
        if std in runs and centre in runs:  # a ratio that is no finite number: no spread
            ratio = pd.to_numeric(runs[std], errors="coerce") / pd.to_numeric(runs[centre], errors="coerce")
            spread = spread.fillna(ratio.astype(float).replace([np.inf, -np.inf], np.nan))
    per_model = f"metrics.{metric}_per_repeat"
    if per_model in runs:
        spread = spread.fillna(runs[per_model].map(lambda values: cv(values) if isinstance(values, list) else None)
                               .astype(float))
    return spread


def headline_columns(frame: pd.DataFrame, counted: pd.Series, combination_id: pd.Series) -> pd.DataFrame:
    """For every record, its combination's headline over the runs that count (`counted`): `headline.*`."""
    columns = ["headline.metric", *(f"headline.{name}" for name in HEADLINE_FIELDS)]
    out = pd.DataFrame(index=frame.index, columns=columns, dtype=object)
    if not len(frame):
        return out
    for (notebook, group), rows in frame.groupby([frame["notebook"], combination_id], sort=False):
        experiment = find(str(notebook))
        if experiment is None:
            continue
        mode = rows["params.mode"].iloc[-1] if "params.mode" in rows else None  # one combination: one mode
        metric = headline_for(experiment, {"mode": mode}).metric
        runs = rows[counted.loc[rows.index] & (rows["status"] == "ok")]
        values = finite(runs.get(f"metrics.{metric}", pd.Series(dtype=float)))
        interval = median_ci(values)
        within = within_run_cv(runs, metric).dropna().median()  # NaN, silently, where no run has one (pandas 2.2 warned)
        figures = {"headline.metric": metric, "headline.n": interval.n, "headline.median": interval.estimate,
                   "headline.ci_low": interval.low, "headline.ci_high": interval.high,
                   "headline.level": interval.confidence if interval.resolved else None, "headline.note": interval.note,
                   "headline.between_cv": cv(values), "headline.within_cv": None if pd.isna(within) else within}
        for name, value in figures.items():
            out.loc[rows.index, name] = pd.Series([value] * len(rows), index=rows.index, dtype=object)
    return out


def interval_fields(values: Any, prefix: str) -> dict[str, Any]:
    """The median of `values` (one per run) as `<prefix>`, its interval as `_low` and `_high` (NaN below 3 runs),
    `_runs` and `_level` ('75 %, n = 3'; None without a run)."""
    interval = median_ci(values if isinstance(values, (list, tuple, pd.Series)) else [])
    return {prefix: np.nan if interval.estimate is None else interval.estimate,
            f"{prefix}_low": np.nan if interval.low is None else interval.low,
            f"{prefix}_high": np.nan if interval.high is None else interval.high,
            f"{prefix}_runs": interval.n, f"{prefix}_level": interval.label if interval.n else None}


OVER_RUNS_COLUMNS = ["combination_id", "metric", "measure", "unit", "runs", "median", "between_runs_low",
                    "between_runs_high", "between_runs_level", "note"]


def figures_over_runs(ok: pd.DataFrame, figures: Sequence[Headline]) -> pd.DataFrame:
    """One row per combination and figure it has runs of: the median over runs and its interval (OVER_RUNS_COLUMNS)."""
    rows = []
    for _, combination in ok.iterrows():
        for figure in figures:
            values = combination.get(f"samples.{figure.metric}")
            values = finite(values) if isinstance(values, list) else []
            if not values:
                continue
            interval = median_ci(values)
            rows.append({"combination_id": combination["combination_id"], "metric": figure.metric,
                         "measure": figure.label, "unit": figure.unit, "runs": interval.n, "median": interval.estimate,
                         "between_runs_low": np.nan if interval.low is None else interval.low,
                         "between_runs_high": np.nan if interval.high is None else interval.high,
                         "between_runs_level": interval.label, "note": interval.note})
    return pd.DataFrame(rows, columns=OVER_RUNS_COLUMNS)


def collapse(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per combination: numeric metrics the median over runs, `samples.<metric>`, `runs`, `busy_runs`."""
    if not len(runs):
        return runs.assign(runs=pd.Series(dtype=int), busy_runs=pd.Series(dtype=int))
    numeric = [column for column in runs.columns if column.startswith("metrics.") and _numeric(runs[column])]
    groups = runs.groupby("combination_id", sort=False)
    values = runs[numeric].apply(pd.to_numeric, errors="coerce")  # None (absent) as NaN, for the median
    medians = values.groupby(runs["combination_id"], sort=False).median() if numeric else None
    ordered = runs.sort_values("finished_at", kind="stable")
    named = ordered.groupby("combination_id", sort=False).tail(1).set_index("combination_id").loc[list(groups.groups)]
    # a field the most recent run lacks from the most recent run that has it: the sweep may run the
    # bottleneck passes (breakdown, profile) in a combination's first repeat only
    gaps = [column for column in named.columns if column not in numeric and named[column].isna().any()]
    if gaps:
        named[gaps] = named[gaps].fillna(ordered.groupby("combination_id", sort=False)[gaps].last().loc[named.index])
    for column in numeric:
        middle = medians.loc[named.index, column]  # type: ignore[union-attr]
        if runs[column].dropna().map(lambda value: isinstance(value, numbers.Integral)).all():  # counts stay counts
            middle = middle.map(lambda m: int(m) if pd.notna(m) and float(m).is_integer() else m).astype(object)
        named[column] = middle.to_numpy()
    samples = {f"samples.{column[len('metrics.'):]}": groups[column].agg(lambda values: finite(values))
               .loc[named.index].tolist() for column in numeric}
    busy = groups["host_quiet"].agg(lambda values: int(sum(value is False for value in values))) \
        if "host_quiet" in runs else pd.Series(0, index=named.index)
    extra = pd.DataFrame({"runs": groups.size().loc[named.index].to_numpy(),
                          "busy_runs": busy.loc[named.index].to_numpy(), **samples}, index=named.index)
    # copy(): one block per dtype, else pandas warns that the frame is fragmented when the index becomes a column
    return pd.concat([named, extra], axis=1).copy().reset_index()
