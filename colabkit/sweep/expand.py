"""A validated grid file's combinations: crossed axes and zip groups, narrowed to `--device`, named,
and checked for combinations that would run twice or write the same files."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

from colabkit.device.spec import DeviceRequest
from colabkit.errors import UnknownDeviceError
from colabkit.sweep.combination import Combination, device_request
from colabkit.sweep.gridfile import GridSpec
from colabkit.sweep.layers import Layer, canonical


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
