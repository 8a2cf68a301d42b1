"""`./run.sh device-rehearsal` end to end (docs/device.md): a Python 3.12 venv of the device image's packages
only (PyTorch 2.11 among them, as the image has it), the pre-flight, the pack installed with no registry, the
same run as on a lent GPU on the CPU; a zip under 16 MiB with records of every experiment (Keras on JAX, the
CNN on PyTorch too, no TensorFlow anywhere), the clocks of JAX and PyTorch, and a report; the summary printed
last. Then a run with no time to measure anything fails, saying so. Minutes: it runs in .ci/run's own step
(pytest -m device_rehearsal), which prints its time."""

from __future__ import annotations

import json
import os
import subprocess
import time
import zipfile

import pytest
from helpers import REPO

from colabkit.ondevice.bundle import SUMMARY_LINES, ZIP_LIMIT_BYTES

# A hang guard, not a speed test: the device run keeps to its own deadline (its stages' budgets), so how long it
# takes on this host is printed (.ci/run's table) and never asserted.
HANG_GUARD_S = 20 * 60


@pytest.mark.device_rehearsal
def test_the_device_run_rehearses_on_the_cpu_with_the_images_packages_and_no_registry(tmp_path):
    started = time.monotonic()
    done = subprocess.run(["./run.sh", "device-rehearsal"], cwd=REPO, capture_output=True, text=True,
                          timeout=HANG_GUARD_S, env={**os.environ, "COLABKIT_DEVICE_OUT": str(tmp_path)})
    seconds = time.monotonic() - started
    print(f"device-rehearsal took {seconds:.0f} s")
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    run_lines = lines[next(index for index, line in enumerate(lines) if line.startswith("on-device: $OUT")):]
    assert run_lines[0].startswith(f"on-device: $OUT is not set: the zip goes to {tmp_path}/")  # the first line
    assert run_lines[1].startswith("pre-flight: Python 3.12") and "files match manifest.json" in run_lines[1]
    assert run_lines[2].startswith("pre-flight: the ") and "whose version device/image.txt gives at that" in run_lines[2]
    assert any(line.startswith("stage install: ok") for line in lines)
    assert "on-device: no NVIDIA GPU here (nvidia-smi lists none): the CPU rehearsal" in done.stdout
    summary_start = next(index for index, line in enumerate(lines) if line.startswith("device: "))
    summary = lines[summary_start:lines.index(next(line for line in lines if line.startswith("zip: "))) + 1]
    assert len(summary) <= SUMMARY_LINES and "gpu-check: RAN clock jax, clock torch" in summary
    assert not [line for line in lines if "not installed" in line]
    [archive] = tmp_path.glob("*/colabkit-device-cpu-rehearsal-*.zip")
    assert archive.stat().st_size < ZIP_LIMIT_BYTES
    with zipfile.ZipFile(archive) as opened:
        names = opened.namelist()
        records = [json.loads(opened.read(name)) for name in names if name.startswith("results/")
                   and name.endswith(".json") and "/." not in name]
    assert "report/report.html" in names and "report/records.csv" in names and "summary.txt" in names
    ok = [record for record in records if record.get("status") == "ok"]
    assert {record["notebook"] for record in ok} == {"matmul_tflops", "cnn_mnist", "dblstm_har", "timeseries_rnn",
                                                    "paradnn"}
    assert {record["device"]["backend"] for record in ok} == {"jax", "torch"}
    assert {record["notebook"] for record in ok if record["device"]["backend"] == "torch"} == {"cnn_mnist"}
    # JAX's set-up says TensorFlow stayed out of its kernel; the image (and so the rehearsal's venv) has none at all
    assert {record["device"]["tensorflow_in_kernel"] for record in ok if record["device"]["backend"] == "jax"} == {
        "kept out"}
    assert not [record for record in records if record.get("status") in ("failed", "skipped")]


@pytest.mark.device_rehearsal
def test_a_device_run_with_no_time_to_measure_fails_and_its_summary_says_nothing_was_measured(tmp_path):
    done = subprocess.run(["./run.sh", "device-rehearsal", "--deadline", "50"], cwd=REPO, capture_output=True,
                          text=True, timeout=HANG_GUARD_S, env={**os.environ, "COLABKIT_DEVICE_OUT": str(tmp_path)})
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-4000:]
    lines = done.stdout.strip().splitlines()
    assert [line for line in lines if line.startswith("stage ") and "skipped for time" not in line
            and not line.startswith("stage install")] == ["stage report: skipped, 0 s of 40 s (no results to report)"]
    assert any(line.startswith("stages: ") and "NOTHING MEASURED" in line for line in lines)
    assert lines[-2].startswith("zip: ") and lines[-1].startswith("device-rehearsal: ") and lines[-1].endswith("(exit 1)")
