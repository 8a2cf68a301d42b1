"""The records behind a report, and how it names their devices.

The records come from colabkit.records.loading (each file read and checked once; unreadable or
implausible files in `rejected`, absent folders in `missing_dirs`), merged per combination by
colabkit.records.merging (one record *used* per combination: ok over failed over skipped, then
the latest; every such choice in `ReportData.merges`).

A device label ('CPU x2: AMD EPYC', 'GPU (requested)') is made from a record's typed fields: the
kind and replicas the run found (else its `device.request`), the workers of a multi-worker run
and the device's model. Labels are sorted and coloured by that structure (DeviceLabel), never by
taking their text apart again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from colabkit.records.loading import LoadedRecords, load_records

KIND_ORDER = {"cpu": 0, "gpu": 1, "tpu": 2}
# A dataset loader's provenance says `source: real | offline | synthetic`. Only records that name a
# `dataset` can have used a stand-in for one: matmul's random matrices are its workload, not a substitute.
SUBSTITUTE_SOURCES = ("offline", "synthetic")
REPORT_COLUMNS = ("results_dir", "device_kind", "device_label", "combination", "used", "data_used")


def _count(value: Any) -> int | None:
    """A count a record gives (replicas, workers), or None when it gives none that is a whole number >= 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 1:
        return None
    return int(value) if float(value).is_integer() else None


def _model_name(name: str) -> str:
    """A device model without trademark noise: 'Intel(R) Xeon(R) CPU @ 2.20GHz' -> 'Intel Xeon @ 2.20GHz'."""
    name = re.sub(r"\((R|TM|r|tm)\)", "", name)
    name = re.sub(r"\bCPU\b", "", name)
    return " ".join(name.split())


@dataclass(frozen=True)
class DeviceLabel:
    """What a report says about a record's device: its kind ('cpu', 'gpu', 'tpu'; the requested kind
    for a run that never found its device), replicas, workers (machines of a multi-worker run) and
    model (None when the run never found its device)."""

    kind: str
    replicas: int = 1
    workers: int = 1
    model: str | None = None

    @property
    def head(self) -> str:
        """'GPU', 'CPU x2', 'GPU x4 over 2 workers': the label without the model."""
        head = self.kind.upper() + (f" x{self.replicas}" if self.replicas > 1 else "")
        return head + (f" over {self.workers} workers" if self.workers > 1 else "")

    @property
    def text(self) -> str:
        """'CPU: AMD EPYC', 'TPU x8: TPU v2-8', 'GPU x4 (requested)'."""
        return f"{self.head}: {self.model}" if self.model else f"{self.head} (requested)"

    def sort_key(self) -> tuple[int, str, int, int, str]:
        """Report order: CPU, GPU, TPU (other kinds after); fewer replicas, then fewer workers first; then by model."""
        return KIND_ORDER.get(self.kind, len(KIND_ORDER)), self.kind, self.replicas, self.workers, self.model or ""


# Every label text the report made, back to the device it was made from: sorting and colouring
# look a label up here rather than taking its text apart. A text names one device (DeviceLabel.text
# is one-to-one), so the table only grows, and never holds two answers for one label.
_LABELS: dict[str, DeviceLabel] = {}


def record_device_kind(record: dict[str, Any]) -> str:
    """'cpu', 'gpu' or 'tpu' as the run found it (`device.kind`); for a run that never started, the
    kind it asked for (`device.request.kind`, which colabkit.records.loading fills in); 'unknown'
    when the record says neither."""
    device = record.get("device") or {}
    request = device.get("request") or {}
    return str(device.get("kind") or request.get("kind") or "unknown").lower()


def record_device(record: dict[str, Any]) -> DeviceLabel:
    """The structured label of a record's device, from its typed fields (nothing parsed)."""
    device = record.get("device") or {}
    request = device.get("request") or {}
    replicas = _count(device.get("replicas")) or _count(request.get("count")) or 1
    workers = _count(device.get("workers")) or 1  # MultiWorkerMirroredStrategy: replicas over several machines
    model = device.get("name") or device.get("model")
    label = DeviceLabel(record_device_kind(record), replicas, workers, _model_name(str(model)) if model else None)
    _LABELS.setdefault(label.text, label)
    return label


def device_label(record: dict[str, Any]) -> str:
    """How figures and tables name a record's device: 'CPU: AMD EPYC', 'CPU x2: AMD EPYC',
    'GPU: Tesla T4', 'TPU x8: TPU v2-8', 'GPU x4 over 2 workers: Tesla T4'; 'GPU (requested)' for a
    run that never found its device."""
    return record_device(record).text


def labelled(label: str) -> DeviceLabel | None:
    """The device a label text was made from (None for text no record's label produced, e.g. a
    published series)."""
    return _LABELS.get(str(label))


def label_kind(label: str) -> str:
    """The device kind behind a label ('cpu', 'gpu', 'tpu'); '' for text that is no device label."""
    known = labelled(label)
    return known.kind if known else ""


def _label_sort_key(label: str) -> tuple[Any, ...]:
    known = labelled(label)
    return (0, *known.sort_key()) if known else (1, str(label))


def sort_labels(labels: Iterable[str]) -> list[str]:
    """Device labels in report order: CPU, GPU, TPU; fewer replicas first; then by model (text that
    is no device label last, alphabetically)."""
    return sorted(set(labels), key=_label_sort_key)


def data_used(record: dict[str, Any]) -> str:
    """'real', 'OFFLINE' or 'SYNTHETIC' for records that name a dataset; '' for the others."""
    data = record.get("data") or {}
    if "dataset" not in data:
        return ""
    source = str(data.get("source") or "unknown")
    return source.upper() if source in SUBSTITUTE_SOURCES else source


@dataclass
class ReportData:
    """Every record found, one row each, and what the report makes of them.

    `frame` is the loader's tidy table of every record read (colabkit.records.loading), plus the
    columns device_kind, device_label, combination, used (the record its combination uses) and
    data_used ('real', 'OFFLINE', 'SYNTHETIC' or '' when the run used no dataset); `loaded` is what
    the loader read (its `summary()` is what `colabkit report` prints).
    """

    dirs: list[str]
    frame: pd.DataFrame
    records: dict[str, dict[str, Any]]
    rejected: list[tuple[str, str]]
    missing_dirs: list[str]
    merges: pd.DataFrame
    loaded: LoadedRecords

    def record(self, path: str) -> dict[str, Any]:
        """The record at `path` as it was read (nested, with histories and predictions)."""
        return self.records[path]

    def used(self, notebook: str | None = None) -> pd.DataFrame:
        """The records the report uses (one per combination), optionally of one notebook."""
        rows = self.frame[self.frame["used"].astype(bool)]
        return rows if notebook is None else rows[rows["notebook"] == notebook]

    def ok(self, notebook: str | None = None) -> pd.DataFrame:
        """The used ok records (of `notebook`): what the figures show."""
        rows = self.used(notebook)
        return rows[rows["status"] == "ok"]

    def not_ok(self, notebook: str | None = None) -> pd.DataFrame:
        """The used failed and skipped records (listed by the report, never plotted)."""
        rows = self.used(notebook)
        return rows[rows["status"] != "ok"]

    @property
    def notebooks(self) -> list[str]:
        return sorted(self.frame["notebook"].dropna().unique()) if len(self.frame) else []


MERGE_COLUMNS = ["notebook", "combination", "used", "status", "why", "not used"]


def report_data(loaded: LoadedRecords) -> ReportData:
    """The report's view of records already loaded: device labels, data used, and one record used
    per combination."""
    records = loaded.records
    frame = loaded.frame()
    paths = list(frame["path"]) if len(frame) else []
    combination = {path: group.description for group in loaded.combinations() for path in group.paths}
    used = {group.used for group in loaded.combinations()}
    added = pd.DataFrame({  # added in one piece: column by column would fragment a frame this wide
        "device_kind": [record_device_kind(records[p]) for p in paths],
        "device_label": [device_label(records[p]) for p in paths],
        "data_used": [data_used(records[p]) for p in paths],
        "used": [p in used for p in paths], "combination": [combination.get(p, "") for p in paths],
    }, index=frame.index, columns=["device_kind", "device_label", "data_used", "used", "combination"])
    frame = pd.concat([frame.drop(columns=[c for c in added.columns if c in frame]), added], axis=1)
    frame["used"] = frame["used"].astype(bool)
    merges = [{"notebook": group.notebook, "combination": group.description, "used": group.used,
               "status": records[group.used]["status"], "why": group.why,
               "not used": "; ".join(f"{p} ({records[p]['status']})" for p in group.paths if p != group.used)}
              for group in loaded.combinations() if len(group.paths) > 1]
    return ReportData(list(loaded.dirs), frame, records, list(loaded.rejected), list(loaded.missing_dirs),
                      pd.DataFrame(merges, columns=MERGE_COLUMNS), loaded)


def load_report_data(results_dirs: list[str | Path] | tuple[str | Path, ...] | str | Path) -> ReportData:
    """Read every record under `results_dirs` (folders or single files) once and merge them.

    Never raises for bad content: unreadable or implausible files go to `rejected`, absent folders
    to `missing_dirs`; callers decide how loud to be (the report shows both in red).
    """
    return report_data(load_records(results_dirs))
