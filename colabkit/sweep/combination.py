"""One combination of a sweep: a notebook, its parameter values, its typed device request (parsed once,
by `device_request`; read everywhere as `combination.request`), its file name, its `settings`
(repeats, kernel, HTML, bottleneck passes, decided when planned) and which run (`repeat`) it is.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from colabkit.device.spec import DeviceRequest, parse_device
from colabkit.sweep.options import BottleneckMode, HtmlMode, KernelMode


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
    grid file, else these defaults (colabkit.sweep.layers.Resolved)."""

    repeats: int = 1  # independent runs of it, each its own kernel and record
    kernels: KernelMode = "fresh"  # a fresh kernel per run, or warm ones (colabkit.sweep.kernels)
    html: HtmlMode = "all"  # which of its runs get an HTML export
    bottlenecks: BottleneckMode = "all"  # "first": its repeats after the first run with breakdown=False


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
