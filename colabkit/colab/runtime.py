"""Is this Google Colab, which accelerator does the runtime have, and which was asked for.

What a record says about the accelerator (colabkit.records.record.make_record):
- `accelerator_found`: the accelerator the runtime really has: the GPU's name as the driver gives it, a TPU's `device_kind`
  (JAX) or accelerator type (TensorFlow), 'none' on a runtime without one (a CPU run on a GPU runtime names its GPU);
- `accelerator_asked`: the runtime type asked for, from COLABKIT_ACCELERATOR_ASKED where whoever started the
  runtime set it (colab_sweep.ipynb from its form, a Colab CLI executor from its `--accelerator`), else null;
- `colab_runtime_version`: Colab's COLAB_RELEASE_TAG (its image's release, e.g.
  'release-colab-external-images_20260917-060051_RC00'), null outside Colab.
A runtime may grant another accelerator than the one asked for (an H100 falling back to a G4, an A100 to
an L4: googlecolab/colabtools #5976, #5719): `accelerator_mismatch` then says so.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass
from typing import Any, Literal

from colabkit.device.peaks import tpu_generation
from colabkit.device.probes import nvidia_smi, tpu_chips_on_pci, tpu_runtime_hint

ASKED_VARIABLE = "COLABKIT_ACCELERATOR_ASKED"


@dataclass(frozen=True)
class RuntimeType:
    """One of Colab's accelerator runtime types, in each spelling colabkit meets it: `dialog`, the name in Runtime >
    Change runtime type ("v5e-1"); `cli`, the Colab CLI's (`colab new --tpu v5e1`; None where it offers none);
    `metadata`, a notebook's `colab.gpuType` ("V5E1"). `kind` and `model`, the device it grants as the peaks table
    knows it; `gpu_name`, a pattern on the GPU's name as the driver gives it (a TPU's is its generation, `model`)."""

    dialog: str
    cli: str | None
    kind: Literal["gpu", "tpu"]
    model: str
    gpu_name: str | None = None
    retired: bool = False  # no longer offered: known only to read old records

    @property
    def metadata(self) -> str:
        return self.dialog.replace("-", "").upper()

    @property
    def label(self) -> str:
        """What the dialog shows: 'T4 GPU', 'v5e-1 TPU'."""
        return f"{self.dialog} {self.kind.upper()}"


# Colab's runtime types today (docs/colab.md; the v2-8 TPU was retired in September 2025).
RUNTIME_TYPES = (
    RuntimeType("T4", "T4", "gpu", "Tesla T4", r"\bT4\b"),
    RuntimeType("L4", "L4", "gpu", "NVIDIA L4", r"\bL4\b"),
    RuntimeType("A100", "A100", "gpu", "NVIDIA A100-SXM4-40GB", "A100"),
    RuntimeType("H100", "H100", "gpu", "NVIDIA H100 80GB HBM3", "H100"),
    RuntimeType("G4", "G4", "gpu", "NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000"),
    RuntimeType("v5e-1", "v5e1", "tpu", "v5e"),
    RuntimeType("v6e-1", "v6e1", "tpu", "v6e"),
    RuntimeType("v2-8", None, "tpu", "v2", retired=True),
)
# What `sweep --colab` accepts, in the Colab CLI's spelling: its device kind and model.
CLI_ACCELERATORS: dict[str, tuple[str, str]] = {
    runtime.cli: (runtime.kind, runtime.model) for runtime in RUNTIME_TYPES if runtime.cli}
NO_ACCELERATOR = "none"


def runtime_type(name: str) -> RuntimeType | None:
    """The runtime type `name` spells in any of its spellings, any case ('v5e-1', 'v5e1', 'V5E1'); None if none."""
    plain = name.strip().replace("-", "").lower()
    return next((runtime for runtime in RUNTIME_TYPES if runtime.metadata.lower() == plain), None)


def in_colab() -> bool:
    """True inside a Google Colab runtime (its kernel, or a process it started, e.g. papermill's)."""
    return "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ


def runtime_accelerator() -> tuple[str, str]:
    """The accelerator this machine offers, ('cpu' | 'gpu' | 'tpu', why), without importing TensorFlow.

    TPU: a TPU environment variable or device file (colabkit.device.tpu_runtime_hint); GPU:
    nvidia-smi on the PATH, or Colab's COLAB_GPU=1.
    """

    hint = tpu_runtime_hint()
    if hint:
        return "tpu", hint
    if shutil.which("nvidia-smi"):
        return "gpu", "nvidia-smi is on the PATH"
    if os.environ.get("COLAB_GPU") == "1":
        return "gpu", "COLAB_GPU=1"
    return "cpu", "no TPU hint, no nvidia-smi"


def colab_runtime_version() -> str | None:
    """Colab's runtime version: its COLAB_RELEASE_TAG (the image's release, dated); None outside Colab."""
    return os.environ.get("COLAB_RELEASE_TAG") or None


def accelerator_asked() -> str | None:
    """The accelerator the run was asked for (COLABKIT_ACCELERATOR_ASKED), None where nobody said."""
    return os.environ.get(ASKED_VARIABLE, "").strip() or None


def accelerator_found(device: dict[str, Any] | None = None) -> str:
    """The accelerator the runtime has: from a run's `device` section when the run used it (the GPU's name
    from the driver, the TPU's device_kind or accelerator type), else what this machine shows (a CPU run, or a
    run that never started: nvidia-smi's first GPU, the TPU runtime's accelerator type or chips' generation);
    'none' on a machine without one."""
    device = device or {}
    if device.get("kind") == "gpu":
        return str(device.get("name") or "unknown GPU")
    if device.get("kind") == "tpu":
        return str(device.get("device_kind") or device.get("accelerator_type") or device.get("name") or "unknown TPU")
    gpus = nvidia_smi()
    if gpus:
        return gpus[0]["name"]
    if tpu_runtime_hint():
        pci = tpu_chips_on_pci()
        return os.environ.get("TPU_ACCELERATOR_TYPE") or (f"TPU {pci['generation']}" if pci else "unknown TPU")
    return NO_ACCELERATOR


def accelerator_mismatch(asked: str | None, found: str) -> str | None:
    """A sentence when the accelerator found is not the one asked for; None when they agree, when nothing
    was asked, or when `asked` is no runtime type colabkit knows (it cannot tell)."""
    if not asked:
        return None
    wanted = runtime_type(asked)  # 'v5e-1' as Colab's dialog says it, 'V5E1' as its metadata does
    if asked.lower() in ("cpu", NO_ACCELERATOR):
        agrees = found == NO_ACCELERATOR
    elif wanted is None:
        return None
    else:
        agrees = grants(wanted, found)
    return None if agrees else f"asked for {asked}, ran on {found}: recorded as what ran"


def grants(runtime: RuntimeType, found: str) -> bool:
    """Whether `found` (a record's `accelerator_found`) is the accelerator `runtime` grants: a TPU of its generation,
    a GPU whose name matches its pattern."""
    if runtime.kind == "tpu":
        return tpu_generation(found) == runtime.model
    return found != NO_ACCELERATOR and re.search(str(runtime.gpu_name), found, flags=re.IGNORECASE) is not None


def granted_runtime_type(found: str) -> RuntimeType | None:
    """The runtime type whose accelerator `found` (a record's `accelerator_found`) is: 'Tesla T4' -> T4, 'TPU v5 lite'
    -> v5e-1; None for 'none' (no accelerator) and for an accelerator no runtime type grants (a V100, an H200)."""
    return next((runtime for runtime in RUNTIME_TYPES if grants(runtime, found)), None)


def colab_runtime_info() -> dict[str, Any] | None:
    """What Colab says about this runtime, for a record's host section; None outside Colab."""
    if not in_colab():
        return None

    accelerator, reason = runtime_accelerator()
    return {
        "release_tag": os.environ.get("COLAB_RELEASE_TAG"),
        "backend_version": os.environ.get("COLAB_BACKEND_VERSION"),  # seen as 'next'; meaning undocumented
        "image_type": os.environ.get("COLAB_IMAGE_TYPE"),  # 'gpu', 'tpu', ... where Colab sets it
        "accelerator": accelerator,
        "accelerator_evidence": reason,
        "colab_gpu": os.environ.get("COLAB_GPU"),
        "tpu_accelerator_type": os.environ.get("TPU_ACCELERATOR_TYPE"),
        "tpu_pci": tpu_chips_on_pci(),
    }
