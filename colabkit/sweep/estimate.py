"""How long a sweep's plan will take: the estimate `sweep --dry-run` prints, and what it rests on.

Each combination costs a fixed cost (FIXED_COST_S, measured by benchmarks/sweep_overhead.py: kernel
start, imports, set-up, products; an accelerator adds its start-up per fresh kernel) plus its work:
the declaration's FLOPs (Experiment.work_flops) at a best-case rate (a NumPy matmul calibration on a
CPU, the peaks table on a GPU or TPU), so the work is a lower bound; combinations without FLOPs count
their fixed cost only, and the estimate says how many.
"""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from colabkit.device.peaks import gpu_peak, tpu_peak
from colabkit.device.spec import DeviceKind
from colabkit.experiments import find
from colabkit.sweep.expand import Combination
from colabkit.timing.clock import format_duration

# Seconds per ParaDnn smoke combination outside its steady epochs (the first epoch's tracing included),
# on this project's 2-core CPU (benchmarks/sweep_overhead.py breakdown, 2026-11-25, a shared host:
# docs/sweep.md). The host's bandwidth probe (1-5 s once per sweep, CPU runs of ParaDnn) is not in it.
FIXED_COST_S = {"fresh": 8.2, "reuse": 2.4}
NEW_KERNEL_S = 4.2  # reuse: a new kernel's start, first imports and first clean-up, once per kernel
PRECISIONS = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}


@functools.lru_cache(maxsize=1)
def cpu_rate_flops(n: int = 1024, repeats: int = 5) -> float:
    """This CPU's float32 matrix-product rate (FLOP/s), from NumPy: the best of `repeats` n x n products
    (a fraction of a second)."""
    import numpy as np

    a = np.random.default_rng(0).random((n, n), dtype=np.float32)
    best = math.inf
    for _ in range(repeats + 1):
        start = time.perf_counter()
        np.matmul(a, a)
        best = min(best, time.perf_counter() - start)
    return 2.0 * n**3 / best


def accelerator_rate(kind: str, precision: str, name: str | None = None) -> tuple[float, str] | None:
    """(FLOP/s, source) of one GPU (named `name`, else the first nvidia-smi lists) or TPU core (this
    runtime's TPU_ACCELERATOR_TYPE, else `name`) from the peaks table; None where it is not known."""
    if kind == DeviceKind.TPU:
        peak = tpu_peak(name or os.environ.get("TPU_ACCELERATOR_TYPE"), 1)
    else:
        if name is None:
            from colabkit.device.probes import nvidia_smi

            gpus = nvidia_smi()
            name = gpus[0].get("name") if gpus else None
        if name is None:
            return None
        # float32 matrix products run as TF32 where the GPU has it (TensorFlow's default)
        peak = (gpu_peak(name, "tf32", 1) if precision == "float32" else None) or gpu_peak(name, precision, 1)
    return (peak.tflops * 1e12, f"{peak.source} ({peak.precision} peak)") if peak else None


@dataclass
class PlanEstimate:
    """The estimate of a plan: its parts in seconds and what each rests on."""

    runs: int = 0
    fixed_s: float = 0.0
    work_s: float = 0.0
    without_work: int = 0  # runs whose declaration gives no FLOPs
    unknown_rate: int = 0  # runs whose device's rate is not known here
    kernels: int = 0  # reuse: new kernels started
    rates: dict[str, str] = field(default_factory=dict)  # device kind -> what its rate is
    # each run's own part of `seconds`, in order (a warm kernel's start counted with its first run): what
    # `sweep --colab` cuts its sessions by
    run_seconds: list[float] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.fixed_s + self.work_s

    def lines(self) -> list[str]:
        if not self.runs:
            return ["estimated wall time: nothing to run"]
        text = [f"estimated wall time: {describe_seconds(self.seconds)} for {self.runs} run(s) = fixed cost "
                f"{describe_seconds(self.fixed_s)} + work {describe_seconds(self.work_s)}",
                f"  fixed cost: {FIXED_COST_S['fresh']:g} s per run in a fresh kernel, {FIXED_COST_S['reuse']:g} s in "
                f"a warm one plus {NEW_KERNEL_S:g} s per new kernel ({self.kernels} here): ParaDnn smoke models on a "
                "2-core CPU (benchmarks/sweep_overhead.py); an accelerator's start-up is not in it",
                "  work: the FLOPs the experiments' declarations count, at the rates below (best cases: a lower "
                "bound)"]
        text += [f"  rate on {kind}: {source}" for kind, source in sorted(self.rates.items())]
        if self.without_work:
            text.append(f"  {self.without_work} run(s) have no FLOP count in their declaration: fixed cost only")
        if self.unknown_rate:
            text.append(f"  {self.unknown_rate} run(s) on a device whose rate is not known here: fixed cost only")
        return text


def _kind(combination: Combination) -> str:
    kind = combination.request.kind
    if kind != DeviceKind.AUTO:
        return str(kind)
    from colabkit.device.probes import nvidia_smi, tpu_runtime_hint

    return "tpu" if tpu_runtime_hint() else "gpu" if nvidia_smi() else "cpu"


def estimate_plan(combinations: Iterable[Combination],
                  rates: Mapping[str, tuple[float, str] | None] | None = None) -> PlanEstimate:
    """The estimate of running `combinations`, each in the kernels its settings say; `rates` gives the
    FLOP/s and source per device kind (else calibrated or looked up here)."""
    estimate = PlanEstimate()
    found: dict[tuple[str, str], tuple[float, str] | None] = {}
    keys = set()
    for combination in combinations:
        estimate.runs += 1
        mode = combination.settings.kernels
        estimate.fixed_s += FIXED_COST_S[mode]
        estimate.run_seconds.append(FIXED_COST_S[mode])
        if mode == "reuse":
            key = (combination.device, combination.params.get("backend"), combination.params.get("mixed_precision"))
            estimate.run_seconds[-1] += NEW_KERNEL_S if key not in keys else 0.0
            keys.add(key)
        experiment = find(combination.name)
        if experiment is None or experiment.work_flops is None:
            estimate.without_work += 1
            continue
        kind = _kind(combination)
        precision = PRECISIONS.get(str(combination.params.get("mixed_precision")), "float32")
        if (kind, precision) not in found:
            found[(kind, precision)] = _rate(kind, precision, rates)
        rate = found[(kind, precision)]
        if rate is None:
            estimate.unknown_rate += 1
            continue
        estimate.rates[kind] = rate[1]
        work_s = experiment.work_flops({**experiment.defaults, **combination.params}) / rate[0]
        estimate.work_s += work_s
        estimate.run_seconds[-1] += work_s
    estimate.kernels = len(keys)
    estimate.fixed_s += NEW_KERNEL_S * len(keys)
    return estimate


def _rate(kind: str, precision: str, rates: Mapping[str, tuple[float, str] | None] | None) -> tuple[float, str] | None:
    if rates is not None and kind in rates:
        return rates[kind]
    if kind == DeviceKind.CPU:
        if precision != "float32":
            return None
        rate = cpu_rate_flops()
        return rate, f"{rate / 1e9:.0f} GFLOPS, a NumPy float32 1024 x 1024 matrix product calibrated here just now"
    return accelerator_rate(kind, precision)


def describe_seconds(seconds: float) -> str:
    """'~3 h 10 min' (format_duration), or '~2.5 days' beyond two days."""
    return f"~{seconds / 86400:.1f} days" if seconds >= 2 * 86400 else format_duration(seconds)
