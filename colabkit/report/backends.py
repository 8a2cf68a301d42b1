"""TensorFlow and JAX side by side: per experiment, its headline on each backend where both ran the same work
on the same device (the backend that ran: colabkit.records.identity), and the JAX / TensorFlow ratio.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from colabkit.experiments import all_experiments
from colabkit.report.common import comparison_fields, interval_texts, run_backend, samples_column, title_of, work_key
from colabkit.report.records import ReportData, sort_labels
from colabkit.report.section import ReportTable, Section
from colabkit.statistics import verdict_word

PAIR = ("tensorflow", "jax")
COLUMNS = ["notebook", "measure", "unit", "device", "configuration", "tensorflow", "jax", "jax_over_tensorflow",
           "ratio_low", "ratio_high", "verdict", "faster", "runs_tensorflow", "runs_jax"]


def backend_table(data: ReportData) -> pd.DataFrame:
    """One row per experiment, device and configuration run on both TensorFlow and JAX: each side's median, JAX /
    TensorFlow with its interval, the verdict on JAX in the headline's direction and which backend it makes
    faster."""
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


def backends_section(data: ReportData) -> Section:
    """The report's section on backends: a short table of the pairs in the body (each backend's headline, the ratio,
    its interval and verdict), the whole table in the appendix; or why there is none."""
    section = Section("backends", "TensorFlow and JAX")
    table = backend_table(data)
    if not len(table):
        section.empty = "no configuration ran on both on one device (the CNN's frameworks preset runs both)."
        return section
    short = pd.DataFrame({
        "experiment": table["notebook"].map(title_of) + ": " + table["measure"] + " (" + table["unit"] + ")",
        "device": table["device"], "TensorFlow": table["tensorflow"], "JAX": table["jax"], "JAX / TensorFlow": table["jax_over_tensorflow"],
        "interval": interval_texts(table, "ratio_low", "ratio_high"),
        "verdict on JAX": table["verdict"]})
    section.items.append(ReportTable("backends", short, "Each headline per backend where both ran (the median over "
                                     "runs), JAX / TensorFlow with its interval and verdict (Methods).", body=True))
    section.items.append(ReportTable("backends_jax_over_tensorflow", table,
                                     "Headline per backend where both ran (median over runs), JAX / TensorFlow "
                                     "with its interval, and the verdict with that interval's level and runs."))
    return section
