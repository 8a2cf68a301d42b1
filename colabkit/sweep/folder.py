"""A sweep's output folder: checked writable before anything runs, locked while a sweep writes, and what it
holds (`python -m colabkit status [OUT]`).

One sweep at a time writes to a folder: it holds an flock on OUT/.colabkit-sweep.lock (holding its pid)
for its lifetime. An flock dies with its process, so a sweep killed with kill -9 never leaves OUT locked;
`lock_holder` tells a dry run or `status` which sweep writes there now.

`status`: what has run, failed, been skipped, per notebook and device. Every record counts (three repeats:
three ok runs, one ok combination; colabkit.records.identity). It reads the records below OUT and the
`.<slug>.running.ipynb` temporaries a running (or killed) sweep leaves: one without its record is running
now, or will run again next sweep.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colabkit.errors import OutputFolderError, SweepLockedError
from colabkit.records.identity import run_work, work_key
from colabkit.records.loading import load_records

LOCK_NAME = ".colabkit-sweep.lock"


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


@contextmanager
def sweep_lock(out: str | Path) -> Iterator[None]:
    """Hold OUT's lock for the sweep's lifetime; SweepLockedError if another sweep holds it."""
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


def lock_holder(out: str | Path) -> str | None:
    """The pid of the sweep writing to `out` now ('?' if it wrote none), or None when none is. A
    sweep asking about its own folder sees itself."""
    import fcntl

    path = Path(out) / LOCK_NAME
    if not path.exists():
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return handle.read().strip() or "?"
    except OSError:
        return None
    return None  # a lock file nobody holds: its sweep died; the next one takes it


_RUNNING_SUFFIX = ".running.ipynb"


@dataclass
class GroupStatus:
    """The records of one notebook on one device."""

    notebook: str
    device: str
    counts: dict[str, int] = field(default_factory=lambda: {"ok": 0, "failed": 0, "skipped": 0, "unfinished": 0})
    seconds: float = 0.0  # wall time of the ok and failed runs, from their records
    last_finished: str = ""
    failures: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (record path, error)
    skip_reasons: dict[str, int] = field(default_factory=dict)
    unfinished: list[str] = field(default_factory=list)
    combinations: set[str] = field(default_factory=set)  # the distinct work of its ok runs (repeats once)


@dataclass
class SweepStatus:
    """Everything `status` reports about one output folder."""

    out: Path
    groups: dict[tuple[str, str], GroupStatus]
    unreadable: list[tuple[str, str]]
    lock_holder: str | None

    def total(self, status: str) -> int:
        return sum(group.counts[status] for group in self.groups.values())


def _seconds_between(started: Any, finished: Any) -> float:
    try:
        return (dt.datetime.fromisoformat(str(finished)) - dt.datetime.fromisoformat(str(started))).total_seconds()
    except ValueError:
        return 0.0


def _group(groups: dict[tuple[str, str], GroupStatus], notebook: str, device: str) -> GroupStatus:
    return groups.setdefault((notebook, device), GroupStatus(notebook, device))


def collect_status(out: str | Path = "outputs") -> SweepStatus:
    """Read every record below `out` once (colabkit.records.loading: files that are not readable,
    plausible records are `unreadable`, with the reason) and group them by notebook and requested device."""
    folder = Path(out)
    groups: dict[tuple[str, str], GroupStatus] = {}
    loaded = load_records(folder)
    for path, record in loaded.records.items():
        params = record.get("params") or {}
        device = str(params.get("device") or (record.get("device") or {}).get("requested") or "?")
        group = _group(groups, str(record["notebook"]), device)
        status = record["status"]
        group.counts[status] += 1
        if status == "ok":
            group.combinations.add(work_key(run_work(record)))
        if status == "skipped":
            reason = str((record.get("error") or {}).get("message", "no reason given"))
            group.skip_reasons[reason] = group.skip_reasons.get(reason, 0) + 1
            continue
        group.seconds += _seconds_between(record.get("started_at"), record.get("finished_at"))
        group.last_finished = max(group.last_finished, str(record.get("finished_at") or ""))
        if status == "failed":
            group.failures.append((str(path), dict(record.get("error") or {})))
    for running in sorted(folder.rglob(f".*{_RUNNING_SUFFIX}")) if folder.is_dir() else []:
        name = running.name[1:-len(_RUNNING_SUFFIX)]
        if (running.parent / f"{name}.json").exists():
            continue  # finished: the record was written, the temporary just not yet removed
        relative = running.relative_to(folder).parts
        notebook, device = (relative[-3], relative[-2]) if len(relative) >= 3 else ("?", "?")
        group = _group(groups, notebook, device.replace("-", ":"))
        group.counts["unfinished"] += 1
        group.unfinished.append(str(running.parent / name))
    return SweepStatus(folder, dict(sorted(groups.items())), list(loaded.rejected), lock_holder(folder))
