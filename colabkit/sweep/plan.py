"""What a sweep will do: every run of its grid files' combinations and how they run (`plan`: a SweepPlan, its
runs and its RunOptions), and per run whether to run it, rerun it, keep it (ok record, matching fingerprint),
skip it (RUNNABLE_CHECKS), set its unreadable record aside, or show it running elsewhere (`decide`).
Nothing here runs or writes anything.

A plan is made once, where the sweep starts, and handed on as it is: to every runner in this process, and
as JSON (`SweepPlan.to_json`, `read_plan`), its options with it, where it crosses to another process or
machine (a Colab session, a stage of the device run): `python -m colabkit sweep --plan FILE` runs the runs it
holds as its options say, planned nowhere else.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from colabkit.colab.runtime import CLI_ACCELERATORS
from colabkit.errors import ColabkitError, GridError
from colabkit.suite import suite_root
from colabkit.sweep.expand import Combination, expand_all
from colabkit.sweep.grids import GridSpec, RunSettings, device_request, parse_overrides, read_grids
from colabkit.sweep.options import HtmlMode, KernelMode, PlanRequest, RunOptions

PLAN_FORMAT = 2  # the JSON form's version (2: with its options): a reader refuses another


class SweepPlan(Sequence[Combination]):
    """Every run a sweep asks for, in the order it runs them (each a Combination with its repeat and
    its RunSettings), the output folder they write into, and how they run (RunOptions)."""

    def __init__(self, runs: list[Combination], out: Path, options: RunOptions = RunOptions()) -> None:
        self.runs, self.out, self.options = runs, out, options

    def __getitem__(self, index: Any) -> Any:  # an int gives a Combination, a slice a list of them
        return self.runs[index]

    def __len__(self) -> int:
        return len(self.runs)

    def to_json(self) -> str:
        """The plan as JSON: its options, and every run as planned (a suite notebook named by its path in the
        suite, so that an installed colabkit elsewhere finds its own copy)."""
        def notebook(path: Path) -> str:
            try:
                return path.resolve().relative_to(suite_root().resolve()).as_posix()
            except ValueError:
                return str(path.resolve())

        runs = [{"notebook": notebook(run.notebook), "params": run.params, "slug": run.slug, "unused": run.unused,
                 "settings": dataclasses.asdict(run.settings), "repeat": run.repeat} for run in self.runs]
        return json.dumps({"colabkit_plan": PLAN_FORMAT, "out": str(self.out), "options": self.options.as_json(),
                           "runs": runs}, indent=1) + "\n"


def read_plan(path: str | Path, out: str | Path | None = None) -> SweepPlan:
    """The plan a file holds (SweepPlan.to_json), writing into `out` (default: the folder it was planned for);
    GridError in one line when the file is not such a plan."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data.get("colabkit_plan") != PLAN_FORMAT:
            raise ValueError(f"not a colabkit plan of format {PLAN_FORMAT}")
        runs = [Combination(suite_root() / run["notebook"], dict(run["params"]), str(run["slug"]),
                            device_request(run["params"]["device"]), dict(run.get("unused") or {}),
                            RunSettings(**run["settings"]), int(run["repeat"])) for run in data["runs"]]
        options = RunOptions.from_json(data["options"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ColabkitError) as error:
        raise GridError(f"--plan {path}: cannot be read as a sweep's plan ({error})") from None
    return SweepPlan(runs, Path(out if out is not None else data["out"]), options)


def plan(grid_paths: Sequence[str | Path | GridSpec], preset: str | None = None, device: str | None = None,
         overrides: dict[str, Any] | None = None, out: str | Path = "outputs", repeats: int | None = None, *,
         kernels: KernelMode | None = None, html: HtmlMode | None = None,
         options: RunOptions = RunOptions()) -> SweepPlan:
    """All runs of the grid files' combinations under `preset` and `overrides`, narrowed to `device`, to run as
    `options` say.

    `device` may list several, comma-separated ('cpu,gpu'); 'cpu' also takes 'cpu:2'. How each
    combination runs is decided here, once: `repeats`, `kernels` and `html` when given (the command
    line's), else what its preset says, else its grid file, else the defaults (RunSettings). The runs
    come in interleaved rounds (`in_rounds`). Every grid file is validated, and every problem of
    every file reported in one GridError, before any combination is returned, so a bad file runs nothing.
    """
    specs, wanted = read_grids(grid_paths, device, overrides or {})
    combinations = expand_all(specs, preset, wanted, overrides or {}, Path(out), repeats=repeats, kernels=kernels,
                              html=html)
    if wanted and not combinations:
        raise GridError(f"no combination runs on device {device!r}: the grid files list other devices")
    return SweepPlan(in_rounds(combinations), Path(out), options)


def plan_requested(request: PlanRequest, options: RunOptions = RunOptions(), out: Path | None = None) -> SweepPlan:
    """The plan `request` asks for, to run as `options` say, writing into `out` (default outputs/<preset>). On Colab
    (`options.colab`) its runs are those of the accelerators' device kinds: each takes its share (its kind's runs)."""
    device = request.device
    if options.colab:
        if device:
            raise ColabkitError("--colab runs each accelerator's combinations on its own runtime: drop --device")
        device = ",".join(sorted({CLI_ACCELERATORS[name][0] for name in options.colab}))
    return plan(request.grids, request.preset, device, parse_overrides(request.overrides),
                out or Path("outputs") / (request.preset or "default"), request.repeats, kernels=request.kernels,
                html=request.html, options=options)


def in_rounds(combinations: list[Combination]) -> list[Combination]:
    """Each combination as its `settings.repeats` runs (repeat 1, 2, ...), in rounds: per device (in the
    order the devices come), round 1 of every combination, then round 2, and so on, so that a drift of
    the host falls on every combination alike rather than on the last ones."""
    by_device: dict[str, list[Combination]] = {}
    for combination in combinations:
        by_device.setdefault(combination.device, []).append(combination)
    ordered = []
    for group in by_device.values():
        for repeat in range(1, max(combination.settings.repeats for combination in group) + 1):
            ordered += [combination.with_repeat(repeat) for combination in group
                        if repeat <= combination.settings.repeats]
    return ordered
