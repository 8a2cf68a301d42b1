"""Do two measurements of the same work agree? Interleaved rounds, medians, a ratio and its verdict.

The sides run in turns (A, B, A, B, ...) so that a host's drift hits both alike; each side's figure is
its rounds' median and the verdict is A / B inside [low, high] (docs/like-for-like.md). Every round
and the paired ratios are kept to show the spread. Numbers in, numbers out: the sides are callables.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from colabkit.errors import MeasurementError

Result = TypeVar("Result")


def interleave(sides: Sequence[Callable[[int], Result]], rounds: int,
               on_round: Callable[[int, list[Result]], None] | None = None) -> list[list[Result]]:
    """Call every side once per round, in order, for `rounds` rounds; return each side's results.

    `sides[k](round_index)` measures side k; `on_round(round_index, results of that round)` is told
    after each round (progress lines). Raises MeasurementError for fewer than one round.
    """
    if rounds < 1:
        raise MeasurementError(f"rounds must be at least 1, got {rounds}")
    results: list[list[Result]] = [[] for _ in sides]
    for round_index in range(rounds):
        this_round = [side(round_index) for side in sides]
        for collected, value in zip(results, this_round):
            collected.append(value)
        if on_round is not None:
            on_round(round_index, this_round)
    return results


def spread(values: Sequence[float]) -> str:
    """'min-max' of the values (4 significant digits), or 'n/a' when there are none."""
    return f"{min(values):.4g}-{max(values):.4g}" if values else "n/a"


@dataclass(frozen=True)
class Agreement:
    """Two sides' values over interleaved rounds (`ours` measured first in each round)."""

    ours: tuple[float, ...]
    theirs: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.ours or len(self.ours) != len(self.theirs):
            raise MeasurementError(f"an agreement needs as many rounds on each side, at least one: got "
                                   f"{len(self.ours)} and {len(self.theirs)}")
        if any(not value > 0 for value in (*self.ours, *self.theirs)):
            raise MeasurementError(f"every round's figure must be > 0 to be compared: {self.ours}, {self.theirs}")

    @property
    def ours_median(self) -> float:
        return float(statistics.median(self.ours))

    @property
    def theirs_median(self) -> float:
        return float(statistics.median(self.theirs))

    @property
    def ratio(self) -> float:
        """The verdict's figure: median of ours / median of theirs."""
        return self.ours_median / self.theirs_median

    @property
    def paired(self) -> tuple[float, ...]:
        """Each round's ours / theirs."""
        return tuple(a / b for a, b in zip(self.ours, self.theirs))

    def within(self, low: float, high: float) -> bool:
        """Whether the ratio of medians lies in [low, high]."""
        return low <= self.ratio <= high

    def describe(self) -> str:
        """'1.012 (median of 3 interleaved rounds; paired 0.99-1.03)'."""
        return (f"{self.ratio:.3f} (median of {len(self.ours)} interleaved round(s); paired "
                f"{spread(self.paired)})")

    def as_dict(self) -> dict[str, Any]:
        return {"ours": list(self.ours), "theirs": list(self.theirs), "ours_median": self.ours_median,
                "theirs_median": self.theirs_median, "ratio": self.ratio, "paired": list(self.paired)}
