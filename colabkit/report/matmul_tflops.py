"""Matmul section: its figures are the declaration's (report.headline); in the appendix every figure per combination:
cold and warm, spreads, the peak, the speedup over the CPU and the ratio to NumPy's BLAS in the same run."""

from __future__ import annotations

import pandas as pd

from colabkit.report.common import (baseline_pair_key, column, cpu_baseline, experiment_frame, metrics, pick,
                                    samples_column, speedups)
from colabkit.report.headline import notebook_section
from colabkit.report.records import ReportData
from colabkit.report.section import ReportTable, Section
from colabkit.statistics import median_ci, verdict, verdict_text
from colabkit.timing.baseline import MIN_SAMPLES, baseline_problems

NOTEBOOK = "matmul_tflops"
BLAS_DTYPE = "float32"  # the dtype of the NumPy BLAS baseline (notebooks/matmul_tflops.ipynb)
DIFFERENT_DTYPE = "different dtype"  # the verdict column of a ratio to the baseline in another dtype: none


def matmul_table(data: ReportData) -> pd.DataFrame:
    """One row per matmul combination: TFLOPS cold and warm, peak, speedups, ratio to NumPy's BLAS."""
    ok = data.ok(NOTEBOOK)
    table = experiment_frame(ok, ["params.n"], ["device", "series", "n"], {
        **{name: column(ok, f"params.{name}") for name in ("n", "dtype", "count")}, "busy_runs": column(ok, "busy_runs"),
        **metrics(ok, "replicas", "xla", "tflops_cold", "tflops_warm", "tflops_warm_min", "tflops_warm_max", "peak_tflops",
                  "peak_precision", "peak_basis", "fraction_of_peak", "blas_tflops"),
        "between_run_cv": column(ok, "headline.between_cv"), "within_run_cv": column(ok, "headline.within_cv"),
        "samples_warm": samples_column(ok, "tflops_warm"), "samples_cold": samples_column(ok, "tflops_cold"),
        "combination_id": column(ok, "combination_id"), "pair": baseline_pair_key(ok, cpu_baseline(ok["device_label"]))},
        {"tflops_warm": "tflops_warm"})
    baseline = cpu_baseline(table["device"])
    table = pd.concat([table, speedups(table, "samples_warm", True, baseline, "pair", "speedup_vs_cpu"),
                       speedups(table, "samples_cold", True, baseline, "pair", "speedup_cold_vs_cpu"),
                       blas_frame(data, table)], axis=1)
    table.attrs["baseline"] = baseline
    return table


def baseline_status(runs: pd.DataFrame) -> pd.Series:
    """Why each run's NumPy BLAS baseline cannot be trusted ('' when it can, None without one)."""
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
    """Per row: the warm TFLOPS over NumPy's BLAS in the same run (median over the runs whose baseline was stable,
    interval, verdict; an unstable baseline or another dtype never judged), and whether the baselines were stable."""
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


def _fill(section: Section, table: pd.DataFrame, data: ReportData) -> None:
    printed = pick(table, ["device", "n", "dtype", "count", "replicas", ("xla", "XLA"), "runs", "busy_runs",
                           ("tflops_cold", "TFLOPS cold"), ("tflops_warm", "TFLOPS warm"), ("tflops_warm_low", "warm low"),
                           ("tflops_warm_high", "warm high"), ("tflops_warm_level", "level"), "between_run_cv",
                           "within_run_cv", ("peak_tflops", "peak TFLOPS"), ("peak_basis", "peak basis"),
                           ("fraction_of_peak", "fraction of peak"), ("speedup_vs_cpu", "speedup over CPU"),
                           ("speedup_vs_cpu_low", "speedup low"), ("speedup_vs_cpu_high", "speedup high"),
                           ("speedup_vs_cpu_verdict", "vs CPU"), ("blas_tflops", "NumPy BLAS TFLOPS"),
                           ("ratio_to_blas", "framework / BLAS"), ("ratio_to_blas_low", "framework / BLAS low"),
                           ("ratio_to_blas_high", "framework / BLAS high"), ("ratio_to_blas_verdict", "vs BLAS"),
                           ("blas_baseline", "BLAS baseline")])
    section.items.append(
        ReportTable("matmul_tflops", printed, "Matmul throughput per device and size: medians over runs, the warm "
                    "figure's interval over runs and its level, its spread between runs and within one (CV of the "
                    f"timed calls); speedup: warm TFLOPS over {table.attrs['baseline'] or 'a CPU run'} at the same "
                    "parameters; framework / BLAS: warm TFLOPS over NumPy's float32 BLAS in the same run (a ratio to "
                    "an unstable baseline, or in another dtype, is marked, never judged). Sarkar 2018's figures: "
                    "the headline figure's data."))


def matmul_section(data: ReportData) -> Section:
    """The matmul section (or why it is not in the report)."""
    return notebook_section(data, NOTEBOOK, "Matrix multiplication throughput", "matmul", matmul_table, _fill)
