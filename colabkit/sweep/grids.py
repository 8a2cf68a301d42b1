"""What the user wrote: parameter grid files (`parameters/*.yaml`) and the command line's `-p KEY=VALUE`,
read and checked against each notebook's parameters, every problem at once, and their layers of values.

Grid files: keys (docs/sweep.md, "Grid files") `notebook` (required), `description`, `grid`, `zip`,
`fixed`, the run settings `repeats`, `kernels`, `html`, `bottlenecks`, and `presets`. Before anything
runs, every problem is reported, one line each: unparsable YAML (line and column), unknown keys, a missing
notebook, undeclared parameters, values out of range, empty lists, unequal zips, duplicates, unknown
devices. YAML's safe loader only. A grid made in memory (`grid_spec`) is checked the same way.

A notebook's parameters: a notebook with an experiment declaration is checked against it; one without (a
scratch notebook) against its own `parameters` cell, read through `papermill.inspect_notebook` into the
same `Parameter`s: the type from the default, widened by literals the comment names
(`jit_compile = "auto"  # ..., True, False` takes a string or a bool), `object` where it cannot be told.

`-p KEY=VALUE`: typed like papermill's; a key applies to every notebook of the sweep that declares it
(`-p epochs=1` over several grid files sets epochs where there is one), so it is an error only when no
notebook has it. A key given twice is refused: the last value would win without a word.

Layers of values: a grid file's own, then a preset's, then the command line's (`-p KEY=VALUE`,
`--repeats`, `--kernels`, `--html`). A later layer's key replaces the earlier one wherever it was
(`-p batch_size=64` pins an axis). `Resolved` is what is left: the axes and zip groups
colabkit.sweep.expand crosses, the fixed values, the keys of a file name, and the RunSettings (how the
sweep runs a combination: the last layer that says wins). A device value is parsed once, by `device_request`.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from colabkit.device.spec import DeviceRequest, parse_device
from colabkit.errors import GridError, UnknownDeviceError
from colabkit.io import RepeatedKeyError, load_strict_yaml
from colabkit.experiments import Experiment, Parameter, find
from colabkit.suite import suite_root
from colabkit.sweep.options import SETTING_CHOICES, BottleneckMode, HtmlMode, KernelMode

# Literals a parameter's comment may name as alternatives: quoted strings and True/False/None.
# (Bare numbers in a comment are usually examples of the default's own type, and an apostrophe
# inside a word, as in "notebook's", does not open a string.)
_COMMENT_LITERAL = re.compile(r"""((?<!\w)"[^"]*"(?!\w)|(?<!\w)'[^']*'(?!\w)|\bTrue\b|\bFalse\b|\bNone\b)""")
_ANNOTATION_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "dict": dict,
                     "None": type(None), "NoneType": type(None)}
_NOT_A_LITERAL = object()


def _literal(source: str) -> Any:
    try:
        return ast.literal_eval(source)
    except (ValueError, SyntaxError):
        return _NOT_A_LITERAL


def accepted_types(default_source: str, help: str = "", annotation: str | None = None) -> tuple[type, ...]:
    """The value types a parameters-cell line takes: its annotation's (`n: int = 3`,
    `lr: Optional[float] = None`), else its default's widened by the literals its comment names;
    (object,) when they cannot be told (an expression such as np.float32 or 2**10, or `x = None`)."""
    default = _literal(default_source)
    if annotation:
        words = set(re.findall(r"[A-Za-z_]+", annotation))
        if {"Any", "object"} & words:
            return (object,)
        named = {_ANNOTATION_TYPES[word] for word in words if word in _ANNOTATION_TYPES}
        if "Optional" in words:
            named.add(type(None))
        if named:
            if default is not _NOT_A_LITERAL:
                named.add(type(default))  # the notebook runs with its own default, whatever the annotation says
            return tuple(sorted(named, key=lambda kind: kind.__name__))
    if default is _NOT_A_LITERAL or default is None:
        return (object,)  # `x = None` says nothing about what x may become
    types = {type(default)}
    for literal in _COMMENT_LITERAL.findall(help):
        value = _literal(literal)
        if value is not _NOT_A_LITERAL:
            types.add(type(value))
    return tuple(sorted(types, key=lambda kind: kind.__name__))


def cell_parameter(name: str, default_source: str, help: str = "", annotation: str | None = None) -> Parameter:
    """One line of a parameters cell as a Parameter: its default the literal value (or the source
    text where it is an expression), its types as `accepted_types` reads them."""
    default = _literal(default_source)
    return Parameter(name, accepted_types(default_source, help, annotation),
                     default_source if default is _NOT_A_LITERAL else default, help,
                     declared_as=f"the notebook's `{name} = {default_source}`")


def declared_parameters(notebook: str | Path) -> dict[str, Parameter]:
    """The parameters a notebook assigns in its cell tagged `parameters`, by name, in order.

    Raises GridError if the notebook cannot be read or has no parameters cell.
    """
    import papermill
    from papermill.exceptions import PapermillException

    try:
        inspected = papermill.inspect_notebook(str(notebook))
    except (OSError, ValueError, PapermillException) as exc:
        raise GridError(f"cannot read the parameters of notebook {notebook}: {exc}") from exc
    if not inspected:
        raise GridError(f"notebook {notebook} has no cell tagged `parameters`, so a sweep cannot set anything")
    declared = {}
    for name, entry in inspected.items():
        annotation = entry.get("inferred_type_name")
        declared[name] = cell_parameter(name, str(entry.get("default", "")), str(entry.get("help") or ""),
                                        None if annotation in (None, "None") else str(annotation))
    return declared


# What a bool parameter's refusal adds: -p reads only Python's spellings, as papermill's -p does.
BOOL_SPELLINGS = (" (-p takes a bool as True or False, spelt as Python writes them, as papermill's -p does: "
                  "not true, false, yes, no, 1 or 0)")


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


def parse_overrides(items: Iterable[str] | None) -> dict[str, Any]:
    """{'n': 512} from ['n=512']. Raises GridError naming every item not written KEY=VALUE and every
    key given more than once."""
    overrides: dict[str, Any] = {}
    problems = []
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_]\w*", key):
            problems.append(f"-p {item!r}: write KEY=VALUE, e.g. -p batch_size=64")
        elif key in overrides:
            problems.append(f"-p {key} is given twice ({overrides[key]!r}, then {typed_value(value)!r}): "
                            "give each key once")
        else:
            overrides[key] = typed_value(value)
    if problems:
        raise GridError(problems)
    return overrides


def check_overrides(specs: list[GridSpec], overrides: dict[str, Any]) -> list[str]:
    """Problems with `-p` values: a key the sweep owns, a key no notebook declares, a value a
    notebook's parameter does not take, a device colabkit does not know."""
    problems: list[str] = []
    seen: set[str] = set()  # one line for a value several notebooks refuse alike
    for key, value in overrides.items():
        owners = [spec for spec in specs if key in spec.parameters]
        if key in SET_BY_THE_SWEEP:
            problems.append(f"-p {key}: `{key}` is set by the sweep for each combination")
            continue
        if not owners and specs and key != "device":  # (no spec at all: every grid file failed, and said why)
            names = ", ".join(spec.notebook.name for spec in specs)
            problems.append(f"-p {key}: no notebook of this sweep declares a parameter `{key}` ({names})")
        for spec in owners or ([None] if key == "device" else []):
            declared = spec.parameters[key].problem(value) if spec else None  # the parameter's own rule
            if declared and not isinstance(value, bool) and bool in spec.parameters[key].types:
                declared += BOOL_SPELLINGS
            problem = declared or value_problem(None, key, value)  # else whether it names a device
            if problem and problem not in seen:
                problems.append(f"-p {key} ({spec.notebook.name}): {problem}" if declared else f"-p {key}: {problem}")
                seen.add(problem)
    return problems


@lru_cache(maxsize=256)
def _parsed(text: str) -> DeviceRequest:
    return parse_device(text)


def device_request(value: Any) -> DeviceRequest:
    """The request a `device` value names ('gpu:2' -> gpu, 2); UnknownDeviceError if it names none.
    The sweep's one reading of a combination's device (each distinct value is parsed once)."""
    return _parsed(str(value))


@dataclass(frozen=True)
class RunSettings:
    """How the sweep runs a combination, decided once from the command line, else its preset, else its
    grid file, else these defaults (colabkit.sweep.expand.Resolved)."""

    repeats: int = 1  # independent runs of it, each its own kernel and record
    kernels: KernelMode = "fresh"  # a fresh kernel per run, or warm ones (colabkit.sweep.runners.kernels)
    html: HtmlMode = "all"  # which of its runs get an HTML export
    bottlenecks: BottleneckMode = "all"  # "first": its repeats after the first run with breakdown=False


def canonical(value: Any) -> str:
    """A value as JSON text: equal texts, equal values (1, 1.0 and True stay apart)."""
    return json.dumps(value, sort_keys=True, default=str)


@dataclass
class Layer:
    """One layer of values: the grid file's own, one preset's, or the command line's."""

    where: str  # how messages name it: "" (the file), "presets.smoke.", "-p "
    grid: dict[str, list[Any]] = field(default_factory=dict)
    zips: list[dict[str, list[Any]]] = field(default_factory=list)
    fixed: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    # How its combinations run (RunSettings' fields); None: as an earlier layer says
    repeats: int | None = None
    kernels: KernelMode | None = None
    html: HtmlMode | None = None
    bottlenecks: BottleneckMode | None = None
    fixed_as: str = "fixed"  # what messages call its fixed values: "params" for a run of a plan file

    def located_values(self) -> list[tuple[str, str, list[Any]]]:
        """(where, key, values) for every key this layer sets; a fixed value is a one-value list."""
        found = [(f"{self.where}grid.{key}", key, values) for key, values in self.grid.items()]
        for index, group in enumerate(self.zips):
            found += [(f"{self.where}zip[{index}].{key}", key, values) for key, values in group.items()]
        found += [(f"{self.where}{self.fixed_as}.{key}", key, [value]) for key, value in self.fixed.items()]
        return found


PRESET_KEYS = ("description", "grid", "zip", "fixed", "repeats", *SETTING_CHOICES)
TOP_LEVEL_KEYS = ("notebook", "description", "grid", "zip", "fixed", "repeats", "presets", *SETTING_CHOICES)
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

# --- reading and checking ----------------------------------------------------------------------

def notebook_places(grid_path: Path, notebook: str) -> list[Path]:
    """Where a grid file's `notebook:` is looked for, in order: as given when absolute; else beside the grid file,
    in the folder holding its parameters/, from where the command runs, and in the suite's own copy (the checkout
    colabkit runs from, or the one installed with it). The grid file's own folders come first: an installed
    colabkit's grid files name its own notebooks, even when run from a checkout (the device run)."""
    candidate = Path(notebook)
    if candidate.is_absolute():
        return [candidate]
    bases = (grid_path.parent, grid_path.parent.parent, Path.cwd(), suite_root())
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


def read_settings(raw: dict[str, Any], where: str, problems: list[str]) -> dict[str, Any]:
    """How a layer's combinations run (RunSettings' fields: `repeats` and SETTING_CHOICES), as `raw` says them, None
    where it does not; a value outside its vocabulary, or `repeats` not a whole number >= 1, is a problem (and None)."""
    settings = {key: raw.get(key) for key in ("repeats", *SETTING_CHOICES)}
    for key, choices in SETTING_CHOICES.items():
        if settings[key] is not None and settings[key] not in choices:
            problems.append(f"{where}{key}: {settings[key]!r}: expected one of {', '.join(choices)}")
            settings[key] = None
    repeats = settings["repeats"]
    if repeats is not None and (isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1):
        problems.append(f"{where}repeats = {repeats!r}: expected a whole number >= 1 (independent runs of each "
                        "combination)")
        settings["repeats"] = None
    return settings


def _read_layer(raw: dict[str, Any], where: str, problems: list[str]) -> Layer:
    settings = read_settings(raw, where, problems)
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


def check_layer(layer: Layer, parameters: dict[str, Parameter], notebook_label: str, problems: list[str]) -> None:
    """Append a problem for every key `layer` sets that the notebook lacks, the sweep owns, or whose value the
    parameter does not take (or that names no device), and for bottleneck passes asked of a notebook that has none:
    the one check of a grid file's layers and of a plan file's runs."""
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
    if layer.bottlenecks is not None and parameters and "breakdown" not in parameters:
        problems.append(f"{layer.where}bottlenecks: the notebook {notebook_label} declares no `breakdown` parameter "
                        "(it has no bottleneck passes to run once)")


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's multi-line message as one line, with the line and column where it stopped."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["?"])[0]
    if isinstance(exc, yaml.constructor.ConstructorError):
        return f"a tag the safe loader refuses{where}: {problem}"
    return f"not valid YAML{where}: {problem}"


def read_grid_yaml(grid_path: Path) -> Any:
    """The grid file's content, read by colabkit.io's strict loader (a key given twice refused, as in a rates file);
    GridError, one line, for anything that is not a grid's YAML."""
    try:
        return load_strict_yaml(grid_path.read_text(encoding="utf-8"))
    except RepeatedKeyError as exc:
        raise GridError(exc.one_line(), str(grid_path)) from None
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
    return grid_spec(read_grid_yaml(grid_path), grid_path)


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
        check_layer(layer, parameters, label, problems)
    if "device" not in {key for _, key, _ in base.located_values()}:
        problems.append("no `device` axis: add `device: [cpu, gpu, tpu]` to the grid (or a fixed device)")
    if problems:
        raise GridError(problems, str(grid_path))
    assert notebook is not None
    return GridSpec(grid_path, notebook, base, presets, str(raw.get("description") or ""), parameters, experiment)


def device_filter(text: str | None, problems: list[str]) -> list[DeviceRequest] | None:
    """The requests `--device` names ('cpu,gpu:2'), or None when it is not given; a name colabkit
    does not know is appended to `problems`."""
    if not text:
        return None
    wanted = []
    for name in (name.strip() for name in text.split(",")):
        if name:
            try:
                wanted.append(device_request(name))
            except UnknownDeviceError as exc:
                problems.append(f"--device: {exc}")
    return wanted


def read_grids(grid_paths: Sequence[str | Path | GridSpec], device: str | None,
               overrides: dict[str, Any]) -> tuple[list[GridSpec], list[DeviceRequest] | None]:
    """Every grid file read and checked (a grid made in memory taken as it is), `--device` read, and the `-p`
    overrides checked against them: (the specs, the devices asked for); one GridError with every problem of
    every file."""
    problems: list[str] = []
    wanted = device_filter(device, problems)
    specs = []
    for grid_path in grid_paths:
        try:
            specs.append(grid_path if isinstance(grid_path, GridSpec) else load_grid(grid_path))
        except GridError as exc:
            where = f"{exc.path}: " if exc.path else ""
            problems.extend(where + problem for problem in exc.problems)
    problems += check_overrides(specs, overrides)
    if problems:
        raise GridError(problems)
    return specs, wanted
