"""The peak-FLOPS table: lookups by device name, TPU generations, the CPU estimate."""

from __future__ import annotations

import pytest

from colabkit.device.peaks import cpu_peak, gpu_peak, tpu_generation, tpu_peak


@pytest.mark.parametrize("name, precision, expected", [
    ("Tesla K80", "float32", 4.37), ("Tesla T4", "float16", 65.0), ("Tesla P100-PCIE-16GB", "float32", 9.3),
    ("Tesla V100-SXM2-16GB", "float32", 15.7), ("NVIDIA A100-SXM4-40GB", "bfloat16", 312.0),
    ("NVIDIA L4", "float32", 30.3), ("NVIDIA H100 80GB HBM3", "bfloat16", 989.4), ("NVIDIA H100 PCIe", "float32", 51.0),
])
def test_gpu_peaks_match_datasheets(name, precision, expected):
    assert gpu_peak(name, precision, 1).tflops == pytest.approx(expected)


def test_gpu_peak_scales_with_devices_and_names_its_source():
    peak = gpu_peak("Tesla V100-SXM2-16GB", "float32", 4)
    assert peak.tflops == pytest.approx(4 * 15.7) and peak.tflops_per_device == pytest.approx(15.7)
    assert "V100" in peak.source


@pytest.mark.parametrize("name, precision", [("Quadro RTX 9999", "float32"), ("Tesla T4", "bfloat16")])
def test_unknown_gpu_or_precision_gives_none(name, precision):
    assert gpu_peak(name, precision, 1) is None


@pytest.mark.parametrize("text, generation", [("v2-8", "v2"), ("v3-32", "v3"), ("v4-8", "v4"),
                                              ("v5litepod-8", "v5e"), ("v5p-8", "v5p"), ("v6e-1", "v6e"),
                                              ("", None), ("gpu", None)])
def test_tpu_generation_from_accelerator_type(text, generation):
    assert tpu_generation(text) == generation


def test_tpu_peak_is_per_core_times_cores():
    # v3: 123 TFLOPS per chip, 2 cores per chip; a v3-8 has 8 cores.
    assert tpu_peak("v3-8", 8).tflops == pytest.approx(4 * 123.0)
    assert tpu_peak(None, 8) is None


def test_cpu_peak_estimate_uses_widest_vector_unit():
    peak = cpu_peak(2, 2000.0, {"avx2", "avx512f", "fma"}, "test")
    assert peak.tflops == pytest.approx(2 * 2.0e9 * 64 / 1e12)
    assert cpu_peak(4, 3000.0, {"avx2"}, "test").tflops == pytest.approx(4 * 3.0e9 * 32 / 1e12)
    assert cpu_peak(2, None, {"avx2"}, "test") is None
