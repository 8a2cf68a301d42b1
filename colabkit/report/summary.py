"""The summary: each device's speedup over the CPU per notebook, and a plain-language reading of it
that claims only what the numbers support."""

from __future__ import annotations

from typing import Any

import pandas as pd

from colabkit.experiments import all_experiments
from colabkit.experiments.inference import INFERENCE_HEADLINE
from colabkit.report.common import (
    baseline_pair_key,
    column,
    cpu_baseline,
    levels,
    ratio_bars_by_experiment,
    samples_column,
    speedups,
    title_of,
    work_differs,
)
from colabkit.report.figures import log_scale_if_wide
from colabkit.report.records import ReportData, label_kind, sort_labels
from colabkit.report.section import ReportFigure, ReportTable, Section
from colabkit.report.writers import format_number
from colabkit.statistics import TOLERANCE, Interval, Verdict, verdict_word

THROUGHPUT = "samples_per_s"
VERDICT_COUNTS = {"faster": Verdict.FASTER, "slower": Verdict.SLOWER, "no_difference": Verdict.NO_DIFFERENCE,
                  "too_few_runs": Verdict.TOO_FEW_RUNS}


def _throughput_where_work_differs(table: pd.DataFrame, baseline: str | None) -> pd.Series:
    """Which rows did other work than their baseline run (samples per epoch, epochs): their speedup
    is recomputed from throughput, which stays comparable when the work per epoch differs."""
    if baseline is None or not len(table):
        return pd.Series(False, index=table.index)
    base = table[table["device"] == baseline].drop_duplicates("config").set_index("config")
    return table.apply(lambda row: row["config"] in base.index and work_differs(row, base.loc[row["config"]]), axis=1)


def _modes(experiment: Any) -> list[tuple[Any, bool]]:
    """(headline, inference) per mode the experiment's runs come in: its own headline for training runs and,
    where it declares `mode`, the single-stream p90 latency for inference runs (docs/inference.md)."""
    inference = [(INFERENCE_HEADLINE, True)] if "mode" in experiment.parameter_names else []
    return [(experiment.headline, False), *inference]


def configuration_speedups(data: ReportData) -> pd.DataFrame:
    """Per experiment, configuration and device other than the CPU baseline: the speedup over the CPU on
    the experiment's declared headline, from the runs of both (the ratio of their medians, its
    interval and the verdict with that interval's level and runs). Runs match by their parameters at the same GLOBAL
    batch, on the same backend where the CPU ran it, else against the CPU's TensorFlow run (the grids
    run a TPU on JAX, a CPU on TensorFlow: common.baseline_pair_key); a training run that did other
    work than its baseline (another number of samples per epoch or of epochs) is compared by
    throughput instead, and `measure` says so."""
    frames = []
    for experiment, (headline, inference) in ((e, mode) for e in all_experiments() for mode in _modes(e)):
        notebook, what = experiment.name, headline.label
        metric, higher = headline.metric, headline.higher_is_better
        ok = data.ok(notebook, inference)
        name = f"metrics.{metric}"
        if name not in ok or not ok[name].notna().any():
            continue
        ok = ok[ok[name].notna()]
        table = pd.DataFrame({"device": ok["device_label"], "value": ok[name].astype(float),
                              "samples": samples_column(ok, metric), "runs": column(ok, "runs"),
                              THROUGHPUT: column(ok, f"metrics.{THROUGHPUT}").astype(float),
                              "throughput_samples": samples_column(ok, THROUGHPUT),
                              "samples_per_epoch": column(ok, "metrics.samples_per_epoch"),
                              "epochs_run": column(ok, "metrics.epochs_run"), "combination": ok["combination"]})
        baseline = cpu_baseline(table["device"])
        table["config"] = baseline_pair_key(ok, baseline)
        table = pd.concat([table, speedups(table, "value", higher, baseline, samples="samples")], axis=1)
        table["measure"] = what
        differs = _throughput_where_work_differs(table, baseline)
        if differs.any():
            by_throughput = speedups(table, THROUGHPUT, True, baseline, samples="throughput_samples")
            table.loc[differs, by_throughput.columns] = by_throughput.loc[differs]
            table.loc[differs, "measure"] = f"{what} (samples/s: the work per epoch differed)"
        table = table[(table["device"] != baseline) & table["speedup"].notna()]
        frames.append(table.assign(notebook=notebook, mode="inference" if inference else "train", over=baseline)[
            ["notebook", "mode", "measure", "device", "over", "combination", "runs", "speedup", "speedup_low",
             "speedup_high", "speedup_verdict"]])
    columns = ["notebook", "mode", "measure", "device", "over", "combination", "runs", "speedup", "speedup_low",
               "speedup_high", "speedup_verdict"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def speedup_table(data: ReportData) -> pd.DataFrame:
    """Per notebook and device: the speedup over the CPU baseline on the experiment's declared headline,
    over the configurations both ran (median, min, max, how many), and how many configurations each
    verdict was given (faster, slower, no difference resolved, too few runs): configuration_speedups."""
    rows = []
    per_configuration = configuration_speedups(data)
    for experiment, (headline, inference) in ((e, mode) for e in all_experiments() for mode in _modes(e)):
        notebook, mode = experiment.name, "inference" if inference else "train"
        ok = data.ok(notebook, inference)
        name = f"metrics.{headline.metric}"
        if name not in ok or not ok[name].notna().any():
            continue
        labels = sort_labels(ok.loc[ok[name].notna(), "device_label"])
        baseline = cpu_baseline(labels)
        mine = per_configuration[(per_configuration["notebook"] == notebook) & (per_configuration["mode"] == mode)]
        for device in labels:
            if device == baseline:
                continue
            matched = mine[mine["device"] == device]
            measure = matched["measure"].iloc[-1] if len(matched) else headline.label
            if len(matched) and (matched["measure"] != headline.label).any():
                measure = f"{headline.label} (samples/s where the work per epoch differed)"
            verdicts = matched["speedup_verdict"].map(verdict_word).value_counts()
            rows.append({"notebook": notebook, "mode": mode, "measure": measure, "device": device,
                         "over": baseline or "no CPU run",
                         "configurations": len(matched),
                         "speedup": matched["speedup"].median() if len(matched) else float("nan"),
                         "min": matched["speedup"].min() if len(matched) else float("nan"),
                         "max": matched["speedup"].max() if len(matched) else float("nan"),
                         **{key: int(verdicts.get(value.value, 0)) for key, value in VERDICT_COUNTS.items()},
                         "levels": levels(matched["speedup_verdict"])})
    columns = ["notebook", "mode", "measure", "device", "over", "configurations", "speedup", "min", "max",
               *VERDICT_COUNTS, "levels"]
    return pd.DataFrame(rows, columns=columns)


def speedup_figure(table: pd.DataFrame, data: ReportData) -> ReportFigure | None:
    """Bars: each device's median speedup over the CPU per notebook, min-max over configurations (training runs:
    an inference row's speedup is in the tables)."""
    rows = table[(table["configurations"] > 0) & (table["mode"] == "train")]
    if not len(rows):
        return None
    figure, ax = ratio_bars_by_experiment(rows, "speedup", "min", "max", ylabel="speedup over the CPU (x)",
                                          title="Speedup over the CPU, per notebook", data=data)
    log_scale_if_wide(ax, [*rows["min"], *rows["max"], 1.0], ratio=10)
    return ReportFigure("summary_speedup_by_notebook", figure, rows,
                        "Median over the configurations that ran on both the device and the CPU (same parameters at "
                        "the same global batch); bars here are NOT confidence intervals: they run from the smallest "
                        "to the largest speedup over those configurations (each configuration's own interval "
                        "and verdict, with its level, are in the table summary_speedup_per_configuration): the device's value "
                        "over the CPU's where higher is better (throughput), the CPU's over the device's where lower "
                        "is (time), or the throughput ratio (samples/s) where the two runs' work per epoch differed.")


def _times(value: float) -> str:
    return f"{format_number(value, 3)}x"


def _verdicts(row: Any) -> str:
    """'faster in 3 of 4 configurations, no difference resolved in 1': the verdicts of a notebook's rows."""
    words = [(row.faster, "faster"), (row.slower, "slower"), (row.no_difference, "no difference resolved"),
             (row.too_few_runs, "too few runs for a verdict")]
    return ", ".join(f"{word} in {count}" for count, word in words if count)


def _device_sentence(device: str, rows: pd.DataFrame) -> str:
    """What the speedup table says about one device, notebook by notebook, by the verdicts: a device is
    called faster (slower) only where every configuration was resolved faster (slower), at the level stated."""
    compared, missing = rows[rows["configurations"] > 0], rows[rows["configurations"] == 0]
    parts = []
    for row in compared.itertuples():
        spread = (f"{_times(row.min)}" if row.min == row.max else f"{_times(row.min)} to {_times(row.max)}")
        parts.append(f"{title_of(row.notebook)} ({row.measure}): {_verdicts(row)} of {row.configurations} "
                     f"configuration(s), measured {spread}")
    text = ""
    if parts:
        over = compared["over"].iloc[0]
        total = compared["configurations"].sum()
        faster, slower = compared["faster"].sum(), compared["slower"].sum()
        few = compared["too_few_runs"].sum()
        verdict_text = (f"faster than {over}" if faster == total else f"slower than {over}" if slower == total else
                        f"not resolved against {over}: too few runs (fewer than 3 on a side) for a verdict"
                        if few == total else
                        f"faster than {over} in some configurations and not in others" if faster else
                        f"slower than {over} in some configurations and not in others" if slower else
                        f"not resolved as faster or slower than {over}")
        text = (f"{device} was {verdict_text}, comparing runs with the same parameters (intervals over "
                f"runs at {'; '.join(dict.fromkeys(compared['levels']))}): {'; '.join(parts)}.")
    for row in missing.itertuples():
        reason = ("no CPU run exists" if row.over == "no CPU run" else "the CPU never ran the same parameters")
        text += f" {device} also ran {title_of(row.notebook)}, but {reason}, so no speedup is given there."
    return text.strip()


def reading(data: ReportData, table: pd.DataFrame) -> str:
    """One paragraph in plain language, every clause backed by a number in the report."""
    used, ok = data.used(), data.ok()
    counts = used["status"].value_counts()
    if not len(used):
        where = ", ".join(data.folder_names) or "the folders given"
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
                         "time, the device's throughput over the CPU's for a throughput; each is the ratio of the "
                         "medians over runs, called faster or slower only where its interval lies beyond "
                         f"+/- {100 * TOLERANCE:g} % (docs/statistics.md), else no difference resolved, or too few "
                         "runs for a verdict below 3 runs a side. Each verdict states the level its interval reaches "
                         "and the runs behind it (with 3 runs on either side a ratio's interval reaches 75 %, as a "
                         "median's does, not 95 %; its level does not assume that the two sides scatter alike).")
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


def short_of_target(data: ReportData) -> pd.DataFrame:
    """The combinations whose runs a sweep made for `--target-ci` (their records say the target) and
    whose headline interval is still wider than that target: runs, interval half-width, target."""
    rows = []
    frame = data.frame
    if "sweep.target_ci" not in frame or "headline.ci_low" not in frame:
        return pd.DataFrame(columns=["notebook", "combination", "device", "runs", "half-width", "target"])
    counted = frame[frame["used"] & (frame["status"] == "ok") & frame["sweep.target_ci"].notna()]
    for _, runs in counted.groupby("combination_id", sort=False):
        first = runs.iloc[0]
        low, high, median = (None if pd.isna(first[f"headline.{name}"]) else float(first[f"headline.{name}"])
                             for name in ("ci_low", "ci_high", "median"))
        width = Interval(median, low, high, int(first["headline.n"])).half_width
        target = float(runs["sweep.target_ci"].max())
        if width is None or width > target:
            rows.append({"notebook": title_of(first["notebook"]), "combination": first["combination"],
                         "device": first["device_label"], "runs": int(first["headline.n"]),
                         "half-width": width, "target": target})
    return pd.DataFrame(rows, columns=["notebook", "combination", "device", "runs", "half-width", "target"])


def busy_line(data: ReportData) -> str | None:
    """One sentence on the ok runs made on a busy host (`host_quiet` false): how many, whether they count in
    the figures and intervals, and where they are listed (the appendix: Records, runs_on_a_busy_host). None
    where there is none."""
    busy, ok = data.busy(), data.frame[data.frame["status"] == "ok"] if len(data.frame) else data.frame
    if not len(busy):
        return None
    counted = int(busy["used"].sum())
    where = "the appendix (Records: runs_on_a_busy_host) lists them, with why"
    if counted:
        count = "they count" if counted == len(busy) else f"{counted} of them count"
        return (f"{len(busy)} of the {len(ok)} ok run(s) were made on a busy host (host_quiet false: other processes "
                f"or a throttled clock took part of the machine); {count} in the figures and intervals (colabkit "
                f"report --exclude-busy leaves them out); {where}.")
    if not left_to_draw(data):
        return (f"All {len(busy)} ok run(s) were made on a busy host and are left out (--exclude-busy, the report "
                "notebook's exclude_busy_runs), so nothing is left to draw: build the report without it (or rerun "
                f"the sweep with --wait-quiet); {where}.")
    return (f"{len(busy)} of the {len(ok)} ok run(s) were made on a busy host (host_quiet false) and are left out of "
            f"the figures and intervals (--exclude-busy, the report notebook's exclude_busy_runs); {where}.")


def left_to_draw(data: ReportData) -> bool:
    """Whether any ok run counts, in any mode (training, inference, decode)."""
    return bool(len(data.runs()) or len(data.runs(inference=True)) or len(data.runs(mode="decode")))


def summary_section(data: ReportData) -> Section:
    """Speedups over the CPU per notebook (and per configuration, with intervals and verdicts), the
    plain-language reading, one line on the runs made on a busy host (their table is in the appendix:
    colabkit.report.provenance.busy_runs_table) and the combinations short of a --target-ci."""
    section = Section("summary", "Summary")
    table = speedup_table(data)
    section.text = [reading(data, table)]
    figure = speedup_figure(table, data)
    if len(table):
        printed = table.assign(notebook=table["notebook"].map(title_of))
        section.items.append(ReportTable("summary_speedup", printed,
                                         "Speedup over the CPU per notebook: median over matched configurations, "
                                         "their range, and how many configurations got each verdict."))
        configurations = configuration_speedups(data)
        if len(configurations):
            section.items.append(ReportTable(
                "summary_speedup_per_configuration", configurations.assign(notebook=configurations["notebook"]
                                                                           .map(title_of)),
                "Each configuration's speedup over the CPU: the ratio of the medians over runs, its interval "
                "(none below 3 runs a side) and the verdict, with the level that interval reaches and the runs behind it."))
    if figure is not None:
        section.items.append(figure)
    busy = busy_line(data)
    if busy and not left_to_draw(data):  # no result to open on: the reader must see why before anything else
        section.warnings.append(busy)
    elif busy:
        section.text.append(busy)
    missed = short_of_target(data)
    if len(missed):
        section.text.append(f"{len(missed)} combination(s) did not reach the interval their sweep aimed for "
                            "(--target-ci) within its --max-repeats: listed below.")
        section.items.append(ReportTable("short_of_target_ci", missed, "Combinations whose headline's interval "
                                         "is still wider than the --target-ci their sweep asked for (half-width "
                                         "relative to the median)."))
    return section
