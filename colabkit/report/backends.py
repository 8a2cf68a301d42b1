"""TensorFlow and JAX side by side: per experiment, its headline measure on each backend where both ran
the same configuration on the same device, and the JAX / TensorFlow ratio.

A record's backend is what ran (`device.backend`, resolved: a run asked for "auto" names the backend
it got), else its explicit `params.backend`, else TensorFlow (records from before the `backend`
parameter, when every notebook but the CNN's and ParaDnn's ran on TensorFlow only). Runs pair up by
device (its label) and by the work they did, the backend left out (colabkit.records.identity).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from colabkit.experiments import all_experiments
from colabkit.report.common import comparison_fields, ratio_bars_by_experiment, run_backend, samples_column, work_key
from colabkit.report.records import ReportData, sort_labels
from colabkit.report.section import ReportFigure, ReportTable, Section
from colabkit.statistics import verdict_word

PAIR = ("tensorflow", "jax")
COLUMNS = ["notebook", "measure", "unit", "device", "configuration", "tensorflow", "jax", "jax_over_tensorflow",
           "ratio_low", "ratio_high", "verdict", "faster", "runs_tensorflow", "runs_jax"]


def backend_table(data: ReportData) -> pd.DataFrame:
    """One row per experiment, device and configuration that ran on both TensorFlow and JAX: the headline
    on each (the median of its runs), their ratio JAX / TensorFlow with its interval (both sides'
    runs resampled), the verdict on JAX in the headline's own direction (more TFLOPS, or less time, is
    faster) and which backend that makes faster (`faster`: JAX, TensorFlow, or neither resolved)."""
    rows = []
    for experiment in all_experiments():
        headline = experiment.headline
        ok = data.ok(experiment.name)
        name = f"metrics.{headline.metric}"
        if name not in ok or not len(ok):
            continue
        table = pd.DataFrame({"device": ok["device_label"], "backend": run_backend(ok),
                              "config": work_key(ok, ("device", "backend")),
                              "value": pd.to_numeric(ok[name], errors="coerce"),
                              "samples": samples_column(ok, headline.metric)}).dropna(subset=["value"])
        table = table[table["backend"].isin(PAIR)]
        for (device, config), runs in table.groupby(["device", "config"], sort=False):
            if set(runs["backend"]) != set(PAIR):
                continue
            tensorflow, jax = ([value for values in runs.loc[runs["backend"] == backend, "samples"] for value in values]
                               for backend in PAIR)
            fields = comparison_fields(jax, tensorflow, headline.higher_is_better, "ratio", oriented=False)
            judged = fields["ratio_verdict"]
            rows.append({"notebook": experiment.name, "measure": headline.label, "unit": headline.unit,
                         "device": device, "configuration": config, "tensorflow": float(np.median(tensorflow)),
                         "jax": float(np.median(jax)), "jax_over_tensorflow": fields["ratio"],
                         "ratio_low": fields["ratio_low"], "ratio_high": fields["ratio_high"], "verdict": judged,
                         "faster": {"faster": "JAX", "slower": "TensorFlow"}.get(verdict_word(judged), "neither resolved"),
                         "runs_tensorflow": len(tensorflow), "runs_jax": len(jax)})
    table = pd.DataFrame(rows, columns=COLUMNS)
    device_order = {label: index for index, label in enumerate(sort_labels(table["device"]))}
    position = table["device"].map(device_order)
    return table.assign(_position=position).sort_values(["notebook", "_position"], kind="stable") \
        .drop(columns="_position").reset_index(drop=True)


def backend_figure(table: pd.DataFrame, data: ReportData) -> ReportFigure | None:
    """Bars: the JAX / TensorFlow ratio of each experiment's headline per device (median over the
    configurations both ran, bars from the smallest to the largest), a line at 1."""
    if not len(table):
        return None
    summary = (table.groupby(["notebook", "device"], sort=False)["jax_over_tensorflow"]
               .agg(ratio="median", low="min", high="max").reset_index())
    figure, _ = ratio_bars_by_experiment(summary, "ratio", "low", "high", ylabel="headline on JAX / on TensorFlow",
                                         title="JAX / TensorFlow, per experiment and device", data=data)
    return ReportFigure("backends_jax_over_tensorflow", figure, summary,
                        "Each experiment's headline measured on JAX over the same measured on TensorFlow, same device "
                        "and parameters; median over the configurations both ran, bars from the smallest to the "
                        "largest ratio. Above 1 JAX gave more of the headline (faster for TFLOPS or samples/s, "
                        "slower for a time); the table's `faster` column says which backend was faster.")


def backends_section(data: ReportData) -> Section:
    """The report's section on backends: the table of pairs and its figure, or why there is none."""
    section = Section("backends", "TensorFlow and JAX")
    table = backend_table(data)
    if not len(table):
        section.empty = ("No configuration ran on both TensorFlow and JAX on the same device: nothing to set side by "
                         "side (a TPU row of the grids runs on JAX, its CPU and GPU rows on TensorFlow; "
                         "-p backend=jax or the CNN's frameworks preset runs both).")
        return section
    section.text.append(
        "The same notebook and parameters on the same device, once on TensorFlow and once on JAX (Keras 3's "
        "backends; the matmul notebook's chained product is written in each framework). The ratio is the headline "
        "on JAX over the headline on TensorFlow, each the median of its runs (`runs_*`), with its interval (its level and runs in the verdict) "
        "interval (none below 3 runs a backend); `verdict` reads it in the headline's direction (faster, slower, "
        "no difference resolved, too few runs) and `faster` names the backend: a single pair of runs on a shared "
        "host can differ by 30 % from noise alone, so no backend is called faster without an interval beyond "
        "the tolerance.")
    section.items.append(ReportTable("backends_jax_over_tensorflow", table,
                                     "Headline per backend where both ran (median over runs), JAX / TensorFlow "
                                     "with its interval, and the verdict with that interval's level and runs."))
    figure = backend_figure(table, data)
    if figure is not None:
        section.items.append(figure)
    return section
