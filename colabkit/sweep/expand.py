"""From a grid spec to its combinations: axes and zip groups crossed, narrowed to `--device`, named, and
checked for combinations that would run twice or write the same files.

A `Combination` is one run of one notebook: its parameter values, its typed device request (parsed once,
by colabkit.sweep.grids.device_request; read everywhere as `combination.request`), its file name, its
`settings` (repeats, kernel, HTML, bottleneck passes, decided when planned) and which run (`repeat`) it is.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colabkit.device.spec import DeviceRequest
from colabkit.errors import GridError
from colabkit.experiments import rule_problems
from colabkit.sweep.grids import GridSpec, Layer, RunSettings, canonical, device_request
from colabkit.sweep.options import HtmlMode, KernelMode


@dataclass(frozen=True)
class Combination:
    """One run of one notebook: its parameters, the device it asks for, and where its outputs go."""

    notebook: Path
    params: dict[str, Any] = field(hash=False)
    slug: str
    request: DeviceRequest
    # Values the grid gave that do not shape this run (its declaration's `used_when`), left out of
    # `params`: kept only to say why two combinations are one (colabkit.sweep.expand.duplicate_problems).
    unused: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    settings: RunSettings = field(default_factory=RunSettings, compare=False)
    repeat: int = 1  # which independent run of the combination: each its own kernel, record and files

    @property
    def name(self) -> str:
        return self.notebook.stem

    @property
    def device(self) -> str:
        """The `device` value as the grid gave it ('gpu:2'): folder names, labels and tables show it."""
        return str(self.params["device"])

    @property
    def notebook_params(self) -> dict[str, Any]:
        """The parameters this run's notebook is given: its own, with the bottleneck passes off in the
        repeats after the first where its settings ask for them once (`bottlenecks: first`), and with them
        any profile (it needs the passes). The combination (its fingerprint, its records'
        `fingerprint.params`) stays the same for every repeat."""
        if self.settings.bottlenecks == "first" and self.repeat > 1:
            return {**self.params, "breakdown": False, **({"profile_steps": 0} if "profile_steps" in self.params else {})}
        return dict(self.params)

    @property
    def run_slug(self) -> str:
        """The file name of this run: the slug for repeat 1 (as before repeats existed, so earlier results
        are found again), '<slug>_repeat-<r>' for the later ones."""
        return self.slug if self.repeat == 1 else f"{self.slug}_repeat-{self.repeat}"

    @property
    def label(self) -> str:
        """'matmul_tflops cpu n-256_dtype-float32' (repeat 1), '... n-256_dtype-float32_repeat-2': how
        progress lines and tables name it."""
        return f"{self.name} {self.device} {self.run_slug}"

    def with_repeat(self, repeat: int) -> Combination:
        """The same combination, as its run number `repeat`."""
        return dataclasses.replace(self, repeat=repeat)

    def output_base(self, out: Path) -> Path:
        """OUT/<notebook>/<device>/<run slug>: add .ipynb, .json, .html, .log to it."""
        return Path(out) / self.name / self.device.replace(":", "-") / self.run_slug

    def device_section(self) -> dict[str, Any]:
        """The `device` section of a record the sweep writes itself (failed, skipped): what was asked."""
        return {"requested": self.device, "request": self.request.as_record()}


def one_row_per_device(group: dict[str, list[Any]]) -> bool:
    """Whether a zip group lists `device`, each device in one row."""
    devices = group.get("device")
    return devices is not None and len({str(device) for device in devices}) == len(devices)


def distinct_rows(group: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """A zip group with each of its rows once, in order."""
    rows, seen = [], set()
    for row in zip(*group.values()):
        if canonical(row) not in seen:
            seen.add(canonical(row))
            rows.append(row)
    return {key: [row[index] for row in rows] for index, key in enumerate(group)}


SETTINGS = tuple(setting.name for setting in dataclasses.fields(RunSettings))


@dataclass
class Resolved:
    """The values once every layer is applied: what `expand` crosses, and what names its files."""

    axes: dict[str, list[Any]]
    zips: list[dict[str, list[Any]]]
    fixed: dict[str, Any]
    named: list[str] = field(default_factory=list)  # the keys a combination's slug is made of, in order
    settings: RunSettings = field(default_factory=RunSettings)  # each field: the last layer that says

    def forget(self, key: str) -> None:
        """Remove `key` wherever an earlier layer put it. Rows of a zip group told apart by `key` alone
        become one (`-p device=cpu:2` over rows (cpu, tensorflow), (gpu, tensorflow), (tpu, jax) keeps
        the backends tensorflow and jax once each)."""
        self.axes.pop(key, None)
        self.fixed.pop(key, None)
        for group in self.zips:
            group.pop(key, None)
        self.zips = [distinct_rows(group) for group in self.zips if group]

    def apply(self, layer: Layer) -> None:
        said = {name: value for name in SETTINGS if (value := getattr(layer, name)) is not None}
        self.settings = dataclasses.replace(self.settings, **said)
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
        """Grid axes and zip keys, in file order. Keys zipped with `device`, one row per device
        (`backend: [tensorflow, tensorflow, jax]` beside `device: [cpu, gpu, tpu]`), are named by the
        device's folder as the device is, so they are left out of the file name too."""
        tied = {key for group in self.zips if one_row_per_device(group) for key in group}
        return [key for key in [*self.axes, *(key for group in self.zips for key in group)] if key not in tied]

    def pin(self, overrides: dict[str, Any]) -> None:
        """Apply the command line's `-p` values, and name the files by them.

        A combination's slug is made of the keys that vary in the grid file and preset, plus every
        key `-p` sets to another value than the file's fixed one: `-p n=512` over an `n` axis names
        its run `n-512_...` exactly as the unpinned grid's n=512 run (so a finished one is kept), and
        `-p epochs=1` over a fixed `epochs: 10` adds `epochs-1`, beside the normal result, never
        replacing it.
        """
        named = self.varying
        for key, value in overrides.items():
            same_as_fixed = key in self.fixed and canonical(self.fixed[key]) == canonical(value)
            if key not in named and not same_as_fixed:
                named.append(key)
        self.apply(Layer("-p ", fixed=dict(overrides)))
        # A key `-p device=...` freed from its device's row (the backends of a device zip) now varies alone.
        self.named = named + [key for key in self.varying if key not in named]


def resolve(spec: GridSpec, preset: str | None = None, overrides: dict[str, Any] | None = None,
            command_line: Layer | None = None) -> Resolved:
    """The axes, zip groups and fixed values once `preset` and `overrides` are applied, the keys its
    combinations' file names are made of (see Resolved.pin), and how they run: the settings the
    `command_line` layer gives (`--repeats`, `--kernels`, `--html`), else the preset's, else the file's."""
    resolved = Resolved({}, [], {})
    resolved.apply(spec.base)
    if preset is not None:
        if preset not in spec.presets:
            known = ", ".join(sorted(spec.presets)) or "none"
            raise GridError(f"unknown preset {preset!r} (this file has: {known})", str(spec.path))
        resolved.apply(spec.presets[preset])
    if command_line is not None:
        resolved.apply(command_line)
    resolved.pin({key: value for key, value in (overrides or {}).items() if key in spec.parameters})
    return resolved


# The names slug_for makes (letters, digits, '.', '_', '-'; never '.' first): the one form a plan file's slug may take.
SLUG = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


def _slug_part(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(value)).strip("_") or "x"


def slug_for(params: dict[str, Any], keys: list[str]) -> str:
    """A file name for a combination from the keys that name it, device aside: 'n-512_dtype-float32'.
    A key the combination does not have (a parameter that does not shape it) names nothing."""
    parts = [f"{_slug_part(key)}-{_slug_part(params[key])}" for key in keys if key != "device" and key in params]
    return "_".join(parts) or "default"


def device_matches(request: DeviceRequest, wanted: list[DeviceRequest]) -> bool:
    """Whether `request` is one of `wanted`; a name without a count takes every count ('cpu' takes 'cpu:2')."""
    return any(choice == request or (choice.count is None and choice.kind == request.kind) for choice in wanted)


def expand(spec: GridSpec, preset: str | None = None, devices: list[DeviceRequest] | None = None,
           overrides: dict[str, Any] | None = None, command_line: Layer | None = None) -> list[Combination]:
    """The combinations of `spec` under `preset`, `overrides` and the `command_line`'s settings, in grid order.

    Grid axes are crossed with each other and with every zip group; the lists of one zip group
    advance together. `devices` keeps only those devices' combinations. Each combination carries its
    device's typed request (the device values were checked when the file and overrides were), only
    the values that shape it (its experiment's `relevant`: a ParaDnn FC run carries no `cell`), and
    how it runs (its RunSettings, resolved here once: command line, preset, file, default).
    """
    resolved = resolve(spec, preset, overrides, command_line)
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
        request = device_request(params["device"])
        if devices is not None and not device_matches(request, devices):
            continue
        unused: dict[str, Any] = {}
        if spec.experiment is not None:
            unused = {key: params[key] for key in spec.experiment.unused(params)}
            params = spec.experiment.relevant(params)
        combinations.append(Combination(spec.notebook, params, slug_for(params, resolved.named), request, unused,
                                        resolved.settings))
    return combinations


def duplicate_problems(combinations: list[Combination], out: Path) -> list[str]:
    """One problem per combination that would run twice, or whose files another one would overwrite."""
    problems = []
    seen_params: dict[str, Combination] = {}
    seen_paths: dict[Path, Combination] = {}
    for combination in combinations:
        key = canonical([str(combination.notebook), combination.params])
        base = combination.output_base(out)
        if key in seen_params:
            first = seen_params[key]
            differ = sorted(name for name in {**first.unused, **combination.unused}
                            if canonical(first.unused.get(name)) != canonical(combination.unused.get(name)))
            if differ:
                values = "; ".join(f"{name} {first.unused.get(name)!r} and {combination.unused.get(name)!r}"
                                   for name in differ)
                problems.append(f"{combination.label}: asked for twice, differing only in {values}, which do not "
                                f"shape this run (its experiment's declaration): that is one run; give such values "
                                "only where they count (e.g. in a zip group with the values they go with)")
            else:
                problems.append(f"{combination.label}: the combination {combination.params} appears twice "
                                "(the same notebook in two grid files, or a value repeated across layers)")
        elif base in seen_paths:
            other = seen_paths[base]
            problems.append(f"{combination.label}: {combination.params} and {other.params} would write the same "
                            f"files {base}.* (their values differ only in characters a file name cannot hold, or a "
                            "plan file gives them one slug)")
        seen_params.setdefault(key, combination)
        seen_paths.setdefault(base, combination)
    return problems


def expand_all(specs: list[GridSpec], preset: str | None, wanted: list[DeviceRequest] | None,
               overrides: dict[str, Any], out: Path, *, repeats: int | None = None, kernels: KernelMode | None = None,
               html: HtmlMode | None = None) -> list[Combination]:
    """Every combination of `specs` (expand), the command line's settings applied last, checked together: none
    runs twice or writes another's files, every `-p` key changes something, no experiment's rule between its
    parameters is broken; one GridError with every problem."""
    command_line = Layer("--", repeats=repeats, kernels=kernels, html=html)
    combinations, broken = [], []
    for spec in specs:
        expanded = expand(spec, preset, wanted, overrides, command_line)
        combinations += expanded
        broken += rules_broken(spec, expanded)
    problems = duplicate_problems(combinations, out) + unused_overrides(specs, combinations, overrides) + broken
    if problems:
        raise GridError(problems)
    return combinations


def rules_broken(spec: GridSpec, combinations: list[Combination]) -> list[str]:
    """What `combinations` of `spec` break among its experiment's rules between parameters (its declaration's
    `constraints`: ParaDnn's width a multiple of heads, a profile only with the bottleneck passes, inference on
    one device ...), each checked with the values its notebook will be given, as the notebook's own check
    (`start_run`) would refuse them after a kernel started. One line per problem: a problem several
    combinations share is named once, at the first, with how many more share it."""
    if spec.experiment is None:
        return []
    found: dict[str, list[Combination]] = {}
    for combination in combinations:
        for problem in rule_problems(spec.experiment, combination.params):  # each value fits its own: checked above
            found.setdefault(problem, []).append(combination)
    more = {1: " (and 1 more combination alike)", 0: ""}
    return [f"{alike[0].label}: {problem}" + more.get(len(alike) - 1, f" (and {len(alike) - 1} more combinations alike)")
            for problem, alike in found.items()]


def unused_overrides(specs: list[GridSpec], combinations: list[Combination], overrides: dict[str, Any]) -> list[str]:
    """A problem for each `-p` key that some notebook declares but no combination uses (ParaDnn's
    `-p cell=gru` over FC models only: it would change nothing)."""
    problems = []
    for key in overrides:
        owners = [spec for spec in specs if key in spec.parameters and spec.experiment is not None]
        mine = [combination for combination in combinations
                if any(combination.notebook == spec.notebook for spec in owners)]
        if owners and mine and all(key not in combination.params for combination in mine):
            problems.append(f"-p {key}: no combination of this sweep uses `{key}` (its declaration says it does not "
                            f"shape these runs), so it would change nothing")
    return problems
