"""Published peak matrix throughput and memory bandwidth of common accelerators, and an estimate
of a CPU's peak FLOPS (its bandwidth is measured in the run: colabkit.device.bandwidth).

Figures are dense (no structured-sparsity doubling), in TFLOPS, per device as TensorFlow sees
it: one GPU (a K80 board is two GPUs), one TPU core (TensorFlow shows one device per core).
Each entry names its source, so a fraction-of-peak in a report can be traced. A device or
dtype that is not in the table gives None: a missing peak is better than a guessed one. A CPU's
peak is an estimate: its cores x the FLOPs per cycle its microarchitecture executes (`cpu_core`)
x a clock whose kind it says (`clock_basis`), never below a rate measured on the host (`at_least`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import asdict, dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class PeakFlops:
    """Peak throughput of the devices a run used, and where the figure comes from."""

    tflops: float  # all replicas together
    tflops_per_device: float
    devices: int
    precision: str  # the arithmetic the peak refers to: "float32", "tf32", "bfloat16", ...
    source: str
    basis: str = "datasheet"  # a CPU's: "estimate at the <clock> clock" (clock_basis), or raised (at_least)
    clock_mhz: float | None = None  # a CPU's: the clock the estimate multiplies by

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def peak_metrics(peak: PeakFlops | None, reason: str) -> dict[str, Any]:
    """A record's peak metrics, `peak_tflops_source` the `reason` where there is no peak (peak_basis: datasheet or how)."""
    return {"peak_tflops": peak.tflops if peak else None, "peak_precision": peak.precision if peak else None,
            "peak_tflops_source": peak.source if peak else reason, "peak_basis": peak.basis if peak else None}


# (pattern on the device name, key, {precision: TFLOPS per device}, source)
_GPU_PEAKS: list[tuple[str, str, dict[str, float], str]] = [
    (r"K80", "K80", {"float32": 4.37},
     "NVIDIA Tesla K80 datasheet: 8.73 TFLOPS FP32 per board with GPU Boost, 2 GPUs per board"),
    (r"T4\b", "T4", {"float32": 8.1, "float16": 65.0},
     "NVIDIA T4 datasheet: 8.1 TFLOPS FP32, 65 TFLOPS FP16 tensor cores"),
    (r"P100.*SXM", "P100-SXM2", {"float32": 10.6, "float16": 21.2},
     "NVIDIA Tesla P100 datasheet (SXM2): 10.6 TFLOPS FP32, 21.2 TFLOPS FP16"),
    (r"P100", "P100-PCIe", {"float32": 9.3, "float16": 18.7},
     "NVIDIA Tesla P100 datasheet (PCIe): 9.3 TFLOPS FP32, 18.7 TFLOPS FP16"),
    (r"V100.*PCI", "V100-PCIe", {"float32": 14.0, "float16": 112.0},
     "NVIDIA Tesla V100 datasheet (PCIe): 14 TFLOPS FP32, 112 TFLOPS tensor"),
    (r"V100", "V100-SXM2", {"float32": 15.7, "float16": 125.0},
     "NVIDIA Tesla V100 datasheet (SXM2): 15.7 TFLOPS FP32, 125 TFLOPS tensor"),
    (r"A100", "A100", {"float32": 19.5, "tf32": 156.0, "float16": 312.0, "bfloat16": 312.0},
     "NVIDIA A100 datasheet (dense): 19.5 FP32, 156 TF32, 312 FP16/BF16 TFLOPS"),
    (r"\bL4\b", "L4", {"float32": 30.3, "tf32": 60.0, "float16": 121.0, "bfloat16": 121.0},
     "NVIDIA L4 datasheet (dense, half the sparsity figures): 30.3 FP32, 60 TF32, 121 FP16/BF16"),
    # NVL parts (PCIe cards with an NVLink bridge, lower clocks and power) come before the patterns
    # that would also match their names: "NVIDIA H100 NVL" is not an H100 SXM.
    (r"H100.*NVL", "H100-NVL", {"float32": 60.0, "tf32": 417.5, "float16": 835.5, "bfloat16": 835.5},
     "NVIDIA H100 datasheet (NVL column; dense = half its sparsity figures): 60 FP32, 417.5 TF32, "
     "835.5 FP16/BF16 TFLOPS"),
    (r"H200.*NVL", "H200-NVL", {"float32": 60.0, "tf32": 417.5, "float16": 835.5, "bfloat16": 835.5},
     "NVIDIA H200 datasheet (NVL column; dense = half its sparsity figures): 60 FP32, 417.5 TF32, "
     "835.5 FP16/BF16 TFLOPS"),
    (r"H100.*PCI", "H100-PCIe", {"float32": 51.0, "tf32": 378.0, "float16": 756.0, "bfloat16": 756.0},
     "NVIDIA H100 datasheet (PCIe, dense): 51 FP32, 378 TF32, 756 FP16/BF16 TFLOPS"),
    (r"H200", "H200-SXM", {"float32": 67.0, "tf32": 494.7, "float16": 989.4, "bfloat16": 989.4},
     "NVIDIA H200 datasheet (SXM, dense = half its sparsity figures): 67 FP32, 494.7 TF32, 989.4 FP16/BF16 TFLOPS"),
    (r"H100", "H100-SXM", {"float32": 67.0, "tf32": 494.7, "float16": 989.4, "bfloat16": 989.4},
     "NVIDIA H100 datasheet (SXM, dense): 67 FP32, 494.7 TF32, 989.4 FP16/BF16 TFLOPS"),
    # Colab's G4 runtime: "NVIDIA RTX PRO 6000 Blackwell Server Edition". Its datasheet gives FP32 and FP4 only
    # (no dense TF32/FP16/BF16 tensor figure), so only FP32 has a peak here.
    (r"RTX PRO 6000 Blackwell", "RTX-PRO-6000-Blackwell", {"float32": 120.0},
     "NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet: 120 TFLOPS FP32 (Colab's G4)"),
]

# TPU generation -> (bf16 TFLOPS per chip, TensorFlow devices per chip). On TPUs a float32 matmul
# runs as bfloat16 passes at TensorFlow's default precision, so the bf16 figure is its peak too.
_TPU_PEAKS: dict[str, tuple[float, int]] = {
    "v2": (45.0, 2),
    "v3": (123.0, 2),
    "v4": (275.0, 1),
    "v5e": (197.0, 1),
    "v5p": (459.0, 1),
    "v6e": (918.0, 1),
}
_TPU_SOURCE = "Google Cloud TPU system architecture docs: {tflops:g} bf16 TFLOPS per {gen} chip, {cores} core(s) per chip"

# A CPU's FP32 FLOPs per cycle per core AS ITS CORE EXECUTES THEM: FMA units x the lanes of their datapath
# x 2 (multiply + add), from the vendor's optimisation guides or a measurement, named in each row.
# (vendor_id, cpu family, models (inclusive ranges), needs the flag, core, FLOPs/cycle, source); first match.
_AMD_GUIDE = "AMD Software Optimization Guide for"
_CPU_CORES: list[tuple[str, int, tuple[tuple[int, int], ...], str | None, str, int, str]] = [
    ("AuthenticAMD", 0x17, ((0x00, 0x2F),), None, "Zen / Zen+", 16,
     f"{_AMD_GUIDE} AMD Family 17h Processors (2017): 2 FMA pipes of 128 bits"),
    ("AuthenticAMD", 0x17, ((0x30, 0xFF),), None, "Zen 2", 32,
     f"{_AMD_GUIDE} AMD Family 17h Models 30h and Greater Processors (2020): 2 FMA pipes of 256 bits"),
    ("AuthenticAMD", 0x19, ((0x00, 0xFF),), "avx512f", "Zen 4", 32,
     f"{_AMD_GUIDE} the AMD Zen4 Microarchitecture (2023): AVX-512 on 2 FMA pipes of 256 bits, a 512-bit "
     "instruction in two halves; measured: Yee 2022, Zen4's AVX512 teardown (numberworld.org)"),
    ("AuthenticAMD", 0x19, ((0x00, 0xFF),), None, "Zen 3", 32,
     f"{_AMD_GUIDE} AMD Family 19h Processors (2020): 2 FMA pipes of 256 bits"),
    ("AuthenticAMD", 0x1A, ((0x00, 0x1F), (0x40, 0x4F)), None, "Zen 5 (EPYC 9005, Ryzen 9000)", 64,
     f"{_AMD_GUIDE} the AMD Zen5 Microarchitecture (2024): 2 FMA pipes of 512 bits in the EPYC 9005 and Ryzen "
     "9000 parts (family 1Ah models 00h-1Fh, 40h-4Fh); measured: Yee 2024, Zen5's AVX512 teardown (numberworld.org)"),
    ("AuthenticAMD", 0x1A, ((0x20, 0x2F), (0x60, 0x6F)), None, "Zen 5 (mobile: Strix Point, Krackan Point)", 32,
     "measured: Yee 2024, Zen5's AVX512 teardown, and Chips and Cheese 2024, AMD's Strix Point: mobile Zen 5 "
     "executes 512-bit instructions on 256-bit datapaths"),
    ("GenuineIntel", 6, ((42, 42), (45, 45), (58, 58), (62, 62)), None, "Sandy Bridge / Ivy Bridge", 16,
     "Intel 64 and IA-32 Architectures Optimization Reference Manual: a 256-bit multiply and a 256-bit add "
     "per cycle, no FMA"),
    ("GenuineIntel", 6, ((60, 60), (63, 63), (69, 71), (61, 61), (79, 79), (86, 86), (78, 78), (94, 94),
                         (142, 142), (158, 158), (165, 166)), None, "Haswell / Broadwell / Skylake client", 32,
     "Intel 64 and IA-32 Architectures Optimization Reference Manual: 2 FMA units of 256 bits"),
    ("GenuineIntel", 6, ((85, 85), (106, 106), (108, 108), (143, 143), (207, 207), (173, 174)), "avx512f",
     "Skylake-SP / Cascade Lake / Ice Lake-SP / Sapphire Rapids and later Xeon", 64,
     "Intel 64 and IA-32 Architectures Optimization Reference Manual: 2 FMA units of 512 bits on most Xeon "
     "Scalable SKUs (Skylake-SP and Cascade Lake Bronze, Silver and most Gold 5xxx have one: 32)"),
    ("GenuineIntel", 6, ((125, 126), (140, 141), (167, 167)), None, "Ice Lake / Tiger Lake / Rocket Lake client", 32,
     "Intel 64 and IA-32 Architectures Optimization Reference Manual: one 512-bit FMA (ports 0 and 1 fused) "
     "or 2 of 256 bits"),
    ("GenuineIntel", 6, ((151, 151), (154, 154), (183, 183), (186, 186), (191, 191), (170, 170), (172, 172),
                         (197, 198)), None, "Alder Lake and later hybrid client (P-core figure)", 32,
     "Intel 64 and IA-32 Architectures Optimization Reference Manual: a P-core has 2 FMA units of 256 bits (an "
     "upper bound for the E-cores beside it)"),
]
_ONE_FMA_XEON = re.compile(r"Xeon.*\b(Bronze|Silver|Gold 5(?!122)\d{3})")  # one 512-bit FMA unit (Skylake-SP, Cascade Lake)
# Where the microarchitecture is not in the table: 2 FMA units of the widest vector width the flags show (an assumption).
_CPU_FLOPS_PER_CYCLE = [("avx512f", 64, "AVX-512"), ("avx2", 32, "AVX2"), ("avx", 16, "AVX"), ("sse2", 8, "SSE2")]


def clock_basis(clock_source: str, flags: set[str]) -> str:
    """Which clock a CPU estimate multiplies by, from where colabkit.device.probes.cpu_info read it:
    "maximum boost" (cpufreq's cpuinfo_max_freq: the highest one core may run, so the all-core rate is
    lower), "nominal" (/proc/cpuinfo in a VM: the TSC rate the hypervisor reports, which a boosting core
    passes), "current" (/proc/cpuinfo on bare metal: one core's clock when probed)."""
    if clock_source == "cpufreq max":
        return "maximum boost"
    return "nominal" if "hypervisor" in flags else "current"


@dataclass(frozen=True)
class CpuCore:
    """What one CPU core executes per cycle, and where that figure comes from."""

    name: str  # the microarchitecture, or "unknown microarchitecture"
    fp32_flops_per_cycle: int
    source: str


def cpu_core(vendor: str | None, family: int | None, model: int | None, flags: set[str],
             model_name: str = "") -> CpuCore | None:
    """The microarchitecture of a CPU from /proc/cpuinfo's vendor_id, cpu family and model (and flags and
    model name where the table needs them), with its FP32 FLOPs per cycle per core as the core executes
    them; else the widest vector unit its flags show, said to be an assumption; None without either."""
    for vendor_id, row_family, models, flag, name, flops, source in _CPU_CORES:
        if (vendor, family) == (vendor_id, row_family) and model is not None and (flag is None or flag in flags) \
                and any(low <= model <= high for low, high in models):
            if flops == 64 and vendor_id == "GenuineIntel" and model == 85 and _ONE_FMA_XEON.search(model_name):
                return CpuCore(f"{name}, one FMA unit", 32, f"{source}; this SKU ({model_name}) has one")
            return CpuCore(name, flops, source)
    for flag, flops, isa in _CPU_FLOPS_PER_CYCLE:
        if flag in flags:
            return CpuCore("unknown microarchitecture", flops,
                           f"assumed from the ISA flags: 2 FMA units of {isa} width (the microarchitecture, "
                           f"{vendor or '?'} family {family} model {model}, is not in colabkit's table)")
    return None


def tpu_generation(accelerator_type: str | None) -> str | None:
    """The TPU generation of the peaks table, from a TPU's accelerator type or JAX's `device_kind`:
    'v2-8' -> 'v2', 'v5litepod-8' -> 'v5e', 'TPU v4' -> 'v4', 'TPU v5 lite' -> 'v5e', 'TPU v5' -> 'v5p',
    'TPU v6 lite' or 'TPU v6e' -> 'v6e'; None when unknown or not in the table (the inference chip
    'TPU v4 lite', 'TPU7x'). JAX's names are those JAX's own Pallas TPU code maps to chip versions."""
    if not accelerator_type:
        return None
    text = accelerator_type.lower().replace(" ", "")
    if "v4lite" in text or "v4i" in text:  # TPU v4i, the inference chip: not a v4, and not in the table
        return None
    if "v5lite" in text or "v5e" in text:
        return "v5e"
    if "v6" in text:
        return "v6e"
    match = re.search(r"v(\d)(p?)", text)
    if not match:
        return None
    generation = f"v{match.group(1)}{match.group(2)}"
    if generation == "v5":  # JAX calls a v5p "TPU v5" (and a v5e "TPU v5 lite", above)
        return "v5p"
    return generation if generation in _TPU_PEAKS else None


def gpu_peak(name: str, precision: str, devices: int) -> PeakFlops | None:
    """Peak of `devices` GPUs called `name` at `precision`, or None if the table lacks it."""
    for pattern, _key, table, source in _GPU_PEAKS:
        if re.search(pattern, name, flags=re.IGNORECASE):
            per_device = table.get(precision)
            if per_device is None:
                return None
            return PeakFlops(per_device * devices, per_device, devices, precision, source)
    return None


def tpu_peak(accelerator_type: str | None, devices: int) -> PeakFlops | None:
    """Peak of `devices` TPU cores (TensorFlow devices) of the given accelerator type."""
    generation = tpu_generation(accelerator_type)
    if generation is None:
        return None
    per_chip, cores_per_chip = _TPU_PEAKS[generation]
    per_device = per_chip / cores_per_chip
    source = _TPU_SOURCE.format(tflops=per_chip, gen=generation, cores=cores_per_chip)
    return PeakFlops(per_device * devices, per_device, devices, "bfloat16", source)


def cpu_peak(cores: int | None, clock_mhz: float | None, flags: set[str], clock_source: str,
             logical_cpus: int | None = None, vendor: str | None = None, family: int | None = None,
             model: int | None = None, model_name: str = "") -> PeakFlops | None:
    """Estimated FP32 peak of `cores` PHYSICAL CPU cores: cores x clock x FLOPs per cycle per core as the
    microarchitecture executes them (`cpu_core`: from vendor, family and model; Zen 4 runs AVX-512 at 32,
    not 64).

    Hyperthread siblings share one core's FMA units, so logical CPUs (`logical_cpus`, recorded in
    the source text) must not be multiplied in: Colab's 2 vCPUs are one core. Which clock is said in
    `basis` and the source (CLOCK_BASES): a maximum boost clock is one core's best, a VM's reported clock
    its nominal one, which a boosting core passes. None when the physical cores, the clock or the
    FLOPs per cycle are unknown: no peak is better than a guessed one.
    """
    core = cpu_core(vendor, family, model, flags, model_name)
    if not clock_mhz or not cores or cores <= 0 or core is None:
        return None
    logical = f", {logical_cpus} logical CPU(s)" if logical_cpus else ""
    clock = clock_basis(clock_source, flags)
    per_core = clock_mhz * 1e6 * core.fp32_flops_per_cycle / 1e12
    source = (f"estimate: {cores} physical core(s){logical} x {clock_mhz:.0f} MHz ({clock} clock: {clock_source}) x "
              f"{core.fp32_flops_per_cycle} FP32 FLOPs/cycle ({core.name}: {core.source})")
    return PeakFlops(per_core * cores, per_core, cores, "float32", source, f"estimate at the {clock} clock", clock_mhz)


def at_least(peak: PeakFlops | None, measured_tflops: float | None, what: str) -> PeakFlops | None:
    """A CPU estimate never below a measured rate: where `measured_tflops` (`what` measured it: "a matmul
    scan on this host") passes it, the clock was wrong (a core boosting above a nominal clock), so the
    peak is raised to the clock the measurement implies at the same FLOPs per cycle, and says so. A
    datasheet peak (a GPU's, a TPU's) is returned as it is: there the record flags the excess instead
    (TF32 or a boost clock, colabkit.device.achievable)."""
    if peak is None or not measured_tflops or measured_tflops <= peak.tflops or not peak.clock_mhz \
            or not peak.basis.startswith("estimate"):
        return peak
    clock = peak.clock_mhz * measured_tflops / peak.tflops
    return dataclasses.replace(
        peak, tflops=measured_tflops, tflops_per_device=measured_tflops / peak.devices, clock_mhz=clock,
        basis=f"estimate at the clock {what} implies",
        source=f"{peak.source}; raised: {what} reached {measured_tflops:.3g} TFLOPS, above this estimate "
               f"({peak.tflops:.3g}), so the cores ran at {clock:.0f} MHz or more")


BandwidthQuality = Literal["vendor", "secondary", "measured"]


@dataclass(frozen=True)
class PeakBandwidth:
    """Peak memory bandwidth of the devices a run used, and where the figure comes from.

    `quality`: "vendor" (the maker's datasheet or docs), "secondary" (a figure from a secondary
    source, to re-check against the vendor before publishing), "measured" (a CPU measured in the
    run: a lower bound on its peak).
    """

    gb_per_s: float  # all replicas together (a CPU's replicas share one memory: the host's figure)
    gb_per_s_per_device: float
    devices: int
    source: str
    quality: BandwidthQuality
    min_gb_s: float | None = None  # measured: the slowest pass (gb_per_s is the best); None for a datasheet
    measured_at: str | None = None  # measured: when (UTC, ISO 8601)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# (pattern on the device name, minimum memory in GiB or None, GB/s per device, source, quality).
# The first row whose pattern matches and whose memory bound holds wins: bigger boards first.
_GPU_BANDWIDTH: list[tuple[str, float | None, float, str, BandwidthQuality]] = [
    (r"K80", None, 240.0, "Tesla K80: 480 GB/s per board, 2 GPUs per board (secondary source)", "secondary"),
    (r"T4\b", None, 320.0, "NVIDIA T4 datasheet: 320 GB/s GDDR6", "vendor"),
    (r"P100", 14.0, 732.0, "Tesla P100 16 GB: 732 GB/s HBM2 (secondary source)", "secondary"),
    (r"P100", None, 549.0, "Tesla P100 12 GB: 549 GB/s HBM2 (secondary source)", "secondary"),
    (r"V100", None, 900.0, "NVIDIA Tesla V100 datasheet: 900 GB/s HBM2", "vendor"),
    (r"A100.*(SXM|HBM2e)", 60.0, 2039.0, "A100 80 GB SXM: 2,039 GB/s HBM2e (secondary source)", "secondary"),
    (r"A100", 60.0, 1935.0, "A100 80 GB PCIe: 1,935 GB/s HBM2e (secondary source)", "secondary"),
    (r"A100", None, 1555.0, "NVIDIA A100 datasheet, 40 GB: 1,555 GB/s HBM2", "vendor"),
    (r"\bL4\b", None, 300.0, "NVIDIA L4: 300 GB/s GDDR6 (secondary source)", "secondary"),
    (r"H200", None, 4800.0, "NVIDIA H200: 4,800 GB/s HBM3e (secondary source)", "secondary"),
    (r"H100.*NVL", None, 3900.0, "NVIDIA H100 NVL: 3,900 GB/s HBM3 per GPU (secondary source)", "secondary"),
    (r"H100.*PCI", None, 2000.0, "NVIDIA H100 datasheet (PCIe): about 2,000 GB/s HBM2e", "vendor"),
    (r"H100", None, 3350.0, "NVIDIA H100 datasheet (SXM): 3,350 GB/s HBM3", "vendor"),
    (r"RTX PRO 6000 Blackwell", None, 1597.0,
     "NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet: 1,597 GB/s GDDR7, 96 GB (Colab's G4)", "vendor"),
]

# TPU generation -> HBM GB/s per chip (Google Cloud TPU docs, system architecture pages).
_TPU_BANDWIDTH: dict[str, float] = {"v2": 600.0, "v3": 900.0, "v4": 1200.0, "v5e": 819.0, "v5p": 2765.0,
                                    "v6e": 1640.0}


def gpu_bandwidth(name: str, devices: int, memory_gib: float | None = None) -> PeakBandwidth | None:
    """Peak memory bandwidth of `devices` GPUs called `name`, or None if the table lacks it.

    `memory_gib` tells the P100 and A100 boards apart; without it the smaller board is assumed.
    """
    for pattern, min_memory, per_device, source, quality in _GPU_BANDWIDTH:
        if not re.search(pattern, name, flags=re.IGNORECASE):
            continue
        if min_memory is not None and (memory_gib is None or memory_gib < min_memory):
            continue
        return PeakBandwidth(per_device * devices, per_device, devices, source, quality)
    return None


def tpu_bandwidth(accelerator_type: str | None, devices: int) -> PeakBandwidth | None:
    """Peak HBM bandwidth of `devices` TPU cores (TensorFlow devices; v2 and v3 have 2 per chip)."""
    generation = tpu_generation(accelerator_type)
    if generation is None or generation not in _TPU_BANDWIDTH:
        return None
    per_chip = _TPU_BANDWIDTH[generation]
    cores_per_chip = _TPU_PEAKS[generation][1]
    per_device = per_chip / cores_per_chip
    source = (f"Google Cloud TPU system architecture docs: {per_chip:,.0f} GB/s HBM per {generation} chip, "
              f"{cores_per_chip} core(s) per chip")
    return PeakBandwidth(per_device * devices, per_device, devices, source, "vendor")


# TPU generation -> HBM GiB per chip (Google Cloud TPU docs, system architecture pages); v2 and v3
# chips have 2 cores (TensorFlow devices) that split it.
_TPU_HBM_GIB: dict[str, float] = {"v2": 16.0, "v3": 32.0, "v4": 32.0, "v5e": 16.0, "v5p": 95.0, "v6e": 32.0}


def tpu_memory_gib(accelerator_type: str | None) -> tuple[float, str] | None:
    """HBM of one TPU core (TensorFlow device) of the given accelerator type, in GiB, and its source;
    None when the generation is unknown."""
    generation = tpu_generation(accelerator_type)
    if generation is None or generation not in _TPU_HBM_GIB:
        return None
    per_chip, cores_per_chip = _TPU_HBM_GIB[generation], _TPU_PEAKS[generation][1]
    source = (f"Google Cloud TPU system architecture docs: {per_chip:g} GiB HBM per {generation} chip, "
              f"{cores_per_chip} core(s) per chip")
    return per_chip / cores_per_chip, source
