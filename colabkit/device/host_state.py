"""Was the host quiet while we measured? The state of the machine around a measurement, and a verdict.

A run on a shared host measures the other work as much as its own (six matmul runs: CV 28 % beside
another job, 4 % without). So every record says what else the host did: the load average before and
after, other processes' CPU time and the steal share, the CPU clock's range (sampled every
SAMPLE_INTERVAL_S), all read by psutil (on Linux from /proc), and, on NVIDIA GPUs, the SM clock's range,
throttle reasons and other processes (colabkit.device.nvml). `quiet_verdict` turns that into
`host_quiet` (None where nothing could be read: no guess) and its reasons, by the thresholds below.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any

import psutil

from colabkit.device.nvml import GpuSampler

SAMPLE_INTERVAL_S = 1.0  # how often the clocks are read while a run goes on
# The thresholds of `host_quiet` (docs/statistics.md, "A busy host"):
OTHER_CPU_SHARE_MAX = 0.10  # other processes' CPU time over (wall time x logical CPUs)
STEAL_SHARE_MAX = 0.05  # time stolen by the hypervisor over all CPU time
CPU_CLOCK_SPREAD_MAX = 0.25  # the slowest clock read more than 25 % below the fastest
WAIT_WINDOW_S = 1.0  # `wait_for_quiet` looks at the host over windows this long


@dataclass(frozen=True)
class CpuTimes:
    """All CPUs' time since boot, in seconds (psutil.cpu_times: on Linux, /proc/stat's `cpu` line)."""

    busy_s: float  # user + nice + system + irq + softirq (guest time is inside user and nice)
    steal_s: float
    total_s: float  # busy + idle + iowait + steal
    cpus: int  # the logical CPUs it lists (on Linux, /proc/stat's cpuN lines)


def cpu_times() -> CpuTimes | None:
    """All CPUs' times now (None where they cannot be read). A field the platform lacks counts 0."""
    try:
        times, cpus = psutil.cpu_times()._asdict(), len(psutil.cpu_times(percpu=True))
    except OSError:
        return None
    busy = sum(times.get(name, 0.0) for name in ("user", "nice", "system", "irq", "softirq"))
    steal = times.get("steal", 0.0)
    return CpuTimes(busy, steal, busy + times["idle"] + times.get("iowait", 0.0) + steal, max(1, cpus))


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the platform has none)."""
    try:
        return list(psutil.getloadavg())
    except (OSError, AttributeError):
        return None


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process `pid` so far, None if it cannot be read (gone, not ours to read)."""
    try:
        times = psutil.Process(pid).cpu_times()
    except (psutil.Error, OSError):
        return None
    return times.user + times.system


def own_cpu_s() -> tuple[float, float]:
    """(CPU seconds of this process, every thread, and of the children it has waited for; those of
    the children alone)."""
    times = os.times()
    children = times.children_user + times.children_system
    return times.user + times.system + children, children


def cpu_clocks_mhz() -> list[float]:
    """Every logical CPU's current clock (MHz: on Linux /proc/cpuinfo's, else cpufreq's); [] where none is read."""
    try:
        return [clock.current for clock in psutil.cpu_freq(percpu=True) or []]
    except (OSError, AttributeError, NotImplementedError):  # AttributeError: a platform psutil reads no clock on
        return []


@dataclass(frozen=True)
class Snapshot:
    """The host at one instant: CPU times, this process's and its parent's CPU time, the load."""

    at: float  # time.monotonic()
    cpu: CpuTimes | None
    own_s: float  # this process's and its waited-for children's
    children_s: float  # its waited-for children's alone
    parent_s: float | None
    load: list[float] | None

    @classmethod
    def take(cls) -> Snapshot:
        own, children = own_cpu_s()
        return cls(time.monotonic(), cpu_times(), own, children, process_cpu_s(os.getppid()), load_average())


def cpu_window(start: Snapshot, end: Snapshot) -> dict[str, Any]:
    """What the CPUs did between two snapshots: wall time, this process's CPU time, other processes'
    (and their share of every CPU's time), the steal share; None for what could not be read."""
    wall = max(end.at - start.at, 1e-9)
    own = end.own_s - start.own_s
    parent = end.parent_s - start.parent_s if end.parent_s is not None and start.parent_s is not None else 0.0
    window: dict[str, Any] = {"wall_s": wall, "own_cpu_s": own, "parent_cpu_s": parent,
                              "other_cpu_s": None, "other_cpu_share": None, "steal_share": None, "cpus": None}
    if start.cpu is None or end.cpu is None:
        return window
    busy = end.cpu.busy_s - start.cpu.busy_s
    other = max(0.0, busy - own - parent)
    total = end.cpu.total_s - start.cpu.total_s
    window.update(other_cpu_s=other, other_cpu_share=other / (wall * end.cpu.cpus), cpus=end.cpu.cpus,
                  steal_share=(end.cpu.steal_s - start.cpu.steal_s) / total if total > 0 else 0.0)
    return window


def quiet_verdict(state: dict[str, Any]) -> tuple[bool | None, list[str]]:
    """(host_quiet, reasons it was not): False naming each threshold passed; None when neither the
    CPU's nor a GPU's state could be read (no CPU times, no NVML); True otherwise."""
    reasons = []
    other, steal = state.get("other_cpu_share"), state.get("steal_share")
    if other is not None and other > OTHER_CPU_SHARE_MAX:
        reasons.append(f"other processes took {100 * other:.0f} % of the CPUs' time "
                       f"({state.get('other_cpu_s', 0):.1f} CPU-s; threshold {100 * OTHER_CPU_SHARE_MAX:.0f} %)")
    if steal is not None and steal > STEAL_SHARE_MAX:
        reasons.append(f"the hypervisor stole {100 * steal:.0f} % of the CPU time "
                       f"(threshold {100 * STEAL_SHARE_MAX:.0f} %)")
    clocks = state.get("cpu_mhz") or {}
    if clocks.get("min") and clocks.get("max") and clocks["min"] < (1 - CPU_CLOCK_SPREAD_MAX) * clocks["max"]:
        reasons.append(f"the CPU clock varied from {clocks['min']:.0f} to {clocks['max']:.0f} MHz "
                       f"(more than {100 * CPU_CLOCK_SPREAD_MAX:.0f} % apart)")
    gpu = state.get("gpu") or {}
    reasons += gpu.get("busy_reasons") or []
    if reasons:
        return False, reasons
    if other is None and not gpu.get("available"):
        return None, []
    return True, []


class HostMonitor:
    """The host's state over a measurement: `start()`, run the measurement, `stop()` -> a dict.

    Between the two it reads the CPU clocks (and, with NVML, the GPUs) every `interval_s` in a daemon
    thread; everything else comes from the two snapshots. `stop()` may be called once; the dict it
    returns holds the window (cpu_window), the load before and after, the clock ranges, the GPU state
    and `quiet`/`busy_reasons` (quiet_verdict), with the thresholds used."""

    def __init__(self, interval_s: float = SAMPLE_INTERVAL_S, gpus: bool = True) -> None:
        self.interval_s = interval_s
        self.gpu = GpuSampler() if gpus else None
        self.clocks: list[float] = []
        self._start: Snapshot | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.result: dict[str, Any] | None = None

    def _sample(self) -> None:
        self.clocks += cpu_clocks_mhz()
        if self.gpu is not None:
            self.gpu.sample()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def start(self) -> HostMonitor:
        if self._start is not None:
            return self
        if self.gpu is not None:
            self.gpu.start()
        self._sample()
        self._start = Snapshot.take()
        self._thread = threading.Thread(target=self._loop, name="colabkit-host-monitor", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop the sampling thread without a result (the run never recorded: its object went away)."""
        self._stop.set()

    def stop(self) -> dict[str, Any]:
        """The host's state from start() to now (the same dict on later calls)."""
        if self.result is not None:
            return self.result
        if self._start is None:
            self.start()
        end = Snapshot.take()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        assert self._start is not None
        state = cpu_window(self._start, end)
        state.update(load_before=self._start.load, load_after=end.load,
                     cpu_mhz={"min": min(self.clocks), "max": max(self.clocks)} if self.clocks else None,
                     gpu=self.gpu.stop() if self.gpu is not None else None)
        quiet, reasons = quiet_verdict(state)
        state.update(quiet=quiet, busy_reasons=reasons, thresholds=thresholds())
        self.result = state
        return state


def thresholds() -> dict[str, float]:
    """The thresholds `quiet_verdict` applies, as a record stores them beside its verdict."""
    return {"other_cpu_share_max": OTHER_CPU_SHARE_MAX, "steal_share_max": STEAL_SHARE_MAX,
            "cpu_clock_spread_max": CPU_CLOCK_SPREAD_MAX}


def host_busy_now(window_s: float = WAIT_WINDOW_S) -> list[str]:
    """Why the host is busy now, watched for `window_s` seconds while this process waits: every CPU's
    busy time (other than this process's) and the steal share against the thresholds; [] when quiet or
    when the CPU times cannot tell."""
    start = Snapshot.take()
    time.sleep(window_s)
    window = cpu_window(start, Snapshot.take())
    window["other_cpu_s"] = window["other_cpu_s"] or 0.0
    return quiet_verdict(window)[1]


def wait_for_quiet(max_wait_s: float, window_s: float = WAIT_WINDOW_S) -> dict[str, Any]:
    """Wait until the host is quiet (`host_busy_now` finds nothing), at most `max_wait_s` seconds.
    Returns what a record's `sweep` section keeps: {"max_wait_s", "waited_s", "quiet", "busy_reasons"} (the
    last window's reasons when it never got quiet)."""
    started = time.monotonic()
    while True:
        reasons = host_busy_now(window_s)
        waited = time.monotonic() - started
        if not reasons or waited + window_s > max_wait_s:
            return {"max_wait_s": max_wait_s, "waited_s": round(waited, 1), "quiet": not reasons,
                    "busy_reasons": reasons}
