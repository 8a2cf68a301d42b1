"""dBLSTM-HAR section: its headline figure (training time against units per runtime, as Kimm, Paik & Kimm 2021 drew
it) is the declaration's; in the appendix, its own figures: the evaluation metrics per device at one configuration
and the CPU/GPU/TPU runtime ratios at the same global batch beside the paper's claims."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from colabkit.experiments.published import KIMM_2021_CLAIMS, KIMM_2021_RATIOS, KIMM_2021_SOURCE
from colabkit.report.common import (
    column,
    comparison_fields,
    cpu_baseline,
    global_batch,
    interval_frame,
    levels,
    pick,
    repeats_count,
    repeats_std,
    run_config_key,
    samples_column,
    series_labels,
    timing_frame,
    work_differs,
)
from colabkit.report.figures import (
    grouped_bars,
    log_scale_if_wide,
    new_figure,
    plot_lines,
    powers_of_two_axis,
    series_colors,
)
from colabkit.report.headline import notebook_section
from colabkit.report.records import ReportData, label_kind, sort_labels
from colabkit.report.section import ReportFigure, ReportTable, Section
from colabkit.report.writers import format_number

NOTEBOOK = "dblstm_har"
SCORES = [("test_accuracy", "accuracy"), ("precision", "precision"), ("recall", "recall"),
          ("f1_macro", "F1 (macro)"), ("f1_weighted", "F1 (weighted)")]
REPEAT_STD = ("standard deviation over repeats, the record's own where it gives one (see its score_std_is), "
              "else the sample standard deviation of the per-repeat values")


def model_shape(bilstm_layers: float, head_units: float) -> str:
    """'2 x BiLSTM + LSTM(64)', '1 x BiLSTM' (no head): the facet a figure draws units along."""
    if pd.isna(bilstm_layers):
        return "unknown"
    head = f" + LSTM({format_number(head_units)})" if pd.notna(head_units) and head_units > 0 else ""
    return f"{format_number(bilstm_layers)} x BiLSTM{head}"


def dblstm_table(data: ReportData) -> pd.DataFrame:
    """One row per ok dBLSTM record: device, model shape (bidirectional layers, head), units,
    training time and the test scores, each with its std over repeats where the record has
    per-repeat values. Records from before the parameters were renamed give `layers` (bidirectional
    layers, always with a head): read as bilstm_layers."""
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
        "runs": column(ok, "runs"), "train_time_samples": samples_column(ok, "train_time_s"),
        "samples_per_s_samples": samples_column(ok, "samples_per_s"),
        **timing_frame(ok), **scores, "model_params": column(ok, "metrics.params"),
        **interval_frame(samples_column(ok, "train_time_s"), "train_time_s"),
        **interval_frame(samples_column(ok, "test_accuracy"), "test_accuracy").drop(columns="test_accuracy_runs"),
        "data": ok["data_used"], "config": run_config_key(ok), "path": ok["path"],
    })
    order = {label: index for index, label in enumerate(sort_labels(table["device"]))}
    return table.sort_values(["device", "series", "recurrent_layers", "model", "units"],
                             key=lambda c: c.map(order) if c.name == "device" else c).reset_index(drop=True)


def reference_config(table: pd.DataFrame) -> str | None:
    """The configuration measured on the most devices (ties: the most recurrent layers, then units)."""
    if not len(table):
        return None
    counts = table.groupby("config").agg(devices=("device", "nunique"), layers=("recurrent_layers", "max"),
                                         units=("units", "max"))
    return counts.sort_values(["devices", "layers", "units"], ascending=False).index[0]


def metrics_figure(table: pd.DataFrame, data: ReportData) -> ReportFigure | None:
    """Accuracy, precision, recall and F1 per device at one configuration (the comparison of Kimm, Paik & Kimm 2021);
    None where no configuration has them on two devices or more."""
    table = table[table[[metric for metric, _ in SCORES]].notna().any(axis=1)]
    rows = table[table["config"] == reference_config(table)] if len(table) else table
    if rows["series"].nunique() < 2:
        return None
    first = rows.iloc[0]
    long = pd.DataFrame([{"series": row.series, "device": row.device, "metric": label, "value": getattr(row, metric),
                          "std": getattr(row, f"{metric}_std")}
                         for row in rows.itertuples() for metric, label in SCORES if pd.notna(getattr(row, metric))])
    figure, (ax,) = new_figure(width=7.5, height=3.8)
    grouped_bars(ax, long, "metric", "value", err="std", colors=series_colors(long, palette=data.palette),
                 order=[label for _, label in SCORES])
    ax.set_ylim(0, 1)
    ax.set_ylabel("score on the test set")
    shape = str(first["model"]).replace("BiLSTM", f"BiLSTM({format_number(first['units'])})")
    where = f"{shape}, global batch {format_number(first['batch'])}"
    ax.set_title(f"Evaluation metrics per device ({where})")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    long.insert(0, "configuration", where)
    return ReportFigure("dblstm_metrics", figure, long,
                        "Precision, recall and F1 are macro averages over the six activities unless named weighted; "
                        f"means over repeats; error bars: {REPEAT_STD}.")


def _short(labels: list[str]) -> dict[str, str]:
    """'CPU' for a device label that is the only one of its kind, else the full label."""
    kinds = pd.Series([label_kind(label).upper() for label in labels], index=labels)
    return {label: kind if (kinds == kind).sum() == 1 else label for label, kind in kinds.items()}


def runtime_ratios(table: pd.DataFrame) -> pd.DataFrame:
    """Per configuration (same parameters at the same GLOBAL batch): CPU / each accelerator, and each
    GPU / each TPU (above 1: the second device is faster). The ratio of the medians of whole training
    times over runs where both trained on the same samples; where the work differed (another sample
    count per epoch, another number of epochs), the ratio of throughputs (samples/s) instead, said in
    `measure`; each with its interval (`ratio_low`, `ratio_high`) and verdict on the second device
    (`ratio_verdict`: faster, slower, no difference resolved, too few runs)."""
    labels = sort_labels(table["device"])
    baseline = cpu_baseline(labels)
    gpus = [label for label in labels if label_kind(label) == "gpu"]
    tpus = [label for label in labels if label_kind(label) == "tpu"]
    pairs = [(baseline, other) for other in gpus + tpus if baseline] + list(itertools.product(gpus, tpus))
    short = _short(labels)
    runs = table.drop_duplicates(["config", "device"]).set_index(["config", "device"])
    rows = []
    for config, group in table.groupby("config", sort=False):
        first = group.iloc[0]
        for slow, fast in pairs:
            if (config, slow) not in runs.index or (config, fast) not in runs.index:
                continue
            a, b = runs.loc[(config, slow)], runs.loc[(config, fast)]
            differs = work_differs(a, b)
            if differs:
                fields = comparison_fields(b["samples_per_s_samples"], a["samples_per_s_samples"], True, "ratio")
                measure = "throughput (work per epoch differs)"
            else:
                fields = comparison_fields(b["train_time_samples"], a["train_time_samples"], False, "ratio")
                measure = "training time"
            if not np.isfinite(fields["ratio"]):
                continue
            rows.append({"model": first["model"], "recurrent_layers": first["recurrent_layers"],
                         "units": first["units"], "batch": first["batch"],
                         "pair": f"{short[slow]} / {short[fast]}", "series": f"{short[slow]} / {short[fast]}",
                         "device": fast, "numerator": slow, "denominator": fast, **fields, "measure": measure})
    columns = ["model", "recurrent_layers", "units", "batch", "pair", "series", "device", "numerator", "denominator",
               "ratio", "ratio_low", "ratio_high", "ratio_verdict", "measure"]
    return pd.DataFrame(rows, columns=columns).sort_values(["pair", "recurrent_layers", "model", "units"]) \
        .reset_index(drop=True)


def ratio_figure(ratios: pd.DataFrame) -> ReportFigure:
    shapes = list(dict.fromkeys(ratios.sort_values(["recurrent_layers", "model"])["model"]))
    figure, axes = new_figure(ncols=len(shapes), width=4.3, height=3.8, sharey=True)
    for ax, shape in zip(axes, shapes):
        rows = ratios[ratios["model"] == shape]
        plot_lines(ax, rows, "units", "ratio", low="ratio_low", high="ratio_high")
        ax.plot(list(KIMM_2021_RATIOS), list(KIMM_2021_RATIOS.values()), marker="*", markersize=12, linestyle="none",
                color="#777777", markeredgecolor="black", label="Kimm, Paik & Kimm 2021: CPU / GPU or TPU")
        ax.axhline(1.0, color="black", linewidth=1, linestyle=":")
        powers_of_two_axis(ax, [*rows["units"], *KIMM_2021_RATIOS])
        ax.set_title(shape)
        ax.set_xlabel("units per layer")
    log_scale_if_wide(axes[0], [*ratios["ratio"], *KIMM_2021_RATIOS.values(), 1.0], ratio=10)
    axes[0].set_ylabel("speed ratio")
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=min(3, len(labels)))
    caption = ("Training time of the first device divided by that of the second (medians over runs; error bars: "
               f"the interval at the level its runs reach, {levels(ratios['ratio_verdict'])}; none below 3 runs a device), same configuration at the same "
               f"global batch (above 1: the second is faster). Stars: {KIMM_2021_SOURCE}: {KIMM_2021_CLAIMS[0]} "
               "(the paper's printed model is 2 x BiLSTM + LSTM(64)).")
    if (ratios["measure"] != "training time").any():
        caption += (" Where the two runs trained on different numbers of samples (work per epoch differs), the "
                    "ratio is of throughputs (second's samples/s over the first's), not of training times.")
    return ReportFigure("dblstm_runtime_ratios_vs_units", figure, ratios.drop(columns=["series"]).copy(), caption)


def _ratio_figure(table: pd.DataFrame, data: ReportData) -> ReportFigure | None:
    ratios = runtime_ratios(table)
    return ratio_figure(ratios) if len(ratios) else None


def dblstm_section(data: ReportData) -> Section:
    """The dBLSTM-HAR section (or why it is not in the report)."""
    return notebook_section(data, NOTEBOOK, "dBLSTM on UCI HAR", "dblstm", dblstm_table, _fill,
                            own={"metrics": metrics_figure, "runtime_ratios": _ratio_figure})


def _fill(section: Section, table: pd.DataFrame, data: ReportData) -> None:
    ratios = runtime_ratios(table)
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
    if not ratios.empty:
        differs = (ratios["measure"] != "training time").any()
        section.items.append(ReportTable(
            "dblstm_runtime_ratios", ratios[["model", "units", "batch", "pair", "ratio", "ratio_low", "ratio_high",
                                             "ratio_verdict", "measure"]],
            "Speed ratios per configuration at the same global batch (above 1: the second device is faster), the "
            "ratio of the medians over runs with its interval and the verdict on the second device, with that "
            "interval's level and runs: training-time ratios" + ("; throughput ratios where the work per epoch "
                                                                 "differs (see measure)." if differs else
                                                                 "; every pair trained on the same samples.")))
