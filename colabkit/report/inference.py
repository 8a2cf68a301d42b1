"""The report's inference section (docs/inference.md): every run in inference mode, of any experiment. Its
single-stream latency percentiles with their order-statistic intervals, the latency distribution (each run's
empirical CDF, its p50, p90 and p99 marked with their intervals), and its offline throughput per batch size
with the interval over runs. Training sections never see these runs (ReportData.runs)."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from colabkit.report.records import ReportData
from colabkit.report.section import ReportFigure, ReportTable, Section
from colabkit.inference.measure import PERCENTILES
from colabkit.statistics import CONFIDENCE, min_samples

PERCENTILE_COLORS = {50: "#1f77b4", 90: "#ff7f0e", 99: "#d62728"}


def _runs(data: ReportData) -> list[tuple[str, dict[str, Any], pd.Series]]:
    """(label, the record's `inference` section, the run's row) for every counted inference run that has one."""
    rows = data.runs(None, inference=True)
    found = []
    for _, row in rows.iterrows():
        section = data.record(row["path"]).get("inference")
        if isinstance(section, dict) and section.get("single_stream"):
            found.append((f"{row['notebook']}, {row['device_label']}, {row['combination']}", section, row))
    return found


def latency_table(runs: list[tuple[str, dict[str, Any], pd.Series]]) -> pd.DataFrame:
    """One row per run: queries, their duration and binding minimum (none before the minimums), each percentile's
    estimate, interval and the coverage its ranks reach."""
    rows = []
    for label, section, row in runs:
        single = section["single_stream"]
        entry: dict[str, Any] = {"notebook": row["notebook"], "device": row["device_label"],
                                 "combination": row["combination"], "run": data_path(row), "queries": single["queries"],
                                 "duration_s": single.get("duration_s"), "binding": single.get("binding")}
        too_few = []
        for point in single["percentiles"]:
            name = f"p{point['percentile']:g}"
            given = measured(point)
            entry.update({f"{name}_ms": point["estimate_ms"] if given else None, f"{name}_low_ms": point["low_ms"],
                          f"{name}_high_ms": point["high_ms"], f"{name}_coverage": point["coverage"]})
            if not given:
                too_few.append(f"too few queries for {name} ({single['queries']} of the "
                               f"{min_samples(point['percentile'] / 100)} its {100 * CONFIDENCE:g} % interval takes)")
        entry["not_given"] = "; ".join(too_few)
        rows.append(entry)
    return pd.DataFrame(rows)


def measured(point: dict[str, Any]) -> bool:
    """Whether a run's latency percentile (its record's `inference.single_stream.percentiles` entry) stands as a
    measurement: only where its queries give its order-statistic interval (colabkit.statistics.quantile_ci). Below, its
    estimate is little more than the largest (or smallest) latency (p99 of 5 queries is the slowest of 5), and the
    report gives it neither in the table nor in the figure, and says so."""
    return point.get("low_ms") is not None and point.get("high_ms") is not None


def data_path(row: pd.Series) -> str:
    return str(row.get("repeat_label", "")) or str(row["path"]).rsplit("/", 1)[-1]


def offline_table(runs: list[tuple[str, dict[str, Any], pd.Series]]) -> pd.DataFrame:
    """One row per run and batch size: samples/s (median over runs) with its interval."""
    rows = [{"notebook": row["notebook"], "device": row["device_label"], "combination": row["combination"],
             "run": data_path(row), "batch": entry["batch"], "samples_per_s": entry["samples_per_s"],
             "low": entry["low"], "high": entry["high"], "runs": entry["runs"], "binding": entry.get("binding")}
            for _, section, row in runs for entry in section.get("offline") or []]
    return pd.DataFrame(rows)


def latency_figure(runs: list[tuple[str, dict[str, Any], pd.Series]]) -> ReportFigure:
    """Each run's latencies as an empirical CDF (log time axis), its percentiles marked with their intervals."""
    figure, ax = plt.subplots(figsize=(7.4, 4.2))
    points: list[dict[str, Any]] = []
    missing: dict[float, list[str]] = {}  # percentile -> the runs with too few queries for it
    for label, section, _ in runs:
        latencies = np.sort(np.asarray(section["single_stream"]["latencies_ms"], dtype=float))
        share = np.arange(1, len(latencies) + 1) / len(latencies)
        ax.step(latencies, share, where="post", label=f"{label} ({len(latencies)} queries)")
        for point in section["single_stream"]["percentiles"]:
            level, color = point["percentile"], PERCENTILE_COLORS.get(int(point["percentile"]), "black")
            if not measured(point):
                missing.setdefault(level, []).append(f"{label} ({len(latencies)})")
                continue
            low, high = point["low_ms"], point["high_ms"]
            xerr = [[point["estimate_ms"] - low], [high - point["estimate_ms"]]]
            ax.errorbar(point["estimate_ms"], level / 100, xerr=xerr, fmt="o", color=color, capsize=3, markersize=4)
            points.append({"run": label, "percentile": level, "estimate_ms": point["estimate_ms"], "low_ms": low,
                           "high_ms": high})
    for level, color in PERCENTILE_COLORS.items():
        ax.plot([], [], "o", color=color, label=f"p{level} and its interval")
    ax.set(xscale="log", xlabel="latency per query, batch 1 (ms, log scale)", ylabel="share of queries at or below",
           title="Single-stream latency distribution", ylim=(0, 1.02))
    ax.legend(fontsize=7, loc="lower right")
    caption = ("Empirical CDF of every single-stream query's latency (batch 1, answer on the host), per inference "
               "run; the dots are p50, p90 and p99, their bars the distribution-free order-statistic intervals")
    caption += "".join(f"; too few queries for p{level:g} (its {100 * CONFIDENCE:g} % interval takes "
                       f"{min_samples(level / 100)}), not drawn for {', '.join(labels)}" for level, labels in missing.items())
    return ReportFigure("inference_latency_distribution", figure, pd.DataFrame(points), caption)


def offline_figure(table: pd.DataFrame) -> ReportFigure:
    """Offline samples/s against batch size, per run, with the interval over runs."""
    figure, ax = plt.subplots(figsize=(6.4, 4.0))
    for (notebook, device, combination, run), rows in table.groupby(["notebook", "device", "combination", "run"],
                                                                     sort=False):
        rows = rows.sort_values("batch")
        known = rows["low"].notna()
        yerr = np.array([rows["samples_per_s"] - rows["low"].fillna(rows["samples_per_s"]),
                         rows["high"].fillna(rows["samples_per_s"]) - rows["samples_per_s"]], dtype=float)
        ax.errorbar(rows["batch"], rows["samples_per_s"], yerr=np.where(known.to_numpy(), yerr, 0), marker="o",
                    capsize=3, label=f"{notebook}, {device}, {combination}")
    ax.set(xscale="log", yscale="log", xlabel="batch size (log)", ylabel="samples/s (log)",
           title="Offline throughput by batch size")
    ax.legend(fontsize=7)
    return ReportFigure("inference_offline_throughput", figure, table,
                        "Offline samples/s per batch size: the median over runs, the bars its interval")


def inference_section(data: ReportData) -> Section:
    """The report's section of inference runs (or why there is none)."""
    section = Section("inference", "Inference")
    runs = _runs(data)
    if not runs:
        section.empty = ("No run in inference mode (a notebook's `mode = \"inference\"`, e.g. the CNN grid's "
                         "`inference_smoke` preset), so there are no latencies or inference throughputs to give.")
        return section
    section.text.append(
        "Runs in inference mode train nothing: single-stream queries at batch 1, one after another, each answer on "
        "the host before the clock stops (compilation and warm-up apart); p50, p90 and p99 by linear interpolation, "
        "each with the interval between two order statistics that covers the true percentile with the coverage "
        "given (at least 95 %, whatever the latencies' distribution). A percentile is given only from the queries its "
        "interval takes (" + ", ".join(f"{min_samples(level / 100)} for p{level}" for level in PERCENTILES) + "): below, "
        "its estimate is little more than the slowest (or fastest) query, so the table says too few queries and the "
        "figure draws no dot for it. Offline: samples/s per batch size, the median over runs and its interval. "
        "docs/inference.md.")
    latency = latency_table(runs)
    section.items.append(ReportTable("inference_latency", latency, "Single-stream latency percentiles per run (ms), "
                                     "their order-statistic intervals and the coverage those reach"))
    section.items.append(latency_figure(runs))
    offline = offline_table(runs)
    if len(offline):
        section.items.append(ReportTable("inference_offline", offline, "Offline samples/s per run and batch size, the "
                                         "median over runs and its interval"))
        section.items.append(offline_figure(offline))
    return section
