"""A sweep's output folder: checked writable before anything runs, and locked while a sweep writes.

One sweep at a time writes to a folder: it holds an flock on OUT/.colabkit-sweep.lock (holding its
pid) for its lifetime. An flock dies with its process, so a sweep killed with kill -9 never leaves
OUT locked; `lock_holder` tells a dry run or `status` which sweep writes there now.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from colabkit.errors import OutputFolderError, SweepLockedError

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
