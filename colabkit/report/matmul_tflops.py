"""Matmul section: TFLOPS per device and matrix size, cold vs warm, speedup over the CPU, fraction of
peak, with the published figures of Sarkar 2018 (Cloud TPU blog) beside ours."""

from __future__ import annotations

import numpy as np
import pandas as pd

from colabkit.experiments.published import SARKAR_2018_MATMUL, SARKAR_2018_SOURCE
from colabkit.plots import device_color
from colabkit.report.common import (
    baseline_pair_key,
    column,
    cpu_baseline,
    has,
    interval_frame,
    levels,
    notebook_section,
    pick,
    run_config_key,
    samples_column,
    series_labels,
    speedups,
)
from colabkit.report.figures import log_scale_if_wide, new_figure, plot_lines, powers_of_two_axis
from colabkit.report.records import ReportData, sort_labels
from colabkit.report.section import ReportFigure, ReportTable, Section
from colabkit.report.writers import format_number
from colabkit.statistics import median_ci, verdict, verdict_text, verdict_word
from colabkit.timing.baseline import MIN_SAMPLES, baseline_problems

NOTEBOOK = "matmul_tflops"
INTRO = ("Two random `n x n` matrices multiplied `count` times in a row inside one compiled call (after Sarkar "
         "2018, Cloud TPU blog). *Cold* is the first call, tracing and compilation included; *warm* the median of "
         "the later calls. Peaks come from datasheets (estimated for CPUs); the speedup compares warm throughput "
         "with the CPU's at the same size.")
BLAS_DTYPE = "float32"  # the dtype of the NumPy BLAS baseline (notebooks/matmul_tflops.ipynb)
DIFFERENT_DTYPE = "different dtype"  # the verdict column of a ratio to the baseline in another dtype: none
PUBLISHED_N = 4096  # Sarkar 2018 multiplied 4096 x 4096 matrices, 100 chained products per call
# Sarkar 2018's speedups over its CPU (0.47-0.53 TFLOPS), as published.
SARKAR_2018_SPEEDUPS = {"GPU (K80), warm": ("gpu", 29.0), "TPU v2-8, cold": ("tpu", 75.0), "TPU v2-8, warm": ("tpu", 338.0)}


def matmul_table(data: ReportData) -> pd.DataFrame:
    """One row per matmul combination with ok runs: device, n, dtype, TFLOPS cold and warm (medians over
    the runs; warm with its interval over runs, between-run and within-run spread), peak and
    fraction of it, speedup over the CPU baseline at the same parameters with its interval and verdict,
    and the NumPy BLAS baseline (ratio with interval and verdict, and whether the baseline was stable)."""
    ok = data.ok(NOTEBOOK)
    table = pd.DataFrame({
        "device": ok["device_label"], "series": series_labels(ok, ["params.n"]),
        "n": column(ok, "params.n"), "dtype": column(ok, "params.dtype"), "count": column(ok, "params.count"),
        "replicas": column(ok, "metrics.replicas"), "xla": column(ok, "metrics.xla"),
        "runs": column(ok, "runs"), "busy_runs": column(ok, "busy_runs"),
        "tflops_cold": column(ok, "metrics.tflops_cold"), "tflops_warm": column(ok, "metrics.tflops_warm"),
        "tflops_warm_min": column(ok, "metrics.tflops_warm_min"),
        "tflops_warm_max": column(ok, "metrics.tflops_warm_max"),
        "between_run_cv": column(ok, "headline.between_cv"), "within_run_cv": column(ok, "headline.within_cv"),
        "peak_tflops": column(ok, "metrics.peak_tflops"), "peak_precision": column(ok, "metrics.peak_precision"),
        "peak_basis": column(ok, "metrics.peak_basis"),
        "fraction_of_peak": column(ok, "metrics.fraction_of_peak"),
        "blas_tflops": column(ok, "metrics.blas_tflops"),
        "samples_warm": samples_column(ok, "tflops_warm"), "samples_cold": samples_column(ok, "tflops_cold"),
        "config": run_config_key(ok), "combination_id": column(ok, "combination_id"), "path": ok["path"],
    })
    table = pd.concat([table, interval_frame(table["samples_warm"], "tflops_warm").drop(columns="tflops_warm_runs")],
                      axis=1)
    baseline = cpu_baseline(table["device"])
    table["pair"] = baseline_pair_key(ok, baseline)
    table = pd.concat([table, speedups(table, "tflops_warm", True, baseline, match="pair", samples="samples_warm",
                                       prefix="speedup_vs_cpu"),
                       speedups(table, "tflops_cold", True, baseline, match="pair", samples="samples_cold",
                                prefix="speedup_cold_vs_cpu"),
                       blas_frame(data, table)], axis=1)
    table.attrs["baseline"] = baseline
    order = {label: index for index, label in enumerate(sort_labels(table["device"]))}
    return table.sort_values(["device", "series", "n"], key=lambda c: c.map(order) if c.name == "device" else c) \
        .reset_index(drop=True)


def baseline_status(runs: pd.DataFrame) -> pd.Series:
    """Why each run's NumPy BLAS baseline cannot be trusted ('' when it can, None without a baseline):
    the run's own verdict (`blas_stable`, `blas_unstable_reason`), else, for a record from before the
    baseline judged itself, the same check on the samples it kept (colabkit.timing.baseline)."""
    def why(row: pd.Series) -> str | None:
        if pd.isna(row.get("metrics.blas_tflops")):
            return None
        if isinstance(row.get("metrics.blas_stable"), bool):
            return "" if row["metrics.blas_stable"] else str(row.get("metrics.blas_unstable_reason") or "unstable")
        samples = row.get("timings.blas.samples_s")
        problems = baseline_problems(samples if isinstance(samples, list) else [], float(row["metrics.blas_tflops"]),
                                     {}, row.get("metrics.peak_tflops") if pd.notna(row.get("metrics.peak_tflops"))
                                     else None)
        few = isinstance(samples, list) and len(samples) < MIN_SAMPLES
        return "; ".join(problems + ([f"only {len(samples)} single-product samples"] if few else []))

    return runs.apply(why, axis=1) if len(runs) else pd.Series(dtype=object)


def blas_frame(data: ReportData, table: pd.DataFrame) -> pd.DataFrame:
    """Per row of `table`: the ratio of the warm TFLOPS to NumPy's BLAS measured in the same run (paired:
    each run's own ratio, the median over the runs whose baseline was stable, with its interval and the
    verdict: faster, slower, no difference resolved), and `blas_baseline`, which says whether the
    baselines were stable and, when not, why. A ratio with no stable baseline is shown, marked
    'baseline unstable', never judged; so is one of a run in another dtype than the baseline's float32,
    marked 'different dtype'."""
    runs = data.runs(NOTEBOOK)
    runs = runs.assign(why=baseline_status(runs)) if len(runs) else runs.assign(why=pd.Series(dtype=object))
    rows = {}
    for index, combination in table["combination_id"].items():
        dtype = table.at[index, "dtype"]
        other_dtype = isinstance(dtype, str) and dtype != BLAS_DTYPE  # no dtype: the notebook's default, float32
        mine = runs[(runs["combination_id"] == combination) & runs["why"].notna()]
        if not len(mine):
            continue
        stable = mine[mine["why"] == ""]
        used = stable if len(stable) else mine
        interval = median_ci(column(used, "metrics.ratio_to_blas"))
        unstable = mine[mine["why"] != ""]
        status = (f"stable ({len(mine)} run(s))" if not len(unstable) else
                  f"unstable in {len(unstable)} of {len(mine)} run(s): {unstable['why'].iloc[-1]}")
        rows[index] = {"ratio_to_blas": interval.estimate, "ratio_to_blas_low": interval.low,
                       "ratio_to_blas_high": interval.high,
                       "ratio_to_blas_verdict": (DIFFERENT_DTYPE if other_dtype else verdict_text(verdict(interval), interval)
                                                 if len(stable) else "baseline unstable"),
                       "blas_baseline": status}
    names = ["ratio_to_blas", "ratio_to_blas_low", "ratio_to_blas_high", "ratio_to_blas_verdict", "blas_baseline"]
    return pd.DataFrame.from_dict(rows, orient="index", columns=names).reindex(table.index)


def tflops_figure(table: pd.DataFrame) -> ReportFigure:
    """Warm (solid, bars: its interval over runs) and cold (dashed) TFLOPS against n per device;
    Sarkar 2018's figures as stars at n = 4096."""
    figure, (ax,) = new_figure(width=7.5, height=4.5)
    plot_lines(ax, table, "n", "tflops_warm", low="tflops_warm_low", high="tflops_warm_high", suffix=" - warm")
    plot_lines(ax, table, "n", "tflops_cold", linestyle="--", suffix=" - cold", filled=False)
    published_rows = []
    for kind, label, value, filled in [("cpu", "CPU", SARKAR_2018_MATMUL["cpu"]["tflops"], True),
                                       ("gpu", "K80 GPU", SARKAR_2018_MATMUL["gpu"]["tflops"], True),
                                       ("tpu", "TPU v2-8, warm", SARKAR_2018_MATMUL["tpu"]["tflops_warm"], True),
                                       ("tpu", "TPU v2-8, cold", SARKAR_2018_MATMUL["tpu"]["tflops_cold"], False)]:
        ax.plot([PUBLISHED_N], [value], marker="*", markersize=13, linestyle="none", color=device_color(kind),
                markerfacecolor=device_color(kind) if filled else "white",
                markeredgecolor="black" if filled else device_color(kind), markeredgewidth=1.5,
                label=f"Sarkar 2018: {label}")
        published_rows.append({"series": f"Sarkar 2018: {label}", "n": PUBLISHED_N, "tflops": value})
    powers_of_two_axis(ax, [*table["n"], PUBLISHED_N])
    log_scale_if_wide(ax, [*table["tflops_warm"], *table["tflops_cold"], *(r["tflops"] for r in published_rows)])
    ax.set_xlabel("matrix size n (n x n)")
    ax.set_ylabel("TFLOPS")
    ax.set_title("Matmul TFLOPS: warm (solid), cold (dashed)")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    ours = table[["series", "device", "n", "runs", "tflops_warm", "tflops_warm_low", "tflops_warm_high",
                  "tflops_cold"]]
    behind = pd.concat([ours, pd.DataFrame(published_rows)], ignore_index=True)
    caption = ("TFLOPS = replicas x count x 2 n^3 / seconds. Warm: each run's median timed call, then the median "
               "over runs; error bars: the interval of that median over runs at the level its runs reach "
               f"({levels(table['tflops_warm_level'])}; none with fewer than 3 runs); cold: the first call (tracing and compilation included). Stars: "
               f"{SARKAR_2018_SOURCE} (other hardware, 2018; the author warned they hold errors).")
    return ReportFigure("matmul_tflops_vs_n", figure, behind, caption)


def speedup_figure(table: pd.DataFrame) -> ReportFigure | None:
    """Warm speedup over the CPU baseline against n, per device; Sarkar 2018's published speedups as stars."""
    baseline = table.attrs.get("baseline")
    rows = table[(table["device"] != baseline) & table["speedup_vs_cpu"].notna()]
    if not len(rows):
        return None
    figure, (ax,) = new_figure(width=7.5, height=4.2)
    plot_lines(ax, rows, "n", "speedup_vs_cpu", low="speedup_vs_cpu_low", high="speedup_vs_cpu_high")
    for label, (kind, value) in SARKAR_2018_SPEEDUPS.items():
        ax.plot([PUBLISHED_N], [value], marker="*", markersize=13, linestyle="none", color=device_color(kind),
                markeredgecolor="black", label=f"Sarkar 2018: {label}")
    ax.axhline(1.0, color="black", linewidth=1, linestyle=":")
    powers_of_two_axis(ax, [*rows["n"], PUBLISHED_N])
    log_scale_if_wide(ax, [*rows["speedup_vs_cpu"], *(v for _, v in SARKAR_2018_SPEEDUPS.values()), 1.0], ratio=10)
    ax.set_xlabel("matrix size n (n x n)")
    ax.set_ylabel(f"warm TFLOPS / {baseline}")
    ax.set_title("Speedup over the CPU (same n, dtype and count)")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    behind = rows[["series", "device", "n", "runs", "tflops_warm", "speedup_vs_cpu", "speedup_vs_cpu_low",
                   "speedup_vs_cpu_high", "speedup_vs_cpu_verdict", "speedup_cold_vs_cpu"]].copy()
    return ReportFigure("matmul_speedup", figure, behind,
                        f"Warm throughput of each device divided by that of {baseline} at the same parameters (the "
                        "ratio of the medians over runs; error bars: its interval at the level its runs reach "
                        f"({levels(rows['speedup_vs_cpu_verdict'])}); none with fewer than 3 runs a side; dotted line: as fast as the CPU). Stars: "
                        "Sarkar 2018's published speedups at n = 4096.")


def peak_figure(table: pd.DataFrame) -> ReportFigure | None:
    """Warm TFLOPS as a percentage of each device's peak, against n."""
    rows = table[table["fraction_of_peak"].notna()].assign(percent_of_peak=lambda t: 100 * t["fraction_of_peak"])
    if not len(rows):
        return None
    figure, (ax,) = new_figure(width=7.5, height=4.0)
    plot_lines(ax, rows, "n", "percent_of_peak")
    ax.axhline(100, color="black", linewidth=1, linestyle=":")
    powers_of_two_axis(ax, rows["n"])
    ax.set_xlabel("matrix size n (n x n)")
    ax.set_ylabel("warm TFLOPS, % of peak")
    ax.set_title("Fraction of peak")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    behind = rows[["series", "device", "n", "dtype", "tflops_warm", "peak_tflops", "peak_precision", "peak_basis",
                   "percent_of_peak"]]
    return ReportFigure("matmul_fraction_of_peak", figure, behind.copy(),
                        "Peaks are datasheet figures (colabkit/device/peaks.py names each source); the CPU's is an "
                        "estimate: its physical cores x the FP32 FLOPs per cycle its microarchitecture executes x a "
                        "clock whose kind the data's peak basis says (the nominal clock a VM reports, a maximum boost "
                        "clock, or the one a faster measurement on the host implies: never below what was measured).")


def published_table(table: pd.DataFrame) -> pd.DataFrame:
    """Ours at the largest n each device ran, beside Sarkar 2018's published numbers (n = 4096)."""
    ours = table.sort_values("n").groupby("series", sort=False).tail(1)
    rows = [{"source": f"ours: {row.series}", "n": row.n, "TFLOPS warm": row.tflops_warm, "TFLOPS cold": row.tflops_cold,
             "speedup over CPU (warm)": row.speedup_vs_cpu} for row in ours.itertuples()]
    published = SARKAR_2018_MATMUL
    rows += [
        {"source": "Sarkar 2018: Colab CPU", "n": PUBLISHED_N, "TFLOPS warm": published["cpu"]["tflops"],
         "TFLOPS cold": np.nan, "speedup over CPU (warm)": 1.0},
        {"source": "Sarkar 2018: K80 GPU", "n": PUBLISHED_N, "TFLOPS warm": published["gpu"]["tflops"],
         "TFLOPS cold": np.nan, "speedup over CPU (warm)": SARKAR_2018_SPEEDUPS["GPU (K80), warm"][1]},
        {"source": "Sarkar 2018: TPU v2-8", "n": PUBLISHED_N, "TFLOPS warm": published["tpu"]["tflops_warm"],
         "TFLOPS cold": published["tpu"]["tflops_cold"], "speedup over CPU (warm)": SARKAR_2018_SPEEDUPS["TPU v2-8, warm"][1]},
    ]
    return pd.DataFrame(rows)


def _findings(table: pd.DataFrame) -> str:
    sentences = []
    for series, rows in table[table["tflops_warm"].notna()].groupby("series", sort=False):
        best = rows.loc[rows["tflops_warm"].idxmax()]
        basis = f", {best['peak_basis']}" if isinstance(best.get("peak_basis"), str) else ""
        peak = (f" ({format_number(100 * best['fraction_of_peak'], 3)} % of its peak{basis})"
                if pd.notna(best["fraction_of_peak"]) else "")
        cold = (f"; its cold first call reached {format_number(best['tflops_cold'], 3)} TFLOPS"
                if pd.notna(best["tflops_cold"]) else "")
        interval = (f", interval {format_number(best['tflops_warm_low'], 3)}-"
                    f"{format_number(best['tflops_warm_high'], 3)} ({best['tflops_warm_level']})"
                    if pd.notna(best["tflops_warm_low"]) else f", {format_number(best['runs'])} run(s): no interval")
        sentences.append(f"**{series}** peaked at {format_number(best['tflops_warm'], 3)} TFLOPS warm at "
                         f"n = {format_number(best['n'])}{interval}{peak}{cold}.")
    return " ".join(sentences)


def _blas_findings(table: pd.DataFrame) -> str:
    """The ratios to NumPy's BLAS in words: their verdicts, and the baselines that were not stable."""
    rows = table[table["ratio_to_blas"].notna()]
    if not len(rows):
        return ""
    parts = []
    for row in rows.itertuples():
        judged = row.ratio_to_blas_verdict
        what = ("not judged: its baseline was unstable" if judged == "baseline unstable" else
                f"not judged: {row.dtype} against NumPy's float32" if judged == DIFFERENT_DTYPE else
                f"{verdict_word(judged)} than NumPy's BLAS, {levels([judged])}" if verdict_word(judged) in ("faster", "slower")
                else judged)
        parts.append(f"n = {format_number(row.n)}: {format_number(row.ratio_to_blas, 3)} ({what})")
    return ("TensorFlow (or JAX) over NumPy's BLAS in the same run, on the CPU: " + "; ".join(parts) + ".")


def _fill(section: Section, table: pd.DataFrame, data: ReportData) -> None:
    section.text = [text for text in [_findings(table), _blas_findings(table)] if text]
    if table.attrs["baseline"] is None:
        section.text.append("No CPU run is in these results, so no speedup over the CPU can be given.")
    printed = pick(table, [("device", "device"), ("n", "n"), ("dtype", "dtype"), ("count", "count"),
                           ("replicas", "replicas"), ("xla", "XLA"), ("runs", "runs"), ("busy_runs", "busy runs"),
                           ("tflops_cold", "TFLOPS cold"), ("tflops_warm", "TFLOPS warm"),
                           ("tflops_warm_low", "warm low"), ("tflops_warm_high", "warm high"), ("tflops_warm_level", "level"),
                           ("between_run_cv", "between-run CV"), ("within_run_cv", "within-run CV"),
                           ("peak_tflops", "peak TFLOPS"), ("peak_basis", "peak basis"),
                           ("fraction_of_peak", "fraction of peak"),
                           ("speedup_vs_cpu", "speedup over CPU"), ("speedup_vs_cpu_low", "speedup low"),
                           ("speedup_vs_cpu_high", "speedup high"), ("speedup_vs_cpu_verdict", "vs CPU"),
                           ("blas_tflops", "NumPy BLAS TFLOPS"), ("ratio_to_blas", "framework / BLAS"),
                           ("ratio_to_blas_low", "framework / BLAS low"),
                           ("ratio_to_blas_high", "framework / BLAS high"),
                           ("ratio_to_blas_verdict", "vs BLAS"), ("blas_baseline", "BLAS baseline")])
    figures = [tflops_figure(table)] if has(table, "tflops_warm") or has(table, "tflops_cold") else []
    figures += [item for item in (speedup_figure(table), peak_figure(table)) if item]
    section.items = [
        ReportTable("matmul_tflops", printed, "Matmul throughput per device and size: medians over runs, the warm "
                    "figure's interval over runs with the level it reaches (none below 3 runs), its spread between runs and "
                    "within one (CV of the timed calls). Speedup: warm TFLOPS over "
                    f"{table.attrs['baseline'] or 'a CPU run'} with the same parameters, with its interval and "
                    "verdict. framework / BLAS: each run's warm TFLOPS (TensorFlow or JAX) over NumPy's float32 BLAS "
                    "in the same run, median over the runs whose baseline was stable; a ratio to an unstable "
                    "baseline, or of a run in another dtype than float32, is marked, never judged."),
        *figures,
        ReportTable("matmul_vs_published", published_table(table),
                    f"Ours at the largest n measured per device, and {SARKAR_2018_SOURCE}."),
    ]


def matmul_section(data: ReportData) -> Section:
    """The matmul section (or one that says why it has nothing to show)."""
    return notebook_section(data, NOTEBOOK, "Matrix multiplication throughput", "matmul", matmul_table, _fill,
                            INTRO)
