"""The achievable peak: the best matmul throughput a device reaches over a few shapes and its precisions
(after Bekman's mamf-finder), a second yardstick for MFU beside the datasheet (docs/peaks.md). Scanned on
the run's own backend (JAX, TPUs included, or TensorFlow), once per host in a sweep (COLABKIT_HOST_FACTS,
keyed by backend and device kind), by hand once per process.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import time
from dataclasses import dataclass
from typing import Any

from colabkit.device.bandwidth import HOST_FACTS_ENV, host_facts, update_host_facts
from colabkit.errors import MeasurementError

# (M, N, K) per device kind: squares, and a wide and a deep product (mamf-finder scans all three axes).
SHAPES: dict[str, tuple[tuple[int, int, int], ...]] = {
    "cpu": ((512, 512, 512), (1024, 1024, 1024), (512, 512, 2048)),  # each compiled once: seconds in all
    "gpu": ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (4096, 4096, 16384)),
}
SHAPES["tpu"] = SHAPES["gpu"]
# The precisions each kind's datasheet names (a CPU's estimate: float32 only).
PRECISIONS = {"cpu": ("float32",), "gpu": ("float32", "float16", "bfloat16"), "tpu": ("bfloat16", "float32")}
REPEATS = 5  # timed calls per shape after a warm-up call (compilation); the best is kept, as mamf-finder


@dataclass(frozen=True)
class AchievablePeak:
    """The best matmul throughput a scan reached on the devices a run used, per precision."""

    per_precision: dict[str, dict[str, Any]]  # precision -> {"tflops" (per device), "shape" [M, N, K]}
    scanned: list[dict[str, Any]]  # every shape and precision timed: {"shape", "precision", "tflops"}
    backend: str
    device: str  # the device scanned (one of the run's)
    method: str
    measured_at: str
    seconds: float  # the scan's wall time
    measured_by: str = "this process"

    def best(self, precision: str) -> dict[str, Any] | None:
        """{"tflops", "shape"} at `precision` (per device), or None when it was not scanned."""
        return self.per_precision.get(precision)


def _timed_calls(call: Any) -> list[float]:
    """The seconds of REPEATS calls, each finished on the device, after one untimed call (compilation, warm-up)."""
    call()
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def _jax_timer(kind: str) -> tuple[Any, str]:
    import jax
    import jax.numpy as jnp

    device = jax.devices()[0]  # the default backend's first device: TPU, GPU or CPU, as the run uses
    product = jax.jit(jnp.matmul)

    def time_one(m: int, n: int, k: int, precision: str) -> list[float]:
        keys = jax.random.split(jax.random.PRNGKey(0))
        a = jax.device_put(jax.random.normal(keys[0], (m, k), dtype=precision), device)
        b = jax.device_put(jax.random.normal(keys[1], (k, n), dtype=precision), device)
        return _timed_calls(lambda: product(a, b).block_until_ready())

    return time_one, f"{device.platform}:{device.device_kind}"


def _tensorflow_timer(kind: str) -> tuple[Any, str]:
    import tensorflow as tf

    name = {"gpu": "/GPU:0", "tpu": "/TPU:0"}.get(kind, "/CPU:0")
    # one value back, which needs every element of the product (a single element could be computed alone)
    product = tf.function(lambda a, b: tf.reduce_sum(tf.cast(tf.linalg.matmul(a, b), tf.float32)))

    def time_one(m: int, n: int, k: int, precision: str) -> list[float]:
        try:
            return _time(m, n, k, precision)
        except tf.errors.OpError as error:  # out of memory, no such device, no kernel for the precision
            raise RuntimeError(str(error).splitlines()[0]) from error

    def _time(m: int, n: int, k: int, precision: str) -> list[float]:
        with tf.device(name):
            a = tf.random.normal((m, k), dtype=precision, seed=0)
            b = tf.random.normal((k, n), dtype=precision, seed=1)
            return _timed_calls(lambda: product(a, b).numpy())

    return time_one, name


def scan(kind: str, backend: str) -> AchievablePeak:
    """Time every shape of SHAPES[kind] at every precision of PRECISIONS[kind] on `backend` ("jax" or
    "tensorflow"), 2MNK FLOPs per product over the best of REPEATS calls after a warm-up."""
    time_one, device = (_jax_timer if backend == "jax" else _tensorflow_timer)(kind)
    started, scanned = time.perf_counter(), []
    for precision in PRECISIONS.get(kind, ("float32",)):
        for m, n, k in SHAPES.get(kind, SHAPES["cpu"]):
            try:  # a shape the device cannot take (out of memory beside the trained model) is named and skipped
                best = min(time_one(m, n, k, precision))
            except (RuntimeError, ValueError, TypeError) as error:
                scanned.append({"shape": [m, n, k], "precision": precision, "tflops": None,
                                "error": f"{type(error).__name__}: {str(error)[:200]}"})
                continue
            if best <= 0:
                raise MeasurementError(f"a {m}x{k} by {k}x{n} product took no measurable time")
            scanned.append({"shape": [m, n, k], "precision": precision, "tflops": 2.0 * m * n * k / best / 1e12})
    if all(row["tflops"] is None for row in scanned):
        raise MeasurementError(f"no product of the scan ran on {device}: {scanned[0]['error']}")
    per_precision: dict[str, dict[str, Any]] = {}
    for row in scanned:
        if row["tflops"] and row["tflops"] > per_precision.get(row["precision"], {}).get("tflops", 0.0):
            per_precision[row["precision"]] = {"tflops": row["tflops"], "shape": row["shape"]}
    method = (f"matmul scan on {backend} ({device}): {len(scanned)} products (M, N, K) x precision, best of "
              f"{REPEATS} calls after a warm-up each, 2MNK FLOPs; the highest per precision (after Bekman's "
              "mamf-finder)")
    return AchievablePeak(per_precision, scanned, backend, device, method,
                          dt.datetime.now(dt.timezone.utc).isoformat(), time.perf_counter() - started)


_SCANNED: dict[str, AchievablePeak] = {}  # by key: once per process


def _handed(path: str, key: str) -> AchievablePeak | None:
    try:
        fields = dict(host_facts(path)["achievable_peak"][key], measured_by="an earlier run of the sweep on this host")
        return AchievablePeak(**fields)
    except (KeyError, TypeError, ValueError):
        return None


_LAST: dict[str, AchievablePeak] = {}  # the latest answer per key: what the run's record keeps (achievable_record)


def achievable_peak(kind: str, backend: str) -> AchievablePeak:
    """This device's achievable peak (scan), once per host in a sweep (the host-facts file, keyed by backend
    and device kind), else once per process."""
    if backend not in ("jax", "tensorflow"):
        raise MeasurementError(f"no matmul scan on the {backend} backend (JAX or TensorFlow only)")
    key = f"{backend}:{kind}"
    _LAST[key] = peak = _achievable_peak(kind, backend, key)
    return peak


def _achievable_peak(kind: str, backend: str, key: str) -> AchievablePeak:
    path = os.environ.get(HOST_FACTS_ENV)
    if path:
        handed = _handed(path, key)
        if handed is not None:
            return handed
    if key not in _SCANNED:
        _SCANNED[key] = scan(kind, backend)
    measured = _SCANNED[key]
    if path:
        try:
            peaks = {**host_facts(path).get("achievable_peak", {}), key: dataclasses.asdict(measured)}
            update_host_facts(path, achievable_peak=peaks)
        except OSError:  # a folder of another host (a Dask worker elsewhere): this run's figure alone
            return measured
        return dataclasses.replace(measured, measured_by="this run, for the sweep's runs on this host")
    return measured


def achievable_fields(kind: str, backend: str | None, replicas: int, dtype: str, model_tflops: float | None,
                      datasheet_tflops: float | None) -> dict[str, Any]:
    """The record's figures of the achievable peak at the model's compute `dtype` (all `replicas` together), MFU
    against it, and its ratio to the datasheet peak; `achievable_note` says why a figure is missing, or why the
    scan exceeds the datasheet."""
    fields: dict[str, Any] = {"achievable_tflops": None, "achievable_shape": None, "achievable_precision": dtype,
                              "achievable_source": None, "achievable_measured_at": None, "mfu_achievable": None,
                              "achievable_over_datasheet": None, "achievable_note": None}
    try:
        peak = achievable_peak(kind, str(backend))
    except (MeasurementError, ImportError) as error:
        return {**fields, "achievable_note": f"no matmul scan: {error}"}
    best = peak.best(dtype)
    if best is None:
        return {**fields, "achievable_note": f"the scan on a {kind} covers {', '.join(PRECISIONS.get(kind, ()))}, "
                                             f"not {dtype}"}
    tflops = best["tflops"] * max(1, replicas if kind != "cpu" else 1)  # CPU replicas share the host's cores
    fields.update(achievable_tflops=tflops, achievable_shape=best["shape"],
                  achievable_source=f"{peak.method}; {peak.measured_by}", achievable_measured_at=peak.measured_at)
    if model_tflops:
        fields["mfu_achievable"] = model_tflops / tflops
    if datasheet_tflops:
        fields["achievable_over_datasheet"] = ratio = tflops / datasheet_tflops
        if ratio > 1:
            fields["achievable_note"] = (
                f"the scan reached {ratio:.2f}x the datasheet peak: " + (
                    "a CPU's peak is an estimate from the clock the OS reports (often the nominal clock in a VM; "
                    "turbo runs faster) and an assumed FMA count" if kind == "cpu" else
                    "a clock above the datasheet's, or the backend ran the product at a lower precision than the "
                    "datasheet row (TF32 or bf16 passes for float32)"))
    else:
        fields["achievable_note"] = "no datasheet peak to compare with"
    return fields


def achievable_record(kind: str, backend: str | None) -> dict[str, Any] | None:
    """The record's `achievable_peak`: the whole scan (every shape and precision, the best per precision, how and
    when it was taken), or None where there is none (achievable_fields' note says why)."""
    key = f"{backend}:{kind}"
    try:  # the answer this run's figures came from (asked again, a sweep's file would say an earlier run took it)
        return dataclasses.asdict(_LAST[key] if key in _LAST else achievable_peak(kind, str(backend)))
    except (MeasurementError, ImportError):
        return None
