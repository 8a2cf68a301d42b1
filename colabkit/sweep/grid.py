"""Parameter grid files (`parameters/*.yaml`): load, validate, expand into combinations.

The schema (every key but `notebook` optional)::

    notebook: notebooks/cnn_mnist.ipynb         # the notebook to run, relative to the project
    description: one line for humans
    grid:                                       # each key a list: the sweep runs their cartesian product
      device: [cpu, gpu, tpu]
      batch_size: [256, 512, 1024]
    zip:                                        # groups of lists that vary together, not crossed:
      - {units: [32, 64, 128], layers: [1, 2, 3]}   # (32, 1), (64, 2), (128, 3), each crossed with the grid
    fixed: {epochs: 10}                         # one value for every combination
    presets:                                    # named overrides of grid, zip and fixed values
      smoke: {grid: {batch_size: [256]}, fixed: {epochs: 1}}

Values are layered: the file's own, then the chosen preset's, then `-p KEY=VALUE` from the command
line. A key set by a later layer replaces the earlier one wherever it was (a grid axis, a zip group
or a fixed value): `-p batch_size=64` pins an axis to one value. Within one layer a key may appear
in one place only. `zip` may also be a single mapping (one group).

Validation happens before anything runs and reports every problem found, one line each: unknown
keys, a missing notebook, parameters the notebook does not declare, values outside what the
parameter takes, empty lists, zip lists of unequal length, values listed twice, and devices colabkit
does not know. A notebook with an experiment declaration (colabkit.experiments, found by the
notebook's file name) is checked against the declaration's types, ranges and choices
("grid.n: n = 0: expected an int >= 1"), and its parameters cell must assign the same names; a
notebook without one against the types of its parameters cell's defaults (colabkit.sweep.parameters). Files are read with YAML's
safe loader; values reach a notebook only as papermill parameters.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from colabkit.device.spec import DEVICE_KINDS, parse_device
from colabkit.errors import GridError, UnknownDeviceError
from colabkit.experiments import Experiment, Parameter, find
from colabkit.suite import suite_root
from colabkit.sweep.parameters import DeclaredParameter, declared_parameters

TOP_LEVEL_KEYS = ("notebook", "description", "grid", "zip", "fixed", "presets")
PRESET_KEYS = ("description", "grid", "zip", "fixed")
SET_BY_THE_SWEEP = ("results_path",)


@dataclass(frozen=True)
class Combination:
    """One run of one notebook: its parameters and where its outputs go."""

    notebook: Path
    params: dict[str, Any] = field(hash=False)
    slug: str

    @property
    def name(self) -> str:
        return self.notebook.stem

    @property
    def device(self) -> str:
        return str(self.params["device"])

    @property
    def label(self) -> str:
        """'matmul_tflops cpu n-256_dtype-float32': how progress lines and tables name it."""
        return f"{self.name} {self.device} {self.slug}"

    def output_base(self, out: Path) -> Path:
        """OUT/<notebook>/<device>/<slug>: add .ipynb, .json, .html, .log to it."""
        return Path(out) / self.name / self.device.replace(":", "-") / self.slug


@dataclass
class Layer:
    """One layer of values: the grid file's own, one preset's, or the command line's."""

    where: str  # how messages name it: "" (the file), "presets.smoke.", "-p "
    grid: dict[str, list[Any]] = field(default_factory=dict)
    zips: list[dict[str, list[Any]]] = field(default_factory=list)
    fixed: dict[str, Any] = field(default_factory=dict)
    description: str = ""

    def located_values(self) -> list[tuple[str, str, list[Any]]]:
        """(where, key, values) for every key this layer sets; a fixed value is a one-value list."""
        found = [(f"{self.where}grid.{key}", key, values) for key, values in self.grid.items()]
        for index, group in enumerate(self.zips):
            found += [(f"{self.where}zip[{index}].{key}", key, values) for key, values in group.items()]
        found += [(f"{self.where}fixed.{key}", key, [value]) for key, value in self.fixed.items()]
        return found


def _one_row_per_device(group: dict[str, list[Any]]) -> bool:
    devices = group.get("device")
    return devices is not None and len({str(device) for device in devices}) == len(devices)


def _distinct_rows(group: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """A zip group with each of its rows once, in order."""
    rows, seen = [], set()
    for row in zip(*group.values()):
        if _canonical(row) not in seen:
            seen.add(_canonical(row))
            rows.append(row)
    return {key: [row[index] for row in rows] for index, key in enumerate(group)}


@dataclass
class Resolved:
    """The values once every layer is applied: what `expand` crosses."""

    axes: dict[str, list[Any]]
    zips: list[dict[str, list[Any]]]
    fixed: dict[str, Any]

    def forget(self, key: str) -> None:
        """Remove `key` wherever an earlier layer put it. Rows of a zip group told apart by `key` alone
        become one (`-p device=cpu:2` over rows (cpu, tensorflow), (gpu, tensorflow), (tpu, jax) keeps
        the backends tensorflow and jax once each)."""
        self.axes.pop(key, None)
        self.fixed.pop(key, None)
        for group in self.zips:
            group.pop(key, None)
        self.zips = [_distinct_rows(group) for group in self.zips if group]

    def apply(self, layer: Layer) -> None:
        for key, values in layer.grid.items():
            if key in self.axes:
                self.axes[key] = list(values)  # keep the axis where it was: slugs stay stable
            else:
                self.forget(key)
                self.axes[key] = list(values)
        for group in layer.zips:
            for key in group:
                self.forget(key)
            self.zips.append({key: list(values) for key, values in group.items()})
        for key, value in layer.fixed.items():
            self.forget(key)
            self.fixed[key] = value

    @property
    def varying(self) -> list[str]:
        """Grid axes and zip keys, in file order: the keys a combination's slug is made of. Keys zipped
        with `device`, one row per device (`backend: [tensorflow, tensorflow, jax]` beside `device: [cpu,
        gpu, tpu]`), are named by the device's folder as the device is, so the slug leaves them out too."""
        tied = {key for group in self.zips if _one_row_per_device(group) for key in group}
        return [key for key in [*self.axes, *(key for group in self.zips for key in group)] if key not in tied]


@dataclass
class GridSpec:
    """A validated grid file."""

    path: Path
    notebook: Path
    base: Layer
    presets: dict[str, Layer]
    description: str = ""
    parameters: dict[str, Parameter | DeclaredParameter] = field(default_factory=dict)
    experiment: Experiment | None = None

    @property
    def grid(self) -> dict[str, list[Any]]:
        return self.base.grid

    @property
    def fixed(self) -> dict[str, Any]:
        return self.base.fixed

    def resolve(self, preset: str | None = None, overrides: dict[str, Any] | None = None) -> Resolved:
        """The axes, zip groups and fixed values once `preset` and `overrides` are applied."""
        resolved = Resolved({}, [], {})
        resolved.apply(self.base)
        if preset is not None:
            if preset not in self.presets:
                known = ", ".join(sorted(self.presets)) or "none"
                raise GridError(f"unknown preset {preset!r} (this file has: {known})", str(self.path))
            resolved.apply(self.presets[preset])
        declared = {key: value for key, value in (overrides or {}).items() if key in self.parameters}
        resolved.apply(Layer("-p ", fixed=declared))
        return resolved

    def effective(self, preset: str | None) -> tuple[dict[str, list[Any]], dict[str, Any]]:
        """The grid axes and fixed values once `preset` (if any) is applied (zip groups left out)."""
        resolved = self.resolve(preset)
        return resolved.axes, resolved.fixed


# --- reading and checking ----------------------------------------------------------------------

def _resolve_notebook(grid_path: Path, notebook: str) -> Path:
    candidate = Path(notebook)
    if candidate.is_absolute():
        return candidate
    # Relative to where the command runs, else to the project holding parameters/, else the suite's
    # own copy (the checkout colabkit runs from, or the one installed with it: colabkit.suite).
    for base in (Path.cwd(), grid_path.parent, grid_path.parent.parent, suite_root()):
        if (base / candidate).exists():
            return (base / candidate).resolve()
    return (grid_path.parent.parent / candidate).resolve()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _check_list(values: Any, where: str, problems: list[str], unique: bool = True) -> list[Any] | None:
    if not isinstance(values, list):
        problems.append(f"{where} must be a list of values, got {values!r} (write [{values!r}], or move it to `fixed`)")
        return None
    if not values:
        problems.append(f"{where} is an empty list: the grid would have no combinations")
        return None
    seen: set[str] = set()
    for value in values if unique else ():
        if _canonical(value) in seen:
            problems.append(f"{where} lists {value!r} twice: that combination would run twice")
        seen.add(_canonical(value))
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
            texts = [_canonical(row) for row in rows]
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
    layer = Layer(where, _check_axes(raw.get("grid"), f"{where}grid", problems),
                  _check_zips(raw.get("zip"), f"{where}zip", problems),
                  _check_fixed(raw.get("fixed"), f"{where}fixed", problems), str(raw.get("description") or ""))
    places: dict[str, str] = {}
    for located, key, _ in layer.located_values():
        if key in places:
            problems.append(f"{located}: `{key}` is already set at {places[key]}; "
                            "a parameter belongs to one place per layer (grid, one zip group, or fixed)")
        places.setdefault(key, located)
    return layer


def value_problem(parameter: Parameter | DeclaredParameter, value: Any) -> str | None:
    """Why `value` does not fit `parameter` (declared by an experiment, or read from a parameters cell)."""
    if isinstance(parameter, Parameter):
        return parameter.problem(value)
    return parameter.problem_with(value)


def notebook_parameters(notebook: Path, problems: list[str]) -> tuple[dict[str, Parameter | DeclaredParameter],
                                                                    Experiment | None]:
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
        return dict(cell), None
    declared = experiment.parameter_names
    extra = [name for name in cell if name not in declared]
    missing = [name for name in declared if name not in cell]
    if extra or missing:
        problems.append(f"notebook {notebook.name}'s parameters cell and the declaration of experiment "
                        f"{experiment.name} differ: " + "; ".join(
                            ([f"only the cell has {', '.join(extra)}"] if extra else [])
                            + ([f"only the declaration has {', '.join(missing)}"] if missing else [])))
    return {parameter.name: parameter for parameter in experiment.parameters}, experiment


def check_layer_values(layer: Layer, parameters: dict[str, Parameter | DeclaredParameter], notebook_label: str,
                       problems: list[str]) -> None:
    """Append a problem for every key `layer` sets that the notebook lacks, the sweep owns, or whose
    value has the wrong type or names an unknown device."""
    for where, key, values in layer.located_values():
        if key in SET_BY_THE_SWEEP:
            problems.append(f"{where}: `{key}` is set by the sweep for each combination; remove it")
            continue
        if parameters and key not in parameters:
            problems.append(f"{where}: the notebook {notebook_label} declares no parameter `{key}` "
                            f"(its parameters cell has: {', '.join(sorted(parameters))})")
            continue
        for value in values:
            if key == "device" and not isinstance(parameters.get(key), Parameter):
                try:
                    parse_device(str(value))
                except UnknownDeviceError as exc:
                    problems.append(f"{where}: {exc}")
                continue
            problem = value_problem(parameters[key], value) if key in parameters else None
            if problem:
                problems.append(f"{where}: {problem}")


def load_grid(path: str | Path) -> GridSpec:
    """Read and validate a grid file; every problem found is reported in one GridError."""
    grid_path = Path(path)
    if not grid_path.is_file():
        raise GridError(f"grid file not found: {grid_path}")
    try:
        raw = yaml.safe_load(grid_path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise GridError(f"not valid YAML (or a tag the safe loader refuses): {exc}", str(grid_path)) from exc
    if not isinstance(raw, dict):
        raise GridError("a grid file is a YAML mapping with at least `notebook` and `grid`", str(grid_path))
    problems: list[str] = []
    unknown = sorted(map(str, set(raw) - set(TOP_LEVEL_KEYS)))
    if unknown:
        problems.append(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(TOP_LEVEL_KEYS)}")
    notebook_name = raw.get("notebook")
    notebook = None
    parameters: dict[str, Parameter | DeclaredParameter] = {}
    experiment = None
    if not isinstance(notebook_name, str) or not notebook_name:
        problems.append("`notebook` (path of the .ipynb to run) is missing")
    else:
        notebook = _resolve_notebook(grid_path, notebook_name)
        if not notebook.is_file():
            problems.append(f"notebook {notebook_name!r} not found (looked for {notebook})")
        else:
            parameters, experiment = notebook_parameters(notebook, problems)
    base = _read_layer(raw, "", problems)
    presets_raw = raw.get("presets") or {}
    if not isinstance(presets_raw, dict):
        problems.append("`presets` must be a mapping of preset name -> {grid, zip, fixed}")
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
    if "device" not in {key for _, key, _ in base.located_values()}:
        problems.append("no `device` axis: add `device: [cpu, gpu, tpu]` to the grid (or a fixed device)")
    if problems:
        raise GridError(problems, str(grid_path))
    return GridSpec(grid_path, notebook, base, presets, str(raw.get("description") or ""), parameters, experiment)


# --- the command line's -p KEY=VALUE ------------------------------------------------------------

def typed_value(text: str) -> Any:
    """A command-line value typed as papermill's `-p` types it: True/False/None, int, float, else str."""
    if text in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[text]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """{'n': 512} from ['n=512']. Raises GridError naming every item not written KEY=VALUE."""
    overrides: dict[str, Any] = {}
    problems = []
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_]\w*", key):
            problems.append(f"-p {item!r}: write KEY=VALUE, e.g. -p batch_size=64")
        else:
            overrides[key] = typed_value(value)
    if problems:
        raise GridError(problems)
    return overrides


def check_overrides(specs: list[GridSpec], overrides: dict[str, Any]) -> list[str]:
    """Problems with `-p` values: a key no notebook declares, or a value of the wrong type.

    A key applies to every notebook that declares it (`-p epochs=1` over several grid files sets
    epochs where there is one), so it is an error only when no notebook has it.
    """
    problems: list[str] = []
    seen: set[str] = set()  # one line for a value several notebooks refuse alike
    for key, value in overrides.items():
        owners = [spec for spec in specs if key in spec.parameters]
        if key in SET_BY_THE_SWEEP:
            problems.append(f"-p {key}: `{key}` is set by the sweep for each combination")
        elif key == "device" and not any(isinstance(spec.parameters.get(key), Parameter) for spec in owners):
            try:
                parse_device(str(value))
            except UnknownDeviceError as exc:
                problems.append(f"-p device: {exc}")
        elif not owners and specs:  # (no spec at all: every grid file failed, and said why)
            names = ", ".join(spec.notebook.name for spec in specs)
            problems.append(f"-p {key}: no notebook of this sweep declares a parameter `{key}` ({names})")
        for spec in owners:
            if key != "device" or isinstance(spec.parameters[key], Parameter):
                problem = value_problem(spec.parameters[key], value)
                if problem and problem not in seen:
                    problems.append(f"-p {key} ({spec.notebook.name}): {problem}")
                    seen.add(problem)
    return problems


# --- expansion ---------------------------------------------------------------------------------

def _slug_part(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(value)).strip("_") or "x"


def slug_for(params: dict[str, Any], axes: list[str]) -> str:
    """A file name for a combination from its varying keys other than device: 'n-512_dtype-float32'."""
    parts = [f"{_slug_part(key)}-{_slug_part(params[key])}" for key in axes if key != "device"]
    return "_".join(parts) or "default"


def device_matches(device: str, wanted: list[str]) -> bool:
    """Whether `device` is one of `wanted`; a name without a count takes every count ('cpu' takes 'cpu:2')."""
    request = parse_device(device)
    for name in wanted:
        choice = parse_device(name)
        if choice == request or (choice.count is None and choice.kind == request.kind):
            return True
    return False


def expand(spec: GridSpec, preset: str | None = None, devices: list[str] | None = None,
           overrides: dict[str, Any] | None = None) -> list[Combination]:
    """The combinations of `spec` under `preset` and `overrides`, in grid order.

    Grid axes are crossed with each other and with every zip group; the lists of one zip group
    advance together. `devices` keeps only those devices' combinations.
    """
    resolved = spec.resolve(preset, overrides)
    factors: list[list[dict[str, Any]]] = [[{key: value} for value in values] for key, values in resolved.axes.items()]
    for group in resolved.zips:
        rows = [dict(zip(group, row)) for row in zip(*group.values())]
        if "device" in group:  # outermost, so that combinations go device by device as under a device axis
            factors.insert(0, rows)
        else:
            factors.append(rows)
    combinations = []
    for choice in itertools.product(*factors):
        params = dict(resolved.fixed)
        for part in choice:
            params.update(part)
        params["device"] = str(params["device"])
        if devices is not None and not device_matches(params["device"], devices):
            continue
        combinations.append(Combination(spec.notebook, params, slug_for(params, resolved.varying)))
    return combinations


def duplicate_problems(combinations: list[Combination], out: Path) -> list[str]:
    """One problem per combination that would run twice, or whose files another one would overwrite."""
    problems = []
    seen_params: dict[str, Combination] = {}
    seen_paths: dict[Path, Combination] = {}
    for combination in combinations:
        key = _canonical([str(combination.notebook), combination.params])
        base = combination.output_base(out)
        if key in seen_params:
            problems.append(f"{combination.label}: the combination {combination.params} appears twice "
                            "(the same notebook in two grid files, or a value repeated across layers)")
        elif base in seen_paths:
            other = seen_paths[base]
            problems.append(f"{combination.label}: {combination.params} and {other.params} would write the same "
                            f"files {base}.* (their values differ only in characters a file name cannot hold)")
        seen_params.setdefault(key, combination)
        seen_paths.setdefault(base, combination)
    return problems


def device_kind(device: str) -> str:
    """'gpu:2' -> 'gpu'. (The kind decides whether this machine can run a combination.)"""
    kind = parse_device(device).kind
    return kind if kind in DEVICE_KINDS else "auto"
