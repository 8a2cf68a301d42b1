"""The report's inference section (docs/inference.md): per combination its latency percentiles and offline samples/s,
medians over runs with the between-run interval (verdicts rest on those alone), beside one run's own interval."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from colabkit.experiments.declaration import Headline
from colabkit.experiments.inference import OFFLINE_PREFIX, inference_figures, voided_by
from colabkit.inference.measure import PERCENTILES
from colabkit.report.common import comparison_fields, interval_texts, run_backend, samples_column, work_key
from colabkit.report.figures import new_figure, plot_lines, powers_of_two_axis
from colabkit.report.records import ReportData, in_report_order
from colabkit.report.runs import collapse, figures_over_runs
from colabkit.report.section import ReportFigure, ReportTable, Section
from colabkit.statistics import CONFIDENCE, min_samples

PERCENTILE_COLORS = {50: "#1f77b4", 90: "#ff7f0e", 99: "#d62728"}
Run = tuple[str, dict[str, Any], pd.Series]  # its combination's label, the record's `inference`, the run's row


def _runs(data: ReportData) -> list[Run]:
    """(label, the record's `inference` section, the run's row) for every counted inference run that has one."""
    rows = data.runs(None, inference=True)
    found = []
    for _, row in rows.iterrows():
        section = data.record(row["path"]).get("inference")
        if isinstance(section, dict) and section.get("single_stream"):
            found.append((f"{row['notebook']}, {row['device_label']}, {row['combination']}", section, row))
    return found


def _named(row: pd.Series, run: str | None = None) -> dict[str, Any]:
    """Which run a row of a table is: its notebook, device, combination and `run` (its record's name)."""
    name = run or str(row.get("repeat_label", "")) or str(row["path"]).rsplit("/", 1)[-1]
    return {"notebook": row["notebook"], "device": row["device_label"], "combination": row["combination"], "run": name}


def latency_table(runs: list[Run]) -> pd.DataFrame:
    """One row per run: queries, their duration and binding minimum, each percentile's estimate, interval, coverage."""
    rows = []
    for label, section, row in runs:
        single = section["single_stream"]
        entry = {**_named(row), "queries": single["queries"], "duration_s": single.get("duration_s"),
                 "binding": single.get("binding")}
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
    """Whether a latency percentile is a measurement: its queries give it an interval (p99 of 5 is the slowest)."""
    return point.get("low_ms") is not None and point.get("high_ms") is not None


def offline_table(runs: list[Run]) -> pd.DataFrame:
    """One row per run and batch size: samples/s, its passes' interval within the run, their count."""
    return pd.DataFrame([{**_named(row), "batch": entry["batch"], "samples_per_s": entry["samples_per_s"],
                          "within_run_low": entry["low"], "within_run_high": entry["high"],
                          "timed_passes": entry["runs"], "binding": entry.get("binding")}
                         for _, section, row in runs for entry in section.get("offline") or []])


def run_names(runs: list[Run], combination: bool = True) -> list[str]:
    """'run k: FILE' for each run (k-th of its combination), led by its combination's label with `combination`."""
    counted: dict[str, int] = {}
    names = []
    for label, _, row in runs:
        counted[label] = counted.get(label, 0) + 1
        names.append(f"{label}, " * combination + f"run {counted[label]}: {_named(row)['run']}")
    return names


def latency_figure(runs: list[Run]) -> ReportFigure:
    """Each run's latencies as an empirical CDF, its percentiles' intervals where it has them."""
    figure, (ax,) = new_figure(width=7.4, height=4.2)  # no pyplot: a figure left out is never kept open
    points: list[dict[str, Any]] = []
    missing: dict[float, list[str]] = {}  # percentile -> the runs with too few queries for it
    labelled: set[float] = set()  # the percentiles the legend lists: one entry each, from the first dot drawn
    several = len({label for label, _, _ in runs}) > 1  # else the legend's title says the one combination
    for short, full, (_, section, row) in zip(run_names(runs, False), run_names(runs), runs):
        name = full if several else short
        latencies = np.sort(np.asarray(section["single_stream"]["latencies_ms"], dtype=float))
        share = np.arange(1, len(latencies) + 1) / len(latencies)
        ax.step(latencies, share, where="post", label=f"{name} ({len(latencies)} queries)")
        run = _named(row, short)
        points += [{**run, "point": "query", "percentile": np.nan, "latency_ms": latency, "share_at_or_below": at,
                    "low_ms": np.nan, "high_ms": np.nan} for latency, at in zip(latencies, share)]
        for point in section["single_stream"]["percentiles"]:
            level, color = point["percentile"], PERCENTILE_COLORS.get(int(point["percentile"]), "black")
            if not measured(point):
                missing.setdefault(level, []).append(f"{full} ({len(latencies)})")
                continue
            low, high = point["low_ms"], point["high_ms"]
            xerr = [[point["estimate_ms"] - low], [high - point["estimate_ms"]]]
            ax.errorbar(point["estimate_ms"], level / 100, xerr=xerr, fmt="o", color=color, capsize=3, markersize=4,
                        label=None if level in labelled else f"p{level:g} and its interval (within the run)")
            labelled.add(level)
            points.append({**run, "point": f"p{level:g}", "percentile": level, "latency_ms": point["estimate_ms"],
                           "share_at_or_below": level / 100, "low_ms": low, "high_ms": high})
    ax.set(xscale="log", xlabel="latency per query, batch 1 (ms, log scale)", ylabel="share of queries at or below",
           title="Single-stream latency distribution", ylim=(0, 1.02))
    ax.legend(fontsize=7, loc="lower right", title=None if several else runs[0][0], title_fontsize=7)
    caption = ("Empirical CDF of every single-stream query's latency (batch 1, answer on the host), per inference "
               "run; the dots are p50, p90 and p99, their bars the distribution-free order-statistic intervals within "
               "that run (from its queries), not between runs: those are in inference_over_runs")
    caption += "".join(f"; too few queries for p{level:g} (its {100 * CONFIDENCE:g} % interval takes "
                       f"{min_samples(level / 100)}), not drawn for {'; '.join(labels)}"
                       for level, labels in missing.items())
    return ReportFigure("inference_latency_distribution", figure, pd.DataFrame(points), caption)


def within_one_run(runs: list[Run]) -> pd.DataFrame:
    """Per combination and figure, the median ends of one run's own interval over runs: for contrast only."""
    bounds = [(row["combination_id"], metric, float(low), float(high)) for _, section, row in runs
              for metric, low, high in [
                  *((f"latency_p{p['percentile']:g}_ms", p.get("low_ms"), p.get("high_ms"))
                    for p in section["single_stream"]["percentiles"]),
                  *((f"{OFFLINE_PREFIX}{e['batch']}", e.get("low"), e.get("high")) for e in section.get("offline") or [])]
              if low is not None and high is not None]
    return pd.DataFrame(bounds, columns=["combination_id", "metric", "within_one_run_low", "within_one_run_high"]) \
        .groupby(["combination_id", "metric"]).median()


def over_runs_frame(data: ReportData, runs: list[Run]) -> tuple[pd.DataFrame, list[Headline]]:
    """The combinations of `runs` collapsed, a percentile only from runs whose queries gave it an interval; figures."""
    rows = data.runs(None, inference=True)
    rows = rows[rows["combination_id"].isin({row["combination_id"] for _, _, row in runs})].copy()
    figures = inference_figures(name[len("metrics."):] for name in rows.columns if name.startswith("metrics."))
    for figure in figures:
        low = f"metrics.{voided_by(figure.metric)}"
        if low in rows:
            rows[f"metrics.{figure.metric}"] = rows[f"metrics.{figure.metric}"].where(rows[low].notna())
    return collapse(rows), figures


def over_runs_table(ok: pd.DataFrame, figures: Sequence[Headline], runs: list[Run]) -> pd.DataFrame:
    """Per combination and figure: the median over runs, its interval, within_one_run's beside."""
    table = figures_over_runs(ok, figures).join(within_one_run(runs), on=["combination_id", "metric"])
    named = ok.assign(backend=run_backend(ok)).set_index("combination_id")
    for name, source in (("combination", "combination"), ("backend", "backend"), ("device", "device_label"),
                         ("notebook", "notebook")):
        table.insert(1, name, table["combination_id"].map(named[source]))
    return table.drop(columns="combination_id")


VERDICT_COLUMNS = ["notebook", "measure", "reference", "candidate", "configuration", "runs_reference",
                   "runs_candidate", "ratio", "ratio_low", "ratio_high", "verdict"]


def verdicts_across(ok: pd.DataFrame, figures: Sequence[Headline], across: Sequence[str] = ("device", "backend")
                    ) -> pd.DataFrame:
    """Each combination against the first in report order of its work but `across`: ratio, interval, verdict."""
    rows: list[dict[str, Any]] = []
    if not len(ok):
        return pd.DataFrame(rows, columns=VERDICT_COLUMNS)
    side = ok.assign(backend=run_backend(ok), key=work_key(ok, tuple(across)), device=ok["device_label"])
    side = in_report_order(side.assign(jax=side["backend"] != "tensorflow"), ["device", "jax", "backend"])
    runs_of = {figure.metric: samples_column(side, figure.metric) for figure in figures}
    for _, group in side.groupby("key", sort=False):
        reference = group.iloc[0]
        for index, candidate in group.iloc[1:].iterrows():
            for figure in figures:
                base, mine = runs_of[figure.metric][group.index[0]], runs_of[figure.metric][index]
                if not base or not mine:
                    continue
                fields = comparison_fields(mine, base, figure.higher_is_better, "ratio", oriented=False)
                rows.append({"notebook": candidate["notebook"], "measure": figure.label,
                             "reference": f"{reference['device_label']}, {reference['backend']}",
                             "candidate": f"{candidate['device_label']}, {candidate['backend']}",
                             "configuration": candidate["combination"], "runs_reference": len(base),
                             "runs_candidate": len(mine), **fields, "verdict": fields["ratio_verdict"]})
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def offline_figure(table: pd.DataFrame, data: ReportData) -> ReportFigure | None:
    """Offline samples/s against the batch per combination (None without a median); in the body at two batch sizes."""
    rows = table[table["metric"].str.startswith(OFFLINE_PREFIX) & table["median"].notna()]
    if not len(rows):
        return None
    rows = rows.assign(batch=rows["metric"].str[len(OFFLINE_PREFIX):].astype(int),
                       series=rows["notebook"] + ", " + rows["device"] + ", " + rows["backend"])
    if rows.groupby("series")["combination"].nunique().max() > 1:  # two combinations on one backend: named apart
        rows["series"] += ": " + rows["combination"]
    figure, (ax,) = new_figure(width=6.4, height=3.6)
    plot_lines(ax, rows, "batch", "median", low="between_runs_low", high="between_runs_high", colors=data.palette)
    powers_of_two_axis(ax, rows["batch"])
    ax.set(yscale="log", xlabel="batch size (log)", ylabel="samples/s (log)", title="Offline throughput by batch size")
    ax.legend(fontsize="small")
    return ReportFigure("inference_offline_throughput", figure, rows,
                        "Offline samples/s per batch size: the median over runs, bars the interval over runs (its "
                        "level and runs in the corner; none below 3 runs).",
                        body=rows.groupby("combination")["batch"].nunique().max() > 1)


def inference_section(data: ReportData) -> Section:
    """Verdicts between devices and backends (else the figures over runs) and offline throughput; runs: appendix."""
    section = Section("inference", "Inference")
    runs = _runs(data)
    if not runs:
        section.empty = "no run in inference mode (the CNN grid's inference_smoke preset makes some)."
        return section
    ok, figures = over_runs_frame(data, runs)
    table = over_runs_table(ok, figures, runs)
    verdicts = verdicts_across(ok, figures)
    offline = table[table["metric"].str.startswith(OFFLINE_PREFIX) & table["median"].notna()]
    batches = offline.groupby("combination")["metric"].nunique().max() if len(offline) else 0
    if len(ok) < 2 and batches < 2:
        section.empty = "one combination at one batch size: nothing to set side by side (its latencies: appendix)."
    elif len(verdicts):
        section.items.append(ReportTable("inference", verdicts[["measure", "reference", "candidate", "ratio"]].assign(
            interval=interval_texts(verdicts, "ratio_low", "ratio_high"),
            verdict=verdicts["verdict"]), "Device against device, backend against backend: the ratio of the medians "
            "over runs (second over first), its interval and verdict (Methods).", body=True))
    else:
        section.items.append(ReportTable("inference", pd.DataFrame({
            "device": table["device"], "backend": table["backend"], "measure": table["measure"] + " (" +
            table["unit"] + ")", "median": table["median"],
            "interval": interval_texts(table, "between_runs_low", "between_runs_high"),
            "level": table["between_runs_level"]}), "Single-stream latency and offline throughput: the median over "
            "runs, its interval and level (Methods).", body=True))
    section.items.append(ReportTable("inference_over_runs", table, "Per combination: p50, p90, p99 latency (ms) and "
                                     "offline samples/s per batch, the median over runs with the between-run "
                                     "interval and the level it reaches (the headline); within_one_run_low/_high: "
                                     "one run's own interval (median over runs), for contrast, no verdict"))
    if len(verdicts):
        section.items.append(ReportTable("inference_verdicts", verdicts, "Device against device, backend against "
                                         "backend: the ratio of the medians over runs, its interval and the verdict "
                                         "with that interval's level and runs (between runs only)"))
    section.notes.append("Per run: each percentile with the interval its queries give, only from the queries it takes ("
                         + ", ".join(f"{min_samples(level / 100)} for p{level}" for level in PERCENTILES) + ").")
    section.items.append(ReportTable("inference_latency", latency_table(runs), "Single-stream latency percentiles "
                                     "of each run (ms), their intervals within one run (from its queries) and the "
                                     "coverage those reach; the figures over runs are in inference_over_runs"))
    section.items.append(latency_figure(runs))
    per_run = offline_table(runs)
    if len(per_run):
        section.items.append(ReportTable("inference_offline", per_run, "Offline samples/s of each run and batch size: "
                                         "the median of its timed passes and their interval (within one run)"))
        section.add_figure(offline_figure(table, data), "No figure of offline throughput: the runs' records give "
                                                        "offline passes but no offline samples/s among their metrics.")
    return section
