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
from colabkit.report.common import comparison_fields, run_backend, samples_column, title_of, work_key
from colabkit.report.figures import grouped_bars, label_colors, new_figure
from colabkit.report.headline import interval_text
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
    """Bars: the JAX / TensorFlow ratio of each experiment's headline per device (median over the configurations
    both ran, bars from the smallest to the largest), a dotted line at 1."""
    if not len(table):
        return None
    summary = (table.groupby(["notebook", "device"], sort=False)["jax_over_tensorflow"]
               .agg(ratio="median", low="min", high="max").reset_index())
    figure, (ax,) = new_figure(width=7.0, height=3.8)
    grouped_bars(ax, summary.assign(title=summary["notebook"].map(title_of)), "title", "ratio", series="device",
                 low="low", high="high", colors=label_colors(summary["device"], data.palette),
                 order=[title_of(notebook) for notebook in dict.fromkeys(summary["notebook"])])
    ax.axhline(1.0, color="black", linewidth=1, linestyle=":")
    ax.set(ylabel="headline on JAX / on TensorFlow", title="JAX / TensorFlow, per experiment and device")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    return ReportFigure("backends_jax_over_tensorflow", figure, summary,
                        "Each headline on JAX over the same on TensorFlow, same device and parameters: the median over "
                        "the configurations both ran, bars from the smallest to the largest; above 1 JAX gave more "
                        "(faster for TFLOPS, slower for a time).", body=True)


def backends_section(data: ReportData) -> Section:
    """The report's section on backends: in the body a short table of the pairs (experiment, device, each backend's
    headline, the ratio, its interval and the verdict) and its figure; the whole table in the appendix; or why there
    is none."""
    section = Section("backends", "TensorFlow and JAX")
    table = backend_table(data)
    if not len(table):
        section.empty = "no configuration ran on both on one device (the CNN's frameworks preset runs both)."
        return section
    short = pd.DataFrame({
        "experiment": table["notebook"].map(title_of) + ": " + table["measure"] + " (" + table["unit"] + ")",
        "device": table["device"], "TensorFlow": table["tensorflow"], "JAX": table["jax"], "JAX / TensorFlow": table["jax_over_tensorflow"],
        "interval": [interval_text(low, high) for low, high in zip(table["ratio_low"], table["ratio_high"])],
        "verdict on JAX": table["verdict"]})
    section.items.append(ReportTable("backends", short, "Each headline per backend where both ran (the median over "
                                     "runs), JAX / TensorFlow with its interval and verdict (Methods).", body=True))
    figure = backend_figure(table, data)
    if figure is not None and len(table.drop_duplicates(["notebook", "device"])) > 1:  # two bars or more
        section.items.append(figure)
    section.items.append(ReportTable("backends_jax_over_tensorflow", table,
                                     "Headline per backend where both ran (median over runs), JAX / TensorFlow "
                                     "with its interval, and the verdict with that interval's level and runs."))
    return section
