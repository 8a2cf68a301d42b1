"""Run notebooks once per combination of their grids, through papermill, into OUT/ -- and resume.

A sweep (1) validates every grid file, `-p` override and the combinations they make, before
anything runs; (2) asks a child process which devices this machine has (so the sweep itself never
claims a GPU or TPU); (3) decides per combination: run it, keep the result an earlier sweep
finished (its record is ok and its fingerprint matches, see colabkit.fingerprint), or skip it
because its device is absent; (4) runs the rest, one fresh kernel each, serially or in `jobs`
parallel worker processes; (5) returns one Outcome per combination for the summary table.

Products per combination (see colabkit.execution): OUT/<notebook>/<device>/<slug>.ipynb, .html,
.json (the record), .log. One sweep at a time writes to an OUT folder (a lock file says which).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from colabkit.device.spec import parse_device
from colabkit.errors import (
    ColabkitError,
    GridError,
    OutputFolderError,
    RecordError,
    SweepInterrupted,
    SweepLockedError,
)
from colabkit.notebook_runner import warm_up
from colabkit.records.record import read_record
from colabkit.sweep.execution import (
    Outcome,
    RunFiles,
    RunOptions,
    execute_combination,
    fail_without_crashing,
    is_filesystem_fault,
    write_skipped_record,
)
from colabkit.sweep.fingerprint import fingerprint, stale_reason
from colabkit.sweep.grid import Combination, check_overrides, duplicate_problems, expand, load_grid

__all__ = ["Decision", "Outcome", "RunOptions", "SweepAction", "check_output_folder", "decide", "detect_devices", "dry_run_table",
           "missing_device_reason",
           "plan", "prepare", "run_sweep", "summary_table", "sweep_lock", "text_table"]

_DETECT = "import json; from colabkit.device import available_devices; print(json.dumps(available_devices()))"
LOCK_NAME = ".colabkit-sweep.lock"
PARALLEL_WARNING = (
    "warning: --jobs {jobs} runs combinations side by side. Runs that share a device distort each other's "
    "timings (every CPU run shares the host's cores; GPU runs get a GPU each while there are enough). "
    "Use --jobs 1 for numbers you publish; each record's `sweep.jobs` says how it ran."
)


# --- devices -------------------------------------------------------------------------------------

def detect_devices(timeout_s: float = 120) -> dict[str, int]:
    """Devices this machine has, asked in a child process so this one never claims a GPU or TPU."""
    completed = subprocess.run([sys.executable, "-c", _DETECT], capture_output=True, text=True,
                               timeout=timeout_s, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    if completed.returncode != 0:
        raise ColabkitError(f"could not detect this machine's devices: {completed.stderr.strip()[-500:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def missing_device_reason(device: str, available: dict[str, int]) -> str | None:
    """Why `device` cannot run here (None if it can): 'gpu:2' needs 2 GPUs, 'tpu' a TPU runtime."""
    request = parse_device(device)
    if request.kind in ("auto", "cpu", "multiworker"):  # multiworker: local worker processes, any machine
        return None
    have = available.get(request.kind, 0)
    need = request.count or 1
    if have >= need:
        return None
    inventory = ", ".join(f"{kind}: {count}" for kind, count in sorted(available.items()))
    return f"device '{device}' is not on this machine (it has {inventory})"


def unsupported_combination(combination: Combination) -> str | None:
    """Why a combination's backend cannot run on its device (PyTorch on TPU without torch_xla, a
    backend whose package is missing): such a combination is skipped with the reason, never run."""
    backend = combination.params.get("backend")
    if backend is None:
        return None
    from colabkit.device.backends import unsupported_reason

    return unsupported_reason(str(backend), parse_device(combination.device).kind)


@dataclass
class _Lease:
    gpus: list[str] = field(default_factory=list)
    tpu: bool = False

    @property
    def env(self) -> dict[str, str] | None:
        return {"CUDA_VISIBLE_DEVICES": ",".join(self.gpus)} if self.gpus else None


class _DeviceSlots:
    """Accelerators free for the next parallel job: a GPU job gets GPUs of its own (`gpu` one,
    `gpu:N` N) through CUDA_VISIBLE_DEVICES, the TPU one job at a time; CPU jobs need no slot."""

    def __init__(self, available: dict[str, int]) -> None:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = [item.strip() for item in visible.split(",") if item.strip()] if visible else []
        count = available.get("gpu", 0)
        self.free_gpus = (ids or [str(index) for index in range(count)])[:count]
        self.tpu_free = available.get("tpu", 0) > 0
        self.has_tpu = self.tpu_free

    def take(self, device: str) -> _Lease | None:
        request = parse_device(device)
        if request.kind == "cpu":
            return _Lease()
        if request.kind == "tpu":
            if not self.tpu_free:
                return None
            self.tpu_free = False
            return _Lease(tpu=True)
        if request.kind == "gpu":
            need = request.count or 1
        else:  # auto may take any accelerator: it waits for all of them
            if self.has_tpu and not self.tpu_free:
                return None
            need = len(self.free_gpus)
        if len(self.free_gpus) < need:
            return None
        lease = _Lease(self.free_gpus[:need], tpu=request.kind == "auto" and self.has_tpu)
        del self.free_gpus[:need]
        self.tpu_free = self.tpu_free and not lease.tpu
        return lease

    def give_back(self, lease: _Lease) -> None:
        self.free_gpus.extend(lease.gpus)
        self.tpu_free = self.tpu_free or lease.tpu


# --- planning ------------------------------------------------------------------------------------

def plan(grid_paths: list[str | Path], preset: str | None = None, device: str | None = None,
         overrides: dict[str, Any] | None = None, out: str | Path = "outputs") -> list[Combination]:
    """All combinations of the grid files under `preset` and `overrides`, narrowed to `device`.

    `device` may list several, comma-separated ('cpu,gpu'); 'cpu' also takes 'cpu:2'. Every grid
    file is validated, and every problem of every file reported in one GridError, before any
    combination is returned, so a bad file runs nothing.
    """
    devices = [name.strip() for name in device.split(",") if name.strip()] if device else None
    problems: list[str] = []
    for name in devices or []:
        try:
            parse_device(name)
        except ColabkitError as exc:
            problems.append(f"--device: {exc}")
    specs = []
    for grid_path in grid_paths:
        try:
            specs.append(load_grid(grid_path))
        except GridError as exc:
            where = f"{exc.path}: " if exc.path else ""
            problems.extend(where + problem for problem in exc.problems)
    problems += check_overrides(specs, overrides or {})
    if problems:
        raise GridError(problems)
    combinations = []
    for spec in specs:
        combinations += expand(spec, preset, devices=devices, overrides=overrides)
    problems = duplicate_problems(combinations, Path(out))
    if problems:
        raise GridError(problems)
    if devices and not combinations:
        raise GridError(f"no combination runs on device {device!r}: the grid files list other devices")
    return combinations


class SweepAction(StrEnum):
    """What a sweep does with one combination."""

    RUN = "run"  # not run yet (or skipped before, and its device is here now)
    RERUN = "rerun"  # run again: failed, stale, interrupted, unreadable, or --force
    DONE = "done"  # an earlier ok record with the same fingerprint is kept
    SKIP = "skip"  # its device is absent: a skipped record says so
    SET_ASIDE = "set_aside"  # its record file cannot be read: kept untouched, nothing runs (--rerun replaces it)


@dataclass
class Decision:
    """What a sweep will do with one combination, and why."""

    combination: Combination
    action: SweepAction
    reason: str
    fingerprint: dict[str, Any]
    note: str = ""  # what else the dry run should say (a skip keeps a record file it cannot read)

    def __post_init__(self) -> None:
        self.action = SweepAction(self.action)  # a plain "run" is accepted; a misspelt one is not


def _existing_record(path: Path) -> tuple[dict[str, Any] | None, str]:
    if not path.exists():
        return None, ""
    try:
        return read_record(path), ""
    except (RecordError, OSError) as exc:
        return None, f"its record cannot be read ({str(exc).removeprefix(f'{path}: ')})"


def decide(combinations: list[Combination], out: str | Path, available: dict[str, int],
           force: bool = False, rerun_unreadable: bool = False) -> list[Decision]:
    """Run, rerun, keep, skip or set aside, per combination, from the records already in `out`.

    A record file that cannot be read (not UTF-8, not JSON, a schema this colabkit does not know,
    e.g. an ok record from a newer colabkit) is never overwritten unless `rerun_unreadable`: its
    combination is set aside.
    """
    decisions = []
    for combination in combinations:
        current = fingerprint(combination.notebook, combination.params)
        files = RunFiles.of(combination, out)
        absent = missing_device_reason(combination.device, available) or unsupported_combination(combination)
        if absent:
            unreadable = "" if rerun_unreadable else _existing_record(files.record)[1]
            kept = f"; {unreadable} and is kept as it is" if unreadable else ""
            decisions.append(Decision(combination, SweepAction.SKIP, absent, current, note=kept))
            continue
        record, unreadable = _existing_record(files.record)
        if unreadable and not rerun_unreadable:
            decisions.append(Decision(combination, SweepAction.SET_ASIDE, f"{unreadable}; kept as it is (--rerun replaces it)",
                                      current))
        elif record is None:
            interrupted = files.running_notebook.exists()
            reason = unreadable or ("an earlier sweep stopped while running it" if interrupted else "not run yet")
            decisions.append(Decision(combination, SweepAction.RERUN if unreadable or interrupted else SweepAction.RUN, reason, current))
        elif force:
            decisions.append(Decision(combination, SweepAction.RERUN, "--force", current))
        elif record["status"] == "ok":
            stale = stale_reason(record.get("fingerprint"), current)
            decisions.append(Decision(combination, SweepAction.RERUN, f"stale: {stale}", current) if stale
                             else Decision(combination, SweepAction.DONE, "finished earlier with the same fingerprint", current))
        elif record["status"] == "failed":
            error = record.get("error") or {}
            decisions.append(Decision(combination, SweepAction.RERUN, f"failed before ({error.get('type', 'error')})", current))
        else:
            decisions.append(Decision(combination, SweepAction.RUN, "skipped before; its device is here now", current))
    return decisions


def prepare(grid_paths: list[str | Path], preset: str | None = None, device: str | None = None,
            out: str | Path = "outputs", available: dict[str, int] | None = None,
            overrides: dict[str, Any] | None = None, force: bool = False,
            rerun_unreadable: bool = False) -> list[Decision]:
    """Validate, check the output folder, detect devices (unless `available` is given), and
    decide every combination. Writes nothing."""
    combinations = plan(grid_paths, preset, device, overrides, out)
    check_output_folder(out)
    available = detect_devices() if available is None else available
    return decide(combinations, out, available, force, rerun_unreadable)


def check_output_folder(out: str | Path) -> None:
    """Raise OutputFolderError (one line) unless `out` is, or can be made, a folder this process
    can write into. Creates nothing: the first existing folder on the way is checked instead."""
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise OutputFolderError(f"output folder {folder} is a file, not a folder: choose another --out")
    existing = folder
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing != folder and not existing.is_dir():
        raise OutputFolderError(f"output folder {folder} cannot be made: {existing} is a file, not a folder")
    if os.statvfs(existing).f_flag & os.ST_RDONLY:
        raise OutputFolderError(f"output folder {folder} is on a read-only file system ({existing})")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputFolderError(f"output folder {folder} is not writable ({existing}: permission denied)")


# --- running -------------------------------------------------------------------------------------

@contextmanager
def sweep_lock(out: str | Path) -> Iterator[None]:
    """Hold OUT's lock for the sweep's lifetime; SweepLockedError if another sweep holds it.

    An flock dies with its process, so a sweep killed with kill -9 never leaves OUT locked.
    """
    import fcntl

    folder = Path(out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputFolderError(f"output folder {folder} cannot be made: {exc.strerror}") from None
    path = folder / LOCK_NAME
    while True:
        try:
            handle = open(path, "a+", encoding="utf-8")
        except OSError as exc:
            raise OutputFolderError(f"output folder {folder} is not writable: {exc.strerror}") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            handle.close()
            raise SweepLockedError(f"another sweep (pid {holder}) is writing to {folder}; "
                                   "wait for it to finish or stop it, then run this again") from None
        except OSError:
            break  # a file system without locks (some network mounts): go on unguarded
        if os.path.exists(path) and os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
            break
        handle.close()  # the holder removed the file between our open and lock: take the new one
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
    except OSError:
        pass  # a full disk: the lock holds without the pid, which only tells `status` who holds it
    try:
        yield
    finally:
        path.unlink(missing_ok=True)  # removed while still held, so no one locks a stale file
        handle.close()


def _worker_init(parent_pid: int) -> None:
    """In each parallel worker: Ctrl-C is the sweep's to handle, and the worker dies with the sweep
    (its kernel follows: ipykernel exits when its parent does)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: Linux only
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:
        os._exit(1)  # the sweep died before prctl took effect
    warm_up()  # so that the first run's time is the run's own


class Progress:
    """One progress bar over the combinations to run (ETA, current ones named) and a line per run."""

    def __init__(self, total: int, jobs: int, echo: Callable[[str], None], bar: bool) -> None:
        from tqdm import tqdm

        self.total, self.jobs, self.echo, self.done = total, jobs, echo, 0
        self.running: list[str] = []
        self.seconds: list[float] = []
        self.bar = tqdm(total=total, unit="run", desc="sweep", file=sys.stderr, dynamic_ncols=True,
                        disable=not bar or total == 0)
        self.with_bar = bar and total > 0

    def say(self, line: str) -> None:
        if self.with_bar:
            with self.bar.external_write_mode():
                self.echo(line)
        else:
            self.echo(line)

    def started(self, combination: Combination) -> None:
        self.running.append(combination.label)
        self.bar.set_postfix_str(" | ".join(self.running), refresh=True)
        if not self.with_bar:  # in a log file, say what runs (it names the culprit if one hangs)
            self.say(f"[{self.done + len(self.running)}/{self.total}] start  {combination.label}")

    def finished(self, outcome: Outcome) -> None:
        label = outcome.combination.label
        if label in self.running:
            self.running.remove(label)
        self.done += 1
        self.seconds.append(outcome.seconds)
        left = self.total - self.done
        eta = f"; about {_duration(sum(self.seconds) / len(self.seconds) * left / self.jobs)} left" if left else ""
        note = f" - {outcome.message}" if outcome.message else ""
        self.say(f"[{self.done}/{self.total}] {outcome.status:<6} {label} ({outcome.seconds:.1f} s{eta}){note}")
        self.bar.set_postfix_str(" | ".join(self.running), refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _run_serial(decisions: list[Decision], out: Path, options: RunOptions, progress: Progress,
                outcomes: list[Outcome]) -> None:
    for decision in decisions:
        progress.started(decision.combination)
        outcome = execute_combination(decision.combination, out, decision.fingerprint, options)
        outcomes.append(outcome)
        progress.finished(outcome)


def _new_pool(jobs: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_worker_init, initargs=(os.getpid(),))


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    pool.shutdown(wait=False, cancel_futures=True)
    for child in multiprocessing.active_children():
        child.terminate()


def _run_parallel(decisions: list[Decision], out: Path, options: RunOptions, available: dict[str, int],
                  progress: Progress, outcomes: list[Outcome]) -> None:
    slots = _DeviceSlots(available)
    pending = list(decisions)
    running: dict[Future, tuple[Decision, _Lease, float]] = {}
    pool = _new_pool(options.jobs)
    try:
        while pending or running:
            for decision in list(pending):
                if len(running) >= options.jobs:
                    break
                lease = slots.take(decision.combination.device)
                if lease is None:
                    continue  # its accelerator is busy: a later combination may still start
                pending.remove(decision)
                future = pool.submit(execute_combination, decision.combination, out, decision.fingerprint,
                                     options, lease.env)
                running[future] = (decision, lease, time.perf_counter())
                progress.started(decision.combination)
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            broken = False
            for future in finished:
                decision, lease, started = running.pop(future)
                slots.give_back(lease)
                try:
                    outcome = future.result()
                except BrokenProcessPool as exc:
                    broken = True
                    error = {"type": type(exc).__name__, "kind": "worker_died",
                             "message": "the worker process running it died (killed, or out of host memory)"}
                    outcome = fail_without_crashing(decision.combination, RunFiles.of(decision.combination, out),
                                                    decision.fingerprint, error, seconds=time.perf_counter() - started,
                                                    sweep_section={"jobs": options.jobs})
                outcomes.append(outcome)
                progress.finished(outcome)
            if broken:  # every job of a broken pool fails; start a fresh pool for the rest
                pool.shutdown(wait=False, cancel_futures=True)
                pool = _new_pool(options.jobs)
    except BaseException as stopped:
        _stop_workers(pool)
        interrupted = isinstance(stopped, KeyboardInterrupt)  # keep the marks `status` shows as unfinished
        for decision, _, _ in running.values():
            RunFiles.of(decision.combination, out).discard_temporaries(keep_notebook=interrupted)
        raise
    pool.shutdown(wait=True)


def run_sweep(
    grid_paths: list[str | Path],
    preset: str | None = None,
    device: str | None = None,
    out: str | Path = "outputs",
    available: dict[str, int] | None = None,
    kernel_name: str | None = None,
    echo: Callable[[str], None] = print,
    *,
    overrides: dict[str, Any] | None = None,
    force: bool = False,
    rerun_unreadable: bool = False,
    timeout_s: float | None = None,
    jobs: int = 1,
    html: bool = True,
    progress: bool = False,
    worker_grace_s: float = 60,
) -> list[Outcome]:
    """Run every combination that is not finished yet; return one Outcome per combination.

    Nothing runs if a grid file, override or combination is invalid (GridError), or if `out`
    cannot be written or is locked by another sweep (OutputFolderError, SweepLockedError): all
    decided before devices are detected. Combinations whose record is ok with a matching
    fingerprint are kept (`resumed`) unless `force`; absent devices are recorded as skipped;
    record files that cannot be read are set aside untouched unless `rerun_unreadable`. A
    file-system fault of one combination fails that combination only. Raises SweepInterrupted
    (with the outcomes so far) on Ctrl-C or SIGTERM.
    """
    if jobs < 1:
        raise ColabkitError(f"--jobs must be at least 1, got {jobs}")
    if timeout_s is not None and not timeout_s > 0:
        raise ColabkitError(f"--timeout must be more than 0 seconds, got {timeout_s:g}")
    out = Path(out)
    combinations = plan(grid_paths, preset, device, overrides, out)
    check_output_folder(out)
    options = RunOptions(timeout_s=timeout_s, kernel_name=kernel_name, html=html, cwd=str(Path.cwd()), jobs=jobs,
                         worker_grace_s=worker_grace_s)
    outcomes: list[Outcome] = []
    with sweep_lock(out):
        available = detect_devices() if available is None else available
        decisions = decide(combinations, out, available, force, rerun_unreadable)
        for decision in decisions:
            if decision.action == SweepAction.SKIP:
                outcomes.append(_skip(decision, out, rerun_unreadable))
            elif decision.action == SweepAction.DONE:
                record_path = RunFiles.of(decision.combination, out).record
                outcomes.append(Outcome(decision.combination, "ok", 0.0, record_path, "finished earlier", resumed=True))
            elif decision.action == SweepAction.SET_ASIDE:
                record_path = RunFiles.of(decision.combination, out).record
                outcomes.append(Outcome(decision.combination, "skipped", 0.0, record_path, decision.reason,
                                        set_aside=True))
        to_run = [decision for decision in decisions if decision.action in (SweepAction.RUN, SweepAction.RERUN)]
        kept = sum(outcome.resumed for outcome in outcomes)
        set_aside = sum(outcome.set_aside for outcome in outcomes)
        echo(f"{len(decisions)} combinations: {len(to_run)} to run, {kept} finished earlier (kept), "
             f"{len(outcomes) - kept - set_aside} skipped (device absent)"
             + (f", {set_aside} set aside (record file unreadable; --rerun replaces it)" if set_aside else ""))
        if jobs > 1 and len(to_run) > 1:
            echo(PARALLEL_WARNING.format(jobs=jobs))
        bar = Progress(len(to_run), min(jobs, max(len(to_run), 1)), echo, progress)
        try:
            if jobs == 1:
                _run_serial(to_run, out, options, bar, outcomes)
            else:
                _run_parallel(to_run, out, options, available, bar, outcomes)
        except KeyboardInterrupt:
            bar.close()
            raise SweepInterrupted(outcomes, f"interrupted after {bar.done} of {len(to_run)} runs") from None
        bar.close()
    # Parallel outcomes come back with copies of their combinations: order them by output path.
    order = {decision.combination.output_base(out): index for index, decision in enumerate(decisions)}
    return sorted(outcomes, key=lambda outcome: order[outcome.combination.output_base(out)])


def _skip(decision: Decision, out: Path, rerun_unreadable: bool) -> Outcome:
    """The skipped record of a combination whose device is absent; a file-system fault fails it."""
    try:
        return write_skipped_record(decision.combination, out, decision.fingerprint, decision.reason,
                                    replace_unreadable=rerun_unreadable)
    except OSError as exc:
        if not is_filesystem_fault(exc):
            raise
        return Outcome(decision.combination, "failed", 0.0, RunFiles.of(decision.combination, out).record,
                       f"{type(exc).__name__}: could not write its skipped record ({exc.strerror}: {exc.filename})",
                       error={"type": type(exc).__name__, "kind": "filesystem", "message": str(exc)})


# --- tables --------------------------------------------------------------------------------------

def text_table(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows (the first a header) as aligned plain-text lines, with a rule under the header."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return lines


def summary_table(outcomes: list[Outcome]) -> str:
    """A plain-text table of the outcomes and their counts."""
    rows = [("notebook", "device", "combination", "status", "seconds", "note")]
    for o in outcomes:
        seconds = "-" if o.resumed or o.status == "skipped" else f"{o.seconds:.1f}"
        rows.append((o.combination.name, o.combination.device, o.combination.slug, o.status, seconds,
                     o.message[:100]))
    lines = text_table(rows)
    counts = {status: sum(o.status == status and not o.set_aside for o in outcomes)
              for status in ("ok", "failed", "skipped")}
    ran = [o for o in outcomes if not o.resumed and o.status != "skipped"]
    lines.append(", ".join(f"{count} {status}" for status, count in counts.items())
                 + f"; {sum(o.resumed for o in outcomes)} of the ok finished earlier; "
                 + f"ran {len(ran)}, {sum(o.seconds for o in ran):.1f} s in all")
    aside = [o for o in outcomes if o.set_aside]
    if aside:
        folders = sorted({str(o.record_path.parent) for o in aside})
        lines.append(f"{len(aside)} set aside: record file(s) that cannot be read, kept as they are, in "
                     f"{', '.join(folders)} (fix or move them, or run again with --rerun to replace them)")
    return "\n".join(lines)


def dry_run_table(decisions: list[Decision], out: str | Path) -> str:
    """What a sweep would do, per combination, and where each record is or would be."""
    rows = [("notebook", "device", "combination", "action", "why")]
    rows += [(d.combination.name, d.combination.device, d.combination.slug, d.action, d.reason + d.note)
             for d in decisions]
    lines = text_table(rows)
    counts = {action.value: sum(d.action == action for d in decisions) for action in SweepAction}
    lines.append(f"would run {counts['run'] + counts['rerun']} ({counts['rerun']} of them again), keep "
                 f"{counts['done']} finished earlier, skip {counts['skip']}"
                 + (f", set aside {counts['set_aside']} (record file unreadable; --rerun replaces it)"
                    if counts["set_aside"] else "") + f"; outputs in {out}")
    return "\n".join(lines)
