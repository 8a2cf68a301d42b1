"""What the GPU check's stages measure: each (in worker processes, through the sweep) hands its figures to the
rules and returns its rows. Their table, with each stage's time budget on one data-centre GPU (A100/H100 class),
is colabkit.gpu_check.check.STAGES; the table's footer shows each stage's time against it.

The TensorFlow worker lives from the first stage to the last training stage (TensorFlow imported
and the GPU initialised once); the sweep and the other backends run after it has stopped.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colabkit.device.peaks import gpu_peak
from colabkit.errors import GpuCheckError
from colabkit.gpu_check.notebook_runs import preset_plan, report_device_kinds, run_plan
from colabkit.gpu_check.rows import CheckRow
from colabkit.gpu_check.rules import (
    AMPERE_CAPABILITY,
    GpuFacts,
    Unavailable,
    backend_row,
    bandwidth_row,
    clock_row,
    device_row,
    has_capability,
    matmul_row,
    multi_gpu_row,
    peaks_row,
    sweep_row,
)
from colabkit.gpu_check.worker import Worker

MATMUL_N = 8192
CPU_CLOCK_N = 1024  # the CPU rehearsal's clocks: tens of milliseconds a product on a 2-core host, not seconds
# Hard limits (a hung measurement must not hold the GPU for the rest of a Colab session): a worker
# request or a notebook run past these is stopped and its row fails.
FACTS_TIMEOUT_S = 180.0  # TensorFlow's import and CUDA's start, on a cold machine
REQUEST_TIMEOUT_S = 300.0
SWEEP_JOBS = 2  # a CPU run beside the GPU run (CPU runs need no GPU slot): the sweep row judges ok records, not timings
BACKEND_DTYPES = {True: ["float32", "bfloat16"], False: ["float32", "float16"]}  # by TF32/bf16 capability
# Why every TensorFlow row is skipped where this Python has no TensorFlow (the lent GPU machines' image has
# JAX and PyTorch only: docs/device.md); a SKIP, not a failure.
NO_TENSORFLOW = "no TensorFlow in this image (this Python has none: pip install 'colabkit[tensorflow]' to check its rows)"
INSTALL_HINTS = {"jax": "pip install 'jax[cuda12]'", "torch": "pip install torch (a CUDA build)"}


def importable(package: str) -> bool:
    """Whether `package` can be imported here (found without importing it)."""
    return importlib.util.find_spec(package) is not None


@dataclass
class Context:
    """What the stages share: where outputs go, the GPU's facts, the TensorFlow worker, rounds."""

    out: Path
    facts: GpuFacts
    rounds: int
    echo: Callable[[str], None]  # progress lines for the user
    log: Callable[[str], None]  # the sweep's chatter, to the check's log
    available: dict[str, int] = field(default_factory=dict)
    tf_worker: Worker | None = None
    tf_reason: Unavailable | None = None  # why TensorFlow cannot measure on the GPU, once known
    power: dict[str, Any] | Unavailable = field(default_factory=lambda: Unavailable("NVML was not asked"))
    matmul_tflops: dict[str, float] = field(default_factory=dict)
    on_cpu: bool = False  # the device run's CPU rehearsal: the clocks on the CPU, shown and not judged

    @property
    def tf32_capable(self) -> bool:
        return has_capability(self.facts.compute_capability, AMPERE_CAPABILITY)

    def request(self, task: str, timeout_s: float = REQUEST_TIMEOUT_S, **params: Any) -> Any:
        assert self.tf_worker is not None
        return self.tf_worker.request(task, timeout_s, **params)

    def close(self) -> None:
        if self.tf_worker is not None:
            self.tf_worker.close()
            self.tf_worker = None


def device_stage(ctx: Context) -> list[CheckRow]:
    """nvidia-smi's GPUs against TensorFlow's, the peaks table, and NVML's idle power (read now,
    before any work warms the board)."""
    if not importable("tensorflow"):
        ctx.tf_reason = Unavailable(NO_TENSORFLOW)
    else:
        ctx.tf_worker = Worker("tensorflow", ctx.out / "logs" / "worker-tensorflow.log")
        found = ctx.request("facts", FACTS_TIMEOUT_S)
        capability = found["compute_capability"]
        ctx.facts = GpuFacts(ctx.facts.smi_names, ctx.facts.memory_gib, ctx.facts.driver,
                             tuple(capability) if capability else ctx.facts.compute_capability, tuple(found["names"]))
        if not found["names"]:
            cuda = "" if found["built_with_cuda"] else " (this TensorFlow is built without CUDA)"
            ctx.tf_reason = Unavailable(f"TensorFlow {found['tensorflow']} sees no GPU{cuda}: see the device row")
        try:
            power = ctx.request("power")
            ctx.power = Unavailable(power["unavailable"]) if "unavailable" in power else power
        except GpuCheckError as error:  # the energy row fails with it; the device rows stand
            ctx.power = Unavailable(str(error), failed=True)
    if ctx.tf_reason is not None and isinstance(ctx.facts.tf_names, Unavailable):
        ctx.facts = GpuFacts(ctx.facts.smi_names, ctx.facts.memory_gib, ctx.facts.driver,
                             ctx.facts.compute_capability, ctx.tf_reason)
    ctx.available = {"cpu": 1, "gpu": len(ctx.facts.tf_names) if ctx.facts.tf_sees_gpu else 0}
    return [device_row(ctx.facts), peaks_row(ctx.facts.name, ctx.facts.compute_capability)]


def bandwidth_stage(ctx: Context) -> list[CheckRow]:
    measured = ctx.tf_reason or ctx.request("bandwidth")
    return [bandwidth_row(ctx.facts.name, ctx.facts.memory_gib, measured)]


def matmul_plan(ctx: Context) -> dict[str, tuple[str, bool] | Unavailable]:
    """Per precision row: (dtype, TF32 switch) to measure, or why not."""
    capability = ctx.facts.compute_capability
    plan: dict[str, tuple[str, bool] | Unavailable] = {"float32": ("float32", False)}
    no_tensor_cores = f"compute capability {'.'.join(map(str, capability or ())) or 'unknown'} has no"
    plan["tf32"] = ("float32", True) if ctx.tf32_capable else Unavailable(f"{no_tensor_cores} TF32")
    plan["bfloat16"] = ("bfloat16", False) if ctx.tf32_capable else Unavailable(f"{no_tensor_cores} bfloat16 "
                                                                                 "tensor cores")
    plan["float16"] = ("float16", False)
    for precision, step in plan.items():  # float32 is measured anyway: the clock row needs one measurement
        if precision != "float32" and not isinstance(step, Unavailable) and not gpu_peak(ctx.facts.name, precision, 1):
            plan[precision] = Unavailable(f"no {precision} peak in the table for {ctx.facts.name}: nothing to "
                                          "compare a measurement with")
    return plan


def matmul_stage(ctx: Context) -> list[CheckRow]:
    """Warm TFLOPS at n = 8192 per precision, each also a clock comparison (colabkit.timing.pipelined)."""
    rows, comparisons = [], []
    for precision, step in matmul_plan(ctx).items():
        measured: dict[str, Any] | Unavailable
        if ctx.tf_reason:
            measured = ctx.tf_reason
        elif isinstance(step, Unavailable):
            measured = step
        else:
            dtype, tf32 = step
            measured = ctx.request("matmul", n=MATMUL_N, dtype=dtype, tf32=tf32, tf32_capable=ctx.tf32_capable,
                                   rounds=ctx.rounds)
            comparisons.append(measured)
            ctx.matmul_tflops[precision] = float(measured["tflops"])
        rows.append(matmul_row(precision, measured, gpu_peak(ctx.facts.name, precision, 1)))
    return [clock_row("tensorflow", ctx.tf_reason or comparisons), *rows]


def sweep_stage(ctx: Context) -> list[CheckRow]:
    """Every notebook's `gpu_check` preset (a training run on the GPU and on the CPU), through the sweep; the report
    of them."""
    folder = ctx.out / "sweep"
    runs = ctx.tf_reason or run_plan(preset_plan("gpu_check", folder, jobs=SWEEP_JOBS), ctx.available, ctx.log)
    kinds = ctx.tf_reason or report_device_kinds(folder, ctx.out / "report", ctx.echo)
    return [sweep_row(runs, kinds)]


def multi_gpu_stage(ctx: Context) -> list[CheckRow]:
    """Every notebook's `gpu_check` run on gpu:2 (MirroredStrategy), where TensorFlow sees 2 GPUs or more."""
    if ctx.tf_reason:
        return [multi_gpu_row(ctx.tf_reason)]
    if ctx.available.get("gpu", 0) < 2:
        return [multi_gpu_row(Unavailable(f"this machine has {ctx.available.get('gpu', 0)} GPU: gpu:2 needs 2"))]
    runs = preset_plan("gpu_check", ctx.out / "multi-gpu", overrides={"device": "gpu:2"})
    return [multi_gpu_row(run_plan(runs, ctx.available, ctx.log))]


def backend_stage(ctx: Context, backend: str, notebook: bool = True) -> list[CheckRow]:
    """colabkit's clock on `backend` (JAX, PyTorch), and (`notebook`) the CNN notebook on it, on the GPU."""
    clock = _clock(ctx, backend) if importable(backend) else Unavailable(
        f"{backend} is not installed ({INSTALL_HINTS[backend]})")
    if not notebook:
        return [clock_row(backend, clock, judge=not ctx.on_cpu)]
    runs = preset_plan("gpu_check", ctx.out / "backends" / backend, "gpu", {"backend": backend}, ("cnn_mnist",))
    run = clock if isinstance(clock, Unavailable) else run_plan(
        runs, {**ctx.available, "gpu": max(1, ctx.facts.count)}, ctx.log)[0]
    return [clock_row(backend, clock), backend_row(backend, run)]


def _clock(ctx: Context, backend: str) -> list[dict[str, Any]] | Unavailable:
    """The clock's comparisons on `backend`, measured in a worker of its own; or why it could not measure."""
    with Worker(backend, ctx.out / "logs" / f"worker-{backend}.log") as worker:
        found = worker.request("clock", REQUEST_TIMEOUT_S, backend=backend, n=CPU_CLOCK_N if ctx.on_cpu else MATMUL_N,
                               tf32_capable=ctx.tf32_capable, rounds=ctx.rounds, device="cpu" if ctx.on_cpu else "gpu",
                               dtypes=["float32"] if ctx.on_cpu else BACKEND_DTYPES[ctx.tf32_capable])
    return Unavailable(found["unavailable"]) if "unavailable" in found else found["comparisons"]
