"""The prepared run (`python -m colabkit.ondevice run`, started by `./run.sh on-device` once the pre-flight has
passed and the pack is installed): the stages in their time (stages.py, run by colabkit.stages), then the closing
(bundle.py): the zip and the summary, printed whatever happened before.

Exit status: 0 when no stage failed and something was measured; 1 when a stage failed, nothing at all was
measured (every stage skipped or stopped before its first run), or the zip could not be written or passed its
limit. A stage skipped or stopped for time is not a failure by itself.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from colabkit.device.probes import nvidia_smi
from colabkit.ondevice.bundle import Bundle, write_bundle
from colabkit.ondevice.preflight import PREFLIGHT
from colabkit.ondevice.stages import (
    CLOSING_S,
    CPU_PRESET,
    DEADLINE_S,
    GPU_PRESET,
    REPORT_BUDGET_S,
    ZIP_S,
    stage_environment,
    stage_list,
)
from colabkit.report import build_report
from colabkit.stages import Stage, StageResult, run_stages


def read_preflight(out: Path) -> dict:
    """The pre-flight's findings in the run's folder (none where the run was started without it)."""
    try:
        return json.loads((out / PREFLIGHT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def run_on_device(pack: Path, out: Path, started: float, deadline_s: float = DEADLINE_S,
                  echo: Callable[[str], None] = print, zip_to: Path | None = None) -> int:
    """The whole run after the install; its exit status (above)."""
    out.mkdir(parents=True, exist_ok=True)
    found = read_preflight(out)
    gpus = nvidia_smi()
    on_gpu = bool(gpus)
    left = started + deadline_s - time.time()
    if on_gpu:
        echo(f"on-device: {gpus[0]['name']} x{len(gpus)}, driver {gpus[0]['driver_version']}; the '{GPU_PRESET}' "
             f"presets; {left:.0f} s left of {deadline_s:.0f} s")
    else:
        echo(f"on-device: no NVIDIA GPU here (nvidia-smi lists none): the CPU rehearsal, the '{CPU_PRESET}' presets "
             f"on the CPU; {left:.0f} s left of {deadline_s:.0f} s")
    run = partial(run_stages, echo=echo, deadline=started + deadline_s, logs=out / "logs",
                  environment=stage_environment(pack, out))
    results = run(stage_list(out, on_gpu), reserve_s=CLOSING_S)
    if not (out / "results").is_dir():
        results.append(StageResult("report", "skipped", 0.0, REPORT_BUDGET_S, note="no results to report"))
        echo(results[-1].line())
    else:  # the report runs even when late (it is the point), with the time left but the zip's
        report = partial(build_report, [str(out / "results")], str(out / "report"))
        results += run([Stage("report", REPORT_BUDGET_S, report, required=True)], reserve_s=ZIP_S)
    bundle = write_bundle(Bundle(out, zip_to or out, gpus, pack, results, started, on_gpu, found))
    for line in bundle.summary:
        echo(line)
    failed = any(result.status == "failed" for result in results)
    return 1 if failed or not bundle.measured or not bundle.within_limit else 0
