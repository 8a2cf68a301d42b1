"""Reading records: the one place every reader goes through (the report, `status`, `load_results`).

`load_records(dirs)` reads each record file below the folders once: `.records` ({path: record},
parsed and checked once), `.rejected` ([(path, why)]: every file that is not a readable, plausible
record, named, never dropped), `.missing_dirs`, `.combinations()` (colabkit.records.merging) and
`.frame()` (one tidy row per record, nested fields flattened with dots).

Older records are brought up to date here, once: `device.request` derived from `device.requested` or
`params.device`, and `params` kept to what shapes the run as the declaration says
(Experiment.relevant). See docs/records.md, "Reading records".
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from colabkit.device.spec import DeviceRequest, parse_device
from colabkit.errors import RecordError, UnknownDeviceError
from colabkit.records.merging import RunGroup, group_combinations
from colabkit.records.plausibility import not_a_measurement
from colabkit.records.record import REQUIRED_FIELDS, STATUSES, read_record
from colabkit.records.schema import RecordStatus

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_DIRS = ("outputs",)
Folders = str | Path | Sequence[str | Path]


def _folders(dirs: Folders | None) -> list[str]:
    """The folders (or files) as given: one path, several, or none (DEFAULT_DIRS)."""
    if dirs is None:
        return list(DEFAULT_DIRS)
    if isinstance(dirs, (str, Path)):
        return [str(dirs)]
    return [str(folder) for folder in dirs] or list(DEFAULT_DIRS)


def record_files(folder: str | Path) -> list[Path]:
    """Every *.json below `folder` (or `folder` itself when it is a file), sorted; hidden files (a
    sweep's `.<slug>.running.json` temporaries) left out. Reads no file: a cheap look."""
    root = Path(folder)
    if root.is_file():
        return [root]
    if not root.is_dir():
        return []
    return sorted(path for path in root.rglob("*.json") if not path.name.startswith("."))


def derived_request(record: dict[str, Any]) -> dict[str, Any] | None:
    """The record's device request as `device.request` stores it ({"kind", "count"}), or None when
    nothing names the device. From `device.request` where the record has it (RecordError if that is
    not a request), else parsed once from `device.requested` or `params.device` (records written
    before the field existed)."""
    device, params = record["device"], record["params"]
    if device.get("request") is not None:
        try:
            return DeviceRequest.from_record(device["request"]).as_record()
        except UnknownDeviceError as exc:
            raise RecordError(f"device.request: {exc}") from exc
    for text in (device.get("requested"), params.get("device")):
        if isinstance(text, str) and text:
            try:
                return parse_device(text).as_record()
            except UnknownDeviceError:
                continue  # 'unknown', or a name of an older colabkit: the next place may say
    return None


def checked_record(path: str | Path) -> dict[str, Any]:
    """The record at `path`, read once, validated, checked for plausibility when ok and for a run its experiment
    still offers (`no_longer_offered`), its `device.request` filled in. RecordError (its message 'PATH: why') for
    anything else: the file is set aside, with why."""
    record = read_record(path)
    try:
        request = derived_request(record)
    except RecordError as exc:
        raise RecordError(f"{path}: {exc}") from exc
    problem = no_longer_offered(record)
    if problem is None and record["status"] == RecordStatus.OK:
        problem = not_a_measurement(record["metrics"], record["timings"])
    if problem:
        raise RecordError(f"{path}: {problem}")
    record["device"]["request"] = request
    shaping_params_only(record)
    return record


def no_longer_offered(record: dict[str, Any]) -> str | None:
    """Why the record's run is one its experiment does not offer now: a value of a declared parameter its declaration
    refuses (a mode it dropped, a choice it no longer has), checked as a grid's value is (Parameter.problem); None
    for a run it offers, or a notebook no experiment declares. Such a record stands beside no run of today's: the
    report and compare set it aside, with this line, rather than lose it in no section."""
    from colabkit.experiments import find

    experiment = find(record["notebook"])
    params = record["params"]
    if experiment is None or not isinstance(params, dict):
        return None
    for parameter in experiment.parameters:
        if parameter.name == "device":  # a request an older colabkit wrote is read as one (derived_request) or as none
            continue
        problem = parameter.problem(params[parameter.name]) if parameter.name in params else None
        if problem:
            return f"a run today's {experiment.name} does not offer ({problem})"
    return None


def shaping_params_only(record: dict[str, Any]) -> None:
    """Drop from `params` and `fingerprint.params` the values that do not shape the record's run,
    as its experiment declares them (nothing for a notebook without a declaration)."""
    from colabkit.experiments import find

    experiment = find(record["notebook"])
    if experiment is None:
        return
    record["params"] = experiment.relevant(record["params"])
    fingerprint = record.get("fingerprint")
    if isinstance(fingerprint, dict) and isinstance(fingerprint.get("params"), dict):
        fingerprint["params"] = experiment.relevant(fingerprint["params"])


@dataclass(frozen=True)
class RecordFile:
    """One file found below a results folder: its record when readable, else why not."""

    path: str
    folder: str  # the results folder (as given) it was found under
    record: dict[str, Any] | None
    problem: str | None  # why it is not a record (without the path); None when `record` is one


def scan(dirs: Folders | None = None) -> Iterator[RecordFile]:
    """Each record file below `dirs`, read as it is reached (a caller that stops early reads no
    more): folder by folder in the order given, files sorted; a file reached through two folders
    comes once, under the first."""
    seen: set[Path] = set()
    for folder in _folders(dirs):
        for path in record_files(folder):
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            try:
                yield RecordFile(str(path), folder, checked_record(path), None)
            except (RecordError, OSError) as exc:  # OSError: vanished or unreadable (permissions)
                reason = str(exc) if isinstance(exc, RecordError) else f"unreadable: {exc}"
                yield RecordFile(str(path), folder, None, reason.removeprefix(f"{path}: "))


def first_record(dirs: Folders | None = None) -> tuple[str | None, list[tuple[str, str]]]:
    """The first readable record file below `dirs` and the files rejected before it was reached:
    a check that reads one file where the folders hold records, and all of them (each rejected, the
    list complete) where none is one. (None, rejected) when there is no record."""
    rejected = []
    for found in scan(dirs):
        if found.record is not None:
            return found.path, rejected
        rejected.append((found.path, str(found.problem)))
    return None, rejected


@dataclass
class LoadedRecords:
    """Every record below some results folders, each read once; see load_records."""

    dirs: list[str]
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # path -> record, in load order
    folders: dict[str, str] = field(default_factory=dict)  # path -> the results folder it came from
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (path, why), every file set aside
    missing_dirs: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.records)

    def statuses(self) -> dict[str, int]:
        """How many records of each status: {'ok': n, 'failed': n, 'skipped': n}."""
        counts = Counter(record["status"] for record in self.records.values())
        return {status: counts.get(status, 0) for status in STATUSES}

    def combinations(self) -> list[RunGroup]:
        """The records grouped by combination (a notebook with one set of parameters), each group
        with the record it uses and why (colabkit.records.merging)."""
        return self._combinations

    @cached_property
    def _combinations(self) -> list[RunGroup]:
        return group_combinations(self.records)

    def frame(self) -> pd.DataFrame:
        """One row per record: `path`, `results_dir`, and every field flattened with dots
        ('params.n', 'metrics.tflops_warm', 'device.request.kind'). Built once, then shared."""
        return self._frame

    @cached_property
    def _frame(self) -> pd.DataFrame:
        import pandas as pd

        if not self.records:
            return pd.DataFrame(columns=["path", "results_dir", *REQUIRED_FIELDS])
        rows = [{"path": path, "results_dir": self.folders[path], **record} for path, record in self.records.items()]
        return pd.json_normalize(rows, sep=".")

    def summary(self) -> dict[str, Any]:
        """What was read, as plain JSON: folders, record count per status, rejected files, missing folders."""
        return {"dirs": list(self.dirs), "records": len(self.records), "statuses": self.statuses(),
                "rejected": [list(item) for item in self.rejected], "missing_dirs": list(self.missing_dirs)}


def load_records(dirs: Folders | None = None) -> LoadedRecords:
    """Read every record below `dirs` (folders or single files; default: outputs) once.

    Never raises for bad content: a file that is not a readable, plausible record is in `rejected`
    with the reason, a folder that does not exist in `missing_dirs`; callers decide how loud to be.
    """
    folders = _folders(dirs)
    loaded = LoadedRecords(folders, missing_dirs=[folder for folder in folders if not Path(folder).exists()])
    for found in scan(folders):
        if found.record is None:
            loaded.rejected.append((found.path, str(found.problem)))
        else:
            loaded.records[found.path] = found.record
            loaded.folders[found.path] = found.folder
    return loaded


def load_results(*dirs: str | Path) -> pd.DataFrame:
    """All records below `dirs` as a tidy pandas DataFrame, one row per record (load_records' frame).

    Nested sections are flattened with dots ('params.n', 'metrics.tflops_warm', 'device.name');
    the file each row came from is in 'path'. Files that are not readable records are not dropped
    silently: a warning names them and `df.attrs["rejected"]` lists (path, reason) pairs.
    """
    loaded = load_records(list(dirs) or None)
    if loaded.rejected:
        warnings.warn(f"{len(loaded.rejected)} record file(s) could not be read: "
                      + "; ".join(f"{path}: {why}" for path, why in loaded.rejected), stacklevel=2)
    frame = loaded.frame().drop(columns="results_dir")
    frame.attrs["rejected"] = list(loaded.rejected)
    return frame
