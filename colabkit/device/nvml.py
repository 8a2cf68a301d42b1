"""NVIDIA GPUs through NVML (`pynvml`, imported late; the pip package nvidia-ml-py), opened here alone (`open_nvml`):
the boards' total-energy counter read at each window's edges (GpuEnergyCounter); their power sampled by a thread,
integrated where a board has no counter (PowerSampler), and at rest (`idle_power`: the GPU check's); their state
over a measurement (GpuSampler: SM clocks, throttle reasons, other processes, for host_state's HostMonitor). All
are the whole board's, at NVML's indices (visible_gpu_indices maps CUDA's).
"""

from __future__ import annotations

import importlib
import os
import statistics
import threading
import time
from collections.abc import Sequence
from typing import Any

from colabkit.device.energy_source import (
    MIN_WINDOW_S,
    EnergyMethod,
    EnergySource,
    Mark,
    PowerLimit,
    WindowEnergy,
    beyond_limit,
    counter_deltas,
)

NVML_PACKAGE = "nvidia-ml-py"  # pip name; the module is `pynvml`
GPU_MAX_W = 2000.0  # the most one GPU is taken to draw where NVML gives no power limit: above any board's
NO_LIMIT = "NVML gives none: the most colabkit takes one GPU to draw"


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


def open_nvml(indices: Sequence[int] | None = None) -> tuple[Any, list[Any]] | str:
    """NVML initialised, and the handles of GPUs `indices` (NVML's; None: every GPU this process sees): (the pynvml
    module, the handles), or why NVML cannot be used (then it is left closed)."""
    if indices is not None and not indices:
        return "no GPU is visible to this process (CUDA_VISIBLE_DEVICES hides them)"
    try:
        nvml = importlib.import_module("pynvml")
    except ImportError:
        return f"NVML is not installed (pip install {NVML_PACKAGE})"
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as error:
        return f"NVML is not available: {error}"
    try:
        chosen = list(indices) if indices is not None else visible_gpu_indices(nvml.nvmlDeviceGetCount())
        return nvml, [nvml.nvmlDeviceGetHandleByIndex(index) for index in chosen]
    except nvml.NVMLError as error:
        close_nvml(nvml)
        return f"NVML could not read GPU {', '.join(map(str, indices)) if indices else 'count'}: {error}"


def close_nvml(nvml: Any) -> None:
    """NVML shut down (once per `open_nvml`)."""
    try:
        nvml.nvmlShutdown()
    except nvml.NVMLError:
        pass  # shutting down a library that already failed: nothing left to release


def power_limit(nvml: Any, handle: Any) -> PowerLimit:
    """A board's power limit: the one its driver enforces (nvmlDeviceGetEnforcedPowerLimit, milliwatts: all limiters
    counted), else the one set for power management (nvmlDeviceGetPowerManagementLimit), else GPU_MAX_W."""
    for call, source in (("nvmlDeviceGetEnforcedPowerLimit", "NVML's enforced power limit"),
                         ("nvmlDeviceGetPowerManagementLimit", "NVML's power management limit")):
        try:
            milliwatts = getattr(nvml, call)(handle)
        except nvml.NVMLError:  # NotSupported where the board has no power management
            continue
        if milliwatts > 0:
            return PowerLimit(milliwatts / 1000.0, source)
    return PowerLimit(GPU_MAX_W, NO_LIMIT)


class GpuEnergyCounter(EnergySource):
    """NVML's total-energy counter of GPUs `indices` (NVML's indices), summed: read at each mark.

    `refused` is set when NVML works but a board has no counter (NVMLError_NotSupported, or FunctionNotFound from a
    driver too old to know the call): then power can be sampled instead (`open_energy_source` does).
    """

    method = EnergyMethod.COUNTER

    def __init__(self, indices: Sequence[int], min_window_s: float = MIN_WINDOW_S) -> None:
        super().__init__(min_window_s=min_window_s)
        self.indices = list(indices)
        self.refused: str | None = None
        self.limits: list[PowerLimit] = []
        self._nvml: Any = None
        self._handles: list[Any] = []

    def _read_j(self) -> tuple[float, ...]:
        return tuple(self._nvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000.0 for handle in self._handles)

    def start(self) -> GpuEnergyCounter:
        """Open NVML and read every board's counter once; where that fails, say why (`reason`, `refused`)."""
        if self._nvml is not None or self.reason is not None:
            return self
        opened = open_nvml(self.indices)
        if isinstance(opened, str):
            self._fail_start(opened)
            return self
        self._nvml, self._handles = opened
        nvml = self._nvml
        try:
            self._read_j()
        except (nvml.NVMLError_NotSupported, nvml.NVMLError_FunctionNotFound) as error:
            self.refused = f"nvmlDeviceGetTotalEnergyConsumption: {error}"
            self._fail_start(f"the GPU has no total-energy counter ({self.refused})")
            self.stop()
        except nvml.NVMLError as error:
            self._fail_start(f"NVML could not read GPU {', '.join(map(str, self.indices))}: {error}")
            self.stop()
        else:
            self.limits = [power_limit(nvml, handle) for handle in self._handles]
            gpus = ", ".join(map(str, self.indices))
            self.source = f"NVML total-energy counter of GPU {gpus} (NVML's index; the whole board)"
        return self

    def stop(self) -> None:
        if self._nvml is not None:
            nvml, self._nvml = self._nvml, None
            close_nvml(nvml)

    def mark(self) -> Mark:
        at = time.perf_counter()
        if self._nvml is None or self.reason is not None:
            return Mark(at)
        try:
            return Mark(at, self._read_j())
        except self._nvml.NVMLError as error:
            self.reason = f"NVML stopped answering: {error}"
            return Mark(at)

    def _joules(self, begin: Mark, end: Mark) -> WindowEnergy:
        return counter_deltas(begin, end, [f"GPU {index}" for index in self.indices], self.limits,
                              "the energy counter")


class PowerSampler(EnergySource):
    """Samples the summed power of NVIDIA GPUs `indices` every `interval_s` while started.

    samples: (perf_counter seconds, watts summed over the GPUs), in time order. `counter_refused`: why the boards'
    energy counter was not used (named in `source`).
    """

    method = EnergyMethod.SAMPLED

    def __init__(self, indices: Sequence[int] = (0,), interval_s: float = 0.05, min_window_s: float = MIN_WINDOW_S,
                 counter_refused: str | None = None) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        super().__init__(min_window_s=min_window_s)
        self.indices = list(indices)
        self.interval_s = interval_s
        self.counter_refused = counter_refused
        self.limits: list[PowerLimit] = []
        self.samples: list[tuple[float, float]] = []
        self._nvml: Any = None
        self._handles: list[Any] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _read_watts(self) -> float:
        return sum(self._nvml.nvmlDeviceGetPowerUsage(handle) for handle in self._handles) / 1000.0

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                watts = self._read_watts()
            except self._nvml.NVMLError as error:  # a reading the board refused
                self.reason = f"NVML stopped answering: {error}"
                return
            with self._lock:
                self.samples.append((time.perf_counter(), watts))
            self._stop.wait(self.interval_s)

    def start(self) -> PowerSampler:
        """Start sampling; where NVML cannot be used, say why (`reason`) and sample nothing."""
        if self._thread is not None or self.reason is not None:
            return self
        opened = open_nvml(self.indices)
        if isinstance(opened, str):
            self._fail_start(opened)
            return self
        self._nvml, self._handles = opened
        try:
            self._read_watts()  # fails here, not in the thread, on a board without power readings
        except self._nvml.NVMLError as error:
            self._fail_start(f"NVML power readings are not available: {error}")
            self._shutdown()
            return self
        self.limits = [power_limit(self._nvml, handle) for handle in self._handles]
        gpus = ", ".join(map(str, self.indices))
        why = f" (no total-energy counter: {self.counter_refused})" if self.counter_refused else ""
        self.source = (f"NVML power of GPU {gpus} (NVML's index; the whole board) sampled every {self.interval_s:g} s"
                       f"{why}")
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
        if self.reason is None:
            try:
                watts = self._read_watts()
                with self._lock:
                    self.samples.append((time.perf_counter(), watts))
            except self._nvml.NVMLError as error:
                self.reason = f"NVML stopped answering: {error}"
        self._shutdown()

    def _shutdown(self) -> None:
        if self._nvml is not None:
            nvml, self._nvml = self._nvml, None
            close_nvml(nvml)

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

    def _joules(self, begin: Mark, end: Mark) -> WindowEnergy:
        seconds = end.at_s - begin.at_s
        with self._lock:
            inside = any(begin.at_s <= at <= end.at_s for at, _ in self.samples)
        joules = self.energy_j(begin.at_s, end.at_s) if inside else None
        if joules is None:
            return WindowEnergy(seconds, None, "no power sample fell in the window")
        gpus = ", ".join(map(str, self.indices))
        limit = PowerLimit(sum(limit.watts for limit in self.limits), " + ".join(dict.fromkeys(
            limit.source for limit in self.limits)))
        beyond = beyond_limit(joules, seconds, limit, f"the sampled power of GPU {gpus}")
        return WindowEnergy(seconds, None, beyond) if beyond else WindowEnergy(seconds, joules)


def idle_power(seconds: float = 1.0, interval_s: float = 0.1) -> dict[str, Any]:
    """The first visible GPU's board power at rest (the median of readings over `seconds`) and its limit, or
    {"unavailable": why}."""
    sampler = PowerSampler(visible_gpu_indices(1), interval_s).start()
    if sampler.reason is not None:
        return {"unavailable": sampler.reason}
    limit = sampler.limits[0]
    if limit.source == NO_LIMIT:
        sampler.reason = "NVML gives no power limit on this GPU"
    else:
        time.sleep(seconds)
    sampler.stop()
    readings = [watts for _, watts in sampler.samples]
    if sampler.reason is not None or not readings:
        return {"unavailable": sampler.reason or "no power reading"}
    return {"idle_w": float(statistics.median(readings)), "limit_w": limit.watts, "readings_w": readings}


# --- the GPUs' state over a measurement ----------------------------------------------------------------------

# NVML's clocks-event (throttle) reason bits, and the name the record gives each. Throttle reasons in THROTTLE_BUSY
# (thermal, hardware slowdown, power brake) and other processes on a GPU make the host not quiet; the rest are
# recorded and not held against it.
THROTTLE_REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
THROTTLE_BUSY = ("hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")


def throttle_names(mask: int) -> list[str]:
    """The names of the reason bits set in an NVML clocks-event mask, in bit order."""
    return [name for bit, name in sorted(THROTTLE_REASONS.items()) if mask & bit]


class GpuSampler:
    """Reads every visible NVIDIA GPU's SM clock, throttle reasons and compute processes while sampling: NVML
    opened on `start()`, every GPU read on `sample()`, the summary on `stop()`; without NVML it says so
    (`available: false`, `reason`)."""

    def __init__(self) -> None:
        self.nvml: Any = None
        self.reason: str | None = None
        self.handles: list[Any] = []
        self.sm_mhz: list[float] = []
        self.mask = 0
        self.others: set[int] = set()
        self.readings = 0

    def start(self) -> GpuSampler:
        opened = open_nvml()
        if isinstance(opened, str):
            self.reason = opened
        else:
            self.nvml, self.handles = opened
            self.reason = None if self.handles else "NVML lists no GPU"
        return self

    def _throttle_mask(self, handle: Any) -> int:
        read = (getattr(self.nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                or self.nvml.nvmlDeviceGetCurrentClocksThrottleReasons)  # the older name
        return int(read(handle))

    def sample(self) -> None:
        """Read every GPU once (nothing when NVML is unavailable or stopped answering)."""
        if self.reason is not None or not self.handles:
            return
        try:
            for handle in self.handles:
                self.sm_mhz.append(float(self.nvml.nvmlDeviceGetClockInfo(handle, self.nvml.NVML_CLOCK_SM)))
                self.mask |= self._throttle_mask(handle)
                for process in self.nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                    if int(process.pid) != os.getpid():
                        self.others.add(int(process.pid))
            self.readings += 1
        except self.nvml.NVMLError as error:  # a reading the board refused
            self.reason = f"NVML stopped answering: {error}"

    def stop(self) -> dict[str, Any]:
        """The summary a record stores, NVML closed: GPUs, readings, SM clock range, throttle reasons
        seen, other processes, and `busy_reasons` (what makes the host not quiet)."""
        available = self.reason is None and bool(self.handles)
        if self.nvml is not None:
            close_nvml(self.nvml)
            self.nvml = None
        if not available:
            return {"available": False, "reason": self.reason, "busy_reasons": []}
        reasons = throttle_names(self.mask)
        busy = [f"a GPU was throttled ({name.replace('_', ' ')})" for name in reasons if name in THROTTLE_BUSY]
        if self.others:
            busy.append(f"{len(self.others)} other process(es) used a GPU (pids {', '.join(map(str, sorted(self.others)))})")
        return {"available": True, "gpus": len(self.handles), "readings": self.readings,
                "sm_mhz": {"min": min(self.sm_mhz), "max": max(self.sm_mhz)} if self.sm_mhz else None,
                "throttle_reasons": reasons, "other_pids": sorted(self.others), "busy_reasons": busy}
