"""The GPU check's notebook runs: planned once by the sweep's own planner, from the suite's grid files (the
first combination of each notebook's smoke preset, on the device the row checks, the row's parameters as
`-p` overrides) or from a row's own parameters (colabkit.sweep.plan.plan_notebook), one run each in a fresh
kernel, no HTML export; run by the real sweep (run_sweep, papermill), each run's record read back as the
summary its row's rules judge.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from colabkit.errors import ColabkitError
from colabkit.gpu_check.rules import Unavailable
from colabkit.records.record import read_record
from colabkit.suite import suite_path
from colabkit.sweep.options import RunOptions
from colabkit.sweep.plan import SweepPlan, plan
from colabkit.sweep.driver import run_sweep

SMOKE_PRESET = "smoke"
NOTEBOOKS = ("cnn_mnist", "dblstm_har", "matmul_tflops", "paradnn", "timeseries_rnn")  # the suite's, as grid files name them


def check_plan(notebooks: Sequence[str], out: Path, devices: str | Sequence[str],
               overrides: Mapping[str, Any] | None = None) -> SweepPlan:
    """Each notebook's first combination of its grid file's smoke preset on each of `devices` ('gpu', 'gpu:2',
    'cpu') with `overrides`, training (the smoke's inference and decode rows run on one device only), one run
    each in a fresh kernel without HTML, into `out`: the check's runs, planned once."""
    firsts: dict[tuple[str, str], Any] = {}
    for device in [devices] if isinstance(devices, str) else devices:
        for run in plan([suite_path(f"parameters/{notebook}.yaml") for notebook in notebooks], SMOKE_PRESET, None,
                        {"mode": "train", **(overrides or {}), "device": device}, out, repeats=1, kernels="fresh",
                        html="none"):
            firsts.setdefault((run.name, device), run)
    return SweepPlan(list(firsts.values()), out)


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


def run_plan(runs: SweepPlan, available: Mapping[str, int], echo: Callable[[str], None], *, timeout_s: float,
             jobs: int = 1) -> list[dict[str, Any]]:
    """Run the plan through the sweep (every run afresh); one run_summary per run, in the plan's order."""
    options = RunOptions(jobs=jobs, timeout_s=timeout_s, force=True)
    summaries = []
    for outcome in run_sweep(runs, options, available=dict(available), echo=echo):
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
    """The report of `results` built as a user builds it (`python -m colabkit report`, a process of its own), and
    the device kinds of the ok runs its records.csv lists; Unavailable (a failure) when it cannot be built."""
    built = subprocess.run([sys.executable, "-m", "colabkit", "report", str(results), "--out", str(out)],
                           capture_output=True, text=True)
    if built.returncode not in (0, 1):  # 1: built, with files it could not read as records (named on stderr)
        said = (built.stderr.strip().splitlines() or ["no output"])[-1]
        return Unavailable(f"the report was not built (exit {built.returncode}: {said})", failed=True)
    echo(f"  report: {out / 'report.html'}")
    try:
        with open(out / "records.csv", encoding="utf-8", newline="") as stream:
            rows = list(csv.DictReader(stream))
    except OSError as error:
        return Unavailable(f"the report wrote no records.csv ({error.strerror or error})", failed=True)
    if rows and "device_kind" not in rows[0]:
        return Unavailable(f"{out / 'records.csv'} has no device_kind column", failed=True)
    return sorted({row["device_kind"] for row in rows if row.get("device_kind") and row.get("status", "ok") == "ok"})
