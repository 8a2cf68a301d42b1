"""What a sweep will do: every run of its grid files' combinations and how they run (`plan`: a SweepPlan, its
runs and its RunOptions), and per run whether to run it, rerun it, keep it (ok record, matching fingerprint),
skip it (RUNNABLE_CHECKS), set its unreadable record aside, or show it running elsewhere (`decide`).
Nothing here runs or writes anything.

A plan is made once, where the sweep starts, and handed on as it is: to every runner in this process, and
as JSON (`SweepPlan.to_json`, `read_plan`), its options with it, where it crosses to another process or
machine (a Colab session, a stage of the device run, or a user's `sweep GRID --dry-run --save-plan FILE`):
`python -m colabkit sweep --plan FILE` runs the runs it holds as its options say, planned nowhere else.
A plan file is read as strictly as a grid file (`read_plan`): each run's values, settings and rules go through
the grid's own checks, its notebook must be one of the suite's and its slug a name, before anything runs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from colabkit.colab.runtime import CLI_ACCELERATORS
from colabkit.errors import ColabkitError, GridError
from colabkit.experiments import Parameter
from colabkit.io import inside
from colabkit.suite import suite_root
from colabkit.sweep.expand import SLUG, Combination, duplicate_problems, expand, expand_all, rules_broken
from colabkit.sweep.grids import (GridSpec, Layer, RunSettings, check_layer, notebook_parameters, parse_overrides,
                                  read_grids, read_settings)
from colabkit.sweep.options import HtmlMode, KernelMode, PlanRequest, RunOptions

PLAN_FORMAT = 2  # the JSON form's version (2: with its options): a reader refuses another
PLAN_KEYS = ("colabkit_plan", "out", "options", "runs")
RUN_KEYS = ("notebook", "params", "slug", "unused", "settings", "repeat")
NOTEBOOKS = "notebooks"  # a plan's notebooks: the suite's own, named by their path in it (notebooks/NAME.ipynb)
AGAIN = "plan it again with this colabkit: sweep GRID ... --dry-run --save-plan FILE"


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
        """The plan as JSON: its options, and every run as planned, its notebook named by its path in the suite
        (notebooks/NAME.ipynb), so that a colabkit elsewhere finds its own copy; GridError (one line) for a notebook
        outside the suite's notebooks/, which no plan file can name."""
        def notebook(path: Path) -> str:
            if inside(suite_root() / NOTEBOOKS, path.name, name=True) != path.resolve():
                raise GridError(f"notebook {path} is not one of the suite's ({suite_root() / NOTEBOOKS}): a plan file "
                                "names only those; sweep its grid file here instead")
            return f"{NOTEBOOKS}/{path.name}"

        runs = [{"notebook": notebook(run.notebook), "params": run.params, "slug": run.slug, "unused": run.unused,
                 "settings": dataclasses.asdict(run.settings), "repeat": run.repeat} for run in self.runs]
        return json.dumps({"colabkit_plan": PLAN_FORMAT, "out": str(self.out), "options": self.options.as_json(),
                           "runs": runs}, indent=1) + "\n"


def read_plan(path: str | Path, out: str | Path | None = None) -> SweepPlan:
    """The plan a file holds (SweepPlan.to_json), writing into `out` (default: the folder it was planned for), checked
    as strictly as a grid file before anything runs: its form, its options (RunOptions.from_json), and each run as a
    one-run grid is (`plan_runs`). GridError, one line per problem (a problem several runs share named once)."""
    where = f"--plan {path}"

    def refuse_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [key for key, _ in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError(f"the key {next(key for key in keys if keys.count(key) > 1)!r} is given twice")
        return dict(pairs)

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a number JSON holds")

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"), object_pairs_hook=refuse_repeats,
                          parse_constant=no_constant)
    except (OSError, ValueError) as error:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise GridError(f"cannot be read as a sweep's plan ({error})", where) from None
    if not isinstance(data, dict) or "colabkit_plan" not in data:
        raise GridError(f"not a colabkit plan (no `colabkit_plan`): {AGAIN}", where)
    if data["colabkit_plan"] != PLAN_FORMAT:
        raise GridError(f"a plan of format {data['colabkit_plan']!r}, from another colabkit; this one reads format "
                        f"{PLAN_FORMAT}: {AGAIN}", where)
    problems = [f"unknown key `{key}`; a plan holds {', '.join(PLAN_KEYS)}" for key in data if key not in PLAN_KEYS]
    problems += [f"no `{key}`" for key in PLAN_KEYS if key not in data]
    if problems:
        raise GridError(problems, where)
    if not isinstance(data["out"], str) or not data["out"]:
        problems.append(f"out: {data['out']!r}: expected the folder it writes into")
    options = RunOptions()
    try:
        options = RunOptions.from_json(data["options"])
    except (ColabkitError, TypeError, ValueError, AttributeError) as error:
        problems.append(f"options: {error}")
    runs = plan_runs(data["runs"], Path(out if out is not None else str(data["out"])), problems)
    if problems:
        raise GridError(problems, where)
    return SweepPlan(runs, Path(out if out is not None else data["out"]), options)


def plan_runs(entries: Any, out: Path, problems: list[str]) -> list[Combination]:
    """A plan file's runs, each checked as a one-run grid of its notebook would be, by the grid's own checks: its
    notebook one of the suite's (colabkit.io.inside), its `params` (with `unused`) as a grid's fixed values
    (check_layer: declared, in range, a device), its `settings` from their vocabularies (read_settings), its
    experiment's rules (rules_broken), its slug a name (expand.SLUG), its run number a whole number >= 1; then none
    runs twice or writes another's files (duplicate_problems), nor outside `out`. Appends to `problems`, each problem
    that several runs share once."""
    if not isinstance(entries, list) or not entries:
        problems.append(f"runs: {entries!r}: expected a list of runs (a plan that runs nothing is refused)")
        return []
    found: dict[str, list[int]] = {}
    notebooks: dict[Path, tuple[dict[str, Parameter], Any, list[str]]] = {}
    runs = []
    for index, entry in enumerate(entries, start=1):
        mine: list[str] = []
        run = _plan_run(entry, notebooks, mine)
        if run is not None:
            runs.append(run)
        for problem in mine:
            found.setdefault(problem, []).append(index)
    for repeat in sorted({run.repeat for run in runs}):
        for problem in duplicate_problems([run for run in runs if run.repeat == repeat], out):
            found.setdefault(problem, [])
    for run in runs:
        if inside(out, run.output_base(out).relative_to(out)) is None:
            found.setdefault(f"{run.label}: its files would land outside {out}", [])
    for problem, indexes in found.items():
        more = f" (and {len(indexes) - 1} more run(s) alike)" if len(indexes) > 1 else ""
        problems.append(f"run {indexes[0]}: {problem}{more}" if indexes else problem)
    return runs


def _plan_run(entry: Any, notebooks: dict[Path, tuple[dict[str, Parameter], Any, list[str]]],
              problems: list[str]) -> Combination | None:
    """One run of a plan file as a Combination, or None with its problems appended (plan_runs)."""
    if not isinstance(entry, dict):
        problems.append(f"{entry!r}: expected a run (a mapping of {', '.join(RUN_KEYS)})")
        return None
    problems += [f"unknown key `{key}`; a run holds {', '.join(RUN_KEYS)}" for key in entry if key not in RUN_KEYS]
    name, params, unused, settings = (entry.get(key) for key in ("notebook", "params", "unused", "settings"))
    if not isinstance(name, str) or not name:
        problems.append(f"notebook: {name!r}: expected the suite's notebooks/NAME.ipynb")
        return None
    notebook = inside(suite_root(), name)  # notebooks/NAME.ipynb (or this suite's own path of it, absolute)
    if notebook is None or notebook.parent != (suite_root() / NOTEBOOKS).resolve() or notebook.suffix != ".ipynb":
        problems.append(f"notebook {name!r} is not one of the suite's ({suite_root() / NOTEBOOKS})"
                        + (f": a plan made in another checkout? {AGAIN}" if Path(name).is_absolute() else ""))
        return None
    if not notebook.is_file():
        problems.append(f"notebook {name!r}: no such notebook in {suite_root() / NOTEBOOKS}: {AGAIN}")
        return None
    if notebook not in notebooks:  # its parameters cell read once, however many runs it has
        read: list[str] = []
        notebooks[notebook] = (*notebook_parameters(notebook, read), read)
    parameters, experiment, read = notebooks[notebook]
    problems += read
    if not isinstance(params, dict) or not isinstance(unused or {}, dict) or not isinstance(settings or {}, dict):
        problems.append("params, unused and settings: expected mappings of name -> value")
        return None
    if "device" not in params:
        problems.append("params: no `device`")
    known = [setting.name for setting in dataclasses.fields(RunSettings)]
    problems += [f"settings: unknown key `{key}`; settings are {', '.join(known)}" for key in settings or {}
                 if key not in known]
    before = len(problems)
    said = read_settings(settings or {}, "settings.", problems)
    if said["bottlenecks"] == RunSettings.bottlenecks:
        said["bottlenecks"] = None  # the default, which a plan writes for every run, asks nothing of its notebook
    layer = Layer("", fixed={**(unused or {}), **params}, **said, fixed_as="params")
    check_layer(layer, parameters, name, problems)
    slug, repeat = entry.get("slug"), entry.get("repeat")
    if not isinstance(slug, str) or not SLUG.fullmatch(slug):
        problems.append(f"slug {slug!r}: expected a name as the sweep makes them (letters, digits, '.', '_' and '-', "
                        "no '.' first): it names the run's files, never a path")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        problems.append(f"repeat = {repeat!r}: expected a whole number >= 1 (which run of its combination)")
    if len(problems) > before or "device" not in params:
        return None
    spec = GridSpec(Path(name), notebook, layer, {}, parameters=parameters, experiment=experiment)
    [run] = expand(spec)
    problems += [problem.removeprefix(f"{run.label}: ") for problem in rules_broken(spec, [run])]
    return dataclasses.replace(run, slug=slug, repeat=repeat)


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
