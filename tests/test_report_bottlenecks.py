"""The report's bottleneck items (where the time goes, the breakdown table, the operation breakdown)
over repeated runs and several series, and the helpers the sections share with them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import report_fixtures as fx

from colabkit import report
from colabkit.report.bottlenecks import breakdown_table
from colabkit.report.common import device_head
from colabkit.report.summary import short_of_target
from colabkit.training.shares import SHARES


def test_one_device_head_for_every_section(tmp_path: Path):
    fx.write(tmp_path, fx.cnn("tpu", 256), "batch_size-256")
    data = report.load_report_data([tmp_path])
    assert device_head(data.ok("cnn_mnist")["device_label"].iloc[0]) == "TPU x8"
    assert device_head("not a device") == "not a device"  # text no record's label produced stays as it is


def test_a_combination_short_of_its_target_gets_the_intervals_half_width(tmp_path: Path):
    for repeat, tflops in enumerate((0.1, 0.2, 0.15), start=1):
        record: dict[str, Any] = fx.matmul("cpu", 256, tflops)
        record["sweep"] = {"target_ci": 0.05}
        fx.write(tmp_path, record, "n-256" if repeat == 1 else f"n-256_repeat-{repeat}")
    (row,) = short_of_target(report.load_report_data([tmp_path])).to_dict("records")
    # 3 runs: the interval is their range, 0.1 to 0.2 around the median 0.15
    assert row["runs"] == 3 and row["half-width"] == pytest.approx(0.05 / 0.15) and row["target"] == 0.05


def cnn_run(shares: tuple[float, float, float], bound: str, roof: str | None, finished_at: str,
            device: str = "gpu", backend: str | None = None) -> dict[str, Any]:
    """A CNN run at batch 256 whose three throughputs give `shares` (input wait, host, device)."""
    record = fx.cnn(device, 256, backend=backend)
    record["finished_at"] = finished_at
    rate = record["metrics"]["samples_per_s"]
    wait, host, compute = shares
    record["metrics"].update(input_wait_share=wait, host_share=host, device_share=compute, bound_by=bound,
                             device_samples_per_s=rate / compute)
    record["breakdown"].update(memory_samples_per_s=rate / (1 - wait), roofline_bound=roof)
    return record


def test_a_combinations_shares_and_bound_by_come_from_its_median_throughputs_and_sum_to_one(tmp_path: Path):
    runs = [((0.6, 0.1, 0.3), "input", None), ((0.1, 0.6, 0.3), "host", None), ((0.3, 0.3, 0.4), "compute", "compute")]
    for repeat, (shares, bound, roof) in enumerate(runs, start=1):
        fx.write(tmp_path, cnn_run(shares, bound, roof, f"2026-01-0{repeat}T00:00:00+00:00"),
                 "batch_size-256" if repeat == 1 else f"batch_size-256_repeat-{repeat}")
    data = report.load_report_data([tmp_path])
    rate = data.ok("cnn_mnist")["metrics.samples_per_s"].iloc[0]
    (row,) = breakdown_table(data, "cnn_mnist").to_dict("records")
    # median rates: the run's, fed from memory median(1/.4, 1/.9, 1/.7) = 1/.7, device median(1/.3, 1/.3, 1/.4) = 1/.3
    assert [row[name] for name in SHARES] == pytest.approx([0.3, 0.4, 0.3])  # not 30/30/30 %, medians of shares
    assert row["runs"] == 3 and row["memory_samples_per_s"] == pytest.approx(rate / 0.7)
    assert row["bound_by"] == "host"  # what the shares say, not the latest run's "compute"
    section = report.cnn_section(data)
    printed = section.table("cnn_breakdown").iloc[0]
    assert [printed["input wait"], printed["host overhead"], printed["device time"]] == pytest.approx([0.3, 0.4, 0.3])
    assert printed["bound by"] == "host"
    bar = section.figure("cnn_where_time_goes")
    assert bar.data[list(SHARES)].iloc[0].tolist() == pytest.approx([0.3, 0.4, 0.3])
    assert "40 % is host overhead and 30 % device time: bound by host." in bar.caption


def test_passes_made_in_the_first_run_only_are_set_beside_that_runs_throughput(tmp_path: Path):
    """`bottlenecks: first`: repeats 2 and 3 made no passes; the table counts the one run that did, and
    sets its passes beside its own throughput, not beside the median of all three."""
    first = cnn_run((0.2, 0.3, 0.5), "device", None, "2026-01-01T00:00:00+00:00")
    first["fingerprint"] = {"params": dict(first["params"])}  # the combination's, in every run's record
    fx.write(tmp_path, first, "batch_size-256")
    for repeat in (2, 3):
        later = fx.cnn("gpu", 256)
        later["finished_at"] = f"2026-01-0{repeat}T00:00:00+00:00"
        later["metrics"]["samples_per_s"] = 2 * first["metrics"]["samples_per_s"]
        later["metrics"].update(dict.fromkeys(("input_samples_per_s", "device_samples_per_s", *SHARES, "bound_by")))
        later["params"]["breakdown"] = False  # as the sweep gave it (the combination's parameters stay the same)
        later["breakdown"] = {"measured": False, "reason": "breakdown=False: skipped on request"}
        later["fingerprint"] = first["fingerprint"]
        fx.write(tmp_path, later, f"batch_size-256_repeat-{repeat}")
    data = report.load_report_data([tmp_path])
    assert data.ok("cnn_mnist")["runs"].iloc[0] == 3  # all three count for the headline
    (row,) = breakdown_table(data, "cnn_mnist").to_dict("records")
    assert row["runs"] == 1 and row["samples_per_s"] == pytest.approx(first["metrics"]["samples_per_s"])
    assert [row[name] for name in SHARES] == pytest.approx([0.2, 0.3, 0.5])


def test_a_device_bound_combination_takes_the_roofline_answer_its_runs_gave(tmp_path: Path):
    for repeat, (bound, roof) in enumerate([("memory", "memory"), ("memory", "memory"), ("device", None)], start=1):
        fx.write(tmp_path, cnn_run((0.1, 0.1, 0.8), bound, roof, f"2026-01-0{repeat}T00:00:00+00:00"),
                 "batch_size-256" if repeat == 1 else f"batch_size-256_repeat-{repeat}")
    (row,) = breakdown_table(report.load_report_data([tmp_path]), "cnn_mnist").to_dict("records")
    assert row["bound_by"] == "memory"


def test_runs_of_different_backends_at_one_batch_are_separate_bars_and_rows(tmp_path: Path):
    for backend, shares in (("tensorflow", (0.6, 0.1, 0.3)), ("jax", (0.05, 0.15, 0.8))):
        for device in ("cpu", "gpu"):  # the fixture profiles the CPU's runs
            fx.write(tmp_path, cnn_run(shares, "input", None, "2026-01-01T00:00:00+00:00", device, backend),
                     f"backend-{backend}_batch_size-256")
    section = report.cnn_section(report.load_report_data([tmp_path]))
    bars = section.figure("cnn_where_time_goes")
    gpu = bars.data[bars.data["device"] == "GPU: Tesla T4"].set_index("series")
    assert len(gpu) == 2 and gpu.loc["GPU: Tesla T4, backend=jax", "device_share"] == pytest.approx(0.8)
    assert gpu.loc["GPU: Tesla T4, backend=tensorflow", "input_wait_share"] == pytest.approx(0.6)
    assert "On GPU: Tesla T4, backend=jax at batch 256" in bars.caption
    ticks = [tick.get_text() for tick in bars.figure.axes[0].get_xticklabels()]
    assert sum("backend=jax" in tick for tick in ticks) == 2
    assert set(section.table("cnn_breakdown")["series"]) >= {"GPU: Tesla T4, backend=jax",
                                                             "GPU: Tesla T4, backend=tensorflow"}
    ops = section.figure("cnn_op_breakdown")
    labels = [tick.get_text() for tick in ops.figure.axes[0].get_yticklabels()]
    assert sorted(labels) == ["backend=jax, batch 256", "backend=tensorflow, batch 256"]


def test_repeats_run_without_the_bottleneck_passes_leave_the_first_runs_breakdown_and_profile(tmp_path: Path):
    """The sweep may run the bottleneck passes (and a profile) in a combination's first repeat only: the
    repeats with breakdown=False are runs of the same combination, its breakdown and profile are the
    first run's, counted as one run, and no series is named after `breakdown`."""
    from colabkit.training.breakdown import BREAKDOWN_METRICS

    for repeat in (1, 2, 3):
        record = fx.cnn("cpu", 256)
        record["finished_at"] = f"2026-01-0{repeat}T00:00:00+00:00"
        if repeat > 1:
            record["params"]["breakdown"] = False
            record["metrics"].update(dict.fromkeys(BREAKDOWN_METRICS))
            record["breakdown"] = {"measured": False, "reason": "breakdown=False: skipped on request"}
            record.pop("op_breakdown")
        fx.write(tmp_path, record, "batch_size-256" if repeat == 1 else f"batch_size-256_repeat-{repeat}")
    data = report.load_report_data([tmp_path])
    assert data.ok("cnn_mnist")["runs"].tolist() == [3]
    (row,) = breakdown_table(data, "cnn_mnist").to_dict("records")
    assert row["runs"] == 1 and [row[name] for name in SHARES] == pytest.approx(list(fx.BREAKDOWN["cpu"][:3]))
    section = report.cnn_section(data)
    assert "cnn_op_breakdown" in section.figures and "breakdown=" not in section.table("cnn_breakdown").to_string()


def test_a_share_whose_interval_over_runs_reaches_0_is_not_resolved_and_names_no_bound(tmp_path: Path):
    # the smoke's CNN on in-memory data: input wait 0 %, 27 %, 4 % over its runs is most likely noise
    runs = [((0.0, 0.2, 0.8), "compute"), ((0.5, 0.1, 0.4), "input"), ((0.45, 0.15, 0.4), "input")]
    for repeat, (shares, bound) in enumerate(runs, start=1):
        fx.write(tmp_path, cnn_run(shares, bound, None, f"2026-01-0{repeat}T00:00:00+00:00"),
                 "batch_size-256" if repeat == 1 else f"batch_size-256_repeat-{repeat}")
    data = report.load_report_data([tmp_path])
    (row,) = breakdown_table(data, "cnn_mnist").to_dict("records")
    assert row["input_wait_share_low"] == 0.0 and not row["input_wait_share_resolved"]
    assert row["host_share_resolved"] and row["share_level"] == "75 %, n = 3"
    assert row["input_wait_share"] > row["host_share"] and row["bound_by"] == "not resolved"
    section = report.cnn_section(data)
    printed = section.table("cnn_breakdown").iloc[0]
    assert "input wait 0-50 % not resolved" in printed["shares' intervals"] and "(75 %, n = 3)" in printed["shares' intervals"]
    assert "Not resolved from 0 over its runs: input wait" in section.figure("cnn_where_time_goes").caption


def test_runs_whose_steady_part_is_too_short_for_a_stable_figure_are_named():
    import pandas as pd

    from colabkit.report.common import MIN_STEADY_S, too_short

    runs = pd.DataFrame({"metrics.steady_seconds": [0.5, 1.5, 2 * MIN_STEADY_S, None]})
    warning = too_short(runs)
    assert warning.startswith("2 of 4 run(s)") and "median 1 s" in warning and "noise may dominate" in warning
    assert too_short(runs.iloc[2:]) is None and too_short(pd.DataFrame(index=[0])) is None  # none, or not recorded
