"""`python -m colabkit gpu-check`: its table of stages (STAGES, each with its time budget and rows) run in turn by the
stage runner (colabkit.stages, in this process), everything written under one folder, one table printed.

Where nvidia-smi lists no GPU it prints NO_GPU_LINE and returns 0: there is nothing to check, unless asked to
rehearse on the CPU (`on_cpu`, the device run's rehearsal: the JAX and PyTorch clocks on the CPU, each row RAN,
shown and not judged). Else
it writes, under OUT/<UTC time>/: the check's grid files, the notebooks' runs and records, the
report, the workers' and the sweep's logs, and the table as table.txt, table.md and table.json. It
returns 0 only if no row FAILED.
"""

from __future__ import annotations

import datetime as dt
import platform
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import IO

from colabkit.device.probes import nvidia_smi, nvidia_smi_query
from colabkit.errors import OutputFolderError
from colabkit.gpu_check.rows import NO_GPU_LINE, CheckRow, exit_code, write_tables
from colabkit.gpu_check.rules import GpuFacts, Unavailable, failed
from colabkit.gpu_check.stages import (
    Context,
    backend_stage,
    bandwidth_stage,
    device_stage,
    matmul_stage,
    multi_gpu_stage,
    sweep_stage,
)
from colabkit.gpu_check.training import train_stage
from colabkit.stages import Stage, StageResult, run_stages

DEFAULT_OUT = Path("outputs") / "gpu-check"
DEFAULT_ROUNDS = 3  # interleaved rounds of the agreement rows (medians of 3)
Measure = Callable[[Context], list[CheckRow]]
# (stage, its seconds on one data-centre GPU (A100/H100 class), its rows, what measures them), in the order they run;
# docs/benchmarks.md lists them. Their sum on one GPU, less multi-gpu (its own on 2 GPUs or more), is under 8 minutes.
STAGES: tuple[tuple[str, float, tuple[str, ...], Measure], ...] = (
    ("device", 20.0, ("device", "peaks"), device_stage),
    ("bandwidth", 10.0, ("bandwidth",), bandwidth_stage),
    ("matmul", 45.0, ("clock tensorflow", "matmul float32", "matmul tf32", "matmul bfloat16", "matmul float16"),
     matmul_stage),
    ("train-cnn", 90.0, ("cnn xla", "cnn no-xla", "cnn mixed"), lambda ctx: train_stage(ctx, "cnn")),
    ("train-fc", 100.0, ("fc xla", "fc no-xla", "fc mixed", "nvml energy"), lambda ctx: train_stage(ctx, "fc")),
    ("sweep", 110.0, ("sweep gpu",), sweep_stage),
    ("multi-gpu", 60.0, ("sweep gpu:2",), multi_gpu_stage),
    ("jax", 40.0, ("clock jax", "backend jax"), lambda ctx: backend_stage(ctx, "jax")),
    ("torch", 40.0, ("clock torch", "backend torch"), lambda ctx: backend_stage(ctx, "torch")),
)
# The fast check: the stages that run no notebook (about two minutes), then the clocks on JAX and PyTorch without
# their notebook (the whole of the CPU rehearsal).
FAST = ("device", "bandwidth", "matmul")
CLOCKS: tuple[tuple[str, float, tuple[str, ...], Measure], ...] = tuple(
    (backend, budget, (f"clock {backend}",), lambda ctx, backend=backend: backend_stage(ctx, backend, notebook=False))
    for backend, budget, _, _ in STAGES[-2:])


def stage_table(ctx: Context, fast: bool = False) -> list[Stage]:
    """The check's stages (`fast`: FAST, then the clocks; on the CPU rehearsal the clocks alone), each measuring
    its rows into `ctx`; multi-gpu's budget counts on 2 GPUs or more only."""
    table = CLOCKS if ctx.on_cpu else [*(stage for stage in STAGES if stage[0] in FAST), *CLOCKS] if fast else STAGES
    return [Stage(name, 0.0 if name == "multi-gpu" and ctx.facts.count < 2 else budget,
                  partial(_rows, ctx, name, rows, measure)) for name, budget, rows, measure in table]


def gpu_facts() -> GpuFacts | None:
    """nvidia-smi's GPUs (names, memory of the first, driver, compute capability), or None if none."""
    listed = nvidia_smi()
    if not listed:
        return None
    capability = nvidia_smi_query(("compute_cap",))  # drivers before ~510 do not know the field: then unknown
    try:
        major, _, minor = capability[0]["compute_cap"].partition(".") if capability else ("", "", "")
        parsed: tuple[int, int] | None = (int(major), int(minor))
    except ValueError:
        parsed = None
    try:
        memory: float | None = round(float(listed[0]["memory.total"]) / 1024, 1)
    except ValueError:
        memory = None
    return GpuFacts(tuple(row["name"] for row in listed), memory, listed[0]["driver_version"], parsed)


def check_out(out: Path) -> None:
    """Refuse an output folder that cannot be one (a file in its place), before anything runs."""
    for folder in (out, *out.parents):
        if folder.exists() and not folder.is_dir():
            raise OutputFolderError(f"--out {out}: {folder} is a file, not a folder")


def _rows(ctx: Context, stage: str, names: tuple[str, ...], measure: Measure) -> list[CheckRow]:
    """The stage's rows, each said as it comes; a stage that raises fails each of its rows with the error (never a
    traceback in place of the table). A TensorFlow worker that failed to start fails every TensorFlow row."""
    try:
        rows = [row.in_stage(stage) for row in measure(ctx)]
    except Exception as error:  # noqa: BLE001 - the table must come out whatever a stage did
        reason = f"{type(error).__name__}: {error}"
        if stage == "device" and ctx.tf_reason is None:
            ctx.tf_reason = Unavailable(f"the TensorFlow worker failed: {reason}", failed=True)
        rows = [failed(name, "-", "the stage finished", reason).in_stage(stage) for name in names]
    for row in rows:
        ctx.echo(f"  {row.verdict} {row.name}: {row.figure}" + (f" ({row.reason})" if row.reason else ""))
    if stage == "train-fc":
        ctx.close()  # the TensorFlow worker's last stage: free its GPU memory for the sweep
    return rows


def run_check(out: str | Path = DEFAULT_OUT, *, fast: bool = False, rounds: int = DEFAULT_ROUNDS,
              echo: Callable[[str], None] = print, on_cpu: bool = False) -> int:
    """Check this machine's GPU path (`on_cpu`: rehearse the clocks on the CPU); return the exit status (0: no
    row failed, or no GPU here)."""
    out = Path(out)
    check_out(out)
    facts = GpuFacts(smi_names=()) if on_cpu else gpu_facts()
    if facts is None:
        echo(NO_GPU_LINE)
        return 0
    started = dt.datetime.now(dt.timezone.utc)
    folder = out / started.strftime("%Y%m%dT%H%M%SZ")
    try:
        (folder / "logs").mkdir(parents=True, exist_ok=False)
    except OSError as error:
        raise OutputFolderError(f"--out {out}: cannot create {folder} ({error})") from error
    where = "the CPU (the device run's rehearsal: no GPU checked)" if on_cpu else ", ".join(facts.smi_names)
    echo(f"gpu-check: {where}; outputs under {folder}")
    with open(folder / "logs" / "sweep.log", "a", encoding="utf-8") as log:
        ctx = Context(folder, facts, rounds, echo, _writer(log), on_cpu=on_cpu)
        stages = stage_table(ctx, fast)
        try:
            results: list[StageResult] = run_stages(stages, echo)
        finally:
            ctx.close()
    rows = [row for result in results for row in result.value]
    times = {result.name: (result.seconds, result.budget_s) for result in results}
    title = (f"gpu-check {started:%Y-%m-%d %H:%M} UTC on " + (where if on_cpu else f"{facts.smi_names[0]} x{facts.count}")
             + (" (fast)" if fast and not on_cpu else ""))
    meta = {"date": started.isoformat(), "gpus": list(facts.smi_names), "driver": facts.driver, "fast": fast,
            "on_cpu": on_cpu, "rounds": rounds, "host": platform.node(), "python": sys.version.split()[0],
            "folder": str(folder)}
    echo("")
    echo(write_tables(folder, rows, title, meta, times))
    echo(f"table and records: {folder}")
    return exit_code(rows)


def _writer(log: IO[str]) -> Callable[[str], None]:
    def write(line: str) -> None:
        log.write(line + "\n")
        log.flush()

    return write
