"""What every way of measuring energy offers (colabkit.device.energy picks one per run): a source is started, marks
a timed window's edges (`mark()`), and after `stop()` gives each window's energy (`energy(begin, end)`), or no figure
with the reason. A window shorter than MIN_WINDOW_S gives no figure: the counters move in steps (NVML's about every
100 ms), so a short window's energy is mostly the step it happened to catch (docs/cost.md).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

MIN_WINDOW_S = 1.0  # the shortest window an energy figure is given over (module docstring)
# A window's mean power may reach POWER_MARGIN times the power limit of what was read before it is refused: the
# counters' steps at a window's edges (one 100 ms NVML step over the GPU check's 0.25 s floor is 1.4x) and a limit
# enforced as an average leave real readings above the limit; beyond this, the counter misread (docs/cost.md).
POWER_MARGIN = 1.5


class EnergyMethod(StrEnum):
    """How a record's energy was measured: the record's `energy_method` (add members, never rename one)."""

    COUNTER = "counter"  # a GPU's total-energy counter, read at the window's edges
    SAMPLED = "sampled"  # a GPU's power, sampled and integrated
    RAPL = "rapl"  # a CPU's RAPL energy counters
    NOT_MEASURED = "not measured"  # `energy_reason` says why


@dataclass(frozen=True)
class Mark:
    """One edge of a window: perf_counter seconds and, for a counter, what each device's or zone's counter held
    (joules; empty for a sampled source, or where the reading failed)."""

    at_s: float
    totals_j: tuple[float, ...] = ()


@dataclass(frozen=True)
class PowerLimit:
    """The most one device or zone can draw: its power limit in watts and where that figure came from, in words
    ("NVML's enforced power limit")."""

    watts: float
    source: str


@dataclass(frozen=True)
class WindowEnergy:
    """The energy of one window: `joules` None with the `reason` where there is no figure."""

    seconds: float
    joules: float | None
    reason: str | None = None

    @property
    def mean_power_w(self) -> float | None:
        return self.joules / self.seconds if self.joules is not None and self.seconds > 0 else None

    def per_unit(self, units: int, unit: str) -> dict[str, Any]:
        """Record fields: `energy_j`, `energy_j_per_<unit>` (over `units` of work), `mean_power_w`,
        `energy_window_s` and `energy_reason`."""
        joules = self.joules if units > 0 else None
        reason = self.reason if units > 0 else f"no {unit} in the window"
        return {"energy_j": joules, f"energy_j_per_{unit}": None if joules is None else joules / units,
                "mean_power_w": self.mean_power_w if joules is not None else None,
                "energy_window_s": self.seconds, "energy_reason": reason}


class EnergySource:
    """What every way of measuring energy offers; this base measures nothing and says why (`reason`).

    `method` is what the source measures with; a start that fails makes it NOT_MEASURED with the `reason`. A
    failure after the start keeps the method and sets `reason`: the windows then have no figure, saying why.
    `source` names what is read, in words, for the record.
    """

    method: EnergyMethod = EnergyMethod.NOT_MEASURED

    def __init__(self, reason: str | None = None, min_window_s: float = MIN_WINDOW_S) -> None:
        if min_window_s < 0:
            raise ValueError(f"min_window_s must be >= 0, got {min_window_s}")
        self.reason = reason
        self.min_window_s = min_window_s
        self.source: str | None = None

    def _fail_start(self, reason: str) -> None:
        self.method, self.reason = EnergyMethod.NOT_MEASURED, reason

    def start(self) -> EnergySource:
        """Begin measuring (a no-op here)."""
        return self

    def stop(self) -> None:
        """Stop measuring and release what was opened (a no-op here)."""

    def __enter__(self) -> EnergySource:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def mark(self) -> Mark:
        """A window's edge, now."""
        return Mark(time.perf_counter())

    def _joules(self, begin: Mark, end: Mark) -> WindowEnergy:
        return WindowEnergy(end.at_s - begin.at_s, None, self.reason or "energy was not measured")

    def energy(self, begin: Mark, end: Mark) -> WindowEnergy:
        """The energy between two marks (for a sampled source, ask after `stop()`: its last reading closes the
        window). No figure, with why, where the source failed or the window is shorter than `min_window_s`."""
        seconds = end.at_s - begin.at_s
        if self.reason is not None:
            return WindowEnergy(seconds, None, self.reason)
        if seconds < self.min_window_s:
            return WindowEnergy(seconds, None, f"the window ({seconds:.3g} s) is shorter than {self.min_window_s:g} s, "
                                               f"the least an energy figure is given over (docs/cost.md)")
        return self._joules(begin, end)


class NotMeasured(EnergySource):
    """No energy here, and why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)


def beyond_limit(joules: float, seconds: float, limit: PowerLimit, what: str) -> str | None:
    """Why `joules` over `seconds` cannot be a reading of `what` (a counter or a power of one device or zone, named):
    a mean power beyond POWER_MARGIN times its `limit`; None where it can be."""
    watts = joules / seconds if seconds > 0 else math.inf
    if watts <= POWER_MARGIN * limit.watts:
        return None
    return (f"{what} gave {joules:.4g} J over the {seconds:.3g} s window, {watts:.4g} W: more than {POWER_MARGIN:g}x "
            f"its {limit.watts:g} W power limit ({limit.source}): not a measurement")


def counter_deltas(begin: Mark, end: Mark, names: Sequence[str], limits: Sequence[PowerLimit],
                   what: str) -> WindowEnergy:
    """A counter's window: the sum over `names` (devices, zones) of what each counted, None with the reason where
    one gave no reading at an edge, went backwards, did not move, or counted more than its limit in `limits` lets
    it draw (`beyond_limit`) (`what`: the counter, for the reason)."""
    seconds = end.at_s - begin.at_s
    if len(begin.totals_j) != len(names) or len(end.totals_j) != len(names):
        return WindowEnergy(seconds, None, f"{what} gave no reading at an edge of the window")
    deltas = [after - before for before, after in zip(begin.totals_j, end.totals_j)]
    for name, before, after in zip(names, begin.totals_j, end.totals_j):
        if after < before:
            return WindowEnergy(seconds, None, f"{what} of {name} went backwards over the {seconds:.3g} s window, "
                                               f"from {before:.6g} J to {after:.6g} J: not a measurement")
    still = [name for name, delta in zip(names, deltas) if delta == 0]
    if still:
        return WindowEnergy(seconds, None, f"{what} of {', '.join(still)} did not advance over the {seconds:.3g} s "
                                           "window: no figure (it moves in steps)")
    for name, delta, limit in zip(names, deltas, limits):
        beyond = beyond_limit(delta, seconds, limit, f"{what} of {name}")
        if beyond is not None:
            return WindowEnergy(seconds, None, beyond)
    return WindowEnergy(seconds, float(sum(deltas)))
