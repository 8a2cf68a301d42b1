"""The report over repeated runs: medians over runs with intervals at their stated levels in the tables, figures and
records.csv, a verdict beside every ratio, baselines judged before a ratio is, differences along one
parameter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import report_fixtures as fx

from colabkit import report
from colabkit.report.writers import write_records_csv

SPREAD = (1.0, 1.04, 0.96)


def runs(root: Path, make: Any, slug: str, spread: tuple[float, ...] = SPREAD) -> None:
    """One record per factor of `spread`, as the repeats of a sweep write them."""
    for repeat, factor in enumerate(spread, start=1):
        fx.write(root, make(factor), slug if repeat == 1 else f"{slug}_repeat-{repeat}")


def matmul_with_blas(device: str, n: int, tflops: float, blas: float, stable: bool | None = True) -> dict[str, Any]:
    record = fx.matmul(device, n, tflops)
    if device == "cpu":
        record["metrics"].update(blas_tflops=blas, ratio_to_blas=tflops / blas)
        if stable is not None:
            record["metrics"].update(blas_stable=stable, blas_unstable_reason=None if stable else "samples spread")
    return record


@pytest.fixture
def data(tmp_path) -> report.ReportData:
    for n in (256, 512):
        runs(tmp_path, lambda f, n=n: matmul_with_blas("cpu", n, 0.1 * f, 0.12), f"n-{n}")
        runs(tmp_path, lambda f, n=n: matmul_with_blas("gpu", n, 5.0 * f, 0), f"n-{n}")
    for batch in (256, 512):
        def cnn(factor: float, batch: int = batch) -> dict[str, Any]:
            record = fx.cnn("cpu", batch)
            record["metrics"]["epoch_time_steady_s"] = (10.0 if batch == 256 else 6.0) * factor
            return record
        runs(tmp_path, cnn, f"batch_size-{batch}")
    return report.load_report_data([tmp_path])


def test_tables_give_each_combination_its_runs_median_interval_and_every_ratio_a_verdict(data):
    table = report.matmul_table(data).set_index(["device", "n"])
    cpu = table.loc[("CPU: AMD EPYC", 256)]
    assert cpu["runs"] == 3 and cpu["tflops_warm"] == pytest.approx(0.1)
    assert cpu["tflops_warm_low"] == pytest.approx(0.096) and cpu["tflops_warm_high"] == pytest.approx(0.104)
    assert cpu["between_run_cv"] == pytest.approx(0.04)
    gpu = table.loc[("GPU: Tesla T4", 512)]
    assert gpu["speedup_vs_cpu"] == pytest.approx(50.0) and gpu["speedup_vs_cpu_verdict"].startswith("faster (")
    assert gpu["speedup_vs_cpu_low"] < 50.0 < gpu["speedup_vs_cpu_high"]
    assert cpu["ratio_to_blas"] == pytest.approx(0.1 / 0.12) and cpu["ratio_to_blas_verdict"].startswith("slower (")
    assert cpu["blas_baseline"] == "stable (3 run(s))"
    printed = report.matmul_section(data).table("matmul_tflops")
    for name in ("runs", "warm low", "warm high", "level", "speedup low", "vs CPU", "framework / BLAS low",
                 "vs BLAS", "BLAS baseline"):
        assert name in printed.columns, name
    caption = report.matmul_section(data).figure("matmul_tflops_headline").caption
    assert "error bars: the interval over runs (75 %, n = 3; Methods)" in caption
    assert "95 %" not in caption  # 3 runs: the level they reach, stated


def test_records_csv_carries_each_records_combination_n_median_and_interval(data, tmp_path):
    path = write_records_csv(data.frame, tmp_path / "records.csv")
    rows = pd.read_csv(path)
    matmul = rows[(rows["notebook"] == "matmul_tflops") & (rows["params.n"] == 256) & (rows["params.device"] == "cpu")]
    assert len(matmul) == 3 and set(matmul["headline.n"]) == {3} and set(matmul["headline.metric"]) == {"tflops_warm"}
    assert set(matmul["headline.median"].round(6)) == {0.1}
    assert set(matmul["headline.ci_low"].round(6)) == {0.096} and set(matmul["headline.ci_high"].round(6)) == {0.104}
    assert "75 %" in matmul["headline.note"].iloc[0]  # 3 runs: the range, and what it can promise
    assert set(matmul["headline.level"]) == {0.75}
    assert rows["used"].all()


def test_differences_along_one_parameter_get_an_interval_and_a_verdict(data):
    section = report.comparisons_section(data)
    table = section.table("comparisons_along_one_parameter")
    (row,) = table[table["parameter"] == "batch_size"].to_dict("records")
    assert (row["reference"], row["candidate"], row["runs_reference"], row["runs_candidate"]) == (256, 512, 3, 3)
    assert row["ratio"] == pytest.approx(0.6) and row["verdict"].startswith("faster (")  # 6 s per epoch instead of 10
    short = section.table("comparisons")  # the body's: 8 columns
    assert short[short["parameter"] == "batch_size"]["values"].tolist() == ["256 -> 512"] and len(short.columns) == 8


def test_a_ratio_to_an_unstable_or_implausible_baseline_is_marked_never_judged(tmp_path):
    runs(tmp_path, lambda f: matmul_with_blas("cpu", 256, 0.1 * f, 0.12, stable=False), "n-256")
    old = fx.matmul("cpu", 512, 0.08)  # written before the baseline judged itself: three one-product samples
    old["metrics"].update(blas_tflops=0.0021, ratio_to_blas=0.08 / 0.0021)
    old["timings"]["blas"] = {"median_s": 0.128, "samples_s": [0.13, 0.128, 0.11]}
    fx.write(tmp_path, old, "n-512")
    table = report.matmul_table(report.load_report_data([tmp_path])).set_index("n")
    assert table.loc[256, "ratio_to_blas_verdict"] == "baseline unstable"
    assert table.loc[256, "blas_baseline"] == "unstable in 3 of 3 run(s): samples spread"
    assert table.loc[512, "ratio_to_blas"] == pytest.approx(0.08 / 0.0021)  # shown, as the report printed 34.76 ...
    assert table.loc[512, "ratio_to_blas_verdict"] == "baseline unstable"  # ... but marked, with why
    assert "implausible: 2.1 GFLOPS is 0.64 % of this CPU's peak" in table.loc[512, "blas_baseline"]
    assert "only 3 single-product samples" in table.loc[512, "blas_baseline"]


def test_a_batch_that_changes_the_work_per_epoch_is_compared_by_throughput(tmp_path):
    """timeseries_rnn trains steps_per_epoch x batch samples an epoch: batch 512's epochs are longer
    though it processes more samples per second."""
    for batch, epoch_s in ((256, 1.0), (512, 1.5)):
        def make(factor: float, batch: int = batch, epoch_s: float = epoch_s) -> dict[str, Any]:
            record = fx.timeseries("gpu", batch)
            samples = 5 * batch
            record["metrics"].update(epoch_time_steady_s=epoch_s * factor, samples_per_epoch=samples,
                                     samples_per_s=samples / (epoch_s * factor))
            return record
        runs(tmp_path, make, f"batch_size-{batch}")
    section = report.comparisons_section(report.load_report_data([tmp_path]))
    (row,) = section.table("comparisons_along_one_parameter").to_dict("records")
    assert row["measure"].startswith("samples/s (the work per epoch differed")
    assert row["ratio"] == pytest.approx(2560 / 1.5 / 1280) and row["verdict"].startswith("faster (")  # not "slower": 1.5 s vs 1 s
    assert section.table("comparisons")["measure"].tolist() == ["samples/s (other work per epoch)"]


def test_a_ratio_to_the_float32_blas_baseline_is_judged_only_for_a_float32_run(tmp_path):
    for dtype in ("float32", "bfloat16"):
        def make(factor: float, dtype: str = dtype) -> dict[str, Any]:
            record = matmul_with_blas("cpu", 256, 0.1 * factor, 0.12)
            record["params"]["dtype"] = dtype
            return record
        runs(tmp_path, make, f"n-256_dtype-{dtype}")
    data = report.load_report_data([tmp_path])
    table = report.matmul_table(data).set_index("dtype")
    assert table.loc["float32", "ratio_to_blas_verdict"] == "slower (75 %, n = 3)"
    assert table.loc["bfloat16", "ratio_to_blas"] == pytest.approx(0.1 / 0.12)  # shown, as measured ...
    assert table.loc["bfloat16", "ratio_to_blas_verdict"] == "different dtype"  # ... but not called slower
    section = report.matmul_section(data)
    printed = section.table("matmul_tflops").set_index("dtype")
    assert printed.loc["bfloat16", "vs BLAS"] == "different dtype"  # said in the table, not judged
    assert "framework / BLAS" in section.table("matmul_tflops").columns
