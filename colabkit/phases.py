"""Where a run's fixed cost goes: the seconds of the phases that measure nothing (device set-up, host
probes, the FLOP count), noted as they happen (start in UTC, seconds) and kept in the record
(`phases`) for benchmarks/sweep_overhead.py. `colabkit.start_run` starts a new list; notebooks call
nothing for it.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_NOTED: list[dict[str, Any]] = []


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Note the seconds the enclosed code takes as phase `name` of the current run."""
    started_at = dt.datetime.now(dt.timezone.utc).isoformat()
    start = time.perf_counter()
    try:
        yield
    finally:
        _NOTED.append({"phase": name, "started_at": started_at, "seconds": time.perf_counter() - start})


def noted_phases() -> list[dict[str, Any]]:
    """The phases noted since the run started, in order: [{"phase", "started_at", "seconds"}, ...]."""
    return [dict(entry) for entry in _NOTED]


def start_phases() -> None:
    """A new run starts: forget the phases of the one before (a warm kernel serves several)."""
    _NOTED.clear()
