"""colabkit's optional parts (pyproject.toml's extras): which module each brings, and the one line that says
how to install it. The core (the notebooks and the report on TensorFlow) needs none of them; a run that needs an
absent one is skipped or refused with `needs(...)`'s words (docs/install.md lists what each feature needs)."""

from __future__ import annotations

import importlib.util
from typing import Literal

Extra = Literal["tensorflow", "jax", "torch", "cluster", "profile", "gpu"]
MODULES: dict[Extra, str] = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch", "cluster": "distributed",
                             "profile": "xprof", "gpu": "pynvml"}
WHAT = {"tensorflow": "tensorflow: Keras on TensorFlow", "jax": "jax: Keras on JAX",
        "torch": "torch: Keras on PyTorch", "cluster": "dask's distributed: sweeps on a cluster, --cluster",
        "profile": "xprof: summaries of profile_steps traces", "gpu": "nvidia-ml-py: NVIDIA GPUs' power and energy"}


def installed(extra: Extra) -> bool:
    """Whether `extra`'s module can be imported here (found without importing it)."""
    return importlib.util.find_spec(MODULES[extra]) is not None


def needs(extra: Extra) -> str:
    """The words for what is missing: "needs the jax extra (Keras on JAX): pip install 'colabkit[jax]' ..."."""
    return (f"needs the {extra} extra ({WHAT[extra]}), which is not installed: pip install 'colabkit[{extra}]' "
            "(in a checkout, ./run.sh test installs every extra: docs/install.md)")
