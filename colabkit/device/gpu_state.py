"""NVIDIA GPUs' state over a measurement, through NVML: SM clock range, throttle reasons, other processes.

`GpuSampler` (used by host_state's HostMonitor) opens NVML (`pynvml`, imported only here) on
`start()`, reads every GPU this process can see on `sample()` (CUDA_VISIBLE_DEVICES mapped to NVML's
indices) and returns the summary on `stop()`; without NVML it says so (`available: false`, `reason`).
Throttle reasons in THROTTLE_BUSY (thermal, hardware slowdown, power brake) and other processes on a
GPU make the host not quiet; the rest are recorded and not held against it.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from colabkit.device.nvml_energy import NVML_PACKAGE, visible_gpu_indices

# NVML's clocks-event (throttle) reason bits, and the name the record gives each.
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
    """Reads every visible NVIDIA GPU's SM clock, throttle reasons and compute processes while sampling.
    `nvml` may be given (a stand-in with pynvml's functions, for tests); else pynvml is imported."""

    def __init__(self, nvml: Any = None) -> None:
        self.nvml = nvml
        self.reason: str | None = None
        self.handles: list[Any] = []
        self.sm_mhz: list[float] = []
        self.mask = 0
        self.others: set[int] = set()
        self.readings = 0

    def start(self) -> GpuSampler:
        if self.nvml is None:
            try:
                self.nvml = importlib.import_module("pynvml")
            except ImportError:
                self.reason = f"NVML is not installed (pip install {NVML_PACKAGE})"
                return self
        try:
            self.nvml.nvmlInit()
            self.handles = [self.nvml.nvmlDeviceGetHandleByIndex(index)
                            for index in visible_gpu_indices(self.nvml.nvmlDeviceGetCount())]
        except Exception as error:  # pynvml.NVMLError and its subclasses: no driver, no GPU
            self.reason = f"NVML is not available: {error}"
            self.handles = []
        if not self.handles and self.reason is None:
            self.reason = "NVML lists no GPU"
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
        except Exception as error:  # pynvml.NVMLError: a reading the board refused
            self.reason = f"NVML stopped answering: {error}"

    def stop(self) -> dict[str, Any]:
        """The summary a record stores, NVML closed: GPUs, readings, SM clock range, throttle reasons
        seen, other processes, and `busy_reasons` (what makes the host not quiet)."""
        available = self.reason is None and bool(self.handles)
        if self.handles:
            try:
                self.nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001 - closing a library that already failed
                pass
        if not available:
            return {"available": False, "reason": self.reason, "busy_reasons": []}
        reasons = throttle_names(self.mask)
        busy = [f"a GPU was throttled ({name.replace('_', ' ')})" for name in reasons if name in THROTTLE_BUSY]
        if self.others:
            busy.append(f"{len(self.others)} other process(es) used a GPU (pids {', '.join(map(str, sorted(self.others)))})")
        return {"available": True, "gpus": len(self.handles), "readings": self.readings,
                "sm_mhz": {"min": min(self.sm_mhz), "max": max(self.sm_mhz)} if self.sm_mhz else None,
                "throttle_reasons": reasons, "other_pids": sorted(self.others), "busy_reasons": busy}
