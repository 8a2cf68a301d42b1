"""The records behind a report (colabkit.records.loading, merging) and how it names and colours their devices: a
label ('CPU x2: AMD EPYC') is made from a record's typed fields (DeviceLabel), never parsed from its text."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.colors import to_hex, to_rgb

from colabkit.cost.per_unit import record_costs
from colabkit.cost.rates import RateTable, load_rates
from colabkit.experiments import find
from colabkit.experiments.declaration import INFERENCE, TRAIN
from colabkit.plots import device_color
from colabkit.records.loading import LoadedRecords, load_records
from colabkit.report.runs import collapse, headline_columns

KIND_ORDER = {"cpu": 0, "gpu": 1, "tpu": 2}
# A dataset loader's provenance says `source: real | offline | synthetic`. Only records that name a
# `dataset` can have used a stand-in for one: matmul's random matrices are its workload, not a substitute.
SUBSTITUTE_SOURCES = ("offline", "synthetic")


def _count(value: Any) -> int | None:
    """A count a record gives (replicas, workers), or None when it gives none that is a whole number >= 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 1:
        return None
    return int(value) if float(value).is_integer() else None


@dataclass(frozen=True)
class DeviceLabel:
    """A record's device: kind (the requested one for a run that never found it), replicas, workers, model."""

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
    """'cpu', 'gpu' or 'tpu' as the run found it, else as it asked (device.request.kind), else 'unknown'."""
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
    # without trademark noise: 'Intel(R) Xeon(R) CPU @ 2.20GHz' -> 'Intel Xeon @ 2.20GHz'
    model = " ".join(re.sub(r"\((R|TM|r|tm)\)|\bCPU\b", "", str(model)).split()) if model else None
    if model and device.get("stand_in"):  # the tests' CPU standing in for an accelerator: never taken for one
        model = f"{model} (a {device['stand_in'].upper()} standing in)"
    label = DeviceLabel(record_device_kind(record), replicas, workers, model)
    _LABELS.setdefault(label.text, label)
    return label


def device_label(record: dict[str, Any]) -> str:
    """How the report names a record's device: 'CPU x2: AMD EPYC', 'GPU x4 over 2 workers: Tesla T4'."""
    return record_device(record).text


def labelled(label: str) -> DeviceLabel | None:
    """The device a label text was made from (None for other text, e.g. a published series)."""
    return _LABELS.get(str(label))


def label_kind(label: str) -> str:
    """The device kind behind a label ('cpu', 'gpu', 'tpu'); '' for text that is no device label."""
    known = labelled(label)
    return known.kind if known else ""


def _label_sort_key(label: str) -> tuple[Any, ...]:
    known = labelled(label)
    return (0, *known.sort_key()) if known else (1, str(label))


def sort_labels(labels: Iterable[str]) -> list[str]:
    """Device labels in report order (DeviceLabel.sort_key; other text last, alphabetically)."""
    return sorted(set(labels), key=_label_sort_key)


def in_report_order(table: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """`table` sorted by the columns `by`, its `device` column in report order (sort_labels), index reset."""
    order = {label: index for index, label in enumerate(sort_labels(table["device"]))}
    return table.sort_values(by, key=lambda c: c.map(order) if c.name == "device" else c).reset_index(drop=True)


def shade(color: str, step: int) -> str:
    """The step-th variant of a colour: darker, lighter, darker still... (step 0 is the colour)."""
    if step == 0:
        return color
    rgb = np.array(to_rgb(color))
    amount = 0.3 * ((step + 1) // 2)
    mixed = rgb * (1 - amount) if step % 2 else rgb + (1 - rgb) * amount
    return to_hex(np.clip(mixed, 0, 1))


def kind_positions(labels: Iterable[str]) -> dict[str, int]:
    """Each device label's place among the labels of its kind, in report order (0 for the first CPU, GPU...)."""
    positions, seen = {}, Counter()
    for label in sort_labels(labels):
        positions[label] = seen[label_kind(label)]
        seen[label_kind(label)] += 1
    return positions


def device_palette(labels: Iterable[str]) -> dict[str, str]:
    """A colour per device label: its kind's, shaded when several labels share a kind, in report order."""
    return {label: shade(device_color(label_kind(label)), index) for label, index in kind_positions(labels).items()}


def run_modes(frame: pd.DataFrame) -> pd.Series:
    """Each record's mode: its `params.mode`, else its experiment's default (TRAIN without one)."""
    declared = frame["notebook"].map(lambda name: (find(name).defaults if find(name) else {}).get("mode", TRAIN))
    given = frame["params.mode"] if "params.mode" in frame else pd.Series(None, index=frame.index, dtype=object)
    return given.where(given.notna(), declared).astype(object)


def data_used(record: dict[str, Any]) -> str:
    """'real', 'OFFLINE' or 'SYNTHETIC' for records that name a dataset; '' for the others."""
    data = record.get("data") or {}
    source = str(data.get("source") or "unknown") if "dataset" in data else ""
    return source.upper() if source in SUBSTITUTE_SOURCES else source


@dataclass
class ReportData:
    """Every record read, one row each in `frame` (the loader's columns and report_data's), and what the report makes
    of them; with `exclude_busy`, runs on a busy host do not count."""

    dirs: list[str]
    frame: pd.DataFrame
    records: dict[str, dict[str, Any]]
    rejected: list[tuple[str, str]]
    missing_dirs: list[str]
    merges: pd.DataFrame
    loaded: LoadedRecords
    exclude_busy: bool = False
    rates: RateTable = field(default_factory=load_rates)
    _collapsed: dict[tuple[str | None, bool], pd.DataFrame] = field(default_factory=dict, repr=False)

    def record(self, path: str) -> dict[str, Any]:
        """The record at `path` as it was read (nested, with histories and predictions)."""
        return self.records[path]

    @property
    def folder_names(self) -> list[str]:
        """The results folders as the report names them: by their own names, never by the machine's paths."""
        return [Path(folder).resolve().name for folder in self.dirs]

    def shown(self, path: str) -> str:
        """How the report names a file below the results folders (shown_path)."""
        return shown_path(path, self.dirs)

    def used(self, notebook: str | None = None) -> pd.DataFrame:
        """The records that count, one per run (a combination's repeats each), optionally of one notebook."""
        rows = self.frame[self.frame["used"].astype(bool)]
        return rows if notebook is None else rows[rows["notebook"] == notebook]

    def runs(self, notebook: str | None = None, inference: bool = False, mode: str | None = None) -> pd.DataFrame:
        """The ok runs that count (of `notebook`), one row per run, of one mode (training unless told)."""
        rows = self.used(notebook)
        rows = rows[rows["status"] == "ok"]
        return rows[run_modes(rows).eq(mode or (INFERENCE if inference else TRAIN))]

    def ok(self, notebook: str | None = None, inference: bool = False) -> pd.DataFrame:
        """One row per combination with ok runs (colabkit.report.runs.collapse)."""
        if (notebook, inference) not in self._collapsed:
            self._collapsed[(notebook, inference)] = collapse(self.runs(notebook, inference))
        return self._collapsed[(notebook, inference)]

    def costed(self) -> pd.DataFrame:
        """The ok runs that count and carry a cost (`cost.runtime`, and its rate or `cost.no_rate`: docs/cost.md)."""
        runs = self.used()
        return runs[(runs["status"] == "ok") & runs.get("cost.runtime", pd.Series(None, index=runs.index)).notna()]

    def busy(self) -> pd.DataFrame:
        """Every ok run made on a busy host (`host_quiet` false), counted or not."""
        if "host_quiet" not in self.frame:
            return self.frame.iloc[0:0]
        return self.frame[(self.frame["status"] == "ok") & self.frame["host_quiet"].map(lambda value: value is False)]

    def not_ok(self, notebook: str | None = None) -> pd.DataFrame:
        """The used failed and skipped records (listed by the report, never plotted)."""
        rows = self.used(notebook)
        return rows[rows["status"] != "ok"]

    @property
    def palette(self) -> dict[str, str]:
        """A colour per device label of the ok runs: each device's colour in every figure (device_palette)."""
        return device_palette(self.frame.loc[self.frame["status"] == "ok", "device_label"]) if len(self.frame) else {}


MERGE_COLUMNS = ["notebook", "combination", "named by", "status", "runs counted", "why", "not counted"]


def report_data(loaded: LoadedRecords, exclude_busy: bool = False, rates: RateTable | None = None) -> ReportData:
    """The report's view of loaded records: labels, data used, runs that count, headlines, costs."""
    rates = rates or load_rates()
    records = loaded.records
    frame = loaded.frame()
    paths = list(frame["path"]) if len(frame) else []
    groups = loaded.combinations()

    def busy(path: str) -> bool:
        return exclude_busy and records[path].get("host_quiet") is False

    counted = {path for group in groups for path in (group.repeats if group.repeats else [group.used])
               if not busy(path)}
    combination = {path: group.description for group in groups for path in group.paths}
    work = {path: group.work for group in groups for path in group.paths}
    ids = {path: index for index, group in enumerate(groups) for path in group.paths}
    named = {group.used for group in groups}
    added = pd.DataFrame({  # added in one piece: column by column would fragment a frame this wide
        "device_kind": [record_device_kind(records[p]) for p in paths],
        "device_label": [device_label(records[p]) for p in paths],
        "data_used": [data_used(records[p]) for p in paths],
        "used": [p in counted for p in paths], "named": [p in named for p in paths],
        "combination": [combination.get(p, "") for p in paths], "combination_id": [ids.get(p, -1) for p in paths],
        "work": [work.get(p) for p in paths]}, index=frame.index)
    costs = pd.DataFrame([record_costs(records[p], rates) for p in paths], index=frame.index)
    frame = pd.concat([frame.drop(columns=[c for c in [*added.columns, *costs.columns] if c in frame]), added, costs],
                      axis=1)
    frame["used"] = frame["used"].astype(bool)
    if len(frame):
        headline = headline_columns(frame, frame["used"], frame["combination_id"])
        frame = pd.concat([frame.drop(columns=[c for c in headline.columns if c in frame]), headline], axis=1)
    frame = frame.copy()  # one block per dtype: pandas warns when a section adds a column to a fragmented slice
    merges = []
    for group in groups:
        left_out = [p for p in group.paths if p not in counted]
        if len(group.paths) == 1 and not left_out:
            continue
        why = group.why + ("; runs on a busy host left out (exclude_busy)" if any(busy(p) for p in group.repeats)
                           else "")
        merges.append({"notebook": group.notebook, "combination": group.description,
                       "named by": shown_path(group.used, [loaded.folders[group.used]]),
                       "status": records[group.used]["status"],
                       "runs counted": sum(p in counted for p in group.paths), "why": why,
                       "not counted": "; ".join(f"{shown_path(p, [loaded.folders[p]])} ("  # why each does not count
                                                + ("a copy of a run already counted" if p in group.duplicates else
                                                   "busy host" if busy(p) else str(records[p]["status"])) + ")"
                                                for p in left_out)})
    return ReportData(list(loaded.dirs), frame, records, list(loaded.rejected), list(loaded.missing_dirs),
                      pd.DataFrame(merges, columns=MERGE_COLUMNS), loaded, exclude_busy, rates)


def shown_path(path: str, folders: Iterable[str]) -> str:
    """`path` below the first of `folders` holding it, led by that folder's name ('smoke/cnn/x.json'); else its name."""
    for folder in folders:
        root = Path(folder).resolve()
        try:
            return str(Path(root.name) / Path(path).resolve().relative_to(root))
        except ValueError:
            continue
    return Path(path).name


def load_report_data(results_dirs: list[str | Path] | tuple[str | Path, ...] | str | Path,
                     exclude_busy: bool = False, rates_file: str | Path | None = None) -> ReportData:
    """Every record under `results_dirs`, priced at the shipped rates overridden by `rates_file` (read first)."""
    rates = load_rates(rates_file)
    return report_data(load_records(results_dirs), exclude_busy, rates)
