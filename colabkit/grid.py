"""Parameter grid files (`parameters/*.yaml`): load, validate, expand into combinations.

A grid file names a notebook, a `grid` (each key a list of values: the sweep runs their cartesian
product), `fixed` values shared by every combination, and `presets` that override grid and fixed
values by name::

    notebook: notebooks/matmul_tflops.ipynb
    grid: {device: [cpu, gpu, tpu], n: [1024, 4096], dtype: [float32]}
    fixed: {count: 10, repeats: 5}
    presets:
      smoke: {grid: {n: [256]}, fixed: {count: 2}}

Files are read with YAML's safe loader; values reach a notebook only as papermill parameters.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from colabkit.device import DEVICE_KINDS, parse_device
from colabkit.errors import GridError, UnknownDeviceError

TOP_LEVEL_KEYS = ("notebook", "description", "grid", "fixed", "presets")
PRESET_KEYS = ("description", "grid", "fixed")


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

    def output_base(self, out: Path) -> Path:
        """OUT/<notebook>/<device>/<slug>: add .ipynb, .json, .html, .log to it."""
        return Path(out) / self.name / self.device.replace(":", "-") / self.slug


@dataclass
class GridSpec:
    """A validated grid file."""

    path: Path
    notebook: Path
    grid: dict[str, list[Any]]
    fixed: dict[str, Any]
    presets: dict[str, dict[str, Any]]
    description: str = ""

    def effective(self, preset: str | None) -> tuple[dict[str, list[Any]], dict[str, Any]]:
        """The grid and fixed values once `preset` (if any) is applied."""
        grid, fixed = dict(self.grid), dict(self.fixed)
        if preset is not None:
            if preset not in self.presets:
                known = ", ".join(sorted(self.presets)) or "none"
                raise GridError(f"unknown preset {preset!r} (this file has: {known})", str(self.path))
            overrides = self.presets[preset]
            grid.update(overrides.get("grid") or {})
            fixed.update(overrides.get("fixed") or {})
        for key in list(fixed):
            grid.pop(key, None)  # a fixed value (e.g. from a preset) replaces a grid axis
        return grid, fixed


def _resolve_notebook(grid_path: Path, notebook: str) -> Path:
    candidate = Path(notebook)
    if candidate.is_absolute():
        return candidate
    # Relative to where the command runs, else to the project holding parameters/.
    for base in (Path.cwd(), grid_path.parent, grid_path.parent.parent):
        if (base / candidate).exists():
            return (base / candidate).resolve()
    return (grid_path.parent.parent / candidate).resolve()


def _check_axes(axes: Any, where: str, problems: list[str]) -> dict[str, list[Any]]:
    if axes is None:
        return {}
    if not isinstance(axes, dict):
        problems.append(f"{where} must be a mapping of parameter -> list of values")
        return {}
    checked = {}
    for key, values in axes.items():
        if not isinstance(values, list):
            problems.append(f"{where}.{key} must be a list of values, got {values!r}")
        elif not values:
            problems.append(f"{where}.{key} is an empty list: the grid would have no combinations")
        else:
            checked[str(key)] = values
    return checked


def _check_devices(values: list[Any], where: str, problems: list[str]) -> None:
    for value in values:
        try:
            parse_device(str(value))
        except UnknownDeviceError as exc:
            problems.append(f"{where}: {exc}")


def load_grid(path: str | Path) -> GridSpec:
    """Read and validate a grid file; every problem found is reported in one GridError."""
    grid_path = Path(path)
    if not grid_path.is_file():
        raise GridError(f"grid file not found: {grid_path}")
    try:
        raw = yaml.safe_load(grid_path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise GridError(f"not valid YAML: {exc}", str(grid_path)) from exc
    if not isinstance(raw, dict):
        raise GridError("a grid file is a YAML mapping with at least `notebook` and `grid`", str(grid_path))
    problems: list[str] = []
    unknown = sorted(set(raw) - set(TOP_LEVEL_KEYS))
    if unknown:
        problems.append(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(TOP_LEVEL_KEYS)}")
    notebook_name = raw.get("notebook")
    notebook = None
    if not isinstance(notebook_name, str) or not notebook_name:
        problems.append("`notebook` (path of the .ipynb to run) is missing")
    else:
        notebook = _resolve_notebook(grid_path, notebook_name)
        if not notebook.is_file():
            problems.append(f"notebook {notebook_name!r} not found (looked for {notebook})")
    grid = _check_axes(raw.get("grid"), "grid", problems)
    fixed = raw.get("fixed") or {}
    if not isinstance(fixed, dict):
        problems.append("`fixed` must be a mapping of parameter -> value")
        fixed = {}
    presets = raw.get("presets") or {}
    if not isinstance(presets, dict):
        problems.append("`presets` must be a mapping of preset name -> {grid, fixed}")
        presets = {}
    for name, preset in presets.items():
        if not isinstance(preset, dict):
            problems.append(f"preset {name!r} must be a mapping with `grid` and/or `fixed`")
            continue
        extra = sorted(set(preset) - set(PRESET_KEYS))
        if extra:
            problems.append(f"preset {name!r}: unknown key(s) {', '.join(extra)}; allowed: {', '.join(PRESET_KEYS)}")
        preset_grid = _check_axes(preset.get("grid"), f"presets.{name}.grid", problems)
        if "device" in preset_grid:
            _check_devices(preset_grid["device"], f"presets.{name}.grid.device", problems)
    if "device" not in grid and "device" not in fixed:
        problems.append("no `device` axis: add `device: [cpu, gpu, tpu]` to the grid (or a fixed device)")
    _check_devices(grid.get("device", []) + ([fixed["device"]] if "device" in fixed else []), "device", problems)
    if problems:
        raise GridError(problems, str(grid_path))
    return GridSpec(grid_path, notebook, grid, dict(fixed), dict(presets), str(raw.get("description", "")))


def _slug_part(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(value)).strip("_") or "x"


def slug_for(params: dict[str, Any], axes: list[str]) -> str:
    """A file name for a combination from its grid axes other than device: 'n-512_dtype-float32'."""
    parts = [f"{_slug_part(key)}-{_slug_part(params[key])}" for key in axes if key != "device"]
    return "_".join(parts) or "default"


def expand(spec: GridSpec, preset: str | None = None, devices: list[str] | None = None) -> list[Combination]:
    """The combinations of `spec` under `preset`, in grid order; `devices` keeps only those devices."""
    grid, fixed = spec.effective(preset)
    axes = list(grid)
    combinations = []
    for values in itertools.product(*(grid[key] for key in axes)):
        params = {**fixed, **dict(zip(axes, values))}
        params["device"] = str(params["device"])
        if devices is not None and params["device"] not in devices:
            continue
        combinations.append(Combination(spec.notebook, params, slug_for(params, axes)))
    return combinations


def device_kind(device: str) -> str:
    """'gpu:2' -> 'gpu'. (The kind decides whether this machine can run a combination.)"""
    kind = parse_device(device).kind
    return kind if kind in DEVICE_KINDS else "auto"
