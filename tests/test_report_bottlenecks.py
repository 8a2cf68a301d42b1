"""The report's bottleneck items (where the time goes, the breakdown table, the operation breakdown)
over repeated runs and several series, and the helpers the sections share with them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import report_fixtures as fx

from colabkit import report
from colabkit.report.common import device_head
from colabkit.report.summary import short_of_target


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
