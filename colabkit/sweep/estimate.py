"""How long a sweep's plan will take: the estimate `sweep --dry-run` prints, and what it rests on.

A run the output folder has already timed (an earlier ok run of the same notebook, parameters, device and kernel
mode, its whole wall time in `sweep.wall_s`: kernel start, imports, data, model build and compile, the run, the HTML
export) costs the median of those times: measured. Any other run costs a fixed cost (FIXED_COST_S, measured by
benchmarks/sweep_overhead.py on ParaDnn: kernel start, imports, set-up, products; an accelerator adds its start-up per
fresh kernel) plus its work: the declaration's FLOPs (Experiment.work_flops) at a best-case speed in FLOP/s (a Speed:
NumPy's float32 matmul timed on a CPU by colabkit.timing.baseline, the peaks table on a GPU or TPU), so the work is a
lower bound. A run whose work is not known (its declaration counts no FLOPs, or its device's speed is not known here)
and that no earlier run times is not estimated: the estimate says how many, and why, rather than count a part of it.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colabkit.device.peaks import gpu_peak, tpu_peak
from colabkit.device.spec import DeviceKind
from colabkit.errors import MeasurementError
from colabkit.experiments import find
from colabkit.records.loading import load_records
from colabkit.records.schema import RecordStatus
from colabkit.sweep.expand import Combination
from colabkit.timing.baseline import numpy_matmul_baseline
from colabkit.timing.clock import format_duration

# Seconds per ParaDnn smoke combination outside its steady epochs (the first epoch's tracing included),
# on this project's 2-core CPU (benchmarks/sweep_overhead.py breakdown, 2026-11-25, a shared host:
# docs/sweep.md). The host's bandwidth probe (1-5 s once per sweep, CPU runs of ParaDnn) is not in it.
FIXED_COST_S = {"fresh": 8.2, "reuse": 2.4}
NEW_KERNEL_S = 4.2  # reuse: a new kernel's start, first imports and first clean-up, once per kernel
POLICY_PRECISION = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}


Speed = tuple[float, str]  # FLOP/s, and what the figure rests on
Speeds = Mapping[str, Speed | None]  # per device kind; None: not known here
EarlierRuns = Mapping[str, Sequence[float]]  # run_identity -> the wall seconds of earlier ok runs of it
CALIBRATION_N = 1024


@functools.lru_cache(maxsize=1)
def cpu_speed() -> Speed | None:
    """This CPU's float32 matrix-product speed: NumPy's 1024 x 1024 product timed in a clean child process
    (colabkit.timing.baseline, the matmul notebook's own baseline, for a fraction of a second); None where that
    child failed."""
    try:
        measured = numpy_matmul_baseline(CALIBRATION_N, "float32", min_time_s=0.1)
    except MeasurementError:
        return None
    flops = measured["tflops"] * 1e12
    return flops, (f"{flops / 1e9:.0f} GFLOPS, a NumPy float32 {CALIBRATION_N} x {CALIBRATION_N} matrix product "
                   "timed here just now")


def accelerator_speed(kind: str, precision: str, name: str | None = None) -> Speed | None:
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
    measured_s: float = 0.0  # the runs timed before (`measured` of them): the median of their earlier wall times
    measured: int = 0
    without_work: int = 0  # runs not estimated: their declaration gives no FLOPs, and no earlier run times them
    unknown_speed: int = 0  # runs not estimated: their device's speed is not known here, and no earlier run times them
    kernels: int = 0  # reuse: new kernels started
    speeds: dict[str, str] = field(default_factory=dict)  # device kind -> what its speed rests on
    # each run's own part of `seconds`, in order (a warm kernel's start counted with its first run; a run not
    # estimated, its fixed cost alone: a lower bound): what `sweep --colab` cuts its sessions by
    run_seconds: list[float] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        """The estimated runs' wall time; the runs not estimated (`not_estimated`) are in no part of it."""
        return self.measured_s + self.fixed_s + self.work_s

    @property
    def not_estimated(self) -> int:
        return self.without_work + self.unknown_speed

    def lines(self) -> list[str]:
        if not self.runs:
            return ["estimated wall time: nothing to run"]
        estimated = self.runs - self.not_estimated
        if not estimated:
            text = [f"estimated wall time: cannot estimate the {self.runs} run(s)"]
        else:
            parts = ([f"timed before {describe_seconds(self.measured_s)}"] if self.measured else []) + (
                [f"fixed cost {describe_seconds(self.fixed_s)} + work {describe_seconds(self.work_s)}"]
                if estimated > self.measured else [])
            of = f" of {self.runs}" if self.not_estimated else ""
            text = [f"estimated wall time: {describe_seconds(self.seconds)} for {estimated}{of} run(s) = "
                    + " + ".join(parts) + (" (and the runs it cannot estimate)" if self.not_estimated else "")]
        if self.measured:
            text.append(f"  timed before: {self.measured} run(s) as long as the median wall time of the earlier ok "
                        "runs of the same notebook, parameters, device and kernel mode in the output folder")
        if estimated > self.measured:
            text += [f"  fixed cost: {FIXED_COST_S['fresh']:g} s per run in a fresh kernel, {FIXED_COST_S['reuse']:g} "
                     f"s in a warm one plus {NEW_KERNEL_S:g} s per new kernel ({self.kernels} here): ParaDnn smoke "
                     "models on a 2-core CPU (benchmarks/sweep_overhead.py); an accelerator's start-up is not in it",
                     "  work: the FLOPs the experiments' declarations count, at the speeds below (best cases: a lower "
                     "bound)"]
            text += [f"  speed on {kind}: {source}" for kind, source in sorted(self.speeds.items())]
        if self.without_work:
            text.append(f"  cannot estimate {self.without_work} run(s): their declaration counts no FLOPs (their "
                        "training time is unknown before a run) and the output folder holds no earlier run of theirs "
                        "to time them by; a later dry run estimates the rest from the first")
        if self.unknown_speed:
            text.append(f"  cannot estimate {self.unknown_speed} run(s): their device's speed is not known here, and "
                        "the output folder holds no earlier run of theirs to time them by")
        return text


def _kind(combination: Combination) -> str:
    kind = combination.request.kind
    if kind != DeviceKind.AUTO:
        return str(kind)
    from colabkit.device.probes import nvidia_smi, tpu_runtime_hint

    return "tpu" if tpu_runtime_hint() else "gpu" if nvidia_smi() else "cpu"


def run_identity(notebook: str, params: Mapping[str, Any], kernels: str) -> str:
    """What makes two runs take the same wall time here: the notebook, the parameters it runs with (its declared
    defaults where not given) that shape its run (as its declaration says, Experiment.relevant; a repeat after the
    first may skip the bottleneck passes) and the kernel mode."""
    experiment = find(notebook)
    shaped = experiment.relevant({**experiment.defaults, **params}) if experiment is not None else dict(params)
    return json.dumps([notebook, kernels, shaped], sort_keys=True, default=str)


def earlier_runs(out: str | Path) -> dict[str, list[float]]:
    """The wall times (`sweep.wall_s`: the sweep's clock from before the kernel to after the HTML export) of the ok
    runs already in `out`, by run_identity."""
    found: dict[str, list[float]] = {}
    for record in load_records(out).records.values():
        wall = (record.get("sweep") or {}).get("wall_s")
        params = record.get("params")
        if (record["status"] != RecordStatus.OK or not isinstance(params, dict) or isinstance(wall, bool)
                or not isinstance(wall, (int, float)) or not 0 < wall < float("inf")):
            continue
        kernels = str((record.get("kernel") or {}).get("mode") or "fresh")
        found.setdefault(run_identity(str(record["notebook"]), params, kernels), []).append(float(wall))
    return found


def estimate_plan(combinations: Iterable[Combination], speeds: Speeds | None = None,
                  earlier: EarlierRuns | None = None) -> PlanEstimate:
    """The estimate of running `combinations`, each in the kernels its settings say: a run `earlier` times (by
    run_identity) as long as the median of those wall times; any other as its fixed cost plus its FLOPs at `speeds`
    (FLOP/s and source per device kind, else timed or looked up here), or not at all where its work is unknown."""
    estimate = PlanEstimate()
    found: dict[tuple[str, str], Speed | None] = {}
    keys, started = set(), set()  # the warm kernels of the runs estimated, and of every run not timed before
    for combination in combinations:
        estimate.runs += 1
        mode = combination.settings.kernels
        timed = (earlier or {}).get(run_identity(combination.name, combination.notebook_params, mode))
        if timed:
            estimate.measured += 1
            estimate.measured_s += statistics.median(timed)
            estimate.run_seconds.append(statistics.median(timed))
            continue
        estimate.run_seconds.append(FIXED_COST_S[mode])
        key = (combination.device, combination.params.get("backend"), combination.params.get("mixed_precision"))
        if mode == "reuse":
            estimate.run_seconds[-1] += NEW_KERNEL_S if key not in started else 0.0
            started.add(key)
        experiment = find(combination.name)
        if experiment is None or experiment.work_flops is None:
            estimate.without_work += 1
            continue
        kind = _kind(combination)
        precision = POLICY_PRECISION.get(str(combination.params.get("mixed_precision")), "float32")
        if (kind, precision) not in found:
            found[(kind, precision)] = _speed(kind, precision, speeds)
        speed = found[(kind, precision)]
        if speed is None:
            estimate.unknown_speed += 1
            continue
        estimate.speeds[kind] = speed[1]
        estimate.fixed_s += FIXED_COST_S[mode]
        if mode == "reuse":
            keys.add(key)
        work_s = experiment.work_flops({**experiment.defaults, **combination.params}) / speed[0]
        estimate.work_s += work_s
        estimate.run_seconds[-1] += work_s
    estimate.kernels = len(keys)
    estimate.fixed_s += NEW_KERNEL_S * len(keys)
    return estimate


def _speed(kind: str, precision: str, speeds: Speeds | None) -> Speed | None:
    if speeds is not None and kind in speeds:
        return speeds[kind]
    if kind == DeviceKind.CPU:
        return cpu_speed() if precision == "float32" else None
    return accelerator_speed(kind, precision)


def describe_seconds(seconds: float) -> str:
    """'~3 h 10 min' (format_duration), or '~2.5 days' beyond two days."""
    return f"~{seconds / 86400:.1f} days" if seconds >= 2 * 86400 else format_duration(seconds)
