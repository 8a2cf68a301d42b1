"""What the machine has: CPU facts, GPUs (TensorFlow, nvidia-smi), TPU chips (PCI ids, /dev, JAX's
devices), an inventory."""

from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from colabkit.device.peaks import tpu_generation
from colabkit.device.stand_in import stand_in

TPU_ENV_HINTS = ("COLAB_TPU_ADDR", "TPU_NAME", "TPU_ACCELERATOR_TYPE")
_TPU_DEVICE_GLOBS = ("/dev/accel*", "/dev/vfio/[0-9]*")
_PCI_DEVICES = "/sys/bus/pci/devices"
_GOOGLE_PCI_VENDOR = "0x1ae0"
# PCI device id of a Google TPU chip -> its generation (the ids JAX's hardware probe uses).
# v2 and v3 share one id, so it names both and no peak is derived from it.
_TPU_PCI_GENERATIONS = {"0x0027": "v2 or v3", "0x005e": "v4", "0x0062": "v5p", "0x0063": "v5e",
                        "0x006f": "v6e", "0x0076": "tpu7x"}


def physical_cores_from_cpuinfo(text: str, usable: set[int] | None = None) -> int | None:
    """Physical cores among the logical CPUs `usable` (all when None), from /proc/cpuinfo's text:
    distinct ('physical id', 'core id') pairs. None when the text lacks those fields (e.g. ARM)."""
    cores: set[tuple[str, str]] = set()
    for block in text.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
        if "processor" not in fields or "core id" not in fields:
            continue
        try:
            processor = int(fields["processor"])
        except ValueError:
            continue
        if usable is None or processor in usable:
            cores.add((fields.get("physical id", "0"), fields["core id"]))
    return len(cores) or None


def threads_per_core_from_lscpu(text: str) -> int | None:
    """lscpu's 'Thread(s) per core' (hardware threads sharing one core), or None when absent."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Thread(s) per core":
            try:
                return max(1, int(value.strip()))
            except ValueError:
                return None
    return None


def _lscpu_text() -> str:
    if shutil.which("lscpu") is None:
        return ""
    try:
        return subprocess.run(["lscpu"], capture_output=True, text=True, timeout=20, env={**os.environ, "LC_ALL": "C"}).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def physical_cores(logical: int, usable: set[int] | None, cpuinfo_text: str | None = None,
                   lscpu_text: str | None = None) -> tuple[int | None, str]:
    """(physical cores behind the `logical` usable CPUs, how they were counted).

    /proc/cpuinfo first: its 'core id' per 'physical id' names each core, so hyperthread siblings
    count once (Colab's 2 vCPUs are one core). Else lscpu's threads per core divides the logical
    count. (None, why) when neither tells: a peak from logical CPUs would overstate a
    hyperthreaded host, so none is guessed.
    """
    if cpuinfo_text:
        counted = physical_cores_from_cpuinfo(cpuinfo_text, usable)
        if counted:
            return counted, "/proc/cpuinfo: distinct (physical id, core id) of the usable CPUs"
    threads = threads_per_core_from_lscpu(lscpu_text if lscpu_text is not None else _lscpu_text())
    if threads:
        return max(1, logical // threads), f"lscpu: {logical} usable logical CPUs / {threads} thread(s) per core"
    return None, "unknown: /proc/cpuinfo has no core ids and lscpu gave no threads per core"


def cpu_info() -> dict[str, Any]:
    """The host CPU: model name, vendor, family and model number (/proc/cpuinfo: what tells its
    microarchitecture, colabkit.device.peaks.cpu_core), logical CPUs usable by this process and the
    physical cores behind them (how counted), clock (and where it was read), relevant ISA flags
    (`hypervisor` among them: a VM, whose reported clock is its nominal one).

    `cores` is the logical count (what the process may schedule on); `physical_cores` is what a
    peak estimate multiplies by.
    """
    model, clock_mhz, flags = platform.processor() or platform.machine(), None, set()
    identity: dict[str, Any] = {"vendor": None, "family": None, "model_number": None}  # what peaks.cpu_core reads
    cpuinfo_text = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            cpuinfo_text = cpuinfo.read()
    except OSError:
        pass  # not Linux: keep platform's answer
    for line in cpuinfo_text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name" and value:
            model = value
        elif key == "cpu MHz" and clock_mhz is None:
            clock_mhz = float(value)
        elif key == "flags" and not flags:
            flags = set(value.split())
        elif key == "vendor_id" and identity["vendor"] is None:
            identity["vendor"] = value
        elif key in ("cpu family", "model") and value.isdigit():
            name = "family" if key == "cpu family" else "model_number"
            identity[name] = int(value) if identity[name] is None else identity[name]
    clock_source = "/proc/cpuinfo cpu MHz"
    max_freq = "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"
    if os.path.exists(max_freq):
        with open(max_freq, encoding="utf-8") as freq:
            clock_mhz, clock_source = int(freq.read().strip()) / 1000.0, "cpufreq max"
    usable = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    cores = len(usable) if usable is not None else (os.cpu_count() or 1)
    physical, physical_source = physical_cores(cores, usable, cpuinfo_text)
    wanted = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile", "sse2",
              "hypervisor")
    return {
        "model": model,
        **identity,
        "cores": cores,
        "logical_cpus": cores,
        "physical_cores": physical,
        "physical_cores_source": physical_source,
        "clock_mhz": clock_mhz,
        "clock_source": clock_source,
        "flags": sorted(flag for flag in wanted if flag in flags),
        "arch": platform.machine(),
    }


def physical_devices(kind: str) -> list[Any]:
    import tensorflow as tf

    return list(tf.config.list_physical_devices(kind.upper()))


def tpu_runtime_hint() -> str | None:
    """Why this machine looks like a TPU host (an env variable or a TPU device file), or None."""
    for name in TPU_ENV_HINTS:
        if os.environ.get(name):
            return f"{name} is set"
    for pattern in _TPU_DEVICE_GLOBS:
        found = sorted(glob.glob(pattern))
        if found:
            return f"{found[0]} exists"
    return None


def tensorflow_tpu_installed() -> bool:
    """Whether TensorFlow's TPU build (the `tensorflow-tpu` distribution) is installed; any other
    TensorFlow does not count. Asked of pip's metadata, so nothing is imported."""
    try:
        importlib.metadata.distribution("tensorflow-tpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


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


def jax_tpu_description(devices: Sequence[Any]) -> dict[str, Any]:
    """What JAX's TPU devices say about the TPU: its chip generation from `device_kind` ("TPU v5 lite"
    is a v5e, "TPU v6 lite" a v6e: colabkit.device.peaks.tpu_generation), the cores in use (one JAX
    device per TensorCore JAX addresses: two per v2 or v3 chip, one per chip from v4 on), and the chips
    (distinct chip coordinates, where JAX gives them; else the PCI count). TPU_ACCELERATOR_TYPE, where
    the runtime sets it ("v2-8", "v5litepod-1"), names the slice as on TensorFlow."""
    device_kind = str(devices[0].device_kind)
    accelerator_type = os.environ.get("TPU_ACCELERATOR_TYPE")
    coords = [getattr(device, "coords", None) for device in devices]
    if all(coord is not None for coord in coords):
        chips: int | None = len({tuple(coord) for coord in coords})
    else:
        pci = tpu_chips_on_pci()
        chips = pci["chips"] if pci else None
    return {
        "name": f"TPU {accelerator_type}" if accelerator_type else device_kind,
        "device_kind": device_kind,
        "accelerator_type": accelerator_type,
        "tpu_generation": tpu_generation(device_kind),
        "tpu_chips": chips,
        "cores": len(devices),
        "runtime": "tpu-vm (JAX)",
    }


def machine_inventory() -> str:
    """What the machine has, in the form error messages use: 'CPU:0, GPU:0, GPU:1'."""
    names = []
    for kind in ("CPU", "GPU"):
        names += [f"{kind}:{index}" for index in range(len(physical_devices(kind)))]
    if tpu_runtime_hint():
        names.append("TPU runtime (not initialised)")
    return ", ".join(names) or "no devices TensorFlow can see"


def gpu_count() -> int:
    """GPUs here: those TensorFlow sees where it is installed (it honours CUDA_VISIBLE_DEVICES), else
    those nvidia-smi lists (a JAX-only image, e.g. Colab's TPU runtimes, has no TensorFlow to ask)."""
    if "tensorflow" in sys.modules or importlib.util.find_spec("tensorflow") is not None:
        return len(physical_devices("GPU"))
    return len(nvidia_smi())


def available_devices() -> dict[str, int]:
    """Device kinds present here and how many of each (TPU: 1 if a TPU runtime is hinted).

    This does not initialise a TPU (that takes seconds and claims it); it is meant for planning
    a sweep. A hinted TPU that fails to initialise still fails in `setup_device`.
    """
    found = {"cpu": 1, "gpu": gpu_count()}
    found["tpu"] = 1 if tpu_runtime_hint() else 0
    if test_device := stand_in():  # the tests' seam (colabkit.device.stand_in)
        found[test_device.kind] = 1
    return {kind: count for kind, count in found.items() if count}


def nvidia_smi_query(fields: tuple[str, ...]) -> list[dict[str, str]]:
    """One dict per GPU of nvidia-smi's `--query-gpu` `fields`; [] where nvidia-smi is absent, fails
    (a driver too old to know a field fails the whole query) or lists no GPU."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        completed = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20, check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    rows = []
    for line in completed.stdout.strip().splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) == len(fields):
            rows.append(dict(zip(fields, parts)))
    return rows


def nvidia_smi() -> list[dict[str, str]]:
    """Per-GPU index, name, memory (MiB) and driver from nvidia-smi; [] where it is absent or fails."""
    return nvidia_smi_query(("index", "name", "memory.total", "driver_version"))


def gpu_description(gpus: list[Any]) -> dict[str, Any]:
    import tensorflow as tf

    details = tf.config.experimental.get_device_details(gpus[0]) if gpus else {}
    capability = details.get("compute_capability")
    smi = nvidia_smi()
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


def machine_details() -> str:
    """Raw text about the machine, as the published notebooks showed it: lscpu and nvidia-smi."""
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
