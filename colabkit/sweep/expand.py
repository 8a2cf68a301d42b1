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
from colabkit.errors import UnknownDeviceError
from colabkit.sweep.grids import GridSpec, Layer, RunSettings, canonical, device_request


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


def _slug_part(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(value)).strip("_") or "x"


def slug_for(params: dict[str, Any], keys: list[str]) -> str:
    """A file name for a combination from the keys that name it, device aside: 'n-512_dtype-float32'.
    A key the combination does not have (a parameter that does not shape it) names nothing."""
    parts = [f"{_slug_part(key)}-{_slug_part(params[key])}" for key in keys if key != "device" and key in params]
    return "_".join(parts) or "default"


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
    resolved = spec.resolve(preset, overrides, command_line)
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
                            f"files {base}.* (their values differ only in characters a file name cannot hold)")
        seen_params.setdefault(key, combination)
        seen_paths.setdefault(base, combination)
    return problems
