"""Is this Google Colab, and which accelerator does the runtime have."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

from colabkit.device.probes import tpu_chips_on_pci, tpu_runtime_hint


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


def colab_runtime_info() -> dict[str, Any] | None:
    """What Colab says about this runtime, for a record's host section; None outside Colab."""
    if not in_colab():
        return None

    accelerator, reason = runtime_accelerator()
    return {
        "release_tag": os.environ.get("COLAB_RELEASE_TAG"),
        "accelerator": accelerator,
        "accelerator_evidence": reason,
        "colab_gpu": os.environ.get("COLAB_GPU"),
        "tpu_accelerator_type": os.environ.get("TPU_ACCELERATOR_TYPE"),
        "tpu_pci": tpu_chips_on_pci(),
    }
