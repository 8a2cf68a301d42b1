"""The GPU check's notebook runs: presets of the suite's grid files (`gpu_check`: one training run of seconds per
notebook on the GPU and the CPU; `gpu_check_fit`: the notebook each training row sets against its bare fit),
planned like any preset by the sweep's planner, with the row's `-p` overrides (gpu:2, a backend, the FC steps), each
run afresh in a fresh kernel without HTML; run by the real sweep (run_sweep, papermill), each run's record read
back as the summary its row's rules judge; the report built from them as `python -m colabkit report` builds it.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from colabkit.errors import ColabkitError
from colabkit.gpu_check.rules import Unavailable
from colabkit.records.record import read_record
from colabkit.suite import suite_path
from colabkit.sweep.driver import run_sweep
from colabkit.sweep.options import RunOptions
from colabkit.sweep.plan import SweepPlan, plan

NOTEBOOKS = ("cnn_mnist", "dblstm_har", "matmul_tflops", "paradnn", "timeseries_rnn")  # the suite's, as grid files name them
NOTEBOOK_TIMEOUT_S = 600.0  # a notebook run past this is stopped and its row fails: a hang must not hold the GPU


def preset_plan(preset: str, out: Path, device: str | None = None, overrides: Mapping[str, Any] | None = None,
                notebooks: Sequence[str] = NOTEBOOKS, jobs: int = 1) -> SweepPlan:
    """The `preset` of the grid files of `notebooks` on `device` (None: every device it lists) with `overrides`, into
    `out`: each run afresh (`force`), at most NOTEBOOK_TIMEOUT_S, `jobs` side by side."""
    return plan([suite_path(f"parameters/{notebook}.yaml") for notebook in notebooks], preset, device,
                dict(overrides or {}), out, options=RunOptions(jobs=jobs, timeout_s=NOTEBOOK_TIMEOUT_S, force=True))


def run_summary(notebook: str, device: str, status: str, message: str, record: Mapping[str, Any] | None,
                record_path: Path | None = None) -> dict[str, Any]:
    """What the rules read of one run: status and message, and from its record the device, the
    backend, the steady samples/s and the figures the training rows compare."""
    record = record or {}
    metrics, device_section = record.get("metrics") or {}, record.get("device") or {}
    return {"notebook": notebook, "device": device, "status": status, "message": message,
            "record": str(record_path) if record_path else None,
            "device_kind": device_section.get("kind"), "device_name": device_section.get("name"),
            "backend": device_section.get("backend"), "replicas": device_section.get("replicas"),
            "strategy": device_section.get("strategy"), "samples_per_s": metrics.get("samples_per_s"),
            "samples_per_epoch": metrics.get("samples_per_epoch"), "jit_compile": metrics.get("jit_compile"),
            "model_tflops": metrics.get("model_tflops"), "mfu": metrics.get("mfu"),
            "energy_j_per_epoch": metrics.get("energy_j_per_epoch")}


def run_plan(runs: SweepPlan, available: Mapping[str, int], echo: Callable[[str], None]) -> list[dict[str, Any]]:
    """Run the plan through the sweep, as its options say; one run_summary per run, in the plan's order."""
    summaries = []
    for outcome in run_sweep(runs, available=dict(available), echo=echo):
        record = None
        if Path(outcome.record_path).is_file():
            try:
                record = read_record(outcome.record_path)
            except ColabkitError as error:  # an unreadable record is the run's failure, said in its row
                echo(f"unreadable record {outcome.record_path}: {error}")
        summaries.append(run_summary(outcome.combination.name, outcome.combination.device, str(outcome.status),
                                     outcome.message, record, Path(outcome.record_path)))
    return summaries


def report_device_kinds(results: Path, out: Path, echo: Callable[[str], None]) -> list[str] | Unavailable:
    """The report of `results` built as `python -m colabkit report` builds it, and the device kinds of the ok runs
    its records.csv lists; Unavailable (a failure) when it cannot be built."""
    from colabkit.report import build_report  # pandas and matplotlib: only where the check gets this far

    try:
        build_report([str(results)], str(out))
    except ColabkitError as error:
        return Unavailable(f"the report was not built ({error})", failed=True)
    echo(f"  report: {out / 'report.html'}")
    try:
        with open(out / "records.csv", encoding="utf-8", newline="") as stream:
            rows = list(csv.DictReader(stream))
    except OSError as error:
        return Unavailable(f"the report wrote no records.csv ({error.strerror or error})", failed=True)
    if rows and "device_kind" not in rows[0]:
        return Unavailable(f"{out / 'records.csv'} has no device_kind column", failed=True)
    return sorted({row["device_kind"] for row in rows if row.get("device_kind") and row.get("status", "ok") == "ok"})
