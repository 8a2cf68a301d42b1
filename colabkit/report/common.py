"""What every section does with its records: pick columns, name series, pair runs by their work and compare them
(ratios of medians over runs with their intervals and verdicts), warn of stand-in data, list the runs not drawn."""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from colabkit.experiments import find
from colabkit.records import identity
from colabkit.statistics import VerdictWords, finite, ratio_ci, speedup_ci, verdict, verdict_text
from colabkit.report.figures import mark_substitute_data
from colabkit.report.records import ReportData, in_report_order, label_kind, labelled, sort_labels
from colabkit.report.runs import interval_fields
from colabkit.report.section import ReportTable, Section
from colabkit.report.writers import format_number

SUBSTITUTES = ("OFFLINE", "SYNTHETIC")


def title_of(notebook: str) -> str:
    """The experiment's declared title (colabkit.experiments), or the notebook's name without one."""
    experiment = find(notebook)
    return experiment.title if experiment else notebook


def column(frame: pd.DataFrame, name: str, default: Any = np.nan) -> pd.Series:
    """frame[name], or a column of `default` when the records never had that field."""
    if name in frame:
        return frame[name]
    return pd.Series(default, index=frame.index, dtype=object if default is None else None)


def metrics(frame: pd.DataFrame, *names: str, **renamed: str) -> dict[str, pd.Series]:
    """Record metrics as columns: each of `names` from `metrics.<name>`, each `column=metric` of `renamed`."""
    return {name: column(frame, f"metrics.{metric}") for name, metric in {**dict(zip(names, names)), **renamed}.items()}


def device_head(label: str) -> str:
    """'GPU x4' of 'GPU x4: Tesla T4': how a panel title or a bar names a device (other text as it is)."""
    device = labelled(label)
    return device.head if device else str(label)


def distinct(values: pd.Series) -> list[str]:
    """The distinct values, printed as a table prints them ('8', not '8.0')."""
    return [text for text in dict.fromkeys(values.dropna().map(format_number)) if text]


def has(frame: pd.DataFrame, name: str) -> bool:
    """Whether the frame has a column `name` with at least one value."""
    return name in frame and bool(frame[name].notna().any())


def _key(value: Any) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "null"
    return json.dumps(value, sort_keys=True, default=str)


def series_labels(frame: pd.DataFrame, keys: list[str], exclude: tuple[str, ...] = ()) -> pd.Series:
    """Each record's series: its device label and the parameters that vary among the records but the axes `keys`
    and `exclude`, so that two configurations on one device are two series, never one zigzag line."""
    if not len(frame):
        return pd.Series(dtype=str)
    skip = {"device", *identity.NOT_WORK, *exclude, *(k[7:] for k in keys if k.startswith("params."))}
    params = [c for c in frame.columns if c.startswith("params.") and c[7:] not in skip]
    varying = [c for c in params if frame[c].map(_key).nunique() > 1]

    def value(cell: Any) -> Any:  # 16.0 as 16: a float column of whole numbers prints them as integers
        return format_number(cell) if isinstance(cell, float) else cell

    labels = frame.apply(lambda row: row["device_label"] + "".join(
        f", {c[7:]}={value(row[c])}" for c in varying if not (isinstance(row[c], float) and math.isnan(row[c]))), axis=1)
    positions = pd.DataFrame({"label": labels, **{k: frame[k].map(_key) for k in keys if k in frame}})
    duplicated = positions.duplicated(keep=False)
    if duplicated.any() and "params.device" in frame:  # same device reached as 'auto' and by name
        labels = labels.where(~duplicated, labels + " (asked: " + frame["params.device"].astype(str) + ")")
    return labels


def experiment_frame(ok: pd.DataFrame, axes: list[str], order: list[str], columns: dict[str, Any],
                     intervals: dict[str, str], exclude: tuple[str, ...] = ()) -> pd.DataFrame:
    """An experiment's table, one row per combination of `ok`: device, series (over `axes`), `columns`, the interval
    over runs of each metric of `intervals` (`<prefix>_low`, `_high`, `_runs`, `_level`), runs, data, config, path."""
    table = pd.DataFrame({"device": ok["device_label"], "series": series_labels(ok, axes, exclude), **columns,
                          "runs": column(ok, "runs"), "data": ok["data_used"], "config": work_key(ok, ("device",)),
                          "path": ok["path"]})
    spans = [pd.DataFrame([interval_fields(values, prefix) for values in samples_column(ok, metric)], index=ok.index,
                          columns=[f"{prefix}_{end}" for end in ("low", "high", "runs", "level")])
             for metric, prefix in intervals.items()]  # the medians: among `columns`
    return in_report_order(pd.concat([table, *spans], axis=1), order)


# How the appendix's tables print the columns the experiments share (pick; a pair in its spec names one otherwise).
PRINTED = {"batch": "global batch", "busy_runs": "busy runs", "samples_per_epoch": "samples/epoch",
           "epochs_run": "epochs", "epoch_first_s": "first epoch (s)", "steady_s": "steady part (s)",
           "epoch_steady_s": "steady epoch (s)", "epoch_steady_std_s": "std over epochs (s)", "step_ms": "step (ms)",
           "samples_per_s": "samples/s", "between_run_cv": "between-run CV", "within_run_cv": "within-run CV",
           "test_accuracy": "test accuracy", "model_params": "parameters", "test_loss": "test loss"}


def interval_spec(prefix: str, unit: str = "s") -> list[tuple[str, str]]:
    """pick's spec of an interval of experiment_frame: 'low (s)', 'high (s)', 'level'."""
    return [(f"{prefix}_low", f"low ({unit})"), (f"{prefix}_high", f"high ({unit})"), (f"{prefix}_level", "level")]


def pick(frame: pd.DataFrame, spec: list[str | tuple[str, str]]) -> pd.DataFrame:
    """The columns of `spec` (a name PRINTED prints, or a (name, printed) pair) that hold a value, led by `series`."""
    pairs = [(item, PRINTED.get(item, item)) if isinstance(item, str) else item for item in spec]
    present = [(name, label) for name, label in pairs if has(frame, name)]
    printed = frame[[name for name, _ in present]].rename(columns=dict(present)).reset_index(drop=True)
    if {"series", "device"} <= set(frame.columns) and (frame["series"] != frame["device"]).any():
        printed.insert(0, "series", frame["series"].to_numpy())
    return printed


PER_REPEAT_SUFFIXES = ("_per_repeat", "_repeats")  # metrics.<name><suffix>: one value per repeat


def per_repeat(frame: pd.DataFrame, metric: str) -> pd.Series:
    """Each record's list of per-repeat values of a metric (None where it has none)."""
    lists = pd.Series(None, index=frame.index, dtype=object)
    for suffix in PER_REPEAT_SUFFIXES:
        values = column(frame, f"metrics.{metric}{suffix}", None)
        lists = lists.where(lists.map(lambda v: isinstance(v, list)), values)
    return lists


def repeats_std(frame: pd.DataFrame, metric: str) -> pd.Series:
    """A metric's spread over repeats: the record's `metrics.<metric>_std`, else its per-repeat values' std."""
    def std(values: Any) -> float:
        if isinstance(values, (list, tuple)) and len([v for v in values if v is not None]) > 1:
            return float(np.std(np.asarray([v for v in values if v is not None], dtype=float), ddof=1))
        return np.nan

    recorded = column(frame, f"metrics.{metric}_std").astype(float)
    return recorded.fillna(per_repeat(frame, metric).map(std).astype(float))


def cpu_baseline(labels: Any) -> str | None:
    """The device the report compares with: the single-replica CPU with most records (else any CPU)."""
    counts = Counter(label for label in labels if label_kind(label) == "cpu")
    if not counts:
        return None
    single = {label: count for label, count in counts.items()
              if (device := labelled(label)) is not None and device.replicas == 1 and device.workers == 1}
    pool = single or counts
    return max(sort_labels(pool), key=lambda label: pool[label])


def samples_column(frame: pd.DataFrame, metric: str) -> pd.Series:
    """Each row's per-run values of `metric` (`samples.<metric>`), else its one value as one run, else []."""
    one = column(frame, f"metrics.{metric}").map(lambda value: finite([value]))
    runs = column(frame, f"samples.{metric}", None)
    return runs.where(runs.map(lambda values: isinstance(values, list)), one)


def interval_texts(table: pd.DataFrame, low: str, high: str) -> list[str | None]:
    """Each row's interval from its columns `low` and `high` as '0.512-0.534' (None without one)."""
    return [None if pd.isna(a) or pd.isna(b) else f"{format_number(a, 3)}-{format_number(b, 3)}"
            for a, b in zip(table[low], table[high])]


def comparison_fields(samples: Any, baseline: Any, higher_is_better: bool, prefix: str, oriented: bool = True,
                      words: VerdictWords = "speed") -> dict[str, Any]:
    """One comparison as fields: `<prefix>` the ratio of the medians, `_low`/`_high` its interval, `_verdict` in
    `words` at its level; `oriented`: a speedup (above 1 better), else samples / baseline."""
    samples, baseline = list(samples or []), list(baseline or [])
    if oriented:
        interval, judged = speedup_ci(samples, baseline, higher_is_better), True
    else:
        interval, judged = ratio_ci(samples, baseline), higher_is_better
    return {prefix: np.nan if interval.estimate is None else interval.estimate,
            f"{prefix}_low": np.nan if interval.low is None else interval.low,
            f"{prefix}_high": np.nan if interval.high is None else interval.high,
            f"{prefix}_verdict": verdict_text(verdict(interval, judged, words=words), interval)
            if interval.estimate is not None else None}


def speedups(table: pd.DataFrame, samples: str, higher_is_better: bool, baseline: str | None, match: str = "config",
             prefix: str = "speedup") -> pd.DataFrame:
    """Each row's speedup over the `baseline` device's row of its `match` key, from both sides' runs (`samples`)."""
    result = pd.DataFrame({prefix: np.nan, f"{prefix}_low": np.nan, f"{prefix}_high": np.nan,
                           f"{prefix}_verdict": None}, index=table.index).astype({f"{prefix}_verdict": object})
    if baseline is None or not len(table):
        return result
    runs = table[samples]
    base = table[table["device"] == baseline].drop_duplicates(match)
    base_runs = dict(zip(base[match], runs.loc[base.index]))
    for index, key in table[match].items():
        if table.at[index, "device"] == baseline:  # the baseline itself: 1 by definition, nothing to judge
            result.loc[index, [prefix, f"{prefix}_verdict"]] = [1.0, "baseline"]
        elif key in base_runs:
            for name, field in comparison_fields(runs.loc[index], base_runs[key], higher_is_better, prefix).items():
                result.at[index, name] = field
    return result


def substitute_rows(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[column(frame, "data_used", "").isin(SUBSTITUTES)]


def substitute_warning(frame: pd.DataFrame, data: ReportData) -> str | None:
    """The loud sentence for a section whose runs used offline or synthetic stand-in data."""
    flagged = substitute_rows(frame)
    if not len(flagged):
        return None
    kinds = []
    for (dataset, source), rows in flagged.groupby([column(flagged, "data.dataset", "?"), "data_used"]):
        record = data.record(rows["path"].iloc[0])
        description = (record.get("data") or {}).get("description") or ""
        kinds.append(f"{dataset}: {source} substitute{' (' + description + ')' if description else ''}")
    return (f"{len(flagged)} of {len(frame)} combinations here used stand-in data, NOT the real dataset: "
            + "; ".join(kinds) + ". Their scores and times do not describe the real dataset.")


def figure_warning(frame: pd.DataFrame) -> str | None:
    """The short form printed under a figure drawn from substitute data."""
    flagged = substitute_rows(frame)
    if not len(flagged):
        return None
    kinds = sorted({f"{d} {s}" for d, s in zip(column(flagged, "data.dataset", "?"), flagged["data_used"])})
    return f"includes runs on stand-in data, not the real dataset ({', '.join(kinds)})"


def mark_stand_in_data(section: Section, data: ReportData, notebook: str, figures: list[Any]) -> None:
    """When the notebook's runs used stand-in data: the section's red warning, and each figure's."""
    ok = data.ok(notebook)
    section.warnings += [warning for warning in [substitute_warning(ok, data)] if warning]
    note = figure_warning(ok)
    for item in figures if note else []:
        mark_substitute_data(item.figure, note)


def not_plotted(data: ReportData, notebook: str | None, name: str) -> ReportTable | None:
    """The failed and skipped runs (of one notebook, or all): listed, never plotted."""
    rows = data.not_ok(notebook)
    if not len(rows):
        return None
    why = [": ".join(part for part in parts if isinstance(part, str) and part)[:300] or "(no reason recorded)"
           for parts in zip(column(rows, "error.type"), column(rows, "error.message"))]
    table = pd.DataFrame({"notebook": rows["notebook"], "status": rows["status"], "device": rows["device_label"],
                          "combination": rows["combination"], "why": why, "record": rows["path"].map(data.shown)})
    table = table.sort_values(["notebook", "status", "device", "combination"]).reset_index(drop=True)
    table = table if notebook is None else table.drop(columns="notebook")
    where = f"of {title_of(notebook)} " if notebook else ""
    return ReportTable(name, table, f"Runs {where}that did not produce results (failed or skipped): listed here, "
                                    "left out of every figure and table of results.")


MIN_STEADY_S = 5.0  # a run's steady part shorter than this scattered several % run to run here (docs/statistics.md)


def too_short(runs: pd.DataFrame) -> str | None:
    """The warning for runs whose steady part (metrics.steady_seconds) lasted less than MIN_STEADY_S, if any."""
    steady = pd.to_numeric(column(runs, "metrics.steady_seconds"), errors="coerce")
    short = runs[steady < MIN_STEADY_S]
    if not len(short):
        return None
    return (f"{len(short)} of {len(runs)} run(s) trained a steady part under {MIN_STEADY_S:g} s (median "
            f"{format_number(float(steady[short.index].median()), 2)} s): their own noise may dominate their times.")


def timing_frame(ok: pd.DataFrame) -> pd.DataFrame:
    """The training-time figures every training notebook records (colabkit.training.TrainingTimer), with spread."""
    step_std_s = column(ok, "timings.step_s_steady.std").astype(float)
    return pd.DataFrame({**metrics(ok, "epochs_run", "samples_per_s", "samples_per_epoch", "train_time_s",
                                   epoch_first_s="epoch_time_first_s", epoch_steady_s="epoch_time_steady_s",
                                   epoch_steady_std_s="epoch_time_steady_std_s", step_ms="step_time_steady_ms",
                                   sample_us="sample_time_steady_us", steady_s="steady_seconds"),
                         "step_std_ms": step_std_s * 1e3, "train_time_std_s": repeats_std(ok, "train_time_s"),
                         "sample_std_us": step_std_s * 1e6 / column(ok, "metrics.global_batch_size").astype(float)},
                        index=ok.index)


def work_column(frame: pd.DataFrame, name: str) -> pd.Series:
    """Each record's `name` in the work it did (the `work` column: colabkit.records.identity.run_work)."""
    return column(frame, "work", None).map(lambda work: work.get(name) if isinstance(work, dict) else None)


def global_batch(ok: pd.DataFrame) -> pd.Series:
    """Each run's global batch: samples per step over all replicas (colabkit.records.identity)."""
    return work_column(ok, "global_batch").astype(float)


def work_key(frame: pd.DataFrame, leave_out: tuple[str, ...] = ()) -> pd.Series:
    """Each record's key of the work it did, without `leave_out` (colabkit.records.identity.work_key)."""
    if not len(frame):
        return pd.Series(dtype=str)
    return column(frame, "work", None).map(lambda work: identity.work_key(work or {}, leave_out))


def run_backend(frame: pd.DataFrame) -> pd.Series:
    """The backend each record ran on (resolved; TensorFlow in records from before the parameter)."""
    return work_column(frame, "backend").astype(str)


def baseline_pair_key(frame: pd.DataFrame, baseline: str | None) -> pd.Series:
    """Keys pairing each run with the `baseline` device's run of its work: on the same backend where the baseline
    ran it, else on its TensorFlow (a TPU's JAX run meets a CPU's TensorFlow run)."""
    if not len(frame):
        return pd.Series(dtype=str)
    config, backend = work_key(frame, ("device", "backend")), run_backend(frame)
    on_baseline = frame["device_label"] == baseline
    ran = set(zip(config[on_baseline], backend[on_baseline]))
    chosen = [name if (key, name) in ran else "tensorflow" for key, name in zip(config, backend)]
    return config + "|backend=" + pd.Series(chosen, index=config.index, dtype=str)


def work_differs(a: Any, b: Any) -> bool:
    """Whether two runs did other amounts of work (an unknown count is no difference): only throughputs compare."""
    return any(not (pd.isna(a.get(name)) or pd.isna(b.get(name))) and float(a.get(name)) != float(b.get(name))
               for name in ("samples_per_epoch", "epochs_run"))


WORK_DIFFERS_NOTE = ("Runs are matched by global batch; where the work per epoch differs (another number of "
                     "samples per epoch or of epochs), the comparison uses per-sample times or throughput, "
                     "not epoch or training times.")
