"""Keras 3 backends: choosing TensorFlow, JAX or PyTorch, and device set-up for JAX and PyTorch.

Keras reads its backend once, when it is first imported, so `select_backend` must run before
`import keras` in a fresh kernel (papermill starts one per combination, which is what makes the
backend a sweep axis). Device set-up follows the same rule as on TensorFlow (`colabkit.device`):
a requested device that is absent is an error naming what the machine has, never a silent CPU run.

- JAX: devices from `jax.devices(kind)`; several replicas run under
  `keras.distribution.DataParallel`; "cpu:N" asks XLA for N host devices (set before JAX starts).
- PyTorch: Keras's torch backend places everything on one device (`KERAS_TORCH_DEVICE`); it has no
  data-parallel distribution, and a TPU needs torch_xla, so those requests are refused plainly.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from typing import Any

from colabkit.device.probes import cpu_info
from colabkit.device.spec import DeviceSetup
from colabkit.errors import BackendError, BackendNotInstalledError, BackendUnsupportedError, DeviceNotFoundError

BACKENDS = ("tensorflow", "jax", "torch")
_INSTALL_HINTS = {
    "tensorflow": "pip install tensorflow",
    "jax": "pip install jax (CPU); pip install 'jax[cuda12]' (NVIDIA GPU); pip install 'jax[tpu]' (TPU)",
    "torch": ("pip install torch (see pytorch.org for the CUDA build that matches your driver; on this "
              "project's CPU machines `pip install torch==2.13.0` takes the CPU build on disk)"),
}


def current_backend() -> str:
    """The backend Keras uses (or will use) in this process: the loaded one, else KERAS_BACKEND."""
    keras = sys.modules.get("keras")
    if keras is not None and hasattr(keras, "backend"):
        return keras.backend.backend()
    return os.environ.get("KERAS_BACKEND", "tensorflow")


def select_backend(backend: str) -> str:
    """Make `backend` Keras's backend for this process; call before Keras is imported.

    Raises BackendError for an unknown name or when Keras already runs another backend (the kernel
    must be restarted), BackendNotInstalledError naming the pip command when its package is missing.
    """
    if backend not in BACKENDS:
        raise BackendError(f"unknown backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    if importlib.util.find_spec(backend) is None:
        raise BackendNotInstalledError(f"backend {backend!r} needs the package {backend!r}, which is not "
                                       f"installed: {_INSTALL_HINTS[backend]}")
    if "keras" in sys.modules and current_backend() != backend:
        raise BackendError(f"Keras is already running the {current_backend()!r} backend in this process; "
                           f"restart the kernel to use {backend!r} (the backend is fixed when Keras is imported)")
    os.environ["KERAS_BACKEND"] = backend
    return backend


def unsupported_reason(backend: str, device_kind: str) -> str | None:
    """Why `backend` cannot run on `device_kind` on any machine like this one (None if it can)."""
    if backend not in BACKENDS:
        return f"unknown backend {backend!r}"
    if importlib.util.find_spec(backend) is None:
        return f"backend {backend!r} is not installed ({_INSTALL_HINTS[backend]})"
    if backend == "torch" and device_kind == "tpu" and importlib.util.find_spec("torch_xla") is None:
        return "PyTorch on TPU is not supported here: it needs torch_xla, which is not installed"
    return None


def _hide_gpus_from_tensorflow() -> None:
    """tf.data feeds every backend; keep TensorFlow off the GPU memory JAX or PyTorch will use."""
    if importlib.util.find_spec("tensorflow") is None:
        return
    import tensorflow as tf

    with contextlib.suppress(RuntimeError):  # TF already initialised: nothing left to hide
        tf.config.set_visible_devices([], "GPU")


# --- JAX -------------------------------------------------------------------------------------

def _jax_devices(kind: str) -> list[Any]:
    import jax

    try:
        return list(jax.devices(kind))
    except RuntimeError:  # JAX raises this for a platform it does not have
        return []


def _jax_inventory() -> str:
    return ", ".join(f"{kind.upper()}:{index}" for kind in ("cpu", "gpu", "tpu")
                     for index in range(len(_jax_devices(kind)))) or "no devices"


def setup_jax(requested: str, kind: str, count: int | None):
    """A DeviceSetup for the JAX backend (see colabkit.device.setup_device)."""

    if kind == "cpu" and "jax" not in sys.modules:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")  # a CPU run never touches an accelerator
        if count and count > 1:
            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                       f" --xla_force_host_platform_device_count={count}").strip()
    _hide_gpus_from_tensorflow()
    import jax

    if kind == "auto":
        kind = jax.default_backend()
    devices = _jax_devices(kind)
    wanted = count or (1 if kind == "cpu" else len(devices))
    if not devices or wanted > len(devices):
        raise DeviceNotFoundError(f"device '{requested}' requested but JAX on this machine has: {_jax_inventory()}")
    used = devices[:wanted]
    jax.config.update("jax_default_device", used[0])
    strategy = None
    if wanted > 1:
        import keras

        strategy = keras.distribution.DataParallel(devices=[f"{device.platform}:{device.id}" for device in used])
        keras.distribution.set_distribution(strategy)
    first = used[0]
    description: dict[str, Any] = {"name": cpu_info()["model"] if kind == "cpu" else first.device_kind,
                                   "count": wanted, "jax_devices": [str(device) for device in used]}
    if kind == "cpu":
        description.update(cpu_info())
        if wanted > 1:
            description["logical_devices"] = wanted
    return DeviceSetup(requested, kind, strategy, wanted, description, backend="jax")


# --- PyTorch ---------------------------------------------------------------------------------

def setup_torch(requested: str, kind: str, count: int | None):
    """A DeviceSetup for the PyTorch backend (see colabkit.device.setup_device)."""

    if kind == "tpu":
        reason = unsupported_reason("torch", "tpu")
        if reason:
            raise BackendUnsupportedError(f"device '{requested}' with backend 'torch': {reason}")
    if count and count > 1:
        raise BackendUnsupportedError(f"device '{requested}' with backend 'torch': Keras's PyTorch backend "
                                      "trains on one device (it has no data-parallel distribution); use one device")
    _hide_gpus_from_tensorflow()
    import torch

    cuda = torch.cuda.is_available()
    if kind == "auto":
        kind = "gpu" if cuda else "cpu"
    if kind == "gpu" and not cuda:
        raise DeviceNotFoundError(f"device '{requested}' requested but PyTorch on this machine sees no CUDA "
                                  f"GPU (torch {torch.__version__}, built for CUDA {torch.version.cuda})")
    target = {"cpu": "cpu", "gpu": "cuda:0", "tpu": "xla"}[kind]
    keras_loaded = "keras" in sys.modules and hasattr(sys.modules["keras"], "backend")
    if keras_loaded:
        from keras.src.backend.torch.core import get_device

        if get_device() != target and not (target == "cuda:0" and get_device() == "cuda"):
            raise BackendError(f"Keras already placed its PyTorch backend on {get_device()!r}; restart the "
                               f"kernel and call setup_device('{requested}') before importing keras")
    os.environ["KERAS_TORCH_DEVICE"] = target
    if kind == "gpu":
        properties = torch.cuda.get_device_properties(0)
        description: dict[str, Any] = {
            "name": properties.name, "count": 1,
            "compute_capability": f"{properties.major}.{properties.minor}",
            "memory_gib": round(properties.total_memory / 2**30, 1),
            "tf32_active": bool(torch.backends.cuda.matmul.allow_tf32) and properties.major >= 8,
        }
    elif kind == "cpu":
        description = {"name": cpu_info()["model"], **cpu_info(), "torch_threads": torch.get_num_threads()}
    else:
        description = {"name": "TPU (torch_xla)", "count": 1}
    return DeviceSetup(requested, kind, None, 1, description, backend="torch")
