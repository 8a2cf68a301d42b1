"""How much memory one copy of a model can use on a device, read without TensorFlow: the host's RAM
(and a container's limit), each GPU's (nvidia-smi), each TPU core's HBM (colabkit.device.peaks).
`DeviceMemory.bytes` is one GPU's or TPU core's, or the whole host's that logical CPU replicas
share (`copies`); colabkit.training.memory compares its estimate with it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colabkit.device.peaks import tpu_generation, tpu_memory_gib
from colabkit.device.probes import nvidia_smi, tpu_chips_on_pci

GIB = 2**30
# Where a container's memory limit is (cgroup v2, then v1); "max" or a huge number means none.
_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


@dataclass(frozen=True)
class DeviceMemory:
    """The memory one copy of a model can use: `bytes` of one GPU or TPU core, or of the host (CPU);
    `where` names it for a message ('the CPU host', 'each GPU (Tesla T4)'); `copies` is how many
    model copies share it (the logical replicas of a `cpu:N` run share the host's RAM)."""

    bytes: int
    where: str
    copies: int = 1
    source: str = ""


def physical_memory_bytes() -> int | None:
    """The machine's physical memory (page size x physical pages, as /proc/meminfo's MemTotal); None
    where the platform does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def container_limit_bytes(paths: tuple[str, ...] = _CGROUP_LIMITS) -> int | None:
    """The memory limit of the container (cgroup) this process runs in; None when there is none."""
    for path in paths:
        try:
            text = Path(path).read_text(encoding="ascii").strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:  # cgroup v1 writes a huge number for "no limit"
            return int(text)
        return None  # "max": the file is there and says there is no limit
    return None


def host_memory(copies: int = 1) -> DeviceMemory | None:
    """The host's RAM as a CPU run can use it: the smaller of the machine's memory and the container's
    limit; `copies` model replicas share it."""
    physical, limit = physical_memory_bytes(), container_limit_bytes()
    if physical is None and limit is None:
        return None
    if limit is not None and (physical is None or limit < physical):
        return DeviceMemory(limit, "the CPU host (its container's memory limit)", copies, "cgroup memory limit")
    assert physical is not None
    return DeviceMemory(physical, "the CPU host", copies, "os.sysconf: page size x physical pages")


def gpu_memory(name: str | None = None, memory_gib: float | None = None) -> DeviceMemory | None:
    """The memory of one GPU: `memory_gib` when a set-up recorded it, else the smallest GPU nvidia-smi
    lists (a data-parallel run keeps a whole copy of the model on each); None without either."""
    source = "the device set-up (nvidia-smi)"
    if not memory_gib:
        boards = [(float(gpu["memory.total"]), gpu.get("name")) for gpu in nvidia_smi()
                  if gpu.get("memory.total", "").replace(".", "", 1).isdigit()]
        if not boards:
            return None
        mib, found = min(boards, key=lambda board: board[0])
        memory_gib, name, source = mib / 1024, name or found, "nvidia-smi memory.total"
    return DeviceMemory(int(memory_gib * GIB), f"each GPU ({name})" if name else "each GPU", 1, source)


def tpu_memory(accelerator_type: str | None = None) -> DeviceMemory | None:
    """The HBM of one TPU core (TensorFlow device): from the accelerator type (TPU_ACCELERATOR_TYPE
    when not given), else the generation the chips' PCI ids name; None when unknown or ambiguous
    (PCI ids do not tell v2 from v3)."""
    accelerator_type = accelerator_type or os.environ.get("TPU_ACCELERATOR_TYPE")
    if not accelerator_type:
        pci = tpu_chips_on_pci()
        accelerator_type = pci["generation"] if pci and pci["generation"] != "v2 or v3" else None
    if tpu_generation(accelerator_type) is None:
        return None
    known = tpu_memory_gib(accelerator_type)
    if known is None:
        return None
    gib, source = known
    return DeviceMemory(int(gib * GIB), f"each TPU {tpu_generation(accelerator_type)} core", 1, source)


def device_memory(kind: str, count: int | None = None,
                  description: Mapping[str, Any] | None = None) -> DeviceMemory | None:
    """The memory one model copy can use on a device of `kind` ('cpu', 'gpu', 'tpu'; None for 'auto'
    and 'multiworker', whose device is not known yet), `count` replicas of it, described by a
    set-up's `description` where there is one (else probed here)."""
    description = description or {}
    if kind == "cpu":
        return host_memory(copies=count or 1)
    if kind == "gpu":
        return gpu_memory(description.get("name"), description.get("memory_gib"))
    if kind == "tpu":
        generation = description.get("tpu_generation")
        return tpu_memory(description.get("accelerator_type") or (generation if generation != "v2 or v3" else None))
    return None


def setup_memory(setup: Any) -> DeviceMemory | None:
    """The memory of the device a notebook's `setup_device` found (a DeviceSetup), per model copy.
    A worker of a multi-worker run holds its local replicas only."""
    multi = setup.multi_worker or {}
    replicas = multi.get("local_replicas") or setup.replicas
    return device_memory(setup.kind, replicas, setup.description)
