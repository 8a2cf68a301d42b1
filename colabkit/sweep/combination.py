"""One combination of a sweep: a notebook, its parameter values, its typed device request, its file name.

The device value is parsed once, by `device_request`, when the grid's values are checked and its
combinations made; from then on the sweep (devices, slots, the Dask resources, multi-worker runs,
the decisions) reads `combination.request` and never parses the string again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from colabkit.device.spec import DeviceRequest, parse_device


@lru_cache(maxsize=256)
def _parsed(text: str) -> DeviceRequest:
    return parse_device(text)


def device_request(value: Any) -> DeviceRequest:
    """The request a `device` value names ('gpu:2' -> gpu, 2); UnknownDeviceError if it names none.
    The sweep's one reading of a combination's device (each distinct value is parsed once)."""
    return _parsed(str(value))


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
    kernels: str | None = field(default=None, compare=False)  # its grid's `kernels:` (None: not said)
    html: str | None = field(default=None, compare=False)  # its grid's `html:` (None: not said)

    @property
    def name(self) -> str:
        return self.notebook.stem

    @property
    def device(self) -> str:
        """The `device` value as the grid gave it ('gpu:2'): folder names, labels and tables show it."""
        return str(self.params["device"])

    @property
    def label(self) -> str:
        """'matmul_tflops cpu n-256_dtype-float32': how progress lines and tables name it."""
        return f"{self.name} {self.device} {self.slug}"

    def output_base(self, out: Path) -> Path:
        """OUT/<notebook>/<device>/<slug>: add .ipynb, .json, .html, .log to it."""
        return Path(out) / self.name / self.device.replace(":", "-") / self.slug

    def device_section(self) -> dict[str, Any]:
        """The `device` section of a record the sweep writes itself (failed, skipped): what was asked."""
        return {"requested": self.device, "request": self.request.as_record()}
