"""The peak-FLOPS table: lookups by device name, TPU generations, the CPU estimate."""

from __future__ import annotations

import pytest

from colabkit.device.peaks import at_least, clock_basis, cpu_core, cpu_peak, gpu_peak, tpu_generation, tpu_peak


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


def test_an_unknown_microarchitecture_is_assumed_from_its_widest_vector_unit_and_says_so():
    peak = cpu_peak(2, 2000.0, {"avx2", "avx512f", "fma"}, "test")
    assert peak.tflops == pytest.approx(2 * 2.0e9 * 64 / 1e12) and "assumed from the ISA flags" in peak.source
    assert cpu_peak(4, 3000.0, {"avx2"}, "test").tflops == pytest.approx(4 * 3.0e9 * 32 / 1e12)
    assert cpu_peak(2, None, {"avx2"}, "test") is None
    assert cpu_peak(2, 2000.0, set(), "test") is None  # no FLOPs per cycle known: no guess


AVX512 = {"avx", "avx2", "fma", "avx512f"}


@pytest.mark.parametrize("vendor, family, model, flags, name, flops_per_cycle, core", [
    ("AuthenticAMD", 0x1A, 0x02, AVX512, "AMD EPYC", 64, "Zen 5 (EPYC 9005"),  # this project's host: full 512-bit
    ("AuthenticAMD", 0x1A, 0x44, AVX512, "AMD Ryzen 9 9950X", 64, "Zen 5 (EPYC 9005, Ryzen 9000)"),
    ("AuthenticAMD", 0x1A, 0x24, AVX512, "AMD Ryzen AI 9 HX 370", 32, "Zen 5 (mobile"),  # 256-bit datapaths
    ("AuthenticAMD", 0x19, 0x11, AVX512, "AMD EPYC 9654", 32, "Zen 4"),  # AVX-512 in two 256-bit halves: not 64
    ("AuthenticAMD", 0x19, 0x01, {"avx", "avx2", "fma"}, "AMD EPYC 7763", 32, "Zen 3"),
    ("AuthenticAMD", 0x17, 0x31, {"avx", "avx2", "fma"}, "AMD EPYC 7B12", 32, "Zen 2"),
    ("AuthenticAMD", 0x17, 0x01, {"avx", "avx2", "fma"}, "AMD EPYC 7601", 16, "Zen / Zen+"),
    ("GenuineIntel", 6, 79, {"avx", "avx2", "fma"}, "Intel(R) Xeon(R) CPU @ 2.20GHz", 32, "Haswell / Broadwell"),
    ("GenuineIntel", 6, 85, AVX512, "Intel(R) Xeon(R) CPU @ 2.00GHz", 64, "Skylake-SP"),  # Colab: two FMA units
    ("GenuineIntel", 6, 85, AVX512, "Intel(R) Xeon(R) Gold 6154 CPU @ 3.00GHz", 64, "Skylake-SP"),
    ("GenuineIntel", 6, 85, AVX512, "Intel(R) Xeon(R) Silver 4114 CPU @ 2.20GHz", 32, "one FMA unit"),
    ("GenuineIntel", 6, 85, AVX512, "Intel(R) Xeon(R) Gold 5118 CPU @ 2.30GHz", 32, "one FMA unit"),
    ("GenuineIntel", 6, 85, AVX512, "Intel(R) Xeon(R) Gold 5122 CPU @ 3.60GHz", 64, "Skylake-SP"),  # the exception
    ("GenuineIntel", 6, 143, AVX512 | {"amx_tile"}, "Intel(R) Xeon(R) Platinum 8481C", 64, "Sapphire Rapids"),
    ("GenuineIntel", 6, 140, AVX512, "11th Gen Intel(R) Core(TM) i7-1165G7", 32, "Tiger Lake"),
])
def test_flops_per_cycle_are_what_the_microarchitecture_executes(vendor, family, model, flags, name,
                                                                 flops_per_cycle, core):
    found = cpu_core(vendor, family, model, flags, name)
    assert found.fp32_flops_per_cycle == flops_per_cycle and core in found.name
    assert any(where in found.source for where in ("Optimization", "measured"))  # a named source, vendor's or measured
    peak = cpu_peak(2, 3000.0, flags | {"hypervisor"}, "/proc/cpuinfo cpu MHz", 2, vendor, family, model, name)
    assert peak.tflops == pytest.approx(2 * 3.0e9 * flops_per_cycle / 1e12)
    assert peak.basis == "estimate at the nominal clock" and "nominal clock" in peak.source


def test_the_clock_of_a_cpu_estimate_is_said():
    assert clock_basis("cpufreq max", set()) == "maximum boost"
    assert clock_basis("/proc/cpuinfo cpu MHz", {"hypervisor"}) == "nominal"  # a VM's TSC rate
    assert clock_basis("/proc/cpuinfo cpu MHz", set()) == "current"
    peak = cpu_peak(1, 4000.0, {"avx2"}, "cpufreq max")
    assert peak.basis == "estimate at the maximum boost clock" and peak.clock_mhz == 4000.0


def test_a_cpu_estimate_is_never_below_a_measured_rate_and_a_datasheet_is_not_raised():
    estimate = cpu_peak(2, 2600.0, AVX512 | {"hypervisor"}, "/proc/cpuinfo cpu MHz", 2, "AuthenticAMD", 0x1A, 2)
    assert estimate.tflops == pytest.approx(0.3328)  # 2 x 2.6 GHz x 64
    assert at_least(estimate, 0.30, "a scan") is estimate  # below: the estimate stands
    raised = at_least(estimate, 0.4992, "a matmul scan on this host")
    assert raised.tflops == pytest.approx(0.4992) and raised.clock_mhz == pytest.approx(3900.0)
    assert raised.basis == "estimate at the clock a matmul scan on this host implies"
    assert "raised: a matmul scan on this host reached 0.499 TFLOPS" in raised.source and "3900 MHz or more" in raised.source
    t4 = gpu_peak("Tesla T4", "float32", 1)
    assert at_least(t4, 9.0, "a scan") is t4 and t4.basis == "datasheet"  # flagged elsewhere, not raised
    assert at_least(None, 1.0, "a scan") is None


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
    if info["arch"] == "x86_64":  # what tells the microarchitecture: vendor, family and model number
        assert info["vendor"] in ("GenuineIntel", "AuthenticAMD", "HygonGenuine") and info["family"] >= 6
        assert isinstance(info["model_number"], int)
