"""`python -m colabkit gpu-check`: run every stage, write everything under one folder, print one table.

Where nvidia-smi lists no GPU it prints NO_GPU_LINE and returns 0: there is nothing to check, unless asked to
rehearse on the CPU (`on_cpu`, the device run's rehearsal: the JAX and PyTorch clocks on the CPU, each row RAN,
shown and not judged). Else
it writes, under OUT/<UTC time>/: the check's grid files, the notebooks' runs and records, the
report, the workers' and the sweep's logs, and the table as table.txt, table.md and table.json. It
returns 0 only if no row FAILED.
"""

from __future__ import annotations

import datetime as dt
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from colabkit.device.probes import nvidia_smi, nvidia_smi_query
from colabkit.errors import OutputFolderError
from colabkit.gpu_check.rows import NO_GPU_LINE, Row, exit_code, markdown_table, table_payload, text_table
from colabkit.gpu_check.rules import GpuFacts, Unavailable, failed
from colabkit.gpu_check.stages import (
    Context,
    Stage,
    backend_stage,
    bandwidth_stage,
    device_stage,
    matmul_stage,
    multi_gpu_stage,
    sweep_stage,
)
from colabkit.gpu_check.training import train_stage
from colabkit.io import write_atomic

DEFAULT_OUT = Path("outputs") / "gpu-check"
DEFAULT_ROUNDS = 3  # interleaved rounds of the agreement rows (medians of 3)
# Seconds per stage on one data-centre GPU (A100/H100 class); docs/benchmarks.md lists them. Their
# sum on one GPU is ONE_GPU_BUDGET_S, under the 8 minutes; gpu:2 adds its own on 2+ GPUs.
BUDGET_S = {"device": 20.0, "bandwidth": 10.0, "matmul": 45.0, "train-cnn": 90.0, "train-fc": 100.0,
            "sweep": 110.0, "multi-gpu": 60.0, "jax": 40.0, "torch": 40.0}
ONE_GPU_BUDGET_S = sum(seconds for stage, seconds in BUDGET_S.items() if stage != "multi-gpu")
FAST_STAGES = ("device", "bandwidth", "matmul")  # and the backends' clocks, without their notebook
StageTimes = dict[str, tuple[float, float]]  # stage -> (seconds it took, its budget)


def plan(fast: bool = False, gpus: int = 1) -> list[Stage]:
    """The stages in the order they run; `fast`: the ones that run no notebook (about two minutes): TensorFlow's
    device, bandwidth and matmul rows, and the clock on JAX and on PyTorch."""
    stages = [
        Stage("device", BUDGET_S["device"], ("device", "peaks"), device_stage),
        Stage("bandwidth", BUDGET_S["bandwidth"], ("bandwidth",), bandwidth_stage),
        Stage("matmul", BUDGET_S["matmul"], ("clock tensorflow", "matmul float32", "matmul tf32", "matmul bfloat16",
                                             "matmul float16"), matmul_stage),
        Stage("train-cnn", BUDGET_S["train-cnn"], ("cnn xla", "cnn no-xla", "cnn mixed"),
              lambda ctx: train_stage(ctx, "cnn")),
        Stage("train-fc", BUDGET_S["train-fc"], ("fc xla", "fc no-xla", "fc mixed", "nvml energy"),
              lambda ctx: train_stage(ctx, "fc")),
        Stage("sweep", BUDGET_S["sweep"], ("sweep gpu",), sweep_stage),
        Stage("multi-gpu", BUDGET_S["multi-gpu"] if gpus > 1 else 0.0, ("sweep gpu:2",), multi_gpu_stage),
        Stage("jax", BUDGET_S["jax"], ("clock jax", "backend jax"), lambda ctx: backend_stage(ctx, "jax")),
        Stage("torch", BUDGET_S["torch"], ("clock torch", "backend torch"), lambda ctx: backend_stage(ctx, "torch")),
    ]
    if not fast:
        return stages
    return [stage for stage in stages if stage.name in FAST_STAGES] + clock_stages()


def clock_stages() -> list[Stage]:
    """The clock on JAX and on PyTorch, without their notebook: the fast check's last stages, and the whole of
    the CPU rehearsal."""
    return [Stage(backend, BUDGET_S[backend], (f"clock {backend}",),
                  lambda ctx, backend=backend: backend_stage(ctx, backend, notebook=False)) for backend in ("jax", "torch")]


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


def run_stage(stage: Stage, ctx: Context) -> list[Row]:
    """The stage's rows; a stage that raises fails each of its rows with the error (never a traceback
    in place of the table). A TensorFlow worker that failed to start fails every TensorFlow row."""
    try:
        return [row.in_stage(stage.name) for row in stage.run(ctx)]
    except Exception as error:  # noqa: BLE001 - the table must come out whatever a stage did
        reason = f"{type(error).__name__}: {error}"
        if stage.name == "device" and ctx.tf_reason is None:
            ctx.tf_reason = Unavailable(f"the TensorFlow worker failed: {reason}", failed=True)
        return [failed(name, "-", "the stage finished", reason).in_stage(stage.name) for name in stage.rows]


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
    stages = clock_stages() if on_cpu else plan(fast, facts.count)
    with open(folder / "logs" / "sweep.log", "a", encoding="utf-8") as log:
        rows, times = _run_stages(stages, Context(folder, facts, rounds, echo, _writer(log), on_cpu=on_cpu), echo)
    title = (f"gpu-check {started:%Y-%m-%d %H:%M} UTC on " + (where if on_cpu else f"{facts.smi_names[0]} x{facts.count}")
             + (" (fast)" if fast and not on_cpu else ""))
    meta = {"date": started.isoformat(), "gpus": list(facts.smi_names), "driver": facts.driver, "fast": fast,
            "on_cpu": on_cpu, "rounds": rounds, "host": platform.node(), "python": sys.version.split()[0],
            "folder": str(folder)}
    write_atomic(folder / "table.txt", text_table(rows, title, times) + "\n")
    write_atomic(folder / "table.md", markdown_table(rows, title, times))
    write_atomic(folder / "table.json", json.dumps(table_payload(rows, meta, times), indent=2, default=str) + "\n")
    echo("")
    echo(text_table(rows, title, times))
    echo(f"table and records: {folder}")
    return exit_code(rows)


def _writer(log: IO[str]) -> Callable[[str], None]:
    def write(line: str) -> None:
        log.write(line + "\n")
        log.flush()

    return write


def _run_stages(stages: list[Stage], ctx: Context, echo: Callable[[str], None]) -> tuple[list[Row], StageTimes]:
    rows: list[Row] = []
    times: StageTimes = {}
    try:
        for stage in stages:
            echo(f"{stage.name} (budget {stage.budget_s:.0f} s) ...")
            start = time.perf_counter()
            stage_rows = run_stage(stage, ctx)
            times[stage.name] = (time.perf_counter() - start, stage.budget_s)
            for row in stage_rows:
                echo(f"  {row.verdict} {row.name}: {row.figure}" + (f" ({row.reason})" if row.reason else ""))
            rows += stage_rows
            if stage.name == "train-fc":
                ctx.close()  # the TensorFlow worker's last stage: free its GPU memory for the sweep
    finally:
        ctx.close()
    return rows, times
