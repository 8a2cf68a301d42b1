"""dBLSTM-HAR section: its figures (training time against units per runtime, as Kimm, Paik & Kimm 2021 drew it, the
speedups over the CPU beside the paper's claims, accuracy) are the declaration's; its table has every test score."""

from __future__ import annotations

import pandas as pd

from colabkit.experiments.published import KIMM_2021_CLAIMS, KIMM_2021_SOURCE
from colabkit.report.common import (column, global_batch, interval_frame, pick, repeats_count, repeats_std,
                                    run_config_key, samples_column, series_labels, timing_frame)
from colabkit.report.headline import notebook_section
from colabkit.report.records import ReportData, sort_labels
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
    """One row per ok dBLSTM combination: device, model shape, units, training time and test scores with their spread
    over repeats (`layers` of old records read as bilstm_layers)."""
    ok = data.ok(NOTEBOOK).copy()
    bilstm = column(ok, "params.bilstm_layers").astype(float).fillna(column(ok, "params.layers").astype(float))
    if "params.layers" in ok:  # one name for one thing, so old and new records of a model match
        ok["params.bilstm_layers"] = bilstm
        ok = ok.drop(columns="params.layers")
        ok["work"] = ok["work"].map(lambda work: {("bilstm_layers" if name == "layers" else name): value
                                                  for name, value in work.items()})
    head = column(ok, "params.head_units").astype(float)
    scores = {}
    for metric, _ in SCORES:
        scores[metric] = column(ok, f"metrics.{metric}")
        scores[f"{metric}_std"] = repeats_std(ok, metric)
    table = pd.DataFrame({
        "device": ok["device_label"],
        "series": series_labels(ok, ["params.units", "params.bilstm_layers", "params.layers", "params.head_units"]),
        "bilstm_layers": bilstm, "head_units": head,
        "recurrent_layers": bilstm + (head.fillna(0) > 0).astype(float),
        "model": [model_shape(b, h) for b, h in zip(bilstm, head)], "units": column(ok, "params.units"),
        "batch": global_batch(ok),
        # fresh models inside each run: `models_per_run`, `repeats` in records written before the rename
        "repeats": column(ok, "params.models_per_run").where(lambda v: v != "auto")
        .fillna(column(ok, "params.repeats")).fillna(repeats_count(ok, "test_accuracy")),
        "runs": column(ok, "runs"), **timing_frame(ok), **scores, "model_params": column(ok, "metrics.params"),
        **interval_frame(samples_column(ok, "train_time_s"), "train_time_s"),
        **interval_frame(samples_column(ok, "test_accuracy"), "test_accuracy").drop(columns="test_accuracy_runs"),
        "data": ok["data_used"], "config": run_config_key(ok), "path": ok["path"],
    })
    order = {label: index for index, label in enumerate(sort_labels(table["device"]))}
    return table.sort_values(["device", "series", "recurrent_layers", "model", "units"],
                             key=lambda c: c.map(order) if c.name == "device" else c).reset_index(drop=True)


def dblstm_section(data: ReportData) -> Section:
    """The dBLSTM-HAR section (or why it is not in the report)."""
    return notebook_section(data, NOTEBOOK, "dBLSTM on UCI HAR", "dblstm", dblstm_table, _fill)


def _fill(section: Section, table: pd.DataFrame, data: ReportData) -> None:
    section.notes.append(f"{KIMM_2021_SOURCE} claimed: {'; '.join(KIMM_2021_CLAIMS)}.")
    printed = pick(table, [("device", "device"), ("model", "model"), ("bilstm_layers", "BiLSTM layers"),
                           ("head_units", "head units"), ("units", "units"), ("batch", "global batch"),
                           ("samples_per_epoch", "samples/epoch"),
                           ("runs", "runs"), ("repeats", "models per run"), ("train_time_s", "train time (s)"),
                           ("train_time_s_low", "low (s)"), ("train_time_s_high", "high (s)"),
                           ("train_time_s_level", "level"), ("train_time_std_s", "std over models (s)"),
                           ("epoch_first_s", "first epoch (s)"), ("steady_s", "steady part (s)"),
                           ("epoch_steady_s", "steady epoch (s)"),
                           ("step_ms", "step (ms)"), ("samples_per_s", "samples/s"),
                           *[(metric, label) for metric, label in SCORES], ("test_accuracy_low", "accuracy low"),
                           ("test_accuracy_high", "accuracy high"), ("test_accuracy_std", "accuracy std over models"),
                           ("model_params", "parameters"), ("data", "data")])
    section.items.append(ReportTable("dblstm_har", printed, "dBLSTM-HAR per device, model shape and units: training "
                                     "time and test scores, medians over runs (each run's figure the mean over its "
                                     "fresh models) with their intervals over runs and the level each reaches; the "
                                     "spread over one run's models (std) apart: models of one run share its process."))
