"""The devices a sweep runs on: which this machine has (asked in a child process), why a combination
cannot run here, and the GPU/TPU slots handed to parallel jobs. Everything reads a combination's
typed request (Combination.request), never its device string."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from colabkit.device.memory import DeviceMemory, device_memory
from colabkit.device.probes import nvidia_smi, tpu_runtime_hint
from colabkit.device.stand_in import stand_in
from colabkit.device.spec import DeviceKind, DeviceRequest
from colabkit.errors import ColabkitError
from colabkit.experiments import find
from colabkit.extras import installed, needs
from colabkit.sweep.expand import Combination
from colabkit.training.memory import memory_problem

_DETECT = "import json; from colabkit.device.probes import available_devices; print(json.dumps(available_devices()))"
ANYWHERE = (DeviceKind.AUTO, DeviceKind.CPU, DeviceKind.MULTIWORKER)  # multiworker: local worker processes


def accelerator_signs() -> list[str]:
    """What on this machine could be a GPU or TPU, without importing a framework: a TPU runtime's hint
    (colabkit.device.probes.tpu_runtime_hint), NVIDIA's or AMD's device files, GPUs nvidia-smi lists.
    [] means no framework could see an accelerator here either."""
    signs = [hint] if (hint := tpu_runtime_hint()) else []
    signs += [test_device.sign] if (test_device := stand_in()) else []
    signs += sorted(glob.glob("/dev/nvidia[0-9]*")) + [path for path in ("/dev/kfd",) if os.path.exists(path)]
    return signs or [f"nvidia-smi lists {gpu.get('name')}" for gpu in nvidia_smi()]


def detect_devices(timeout_s: float = 120) -> dict[str, int]:
    """Devices this machine has: the CPU alone where it shows no sign of an accelerator
    (accelerator_signs), else asked in a child process (importing TensorFlow, 5-9 s) so that this one
    never claims a GPU or TPU."""
    if not accelerator_signs():
        return {"cpu": 1}
    completed = subprocess.run([sys.executable, "-c", _DETECT], capture_output=True, text=True,
                               timeout=timeout_s, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    if completed.returncode != 0:
        raise ColabkitError(f"could not detect this machine's devices: {completed.stderr.strip()[-500:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class Inventory:
    """The devices at a sweep's disposal, by kind ({"cpu": 1, "gpu": 2, "tpu": 0}): this machine's
    (see `local_inventory`), or a Dask cluster's workers' (colabkit.sweep.runners.dask)."""

    counts: Mapping[str, int] = field(default_factory=dict)
    # request -> its memory, probed once per sweep (nvidia-smi takes tens of ms; a grid has thousands)
    known_memory: dict[DeviceRequest, DeviceMemory | None] = field(default_factory=dict, compare=False, repr=False)

    def lacks(self, request: DeviceRequest) -> bool:
        """Whether `request` cannot be met: 'gpu:2' needs 2 GPUs, 'tpu' a TPU; CPUs are everywhere."""
        return request.kind not in ANYWHERE and self.counts.get(request.kind, 0) < (request.count or 1)

    def absent_reason(self, combination: Combination) -> str:
        """Why the device `combination` asks for is not here, in words."""
        inventory = ", ".join(f"{kind}: {count}" for kind, count in sorted(self.counts.items()))
        return f"device '{combination.device}' is not on this machine (it has {inventory})"

    def memory(self, request: DeviceRequest) -> DeviceMemory | None:
        """The memory one model copy gets on the device `request` names, where the sweep can tell
        (this machine's host RAM, or a GPU's from nvidia-smi); None where it cannot: the notebook
        then checks again once its device is set up."""
        if request not in self.known_memory:
            self.known_memory[request] = device_memory(request.kind, request.count)
        return self.known_memory[request]


def local_inventory(available: Mapping[str, int] | None = None) -> Inventory:
    """This machine's devices: `available` when given, else detected (in a child process)."""
    return Inventory(dict(detect_devices() if available is None else available))


def device_missing(combination: Combination, inventory: Inventory) -> str | None:
    """Why `combination`'s device is not at hand (None if it is)."""
    return inventory.absent_reason(combination) if inventory.lacks(combination.request) else None


def too_large(combination: Combination, inventory: Inventory) -> str | None:
    """Why `combination`'s model clearly cannot train in its device's memory (its experiment's
    declared estimate, colabkit.training.memory), None when it may fit or either side is unknown."""
    experiment = find(combination.name)
    if experiment is None or experiment.memory_estimate is None:
        return None
    memory = inventory.memory(combination.request)
    if memory is None:
        return None
    return memory_problem(experiment, combination.params, memory.bytes, where=memory.where, copies=memory.copies)


def backend_unsupported(combination: Combination, inventory: Inventory) -> str | None:
    """Why a combination's backend cannot run on its device (PyTorch on TPU without torch_xla, a
    backend whose package is missing): such a combination is skipped with the reason, never run."""
    backend = combination.params.get("backend")
    if backend is None:
        return None
    from colabkit.device.backends import unsupported_reason

    return unsupported_reason(str(backend), combination.request.kind)


def extra_missing(combination: Combination, inventory: Inventory) -> str | None:
    """Why a combination needs an extra this Python lacks (profile_steps > 0 without the profile extra's
    converters); its backend's extra is backend_unsupported's. Such a combination is skipped with the reason."""
    profile_steps = combination.params.get("profile_steps")
    if isinstance(profile_steps, int) and profile_steps > 0 and not installed("profile"):
        return f"profile_steps = {profile_steps} {needs('profile')}"
    return None


@dataclass
class Lease:
    """The accelerators one parallel job holds: its GPUs (by CUDA id) and whether it has the TPU."""

    gpus: list[str] = field(default_factory=list)
    tpu: bool = False

    @property
    def env(self) -> dict[str, str] | None:
        """What the job's kernel gets in its environment: CUDA_VISIBLE_DEVICES naming its GPUs."""
        return {"CUDA_VISIBLE_DEVICES": ",".join(self.gpus)} if self.gpus else None


class DeviceSlots:
    """Accelerators free for the next parallel job: a GPU job gets GPUs of its own (`gpu` one,
    `gpu:N` N) through CUDA_VISIBLE_DEVICES, the TPU one job at a time; an `auto` (or multiworker)
    job every GPU free then, waiting while none is; CPU jobs need no slot."""

    def __init__(self, available: Mapping[str, int]) -> None:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = [item.strip() for item in visible.split(",") if item.strip()] if visible else []
        count = available.get("gpu", 0)
        self.free_gpus = (ids or [str(index) for index in range(count)])[:count]
        self.tpu_free = available.get("tpu", 0) > 0
        self.has_tpu, self.has_gpus = self.tpu_free, bool(self.free_gpus)

    def take(self, request: DeviceRequest) -> Lease | None:
        """A lease of what `request` needs, or None while it is busy (the job waits)."""
        if request.kind == DeviceKind.CPU:
            return Lease()
        if request.kind == DeviceKind.TPU:
            if not self.tpu_free:
                return None
            self.tpu_free = False
            return Lease(tpu=True)
        if request.kind == DeviceKind.GPU:
            need = request.count or 1
        else:  # auto (and multiworker, whose workers see every device) may take any accelerator: all of them
            if (self.has_tpu and not self.tpu_free) or (self.has_gpus and not self.free_gpus):
                return None  # with no GPU of its own, its kernel would see every GPU, the busy ones too
            need = len(self.free_gpus)
        if len(self.free_gpus) < need:
            return None
        lease = Lease(self.free_gpus[:need], tpu=request.kind == DeviceKind.AUTO and self.has_tpu)
        del self.free_gpus[:need]
        self.tpu_free = self.tpu_free and not lease.tpu
        return lease

    def give_back(self, lease: Lease) -> None:
        self.free_gpus.extend(lease.gpus)
        self.tpu_free = self.tpu_free or lease.tpu


def cpu_only(combinations: Sequence[Combination], available: Mapping[str, int] | None) -> Mapping[str, int] | None:
    """`available`, or {"cpu": 1} for a local sweep whose every combination asks for the CPU: a CPU is
    everywhere, so no child process (importing TensorFlow: 5-9 s) need ask what else the machine has."""
    if available is None and all(c.request.kind == DeviceKind.CPU for c in combinations):
        return {"cpu": 1}
    return available


@contextmanager
def host_facts(combinations: Sequence[Combination]) -> Iterator[str | None]:
    """Where a sweep's runs keep the facts they measure once per host (the CPU's bandwidth, the achievable
    peak of each device kind: the first run that needs one writes it, colabkit.device.bandwidth.cpu_bandwidth,
    colabkit.device.achievable), removed when the runs end; None when there are no runs."""
    if not combinations:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="colabkit-host-") as folder:
        yield str(Path(folder) / "host.json")
