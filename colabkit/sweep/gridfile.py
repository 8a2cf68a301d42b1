"""Parameter grid files (`parameters/*.yaml`): read and validate one, every problem at once.

Keys (docs/sweep.md, "Grid files"): `notebook` (required), `description`, `grid`, `zip`, `fixed`, the
run settings `repeats`, `kernels`, `html`, `bottlenecks`, and `presets`; colabkit.sweep.layers
combines file, preset and command line. Before anything runs, every problem is reported, one line
each: unparsable YAML (line and column), unknown keys, a missing notebook, undeclared parameters,
values out of range, empty lists, unequal zips, duplicates, unknown devices. Parameters come from
the notebook's experiment declaration (colabkit.sweep.parameters). YAML's safe loader only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from colabkit.errors import GridError, UnknownDeviceError
from colabkit.experiments import Experiment, Parameter, find
from colabkit.suite import suite_root
from colabkit.sweep.combination import device_request
from colabkit.sweep.layers import Layer, Resolved, canonical
from colabkit.sweep.options import MODES
from colabkit.sweep.parameters import declared_parameters

PRESET_KEYS = ("description", "grid", "zip", "fixed", "repeats", *MODES)
TOP_LEVEL_KEYS = ("notebook", "description", "grid", "zip", "fixed", "repeats", "presets", *MODES)
SET_BY_THE_SWEEP = ("results_path",)


@dataclass
class GridSpec:
    """A validated grid file."""

    path: Path
    notebook: Path
    base: Layer
    presets: dict[str, Layer]
    description: str = ""
    parameters: dict[str, Parameter] = field(default_factory=dict)
    experiment: Experiment | None = None

    def resolve(self, preset: str | None = None, overrides: dict[str, Any] | None = None,
                command_line: Layer | None = None) -> Resolved:
        """The axes, zip groups and fixed values once `preset` and `overrides` are applied, the keys its
        combinations' file names are made of (see Resolved.pin), and how they run: the settings the
        `command_line` layer gives (`--repeats`, `--kernels`, `--html`), else the preset's, else the file's."""
        resolved = Resolved({}, [], {})
        resolved.apply(self.base)
        if preset is not None:
            if preset not in self.presets:
                known = ", ".join(sorted(self.presets)) or "none"
                raise GridError(f"unknown preset {preset!r} (this file has: {known})", str(self.path))
            resolved.apply(self.presets[preset])
        if command_line is not None:
            resolved.apply(command_line)
        resolved.pin({key: value for key, value in (overrides or {}).items() if key in self.parameters})
        return resolved


# --- reading and checking ----------------------------------------------------------------------

def notebook_places(grid_path: Path, notebook: str) -> list[Path]:
    """Where a grid file's `notebook:` is looked for, in order: as given when absolute; else from
    where the command runs, beside the grid file, in the folder holding parameters/, and in the
    suite's own copy (the checkout colabkit runs from, or the one installed with it)."""
    candidate = Path(notebook)
    if candidate.is_absolute():
        return [candidate]
    bases = (Path.cwd(), grid_path.parent, grid_path.parent.parent, suite_root())
    return list(dict.fromkeys((base / candidate).resolve() for base in bases))


def _check_list(values: Any, where: str, problems: list[str], unique: bool = True) -> list[Any] | None:
    if not isinstance(values, list):
        problems.append(f"{where} must be a list of values, got {values!r} (write [{values!r}], or move it to `fixed`)")
        return None
    if not values:
        problems.append(f"{where} is an empty list: the grid would have no combinations")
        return None
    seen: set[str] = set()
    for value in values if unique else ():
        if canonical(value) in seen:
            problems.append(f"{where} lists {value!r} twice: that combination would run twice")
        seen.add(canonical(value))
    return values


def _check_axes(axes: Any, where: str, problems: list[str], unique: bool = True) -> dict[str, list[Any]]:
    if axes is None:
        return {}
    if not isinstance(axes, dict):
        problems.append(f"{where} must be a mapping of parameter -> list of values")
        return {}
    checked = {}
    for key, values in axes.items():
        values = _check_list(values, f"{where}.{key}", problems, unique)
        if values is not None:
            checked[str(key)] = values
    return checked


def _check_zips(zips: Any, where: str, problems: list[str]) -> list[dict[str, list[Any]]]:
    if zips is None:
        return []
    if isinstance(zips, dict):
        zips = [zips]  # one group may be written without the list around it
    if not isinstance(zips, list):
        problems.append(f"{where} must be a list of groups, each a mapping of parameter -> list of values")
        return []
    groups = []
    for index, group in enumerate(zips):
        group_where = f"{where}[{index}]"
        if not isinstance(group, dict) or not group:
            problems.append(f"{group_where} must be a non-empty mapping of parameter -> list of values")
            continue
        # One list of a group may repeat a value ([64, 64] beside [1, 2]); its rows may not repeat.
        checked = _check_axes(group, group_where, problems, unique=False)
        lengths = {key: len(values) for key, values in checked.items()}
        if len(set(lengths.values())) > 1:
            sizes = ", ".join(f"{key} has {length}" for key, length in lengths.items())
            problems.append(f"{group_where}: the lists of a zip group vary together and need the same length ({sizes})")
        elif len(checked) == len(group):
            rows = [{key: checked[key][row] for key in checked} for row in range(next(iter(lengths.values())))]
            texts = [canonical(row) for row in rows]
            for index, (row, text) in enumerate(zip(rows, texts)):
                if texts.count(text) > 1 and texts.index(text) == index:  # name each repeat once
                    pairs = ", ".join(f"{key}={value!r}" for key, value in row.items())
                    problems.append(f"{group_where} lists {pairs} twice: that combination would run twice")
            groups.append(checked)
    return groups


def _check_fixed(fixed: Any, where: str, problems: list[str]) -> dict[str, Any]:
    if fixed is None:
        return {}
    if not isinstance(fixed, dict):
        problems.append(f"{where} must be a mapping of parameter -> value")
        return {}
    return {str(key): value for key, value in fixed.items()}


def _read_layer(raw: dict[str, Any], where: str, problems: list[str]) -> Layer:
    settings = {key: raw.get(key) for key in ("repeats", *MODES)}  # how its combinations run: RunSettings
    for key, choices in MODES.items():
        if settings[key] is not None and settings[key] not in choices:
            problems.append(f"{where}{key}: {settings[key]!r}: expected one of {', '.join(choices)}")
            settings[key] = None
    repeats = settings["repeats"]
    if repeats is not None and (isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1):
        problems.append(f"{where}repeats = {repeats!r}: expected a whole number >= 1 (independent runs of each "
                        "combination)")
        settings["repeats"] = None
    layer = Layer(where, _check_axes(raw.get("grid"), f"{where}grid", problems),
                  _check_zips(raw.get("zip"), f"{where}zip", problems),
                  _check_fixed(raw.get("fixed"), f"{where}fixed", problems), str(raw.get("description") or ""),
                  **settings)
    places: dict[str, str] = {}
    for located, key, _ in layer.located_values():
        if key in places:
            problems.append(f"{located}: `{key}` is already set at {places[key]}; "
                            "a parameter belongs to one place per layer (grid, one zip group, or fixed)")
        places.setdefault(key, located)
    return layer


def notebook_parameters(notebook: Path, problems: list[str]) -> tuple[dict[str, Parameter], Experiment | None]:
    """The parameters a sweep may set on `notebook`, by name, and its experiment declaration if it has
    one. A declared notebook whose parameters cell assigns other names than its declaration is a
    problem: the notebook would record values the sweep never checked."""
    try:
        cell = declared_parameters(notebook)
    except GridError as exc:
        problems.extend(exc.problems)
        return {}, None
    experiment = find(notebook.stem)
    if experiment is None:
        return cell, None
    declared = experiment.parameter_names
    extra = [name for name in cell if name not in declared]
    missing = [name for name in declared if name not in cell]
    if extra or missing:
        problems.append(f"notebook {notebook.name}'s parameters cell and the declaration of experiment "
                        f"{experiment.name} differ: " + "; ".join(
                            ([f"only the cell has {', '.join(extra)}"] if extra else [])
                            + ([f"only the declaration has {', '.join(missing)}"] if missing else [])))
    return {parameter.name: parameter for parameter in experiment.parameters}, experiment


def value_problem(parameter: Parameter | None, key: str, value: Any) -> str | None:
    """Why `value` does not fit `parameter` (None: it fits, or there is no parameter to check it by).
    A `device` value must also name a device (its typed request is made from it: Combination.request)."""
    problem = parameter.problem(value) if parameter is not None else None
    if problem is None and key == "device":
        try:
            device_request(value)
        except UnknownDeviceError as exc:
            problem = str(exc)
    return problem


def check_layer_values(layer: Layer, parameters: dict[str, Parameter], notebook_label: str,
                       problems: list[str]) -> None:
    """Append a problem for every key `layer` sets that the notebook lacks, the sweep owns, or whose
    value the parameter does not take (or that names no device)."""
    for where, key, values in layer.located_values():
        if key in SET_BY_THE_SWEEP:
            problems.append(f"{where}: `{key}` is set by the sweep for each combination; remove it")
            continue
        if parameters and key not in parameters:
            problems.append(f"{where}: the notebook {notebook_label} declares no parameter `{key}` "
                            f"(its parameters cell has: {', '.join(sorted(parameters))})")
            continue
        for value in values:
            problem = value_problem(parameters.get(key), key, value)
            if problem:
                problems.append(f"{where}: {problem}")


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's multi-line message as one line, with the line and column where it stopped."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["?"])[0]
    if isinstance(exc, yaml.constructor.ConstructorError):
        return f"a tag the safe loader refuses{where}: {problem}"
    return f"not valid YAML{where}: {problem}"


def _read_yaml(grid_path: Path) -> Any:
    try:
        return yaml.safe_load(grid_path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise GridError(_yaml_problem(exc), str(grid_path)) from None
    except UnicodeDecodeError as exc:
        raise GridError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", str(grid_path)) from None
    except OSError as exc:
        raise GridError(f"cannot be read ({exc.strerror})", str(grid_path)) from None


def load_grid(path: str | Path) -> GridSpec:
    """Read and validate a grid file; every problem found is reported in one GridError."""
    grid_path = Path(path)
    if not grid_path.is_file():
        raise GridError(f"grid file not found: {grid_path}")
    return grid_spec(_read_yaml(grid_path), grid_path)


def grid_spec(raw: Any, grid_path: Path) -> GridSpec:
    """A grid file's content (`raw`, as YAML's safe loader gives it; a grid made in memory the same way), as if
    read from `grid_path` (its notebook found from there); every problem found in one GridError."""
    if not isinstance(raw, dict):
        raise GridError("a grid file is a YAML mapping with at least `notebook` and `grid`", str(grid_path))
    problems: list[str] = []
    unknown = sorted(map(str, set(raw) - set(TOP_LEVEL_KEYS)))
    if unknown:
        problems.append(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(TOP_LEVEL_KEYS)}")
    notebook_name = raw.get("notebook")
    notebook = None
    parameters: dict[str, Parameter] = {}
    experiment = None
    if not isinstance(notebook_name, str) or not notebook_name:
        problems.append("`notebook` (path of the .ipynb to run) is missing")
    else:
        places = notebook_places(grid_path, notebook_name)
        notebook = next((place for place in places if place.is_file()), None)
        if notebook is None:
            problems.append(f"notebook {notebook_name!r} not found (looked for {', '.join(map(str, places))})")
        else:
            parameters, experiment = notebook_parameters(notebook, problems)
    base = _read_layer(raw, "", problems)
    presets_raw = raw.get("presets") or {}
    if not isinstance(presets_raw, dict):
        problems.append("`presets` must be a mapping of preset name -> {grid, zip, fixed, ...}")
        presets_raw = {}
    presets = {}
    for name, preset in presets_raw.items():
        if not isinstance(preset, dict):
            problems.append(f"preset {name!r} must be a mapping with `grid`, `zip` and/or `fixed`")
            continue
        extra = sorted(map(str, set(preset) - set(PRESET_KEYS)))
        if extra:
            problems.append(f"preset {name!r}: unknown key(s) {', '.join(extra)}; allowed: {', '.join(PRESET_KEYS)}")
        presets[str(name)] = _read_layer(preset, f"presets.{name}.", problems)
    label = str(notebook_name)
    for layer in (base, *presets.values()):
        check_layer_values(layer, parameters, label, problems)
        if layer.bottlenecks is not None and parameters and "breakdown" not in parameters:
            problems.append(f"{layer.where}bottlenecks: the notebook {label} declares no `breakdown` parameter "
                            "(it has no bottleneck passes to run once)")
    if "device" not in {key for _, key, _ in base.located_values()}:
        problems.append("no `device` axis: add `device: [cpu, gpu, tpu]` to the grid (or a fixed device)")
    if problems:
        raise GridError(problems, str(grid_path))
    assert notebook is not None
    return GridSpec(grid_path, notebook, base, presets, str(raw.get("description") or ""), parameters, experiment)
