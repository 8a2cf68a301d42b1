"""The Summary: what the report draws on, each device's speedup over the CPU in a sentence (only what the verdicts
support) and one short table of them; every configuration's speedup in the appendix."""

from __future__ import annotations

from typing import Any

import pandas as pd

from colabkit.experiments import all_experiments
from colabkit.experiments.declaration import INFERENCE, TRAIN
from colabkit.experiments.inference import INFERENCE_HEADLINE
from colabkit.report.common import (baseline_pair_key, column, cpu_baseline, samples_column, speedups, title_of,
                                    work_differs)
from colabkit.report.figures import levels
from colabkit.report.records import ReportData, label_kind, sort_labels
from colabkit.report.section import ReportTable, Section
from colabkit.report.writers import format_number
from colabkit.statistics import Interval, Verdict, verdict_word

VERDICT_COUNTS = {"faster": Verdict.FASTER, "slower": Verdict.SLOWER, "no_difference": Verdict.NO_DIFFERENCE,
                  "too_few_runs": Verdict.TOO_FEW_RUNS}
VERDICT_WORDS = {"faster": "faster", "slower": "slower", "no_difference": "no difference resolved",
                 "too_few_runs": "too few runs"}
COLUMNS = ["notebook", "mode", "measure", "device", "over", "combination", "runs", "speedup", "speedup_low",
           "speedup_high", "speedup_verdict"]


def configuration_speedups(data: ReportData, notebook: str | None = None, inference: bool | None = None) -> pd.DataFrame:
    """Per experiment (`notebook`'s), mode (`inference`: None for both), configuration and device but the CPU: the
    speedup over the CPU's run of that work (common.baseline_pair_key), by throughput where the work differed."""
    frames = []  # per mode an experiment's runs come in: training on its headline, inference on the p90 latency
    for experiment, headline, in_inference in ((e, h, i) for e in all_experiments()
                                               for h, i in ((e.headline, False), (INFERENCE_HEADLINE, True))):
        if notebook not in (None, experiment.name) or inference not in (None, in_inference) or (
                in_inference and "mode" not in experiment.parameter_names):
            continue
        ok, name = data.ok(experiment.name, in_inference), f"metrics.{headline.metric}"
        if name not in ok or not ok[name].notna().any():
            continue
        ok = ok[ok[name].notna()]
        table = pd.DataFrame({"device": ok["device_label"], "samples": samples_column(ok, headline.metric),
                              "runs": column(ok, "runs"), "throughput_samples": samples_column(ok, "samples_per_s"),
                              "combination": ok["combination"],
                              **{name: column(ok, f"metrics.{name}") for name in ("samples_per_epoch", "epochs_run")}})
        baseline = cpu_baseline(table["device"])
        table["config"] = baseline_pair_key(ok, baseline)
        table = pd.concat([table, speedups(table, "samples", headline.higher_is_better, baseline)],
                          axis=1).assign(measure=headline.label)
        base = table[table["device"] == baseline].drop_duplicates("config").set_index("config")
        differs = table.apply(lambda row: row["config"] in base.index and work_differs(row, base.loc[row["config"]]),
                              axis=1)
        if differs.any():  # the rows that did other work than their baseline run: compared by throughput
            by_throughput = speedups(table, "throughput_samples", True, baseline)
            table.loc[differs, by_throughput.columns] = by_throughput.loc[differs]
            table.loc[differs, "measure"] = f"{headline.label} (samples/s: the work per epoch differed)"
        frames.append(table[table["device"] != baseline].assign(notebook=experiment.name, over=baseline,
                                                                 mode=INFERENCE if in_inference else TRAIN)[COLUMNS])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)


def speedup_table(data: ReportData, configurations: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per notebook, mode and device but the CPU: its speedups' median, range and count, and each verdict's count."""
    configurations = configuration_speedups(data) if configurations is None else configurations
    rows = []
    for (notebook, mode, device), group in configurations.groupby(["notebook", "mode", "device"], sort=False):
        matched = group[group["speedup"].notna()]
        verdicts = matched["speedup_verdict"].map(verdict_word).value_counts()
        rows.append({"notebook": notebook, "mode": mode, "device": device,
                     "measure": matched["measure"].iloc[-1] if len(matched) else group["measure"].iloc[-1],
                     "over": group["over"].dropna().iloc[0] if group["over"].notna().any() else "no CPU run",
                     "configurations": len(matched),
                     **{name: getattr(matched["speedup"], how)() for name, how in
                        (("speedup", "median"), ("min", "min"), ("max", "max"))},
                     **{key: int(verdicts.get(value.value, 0)) for key, value in VERDICT_COUNTS.items()},
                     "levels": levels(matched["speedup_verdict"])})
    return pd.DataFrame(rows, columns=["notebook", "mode", "device", "measure", "over", "configurations", "speedup",
                                       "min", "max", *VERDICT_COUNTS, "levels"])


def _times(value: float) -> str:
    return f"{format_number(value, 3)}x"


def _verdicts(row: Any) -> str:
    """'faster in 3, no difference resolved in 1': the verdicts of a row of speedup_table."""
    return ", ".join(f"{word} in {row[key]}" for key, word in VERDICT_WORDS.items() if row[key])


def _device_sentence(device: str, rows: pd.DataFrame) -> str:
    """What the speedup table says of one device: faster (slower) only where every configuration was resolved so."""
    compared = rows[rows["configurations"] > 0]
    if not len(compared):
        return f"{device} never ran the parameters a CPU ran: no speedup."
    over, total = compared["over"].iloc[0], int(compared["configurations"].sum())
    faster, slower, few = (int(compared[name].sum()) for name in ("faster", "slower", "too_few_runs"))
    spread = _times(compared["min"].min()) + ("" if compared["min"].min() == compared["max"].max()
                                               else f" to {_times(compared['max'].max())}")
    if few == total:
        return f"{device} was not resolved against {over}: too few runs in all {total} configurations (measured {spread})."
    verdict = (f"faster than {over}" if faster == total else f"slower than {over}" if slower == total else
               f"faster than {over} in some configurations and not in others" if faster else
               f"slower than {over} in some configurations and not in others" if slower else
               f"not resolved as faster or slower than {over}")
    counts = _verdicts(pd.Series({name: compared[name].sum() for name in VERDICT_COUNTS}))
    return (f"{device} was {verdict} ({counts} of {total} configurations at "
            f"{'; '.join(dict.fromkeys(compared['levels']))}; measured {spread}).")


def reading(data: ReportData, table: pd.DataFrame) -> str:
    """One paragraph in plain language, every clause backed by a number in the report."""
    used, ok = data.used(), data.ok()
    counts = used["status"].value_counts()
    if not len(used):
        where = ", ".join(data.folder_names) or "the folders given"
        return (f"No result records were found in {where}: nothing to report. Run a sweep (`python -m colabkit "
                "sweep ...`) or point the report at the folders holding its records.")
    devices = sort_labels(used.loc[used["status"] == "ok", "device_label"])
    sentences = [f"This report draws on {len(used)} run(s) of {used['notebook'].nunique()} notebook(s) "
                 f"({counts.get('ok', 0)} ok, {counts.get('failed', 0)} failed, {counts.get('skipped', 0)} skipped)"
                 + (f" on {', '.join(devices)}." if devices else ".")]
    if devices and not any(label_kind(label) != "cpu" for label in devices):
        sentences.append("Every successful run used a CPU, so no accelerator comparison is possible.")
    if "device.logical_devices" in ok and ok["device.logical_devices"].notna().any():
        sentences.append("Its multi-replica CPU runs share one CPU's cores: they exercise the multi-device code, not "
                         "extra hardware.")
    sentences += [_device_sentence(device, rows) for device, rows in table.groupby("device", sort=False)]
    if counts.get("failed", 0):
        sentences.append(f"{counts['failed']} run(s) failed: listed in their sections' appendix.")
    if counts.get("skipped", 0):
        sentences.append(f"{counts['skipped']} combination(s) were skipped: their device was not where the sweep ran.")
    substitutes = ok[ok["data_used"].isin(["OFFLINE", "SYNTHETIC"])]
    if len(substitutes):
        sentences.append(f"{len(substitutes)} combination(s) trained on stand-in data (warned in their sections).")
    if data.rejected:
        sentences.append(f"{len(data.rejected)} file(s) were set aside, with why (appendix: Records).")
    return " ".join(sentences)


def short_of_target(data: ReportData) -> pd.DataFrame:
    """The combinations a sweep ran for `--target-ci` whose headline interval is still wider than that target."""
    rows, frame, columns = [], data.frame, ["notebook", "combination", "device", "runs", "half-width", "target"]
    if "sweep.target_ci" not in frame or "headline.ci_low" not in frame:
        return pd.DataFrame(columns=columns)
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
    return pd.DataFrame(rows, columns=columns)


def busy_line(data: ReportData) -> str | None:
    """One sentence on the ok runs made on a busy host (`host_quiet` false), if any: how many, whether they count."""
    busy, ok = data.busy(), data.frame[data.frame["status"] == "ok"] if len(data.frame) else data.frame
    if not len(busy):
        return None
    counted = int(busy["used"].sum())
    listed = "listed in the appendix (Records)"
    if counted:
        count = "they count" if counted == len(busy) else f"{counted} of them count"
        return (f"{len(busy)} of the {len(ok)} ok run(s) were made on a busy host: {count} in the figures and "
                f"intervals (--exclude-busy leaves them out), {listed}.")
    if every_ok_run_busy(data):
        return (f"All {len(busy)} ok run(s) were made on a busy host and are left out (--exclude-busy, the report "
                "notebook's exclude_busy_runs), so nothing is left to draw: build the report without it, or rerun the "
                f"sweep with --wait-quiet; {listed}.")
    return (f"{len(busy)} of the {len(ok)} ok run(s) were made on a busy host and are left out of the figures and "
            f"intervals (--exclude-busy), {listed}.")


def every_ok_run_busy(data: ReportData) -> int:
    """How many ok runs `data` holds where `exclude_busy` leaves out every one of them (0 where some count)."""
    ok = data.frame[data.frame["status"] == "ok"] if len(data.frame) else data.frame
    return len(ok) if data.exclude_busy and len(ok) and not ok["used"].any() else 0


def summary_table(table: pd.DataFrame) -> pd.DataFrame:
    """speedup_table's rows with a comparison, as the body prints them (7 columns)."""
    rows = table[table["configurations"] > 0]
    return pd.DataFrame({
        "experiment": [title_of(notebook) + (" (inference)" if mode == INFERENCE else "")
                       for notebook, mode in zip(rows["notebook"], rows["mode"])],
        "device": rows["device"], "configurations": rows["configurations"], "median speedup": rows["speedup"],
        "range": [_times(low) if low == high else f"{_times(low)}-{_times(high)}"
                  for low, high in zip(rows["min"], rows["max"])],
        "verdicts": [_verdicts(row) for _, row in rows.iterrows()], "levels": rows["levels"]})


def summary_section(data: ReportData) -> Section:
    """The reading, the busy-host line and the speedups' table; their detail in the appendix."""
    section, configurations = Section("summary", "Summary"), configuration_speedups(data)
    table = speedup_table(data, configurations)
    section.text = [reading(data, table)]
    busy = busy_line(data)
    if busy and every_ok_run_busy(data):  # no result to open on: the reader must see why before anything else
        section.warnings.append(busy)
    elif busy:
        section.text.append(busy)
    if (table["configurations"] > 0).any():
        over = "; ".join(dict.fromkeys(table.loc[table["configurations"] > 0, "over"]))
        section.items.append(ReportTable("summary", summary_table(table), f"Speedup over {over} per experiment: the "
                                         "median over the configurations both ran, their range and verdicts.",
                                         body=True))
    if len(configurations):
        section.items.append(ReportTable(
            "summary_speedup_per_configuration", configurations.assign(notebook=configurations["notebook"].map(title_of)),
            "Each configuration's speedup over the CPU: the ratio of the medians over runs, its interval (none below 3 "
            "runs a side) and the verdict, with the level that interval reaches and its runs."))
    missed = short_of_target(data)
    if len(missed):
        section.text.append(f"{len(missed)} combination(s) did not reach the interval their sweep aimed for "
                            "(--target-ci): listed in the appendix.")
        section.items.append(ReportTable("short_of_target_ci", missed, "Combinations whose headline's interval "
                                         "is still wider than the --target-ci their sweep asked for (half-width "
                                         "relative to the median)."))
    return section
