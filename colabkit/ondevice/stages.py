"""The device run's table of stages (gpu-check, every experiment's device preset through the sweep, the report), each
with its time budget, run by the stage runner (colabkit.stages) each in a child process of its own, under one
deadline for the whole run (9 minutes from the start of `./run.sh on-device`, the install included: a device call
runs 10 at most). A stage is given its budget and what the stages before it left, never more than what is left
before the closing stages (report, zip, summary); one that would get under MIN_STAGE_S is skipped with a line
saying so; a sweep stopped at its budget (SIGTERM: finished runs are kept, docs/sweep.md) says how far it got. The
sweep runs its runs in rounds (every combination's first run, then the second, ...), so a stage stopped early
still has one run of each combination. Nothing here changes the GPU's clocks, power limit or modes.

On a machine whose nvidia-smi lists no GPU the same stages run the `device_smoke` presets on the CPU: the
rehearsal (`./run.sh device-rehearsal`).
"""

from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path
from typing import NoReturn

from colabkit.data.common import PACKAGE_FILES_ENV
from colabkit.errors import GridError
from colabkit.gpu_check import run_check
from colabkit.io import write_atomic
from colabkit.stages import Stage
from colabkit.suite import suite_path
from colabkit.sweep.command import sweep_plan_file
from colabkit.sweep.plan import plan

DEADLINE_S = 540.0  # 9 minutes: a device call's command runs 10 at most
CLOSING_S = 45.0  # kept back for the report, the zip and the summary
REPORT_BUDGET_S = 40.0  # its nominal share: it is given whatever is left but ZIP_S
ZIP_S = 10.0  # the zip and the summary
GPU_PRESET, CPU_PRESET = "device", "device_smoke"
# (stage, grid file, budget in seconds on one H100); docs/device.md gives the reasoning. In this order: the
# headline experiments first, the slow recurrent ones where they fit.
SWEEPS = (("matmul", "matmul_tflops", 80.0), ("cnn", "cnn_mnist", 110.0), ("paradnn", "paradnn", 100.0),
          ("dblstm", "dblstm_har", 45.0), ("weather", "timeseries_rnn", 45.0))
GPU_CHECK_BUDGET_S = 90.0  # the JAX and PyTorch clocks: a worker each, n = 8192, 3 rounds


def refused(reason: str) -> NoReturn:
    """A stage whose plan was refused: its one line, and its failure."""
    raise GridError(f"its plan was refused: {reason}")


def stage_list(out: Path, on_gpu: bool) -> list[Stage]:
    """The stages before the report: gpu-check's fast rows (on the CPU, its rehearsal of the JAX and PyTorch clocks),
    then each experiment's device preset (CPU: device_smoke), each planned here, once, before any stage starts, and
    handed to its sweep as JSON (`sweep --plan`, under out/plans/); a preset the plan refuses is that stage's
    failure, said in its log before the others spend their time."""
    preset, device = (GPU_PRESET, "gpu") if on_gpu else (CPU_PRESET, "cpu")
    stages = [Stage("gpu-check", GPU_CHECK_BUDGET_S, partial(run_check, out / "gpu-check", fast=True, on_cpu=not on_gpu))]
    for name, grid, budget in SWEEPS:
        try:
            runs = plan([suite_path(f"parameters/{grid}.yaml")], preset, device, {}, out / "results", html="none")
        except GridError as error:
            stages.append(Stage(name, budget, partial(refused, str(error).splitlines()[0])))
            continue
        planned = out / "plans" / f"{name}.json"
        planned.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(planned, runs.to_json())
        stages.append(Stage(name, budget, partial(sweep_plan_file, planned)))
    return stages


def stage_environment(pack: Path, out: Path) -> dict[str, str]:
    """What the stages' environment adds: the pack's package files, a data cache of its own holding the pack's
    datasets."""
    environment = {"PYTHONUNBUFFERED": "1"}
    if (pack / "package-files").is_dir():
        environment[PACKAGE_FILES_ENV] = str((pack / "package-files").resolve())
    cache = out / "data-cache"  # written to by the loaders (parsed arrays): never the pack itself
    cache.mkdir(parents=True, exist_ok=True)
    for dataset in sorted((pack / "data").glob("*")) if (pack / "data").is_dir() else []:
        if not (cache / dataset.name).exists():
            shutil.copy2(dataset, cache / dataset.name)
    environment["COLABKIT_DATA"] = str(cache.resolve())
    return environment
