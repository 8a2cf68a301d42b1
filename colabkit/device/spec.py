"""What a device request names, and the set-up a notebook gets back (DeviceSetup)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from colabkit.device.achievable import kept_cpu_best
from colabkit.device.bandwidth import cpu_bandwidth
from colabkit.device.peaks import (PeakBandwidth, PeakFlops, at_least, cpu_peak, gpu_bandwidth, gpu_peak,
                                  tpu_bandwidth, tpu_peak)
from colabkit.errors import UnknownDeviceError
from colabkit.phases import phase


class DeviceKind(StrEnum):
    """What a device name asks for (the part before any ':count')."""

    AUTO = "auto"  # the best device present: TPU, else GPU, else CPU
    CPU = "cpu"
    GPU = "gpu"
    TPU = "tpu"
    MULTIWORKER = "multiworker"  # MultiWorkerMirroredStrategy over the cluster in TF_CONFIG


DEVICE_KINDS = (DeviceKind.CPU, DeviceKind.GPU, DeviceKind.TPU)  # the hardware kinds
MULTI_WORKER = DeviceKind.MULTIWORKER
DEVICE_CHOICES = tuple(DeviceKind)  # auto, cpu, gpu, tpu, multiworker
_COUNTED = (DeviceKind.CPU, DeviceKind.GPU, DeviceKind.MULTIWORKER)


@dataclass(frozen=True)
class DeviceRequest:
    """A parsed device name: its kind and, where given, how many devices to use."""

    kind: DeviceKind
    count: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", DeviceKind(self.kind))  # "gpu" is accepted and stored as DeviceKind.GPU

    def __str__(self) -> str:
        return self.kind if self.count is None else f"{self.kind}:{self.count}"

    def as_record(self) -> dict[str, Any]:
        """The request as a record stores it (`device.request`): {"kind": "gpu", "count": 2}; `count`
        is null where the name gave none ('gpu': every GPU there is, 'cpu': one)."""
        return {"kind": self.kind.value, "count": self.count}

    @classmethod
    def from_record(cls, section: Any) -> DeviceRequest:
        """The request a record's `device.request` stores; UnknownDeviceError if it is not one."""
        if not isinstance(section, dict) or section.get("kind") not in DEVICE_CHOICES:
            raise UnknownDeviceError(f"not a device request: {section!r} (expected {{'kind': 'gpu', 'count': 2}})")
        count = section.get("count")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
            raise UnknownDeviceError(f"not a device request: {section!r} (its count must be a whole number >= 1)")
        return cls(section["kind"], count)


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


@dataclass
class DeviceSetup:
    """The outcome of `setup_device`: a strategy to build models under, and what it runs on."""

    requested: str
    kind: str
    strategy: Any  # a tf.distribute strategy; on JAX a keras.distribution (or None for one device)
    replicas: int
    description: dict[str, Any] = field(default_factory=dict)
    backend: str = "tensorflow"  # the Keras backend that runs (never "auto": resolved before set-up)
    # The backend's own device objects, one per replica, where the strategy does not hold them: JAX's.
    devices: list[Any] = field(default_factory=list, repr=False, compare=False)

    @property
    def static_shapes(self) -> bool:
        """Whether every batch must have the same shape: on a TPU (XLA compiles for one shape), and on
        JAX over several devices (a batch must split evenly over them: keras.distribution shards it).
        Training then drops the last partial batch of a pass and evaluation pads it (make_dataset)."""
        return self.kind == "tpu" or (self.backend == "jax" and self.replicas > 1)

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
        if name == "_DefaultDistributionStrategy":  # tf.distribute.get_strategy() outside any scope
            return "default strategy (one device, as plain Keras)"
        # TensorFlow's class behind tf.distribute.MultiWorkerMirroredStrategy has an older name.
        return "MultiWorkerMirroredStrategy" if name == "CollectiveAllReduceStrategy" else name

    @property
    def name(self) -> str:
        return str(self.description.get("name", self.kind))

    @property
    def multi_worker(self) -> dict[str, Any] | None:
        """A multi-worker set-up's cluster (workers, this task, whether it is the chief); None on one machine."""
        return self.description.get("multi_worker")

    def on_every_replica(self, work: Callable[[Any, Any], Any], inputs: Callable[[Any], tuple[Any, Any]],
                         jit_compile: bool = False) -> tuple[Callable[[], Any], Callable[[Any], list[float]]]:
        """(call, replica_values): `call()` runs `work(x, y)` (a scalar) on every replica, on its own `inputs(replica)`
        drawn where it is used; `replica_values(result)` one float per replica. TensorFlow: `strategy.run` in a
        `tf.function` (`jit_compile`: XLA); JAX: one `jax.jit` over a mesh of the devices (`shard_map`)."""
        if self.backend == "jax":
            import jax
            from jax.sharding import Mesh, NamedSharding, PartitionSpec

            mesh, per_replica = Mesh(np.array(self.devices), ("replica",)), PartitionSpec("replica")
            x, y = jax.jit(jax.vmap(inputs), out_shardings=NamedSharding(mesh, per_replica))(np.arange(self.replicas))
            blocks = jax.jit(jax.shard_map(lambda x, y: work(x[0], y[0])[None], mesh=mesh,  # each its (1, ...) blocks
                                           in_specs=(per_replica,) * 2, out_specs=per_replica))
            return (lambda: blocks(x, y)), (lambda result: list(map(float, np.asarray(result))))
        import tensorflow as tf

        strategy, replica_work = self.strategy, tf.function(work, jit_compile=jit_compile)
        x, y = (strategy.experimental_distribute_values_from_function(
            lambda context, part=part: inputs(context.replica_id_in_sync_group)[part]) for part in (0, 1))
        run_all = tf.function(lambda x, y: strategy.run(replica_work, args=(x, y)))
        return (lambda: run_all(x, y)), (lambda result: [float(v) for v in strategy.experimental_local_results(result)])

    def peak(self, dtype: str, tf32: bool | None = None) -> PeakFlops | None:
        """Peak matrix throughput of the devices in use for `dtype`, or None when unknown. On a GPU,
        float32 is TF32's peak where TF32 runs: as the set-up found it (`tf32` None), else where it was
        switched on for this work and the GPU has it (`tf32` False: true float32)."""
        if self.kind == "gpu":
            return gpu_peak(self.name, self.gpu_precision(dtype, tf32), self.replicas)
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
        estimate = cpu_peak(cpu.get("physical_cores"), cpu.get("clock_mhz"), set(cpu.get("flags", [])),
                            cpu.get("clock_source", ""), logical_cpus=cpu.get("logical_cpus", cpu.get("cores")),
                            vendor=cpu.get("vendor"), family=cpu.get("family"), model=cpu.get("model_number"),
                            model_name=str(cpu.get("model") or cpu.get("name") or ""))
        kept = kept_cpu_best()  # never below what a matmul scan reached on this host
        return at_least(estimate, kept[0], f"a matmul scan on this host ({kept[1]})") if kept else estimate

    def gpu_precision(self, dtype: str, tf32: bool | None = None) -> str:
        """The arithmetic a GPU computes `dtype` products in: "tf32" for float32 where TF32 runs (see peak)."""
        runs_tf32 = bool(self.description.get("tf32_active")) and tf32 is not False
        return "tf32" if dtype == "float32" and self.kind == "gpu" and runs_tf32 else dtype

    def peak_bandwidth(self) -> PeakBandwidth | None:
        """Peak memory bandwidth of the devices in use (GB/s), or None when unknown. On a CPU it is
        measured (a STREAM-triad lower bound, 1-5 s, once per host in a sweep, else once per process:
        colabkit.device.bandwidth.cpu_bandwidth), not looked up; its range and time come with it."""
        if self.kind == "gpu":
            return gpu_bandwidth(self.name, self.replicas, self.description.get("memory_gib"))
        if self.kind == "tpu":
            kind = self.description.get("accelerator_type") or self.description.get("tpu_generation")
            return tpu_bandwidth(kind if kind != "v2 or v3" else None, self.replicas)
        with phase("host_probes"):
            measured = cpu_bandwidth()
        # Logical CPU replicas share the host's memory: its bandwidth is the whole figure.
        source = measured.method + (f"; measured once for the sweep's runs on this host ({measured.measured_by})"
                                    if measured.measured_by != "this process" else "")
        return PeakBandwidth(measured.gb_per_s, measured.gb_per_s, 1, source, "measured", measured.min_gb_s,
                             measured.measured_at)

    def as_record(self) -> dict[str, Any]:
        """The `device` section of a result record."""
        return {
            "requested": self.requested,
            "request": parse_device(self.requested).as_record(),
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
                           ("driver", "driver"), ("cores", "cores"), ("physical_cores", "physical cores"),
                           ("clock_mhz", "MHz")):
            value = self.description.get(key)
            if value:
                extras.append(f"{value} {label}" if key in ("memory_gib", "cores", "physical_cores", "clock_mhz")
                              else f"{label} {value}")
        detail = f" ({', '.join(extras)})" if extras else ""
        simulated = " [logical CPU devices: replicas share the same cores]" if self.description.get("logical_devices") else ""
        backend = f" (Keras backend {self.backend})" if self.backend != "tensorflow" else ""
        return (f"{self.kind.upper()}: {self.name}{detail}; {self.replicas} replica(s) under "
                f"{self.strategy_name}{backend}{simulated}")

    def __repr__(self) -> str:
        return f"DeviceSetup({self.summary()})"
