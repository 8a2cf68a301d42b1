"""Records of one combination together: its repeats, and the record a report names it by.

Ok records that did the same work (colabkit.records.identity.run_work), from one folder or several
merged, are the `repeats` of one combination, whose median and interval the report gives. None is
dropped silently: a copy of a run already counted (same start, end and host) is listed in
`duplicates`; failed and skipped records (which did no work) join the ok runs that asked for the
same parameters and are kept in `paths` and named in `why`. A combination is named (`used`) by its
most recent ok record, else a failed one over a skipped one. See docs/report.md.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from colabkit.records.identity import asked_params, run_work, work_key

STATUS_ORDER = {"ok": 0, "failed": 1, "skipped": 2}  # which record a combination uses: the lowest
_NEVER = dt.datetime.min.replace(tzinfo=dt.timezone.utc)


@dataclass
class RunGroup:
    """The records of one combination: `paths` (its ok records first), `repeats` (its ok records, each
    an independent run; every one counts), `duplicates` (copies of a run already counted), the record
    it is named by (`used`) and `why`, and `description`, the device and the parameters that vary
    among the notebook's combinations ('device=gpu, n=256')."""

    notebook: str
    params: dict[str, Any]  # those its first record asked for (asked_params): an ok one if the group has any
    ok: bool
    work: dict[str, Any]  # what its runs did (run_work); for a group without an ok run, what it asked for
    paths: list[str] = field(default_factory=list)
    used: str = ""
    why: str = ""
    description: str = ""
    repeats: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)


def _asked_within(asked: Mapping[str, Any], ran: Mapping[str, Any]) -> bool:
    """Whether an ok run that asked for `ran` holds every parameter of `asked` with the same value."""
    return asked.keys() <= ran.keys() and all(ran[name] == asked[name] for name in asked)


def finished_at(record: Mapping[str, Any]) -> dt.datetime:
    """When the record was written (UTC; a time without an offset is taken as UTC); the earliest
    time there is when it does not say."""
    try:
        stamp = dt.datetime.fromisoformat(str(record.get("finished_at")))
    except ValueError:
        return _NEVER
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)


def run_instance(record: Mapping[str, Any]) -> str:
    """What makes a run that run: its start and end times (to the microsecond) and its host. A record
    found twice with the same instance (a folder and its copy) is one run, counted once."""
    host = record.get("host") if isinstance(record.get("host"), dict) else {}
    return json.dumps([record.get("started_at"), record.get("finished_at"), host.get("hostname")], default=str)


def _choose(paths: list[str], records: Mapping[str, Mapping[str, Any]]) -> tuple[str, str, list[str], list[str]]:
    """The record a combination is named by, why, its repeats (ok runs, each once) and the duplicates."""
    ranked = sorted(paths, key=lambda p: (STATUS_ORDER.get(records[p]["status"], 9),
                                          -finished_at(records[p]).timestamp()))
    used = ranked[0]
    seen: set[str] = set()
    repeats, duplicates = [], []
    for path in sorted((p for p in paths if records[p]["status"] == "ok"), key=lambda p: finished_at(records[p])):
        instance = run_instance(records[path])
        (duplicates if instance in seen else repeats).append(path)
        seen.add(instance)
    if len(paths) == 1:
        return used, "", repeats, duplicates
    status = records[used]["status"]
    others = sorted({records[p]["status"] for p in paths if records[p]["status"] != status})
    if len(repeats) > 1 or duplicates:
        parts = [f"{len(repeats)} ok runs, each counted" if len(repeats) > 1 else "1 ok run"]
        parts += [f"{len(duplicates)} copy of a counted run left out" if len(duplicates) == 1 else
                  f"{len(duplicates)} copies of counted runs left out"] if duplicates else []
        parts += [f"{sum(records[p]['status'] == other for p in paths)} {other} not counted" for other in others]
        return used, "; ".join(parts), repeats, duplicates
    peers = [p for p in paths if records[p]["status"] == status]
    if len(peers) > 1 and not others:
        return used, f"the most recent of {len(peers)} {status} records", repeats, duplicates
    return used, f"{status} preferred over {' and '.join(others)}", repeats, duplicates


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def varying_params(combinations: list[RunGroup], records: Mapping[str, Mapping[str, Any]]) -> dict[str, set[str]]:
    """Per notebook, the parameters whose values differ among its records."""
    values: dict[str, dict[str, set[str]]] = {}
    for combination in combinations:
        seen = values.setdefault(combination.notebook, {})
        for path in combination.paths:
            for key, value in asked_params(records[path]).items():
                seen.setdefault(key, set()).add(_key(value))
    return {notebook: {key for key, found in seen.items() if len(found) > 1} for notebook, seen in values.items()}


def describe(params: Mapping[str, Any], varying: set[str]) -> str:
    """'device=gpu, n=256': the device, then the parameters in `varying`, sorted."""
    shown = ["device", *sorted(key for key in varying if key != "device")]
    return ", ".join(f"{key}={params[key]}" for key in shown if key in params)


def group_combinations(records: Mapping[str, Mapping[str, Any]]) -> list[RunGroup]:
    """Records (path -> record) of the same combination together (see the module's docstring), each
    group with the record it uses, why, and its description; groups with ok runs first."""
    groups: dict[str, RunGroup] = {}
    asked = {path: asked_params(record) for path, record in records.items()}
    for path in sorted(records, key=lambda p: (records[p]["status"] != "ok", -len(asked[p]))):
        record, ok = records[path], records[path]["status"] == "ok"
        work = run_work(record)
        key = work_key(work)
        if not ok:  # did no work: joins the ok runs one of which asked for as much, else its peers
            key = next((name for name, group in groups.items() if group.ok and group.notebook == record["notebook"]
                        and any(_asked_within(asked[path], asked[p]) for p in group.paths)), key)
        groups.setdefault(key, RunGroup(record["notebook"], asked[path], ok, work)).paths.append(path)
    combinations = list(groups.values())
    varying = varying_params(combinations, records)
    for combination in combinations:
        combination.used, combination.why, combination.repeats, combination.duplicates = _choose(combination.paths,
                                                                                                 records)
        combination.description = describe(combination.params, varying[combination.notebook])
    return combinations
