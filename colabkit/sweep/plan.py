"""What a sweep will do: every run of its grid files' combinations with how it runs (`plan`: a
SweepPlan), and per run whether to run it, rerun it, keep it (ok record, matching fingerprint), skip
it (RUNNABLE_CHECKS), set its unreadable record aside, or show it running elsewhere (`decide`).
Nothing here runs or writes anything.

A plan is made once, where the sweep starts, and handed on as it is: to every runner in this process, and
as JSON (`SweepPlan.to_json`, `read_plan`) where it crosses to another process or machine (a Colab session,
a stage of the device run): `python -m colabkit sweep --plan FILE` runs the runs it holds, planned nowhere else.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from colabkit.errors import GridError
from colabkit.suite import suite_root
from colabkit.sweep.expand import Combination, expand_all
from colabkit.sweep.grids import GridSpec, RunSettings, device_request, grid_spec, parse_overrides, read_grids
from colabkit.sweep.options import HtmlMode, KernelMode, PlanRequest

PLAN_FORMAT = 1  # the JSON form's version: a reader refuses another


class SweepPlan(Sequence[Combination]):
    """Every run a sweep asks for, in the order it runs them (each a Combination with its repeat and
    its RunSettings), and the output folder they write into."""

    def __init__(self, runs: list[Combination], out: Path) -> None:
        self.runs, self.out = runs, out

    def __getitem__(self, index: Any) -> Any:  # an int gives a Combination, a slice a list of them
        return self.runs[index]

    def __len__(self) -> int:
        return len(self.runs)

    def to_json(self) -> str:
        """The plan as JSON, every run as planned (a suite notebook named by its path in the suite, so that
        an installed colabkit elsewhere finds its own copy)."""
        def notebook(path: Path) -> str:
            try:
                return path.resolve().relative_to(suite_root().resolve()).as_posix()
            except ValueError:
                return str(path.resolve())

        runs = [{"notebook": notebook(run.notebook), "params": run.params, "slug": run.slug, "unused": run.unused,
                 "settings": dataclasses.asdict(run.settings), "repeat": run.repeat} for run in self.runs]
        return json.dumps({"colabkit_plan": PLAN_FORMAT, "out": str(self.out), "runs": runs}, indent=1) + "\n"


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
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise GridError(f"--plan {path}: cannot be read as a sweep's plan ({error})") from None
    return SweepPlan(runs, Path(out if out is not None else data["out"]))


def plan(grid_paths: Sequence[str | Path | GridSpec], preset: str | None = None, device: str | None = None,
         overrides: dict[str, Any] | None = None, out: str | Path = "outputs", repeats: int | None = None, *,
         kernels: KernelMode | None = None, html: HtmlMode | None = None) -> SweepPlan:
    """All runs of the grid files' combinations under `preset` and `overrides`, narrowed to `device`.

    `device` may list several, comma-separated ('cpu,gpu'); 'cpu' also takes 'cpu:2'. How each
    combination runs is decided here, once: `repeats`, `kernels` and `html` when given (the command
    line's), else what its preset says, else its grid file, else the defaults (RunSettings). The runs
    come in interleaved rounds (`interleave`). Every grid file is validated, and every problem of
    every file reported in one GridError, before any combination is returned, so a bad file runs nothing.
    """
    specs, wanted = read_grids(grid_paths, device, overrides or {})
    combinations = expand_all(specs, preset, wanted, overrides or {}, Path(out), repeats=repeats, kernels=kernels,
                              html=html)
    if wanted and not combinations:
        raise GridError(f"no combination runs on device {device!r}: the grid files list other devices")
    return SweepPlan(interleave(combinations), Path(out))


def plan_notebook(notebook: str, params: Mapping[str, Any], out: Path, html: HtmlMode = "none") -> SweepPlan:
    """One run of the suite's `notebook` with `params` (`device` among them), in a fresh kernel, its values and
    rules checked against its declaration as a grid file's are (a grid made in memory: no file is written)."""
    grid = {"notebook": f"notebooks/{notebook}.ipynb", "grid": {"device": [params["device"]]},
            "fixed": {key: value for key, value in params.items() if key != "device"}}
    return plan([grid_spec(grid, suite_root() / "parameters" / f"{notebook}.yaml")], out=out, repeats=1,
                kernels="fresh", html=html)


def plan_requested(request: PlanRequest, out: Path | None = None, device: str | None = None) -> SweepPlan:
    """The plan `request` asks for (`device`, where given, instead of its own), writing into `out` (default
    outputs/<preset>)."""
    return plan(request.grids, request.preset, device or request.device, parse_overrides(request.overrides),
                out or Path("outputs") / (request.preset or "default"), request.repeats, kernels=request.kernels,
                html=request.html)


def interleave(combinations: list[Combination]) -> list[Combination]:
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


