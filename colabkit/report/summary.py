"""The summary: each device's speedup over the CPU per notebook, and a plain-language reading of it
that claims only what the numbers support."""

from __future__ import annotations

import pandas as pd

from colabkit.experiments import all_experiments
from colabkit.report.common import (
    column,
    cpu_baseline,
    figure_warning,
    match_key,
    speedups,
    title_of,
    work_differs,
)
from colabkit.report.figures import grouped_bars, label_colors, log_scale_if_wide, mark_substitute_data, new_figure
from colabkit.report.records import ReportData, label_kind, sort_labels
from colabkit.report.section import ReportFigure, ReportTable, Section
from colabkit.report.writers import format_number

THROUGHPUT = "samples_per_s"


def _throughput_where_work_differs(table: pd.DataFrame, baseline: str | None) -> pd.Series:
    """Which rows did other work than their baseline run (samples per epoch, epochs): their speedup
    is recomputed from throughput, which stays comparable when the work per epoch differs."""
    if baseline is None or not len(table):
        return pd.Series(False, index=table.index)
    base = table[table["device"] == baseline].drop_duplicates("config").set_index("config")
    return table.apply(lambda row: row["config"] in base.index and work_differs(row, base.loc[row["config"]]), axis=1)


def speedup_table(data: ReportData) -> pd.DataFrame:
    """Per notebook and device: the speedup over the CPU baseline on the experiment's declared headline
    measure, over the configurations both ran (median, min, max, how many). Runs match by their parameters at
    the same GLOBAL batch; a training run that did other work than its baseline (another number of
    samples per epoch or of epochs) is compared by throughput instead, and `measure` says so."""
    rows = []
    for experiment in all_experiments():
        notebook, what = experiment.name, experiment.headline.label
        metric, higher = experiment.headline.metric, experiment.headline.higher_is_better
        ok = data.ok(notebook)
        name = f"metrics.{metric}"
        if name not in ok or not ok[name].notna().any():
            continue
        ok = ok[ok[name].notna()]
        table = pd.DataFrame({"device": ok["device_label"], "value": ok[name].astype(float), "config": match_key(ok),
                              THROUGHPUT: column(ok, f"metrics.{THROUGHPUT}").astype(float),
                              "samples_per_epoch": column(ok, "metrics.samples_per_epoch"),
                              "epochs_run": column(ok, "metrics.epochs_run")})
        baseline = cpu_baseline(table["device"])
        table["speedup"] = speedups(table, "value", higher, baseline)
        differs = _throughput_where_work_differs(table, baseline)
        if differs.any():
            by_throughput = speedups(table, THROUGHPUT, True, baseline)
            table["speedup"] = table["speedup"].where(~differs, by_throughput)
            what = f"{what} (samples/s where the work per epoch differed)"
        for device in sort_labels(table["device"]):
            if device == baseline:
                continue
            matched = table[(table["device"] == device) & table["speedup"].notna()]
            rows.append({"notebook": notebook, "measure": what, "device": device, "over": baseline or "no CPU run",
                         "configurations": len(matched),
                         "speedup": matched["speedup"].median() if len(matched) else float("nan"),
                         "min": matched["speedup"].min() if len(matched) else float("nan"),
                         "max": matched["speedup"].max() if len(matched) else float("nan")})
    columns = ["notebook", "measure", "device", "over", "configurations", "speedup", "min", "max"]
    return pd.DataFrame(rows, columns=columns)


def speedup_figure(table: pd.DataFrame, data: ReportData) -> ReportFigure | None:
    """Bars: each device's median speedup over the CPU per notebook, min-max over configurations."""
    rows = table[table["configurations"] > 0].assign(title=lambda t: t["notebook"].map(title_of))
    if not len(rows):
        return None
    figure, (ax,) = new_figure(width=7.5, height=4.0)
    grouped_bars(ax, rows, "title", "speedup", series="device", low="min", high="max",
                 colors=label_colors(rows["device"]), order=[experiment.title for experiment in all_experiments()])
    ax.axhline(1.0, color="black", linewidth=1, linestyle=":")
    log_scale_if_wide(ax, [*rows["min"], *rows["max"], 1.0], ratio=10)
    ax.set_ylabel("speedup over the CPU (x)")
    ax.set_title("Speedup over the CPU, per notebook")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    ok = data.ok()
    note = figure_warning(ok[ok["notebook"].isin(set(rows["notebook"]))])
    if note:
        mark_substitute_data(figure, note)
    return ReportFigure("summary_speedup_by_notebook", figure, rows.drop(columns="title"),
                        "Median over the configurations that ran on both the device and the CPU (same parameters at "
                        "the same global batch); bars from the smallest to the largest speedup: the device's value "
                        "over the CPU's where higher is better (throughput), the CPU's over the device's where lower "
                        "is (time), or the throughput ratio (samples/s) where the two runs' work per epoch differed.")


def _times(value: float) -> str:
    return f"{format_number(value, 3)}x"


def _device_sentence(device: str, rows: pd.DataFrame) -> str:
    """What the speedup table says about one device, notebook by notebook."""
    compared, missing = rows[rows["configurations"] > 0], rows[rows["configurations"] == 0]
    parts = []
    for row in compared.itertuples():
        spread = ("one configuration" if row.configurations == 1 else
                  f"{row.configurations} configurations, {_times(row.min)} in each" if row.min == row.max else
                  f"median of {row.configurations} configurations, {_times(row.min)} to {_times(row.max)}")
        parts.append(f"{_times(row.speedup)} on {title_of(row.notebook)} ({row.measure}; {spread})")
    text = ""
    if parts:
        # A verdict only where every matched configuration agrees; anything else is called mixed.
        faster = (compared["min"] > 1).all()
        slower = (compared["max"] < 1).all()
        over = compared["over"].iloc[0]
        verdict = (f"faster than {over}" if faster else f"slower than {over}" if slower else
                   f"faster than {over} in some configurations and not in others")
        text = f"{device} was {verdict}, comparing runs with the same parameters: {'; '.join(parts)}."
    for row in missing.itertuples():
        reason = ("no CPU run exists" if row.over == "no CPU run" else "the CPU never ran the same parameters")
        text += f" {device} also ran {title_of(row.notebook)}, but {reason}, so no speedup is given there."
    return text.strip()


def reading(data: ReportData, table: pd.DataFrame) -> str:
    """One paragraph in plain language, every clause backed by a number in the report."""
    used, ok = data.used(), data.ok()
    counts = used["status"].value_counts()
    if not len(used):
        where = ", ".join(data.dirs) or "the folders given"
        return (f"No result records were found in {where}, so this report has no measurements to describe. "
                "Run a sweep (`python -m colabkit sweep ...`) or point the report at the folders holding its records.")
    sentences = [
        f"This report draws on {len(used)} run(s) of {used['notebook'].nunique()} notebook(s) "
        f"({counts.get('ok', 0)} ok, {counts.get('failed', 0)} failed, {counts.get('skipped', 0)} skipped) from "
        f"{len(data.dirs)} results folder(s)."]
    labels = sort_labels(ok["device_label"])
    if labels:
        sentences.append(f"Successful runs used: {', '.join(labels)}.")
    accelerators = [label for label in labels if label_kind(label) != "cpu"]
    if not accelerators:
        sentences.append("Every successful run used a CPU, so no accelerator comparison is possible from these "
                         "records; GPU and TPU figures need runs on a GPU or TPU runtime"
                         + (" (see the skipped runs)." if counts.get("skipped", 0) else "."))
    if "device.logical_devices" in ok and ok["device.logical_devices"].notna().any():
        sentences.append("The multi-replica CPU runs split one CPU into logical devices that share its cores: they "
                         "exercise the multi-device code path, not extra hardware.")
    if (table["configurations"] > 0).any():
        sentences.append("Speedups compare runs with the same parameters: the CPU's time over the device's for a "
                         "time, the device's throughput over the CPU's for a throughput.")
    for device, rows in table.groupby("device", sort=False):
        sentences.append(_device_sentence(device, rows))
    if counts.get("failed", 0):
        sentences.append(f"{counts['failed']} run(s) failed; they are listed in their sections and in no figure.")
    if counts.get("skipped", 0):
        sentences.append(f"{counts['skipped']} combination(s) were skipped because their device was not available "
                         "where the sweep ran.")
    substitutes = ok[ok["data_used"].isin(["OFFLINE", "SYNTHETIC"])]
    if len(substitutes):
        sentences.append(f"{len(substitutes)} successful run(s) used offline or synthetic stand-ins for their dataset: "
                         "their accuracies and losses do not describe the real data.")
    if data.rejected:
        sentences.append(f"{len(data.rejected)} file(s) could not be read as records and are listed above.")
    return " ".join(sentences)


def summary_section(data: ReportData) -> Section:
    """Speedups over the CPU per notebook, and the plain-language reading."""
    section = Section("summary", "Summary")
    table = speedup_table(data)
    section.text = [reading(data, table)]
    figure = speedup_figure(table, data)
    if len(table):
        printed = table.assign(notebook=table["notebook"].map(title_of))
        section.items.append(ReportTable("summary_speedup", printed,
                                         "Speedup over the CPU per notebook (median over matched configurations)."))
    if figure is not None:
        section.items.append(figure)
    return section
