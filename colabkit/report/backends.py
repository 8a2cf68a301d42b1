"""TensorFlow and JAX side by side: per experiment, its headline on each backend where both ran the same work on the
same device (the backend that ran: colabkit.records.identity), and the JAX / TensorFlow ratio (comparisons.py's
pairs, along the backend)."""

from __future__ import annotations

import pandas as pd

from colabkit.report.common import interval_texts, title_of
from colabkit.report.comparisons import pairs_along
from colabkit.report.records import ReportData, in_report_order
from colabkit.report.section import ReportTable, Section
from colabkit.statistics import verdict_word

COLUMNS = ["notebook", "measure", "unit", "device", "configuration", "tensorflow", "jax", "jax_over_tensorflow",
           "ratio_low", "ratio_high", "verdict", "faster", "runs_tensorflow", "runs_jax"]


def backend_table(data: ReportData) -> pd.DataFrame:
    """Per experiment, device and configuration run on both backends: each side's median, JAX / TensorFlow."""
    pairs = pairs_along(data, ("backend",))
    pairs = pairs[pairs["candidate"] == "jax"]
    table = pairs.drop(columns="configuration").rename(columns={
        "config": "configuration", "median_reference": "tensorflow", "median_candidate": "jax",
        "ratio": "jax_over_tensorflow", "runs_reference": "runs_tensorflow", "runs_candidate": "runs_jax"})
    table["faster"] = table["verdict"].map(lambda judged: {"faster": "JAX", "slower": "TensorFlow"}.get(
        verdict_word(judged), "neither resolved"))
    return in_report_order(table, ["notebook", "device"]).reindex(columns=COLUMNS)


def backends_section(data: ReportData) -> Section:
    """The pairs' short table in the body, the whole one in the appendix; or why there is none."""
    section = Section("backends", "TensorFlow and JAX")
    table = backend_table(data)
    if not len(table):
        section.empty = "no configuration ran on both on one device (the CNN's frameworks preset runs both)."
        return section
    short = pd.DataFrame({
        "experiment": table["notebook"].map(title_of) + ": " + table["measure"] + " (" + table["unit"] + ")",
        "device": table["device"], "TensorFlow": table["tensorflow"], "JAX": table["jax"],
        "JAX / TensorFlow": table["jax_over_tensorflow"], "interval": interval_texts(table, "ratio_low", "ratio_high"),
        "verdict on JAX": table["verdict"]})
    section.items.append(ReportTable("backends", short, "Each headline per backend where both ran (the median over "
                                     "runs), JAX / TensorFlow with its interval and verdict (Methods).", body=True))
    section.items.append(ReportTable("backends_jax_over_tensorflow", table,
                                     "Headline per backend where both ran (median over runs), JAX / TensorFlow "
                                     "with its interval, and the verdict with that interval's level and runs."))
    return section
