"""The device run's stages (gpu-check, every experiment's device preset through the sweep, the report) and
their time.

Each stage runs as a child process (`python -m colabkit ...`) with its own time budget, under one deadline
for the whole run (9 minutes from the start of `./run.sh on-device`, the install included: a device call
runs 10 at most). A stage is given its budget or what is left before the closing stages (report, zip,
summary), whichever is less; one that would get under MIN_STAGE_S is skipped with a line saying so; a sweep
stopped at its budget (SIGTERM: finished runs are kept, docs/sweep.md) says how far it got. The sweep runs
its runs in rounds (every combination's first run, then the second, ...), so a stage stopped early still
has one run of each combination. Nothing here changes the GPU's clocks, power limit or modes.

On a machine whose nvidia-smi lists no GPU the same stages run the `device_smoke` presets on the CPU: the
rehearsal (`./run.sh device-rehearsal`).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from colabkit.data.common import PACKAGE_FILES_ENV
from colabkit.errors import GridError
from colabkit.io import write_atomic
from colabkit.suite import suite_path
from colabkit.sweep.plan import plan

DEADLINE_S = 540.0  # 9 minutes: a device call's command runs 10 at most
CLOSING_S = 45.0  # kept back for the report, the zip and the summary
REPORT_BUDGET_S = 40.0  # its nominal share: it is given whatever is left but ZIP_S
ZIP_S = 10.0  # the zip and the summary
MIN_STAGE_S = 20.0  # a stage that would get less is skipped: it could not finish one round
STOP_GRACE_S = 25.0  # after SIGTERM, the sweep's time to finish its records and stop its kernels
GPU_PRESET, CPU_PRESET = "device", "device_smoke"
# (stage, grid file, budget in seconds on one H100); docs/device.md gives the reasoning. In this order: the
# headline experiments first, the slow recurrent ones where they fit.
SWEEPS = (("matmul", "matmul_tflops", 80.0), ("cnn", "cnn_mnist", 110.0), ("paradnn", "paradnn", 100.0),
          ("dblstm", "dblstm_har", 45.0), ("weather", "timeseries_rnn", 45.0))
GPU_CHECK_BUDGET_S = 90.0  # the JAX and PyTorch clocks: a worker each, n = 8192, 3 rounds


@dataclass(frozen=True)
class Stage:
    """One child process of the run: its name, budget and command line."""

    name: str
    budget_s: float
    command: tuple[str, ...]
    refused: str = ""  # why its plan was refused: it fails without running


def colabkit_command(*arguments: str) -> tuple[str, ...]:
    """`python -m colabkit ARGUMENTS` on this Python (the image's, with the pack on its path)."""
    return (sys.executable, "-m", "colabkit", *arguments)


@dataclass
class StageResult:
    """How a stage ended: ok, failed (its exit status), stopped (at its budget), or skipped (for time)."""

    name: str
    status: str
    seconds: float
    budget_s: float
    exit_code: int | None = None
    note: str = ""

    def line(self) -> str:
        said = f"{self.status}, {self.seconds:.0f} s of {self.budget_s:.0f} s"
        if self.exit_code not in (None, 0):
            said += f", exit {self.exit_code}"
        return f"stage {self.name}: {said}" + (f" ({self.note})" if self.note else "")


def stage_list(out: Path, on_gpu: bool) -> list[Stage]:
    """The stages before the report: gpu-check, then each experiment's device preset (CPU: device_smoke), each
    planned here, once, before any stage starts, and handed to its sweep as JSON (`sweep --plan`, under
    out/plans/); a preset the plan refuses is that stage's failure, said before the others spend their time."""
    preset, device = (GPU_PRESET, "gpu") if on_gpu else (CPU_PRESET, "cpu")
    rehearsal = () if on_gpu else ("--rehearse-on-cpu",)  # the clocks' code on the CPU: JAX's and PyTorch's
    stages = [Stage("gpu-check", GPU_CHECK_BUDGET_S, colabkit_command("gpu-check", "--fast", *rehearsal, "--out",
                                                                     str(out / "gpu-check")))]
    for name, grid, budget in SWEEPS:
        try:
            runs = plan([suite_path(f"parameters/{grid}.yaml")], preset, device, {}, out / "results", html="none")
        except GridError as error:
            stages.append(Stage(name, budget, (), refused=str(error).splitlines()[0]))
            continue
        planned = out / "plans" / f"{name}.json"
        planned.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(planned, runs.to_json())
        stages.append(Stage(name, budget, colabkit_command("sweep", "--plan", str(planned))))
    return stages


def stage_environment(pack: Path, out: Path) -> dict[str, str]:
    """The stages' environment: the pack's package files, a data cache of its own holding the pack's datasets."""
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if (pack / "package-files").is_dir():
        environment[PACKAGE_FILES_ENV] = str((pack / "package-files").resolve())
    cache = out / "data-cache"  # written to by the loaders (parsed arrays): never the pack itself
    cache.mkdir(parents=True, exist_ok=True)
    for dataset in sorted((pack / "data").glob("*")) if (pack / "data").is_dir() else []:
        if not (cache / dataset.name).exists():
            shutil.copy2(dataset, cache / dataset.name)
    environment["COLABKIT_DATA"] = str(cache.resolve())
    return environment


def run_stage(stage: Stage, allowed_s: float, log: Path, environment: dict[str, str]) -> StageResult:
    """Run `stage` for at most `allowed_s`, its output to `log`; past it, SIGTERM (then a kill after the grace)."""
    start = time.monotonic()
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as stream:
        process = subprocess.Popen(list(stage.command), stdout=stream,
                                   stderr=subprocess.STDOUT, env=environment, start_new_session=True)
        try:
            code = process.wait(timeout=allowed_s)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGTERM)
            try:
                code = process.wait(timeout=STOP_GRACE_S)
                note = f"stopped at {allowed_s:.0f} s: the runs finished before are kept"
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                code = process.wait()
                note = f"stopped at {allowed_s:.0f} s and killed after {STOP_GRACE_S:.0f} s more"
            return StageResult(stage.name, "stopped", time.monotonic() - start, stage.budget_s, code, note)
    status = "ok" if code == 0 else "failed"
    return StageResult(stage.name, status, time.monotonic() - start, stage.budget_s, code,
                       "" if code == 0 else f"see {log}")


def left_s(started: float, deadline_s: float) -> float:
    return deadline_s - (time.time() - started)


def run_stages(stages: list[Stage], out: Path, environment: dict[str, str], started: float, deadline_s: float,
               echo: Callable[[str], None]) -> list[StageResult]:
    """Each stage in turn within the deadline, less CLOSING_S for the closing stages; a line per stage. A stage may
    use its budget and what the stages before it left of theirs: the later stages' budgets stay theirs."""
    results = []
    saved = 0.0
    for stage in stages:
        room = left_s(started, deadline_s) - CLOSING_S
        if stage.refused:
            result = StageResult(stage.name, "failed", 0.0, stage.budget_s, note=f"its plan was refused: {stage.refused}")
        elif room < MIN_STAGE_S:
            result = StageResult(stage.name, "skipped", 0.0, stage.budget_s,
                                 note=f"skipped for time: {max(room, 0):.0f} s left before the closing stages, "
                                      f"under the {MIN_STAGE_S:.0f} s a stage needs")
        else:
            allowed = min(room, stage.budget_s + saved)
            echo(f"stage {stage.name}: started ({allowed:.0f} s at most)")
            result = run_stage(stage, allowed, out / "logs" / f"{stage.name}.log", environment)
        saved = max(0.0, stage.budget_s + saved - result.seconds)
        echo(result.line())
        results.append(result)
    return results
