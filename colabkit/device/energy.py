"""Board power of NVIDIA GPUs sampled through NVML in a background thread, and energy from it.

`PowerSampler` (a context manager) reads every GPU's power draw every `interval_s`; `energy_j(start,
end)` integrates the summed power over a window (trapezoids on perf_counter stamps). Without NVML
it records nothing and says why (`unavailable_reason`): never a guess. `pynvml` is imported late.
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

NVML_PACKAGE = "nvidia-ml-py"  # pip name; the module is `pynvml`


def visible_gpu_indices(count: int) -> list[int]:
    """NVML indices of the first `count` GPUs a CUDA program sees. NVML ignores
    CUDA_VISIBLE_DEVICES, so numeric entries of it are mapped (CUDA stops at the first invalid one:
    set but empty, or "-1", means no GPU); unset, or naming GPUs by UUID, 0..count-1."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return list(range(count))
    entries = [entry.strip() for entry in visible.split(",")]
    indices = []
    for entry in entries:
        if not entry.isdigit():
            break
        indices.append(int(entry))
    if indices or not entries[0] or entries[0].startswith("-"):
        return indices[:count]
    return list(range(count))  # UUIDs (GPU-...) or MIG names: NVML's order, unmapped


class PowerSampler:
    """Samples the summed power of NVIDIA GPUs `indices` while the context is open.

    samples: (perf_counter seconds, watts summed over the GPUs), in time order.
    """

    def __init__(self, indices: Sequence[int] = (0,), interval_s: float = 0.05) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self.indices = list(indices)
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []
        self.unavailable_reason: str | None = None
        self._nvml: Any = None
        self._handles: list[Any] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def available(self) -> bool:
        return self.unavailable_reason is None and self._nvml is not None

    def _read_watts(self) -> float:
        return sum(self._nvml.nvmlDeviceGetPowerUsage(handle) for handle in self._handles) / 1000.0

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                watts = self._read_watts()
            except Exception as error:  # pynvml.NVMLError: a reading the board refused
                self.unavailable_reason = f"NVML stopped answering: {error}"
                return
            with self._lock:
                self.samples.append((time.perf_counter(), watts))
            self._stop.wait(self.interval_s)

    def start(self) -> PowerSampler:
        """Start sampling; where NVML cannot be used, set `unavailable_reason` and sample nothing."""
        if self._thread is not None:
            return self
        if not self.indices:
            self.unavailable_reason = "no GPU to sample"
            return self
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError:
            self.unavailable_reason = f"NVML is not installed (pip install {NVML_PACKAGE})"
            return self
        try:
            nvml.nvmlInit()
            self._handles = [nvml.nvmlDeviceGetHandleByIndex(index) for index in self.indices]
            self._nvml = nvml
            self._read_watts()  # fails here, not in the thread, on a board without power readings
        except Exception as error:  # pynvml.NVMLError and its many subclasses
            self.unavailable_reason = f"NVML power readings are not available: {error}"
            self._shutdown()
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="colabkit-power", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling (one last reading closes the window) and release NVML."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        if self.unavailable_reason is None:
            try:
                with self._lock:
                    self.samples.append((time.perf_counter(), self._read_watts()))
            except Exception as error:  # pynvml.NVMLError
                self.unavailable_reason = f"NVML stopped answering: {error}"
        self._shutdown()

    def _shutdown(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001 - shutting down a library that already failed
                pass

    def __enter__(self) -> PowerSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def window(self, start: float, end: float) -> list[tuple[float, float]]:
        """Samples within [start, end], with the power at both ends interpolated from neighbours."""
        with self._lock:
            samples = list(self.samples)
        if not samples or end <= start:
            return []

        def power_at(t: float) -> float:
            before = [s for s in samples if s[0] <= t]
            after = [s for s in samples if s[0] >= t]
            if not before:
                return after[0][1]
            if not after:
                return before[-1][1]
            (t0, p0), (t1, p1) = before[-1], after[0]
            return p0 if t1 == t0 else p0 + (p1 - p0) * (t - t0) / (t1 - t0)

        inside = [s for s in samples if start < s[0] < end]
        return [(start, power_at(start)), *inside, (end, power_at(end))]

    def energy_j(self, start: float, end: float) -> float | None:
        """Joules drawn between `start` and `end` (perf_counter seconds), or None without samples."""
        points = self.window(start, end)
        if len(points) < 2:
            return None
        return sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(points, points[1:]))


def energy_metrics(sampler: PowerSampler | None, intervals: Sequence[tuple[float, float]],
                   samples_per_interval: Sequence[int], reason: str | None = None) -> dict[str, Any]:
    """Record fields from a sampler and the steady epochs' training intervals (perf_counter seconds).

    energy_j_per_epoch: median over the intervals; energy_j_per_sample: all their energy / all their
    samples; mean_power_w: all their energy / all their time. None, with `energy_reason`, when the
    sampler could not read power, nothing was sampled, or there was no steady epoch.
    """
    empty = {"energy_j_per_epoch": None, "energy_j_per_sample": None, "mean_power_w": None}
    if reason is not None or sampler is None or sampler.unavailable_reason is not None:
        why = reason or (sampler.unavailable_reason if sampler is not None else None) or "power was not sampled"
        return {**empty, "energy_reason": why}
    if not intervals:
        return {**empty, "energy_reason": "no steady-state epoch (only one epoch ran)"}
    energies = [sampler.energy_j(start, end) for start, end in intervals]
    if any(energy is None for energy in energies):
        return {**empty, "energy_reason": "no power sample fell in a steady epoch"}
    total_j = float(sum(energies))  # type: ignore[arg-type]
    total_s = sum(end - start for start, end in intervals)
    ordered = sorted(energies)  # type: ignore[type-var]
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    samples = sum(samples_per_interval)
    return {
        "energy_j_per_epoch": float(median),
        "energy_j_per_sample": total_j / samples if samples else None,
        "mean_power_w": total_j / total_s if total_s > 0 else None,
        "energy_reason": None,
    }
