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


@pytest.mark.parametrize("name, key_text, float32, bfloat16", [
    ("NVIDIA H100 NVL", "NVL", 60.0, 835.5),
    ("NVIDIA H200 NVL", "H200 datasheet (NVL", 60.0, 835.5),
    ("NVIDIA H100 80GB HBM3", "SXM", 67.0, 989.4),
    ("NVIDIA H200", "H200 datasheet (SXM", 67.0, 989.4),
    ("NVIDIA H100 PCIe", "PCIe", 51.0, 756.0),
])
def test_nvl_parts_are_not_taken_for_sxm(name, key_text, float32, bfloat16):
    assert gpu_peak(name, "float32", 1).tflops == pytest.approx(float32)
    peak = gpu_peak(name, "bfloat16", 2)
    assert peak.tflops == pytest.approx(2 * bfloat16)
    assert key_text in peak.source


def test_cpu_peak_counts_physical_cores_and_says_it_is_an_estimate():
    peak = cpu_peak(1, 2200.0, {"avx2"}, "cpufreq max", logical_cpus=2)
    assert peak.tflops == pytest.approx(1 * 2.2e9 * 32 / 1e12)  # one core, not two hyperthreads
    assert peak.devices == 1
    assert peak.source.startswith("estimate:")
    assert "1 physical core(s), 2 logical CPU(s)" in peak.source and "cpufreq max" in peak.source
    assert cpu_peak(None, 2200.0, {"avx2"}, "x", logical_cpus=2) is None  # unknown cores: no guess


# Two logical CPUs that are hyperthreads of one core (Colab's 2 vCPUs), then a 2-socket host.
HYPERTHREADED = "\n\n".join(
    f"processor\t: {cpu}\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\nphysical id\t: 0\nsiblings\t: 2\n"
    f"core id\t\t: 0\ncpu cores\t: 1\nflags\t\t: sse2 avx avx2 fma" for cpu in (0, 1)) + "\n"
TWO_SOCKETS = "\n\n".join(f"processor\t: {cpu}\nphysical id\t: {cpu // 4}\ncore id\t\t: {(cpu % 4) // 2}"
                          for cpu in range(8)) + "\n"
LSCPU_HT = "Architecture:            x86_64\nCPU(s):                  4\nThread(s) per core:      2\nCore(s) per socket:      2\n"


def test_physical_cores_from_cpuinfo_count_each_core_once():
    from colabkit.device.probes import physical_cores, physical_cores_from_cpuinfo

    assert physical_cores_from_cpuinfo(HYPERTHREADED) == 1
    assert physical_cores_from_cpuinfo(TWO_SOCKETS) == 4  # 2 sockets x 2 cores, 2 threads each
    assert physical_cores_from_cpuinfo(TWO_SOCKETS, usable={0, 1}) == 1  # affinity: one core's threads
    assert physical_cores_from_cpuinfo(TWO_SOCKETS, usable={0, 2, 4}) == 3
    assert physical_cores_from_cpuinfo("processor\t: 0\nBogoMIPS\t: 50\n") is None  # ARM-like: no core ids
    cores, how = physical_cores(2, {0, 1}, HYPERTHREADED, lscpu_text="")
    assert cores == 1 and "/proc/cpuinfo" in how


def test_physical_cores_fall_back_to_lscpu_threads_per_core():
    from colabkit.device.probes import physical_cores, threads_per_core_from_lscpu

    assert threads_per_core_from_lscpu(LSCPU_HT) == 2
    assert threads_per_core_from_lscpu("CPU(s): 4\n") is None
    cores, how = physical_cores(4, None, "", lscpu_text=LSCPU_HT)
    assert cores == 2 and "lscpu" in how
    assert physical_cores(4, None, "", lscpu_text="")[0] is None


def test_cpu_info_records_both_counts_and_the_clock_source():
    from colabkit.device.probes import cpu_info

    info = cpu_info()
    assert info["logical_cpus"] == info["cores"] >= 1
    assert info["physical_cores"] is None or 1 <= info["physical_cores"] <= info["logical_cpus"]
    assert info["physical_cores_source"] and info["clock_source"]
