"""Run a notebook once per combination of a grid, through papermill, into OUT/.

For each combination: OUT/<notebook>/<device>/<slug>.ipynb (the executed notebook), .json (the
record), .html (nbconvert export) and .log (the kernel's output). Combinations for devices this
machine lacks are recorded as skipped and not run. A failing combination gets a failed record and
the sweep goes on; the exit status says whether anything failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colabkit.device import parse_device
from colabkit.errors import ColabkitError, GridError
from colabkit.grid import Combination, expand, load_grid
from colabkit.results import make_record, read_record, utc_now, write_json_atomic

_DETECT = "import json; from colabkit.device import available_devices; print(json.dumps(available_devices()))"


@dataclass
class Outcome:
    """What happened to one combination."""

    combination: Combination
    status: str  # ok | failed | skipped
    seconds: float
    record_path: Path
    message: str = ""


def detect_devices(timeout_s: float = 120) -> dict[str, int]:
    """Devices this machine has, asked in a child process so this one never claims a GPU or TPU."""
    completed = subprocess.run([sys.executable, "-c", _DETECT], capture_output=True, text=True,
                               timeout=timeout_s, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    if completed.returncode != 0:
        raise ColabkitError(f"could not detect this machine's devices: {completed.stderr.strip()[-500:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def missing_device_reason(device: str, available: dict[str, int]) -> str | None:
    """Why `device` cannot run here (None if it can): 'gpu:2' needs 2 GPUs, 'tpu' a TPU runtime."""
    request = parse_device(device)
    if request.kind in ("auto", "cpu"):
        return None
    have = available.get(request.kind, 0)
    need = request.count or 1
    if have >= need:
        return None
    inventory = ", ".join(f"{kind}: {count}" for kind, count in sorted(available.items()))
    return f"device '{device}' is not on this machine (it has {inventory})"


def _failure_from_exception(exc: BaseException) -> dict[str, Any]:
    """The `error` section of a failed record; papermill's errors carry the failing cell."""
    error: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc).strip()[-2000:]}
    ename = getattr(exc, "ename", None)
    if ename:  # papermill.PapermillExecutionError
        error.update(type=ename, message=str(getattr(exc, "evalue", "")),
                     cell=getattr(exc, "cell_index", None), exec_count=getattr(exc, "exec_count", None),
                     source=str(getattr(exc, "source", ""))[:2000])
    return error


def export_html(notebook_path: Path, html_path: Path) -> Path:
    """Export an executed notebook to HTML with nbconvert (atomically)."""
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_filename(str(notebook_path))
    temporary = html_path.with_name(f".{html_path.name}.tmp")
    temporary.write_text(body, encoding="utf-8")
    os.replace(temporary, html_path)
    return html_path


def _kernel_manager_logging_to(log: Any) -> type:
    """A kernel manager whose kernel process writes its own stdout/stderr (TensorFlow's C++ logs,
    kernel warnings) into the run's log file instead of the sweep's terminal."""
    from jupyter_client.manager import AsyncKernelManager

    class LoggedKernelManager(AsyncKernelManager):
        async def start_kernel(self, **kwargs: Any) -> None:
            kwargs.setdefault("stdout", log)
            kwargs.setdefault("stderr", log)
            await super().start_kernel(**kwargs)

    return LoggedKernelManager


def run_combination(combination: Combination, out: Path, kernel_name: str | None = None) -> Outcome:
    """Execute one combination with papermill; always leaves a record (ok or failed) behind."""
    import papermill

    base = combination.output_base(out)
    base.parent.mkdir(parents=True, exist_ok=True)
    record_path = base.with_suffix(".json")
    running = base.with_name(f".{base.name}.running.ipynb")
    started_at, start = utc_now(), time.perf_counter()
    for stale in (record_path, base.with_suffix(".html")):
        stale.unlink(missing_ok=True)  # never let an old result pass for this run's
    params = {**combination.params, "results_path": str(record_path.resolve())}
    error: dict[str, Any] | None = None
    with open(base.with_suffix(".log"), "w", encoding="utf-8") as log:
        try:
            papermill.execute_notebook(
                str(combination.notebook), str(running), parameters=params, kernel_name=kernel_name,
                progress_bar=False, stdout_file=log, stderr_file=log, cwd=str(Path.cwd()),
                kernel_manager_class=_kernel_manager_logging_to(log),
                # C-level output (TensorFlow's logs) goes to the log once, not also into every cell.
                extra_arguments=["--IPKernelApp.capture_fd_output=False"],
            )
        except Exception as exc:  # noqa: BLE001 - any failure of one run must not sink the sweep
            error = _failure_from_exception(exc)
            log.write("\n" + "".join(traceback.format_exception(exc)))
    if running.exists():
        os.replace(running, base.with_suffix(".ipynb"))
    if error is None and not record_path.exists():
        error = {"type": "MissingRecord", "message": "the notebook finished without writing its record"}
    seconds = time.perf_counter() - start
    if error is not None:
        record = make_record(combination.name, "failed", combination.params, started_at=started_at,
                             device={"requested": combination.device}, error=error)
        write_json_atomic(record_path, record)
        return Outcome(combination, "failed", seconds, record_path, f"{error['type']}: {error['message'][:200]}")
    status = read_record(record_path)["status"]
    export_html(base.with_suffix(".ipynb"), base.with_suffix(".html"))
    return Outcome(combination, status, seconds, record_path)


def skip_combination(combination: Combination, out: Path, reason: str) -> Outcome:
    """Record a combination that this machine cannot run, without running it."""
    record_path = combination.output_base(out).with_suffix(".json")
    if record_path.exists() and read_record(record_path)["status"] == "ok":
        # Results copied here from the machine that has this device stay as they are.
        return Outcome(combination, "skipped", 0.0, record_path, reason + " (an earlier ok record is kept)")
    record = make_record(combination.name, "skipped", combination.params,
                         device={"requested": combination.device}, error={"type": "DeviceNotAvailable", "message": reason})
    write_json_atomic(record_path, record)
    return Outcome(combination, "skipped", 0.0, record_path, reason)


def plan(grid_paths: list[str | Path], preset: str | None, device: str | None) -> list[Combination]:
    """All combinations of the grid files under `preset`, narrowed to `device` if given.

    Every grid file is validated before any combination is returned, so a bad file runs nothing.
    """
    specs = [load_grid(grid_path) for grid_path in grid_paths]
    combinations = [combination for spec in specs
                    for combination in expand(spec, preset, devices=[device] if device else None)]
    if device and not combinations:
        raise GridError(f"no combination runs on device {device!r}: the grid files list other devices")
    return combinations


def run_sweep(
    grid_paths: list[str | Path],
    preset: str | None = None,
    device: str | None = None,
    out: str | Path = "outputs",
    available: dict[str, int] | None = None,
    kernel_name: str | None = None,
    echo: Callable[[str], None] = print,
) -> list[Outcome]:
    """Run every combination; return their outcomes. Nothing runs if a grid file is invalid."""
    if device is not None:
        parse_device(device)
    combinations = plan(grid_paths, preset, device)
    available = detect_devices() if available is None else available
    out = Path(out)
    outcomes = []
    for index, combination in enumerate(combinations, start=1):
        label = f"[{index}/{len(combinations)}] {combination.name} {combination.device} {combination.slug}"
        reason = missing_device_reason(combination.device, available)
        if reason:
            outcome = skip_combination(combination, out, reason)
        else:
            echo(f"{label} ...")
            outcome = run_combination(combination, out, kernel_name)
        echo(f"{label}: {outcome.status} ({outcome.seconds:.1f} s){' - ' + outcome.message if outcome.message else ''}")
        outcomes.append(outcome)
    return outcomes


def summary_table(outcomes: list[Outcome]) -> str:
    """A plain-text table of the outcomes and their counts."""
    rows = [("notebook", "device", "combination", "status", "seconds")]
    rows += [(o.combination.name, o.combination.device, o.combination.slug, o.status, f"{o.seconds:.1f}")
             for o in outcomes]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    counts = {status: sum(o.status == status for o in outcomes) for status in ("ok", "failed", "skipped")}
    lines.append(", ".join(f"{count} {status}" for status, count in counts.items()))
    return "\n".join(lines)
