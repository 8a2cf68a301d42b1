"""Energy over timed windows: a GPU's total-energy counter, its power sampled, a CPU's RAPL counters, or "not
measured" with the reason (docs/cost.md).

`open_energy_source(device_kind, gpu_indices)` picks one way per run and starts it; the run marks each timed
window's edges (`mark()`), and after `stop()` asks each window's energy (`energy(begin, end)`). The way is
recorded as `energy_method`:

- "counter": NVML's total-energy counter of each GPU (nvmlDeviceGetTotalEnergyConsumption: millijoules since the
  driver was loaded; Volta and later), read at the two edges. No thread, nothing sampled.
- "sampled": a GPU whose counter NVML refuses (NotSupported: before Volta) has its power (nvmlDeviceGetPowerUsage,
  milliwatts) read by a background thread every `interval_s`, integrated over the window (trapezoids).
- "rapl": a CPU's RAPL energy counters (/sys/class/powercap/intel-rapl:N/energy_uj, microjoules: each package,
  and its DRAM where the zone exists), each counter's wrap-around at max_energy_range_uj undone.
- "not measured": no way here (no NVML, a TPU, RAPL absent or readable by root only...); `reason` says why.

A window shorter than MIN_WINDOW_S gives no figure: the counters move in steps (NVML's about every 100 ms), so a
short window's energy is mostly the step it happened to catch. Nor does a window whose reading cannot be a
measurement: a counter that went backwards, or a mean power beyond POWER_MARGIN times the power limit of what was
read (energy_source.counter_deltas, beyond_limit); the reason says what was seen. `pynvml` is imported late
(`nvidia-ml-py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from colabkit.device.energy_source import (
    MIN_WINDOW_S,
    EnergyMethod,
    EnergySource,
    Mark,
    NotMeasured,
)
from colabkit.device.nvml import GpuEnergyCounter, PowerSampler
from colabkit.device.rapl import POWERCAP, RaplCounter

TPU_REASON = ("colabkit has no reading of a TPU's power or energy: energy is measured on NVIDIA GPUs (NVML) and on "
              "CPUs with RAPL")
MULTI_WORKER_REASON = "a multi-worker run's energy is not measured: each worker's devices are on its own host"


def open_energy_source(device_kind: str, gpu_indices: Sequence[int] = (), *, interval_s: float = 0.05,
                       min_window_s: float = MIN_WINDOW_S, sampled: bool = False,
                       powercap: Path | str = POWERCAP) -> EnergySource:
    """The way to measure a run on `device_kind` ("gpu": the NVML boards `gpu_indices`; "cpu"; "tpu";
    "multiworker"), started: the GPUs' energy counter, their power sampled every `interval_s` where a board has
    no counter (or where `sampled` asks for it, to compare the two), RAPL under `powercap` on a CPU, else
    NotMeasured with the reason. Stop it when the run's windows are marked."""
    if device_kind == "gpu":
        if not sampled:
            counter = GpuEnergyCounter(gpu_indices, min_window_s).start()
            if counter.refused is None:
                return counter
            return PowerSampler(gpu_indices, interval_s, min_window_s, counter_refused=counter.refused).start()
        return PowerSampler(gpu_indices, interval_s, min_window_s).start()
    if device_kind == "cpu":
        return RaplCounter(powercap, min_window_s).start()
    if device_kind == "tpu":
        return NotMeasured(TPU_REASON)
    if device_kind == "multiworker":
        return NotMeasured(MULTI_WORKER_REASON)
    return NotMeasured(f"no energy reading for a {device_kind!r} device")


def source_fields(source: EnergySource | None) -> dict[str, Any]:
    """The record's `energy_method`, `energy_source` (what was read, in words) and `energy_reason` (why there is no
    figure; None where the source works)."""
    if source is None:
        return {"energy_method": EnergyMethod.NOT_MEASURED.value, "energy_source": None,
                "energy_reason": "energy was not measured"}
    return {"energy_method": source.method.value, "energy_source": source.source, "energy_reason": source.reason}


def describe_energy(metrics: dict[str, Any], parts: list[tuple[str, dict[str, Any]]], unit: str) -> str:
    """One line: joules per `unit` of each part (`energy_j_per_<unit>`) and how they were measured, or why not."""
    if metrics["energy_method"] == "not measured":
        return f"energy: not measured ({metrics['energy_reason']})"
    figures = [f"{name} {part[f'energy_j_per_{unit}']:.4g}" for name, part in parts
               if part.get(f"energy_j_per_{unit}") is not None]
    missing = f"; {metrics['energy_reason']}" if metrics["energy_reason"] else ""
    return f"energy ({metrics['energy_method']}), J per {unit}: {', '.join(figures) or 'none'}{missing}"


def energy_metrics(source: EnergySource | None, windows: Sequence[tuple[Mark, Mark]],
                   samples_per_window: Sequence[int], reason: str | None = None) -> dict[str, Any]:
    """A training record's energy fields, from the steady epochs' windows and the samples each trained.

    energy_j_per_epoch: the median over the windows; energy_j_per_sample: all their energy / all their samples;
    mean_power_w: all their energy / all their time; with `source_fields`. None, with `energy_reason`, when the
    source could not measure, any window has no figure, or there was no steady epoch (`reason` overrides).
    """
    empty = {"energy_j_per_epoch": None, "energy_j_per_sample": None, "mean_power_w": None}
    fields = source_fields(source)
    if reason is not None:
        return {**empty, **fields, "energy_reason": reason}
    if fields["energy_reason"] is not None or source is None:
        return {**empty, **fields}
    if not windows:
        return {**empty, **fields, "energy_reason": "no steady-state epoch (only one epoch ran)"}
    energies = [source.energy(begin, end) for begin, end in windows]
    missing = next((energy.reason for energy in energies if energy.joules is None), None)
    if missing is not None:
        return {**empty, **fields, "energy_reason": f"a steady epoch has no energy figure: {missing}"}
    joules = sorted(float(energy.joules) for energy in energies)  # type: ignore[arg-type]
    total_j, total_s = sum(joules), sum(energy.seconds for energy in energies)
    middle = len(joules) // 2
    median = joules[middle] if len(joules) % 2 else (joules[middle - 1] + joules[middle]) / 2
    samples = sum(samples_per_window)
    return {
        **fields,
        "energy_j_per_epoch": median,
        "energy_j_per_sample": total_j / samples if samples else None,
        "mean_power_w": total_j / total_s if total_s > 0 else None,
        "energy_reason": None if samples else "no sample was counted in the steady epochs",
    }
