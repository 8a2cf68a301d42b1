"""Sizes for a notebook run by hand: parameters left at "auto" take a value chosen for the device the
run landed on, so that Run all finishes in minutes there (a CPU, a free Colab T4, a TPU).

Grids give every size explicitly (the published sizes come from their `paper` presets), so a sweep
compares the same work on every device; "auto" is for the person who opens a notebook and clicks.
What was asked and what was used both go into the record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

AUTO = "auto"
SIZED_FOR = {"cpu": "a CPU runtime", "gpu": "a free Colab T4 GPU", "tpu": "a Colab TPU"}


@dataclass(frozen=True)
class Sizes:
    """Parameter values after "auto" was resolved, and how."""

    device_kind: str
    asked: dict[str, Any]
    used: dict[str, Any]
    resolved: list[str] = field(default_factory=list)  # the names that were "auto"

    def __getitem__(self, name: str) -> Any:
        return self.used[name]

    def describe(self) -> str:
        """One line for the notebook's output: which values were chosen for this device."""
        if not self.resolved:
            return "sizes: as given (no parameter was \"auto\")"
        chosen = ", ".join(f"{name}={self.used[name]}" for name in self.resolved)
        return (f"sizes chosen for {SIZED_FOR.get(self.device_kind, self.device_kind)} (parameters left at \"auto\"): "
                f"{chosen}; give values explicitly (or use a grid's `paper` preset) for other sizes")

    def as_record(self) -> dict[str, Any]:
        """The record's `sizes` section: asked and used values, for the auto ones the device they fit."""
        return {"device_kind": self.device_kind, "sized_for": SIZED_FOR.get(self.device_kind, self.device_kind),
                "auto": list(self.resolved), "asked": dict(self.asked), "used": dict(self.used)}


def resolve_auto(values: Mapping[str, Any], sizes: Mapping[str, Mapping[str, Any]], device_kind: str) -> Sizes:
    """Replace each value that is "auto" by `sizes[device_kind][name]`; others stay as given.

    Raises ValueError when a value is "auto" but the table has no size for it on this device kind:
    the notebook's table is incomplete, and a guess would hide it.
    """
    table = sizes.get(device_kind, {})
    used, resolved = {}, []
    for name, value in values.items():
        if isinstance(value, str) and value == AUTO:
            if name not in table:
                raise ValueError(f"{name}='auto' has no size for a {device_kind} device: give {name} a value")
            used[name] = table[name]
            resolved.append(name)
        else:
            used[name] = value
    return Sizes(device_kind, dict(values), used, resolved)
