"""Keras 3 backends: choosing TensorFlow, JAX or PyTorch, and device set-up for JAX and PyTorch.

Keras reads its backend once, at its first import, so `select_backend` runs before `import keras` in
a fresh kernel. As on TensorFlow, an absent device is an error naming what the machine has, never a
silent CPU run. "auto" (`resolve_backend`) is JAX on a TPU (Colab's TPU runtimes have no TensorFlow),
TensorFlow elsewhere. JAX: `jax.devices(kind)`, several replicas under `keras.distribution.DataParallel`,
"cpu:N" as N XLA host devices, and TensorFlow never loaded (`keep_tensorflow_out`). PyTorch: one
device (`KERAS_TORCH_DEVICE`); several replicas and TPUs are refused plainly. See docs/frameworks.md.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import os
import sys
from typing import Any

from colabkit.device.probes import (
    cpu_info,
    jax_tpu_description,
    nvidia_smi_query,
    tensorflow_tpu_installed,
    tpu_runtime_hint,
)
from colabkit.device.spec import DeviceSetup, parse_device
from colabkit.errors import BackendError, BackendNotInstalledError, BackendUnsupportedError, DeviceNotFoundError
from colabkit.extras import needs

BACKENDS = ("tensorflow", "jax", "torch")
BACKEND_CHOICES = ("auto", *BACKENDS)  # what a notebook's `backend` parameter takes
# Beyond the extra: the builds a GPU or TPU needs
_ACCELERATOR_BUILDS = {"jax": " (an NVIDIA GPU: pip install 'jax[cuda12]'; a TPU: pip install 'jax[tpu]')",
                       "torch": " (a GPU: the CUDA build from pytorch.org that matches your driver)", "tensorflow": ""}


def install_hint(backend: str) -> str:
    """How to install `backend`: its extra's line, and the accelerator builds beyond it."""
    return needs(backend) + _ACCELERATOR_BUILDS[backend]


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
        raise BackendNotInstalledError(f"backend {backend!r} {install_hint(backend)}")
    if "keras" in sys.modules and current_backend() != backend:
        raise BackendError(f"Keras is already running the {current_backend()!r} backend in this process; "
                           f"restart the kernel to use {backend!r} (the backend is fixed when Keras is imported)")
    os.environ["KERAS_BACKEND"] = backend
    return backend


def resolve_backend(backend: str, device: str) -> str:
    """The backend a run on `device` uses: `backend` itself, or for "auto" JAX on a TPU (the device
    'tpu', or 'auto' on a machine with a TPU runtime) and TensorFlow everywhere else.

    Why JAX on a TPU: Colab's TPU runtimes ship JAX and no TensorFlow (since the JAX 0.5 image of
    March 2025), and a TensorFlow TPU build installed beside JAX takes the TPU from it.
    """
    if backend != "auto":
        return backend
    kind = parse_device(device).kind
    on_tpu = kind == "tpu" or (kind == "auto" and tpu_runtime_hint() is not None)
    return "jax" if on_tpu else "tensorflow"


def unsupported_reason(backend: str, device_kind: str) -> str | None:
    """Why `backend` cannot run on `device_kind` on any machine like this one (None if it can)."""
    if backend == "auto":
        backend = resolve_backend(backend, device_kind)
    if backend not in BACKENDS:
        return f"unknown backend {backend!r}"
    if importlib.util.find_spec(backend) is None:
        return f"backend {backend!r} {install_hint(backend)}"
    if backend == "torch" and device_kind == "tpu" and importlib.util.find_spec("torch_xla") is None:
        return "PyTorch on TPU is not supported here: it needs torch_xla, which is not installed"
    return None


class TensorFlowKeptOut(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """An import hook that refuses `import tensorflow` (and its submodules) in a JAX kernel.

    Keras on JAX imports TensorFlow wherever it is installed (`keras.utils.set_random_seed` calls
    `tf.random.set_seed` when it can import it; saving code checks `tf.available`). On a TPU runtime
    the TensorFlow found would be a TPU build, which claims the TPU JAX uses. Refused, Keras takes
    TensorFlow for absent and goes on; any other import of it fails with this message. Asking whether
    it is there (`importlib.util.find_spec`) still answers, without loading it.
    """

    MESSAGE = ("TensorFlow is kept out of this kernel: it runs Keras on JAX (colabkit.setup_device), and a "
               "TensorFlow TPU build loaded beside JAX takes the TPU from it. Use backend='tensorflow' in a "
               "fresh kernel for TensorFlow.")

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.partition(".")[0] == "tensorflow":
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec: Any) -> None:
        raise ModuleNotFoundError(self.MESSAGE, name=spec.name)  # before anything enters sys.modules

    def exec_module(self, module: Any) -> None:  # never reached: create_module refuses
        raise ModuleNotFoundError(self.MESSAGE, name=module.__name__)


def keep_tensorflow_out() -> bool:
    """Refuse every later `import tensorflow` in this process (TensorFlowKeptOut); False when it is
    too late, TensorFlow being loaded already."""
    if any(isinstance(finder, TensorFlowKeptOut) for finder in sys.meta_path):
        return True
    if "tensorflow" in sys.modules:
        return False
    sys.meta_path.insert(0, TensorFlowKeptOut())
    return True


def _hide_gpus_from_tensorflow() -> None:
    """Where TensorFlow is already loaded in this process, keep it off the GPU memory JAX or PyTorch
    will use. It is never imported here: on JAX and PyTorch the input pipelines are NumPy
    (colabkit.training.batches), and a JAX kernel must not load TensorFlow at all."""
    tf = sys.modules.get("tensorflow")
    if tf is None or not hasattr(tf, "config"):
        return
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


def _no_jax_device(requested: str, kind: str) -> DeviceNotFoundError:
    """The error for a device JAX does not see, with what it does see and, on a TPU host, why not."""
    message = f"device '{requested}' requested but JAX on this machine has: {_jax_inventory()}"
    hint = tpu_runtime_hint()
    if kind == "tpu" and hint:
        message += f" (a TPU runtime is here, {hint}, but JAX did not initialise it"
        if tensorflow_tpu_installed():
            message += ("; tensorflow-tpu is installed in this runtime and takes the TPU from JAX, "
                        "jax-ml/jax #29989: run JAX on a fresh runtime")
        message += ")"
    return DeviceNotFoundError(message)


def setup_jax(requested: str, kind: str, count: int | None):
    """A DeviceSetup for the JAX backend (see colabkit.device.setup.setup_device).

    TensorFlow is kept out of the process from here on (keep_tensorflow_out); if it is loaded
    already, a TPU run is refused (the two would fight for the chip). "auto" on a machine with a TPU
    runtime means the TPU: if JAX cannot use it, the run is refused rather than measured on the CPU.
    """
    if kind == "auto" and tpu_runtime_hint():
        kind = "tpu"
    if "tensorflow" in sys.modules and kind == "tpu":
        raise BackendError(f"device '{requested}' with backend 'jax': TensorFlow is already loaded in this "
                           "kernel and would fight JAX for the TPU; restart the kernel and call "
                           "setup_device before anything imports TensorFlow")
    tensorflow_kept_out = keep_tensorflow_out()
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
        raise _no_jax_device(requested, kind)
    used = devices[:wanted]
    jax.config.update("jax_default_device", used[0])
    strategy = None
    if wanted > 1:
        import keras

        strategy = keras.distribution.DataParallel(devices=[f"{device.platform}:{device.id}" for device in used])
        keras.distribution.set_distribution(strategy)
    description: dict[str, Any] = {
        "name": used[0].device_kind, "count": wanted, "jax_devices": [str(device) for device in used],
        "tensorflow_in_kernel": "kept out" if tensorflow_kept_out else "loaded before set-up",
    }
    if kind == "cpu":
        cpu = cpu_info()
        description.update(name=cpu["model"], **cpu)
        if wanted > 1:
            description["logical_devices"] = wanted
    elif kind == "tpu":
        description.update(jax_tpu_description(used))
    elif kind == "gpu":
        description.update(jax_gpu_description(used[0], jax.config))
    return DeviceSetup(requested, kind, strategy, wanted, description, backend="jax", devices=used)


def jax_gpu_description(device: Any, config: Any) -> dict[str, Any]:
    """A JAX GPU's compute capability and whether float32 products run on TF32 there: XLA's DEFAULT
    matmul precision (JAX's default, `jax_default_matmul_precision` unset) computes them in TF32 on
    GPUs of compute capability 8.0 on, so the float32 peak they are held to is TF32's."""
    capability_text = str(getattr(device, "compute_capability", "") or "")
    if not capability_text:  # a jaxlib whose devices do not say: nvidia-smi does (the first GPU: JAX's order)
        capability_text = (nvidia_smi_query(("compute_cap",)) or [{}])[0].get("compute_cap", "")
    try:
        capability: tuple[int, ...] | None = tuple(int(part) for part in capability_text.split("."))
    except ValueError:
        capability = None
    default = getattr(config, "jax_default_matmul_precision", None) in (None, "default", "tensorfloat32")
    return {"compute_capability": capability_text or "unknown", "matmul_precision": "default" if default else
            str(config.jax_default_matmul_precision),
            "tf32_active": bool(default and capability and capability >= (8, 0))}


# --- PyTorch ---------------------------------------------------------------------------------

def setup_torch(requested: str, kind: str, count: int | None):
    """A DeviceSetup for the PyTorch backend (see colabkit.device.setup.setup_device)."""

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
