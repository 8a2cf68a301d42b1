"""colabkit's clock against the device's own pipelined throughput: does the clock wait for the device?

The matmul notebook's workload (an n x n product chained `products` times in one compiled call,
summed to a scalar) timed three ways on TensorFlow, JAX or PyTorch: measured (`colabkit.measure`,
each call forced to completion), pipelined (`chain` calls back to back, one wait, divided by `chain`)
and unsynced (the host call alone; shown, never trusted). measured / pipelined near 1 means the
clock waits for the device and adds little. Rounds alternate (colabkit.timing.agreement).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from colabkit.device.backends import BACKENDS
from colabkit.errors import MeasurementError
from colabkit.timing.agreement import interleave
from colabkit.timing.clock import block_until_ready, measure

MAX_PRODUCTS = 64  # a call of more products than this is long enough on any GPU (n = 8192: 70 TFLOP)


@dataclass(frozen=True)
class MatmulWorkload:
    """One compiled call of `products` chained n x n products, and what the device computes them in."""

    backend: str
    n: int
    dtype: str
    precision: str  # the arithmetic the device uses: "tf32" where float32 products run on TF32 tensor cores
    products: int
    call: Callable[[], Any]  # dispatches the work, returns a scalar (the product's sum)

    @property
    def flops_per_call(self) -> float:
        return 2.0 * self.n ** 3 * self.products


def _tensorflow(n: int, dtype: str, on_gpu: bool, products: int, tf32_capable: bool) -> tuple[Callable, str]:
    import tensorflow as tf

    with tf.device("/GPU:0" if on_gpu else "/CPU:0"):
        x = tf.cast(tf.random.stateless_uniform((n, n), seed=(1, 0)), dtype)
        # Columns summing to about 1 keep the chained product near the scale of x (never inf).
        y = tf.cast(tf.random.stateless_uniform((n, n), seed=(2, 0), maxval=2.0 / n), dtype)

    @tf.function(jit_compile=True)  # a new function per workload: TF32's switch is read when it is traced
    def chained(x: Any, y: Any) -> Any:
        _, product = tf.while_loop(lambda step, _: step < products, lambda step, p: (step + 1, tf.matmul(p, y)),
                                   (tf.constant(0), x))
        return tf.reduce_sum(tf.cast(product, tf.float32))

    tf32 = on_gpu and tf32_capable and bool(tf.config.experimental.tensor_float_32_execution_enabled())
    return (lambda: chained(x, y)), "tf32" if dtype == "float32" and tf32 else dtype


def _jax(n: int, dtype: str, on_gpu: bool, products: int, tf32_capable: bool) -> tuple[Callable, str]:
    import jax
    import jax.numpy as jnp

    device = jax.devices("gpu" if on_gpu else "cpu")[0]
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    x = jax.device_put(jax.random.uniform(keys[0], (n, n), dtype=jnp.float32).astype(dtype), device)
    y = jax.device_put((jax.random.uniform(keys[1], (n, n), dtype=jnp.float32) * (2.0 / n)).astype(dtype), device)

    @jax.jit
    def chained(x: Any, y: Any) -> Any:
        return jnp.sum(jax.lax.fori_loop(0, products, lambda _, p: p @ y, x).astype(jnp.float32))

    # XLA's DEFAULT matmul precision runs float32 products as TF32 on GPUs that have it.
    default = getattr(jax.config, "jax_default_matmul_precision", None) in (None, "default")
    return (lambda: chained(x, y)), "tf32" if dtype == "float32" and on_gpu and tf32_capable and default else dtype


def _torch(n: int, dtype: str, on_gpu: bool, products: int, tf32_capable: bool) -> tuple[Callable, str]:
    import torch

    generator = torch.Generator().manual_seed(0)
    target = torch.device("cuda" if on_gpu else "cpu")
    x = torch.rand(n, n, generator=generator).to(target, getattr(torch, dtype))
    y = (torch.rand(n, n, generator=generator) * (2.0 / n)).to(target, getattr(torch, dtype))

    def chained() -> Any:
        product = x
        for _ in range(products):
            product = product @ y
        return product.float().sum()

    tf32 = on_gpu and tf32_capable and bool(torch.backends.cuda.matmul.allow_tf32)  # off by default in PyTorch
    return chained, "tf32" if dtype == "float32" and tf32 else dtype


_BUILDERS = {"tensorflow": _tensorflow, "jax": _jax, "torch": _torch}


def matmul_workload(backend: str, n: int, dtype: str, *, on_gpu: bool, products: int = 1,
                    tf32_capable: bool = False) -> MatmulWorkload:
    """The chained n x n product on `backend`'s GPU (or CPU), compiled where the backend compiles.

    `tf32_capable`: the GPU has TF32 tensor cores (compute capability 8.0 or later); the workload's
    precision then says "tf32" for float32 wherever the backend's switch lets TF32 be used.
    """
    if backend not in _BUILDERS:
        raise MeasurementError(f"no matmul workload for backend {backend!r} (known: {', '.join(BACKENDS)})")
    if n < 1 or products < 1:
        raise MeasurementError(f"n and products must be >= 1, got {n} and {products}")
    call, precision = _BUILDERS[backend](n, dtype, on_gpu, products, tf32_capable)
    return MatmulWorkload(backend, n, dtype, precision, products, call)


def calibrated_workload(backend: str, n: int, dtype: str, *, on_gpu: bool, tf32_capable: bool = False,
                        min_call_s: float = 0.05) -> MatmulWorkload:
    """A workload of as many chained products as make one call last about `min_call_s` (at most
    MAX_PRODUCTS): dispatch and the wait then cost a small share of each timed call."""
    single = matmul_workload(backend, n, dtype, on_gpu=on_gpu, tf32_capable=tf32_capable)
    timing = measure(single.call, repeats=3, warmup=1)
    products = min(MAX_PRODUCTS, max(1, math.ceil(min_call_s / timing.median_s)))
    if products == 1:
        return single
    return matmul_workload(backend, n, dtype, on_gpu=on_gpu, products=products, tf32_capable=tf32_capable)


def pipelined_seconds(call: Callable[[], Any], chain: int) -> float:
    """Seconds per call with `chain` calls dispatched back to back and one wait for the last
    (a device runs one stream's work in order, so the last result being ready means all are)."""
    start = time.perf_counter()
    last = None
    for _ in range(chain):
        last = call()
    block_until_ready(last)
    return (time.perf_counter() - start) / chain


def unsynced_seconds(call: Callable[[], Any], repeats: int) -> float:
    """Median seconds of the host call alone (the naive clock); each call's work is waited for
    outside the clock, so every sample starts from an idle device."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        value = call()
        samples.append(time.perf_counter() - start)
        block_until_ready(value)
    return float(statistics.median(samples))


@dataclass(frozen=True)
class ClockComparison:
    """The three clocks on one workload, per round (seconds per call)."""

    backend: str
    n: int
    dtype: str
    precision: str
    products: int
    flops_per_call: float
    measured_s: tuple[float, ...]  # per round: median of `repeats` synchronised calls (colabkit.measure)
    pipelined_s: tuple[float, ...]  # per round: `chain` calls back to back, one wait, per call
    unsynced_s: float  # median of the naive clock

    @property
    def tflops(self) -> float:
        """colabkit's figure: FLOPs per call / the median of the rounds' measured seconds."""
        return self.flops_per_call / statistics.median(self.measured_s) / 1e12

    @property
    def pipelined_tflops(self) -> float:
        return self.flops_per_call / statistics.median(self.pipelined_s) / 1e12

    @property
    def unsynced_tflops(self) -> float:
        return self.flops_per_call / self.unsynced_s / 1e12

    @property
    def ratio(self) -> float:
        """colabkit's TFLOPS / the pipelined TFLOPS (medians): about 1 when the clock is right."""
        return self.tflops / self.pipelined_tflops

    def as_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "n": self.n, "dtype": self.dtype, "precision": self.precision,
                "products": self.products, "flops_per_call": self.flops_per_call,
                "measured_s": list(self.measured_s), "pipelined_s": list(self.pipelined_s),
                "unsynced_s": self.unsynced_s, "tflops": self.tflops, "pipelined_tflops": self.pipelined_tflops,
                "unsynced_tflops": self.unsynced_tflops, "ratio": self.ratio}


def compare_clock(workload: MatmulWorkload, *, repeats: int = 5, chain: int = 5, rounds: int = 3,
                  warmup: int = 1) -> ClockComparison:
    """Time `workload` with colabkit's clock and the pipelined one in `rounds` interleaved rounds,
    then the naive clock once. The first round's cold call (tracing, compiling) is left out by
    `measure`; the pipelined side starts warm."""
    measured, pipelined = interleave([
        lambda _: measure(workload.call, repeats=repeats, warmup=warmup).median_s,
        lambda _: pipelined_seconds(workload.call, chain),
    ], rounds)
    unsynced = unsynced_seconds(workload.call, repeats)
    for seconds in (*measured, *pipelined, unsynced):
        if not (math.isfinite(seconds) and seconds > 0):
            raise MeasurementError(f"a clock read {seconds!r} s: the clock or the workload is broken")
    return ClockComparison(workload.backend, workload.n, workload.dtype, workload.precision, workload.products,
                           workload.flops_per_call, tuple(measured), tuple(pipelined), unsynced)
