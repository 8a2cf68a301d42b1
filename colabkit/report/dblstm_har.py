"""dBLSTM-HAR section: its figures are the declaration's (report.headline: training time against units per runtime,
as Kimm, Paik & Kimm 2021 drew it); its appendix table has every test score."""

from __future__ import annotations

import numpy as np
import pandas as pd

from colabkit.experiments.published import KIMM_2021_CLAIMS, KIMM_2021_SOURCE
from colabkit.report.common import (column, experiment_frame, global_batch, interval_spec, metrics, per_repeat, pick,
                                    repeats_std, timing_frame)
from colabkit.report.headline import notebook_section
from colabkit.report.records import ReportData
from colabkit.report.section import ReportTable, Section
from colabkit.report.writers import format_number

NOTEBOOK = "dblstm_har"
SCORES = [("test_accuracy", "accuracy"), ("precision", "precision"), ("recall", "recall"),
          ("f1_macro", "F1 (macro)"), ("f1_weighted", "F1 (weighted)")]


def model_shape(bilstm_layers: float, head_units: float) -> str:
    """'2 x BiLSTM + LSTM(64)', '1 x BiLSTM' (no head): the facet a figure draws units along."""
    if pd.isna(bilstm_layers):
        return "unknown"
    head = f" + LSTM({format_number(head_units)})" if pd.notna(head_units) and head_units > 0 else ""
    return f"{format_number(bilstm_layers)} x BiLSTM{head}"


def dblstm_table(data: ReportData) -> pd.DataFrame:
    """One row per ok dBLSTM combination: device, model shape, units, training time, test scores and their spread."""
    ok = data.ok(NOTEBOOK).copy()
    bilstm = column(ok, "params.bilstm_layers").astype(float).fillna(column(ok, "params.layers").astype(float))
    if "params.layers" in ok:  # one name for one thing, so old and new records of a model match
        ok["params.bilstm_layers"] = bilstm
        ok = ok.drop(columns="params.layers")
        ok["work"] = ok["work"].map(lambda work: {("bilstm_layers" if name == "layers" else name): value
                                                  for name, value in work.items()})
    head = column(ok, "params.head_units").astype(float)
    # fresh models inside each run: `models_per_run`, `repeats` in records written before the rename
    repeats = column(ok, "params.models_per_run").where(lambda v: v != "auto").fillna(column(ok, "params.repeats"))
    return experiment_frame(
        ok, ["params.units", "params.bilstm_layers", "params.layers", "params.head_units"],
        ["device", "series", "recurrent_layers", "model", "units"], {
            "bilstm_layers": bilstm, "head_units": head, "recurrent_layers": bilstm + (head.fillna(0) > 0).astype(float),
            "model": [model_shape(b, h) for b, h in zip(bilstm, head)], "units": column(ok, "params.units"),
            "batch": global_batch(ok), "repeats": repeats.fillna(per_repeat(ok, "test_accuracy").map(
                lambda values: len(values) if isinstance(values, (list, tuple)) else np.nan)),
            **timing_frame(ok), **metrics(ok, *(metric for metric, _ in SCORES), model_params="params"),
            **{f"{metric}_std": repeats_std(ok, metric) for metric, _ in SCORES}},
        {"train_time_s": "train_time_s", "test_accuracy": "test_accuracy"})


def _fill(section: Section, table: pd.DataFrame, data: ReportData) -> None:
    section.notes.append(f"{KIMM_2021_SOURCE} claimed: {'; '.join(KIMM_2021_CLAIMS)}.")
    printed = pick(table, ["device", "model", ("bilstm_layers", "BiLSTM layers"), ("head_units", "head units"), "units",
                           "batch", "samples_per_epoch", "runs", ("repeats", "models per run"),
                           ("train_time_s", "train time (s)"), *interval_spec("train_time_s"),
                           ("train_time_std_s", "std over models (s)"), "epoch_first_s", "steady_s", "epoch_steady_s",
                           "step_ms", "samples_per_s", *SCORES, ("test_accuracy_low", "accuracy low"),
                           ("test_accuracy_high", "accuracy high"), ("test_accuracy_std", "accuracy std over models"),
                           "model_params", "data"])
    section.items.append(ReportTable("dblstm_har", printed, "dBLSTM-HAR per device, model shape and units: training "
                                     "time and test scores, medians over runs (each run's figure the mean over its "
                                     "fresh models) with their intervals over runs and the level each reaches; the "
                                     "spread over one run's models (std) apart: models of one run share its process."))


def dblstm_section(data: ReportData) -> Section:
    """The dBLSTM-HAR section (or why it is not in the report)."""
    return notebook_section(data, NOTEBOOK, "dBLSTM on UCI HAR", "dblstm", dblstm_table, _fill)
