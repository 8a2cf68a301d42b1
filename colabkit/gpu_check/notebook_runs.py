"""The GPU check's notebook runs: through the real sweep (run_sweep, papermill, a fresh kernel per run),
with ordinary grid files the check writes (the notebook by absolute path, the devices as the one axis,
the rest from the notebook's smoke preset or the row), and the records read back as summaries.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from colabkit.errors import ColabkitError
from colabkit.suite import suite_path

SMOKE_PRESET = "smoke"
SET_BY_THE_CHECK = ("device", "results_path")


def grid_files() -> list[Path]:
    """The suite's grid files, one per notebook (what `./run.sh smoke` sweeps)."""
    return sorted(suite_path("parameters").glob("*.yaml"))


def smoke_parameters(grid_path: Path) -> tuple[str, dict[str, Any]]:
    """(notebook name, parameters) of the first GPU combination of the grid file's smoke preset."""
    from colabkit.device.spec import DeviceKind, DeviceRequest
    from colabkit.sweep.expand import expand
    from colabkit.sweep.gridfile import load_grid

    spec = load_grid(grid_path)
    combinations = expand(spec, SMOKE_PRESET if SMOKE_PRESET in spec.presets else None, [DeviceRequest(DeviceKind.GPU)])
    if not combinations:
        raise ColabkitError(f"{grid_path} has no gpu combination in its {SMOKE_PRESET} preset")
    params = {key: value for key, value in combinations[0].params.items() if key not in SET_BY_THE_CHECK}
    return spec.notebook.stem, params


def write_grid(folder: Path, label: str, notebook: str, devices: Sequence[str], fixed: Mapping[str, Any]) -> Path:
    """A grid file running notebooks/<notebook>.ipynb once per device with `fixed` parameters."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{label}.yaml"
    spec = {"notebook": str(suite_path(f"notebooks/{notebook}.ipynb")),
            "description": f"python -m colabkit gpu-check: {label}",
            "grid": {"device": list(devices)},
            "fixed": {key: value for key, value in fixed.items() if key not in SET_BY_THE_CHECK}}
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


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


def run_grids(grids: Sequence[Path], out: Path, available: Mapping[str, int], echo: Callable[[str], None], *,
              timeout_s: float, jobs: int = 1) -> list[dict[str, Any]]:
    """Run the grid files through the sweep into `out` (every combination run afresh, no HTML export);
    one run_summary per combination, in the sweep's order."""
    from colabkit.records.record import read_record
    from colabkit.sweep.options import SweepOptions
    from colabkit.sweep.plan import plan
    from colabkit.sweep.runner import run_sweep

    options = SweepOptions(jobs=jobs, timeout_s=timeout_s, force=True)
    outcomes = run_sweep(plan(list(grids), out=out, html="none"), options, available=dict(available), echo=echo)
    summaries = []
    for outcome in outcomes:
        record = None
        if Path(outcome.record_path).is_file():
            try:
                record = read_record(outcome.record_path)
            except ColabkitError as error:  # an unreadable record is the run's failure, said in its row
                echo(f"unreadable record {outcome.record_path}: {error}")
        summaries.append(run_summary(outcome.combination.name, outcome.combination.device, str(outcome.status),
                                     outcome.message, record, Path(outcome.record_path)))
    return summaries


def report_device_kinds(records_csv: Path) -> list[str]:
    """The device kinds of the ok runs a built report's records.csv lists (its `device_kind` column)."""
    import csv

    with open(records_csv, encoding="utf-8", newline="") as stream:
        rows = list(csv.DictReader(stream))
    if rows and "device_kind" not in rows[0]:
        raise ColabkitError(f"{records_csv} has no device_kind column")
    return sorted({row["device_kind"] for row in rows if row.get("device_kind") and row.get("status", "ok") == "ok"})
