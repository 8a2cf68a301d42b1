"""Inference figures over independent runs (docs/inference.md, "Over runs and within one run"): the report's p50,
p90, p99 and offline samples/s are medians over runs with the between-run interval at the level it reaches, the
verdicts between devices and backends rest on the runs alone, and the interval from one run's own queries is a
labelled column that judges nothing. Records are made by measure_inference on a fake model and clock: each run's
latencies scatter little around its own level (a tight within-run interval), the levels of runs scatter more."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import report_fixtures as fx

from colabkit.experiments.inference import inference_figures
from colabkit.inference import InferenceSettings, measure_inference
from colabkit.records.record import make_record
from colabkit.report import inference_section, load_report_data

LATENCIES = ["latency_p50_ms", "latency_p90_ms", "latency_p99_ms"]
OFFLINE = ["offline_samples_per_s_b1", "offline_samples_per_s_b8"]
CPU_SETUP = SimpleNamespace(kind="cpu", replicas=1, description={}, multi_worker=None)  # a DeviceSetup
MODEL = SimpleNamespace(layers=[SimpleNamespace(output=SimpleNamespace(shape=(None, 10)))],
                        weights=[SimpleNamespace(shape=(10, 10))], dtype_policy="float32")


def run_record(level: float, device: str = "cpu", backend: str = "tensorflow", seed: int = 0, queries: int = 400) -> dict:
    """One inference run of the CNN whose every call takes `level` times its usual time: a query about 1 ms with a
    2 % log-spread, a batch of b 0.1 ms x b. `queries` queries, offline at batches 1 and 8."""
    rng = np.random.default_rng(seed)
    clock = SimpleNamespace(now=0.0)

    def call(batch: np.ndarray) -> None:
        usual = 1e-3 if len(batch) == 1 else 1e-4 * len(batch)
        clock.now += level * usual * rng.lognormal(0.0, 0.02)

    settings = InferenceSettings(queries, 0.0, 600.0, "1,8", warmup_queries=2)
    measured = measure_inference(MODEL, np.zeros((16, 4)), CPU_SETUP, settings, call=call, clock=lambda: clock.now)
    params = {"device": device, "backend": backend, "mode": "inference", "queries": queries, "offline_batch_sizes": "1,8",
              "seed": 0, "test_samples": 512}
    return make_record("cnn_mnist", "ok", params, metrics=measured.metrics, device=fx.DEVICES[device],
                       data=fx.REAL_MNIST, **measured.record_fields)


def write_runs(root: Path, levels: list[float], device: str = "cpu", backend: str = "tensorflow", seed: int = 0,
               queries: int = 400) -> None:
    for repeat, level in enumerate(levels):
        suffix = "" if repeat == 0 else f"_repeat-{repeat + 1}"
        fx.write(root, run_record(level, device, backend, seed + repeat, queries),
                 f"mode-inference_backend-{backend}{suffix}")


def over_runs(section, device_or_backend: str) -> pd.DataFrame:
    table = section.table("inference_over_runs")
    rows = table[(table["device"].str.startswith(device_or_backend)) | (table["backend"] == device_or_backend)]
    return rows.set_index("metric")


def test_the_figures_are_ordered_latencies_then_offline_batches_by_size():
    names = ["offline_samples_per_s_b256", "latency_p99_ms", "offline_samples_per_s_b8", "latency_p50_ms",
             "offline_samples_per_s", "latency_p90_ms", "latency_p90_low_ms"]
    figures = inference_figures(names)
    assert [figure.metric for figure in figures] == [*LATENCIES, "offline_samples_per_s_b8",
                                                     "offline_samples_per_s_b256"]
    assert [figure.higher_is_better for figure in figures] == [False, False, False, True, True]


@pytest.mark.parametrize("across", ["device", "backend"])
def test_three_and_three_runs_give_between_run_intervals_on_every_figure_and_a_verdict(tmp_path, across):
    """The issue's Done-when: a report of 3 + 3 inference runs shows between-run intervals on p50/p90/p99 and
    offline throughput; the second device (or backend) is twice as slow, and the runs say so."""
    other = {"device": ("gpu", "tensorflow"), "backend": ("cpu", "jax")}[across]
    write_runs(tmp_path, [1.0, 1.05, 0.97])
    write_runs(tmp_path, [2.0, 2.1, 1.9], *other, seed=10)
    data = load_report_data([tmp_path])
    section = inference_section(data)
    table = section.table("inference_over_runs")
    assert len(table) == 10 and set(table["between_runs_level"]) == {"75 %, n = 3"} and (table["runs"] == 3).all()
    runs = data.runs(inference=True)
    for name, rows in (("reference", over_runs(section, "CPU").loc[LATENCIES + OFFLINE] if across == "device"
                        else over_runs(section, "tensorflow")),
                       ("candidate", over_runs(section, "GPU" if across == "device" else "jax"))):
        assert set(rows.index) == set(LATENCIES + OFFLINE), name
        mine = runs[runs["combination"] == rows["combination"].iloc[0]]
        for metric in LATENCIES + OFFLINE:  # the median over the 3 runs, its interval the runs' range (75 %)
            values = mine[f"metrics.{metric}"].astype(float)
            assert rows.at[metric, "median"] == pytest.approx(values.median())
            assert (rows.at[metric, "between_runs_low"], rows.at[metric, "between_runs_high"]) == \
                pytest.approx((values.min(), values.max()))
            within = rows.at[metric, "within_one_run_high"] - rows.at[metric, "within_one_run_low"]
            assert 0 < within < rows.at[metric, "between_runs_high"] - rows.at[metric, "between_runs_low"]
    verdicts = section.table("inference_verdicts").set_index("measure")
    assert len(verdicts) == 5 and (verdicts["runs_reference"] == 3).all() and (verdicts["runs_candidate"] == 3).all()
    for figure in inference_figures(LATENCIES + OFFLINE):  # latency x2 is slower; samples/s / 2 is slower too
        assert verdicts.at[figure.label, "verdict"] == "slower (75 %, n = 3)"
        expected = 2.0 if not figure.higher_is_better else 0.5
        assert verdicts.at[figure.label, "ratio"] == pytest.approx(expected, rel=0.1)
    inference_rows = data.frame[data.frame["params.mode"] == "inference"]
    assert set(inference_rows["headline.metric"]) == {"latency_p90_ms"}  # records.csv: the p90 over runs
    assert set(inference_rows["headline.level"]) == {0.75}
    offline = section.figure("inference_offline_throughput").data
    assert len(offline) == 4 and offline["between_runs_low"].notna().all()


def test_runs_whose_own_intervals_do_not_overlap_but_whose_runs_do_are_no_difference_resolved(tmp_path):
    """The bug the issue reports: a run's 400 queries pin its own p50 to +/- 1 %, so two devices' within-run
    intervals lie apart, yet their runs scatter over each other: no difference is resolved, in the report and in
    compare."""
    write_runs(tmp_path / "a", [1.0, 1.25, 0.8])
    write_runs(tmp_path / "b", [1.12, 0.85, 1.35], device="gpu", seed=10)
    section = inference_section(load_report_data([tmp_path / "a", tmp_path / "b"]))
    cpu, gpu = over_runs(section, "CPU"), over_runs(section, "GPU")
    for metric in LATENCIES:
        assert cpu.at[metric, "within_one_run_high"] < gpu.at[metric, "within_one_run_low"]  # apart within a run
        assert gpu.at[metric, "between_runs_low"] < cpu.at[metric, "between_runs_high"]  # overlapping over runs
    verdicts = section.table("inference_verdicts")
    assert set(verdicts["verdict"]) == {"no difference resolved (75 %, n = 3)"}
    assert section.table("inference")["verdict"].tolist() == ["no difference resolved (75 %, n = 3)"] * 5  # the body's
    write_runs(tmp_path / "c", [1.12, 0.85, 1.35], seed=10)  # the same runs on the CPU, as a folder to compare
    rows = fx.compare_folders(tmp_path / "a", tmp_path / "c")
    assert len(rows) == 5 and {row.comparison.verdict.value for row in rows} == {"no difference resolved"}


def test_fewer_than_three_runs_say_too_few_runs_and_invent_no_interval(tmp_path):
    write_runs(tmp_path, [1.0, 1.05])
    write_runs(tmp_path, [2.0, 2.1], device="gpu", seed=10)
    section = inference_section(load_report_data([tmp_path]))
    table = section.table("inference_over_runs")
    assert (table["runs"] == 2).all() and table[["between_runs_low", "between_runs_high"]].isna().all().all()
    assert set(table["between_runs_level"]) == {"no interval, n = 2"}
    assert table["note"].str.contains("too few runs").all()
    assert table["within_one_run_low"].notna().all()  # one run's own interval is there, and judges nothing
    assert set(section.table("inference_verdicts")["verdict"]) == {"too few runs"}
    assert set(section.table("inference")["verdict"]) == {"too few runs"}  # the body's table says it too


def test_a_percentile_its_queries_give_no_interval_is_no_run_of_that_figure(tmp_path):
    """p99 of 40 queries is the slowest of 40 (its interval takes 368): no run of it, in the report or compare."""
    write_runs(tmp_path / "a", [1.0, 1.05, 0.97], queries=40)
    write_runs(tmp_path / "b", [2.0, 2.1, 1.9], queries=40, seed=10)
    table = inference_section(load_report_data([tmp_path / "a"])).table("inference_over_runs")
    assert list(table["metric"]) == ["latency_p50_ms", "latency_p90_ms", *OFFLINE]
    rows = fx.compare_folders(tmp_path / "a", tmp_path / "b")
    assert sorted(row.measure for row in rows) == sorted(figure.label for figure in inference_figures(
        ["latency_p50_ms", "latency_p90_ms", *OFFLINE]))
    assert {row.comparison.verdict.value for row in rows} == {"slower"}
