"""What a sweep does with each run of its plan, from the records already in its folder: run it, rerun it,
keep it (an ok record with a matching fingerprint), skip it (RUNNABLE_CHECKS: it cannot run here), set its
unreadable record aside, or show it running elsewhere (`decide`). Nothing here runs or writes anything.

Fingerprints: what a result depends on, so a resumed sweep reruns exactly what changed. A fingerprint
covers the notebook's cells (types and sources only), the combination's parameters, colabkit's version,
colabkit's code by content (`code_sha256` of every .py file: a dirty checkout, a pip install or a wheel
all count for what they are) and TensorFlow's version. Every committed record stores it (`fingerprint`);
a matching digest is a finished result. The commit is stored beside it, outside the digest.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from colabkit.errors import ExtraNotInstalledError, InsufficientMemoryError, RecordError
from colabkit.records.provenance import git_commit
from colabkit.records.record import read_record
from colabkit.records.run_error import RunError
from colabkit.sweep.devices import Inventory, backend_unsupported, device_missing, extra_missing, too_large
from colabkit.sweep.expand import Combination
from colabkit.sweep.folder import lock_holder
from colabkit.sweep.runners.execute import RunFiles

# Distributions that provide the `tensorflow` module, in the order they are looked for.
_TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-tpu", "tf-nightly", "tensorflow-macos")


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@lru_cache(maxsize=64)
def _notebook_digest_cached(path: str, mtime_ns: int, size: int) -> str:
    notebook = json.loads(Path(path).read_text(encoding="utf-8"))
    cells = []
    for cell in notebook.get("cells", []):
        source = cell.get("source", "")
        cells.append([cell.get("cell_type"), "".join(source) if isinstance(source, list) else source])
    return _sha256(_canonical(cells))


def notebook_digest(path: str | Path) -> str:
    """SHA-256 of a notebook's cell types and sources (outputs and metadata left out)."""
    stat = Path(path).stat()
    return _notebook_digest_cached(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=1)  # read once per process: reading package metadata costs ~1 ms, per combination
def tensorflow_version() -> str | None:
    """The installed TensorFlow's version, read from package metadata (TensorFlow is not imported)."""
    for distribution in _TENSORFLOW_DISTRIBUTIONS:
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return None


def colabkit_version() -> str:
    from colabkit.version import __version__

    return __version__


@lru_cache(maxsize=1)
def code_digest() -> str:
    """SHA-256 of colabkit's own source: every .py file under the package, with its relative path.

    Read once per process: the code a process imported does not change while it runs.
    """
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode("utf-8") + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


@lru_cache(maxsize=1)
def code_commit() -> str | None:
    """The commit colabkit's code came from (records.provenance.git_commit), once per process."""
    return git_commit()


def fingerprint(notebook: str | Path, params: dict[str, Any]) -> dict[str, Any]:
    """The fingerprint of running `notebook` with `params` here: its parts and their digest.

    `git_commit` is informative only: the digest covers the code itself (`code_sha256`).
    """
    parts = {
        "notebook_sha256": notebook_digest(notebook),
        "params": dict(params),
        "colabkit": colabkit_version(),
        "code_sha256": code_digest(),
        "tensorflow": tensorflow_version(),
    }
    return {"digest": _sha256(_canonical(parts)), **parts, "git_commit": code_commit()}


def stale_reason(recorded: Any, current: dict[str, Any]) -> str | None:
    """Why a record's fingerprint no longer matches `current` (None when it does), in words."""
    if not isinstance(recorded, dict) or "digest" not in recorded:
        return "its record has no fingerprint (written before fingerprints, or by hand)"
    if recorded["digest"] == current["digest"]:
        return None
    changes = []
    if recorded.get("notebook_sha256") != current["notebook_sha256"]:
        changes.append("the notebook changed")
    before, now = recorded.get("params") or {}, current["params"]
    if _canonical(before) != _canonical(now):
        changed = sorted(key for key in set(before) | set(now)
                         if _canonical(before.get(key)) != _canonical(now.get(key)))
        changes.append(f"parameters changed ({', '.join(changed)})")
    for part, label in (("colabkit", "colabkit"), ("tensorflow", "TensorFlow")):
        if recorded.get(part) != current[part]:
            changes.append(f"{label} {recorded.get(part)} -> {current[part]}")
    if recorded.get("code_sha256") != current["code_sha256"]:
        commits = (recorded.get("git_commit"), current.get("git_commit"))
        changes.append("colabkit's code changed" + (f" (commit {commits[0]} -> {commits[1]})"
                                                    if commits[0] != commits[1] else ""))
    return "; ".join(changes) or "its fingerprint differs"


RunnableCheck = Callable[[Combination, Inventory], str | None]
# Why a combination cannot run where the sweep runs, asked in this order: the first reason given
# skips it, with that reason in its record and the `error.type` beside it (what a notebook would have
# raised). A further check is one more (function (combination, inventory) -> reason or None, type) here.
RUNNABLE_CHECKS: tuple[tuple[RunnableCheck, str], ...] = (
    (device_missing, "DeviceNotAvailable"), (backend_unsupported, "BackendUnsupportedError"),
    (extra_missing, ExtraNotInstalledError.__name__), (too_large, InsufficientMemoryError.__name__))


class SweepAction(StrEnum):
    """What a sweep does with one combination."""

    RUN = "run"  # not run yet (or skipped before, and its device is here now)
    RERUN = "rerun"  # run again: failed, stale, interrupted, unreadable, or --force
    DONE = "done"  # an earlier ok record with the same fingerprint is kept
    SKIP = "skip"  # it cannot run here (its device is absent...): a skipped record says so
    SET_ASIDE = "set_aside"  # its record file cannot be read: kept untouched, nothing runs (--rerun replaces it)
    RUNNING = "running"  # another sweep is running it now (a dry run beside that sweep says so)


@dataclass
class Decision:
    """What a sweep will do with one combination, and why."""

    combination: Combination
    action: SweepAction
    reason: str
    fingerprint: dict[str, Any]
    note: str = ""  # what else the dry run should say (a skip keeps a record file it cannot read)
    skip_type: str = "DeviceNotAvailable"  # a skip's `error.type`: which check refused it (RUNNABLE_CHECKS)

    def __post_init__(self) -> None:
        self.action = SweepAction(self.action)  # a plain "run" is accepted; a misspelt one is not


def cannot_run_here(combination: Combination, inventory: Inventory) -> tuple[str, str] | None:
    """Why `combination` cannot run where the sweep runs, as (the skipped record's error type, the
    reason), from the first of RUNNABLE_CHECKS that refuses it; None if it can run."""
    for check, error_type in RUNNABLE_CHECKS:
        reason = check(combination, inventory)
        if reason:
            return error_type, reason
    return None


def _existing_record(path: Path) -> tuple[dict[str, Any] | None, str]:
    if not path.exists():
        return None, ""
    try:
        return read_record(path), ""
    except (RecordError, OSError) as exc:
        return None, f"its record cannot be read ({str(exc).removeprefix(f'{path}: ')})"


def decide(combinations: list[Combination], out: str | Path, available: Mapping[str, int] | Inventory,
           force: bool = False, rerun_unreadable: bool = False) -> list[Decision]:
    """Run, rerun, keep, skip or set aside, per combination, from the records already in `out`.

    `available` is the devices at hand ({"cpu": 1, "gpu": 2}, or an Inventory). A record file that
    cannot be read (not UTF-8, not JSON, a schema this colabkit does not know, e.g. an ok record
    from a newer colabkit) is never overwritten unless `rerun_unreadable`: its combination is set
    aside. A combination another sweep (holding `out`'s lock) is running now is shown as running.
    """
    inventory = available if isinstance(available, Inventory) else Inventory(dict(available))
    holder = lock_holder(out)
    other_sweep = holder if holder is not None and holder != str(os.getpid()) else None
    decisions = []
    for combination in combinations:
        refused = cannot_run_here(combination, inventory)
        if refused and combination.repeat > 1:
            continue  # a combination that cannot run here is recorded as skipped once, by its first run
        current = fingerprint(combination.notebook, combination.params)
        files = RunFiles.of(combination, out)
        if refused:
            unreadable = "" if rerun_unreadable else _existing_record(files.record)[1]
            kept = f"; {unreadable} and is kept as it is" if unreadable else ""
            decisions.append(Decision(combination, SweepAction.SKIP, refused[1], current, note=kept,
                                      skip_type=refused[0]))
            continue
        record, unreadable = _existing_record(files.record)
        running = files.running_notebook.exists()
        if running and other_sweep is not None:
            decisions.append(Decision(combination, SweepAction.RUNNING, f"running now (sweep pid {other_sweep})",
                                      current))
        elif unreadable and not rerun_unreadable:
            decisions.append(Decision(combination, SweepAction.SET_ASIDE,
                                      f"{unreadable}; kept as it is (--rerun replaces it)", current))
        elif record is None:
            reason = unreadable or ("an earlier sweep stopped while running it" if running else "not run yet")
            action = SweepAction.RERUN if unreadable or running else SweepAction.RUN
            decisions.append(Decision(combination, action, reason, current))
        elif force:
            decisions.append(Decision(combination, SweepAction.RERUN, "--force", current))
        elif record["status"] == "ok":
            stale = stale_reason(record.get("fingerprint"), current)
            decisions.append(Decision(combination, SweepAction.RERUN, f"stale: {stale}", current) if stale
                             else Decision(combination, SweepAction.DONE, "finished earlier with the same fingerprint",
                                           current))
        elif record["status"] == "failed":
            error = RunError.from_record(record.get("error"))
            decisions.append(Decision(combination, SweepAction.RERUN, f"failed before ({error.type})", current))
        else:
            decisions.append(Decision(combination, SweepAction.RUN, "skipped before; its device is here now", current))
    return decisions
