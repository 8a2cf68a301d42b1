"""What an inference run must reach, kept apart from the scenarios and the system under test as MLPerf Inference's
LoadGen keeps it: a scenario's measurement issues queries until it has issued its minimum count (LoadGen's
`min_query_count`) AND run its minimum duration (`min_duration`), and stops at `max_duration` whatever it has. It
is a valid measurement only when both minimums are met; the one met last was binding. Single-stream's queries are
samples at batch 1; offline's are timed runs at one batch size (OFFLINE_RUNS at least: the fewest whose median
interval reaches 95 %)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from colabkit.errors import ParameterError

Scenario = Literal["single_stream", "offline"]  # LoadGen's SingleStream and Offline
OFFLINE_RUNS = 6
MAX_BATCH_CAP = 8192  # "max" never times more than this per call unless asked (minutes on a CPU otherwise)


def parse_batch_sizes(text: str | Sequence[int | str]) -> list[int | str]:
    """'1, 32, 256, max' -> [1, 32, 256, 'max']: whole numbers >= 1 and 'max', in the order given, no repeats.
    ParameterError (one line) for anything else."""
    sizes: list[int | str] = []
    for part in (str(piece).strip() for piece in (text.split(",") if isinstance(text, str) else text)):
        value: int | str = part if part == "max" else int(part) if part.isdigit() and int(part) >= 1 else ""
        if value == "":
            raise ParameterError(f"offline_batch_sizes = {text!r}: expected whole numbers >= 1 and 'max', "
                                 "separated by commas (e.g. '1,32,256,max')")
        if value not in sizes:
            sizes.append(value)
    return sizes


@dataclass(frozen=True)
class InferenceSettings:
    """LoadGen's TestSettings for both scenarios: single-stream issues `min_query_count` queries or more, each offline
    batch size `offline_runs` runs or more, each for `min_duration_s` or more, stopped at `max_duration_s`.
    `offline_batch_sizes`: '1,32,256,max' (max: the largest the memory estimate allows, capped at `max_batch_cap`)."""

    min_query_count: int
    min_duration_s: float
    max_duration_s: float
    offline_batch_sizes: Sequence[int | str] | str = "1"
    warmup_queries: int = 20
    offline_runs: int = OFFLINE_RUNS
    max_batch_cap: int = MAX_BATCH_CAP
    batches: list[int | str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "batches", parse_batch_sizes(self.offline_batch_sizes))
        if self.min_query_count < 1 or not 0 <= self.min_duration_s <= self.max_duration_s or self.max_duration_s <= 0:
            raise ParameterError(f"inference settings: need queries >= 1 and 0 <= min_duration_s <= max_duration_s "
                                 f"> 0, got {self.min_query_count}, {self.min_duration_s} and {self.max_duration_s}")


def issue_until_met(query: Callable[[int], Any], settings: InferenceSettings, scenario: Scenario,
                    clock: Callable[[], float] = time.perf_counter) -> tuple[list[Any], dict[str, Any]]:
    """(every query's result, the record's account of them): `query(i)` called for i = 0, 1, ... until `scenario`'s
    minimum count is issued and its minimum duration has passed, or until `max_duration_s`. The account: the
    `settings` to reach, the `duration_s` from the first issue to the last answer (as LoadGen's), whether both
    minimums were met (`valid`) and the one met last (`binding`: 'min_query_count' or 'min_duration'; None if not)."""
    minimum = settings.min_query_count if scenario == "single_stream" else settings.offline_runs
    results: list[Any] = []
    start, elapsed, elapsed_at_count = clock(), 0.0, 0.0
    while elapsed < settings.max_duration_s and (len(results) < minimum or elapsed < settings.min_duration_s):
        results.append(query(len(results)))
        elapsed = clock() - start
        elapsed_at_count = elapsed if len(results) == minimum else elapsed_at_count
    valid = len(results) >= minimum and elapsed >= settings.min_duration_s
    binding = None if not valid else "min_duration" if elapsed_at_count < settings.min_duration_s else "min_query_count"
    limits = {"min_query_count": minimum, "min_duration_s": settings.min_duration_s,
              "max_duration_s": settings.max_duration_s}
    return results, {"settings": limits, "duration_s": elapsed, "valid": valid, "binding": binding}
