"""`python -m colabkit status [OUT]`: what has run, failed, been skipped, per notebook and device.

Every record counts (three repeats: three ok runs, one ok combination; colabkit.records.identity).
Reads the records below OUT and the `.<slug>.running.ipynb` temporaries a running (or killed) sweep
leaves: one without its record is running now, or will run again next sweep.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colabkit.records.loading import load_records
from colabkit.records.identity import run_work, work_key
from colabkit.sweep.console import text_table
from colabkit.sweep.outfolder import lock_holder

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


def format_status(status: SweepStatus) -> str:
    """The status as text: a table per notebook and device, then failures, skips and unfinished runs."""
    if not status.groups and not status.unreadable:
        return f"no records below {status.out} (nothing has run here, or this is not a sweep's output folder)"
    if not status.groups:
        return "\n".join([f"no readable records below {status.out}; {len(status.unreadable)} file(s) set aside:"]
                         + [f"unreadable {path}: {reason.removeprefix(f'{path}: ')}"
                            for path, reason in status.unreadable])
    rows = [("notebook", "device", "ok", "ok combinations", "failed", "skipped", "unfinished", "run time",
             "last finished (UTC)")]
    for group in status.groups.values():
        rows.append((group.notebook, group.device, str(group.counts["ok"]), str(len(group.combinations)),
                     *(str(group.counts[key]) for key in ("failed", "skipped", "unfinished")),
                     f"{group.seconds:.0f} s", group.last_finished[:19]))
    lines = text_table(rows)
    unreadable = f", {len(status.unreadable)} unreadable (set aside, not counted above)" if status.unreadable else ""
    lines.append(", ".join(f"{status.total(key)} {key}" for key in ("ok", "failed", "skipped", "unfinished"))
                 + unreadable)
    if status.lock_holder:
        lines.append(f"a sweep (pid {status.lock_holder}) is writing here now")
    for group in status.groups.values():
        for path, error in group.failures:
            cell = f" in In [{error['exec_count']}]" if error.get("exec_count") is not None else ""
            kind = f" [{error['kind']}]" if error.get("kind") else ""
            first_line = (str(error.get("message", "")).strip().splitlines() or [""])[0][:160]
            lines.append(f"failed  {path}: {error.get('type', 'Error')}{kind}{cell}: {first_line}")
        for reason, count in group.skip_reasons.items():
            lines.append(f"skipped {group.notebook} {group.device} ({count}): {reason}")
        for base in group.unfinished:
            note = "running now" if status.lock_holder else "interrupted; the next sweep runs it again"
            lines.append(f"unfinished {base}: {note}")
    for path, reason in status.unreadable:
        lines.append(f"unreadable {path}: {reason.removeprefix(f'{path}: ')}")
    return "\n".join(lines)
