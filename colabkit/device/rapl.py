"""A CPU's energy through RAPL: the package (and DRAM) energy counters Linux's powercap exposes under
/sys/class/powercap/intel-rapl:N (microjoules, each wrapping at its max_energy_range_uj; Intel's, and AMD's since
Linux 5.8 under the same name). Often absent in a VM, and readable by root only since Linux 5.10.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from colabkit.device.energy_source import (
    MIN_WINDOW_S,
    EnergyMethod,
    EnergySource,
    Mark,
    PowerLimit,
    WindowEnergy,
    counter_deltas,
)

POWERCAP = Path("/sys/class/powercap")
RAPL_MAX_W = 1000.0  # more than any one package draws: sets how often a RAPL counter is read to catch its wraps
NO_LIMIT = "RAPL gives none enabled: the most colabkit takes one package to draw"


@dataclass(frozen=True)
class RaplZone:
    """One RAPL energy counter: its sysfs folder, its name (package-0, dram), the range it wraps at and the most it
    can draw (`zone_limit`)."""

    path: Path
    name: str
    max_range_uj: int
    limit: PowerLimit = PowerLimit(RAPL_MAX_W, NO_LIMIT)


def _read_int(path: Path) -> int:
    return int(path.read_text(encoding="ascii").strip())


def _hypervisor() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            return any(line.startswith("flags") and "hypervisor" in line.split() for line in cpuinfo)
    except OSError:
        return False


def zone_limit(folder: Path) -> PowerLimit:
    """The most a RAPL zone can draw: the highest of its power limits (constraint_N_power_limit_uw: the long- and
    short-term ones, a peak where there is one) where the zone enforces them (`enabled` 1), at most RAPL_MAX_W;
    RAPL_MAX_W where it enforces none or they cannot be read."""
    try:
        enabled = _read_int(folder / "enabled") == 1
        limits_uw = [_read_int(path) for path in folder.glob("constraint_*_power_limit_uw")]
    except (OSError, ValueError):
        return PowerLimit(RAPL_MAX_W, NO_LIMIT)
    highest_w = max(limits_uw, default=0) / 1e6
    if not enabled or not 0 < highest_w < RAPL_MAX_W:
        return PowerLimit(RAPL_MAX_W, NO_LIMIT)
    return PowerLimit(highest_w, "the highest of RAPL's power limits of the zone")


def rapl_zones(root: Path = POWERCAP) -> list[RaplZone]:
    """The RAPL counters an energy figure sums: each package zone (intel-rapl:N, named package-N: its cores and
    uncore) and its DRAM subzone where one exists (intel-rapl:N:M named dram: outside the package's count). Core,
    uncore and psys zones are left out: they are parts of a package, or the platform holding it, counted twice."""
    zones = []
    for folder in sorted(root.glob("intel-rapl:*")):
        if not re.fullmatch(r"intel-rapl:\d+(:\d+)?", folder.name) or not (folder / "name").exists():
            continue
        name = (folder / "name").read_text(encoding="ascii").strip()
        package = folder.name.count(":") == 1 and name.startswith("package")
        if package or (folder.name.count(":") == 2 and name == "dram"):
            zones.append(RaplZone(folder, name, _read_int(folder / "max_energy_range_uj"), zone_limit(folder)))
    return zones


class RaplCounter(EnergySource):
    """The CPU's RAPL energy counters (`rapl_zones`), summed; `root` is where powercap is (a container may mount the
    host's elsewhere). Each counter is read at each mark and, from a background thread, often enough to see every
    wrap (a quarter of its range at RAPL_MAX_W): a window longer than the range is still counted whole."""

    method = EnergyMethod.RAPL

    def __init__(self, root: Path | str = POWERCAP, min_window_s: float = MIN_WINDOW_S) -> None:
        super().__init__(min_window_s=min_window_s)
        self.root = Path(root)
        self.zones: list[RaplZone] = []
        self._last_uj: list[int] = []
        self._totals_uj: list[int] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _unavailable(self) -> str | None:
        if not self.root.is_dir() or not any(self.root.glob("intel-rapl:*")):
            vm = " (a virtual machine: its CPU flags say hypervisor)"
            return f"RAPL is not exposed here: no {self.root}/intel-rapl:* zones{vm if _hypervisor() else ''}"
        try:
            self.zones = rapl_zones(self.root)
        except (OSError, ValueError) as error:
            return f"RAPL zones under {self.root} cannot be read: {error}"
        if not self.zones:
            return f"RAPL under {self.root} has no package zone"
        try:
            self._last_uj = [_read_int(zone.path / "energy_uj") for zone in self.zones]
        except PermissionError as error:
            return (f"RAPL's {error.filename} is readable by root only (as Linux has it since 5.10): run as root, or "
                    "let this user read the energy_uj files (chmod o+r)")
        except (OSError, ValueError) as error:
            return f"RAPL's energy_uj cannot be read: {error}"
        return None

    def start(self) -> RaplCounter:
        """Read every zone once and start the thread that catches wraps; where RAPL cannot be read, say why."""
        if self._thread is not None or self.reason is not None:
            return self
        why = self._unavailable()
        if why is not None:
            self._fail_start(why)
            return self
        self._totals_uj = [0] * len(self.zones)
        self.source = ("RAPL " + ", ".join(f"{zone.name} ({zone.path.name})" for zone in self.zones)
                       + ": the CPU packages, not the rest of the machine")
        poll_s = max(1.0, min(zone.max_range_uj for zone in self.zones) / 1e6 / RAPL_MAX_W / 4)
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, args=(poll_s,), name="colabkit-rapl", daemon=True)
        self._thread.start()
        return self

    def _watch(self, poll_s: float) -> None:
        while not self._stop.wait(poll_s):
            if self._read_j() is None:
                return

    def _read_j(self) -> tuple[float, ...] | None:
        """Every zone's energy since the start, in joules, its wraps undone; None once a read fails."""
        with self._lock:
            if self.reason is not None:
                return None
            try:
                raw = [_read_int(zone.path / "energy_uj") for zone in self.zones]
            except (OSError, ValueError) as error:
                self.reason = f"RAPL stopped answering: {error}"
                return None
            for index, (zone, now) in enumerate(zip(self.zones, raw)):
                step = now - self._last_uj[index]
                self._totals_uj[index] += step if step >= 0 else step + zone.max_range_uj  # wrapped once since
                self._last_uj[index] = now
            return tuple(total / 1e6 for total in self._totals_uj)

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None

    def mark(self) -> Mark:
        at = time.perf_counter()
        totals = self._read_j() if self._thread is not None else None
        return Mark(at, totals or ())

    def _joules(self, begin: Mark, end: Mark) -> WindowEnergy:
        return counter_deltas(begin, end, [zone.name for zone in self.zones], [zone.limit for zone in self.zones],
                              "the RAPL counter")
