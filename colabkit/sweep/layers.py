"""Layers of values: a grid file's own, then a preset's, then the command line's (`-p KEY=VALUE`,
`--repeats`, `--kernels`, `--html`). A later layer's key replaces the earlier one wherever it was
(`-p batch_size=64` pins an axis). `Resolved` is what is left: the axes and zip groups `expand`
crosses, the fixed values, the keys of a file name, and the RunSettings (the last layer that says wins).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from colabkit.sweep.combination import RunSettings
from colabkit.sweep.options import BottleneckMode, HtmlMode, KernelMode


def canonical(value: Any) -> str:
    """A value as JSON text: equal texts, equal values (1, 1.0 and True stay apart)."""
    return json.dumps(value, sort_keys=True, default=str)


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

    def located_values(self) -> list[tuple[str, str, list[Any]]]:
        """(where, key, values) for every key this layer sets; a fixed value is a one-value list."""
        found = [(f"{self.where}grid.{key}", key, values) for key, values in self.grid.items()]
        for index, group in enumerate(self.zips):
            found += [(f"{self.where}zip[{index}].{key}", key, values) for key, values in group.items()]
        found += [(f"{self.where}fixed.{key}", key, [value]) for key, value in self.fixed.items()]
        return found


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
