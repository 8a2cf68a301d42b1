"""Execute one combination through papermill so that nothing half-done passes for a result.

Files (`RunFiles`): OUT/<notebook>/<device>/<slug>.ipynb, .html, .json, .log. The notebook, HTML
and record are written under temporary dot-names while it runs (the log in place, to follow), then
renamed, the record last and atomically: a sweep killed at any instant leaves a complete record or
none. Every failure ends in a `failed` record naming the error's type, kind, message and cell:
"exception", "oom", "dead_kernel", "timeout", "kernel_start", "missing_record".
"""

from __future__ import annotations

import dataclasses
import errno
import glob
import json
import math
import os
import random
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from colabkit.device.bandwidth import HOST_FACTS_ENV
from colabkit.device.host_state import wait_for_quiet
from colabkit.device.spec import MULTI_WORKER
from colabkit.errors import InsufficientMemoryError, RecordError
from colabkit.io import write_json_atomic
from colabkit.records.record import make_record, read_record, running_path, utc_now
from colabkit.records.run_error import RunError, is_out_of_memory
from colabkit.records.schema import ErrorKind, RecordStatus
from colabkit.sweep.expand import Combination
from colabkit.sweep.options import RunOptions
from colabkit.sweep.runners.kernels import KernelLease
from colabkit.sweep.runners.notebook import (
    KernelWatch,
    cell_error,
    cell_failure,
    execute_notebook,
    export_run_html,
    library_logs_to,
    source_index,
    started_cells,
)

SUFFIXES = (".ipynb", ".html", ".json", ".log")


@dataclass
class Outcome:
    """What happened to one combination."""

    combination: Combination
    status: RecordStatus
    seconds: float
    record_path: Path
    message: str = ""
    resumed: bool = False  # True: an earlier sweep's record was kept, nothing ran now
    set_aside: bool = False  # True: its record file cannot be read; kept untouched, nothing ran (see --rerun)
    error: RunError | None = None  # how it failed (or why it was skipped); None when ok

    def __post_init__(self) -> None:
        self.status = RecordStatus(self.status)  # a record's status string, checked against the vocabulary

    @property
    def too_large(self) -> bool:
        """Skipped before it ran: its model clearly cannot fit its device's memory (sweep.devices.too_large)."""
        return (self.status == RecordStatus.SKIPPED and self.error is not None
                and self.error.type == InsufficientMemoryError.__name__)


class RunFiles:
    """The final and temporary paths of one combination's products."""

    def __init__(self, base: Path) -> None:
        self.base = base
        # Slugs may hold dots (lr-0.001), so suffixes are appended, never substituted.
        self.notebook, self.html, self.record, self.log = (base.with_name(base.name + s) for s in SUFFIXES)
        self.running_notebook, self.running_record, self.running_html = (
            running_path(base, extension) for extension in (".ipynb", ".json", ".html"))

    @classmethod
    def of(cls, combination: Combination, out: str | Path) -> RunFiles:
        return cls(combination.output_base(Path(out)))

    @property
    def temporaries(self) -> list[Path]:
        """The temporary names, and the leftovers of atomic writes a kill cut short."""
        leftovers = [path for target in (self.record, self.running_record)
                     for path in self.base.parent.glob(f".{glob.escape(target.name)}.*.tmp")]
        return [self.running_notebook, self.running_record, self.running_html, *leftovers]

    def prepare(self) -> None:
        """Make the folder; remove a previous run's products and any temporaries a killed run left."""
        self.base.parent.mkdir(parents=True, exist_ok=True)
        # The record goes first: from here on, this combination has no result until it finishes.
        for stale in (self.record, self.html, self.notebook, *self.temporaries):
            stale.unlink(missing_ok=True)

    def discard_temporaries(self, keep_notebook: bool = False) -> None:
        """Remove the temporaries; `keep_notebook` keeps the running notebook, the mark of a run
        that was interrupted (`status` counts it as unfinished; the next run removes it)."""
        for temporary in self.temporaries:
            if not (keep_notebook and temporary == self.running_notebook):
                temporary.unlink(missing_ok=True)


class _RunBudget:
    """nbclient's `timeout_func`: each cell may use what is left of the run's time limit."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline: float | None = None

    def __call__(self, cell: Any) -> int:
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + self.seconds  # the clock starts with the first cell, after kernel start
        return max(1, math.ceil(self.deadline - now))  # 0 would mean "no limit" to nbclient


def describe_failure(exc: BaseException, running_notebook: Path, source_notebook: Path, timeout_s: float | None,
                     exit_code: int | None = None) -> RunError:
    """How a run failed, from what papermill raised: an exception in a cell (colabkit.sweep.runners.notebook's
    cell_error), or a time limit, a dead kernel, a kernel that never started, a file-system fault,
    placed at the last cell that started (`cell` its index as stored, `exec_count` its In [n])."""
    from jupyter_client.kernelspec import NoSuchKernel
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    failure = cell_failure(exc)
    if failure is not None:  # papermill.PapermillExecutionError: an exception raised inside a cell
        return cell_error(failure, source_notebook)
    name, message, exit_status = type(exc).__name__, str(exc).strip()[:2000], None
    if isinstance(exc, CellTimeoutError):
        kind, message = ErrorKind.TIMEOUT, f"the run exceeded its time limit (--timeout {timeout_s:g} s)"
    elif isinstance(exc, DeadKernelError):
        how = f" with exit code {exit_code}" if exit_code is not None else ""
        if exit_code is not None and exit_code < 0:
            how += f" (signal {-exit_code}{': SIGKILL, e.g. the OOM killer' if exit_code == -9 else ''})"
        kind, message, exit_status = ErrorKind.DEAD_KERNEL, f"the kernel process died{how} while a cell ran", exit_code
    elif isinstance(exc, NoSuchKernel):
        kind, message = ErrorKind.KERNEL_START, f"no Jupyter kernel named {exc.args[0] if exc.args else ''!r}"
    elif is_filesystem_fault(exc):
        kind = ErrorKind.FILESYSTEM
    else:
        kind = ErrorKind.OOM if is_out_of_memory(name, message) else ErrorKind.SWEEP
    started = started_cells(running_notebook)
    if not started:
        # Nothing ran: a failure of the sweep's own machinery means the kernel never came up.
        return RunError(name, ErrorKind.KERNEL_START if kind == ErrorKind.SWEEP else kind, message,
                        exit_code=exit_status)
    index, cell = started[-1]  # the last cell that started is the one running when the run ended
    source = str(cell.get("source", ""))
    return RunError(name, kind, message, cell=source_index(source_notebook, source, index),
                    exec_count=cell.get("execution_count"), source=source[:2000], exit_code=exit_status)


FILESYSTEM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EFBIG,
                               errno.ENOTDIR, errno.EISDIR, errno.EEXIST})


def is_filesystem_fault(exc: BaseException) -> bool:
    """A fault of the output folder (full disk, no permission, a file where a folder should be):
    it fails the combination it hit, never the whole sweep, and retrying at once does not help."""
    return isinstance(exc, OSError) and exc.errno in FILESYSTEM_ERRNOS


def filesystem_error(exc: OSError, where: Path) -> RunError:
    """The error of a run a file-system fault failed: 'No space left on device: <the file>'."""
    return RunError(type(exc).__name__, ErrorKind.FILESYSTEM, f"{exc.strerror or exc}: {exc.filename or where}")


def _execute_workers(combination: Combination, files: RunFiles, params: dict[str, Any], options: RunOptions,
                     log: IO[str], env: dict[str, str] | None) -> RunError | None:
    """A `multiworker:N` combination: N local worker processes (colabkit.sweep.runners.multiworker), the
    chief's notebook and record being the combination's. Returns the error, or None when every worker finished."""
    from colabkit.sweep.runners.multiworker import run_multiworker_notebook

    count = combination.request.count or 2
    scratch = files.base.with_name(files.base.name + ".workers")
    return run_multiworker_notebook(combination.notebook, count, params, files.running_notebook, scratch,
                                    cwd=options.cwd or Path.cwd(), timeout_s=options.timeout_s,
                                    grace_s=options.worker_grace_s, env=env, log=log).error


def _execute(combination: Combination, files: RunFiles, params: dict[str, Any], options: RunOptions,
             log: IO[str], env: dict[str, str] | None, lease: KernelLease) -> tuple[RunError | None, int]:
    """Run papermill in a fresh kernel or the `lease`'s warm one, retrying kernel start-up failures;
    (the error or None, attempts used)."""
    if combination.request.kind == MULTI_WORKER:
        return _execute_workers(combination, files, params, options, log, env), 1
    from jupyter_client.kernelspec import NoSuchKernel

    for attempt in range(1, options.start_attempts + 1):
        watch = KernelWatch()
        try:
            lease.acquire(log, watch)
            execute_notebook(
                combination.notebook, files.running_notebook, params, log, kernel_name=options.kernel_name,
                cwd=options.cwd, env=env, watch=watch, start_timeout_s=options.start_timeout_s,
                timeout_func=_RunBudget(options.timeout_s) if options.timeout_s else None,
                # C-level output (TensorFlow's logs) goes to the log once, not also into every cell.
                capture_fd_output=False, kernel_manager=lease.manager,
            )
            return None, attempt
        except Exception as exc:  # noqa: BLE001 - whatever one run does must not sink the sweep
            log.write("\n" + "".join(traceback.format_exception(exc)))
            never_started = not started_cells(files.running_notebook) and cell_failure(exc) is None
            if (never_started and attempt < options.start_attempts and not isinstance(exc, NoSuchKernel)
                    and not is_filesystem_fault(exc)):
                # Two kernels starting at once can pick the same free port; a moment later they won't.
                delay = attempt + random.uniform(0, 1)
                log.write(f"\n[colabkit] the kernel did not start (attempt {attempt} of {options.start_attempts}); "
                          f"retrying in {delay:.1f} s\n")
                log.flush()
                time.sleep(delay)
                continue
            return describe_failure(exc, files.running_notebook, combination.notebook, options.timeout_s,
                                    watch.exit_code), attempt
    raise AssertionError("unreachable: the last attempt returns")


def execute_combination(combination: Combination, out: str | Path, fingerprint: dict[str, Any],
                        options: RunOptions = RunOptions(), env: dict[str, str] | None = None) -> Outcome:
    """Execute one combination with papermill; always leaves a record (ok or failed) behind.

    `fingerprint` is stored in the record (see colabkit.fingerprint); `env` is added to the
    kernel's environment. Only KeyboardInterrupt (and other BaseExceptions) escape: then the run's
    temporaries are removed and no record is written, so a resumed sweep runs it again.
    """
    files = RunFiles.of(combination, out)
    started_at, start = utc_now(), time.perf_counter()
    params = {**combination.notebook_params, "results_path": str(files.running_record.resolve())}
    sweep_section = options.sweep_section(env)
    if combination.settings.bottlenecks == "first":
        sweep_section["bottlenecks"] = "first"  # the passes ran in repeat 1 only (this one: params.breakdown)
    if options.host_facts:
        env = {**(env or {}), HOST_FACTS_ENV: options.host_facts}
    lease = KernelLease.of(combination, options, env)
    try:
        files.prepare()
        with open(files.log, "w", encoding="utf-8") as log, library_logs_to(log):
            log.write(f"[colabkit] {combination.label}\n[colabkit] parameters {combination.params}\n"
                      f"[colabkit] fingerprint {fingerprint.get('digest')}\n")
            if options.wait_quiet_s is not None:
                sweep_section["quiet_wait"] = wait = wait_for_quiet(options.wait_quiet_s)
                log.write(f"[colabkit] waited {wait['waited_s']} s for a quiet host: "
                          + ("quiet\n" if wait["quiet"] else f"still busy ({'; '.join(wait['busy_reasons'])})\n"))
            log.flush()
            error, attempts = _execute(combination, files, params, options, log, env, lease)
            sweep_section["kernel_start_attempts"] = attempts
            outcome = _commit(combination, files, fingerprint, error, started_at, start, sweep_section, log,
                              lease.record)
            lease.release(outcome.status == RecordStatus.OK, log)  # cleared for the next run, or shut down
            return _said_if_busy(outcome, sweep_section.get("quiet_wait"))
    except OSError as exc:
        if not is_filesystem_fault(exc):
            files.discard_temporaries()
            raise
        # A full disk or an unwritable folder fails this combination; the sweep goes on.
        _remove_if_truncated(files.notebook)
        return fail_without_crashing(combination, files, fingerprint, filesystem_error(exc, files.base.parent),
                                     started_at, sweep_section, time.perf_counter() - start, kernel=lease.record)
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM: the partial notebook stays under its temporary name, so that `status`
        # shows the combination as unfinished and the next sweep runs it again (and removes it).
        files.discard_temporaries(keep_notebook=True)
        raise
    except BaseException:
        files.discard_temporaries()
        raise
    finally:
        lease.release(False)  # a kernel not given back above served a run that did not end well


def _said_if_busy(outcome: Outcome, wait: dict[str, Any] | None) -> Outcome:
    """An ok run that --wait-quiet could not give a quiet host says so in its outcome's message (the
    console's line and summary), as its record does (`sweep.quiet_wait`, `host_quiet`)."""
    if wait is None or wait["quiet"] or outcome.status != RecordStatus.OK:
        return outcome
    busy = "; ".join(wait["busy_reasons"]) or "busy"
    return dataclasses.replace(outcome, message=f"measured on a busy host: still busy after waiting "
                                                f"{wait['waited_s']:g} s ({busy})")


def _remove_if_truncated(notebook: Path) -> None:
    """A notebook a full disk cut short is no product to inspect: it must not pass for one."""
    try:
        with open(notebook, encoding="utf-8") as stream:
            json.load(stream)
    except OSError:
        pass  # none there, or its folder cannot be reached: nothing to remove
    except ValueError:  # cut short: not JSON (or not even UTF-8)
        try:
            notebook.unlink(missing_ok=True)
        except OSError:
            pass  # a file system that refuses even this: the failed outcome says what happened


def fail_without_crashing(combination: Combination, files: RunFiles, fingerprint: dict[str, Any],
                          error: RunError, started_at: str | None = None,
                          sweep_section: dict[str, Any] | None = None, seconds: float = 0.0,
                          **extra: Any) -> Outcome:
    """Write the failed record of a run if the folder takes it; if it does not (the disk is full,
    the folder unwritable), the outcome alone says what happened. `extra` are further record fields."""
    try:
        return write_failed_record(combination, files, fingerprint, error, started_at, sweep_section, seconds, **extra)
    except OSError as again:
        if not is_filesystem_fault(again):
            raise
        try:
            files.discard_temporaries()
        except OSError:
            pass  # the folder itself is unreachable: there is nothing of this run in it to remove
        return Outcome(combination, "failed", seconds, files.record,
                       f"{error.summary()} (no record could be written: {again.strerror})", error=error)


def record_lost_run(combination: Combination, files: RunFiles, fingerprint: dict[str, Any], error: RunError, *,
                    seconds: float, sweep_section: dict[str, Any], **extra: Any) -> Outcome:
    """The failed record of a run whose process never reported back: a sweep worker (--jobs N) or a
    Dask worker died while running it, or the scheduler lost its task. A line in its log says so,
    then the record is written as for any failure (`extra`: e.g. the Dask `worker` it ran on)."""
    try:
        if files.log.exists():
            with open(files.log, "a", encoding="utf-8") as log:
                log.write(f"[colabkit] {utc_now()} {error.message}\n")
    except OSError:
        pass  # a full disk: the record (or the outcome) still says what happened
    return fail_without_crashing(combination, files, fingerprint, error, sweep_section=sweep_section, seconds=seconds,
                                 **extra)


def _commit(combination: Combination, files: RunFiles, fingerprint: dict[str, Any],
            error: RunError | None, started_at: str, start: float, sweep_section: dict[str, Any],
            log: IO[str], kernel: dict[str, Any]) -> Outcome:
    """Move the products into place, record last. The record is what marks the combination done."""
    if files.running_notebook.exists():
        os.replace(files.running_notebook, files.notebook)  # kept for inspection when the run failed
    record: dict[str, Any] | None = None
    if error is None:
        if not files.running_record.exists():
            error = RunError("MissingRecord", ErrorKind.MISSING_RECORD,
                             "the notebook finished without writing its record (does it call run.record?)")
        else:
            try:
                record = read_record(files.running_record)
            except RecordError as exc:
                error = RunError("RecordError", ErrorKind.MISSING_RECORD, str(exc))
    html = combination.settings.html
    if files.notebook.exists() and (html == "all" or (html == "failed" and error is not None)):
        try:
            export_run_html(files.notebook, files.html, files.running_html)
        except Exception as exc:  # noqa: BLE001 - nbconvert raises many types; the run's result decides
            log.write("\n[colabkit] HTML export failed:\n" + "".join(traceback.format_exception(exc)))
            if error is None:  # a full disk is the folder's fault, as anywhere else in the run
                error = (filesystem_error(exc, files.html) if is_filesystem_fault(exc)
                         else RunError(type(exc).__name__, ErrorKind.HTML_EXPORT, str(exc)[:2000]))
    if error is not None:
        return write_failed_record(combination, files, fingerprint, error, started_at, sweep_section,
                                   time.perf_counter() - start, kernel=kernel)
    assert record is not None
    sweep_section["wall_s"] = round(time.perf_counter() - start, 3)  # what a later dry run estimates this run by
    record.update(fingerprint=fingerprint, sweep=sweep_section, kernel=kernel, repeat=combination.repeat)
    write_json_atomic(files.record, record)
    files.discard_temporaries()
    return _outcome(combination, record, files.record, time.perf_counter() - start)


def _outcome(combination: Combination, record: dict[str, Any], record_path: Path, seconds: float) -> Outcome:
    if record["status"] == RecordStatus.OK:
        return Outcome(combination, record["status"], seconds, record_path)
    error = RunError.from_record(record.get("error"))
    return Outcome(combination, record["status"], seconds, record_path, error.summary(), error=error)


def write_failed_record(combination: Combination, files: RunFiles, fingerprint: dict[str, Any],
                        error: RunError, started_at: str | None = None,
                        sweep_section: dict[str, Any] | None = None, seconds: float = 0.0, **extra: Any) -> Outcome:
    """Write the `failed` record of a combination (its last step: the record marks it finished);
    `extra` are further record fields (a Dask sweep's `worker`)."""
    record = make_record(combination.name, RecordStatus.FAILED, combination.params, started_at=started_at,
                         device=combination.device_section(), error=error.as_record(),
                         fingerprint=fingerprint, sweep=sweep_section or {}, repeat=combination.repeat, **extra)
    write_json_atomic(files.record, record)
    files.discard_temporaries()
    return _outcome(combination, record, files.record, seconds)


def write_skipped_record(combination: Combination, out: str | Path, fingerprint: dict[str, Any],
                         reason: str, replace_unreadable: bool = False,
                         error_type: str = "DeviceNotAvailable") -> Outcome:
    """Record a combination this machine cannot run, without running it (`error_type` names why:
    DeviceNotAvailable, BackendUnsupportedError, InsufficientMemoryError).

    An `ok` record already there (copied from the machine that has the device) is kept as it is,
    and so is a record file this colabkit cannot read, unless `replace_unreadable` (`--rerun`).
    """
    files = RunFiles.of(combination, out)
    if files.record.exists():
        try:
            if read_record(files.record)["status"] == RecordStatus.OK:
                return Outcome(combination, RecordStatus.SKIPPED, 0.0, files.record, reason + " (an earlier ok record is kept)")
        except (RecordError, OSError) as exc:
            if not replace_unreadable:  # e.g. an ok record of a newer schema: never lose it to a skip
                why = str(exc).removeprefix(f"{files.record}: ")
                return Outcome(combination, RecordStatus.SKIPPED, 0.0, files.record,
                               f"{reason}; its record file cannot be read and is kept as it is ({why})",
                               set_aside=True)
    error = RunError(error_type, ErrorKind.SKIPPED, reason)
    record = make_record(combination.name, RecordStatus.SKIPPED, combination.params,
                         device=combination.device_section(), error=error.as_record(), fingerprint=fingerprint)
    write_json_atomic(files.record, record)
    return Outcome(combination, RecordStatus.SKIPPED, 0.0, files.record, reason, error=error)
