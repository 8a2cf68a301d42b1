"""The records behind a report: every record under the results folders, merged per combination.

Several folders merge (say, outputs copied back from a CPU, a GPU and a TPU Colab runtime). A
combination (one notebook with one set of parameters) can then appear more than once: the sweep
on a CPU runtime leaves a `skipped` record for the GPU combinations that the GPU runtime ran. One
record per combination is *used*: an ok record over a failed one over a skipped one, and among
equals the one that finished last; every such choice is listed in `ReportData.merges`.

Two records are the same combination when they come from the same notebook with the same parameters
(the sweep's `fingerprint.params` where it wrote one, else `params`). Failed and skipped records of
older sweeps carry the grid's parameters only: one of them joins the ok record whose parameters
include all of its own with the same values.

Nothing is dropped silently: files that are not readable records (unknown schema version,
missing fields, bad JSON) are in `rejected`, folders that do not exist in `missing_dirs`.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from colabkit.records.record import load_results

STATUS_ORDER = {"ok": 0, "failed": 1, "skipped": 2}
KIND_ORDER = {"cpu": 0, "gpu": 1, "tpu": 2}
# A dataset loader's provenance says `source: real | offline | synthetic`. Only records that name a
# `dataset` can have used a stand-in for one: matmul's random matrices are its workload, not a substitute.
SUBSTITUTE_SOURCES = ("offline", "synthetic")
REPORT_COLUMNS = ("results_dir", "device_kind", "device_label", "combination", "used", "data_used")


def _requested(record: dict[str, Any]) -> str:
    device = record.get("device") or {}
    return str(device.get("requested") or (record.get("params") or {}).get("device") or "unknown")


def device_kind(record: dict[str, Any]) -> str:
    """'cpu', 'gpu' or 'tpu' as the run found it (the requested kind for runs that never started)."""
    kind = (record.get("device") or {}).get("kind")
    return str(kind or _requested(record).split(":")[0]).lower()


def _model_name(name: str) -> str:
    """A device model without trademark noise: 'Intel(R) Xeon(R) CPU @ 2.20GHz' -> 'Intel Xeon @ 2.20GHz'."""
    name = re.sub(r"\((R|TM|r|tm)\)", "", name)
    name = re.sub(r"\bCPU\b", "", name)
    return " ".join(name.split())


def device_label(record: dict[str, Any]) -> str:
    """How figures and tables name a record's device: 'CPU: AMD EPYC', 'CPU x2: AMD EPYC',
    'GPU: Tesla T4', 'TPU x8: TPU v2-8', 'GPU x4 over 2 workers: Tesla T4'; 'GPU (requested)' for a
    run that never found its device."""
    device = record.get("device") or {}
    replicas = device.get("replicas")
    if not replicas:
        _, _, count = _requested(record).partition(":")
        replicas = int(count) if count.isdigit() else 1
    head = device_kind(record).upper() + (f" x{int(replicas)}" if int(replicas) > 1 else "")
    workers = device.get("workers")
    if isinstance(workers, int) and workers > 1:  # MultiWorkerMirroredStrategy: replicas over several machines
        head += f" over {workers} workers"
    model = device.get("name") or device.get("model")
    return f"{head}: {_model_name(str(model))}" if model else f"{head} (requested)"


def data_used(record: dict[str, Any]) -> str:
    """'real', 'OFFLINE' or 'SYNTHETIC' for records that name a dataset; '' for the others."""
    data = record.get("data") or {}
    if "dataset" not in data:
        return ""
    source = str(data.get("source") or "unknown")
    return source.upper() if source in SUBSTITUTE_SOURCES else source


def _label_sort_key(label: str) -> tuple[int, int, str]:
    kind, _, rest = label.partition(":")
    head = kind.split(" ")[0].lower()
    replicas = re.search(r" x(\d+)", kind)
    return KIND_ORDER.get(head, 9), int(replicas.group(1)) if replicas else 1, rest


def sort_labels(labels: Any) -> list[str]:
    """Device labels in report order: CPU, GPU, TPU; fewer replicas first; then by model."""
    return sorted(set(labels), key=_label_sort_key)


def combination_params(record: dict[str, Any]) -> dict[str, Any]:
    """The parameters that name a record's combination: the sweep's own (`fingerprint.params`) where
    it recorded them, else the record's `params`."""
    fingerprint = record.get("fingerprint")
    if isinstance(fingerprint, dict) and isinstance(fingerprint.get("params"), dict):
        return dict(fingerprint["params"])
    return dict(record.get("params") or {})


def _same_combination(ran: dict[str, Any], ran_ok: bool, other: dict[str, Any], other_ok: bool) -> bool:
    """Equal parameters; or, for a failed or skipped record written by an older sweep (which gave it
    the grid's parameters only), parameters that the ok record `ran` holds all of, with equal values."""
    if ran == other:
        return True
    return ran_ok and not other_ok and other.keys() <= ran.keys() and all(ran[k] == other[k] for k in other)


def _finished(record: dict[str, Any]) -> pd.Timestamp:
    stamp = pd.to_datetime(record.get("finished_at"), utc=True, errors="coerce")
    return stamp if not pd.isna(stamp) else pd.Timestamp.min.tz_localize("UTC")


@dataclass
class _Group:
    notebook: str
    params: dict[str, Any]  # those of its first record: an ok one if the group has any
    ok: bool
    paths: list[str] = field(default_factory=list)


def _group(records: dict[str, dict[str, Any]]) -> list[_Group]:
    """Records of the same combination together (ok records first, so that each group that has one
    is named by it)."""
    groups: list[_Group] = []
    for path in sorted(records, key=lambda p: (records[p]["status"] != "ok", -len(combination_params(records[p])))):
        record = records[path]
        params, ok = combination_params(record), record["status"] == "ok"
        for group in groups:
            if group.notebook == record["notebook"] and _same_combination(group.params, group.ok, params, ok):
                group.paths.append(path)
                break
        else:
            groups.append(_Group(record["notebook"], params, ok, [path]))
    return groups


def _describe(params: dict[str, Any], varying: set[str]) -> str:
    shown = ["device", *sorted(key for key in varying if key != "device")]
    return ", ".join(f"{key}={params[key]}" for key in shown if key in params)


def _choose(group: _Group, records: dict[str, dict[str, Any]]) -> tuple[str, str]:
    """The record a combination uses, and why."""
    ranked = sorted(group.paths, key=lambda p: (STATUS_ORDER.get(records[p]["status"], 9),
                                                -_finished(records[p]).value))
    used = ranked[0]
    status = records[used]["status"]
    peers = [p for p in group.paths if records[p]["status"] == status]
    if len(peers) > 1:
        why = f"the most recent of {len(peers)} {status} records"
    else:
        others = sorted({records[p]["status"] for p in group.paths if p != used})
        why = f"{status} preferred over {' and '.join(others)}"
    return used, why


@dataclass
class ReportData:
    """Every record found, one row each, and what the report makes of them.

    `frame` is colabkit.results.load_results's tidy table of every record read, plus the columns
    results_dir, device_kind, device_label, combination, used (the record its combination uses)
    and data_used ('real', 'OFFLINE', 'SYNTHETIC' or '' when the run used no dataset).
    """

    dirs: list[str]
    frame: pd.DataFrame
    records: dict[str, dict[str, Any]]
    rejected: list[tuple[str, str]]
    missing_dirs: list[str]
    merges: pd.DataFrame

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


def load_report_data(results_dirs: list[str | Path] | tuple[str | Path, ...] | str | Path) -> ReportData:
    """Read every record under `results_dirs` (folders or single files) and merge them.

    Never raises for bad content: unreadable files go to `rejected`, absent folders to
    `missing_dirs`; callers decide how loud to be (the report shows both in red).
    """
    dirs = [str(results_dirs)] if isinstance(results_dirs, (str, Path)) else [str(d) for d in results_dirs]
    frames, records, rejected, missing, seen = [], {}, [], [], set()
    for folder in dirs:
        if not Path(folder).exists():
            missing.append(folder)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # load_results warns about rejected files; the report lists them
            frame = load_results(folder)
        rejected.extend(item for item in frame.attrs.get("rejected", []) if item[0] not in {r[0] for r in rejected})
        fresh = [path for path in frame["path"] if Path(path).resolve() not in seen]
        seen.update(Path(path).resolve() for path in fresh)
        frame = frame[frame["path"].isin(fresh)].assign(results_dir=folder)
        if len(frame):
            frames.append(frame)
        for path in fresh:
            with open(path, encoding="utf-8") as stream:
                records[path] = json.load(stream)
    columns = ["path", "notebook", "status", *REPORT_COLUMNS]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)
    added = pd.DataFrame({  # added in one piece: column by column would fragment a frame this wide
        "device_kind": [device_kind(records[p]) for p in frame["path"]],
        "device_label": [device_label(records[p]) for p in frame["path"]],
        "data_used": [data_used(records[p]) for p in frame["path"]],
        "used": False, "combination": "",
    }, index=frame.index)
    frame = pd.concat([frame.drop(columns=[c for c in added.columns if c in frame]), added], axis=1)

    merges = []
    groups = _group(records)
    varying: dict[str, set[str]] = {}
    for notebook in {group.notebook for group in groups}:
        values: dict[str, set[str]] = {}
        for path in (p for g in groups if g.notebook == notebook for p in g.paths):
            for key, value in combination_params(records[path]).items():
                values.setdefault(key, set()).add(json.dumps(value, sort_keys=True, default=str))
        varying[notebook] = {key for key, seen_values in values.items() if len(seen_values) > 1}
    for group in groups:
        used, why = _choose(group, records)
        description = _describe(group.params, varying[group.notebook])
        frame.loc[frame["path"].isin(group.paths), "combination"] = description
        frame.loc[frame["path"] == used, "used"] = True
        if len(group.paths) > 1:
            merges.append({
                "notebook": group.notebook, "combination": description, "used": used,
                "status": records[used]["status"], "why": why,
                "not used": "; ".join(f"{p} ({records[p]['status']})" for p in group.paths if p != used),
            })
    frame["used"] = frame["used"].astype(bool)
    merge_columns = ["notebook", "combination", "used", "status", "why", "not used"]
    return ReportData(dirs, frame, records, rejected, missing, pd.DataFrame(merges, columns=merge_columns))
