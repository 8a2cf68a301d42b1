"""Board power through NVML, with a fake `pynvml`: energy is integrated over the steady epochs only,
and every run without NVML power readings records None with the reason."""

from __future__ import annotations

import sys
import time
import types

import pytest

from colabkit.device.energy import PowerSampler, energy_metrics, visible_gpu_indices


def fake_nvml(monkeypatch, watts_per_gpu: float = 100.0, fails: bool = False) -> types.ModuleType:
    nvml = types.ModuleType("pynvml")
    nvml.calls = []

    def init():
        nvml.calls.append("init")
        if fails:
            raise RuntimeError("NVML Shared Library Not Found")

    nvml.nvmlInit = init
    nvml.nvmlShutdown = lambda: nvml.calls.append("shutdown")
    nvml.nvmlDeviceGetHandleByIndex = lambda index: f"gpu{index}"
    nvml.nvmlDeviceGetPowerUsage = lambda handle: int(watts_per_gpu * 1000)  # milliwatts, as NVML reports
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    return nvml


def test_power_of_two_boards_is_summed_and_integrated_over_a_window(monkeypatch):
    nvml = fake_nvml(monkeypatch, watts_per_gpu=100.0)
    with PowerSampler([0, 1], interval_s=0.01) as sampler:
        start = time.perf_counter()
        time.sleep(0.2)
        end = time.perf_counter()
    assert sampler.unavailable_reason is None and len(sampler.samples) >= 3
    assert {watts for _, watts in sampler.samples} == {200.0}
    assert sampler.energy_j(start, end) == pytest.approx(200.0 * (end - start))
    assert nvml.calls == ["init", "shutdown"]
    metrics = energy_metrics(sampler, [(start, end)], [1000])
    assert metrics["mean_power_w"] == pytest.approx(200.0)
    assert metrics["energy_j_per_sample"] == pytest.approx(200.0 * (end - start) / 1000)
    assert metrics["energy_reason"] is None


def test_without_nvml_or_with_a_failing_driver_the_figures_are_none_with_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    with PowerSampler([0]) as sampler:
        pass
    assert energy_metrics(sampler, [(0.0, 1.0)], [10]) == {
        "energy_j_per_epoch": None, "energy_j_per_sample": None, "mean_power_w": None,
        "energy_reason": "NVML is not installed (pip install nvidia-ml-py)"}
    fake_nvml(monkeypatch, fails=True)
    with PowerSampler([0]) as sampler:
        pass
    assert "NVML Shared Library Not Found" in energy_metrics(sampler, [(0.0, 1.0)], [10])["energy_reason"]


def test_visible_devices_map_to_nvml_indices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert visible_gpu_indices(1) == [2]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert visible_gpu_indices(2) == [0, 1]
    for hides_all in ("", "-1"):  # set but empty, or CUDA's "none": a CPU job's kernel sees no GPU
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hides_all)
        assert visible_gpu_indices(2) == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,x,0")  # CUDA stops at the first invalid entry
    assert visible_gpu_indices(3) == [1]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-5d3c")  # UUIDs: not mapped, NVML's order
    assert visible_gpu_indices(1) == [0]


def test_the_meter_leaves_the_first_epoch_out_and_counts_steady_samples(monkeypatch):
    from colabkit.training.energy import EnergyMeter

    fake_nvml(monkeypatch, watts_per_gpu=50.0)
    meter = EnergyMeter("gpu", replicas=1, global_batch_size=32, interval_s=0.01)
    for epoch in range(3):
        meter.on_epoch_begin(epoch)
        for step in range(4):
            meter.on_train_batch_begin(step)
            time.sleep(0.01)
            meter.on_train_batch_end(step)
        meter.on_epoch_end(epoch)
    meter.on_train_end()
    assert len(meter.intervals) == 2 and meter.samples == [128, 128]  # epochs 2 and 3 only
    metrics = meter.metrics()
    assert metrics["mean_power_w"] == pytest.approx(50.0)
    assert metrics["energy_j_per_epoch"] == pytest.approx(50.0 * (meter.intervals[0][1] - meter.intervals[0][0]), rel=0.3)
    cpu = EnergyMeter("cpu", replicas=1, global_batch_size=32)
    assert cpu.metrics()["energy_reason"].startswith("power is read through NVML on NVIDIA GPUs only")


def test_the_meter_counts_a_partial_last_batch_as_what_it_holds(monkeypatch):
    from colabkit.training.energy import EnergyMeter

    fake_nvml(monkeypatch, watts_per_gpu=50.0)
    # 100 samples in batches of 32: 32 + 32 + 32 + 4 per epoch, not 4 x 32 = 128.
    meter = EnergyMeter("gpu", replicas=1, global_batch_size=32, interval_s=0.01, dataset_size=100)
    for epoch in range(2):
        meter.on_epoch_begin(epoch)
        for step in range(4):
            meter.on_train_batch_begin(step)
            meter.on_train_batch_end(step)
        meter.on_epoch_end(epoch)
    meter.on_train_end()
    assert meter.samples == [100]
