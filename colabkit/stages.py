"""A run in stages, gpu-check's and the device run's alike: a table of stages, each a piece of work with its time
budget, run in turn by `run_stages`, which says how each ended (a StageResult: ok, failed, stopped at its time,
skipped for time) and its time against its budget.

- In this process (gpu-check: its stages start the worker processes they need): each stage's work is called; one
  that raises fails, its reason said.
- With `logs` (the device run), each stage in a child process of its own, its output in logs/<stage>.log, under
  one deadline: a stage is given its budget and what the stages before it left of theirs, never more than what
  is left before `reserve_s` (the closing's), and is skipped with a line when that is under MIN_STAGE_S (a
  `required` one is given all that is left, MIN_STAGE_S at least); past its time it is stopped as Ctrl-C stops it
  (SIGTERM, then a kill after STOP_GRACE_S), so a sweep keeps what finished.

SIGTERM stops colabkit as Ctrl-C does (`sigterm_stops`), in a stage's child process and in any sweep.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from colabkit.errors import ColabkitError

MIN_STAGE_S = 20.0  # a stage that would get less is skipped: it could not finish one round
STOP_GRACE_S = 25.0  # after SIGTERM, a stage's time to finish its records and stop its kernels
EXIT_INTERRUPTED = 130
StageStatus = Literal["ok", "failed", "stopped", "skipped"]


@dataclass(frozen=True)
class Stage:
    """A stage: its name, its time budget, and its work (a function of no arguments: in a child process, one that
    can be pickled, whose int result is the process's exit status)."""

    name: str
    budget_s: float
    work: Callable[[], Any]
    required: bool = False  # given all the time left, even when late: the device run's report is its point


@dataclass
class StageResult:
    """How a stage ended, its time against its budget, and what its work gave back (in this process)."""

    name: str
    status: StageStatus
    seconds: float
    budget_s: float
    exit_code: int | None = None
    note: str = ""
    value: Any = None

    def line(self) -> str:
        said = f"{self.status}, {self.seconds:.0f} s of {self.budget_s:.0f} s"
        if self.exit_code not in (None, 0):
            said += f", exit {self.exit_code}"
        return f"stage {self.name}: {said}" + (f" ({self.note})" if self.note else "")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def sigterm_stops() -> Iterator[None]:
    """While inside: SIGTERM (a runtime shutting down, `kill`, a stage past its time) raises KeyboardInterrupt, as
    Ctrl-C does."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_stages(stages: Sequence[Stage], echo: Callable[[str], None], *, deadline: float | None = None,
               reserve_s: float = 0.0, logs: Path | None = None,
               environment: Mapping[str, str] | None = None) -> list[StageResult]:
    """Each stage in turn (see the module's docstring), a line as it starts and as it ends; with `logs`, each in a
    child process with `environment` added to its own, by `deadline` (seconds since the epoch) less `reserve_s`."""
    results, saved = [], 0.0
    for stage in stages:
        if logs is None:
            echo(f"stage {stage.name}: started (budget {stage.budget_s:.0f} s)")
            result = _in_process(stage)
        else:
            room = (deadline if deadline is not None else float("inf")) - time.time() - reserve_s
            if room < MIN_STAGE_S and not stage.required:
                result = StageResult(stage.name, "skipped", 0.0, stage.budget_s,
                                     note=f"skipped for time: {max(room, 0):.0f} s left before the closing stages, "
                                          f"under the {MIN_STAGE_S:.0f} s a stage needs")
            else:
                allowed = max(room, MIN_STAGE_S) if stage.required else min(room, stage.budget_s + saved)
                echo(f"stage {stage.name}: started ({allowed:.0f} s at most)")
                result = _in_child(stage, allowed, logs / f"{stage.name}.log", environment or {})
        saved = max(0.0, stage.budget_s + saved - result.seconds)
        echo(result.line())
        results.append(result)
    return results


def _in_process(stage: Stage) -> StageResult:
    start = time.monotonic()
    try:
        value = stage.work()
    except Exception as error:  # noqa: BLE001 - a stage's failure is its result: the next stages still run
        return StageResult(stage.name, "failed", time.monotonic() - start, stage.budget_s,
                           note=f"{type(error).__name__}: {error}")
    return StageResult(stage.name, "ok", time.monotonic() - start, stage.budget_s, value=value)


def _in_child(stage: Stage, allowed_s: float, log: Path, environment: Mapping[str, str]) -> StageResult:
    """`stage` in a child process of its own for at most `allowed_s`, its output to `log`; past it, SIGTERM (then a
    kill of its whole process group after the grace)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    process = multiprocessing.get_context("spawn").Process(target=_child, args=(stage.work, log, dict(environment)),
                                                           name=f"colabkit-stage-{stage.name}")
    process.start()
    process.join(allowed_s)
    if process.is_alive():
        os.kill(process.pid, signal.SIGTERM)
        process.join(STOP_GRACE_S)
        note = f"stopped at {allowed_s:.0f} s: the runs finished before are kept"
        if process.is_alive():
            try:
                os.killpg(process.pid, signal.SIGKILL)  # its kernels and workers with it
            except ProcessLookupError:  # no group of its own yet: stopped before its work began
                process.kill()
            process.join()
            note = f"stopped at {allowed_s:.0f} s and killed after {STOP_GRACE_S:.0f} s more"
        return StageResult(stage.name, "stopped", time.monotonic() - start, stage.budget_s, process.exitcode, note)
    code = process.exitcode
    return StageResult(stage.name, "ok" if code == 0 else "failed", time.monotonic() - start, stage.budget_s, code,
                       "" if code == 0 else f"see {log}")


def _child(work: Callable[[], Any], log: Path, environment: dict[str, str]) -> None:
    """A stage's child process: a process group of its own (its kernels and workers are stopped with it), its output
    to `log`, SIGTERM as Ctrl-C; exits with its work's status (a user error: one line, 2; Ctrl-C: 130)."""
    os.setsid()
    os.environ.update(environment)
    with open(log, "w", encoding="utf-8") as stream:
        os.dup2(stream.fileno(), sys.stdout.fileno())
        os.dup2(stream.fileno(), sys.stderr.fileno())
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        status = work()
    except KeyboardInterrupt:
        status = EXIT_INTERRUPTED
    except ColabkitError as error:
        print(f"error: {error}", file=sys.stderr)
        status = 2
    sys.exit(status if isinstance(status, int) else 0)
