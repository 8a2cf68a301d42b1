"""The matmul notebook through papermill with smoke parameters: its record's numbers add up."""

from __future__ import annotations

import papermill
import pytest
from helpers import execute_notebook, visible_gpus

from colabkit.experiments import get
from colabkit.records.record import read_record
from colabkit.sweep.devices import detect_devices

pytestmark = pytest.mark.notebook


def check_flops_arithmetic(record):
    params, metrics = record["params"], record["metrics"]
    replicas = record["device"]["replicas"]
    flops = 2 * params["n"] ** 3 * params["count"] * replicas
    assert metrics["flops_per_call"] == flops
    timing = record["timings"]["matmul"]
    assert metrics["tflops_warm"] == pytest.approx(flops / timing["median_s"] / 1e12, rel=1e-9)
    assert metrics["tflops_cold"] == pytest.approx(flops / timing["cold_s"] / 1e12, rel=1e-9)
    assert metrics["tflops_warm_max"] == pytest.approx(flops / timing["min_s"] / 1e12, rel=1e-9)
    assert metrics["tflops_warm_min"] <= metrics["tflops_warm"] <= metrics["tflops_warm_max"]
    assert len(timing["warm_s"]) == params["timed_calls"]
    if metrics["peak_tflops"]:
        assert metrics["fraction_of_peak"] == pytest.approx(metrics["tflops_warm"] / metrics["peak_tflops"])


def test_cpu_smoke_run_records_consistent_numbers_and_blas_baseline(tmp_path, warm_kernels):
    executed, record_path = execute_notebook("matmul_tflops", tmp_path, warm_kernels, device="cpu", n=256, count=3,
                                             timed_calls=3)
    record = read_record(record_path)
    assert record["status"] == "ok" and record["notebook"] == "matmul_tflops"
    assert record["device"]["kind"] == "cpu" and record["device"]["replicas"] == 1
    assert record["data"]["source"] == "synthetic"
    check_flops_arithmetic(record)
    metrics = record["metrics"]
    assert set(get("matmul_tflops").metrics) <= set(metrics)  # every metric its declaration promises
    expected = {**get("matmul_tflops").defaults, "device": "cpu", "n": 256, "count": 3, "timed_calls": 3}
    del expected["results_path"]
    assert record["params"] == expected  # every declared parameter, read back from the parameters cell
    assert metrics["blas_tflops"] > 0
    assert metrics["ratio_to_blas"] == pytest.approx(metrics["tflops_warm"] / metrics["blas_tflops"])
    blas = record["timings"]["blas"]  # measured to a minimum time, its samples and host kept, and judged
    assert blas["measured_s"] >= blas["min_time_s"] == 0.5 and len(blas["samples_s"]) >= 5
    assert blas["calls_per_sample"] >= 1 and "other_cpu_share" in blas["host"]
    assert isinstance(metrics["blas_stable"], bool)
    assert (metrics["blas_unstable_reason"] is None) == metrics["blas_stable"]
    assert isinstance(record["host_quiet"], bool) and record["host_state"]["wall_s"] > 0
    assert metrics["xla"] is False  # "auto" means oneDNN graphs on CPU
    outputs = [output for cell in executed.cells for output in cell.get("outputs", [])]
    assert any("image/png" in output.get("data", {}) for output in outputs), "the notebook's plot is missing"


def test_two_logical_cpu_replicas_both_count(tmp_path, warm_kernels):
    _, record_path = execute_notebook("matmul_tflops", tmp_path, warm_kernels, device="cpu:2", n=128, count=2,
                                      timed_calls=2, dtype="bfloat16", blas_baseline=False)
    record = read_record(record_path)
    assert record["device"]["replicas"] == 2 and record["device"]["strategy"] == "MirroredStrategy"
    assert record["device"]["logical_devices"] == 2
    check_flops_arithmetic(record)
    assert "blas_tflops" not in record["metrics"]


@pytest.mark.gpu
def test_gpu_smoke_run_measures_the_gpu_nvidia_smi_lists(tmp_path):
    from colabkit.device.probes import nvidia_smi

    gpus = nvidia_smi()
    assert len(gpus) == visible_gpus()  # the probe sees what `nvidia-smi -L` lists
    _, record_path = execute_notebook("matmul_tflops", tmp_path, device="gpu", n=1024, count=3, timed_calls=3,
                                      blas_baseline=False)
    record = read_record(record_path)
    assert record["status"] == "ok" and record["device"]["kind"] == "gpu" and record["device"]["replicas"] == 1
    assert record["device"]["name"] == gpus[0]["name"]
    check_flops_arithmetic(record)
    if record["metrics"]["peak_tflops"]:  # a measured rate above the datasheet peak is a broken clock
        assert 0 < record["metrics"]["fraction_of_peak"] <= 1


@pytest.mark.skipif("gpu" in detect_devices(), reason="this machine has a GPU")
def test_gpu_on_this_machine_fails_at_device_setup_with_the_inventory(tmp_path):
    with pytest.raises(papermill.PapermillExecutionError) as info:
        execute_notebook("matmul_tflops", tmp_path, device="gpu", n=128)
    error = info.value
    assert error.ename == "DeviceNotFoundError"
    assert "device 'gpu' requested but this machine has: CPU:0" in error.evalue
    assert "setup_device(device, backend=backend)" in error.source  # it stops at set-up, before any measurement
    assert not (tmp_path / "record.json").exists()
