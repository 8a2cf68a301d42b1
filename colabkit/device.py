"""Device set-up: the tf.distribute strategy for a requested device, and what that device is.

`setup_device("gpu")` either returns a `DeviceSetup` for the machine's GPUs or raises
`DeviceNotFoundError` naming what the machine does have. It never falls back to another device:
a CPU run labelled GPU would be the worst bug a benchmark suite can have.

Device names: "auto" (TPU, else GPU, else CPU), "cpu", "gpu", "tpu", plus a replica count for
"cpu:N" (N logical CPU devices under MirroredStrategy: the multi-replica code path, runnable on any
machine) and "gpu:N" (the first N GPUs).
"""

from __future__ import annotations

import contextlib
import glob
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

from colabkit.errors import ColabkitError, DeviceNotFoundError, UnknownDeviceError
from colabkit.peaks import PeakFlops, cpu_peak, gpu_peak, tpu_generation, tpu_peak

DEVICE_KINDS = ("cpu", "gpu", "tpu")
MULTI_WORKER = "multiworker"  # MultiWorkerMirroredStrategy over the cluster in TF_CONFIG
DEVICE_CHOICES = ("auto",) + DEVICE_KINDS + (MULTI_WORKER,)
_COUNTED = ("cpu", "gpu", MULTI_WORKER)
_TPU_ENV_HINTS = ("COLAB_TPU_ADDR", "TPU_NAME", "TPU_ACCELERATOR_TYPE")
_TPU_DEVICE_GLOBS = ("/dev/accel*", "/dev/vfio/[0-9]*")
_PCI_DEVICES = "/sys/bus/pci/devices"
_GOOGLE_PCI_VENDOR = "0x1ae0"
# PCI device id of a Google TPU chip -> its generation (the ids JAX's hardware probe uses).
# v2 and v3 share one id, so it names both and no peak is derived from it.
_TPU_PCI_GENERATIONS = {"0x0027": "v2 or v3", "0x005e": "v4", "0x0062": "v5p", "0x0063": "v5e",
                        "0x006f": "v6e", "0x0076": "tpu7x"}


@dataclass(frozen=True)
class DeviceRequest:
    """A parsed device name: its kind and, where given, how many devices to use."""

    kind: str
    count: int | None = None

    def __str__(self) -> str:
        return self.kind if self.count is None else f"{self.kind}:{self.count}"


def parse_device(device: str) -> DeviceRequest:
    """Parse 'cpu', 'gpu:2', 'auto'... Raises UnknownDeviceError on anything else."""
    text = str(device).strip().lower()
    kind, sep, count_text = text.partition(":")
    if kind not in DEVICE_CHOICES:
        raise UnknownDeviceError(
            f"unknown device {device!r}: expected one of {', '.join(DEVICE_CHOICES)} "
            "(cpu and gpu take a replica count, e.g. 'cpu:2', 'gpu:4'; multiworker a worker count)"
        )
    if not sep:
        return DeviceRequest(kind)
    if kind not in _COUNTED or not count_text.isdigit() or int(count_text) < 1:
        raise UnknownDeviceError(
            f"unknown device {device!r}: only cpu and gpu take a replica count and multiworker a worker "
            "count, a whole number >= 1 (e.g. 'cpu:2', 'gpu:4', 'multiworker:2')"
        )
    return DeviceRequest(kind, int(count_text))


# --- what the machine has -------------------------------------------------------------------

def cpu_info() -> dict[str, Any]:
    """The host CPU: model name, logical cores usable by this process, clock, relevant ISA flags."""
    model, clock_mhz, flags = platform.processor() or platform.machine(), None, set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "model name" and value:
                    model = value
                elif key == "cpu MHz" and clock_mhz is None:
                    clock_mhz = float(value)
                elif key == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass  # not Linux: keep platform's answer
    clock_source = "/proc/cpuinfo cpu MHz"
    max_freq = "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"
    if os.path.exists(max_freq):
        with open(max_freq, encoding="utf-8") as freq:
            clock_mhz, clock_source = int(freq.read().strip()) / 1000.0, "cpufreq max"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    wanted = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile", "sse2")
    return {
        "model": model,
        "cores": cores,
        "clock_mhz": clock_mhz,
        "clock_source": clock_source,
        "flags": sorted(flag for flag in wanted if flag in flags),
        "arch": platform.machine(),
    }


def _physical_devices(kind: str) -> list[Any]:
    import tensorflow as tf

    return list(tf.config.list_physical_devices(kind.upper()))


def tpu_runtime_hint() -> str | None:
    """Why this machine looks like a TPU host (an env variable or a TPU device file), or None."""
    for name in _TPU_ENV_HINTS:
        if os.environ.get(name):
            return f"{name} is set"
    for pattern in _TPU_DEVICE_GLOBS:
        found = sorted(glob.glob(pattern))
        if found:
            return f"{found[0]} exists"
    return None


def tpu_chips_on_pci(devices_dir: str | None = None) -> dict[str, Any] | None:
    """The TPU chips attached over PCI: {'generation', 'chips', 'pci_device_id'}; None if there are none.

    Read from sysfs without loading any TPU runtime, so it works before TensorFlow is imported and
    names the generation even where TPU_ACCELERATOR_TYPE is not set.
    """
    found: dict[str, int] = {}
    for vendor_path in glob.glob(os.path.join(devices_dir or _PCI_DEVICES, "*", "vendor")):
        try:
            with open(vendor_path, encoding="utf-8") as vendor:
                if vendor.read().strip() != _GOOGLE_PCI_VENDOR:
                    continue
            with open(os.path.join(os.path.dirname(vendor_path), "device"), encoding="utf-8") as device:
                device_id = device.read().strip()
        except OSError:
            continue  # a device that vanished or cannot be read is not evidence of a TPU
        if device_id in _TPU_PCI_GENERATIONS:
            found[device_id] = found.get(device_id, 0) + 1
    if not found:
        return None
    device_id, chips = max(found.items(), key=lambda item: item[1])
    return {"generation": _TPU_PCI_GENERATIONS[device_id], "chips": chips, "pci_device_id": device_id}


def machine_inventory() -> str:
    """What the machine has, in the form error messages use: 'CPU:0, GPU:0, GPU:1'."""
    names = []
    for kind in ("CPU", "GPU"):
        names += [f"{kind}:{index}" for index in range(len(_physical_devices(kind)))]
    if tpu_runtime_hint():
        names.append("TPU runtime (not initialised)")
    return ", ".join(names) or "no devices TensorFlow can see"


def available_devices() -> dict[str, int]:
    """Device kinds present here and how many of each (TPU: 1 if a TPU runtime is hinted).

    This does not initialise a TPU (that takes seconds and claims it); it is meant for planning
    a sweep. A hinted TPU that fails to initialise still fails in `setup_device`.
    """
    found = {"cpu": 1, "gpu": len(_physical_devices("GPU"))}
    found["tpu"] = 1 if tpu_runtime_hint() else 0
    return {kind: count for kind, count in found.items() if count}


def _nvidia_smi() -> list[dict[str, str]]:
    """Per-GPU name, memory and driver from nvidia-smi; [] where it is absent or fails."""
    if shutil.which("nvidia-smi") is None:
        return []
    query = "index,name,memory.total,driver_version"
    try:
        completed = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20, check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    rows = []
    for line in completed.stdout.strip().splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) == 4:
            rows.append(dict(zip(query.split(","), parts)))
    return rows


def _gpu_description(gpus: list[Any]) -> dict[str, Any]:
    import tensorflow as tf

    details = tf.config.experimental.get_device_details(gpus[0]) if gpus else {}
    capability = details.get("compute_capability")
    smi = _nvidia_smi()
    name = details.get("device_name") or (smi[0]["name"] if smi else "unknown GPU")
    tf32_enabled = bool(tf.config.experimental.tensor_float_32_execution_enabled())
    description: dict[str, Any] = {
        "name": name,
        "compute_capability": ".".join(map(str, capability)) if capability else None,
        "memory_gib": round(float(smi[0]["memory.total"]) / 1024, 1) if smi else None,
        "driver": smi[0]["driver_version"] if smi else None,
        # TF32 tensor cores exist from compute capability 8.0 (Ampere) on; TF enables them by default.
        "tf32_active": tf32_enabled and bool(capability) and tuple(capability) >= (8, 0),
    }
    return description


# --- the set-up ------------------------------------------------------------------------------

@dataclass
class DeviceSetup:
    """The outcome of `setup_device`: a strategy to build models under, and what it runs on."""

    requested: str
    kind: str
    strategy: Any  # a tf.distribute strategy; on JAX a keras.distribution (or None for one device)
    replicas: int
    description: dict[str, Any] = field(default_factory=dict)
    backend: str = "tensorflow"

    def scope(self) -> Any:
        """The context to build and compile models in: the strategy's scope, or a no-op."""
        if self.strategy is not None and hasattr(self.strategy, "scope"):
            return self.strategy.scope()
        return contextlib.nullcontext()

    @property
    def strategy_name(self) -> str:
        if self.strategy is None:
            return "single device"
        name = type(self.strategy).__name__
        # TensorFlow's class behind tf.distribute.MultiWorkerMirroredStrategy has an older name.
        return "MultiWorkerMirroredStrategy" if name == "CollectiveAllReduceStrategy" else name

    @property
    def name(self) -> str:
        return str(self.description.get("name", self.kind))

    def peak(self, dtype: str) -> PeakFlops | None:
        """Peak matrix throughput of the devices in use for `dtype`, or None when unknown."""
        if self.kind == "gpu":
            precision = "tf32" if dtype == "float32" and self.description.get("tf32_active") else dtype
            return gpu_peak(self.name, precision, self.replicas)
        if self.kind == "tpu":
            if dtype == "float16":
                return None
            # The accelerator type, else the generation from PCI ids ('v2 or v3' is ambiguous: no peak).
            kind = self.description.get("accelerator_type") or self.description.get("tpu_generation")
            return tpu_peak(kind if kind != "v2 or v3" else None, self.replicas)
        if dtype != "float32":
            return None
        # Logical CPU replicas share the same cores, so the peak is the host's, not per replica.
        cpu = self.description
        return cpu_peak(cpu["cores"], cpu.get("clock_mhz"), set(cpu.get("flags", [])), cpu.get("clock_source", ""))

    def as_record(self) -> dict[str, Any]:
        """The `device` section of a result record."""
        return {
            "requested": self.requested,
            "kind": self.kind,
            "replicas": self.replicas,
            "strategy": self.strategy_name,
            "backend": self.backend,
            **self.description,
        }

    def summary(self) -> str:
        """One line for humans: what runs, on how many replicas, under which strategy."""
        extras = []
        for key, label in (("memory_gib", "GiB"), ("compute_capability", "compute capability"),
                           ("driver", "driver"), ("cores", "cores"), ("clock_mhz", "MHz")):
            value = self.description.get(key)
            if value:
                extras.append(f"{value} {label}" if key in ("memory_gib", "cores", "clock_mhz")
                              else f"{label} {value}")
        detail = f" ({', '.join(extras)})" if extras else ""
        simulated = " [logical CPU devices: replicas share the same cores]" if self.description.get("logical_devices") else ""
        backend = f" (Keras backend {self.backend})" if self.backend != "tensorflow" else ""
        return (f"{self.kind.upper()}: {self.name}{detail}; {self.replicas} replica(s) under "
                f"{self.strategy_name}{backend}{simulated}")

    def __repr__(self) -> str:
        return f"DeviceSetup({self.summary()})"


_SETUPS: dict[str, DeviceSetup] = {}


def setup_device(device: str = "auto", backend: str | None = None) -> DeviceSetup:
    """Build the distribution strategy for `device` and describe the hardware behind it.

    `backend` ("tensorflow", "jax", "torch") selects Keras's backend first; give it, and call this
    before `import keras`, in any notebook that can run on several backends (Keras fixes its backend
    and, on PyTorch, its device when imported). None keeps the backend Keras uses already.
    Raises DeviceNotFoundError when the device is absent, with the machine's inventory in the
    message. Calling it again in the same process returns the same set-up (a re-run notebook
    cell must not re-initialise a TPU or reconfigure devices TensorFlow has already fixed).
    """
    from colabkit.backends import current_backend, select_backend

    request = parse_device(device)
    backend = select_backend(backend) if backend else current_backend()
    key = f"{backend}/{request}"
    if key not in _SETUPS:
        setup = _build(request, backend)
        _SETUPS[key] = setup
        _SETUPS.setdefault(f"{backend}/{DeviceRequest(setup.kind, request.count)}", setup)
    return _SETUPS[key]


def _build(request: DeviceRequest, backend: str = "tensorflow") -> DeviceSetup:
    if request.kind == MULTI_WORKER:
        if backend != "tensorflow":
            from colabkit.errors import BackendUnsupportedError

            raise BackendUnsupportedError(f"device '{request}' runs TensorFlow's MultiWorkerMirroredStrategy; "
                                          f"backend {backend!r} has no multi-worker path here")
        from colabkit.distribute import setup_multi_worker

        return setup_multi_worker(str(request), request.count)
    if backend == "jax":
        from colabkit.backends import setup_jax

        return setup_jax(str(request), request.kind, request.count)
    if backend == "torch":
        from colabkit.backends import setup_torch

        return setup_torch(str(request), request.kind, request.count)
    if request.kind == "auto":
        if tpu_runtime_hint():
            return _setup_tpu("auto")
        if _physical_devices("GPU"):
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
    if _physical_devices("GPU"):
        # Keep every op of a CPU run off the GPU, not only those under the strategy's scope.
        try:
            tf.config.set_visible_devices([], "GPU")
            gpus_hidden = True
        except RuntimeError:
            gpus_hidden = False  # TF already initialised: OneDeviceStrategy still pins the model
        description["gpus_hidden"] = gpus_hidden
    replicas = count or 1
    if replicas == 1:
        strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
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
            raise ColabkitError(
                f"device 'cpu:{count}' needs {count} logical CPU devices, but TensorFlow was already "
                f"initialised with {existing}; call setup_device first thing in a fresh kernel"
            ) from exc


def _setup_gpu(requested: str, count: int | None) -> DeviceSetup:
    import tensorflow as tf

    gpus = _physical_devices("GPU")
    wanted = count or len(gpus)
    if not gpus or wanted > len(gpus):
        raise DeviceNotFoundError(f"device '{requested}' requested but this machine has: {machine_inventory()}")
    used = gpus[:wanted]
    description = _gpu_description(used)
    description["count"] = wanted
    if wanted == 1:
        strategy = tf.distribute.OneDeviceStrategy("/gpu:0")
    else:
        strategy = tf.distribute.MirroredStrategy(devices=[f"/gpu:{index}" for index in range(wanted)])
    return DeviceSetup(requested, "gpu", strategy, strategy.num_replicas_in_sync, description)


def _setup_tpu(requested: str) -> DeviceSetup:
    hint = tpu_runtime_hint()
    if hint is None:
        raise DeviceNotFoundError(
            f"device '{requested}' requested but this machine has: {machine_inventory()} "
            f"(no TPU runtime: none of {', '.join(_TPU_ENV_HINTS)} is set and no TPU device file exists)"
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


def machine_details() -> str:
    """Raw text about the machine, as the seed notebooks showed it: lscpu and nvidia-smi."""
    sections = []
    for command in (["lscpu"], ["nvidia-smi"]):
        if shutil.which(command[0]) is None:
            continue
        try:
            output = subprocess.run(command, capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        sections.append(f"$ {' '.join(command)}\n{output.strip()}")
    return "\n\n".join(sections) or f"{platform.platform()}; {cpu_info()['model']}"
