"""Where the numbers came from: the records found (and the ones set aside), the devices with their
model names, software versions, dates, git commits, and which data every run used."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd

from colabkit.experiments import find
from colabkit.report.common import column, distinct, not_plotted, substitute_rows, substitute_warning, title_of
from colabkit.report.experiment_sections import SECTIONS
from colabkit.report.records import ReportData, sort_labels
from colabkit.report.section import ReportTable, Section
from colabkit.version import __version__

SOFTWARE = [("software.python", "Python"), ("software.tensorflow", "TensorFlow"), ("software.keras", "Keras"),
            ("software.keras_backend", "Keras backend"), ("software.numpy", "NumPy"), ("software.colabkit", "colabkit"),
            ("software.tf_cuda_build", "TF CUDA build"), ("software.tf_cudnn_build", "TF cuDNN build")]
DEVICE_FIELDS = {"model": "device.name", "replicas": "device.replicas", "strategy": "device.strategy",
                 "logical devices": None, "compute capability": "device.compute_capability",
                 "memory (GiB)": "device.memory_gib", "host CPU": "host.cpu_model", "host cores": "host.cpu_cores"}


def _join(values: pd.Series) -> str:
    return ", ".join(distinct(values))


def devices_table(ok: pd.DataFrame) -> pd.DataFrame:
    """One row per device label: kind, model, replicas, strategy, host, Colab runtime, runs (no column empty)."""
    colab = [name for name in ok.columns if name.startswith("host.colab_runtime.")
             and name.rsplit(".", 1)[1] in ("accelerator", "release_tag", "tpu_accelerator_type")]
    rows = []
    for label in sort_labels(ok["device_label"]):
        runs = ok[ok["device_label"] == label]
        logical = "yes (share one CPU's cores)" if column(runs, "device.logical_devices").notna().any() else "no"
        rows.append({"device": label, "kind": runs["device_kind"].iloc[0].upper(),
                     **{name: _join(column(runs, key)) if key else logical for name, key in DEVICE_FIELDS.items()},
                     "Colab runtime": "; ".join(f"{name.rsplit('.', 1)[1]}={_join(runs[name])}" for name in colab
                                                if _join(runs[name])) or "no",
                     "runs": len(runs), "notebooks": _join(runs["notebook"])})
    table = pd.DataFrame(rows)
    return table.loc[:, [c for c in table.columns if table[c].astype(str).ne("").any()]]


def software_table(ok: pd.DataFrame) -> pd.DataFrame:
    """The distinct software stacks the runs used, with how many runs and which devices used each."""
    present = [(name, label) for name, label in SOFTWARE if name in ok and ok[name].notna().any()]
    if not present or not len(ok):
        return pd.DataFrame()
    keys = [name for name, _ in present]
    stacks = ok.assign(**{key: ok[key].astype(str).replace("nan", "") for key in keys})
    return stacks.groupby(keys, sort=False, dropna=False).agg(
        runs=("path", "size"), devices=("device_label", lambda s: ", ".join(sort_labels(s)))).reset_index().rename(
        columns=dict(present))


def runs_table(used: pd.DataFrame) -> pd.DataFrame:
    """Per notebook and device: when the runs started and finished (UTC) and the git commits."""
    rows = []
    for (notebook, label), runs in used.groupby(["notebook", "device_label"], sort=True):
        started, finished = (pd.to_datetime(column(runs, name), utc=True, errors="coerce")
                             for name in ("started_at", "finished_at"))
        commits = [str(c) for c in dict.fromkeys(column(runs, "git_commit").dropna())]
        rows.append({"notebook": notebook, "device": label, "runs": len(runs),
                     "statuses": ", ".join(f"{n} {s}" for s, n in runs["status"].value_counts().items()),
                     "first started (UTC)": started.min().strftime("%Y-%m-%d %H:%M") if started.notna().any() else "",
                     "last finished (UTC)": finished.max().strftime("%Y-%m-%d %H:%M") if finished.notna().any() else "",
                     "git commits": ", ".join(c[:12] + ("-dirty" if c.endswith("-dirty") else "") for c in commits)
                     or "unknown"})
    return pd.DataFrame(rows)


def data_table(ok: pd.DataFrame) -> pd.DataFrame:
    """Which data each notebook's runs used: real, or an offline/synthetic stand-in, and what it is."""
    if not len(ok):
        return pd.DataFrame()

    def text(name: str) -> pd.Series:
        return column(ok, name).astype(object).where(column(ok, name).notna(), "").astype(str)

    source = text("data.source").map(lambda s: s.upper() + " (stand-in)" if s in ("offline", "synthetic") else s)
    generated = (ok["data_used"] == "") & source.str.startswith("SYNTHETIC")  # the workload's own data
    frame = pd.DataFrame({"notebook": ok["notebook"],
                          "data": text("data.dataset").where(text("data.dataset") != "", text("data.name")),
                          "source": source.where(~generated, "generated (the workload itself)"),
                          "description": text("data.description"), "sha256": text("data.sha256").str[:12],
                          "path": ok["path"]})
    return frame.groupby(["notebook", "data", "source", "description", "sha256"], sort=True, dropna=False).agg(
        runs=("path", "size")).reset_index()


def provenance_section(data: ReportData) -> Section:
    """Devices, software, dates, commits and data of every run the report uses."""
    section = Section("provenance", "Provenance")
    # one row per run, of every mode: every "runs" column counts runs, never combinations
    ok, used = pd.concat([data.runs(), data.runs(None, inference=True), data.runs(None, mode="decode")]), data.used()
    if not len(used):
        section.empty = "No records, so no provenance to show."
        return section
    section.warnings += [warning for warning in [substitute_warning(ok, data)] if warning]
    commits = sorted({str(c) for c in column(ok, "git_commit").dropna()})
    if len(commits) > 1:
        section.notes.append(f"The successful runs come from {len(commits)} different colabkit commits; compare "
                             "figures across them with care.")
    dirty = [c for c in commits if c.endswith("-dirty")]
    if dirty:
        section.notes.append(f"{len(dirty)} commit(s) had uncommitted changes when the runs were made (marked -dirty).")
    section.items += [ReportTable(name, table, caption) for name, table, caption in [
        ("provenance_devices", devices_table(ok), "Devices of the successful runs, as the runs found them."),
        ("provenance_software", software_table(ok), "Software stacks of the successful runs."),
        ("provenance_runs", runs_table(used), "Dates (UTC) and git commits of the runs this report uses."),
        ("provenance_data", data_table(ok), "Data of the successful runs: real datasets or stand-ins.")] if len(table)]
    return section


def busy_runs_table(data: ReportData) -> pd.DataFrame:
    """Every ok run made on a busy host (`host_quiet` false), why, and whether it counts."""
    busy = data.busy()
    reasons = [("; ".join((data.record(path).get("host_state") or {}).get("busy_reasons") or []) or "not recorded")
               for path in busy["path"]]
    return pd.DataFrame({"notebook": busy["notebook"].map(title_of), "combination": busy["combination"],
                         "device": busy["device_label"], "why": reasons, "counted": busy["used"],
                         "record": busy["path"].map(data.shown)}).reset_index(drop=True)


def overview_section(data: ReportData) -> Section:
    """What the report read, and the records it set aside, merged or left out."""
    section = Section("records", "Records")
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    folders = ", ".join(f"`{name}`" for name in data.folder_names) or "(none given)"
    section.notes.append(f"Report generated {now} by colabkit {__version__} from {folders}.")
    section.warnings += [f"results folder {Path(folder).name} does not exist: nothing was read from it."
                         for folder in data.missing_dirs]
    if data.rejected:
        section.warnings.append(f"{len(data.rejected)} file(s) set aside: not readable records (unknown schema version, "
                                "missing fields or bad JSON), not measurements, or runs their experiment no longer "
                                "offers; they are in no figure and no count. See the table below, with why.")
    used = data.used()
    unknown = sorted(name for name in set(used["notebook"]) if find(name) is None or name not in SECTIONS)
    if not len(data.frame):
        section.notes.append("No result records were found.")
    else:
        section.notes.append("Failed and skipped runs are listed in their experiment's appendix.")
        counts = used.pivot_table(index="notebook", columns="status", values="path", aggfunc="count", fill_value=0)
        counts = counts.reindex(columns=[s for s in ("ok", "failed", "skipped") if s in counts.columns])
        ok = used[used["status"] == "ok"]
        counts["devices (ok runs)"] = [", ".join(sort_labels(ok.loc[ok["notebook"] == n, "device_label"]))
                                       for n in counts.index]
        counts["combinations (ok)"] = ok.groupby("notebook")["combination_id"].nunique().reindex(counts.index) \
            .fillna(0).astype(int)
        counts["records read"] = data.frame.groupby("notebook")["path"].count().reindex(counts.index)
        section.items.append(ReportTable("records_overview", counts.reset_index().rename_axis(columns=None),
                                         "Runs per notebook and status (a run: one notebook in its own "
                                         "kernel; every run of a combination counts: its repeats, from one folder or "
                                         "several), the combinations (parameters and device) with an ok run, and "
                                         "record files read."))
        if unknown:
            section.notes.append(f"Records of {', '.join(unknown)} have no section in this report; they are in "
                                 "records.csv with all the others, and their failed or skipped runs are listed below.")
    if data.rejected:
        rejected = [(data.shown(path), why) for path, why in data.rejected]
        section.items.append(ReportTable("records_rejected", pd.DataFrame(rejected, columns=["file", "why"]),
                                         "Files set aside, with why: not readable records, not measurements, or runs their experiment no longer offers."))
    if len(data.merges):
        section.items.append(ReportTable("records_merged", data.merges,
                                         "Combinations with more than one record (repeats, or several results "
                                         "folders): every ok run counts; the records that do not (a copy of a run "
                                         "already counted, a run on a busy host when those are left out, a failed "
                                         "or skipped record beside ok ones) are named with the reason."))
    busy = busy_runs_table(data)
    if len(busy):
        section.items.append(ReportTable("runs_on_a_busy_host", busy, "Runs made on a busy host, and why (the "
                                         "record's host_state.busy_reasons; thresholds in docs/statistics.md), "
                                         "and whether each counts in the figures and intervals."))
    # sections list their own failed and skipped runs; these have no section
    section.items += [listed for notebook in unknown
                      if (listed := not_plotted(data, notebook, f"{notebook}_runs_not_plotted"))]
    if len(substitute_rows(data.ok())):
        section.warnings.append("some results used offline or synthetic stand-in data; the sections concerned say "
                                "which, and their figures carry a red warning.")
    return section
