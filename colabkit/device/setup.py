"""Device set-up: the tf.distribute strategy for a requested device, and what that device is.

`setup_device("gpu")` returns a `DeviceSetup` for the machine's GPUs or raises `DeviceNotFoundError`
naming what it has: never a fallback (a CPU run labelled GPU is the worst bug a benchmark can have).
Names: "auto" (TPU, else GPU, else CPU), "cpu", "gpu", "tpu", "cpu:N" (N logical CPU devices under
MirroredStrategy), "gpu:N". One device runs under the default strategy, as plain Keras does:
OneDeviceStrategy made the CNN's epochs ~40 % slower here and turns off Keras's XLA on GPUs
(docs/multi-device.md); a CPU run beside GPUs TensorFlow cannot hide keeps it, to pin the CPU.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from colabkit.device.backends import current_backend, resolve_backend, select_backend, setup_jax, setup_torch
from colabkit.device.multiworker import setup_multi_worker
from colabkit.device.peaks import tpu_generation
from colabkit.device.probes import (
    TPU_ENV_HINTS,
    cpu_info,
    gpu_description,
    machine_inventory,
    physical_devices,
    tpu_chips_on_pci,
    tpu_runtime_hint,
)
from colabkit.device.spec import MULTI_WORKER, DeviceRequest, DeviceSetup, parse_device
from colabkit.device.stand_in import stand_in
from colabkit.errors import BackendUnsupportedError, DeviceNotFoundError, DeviceSetupError
from colabkit.phases import phase

_SETUPS: dict[str, DeviceSetup] = {}


def setup_device(device: str = "auto", backend: str | None = None) -> DeviceSetup:
    """Build the distribution strategy for `device` and describe the hardware behind it.

    `backend` ("tensorflow", "jax", "torch", "auto") selects Keras's backend first: call this before
    `import keras`; None keeps Keras's. It installs nothing (in Colab, the set-up cell's `colabkit.bootstrap` and
    `colabkit.start_run` did). Raises DeviceNotFoundError, naming the machine's inventory, when the device is absent.
    A second call in one process returns the same set-up (a TPU is initialised once).
    """

    request = parse_device(device)
    if backend:
        backend = resolve_backend(backend, str(request))
    backend = select_backend(backend) if backend else current_backend()
    key = f"{backend}/{request}"
    if key not in _SETUPS:
        if backend == "tensorflow" and request.kind != MULTI_WORKER:
            import tensorflow  # noqa: F401 - imported here, so that `device_setup` times the set-up alone
        with phase("device_setup"):
            setup = _build(request, backend)
        _SETUPS[key] = setup
        _SETUPS.setdefault(f"{backend}/{DeviceRequest(setup.kind, request.count)}", setup)
    return _SETUPS[key]


def _build(request: DeviceRequest, backend: str = "tensorflow") -> DeviceSetup:
    if (test_device := stand_in()) and request.kind == test_device.kind:  # the tests' seam: the CPU, labelled
        cpu = _build(DeviceRequest("cpu", None), backend)
        return dataclasses.replace(cpu, requested=str(request), kind=request.kind,
                                   description={**cpu.description, "name": test_device.name, "stand_in": "cpu"})
    if request.kind == MULTI_WORKER:
        if backend != "tensorflow":
            raise BackendUnsupportedError(f"device '{request}' runs TensorFlow's MultiWorkerMirroredStrategy; "
                                          f"backend {backend!r} has no multi-worker path here")
        return setup_multi_worker(str(request), request.count)
    if backend == "jax":
        return setup_jax(str(request), request.kind, request.count)
    if backend == "torch":
        return setup_torch(str(request), request.kind, request.count)
    if request.kind == "auto":
        if tpu_runtime_hint():
            return _setup_tpu("auto")
        if physical_devices("GPU"):
            return _setup_gpu("auto", None)
        return _setup_cpu("auto", None)
    if request.kind == "tpu":
        return _setup_tpu(str(request))
    if request.kind == "gpu":
        return _setup_gpu(str(request), request.count)
    return _setup_cpu(str(request), request.count)


def _setup_cpu(requested: str, count: int | None) -> DeviceSetup:
    import tensorflow as tf

    info = cpu_info()
    description: dict[str, Any] = {"name": info["model"], **info}
    gpus_hidden = False
    if physical_devices("GPU"):
        # Keep every op of a CPU run off the GPU, not only those under the strategy's scope.
        try:
            tf.config.set_visible_devices([], "GPU")
            gpus_hidden = True
        except RuntimeError:
            gpus_hidden = False  # TF already initialised: OneDeviceStrategy still pins the model
        description["gpus_hidden"] = gpus_hidden
    replicas = count or 1
    if replicas == 1 and (gpus_hidden or not physical_devices("GPU")):
        strategy = tf.distribute.get_strategy()  # plain Keras (module docstring)
    elif replicas == 1:
        strategy = tf.distribute.OneDeviceStrategy("/cpu:0")  # GPUs still visible: pin the model to the CPU
    else:
        _configure_logical_cpus(replicas)
        description["logical_devices"] = replicas
        strategy = tf.distribute.MirroredStrategy(devices=[f"/cpu:{index}" for index in range(replicas)])
    return DeviceSetup(requested, "cpu", strategy, strategy.num_replicas_in_sync, description)


def _configure_logical_cpus(count: int) -> None:
    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError as exc:
        existing = len(tf.config.list_logical_devices("CPU"))
        if existing != count:
            raise DeviceSetupError(
                f"device 'cpu:{count}' needs {count} logical CPU devices, but TensorFlow was already "
                f"initialised with {existing}; call setup_device first thing in a fresh kernel"
            ) from exc


def _setup_gpu(requested: str, count: int | None) -> DeviceSetup:
    import tensorflow as tf

    gpus = physical_devices("GPU")
    wanted = count or len(gpus)
    if not gpus or wanted > len(gpus):
        raise DeviceNotFoundError(f"device '{requested}' requested but this machine has: {machine_inventory()}")
    used = gpus[:wanted]
    description = gpu_description(used)
    description["count"] = wanted
    if wanted == 1:
        strategy = tf.distribute.get_strategy()  # GPU:0, TensorFlow's default placement
    else:
        strategy = tf.distribute.MirroredStrategy(devices=[f"/gpu:{index}" for index in range(wanted)])
    return DeviceSetup(requested, "gpu", strategy, strategy.num_replicas_in_sync, description)


def _setup_tpu(requested: str) -> DeviceSetup:
    hint = tpu_runtime_hint()
    if hint is None:
        raise DeviceNotFoundError(
            f"device '{requested}' requested but this machine has: {machine_inventory()} "
            f"(no TPU runtime: none of {', '.join(TPU_ENV_HINTS)} is set and no TPU device file exists)"
        )
    import tensorflow as tf

    legacy_address = os.environ.get("COLAB_TPU_ADDR")
    try:
        if legacy_address:  # the retired Colab TPU node runtime
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=f"grpc://{legacy_address}")
            tf.config.experimental_connect_to_cluster(resolver)
        else:  # TPU VM runtimes (today's Colab): the TPU is local
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
        topology = tf.tpu.experimental.initialize_tpu_system(resolver)
        strategy = tf.distribute.TPUStrategy(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DeviceNotFoundError(
            f"device '{requested}' requested and {hint}, but the TPU did not initialise ({first_line}); "
            f"this machine has: {machine_inventory()}"
        ) from exc
    accelerator_type = os.environ.get("TPU_ACCELERATOR_TYPE")
    pci = tpu_chips_on_pci()
    if accelerator_type:
        name = f"TPU {accelerator_type}"
    elif pci:  # no accelerator type in the environment: the chips' PCI ids still name the generation
        name = f"TPU {pci['generation']} ({pci['chips']} chip{'s' if pci['chips'] > 1 else ''}, from PCI ids)"
    else:
        name = "TPU (type unknown)"
    description = {
        "name": name,
        "accelerator_type": accelerator_type,
        "tpu_generation": tpu_generation(accelerator_type) or (pci["generation"] if pci else None),
        "tpu_chips": pci["chips"] if pci else None,
        "cores": strategy.num_replicas_in_sync,
        "hosts": getattr(topology, "num_tasks", None),
        "runtime": "tpu-node (COLAB_TPU_ADDR)" if legacy_address else "tpu-vm (local)",
    }
    return DeviceSetup(requested, "tpu", strategy, strategy.num_replicas_in_sync, description)
