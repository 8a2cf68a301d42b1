"""The achievable peak: the best matmul throughput a device reaches over a few shapes and its precisions
(after Bekman's mamf-finder), a second yardstick for MFU beside the datasheet (docs/peaks.md).

Measured, not sampled: every shape is timed back to back for at least MIN_SECONDS (after a warm-up call
that compiles it), and the whole scan is repeated until two passes in a row agree within AGREEMENT
(at most MAX_PASSES); the figure is the best over the passes, kept with every pass's best (its spread)
and when it was taken. Scanned on the run's own backend (JAX, TPUs included, or TensorFlow) and kept per
host: in the sweep's host facts for its runs and in the host's cache (colabkit.device.bandwidth:
`host_cache_path`) for later sweeps, reused while `scan_identity` (the host, its usable cores, the device
and its driver, the backend's version) is unchanged; by hand, once per process.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colabkit.device.bandwidth import (HOST_CACHE_ENV, HOST_FACTS_ENV, host_cache_path, host_cache_problem, host_facts,
                                      update_host_facts)
from colabkit.errors import MeasurementError

# (M, N, K) per device kind: squares, and a wide and a deep product (mamf-finder scans all three axes).
SHAPES: dict[str, tuple[tuple[int, int, int], ...]] = {
    "cpu": ((512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (512, 512, 2048)),
    "gpu": ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (4096, 4096, 16384)),
}
SHAPES["tpu"] = SHAPES["gpu"]
# The precisions each kind's datasheet names (a CPU's estimate: float32 only).
PRECISIONS = {"cpu": ("float32",), "gpu": ("float32", "float16", "bfloat16"), "tpu": ("bfloat16", "float32")}
MIN_SECONDS = 1.0  # each shape is timed back to back for at least this long (a pass's share of the scan)
SCAN_SECONDS_ENV = "COLABKIT_SCAN_SECONDS"  # overrides MIN_SECONDS (the test suite's notebooks: 0.05)
MIN_CALLS = 3  # and for at least this many calls, however long each takes
AGREEMENT = 0.05  # two passes in a row whose bests differ by at most this fraction end the scan
MAX_PASSES = 5  # the scan ends here even without agreement, and says so


@dataclass(frozen=True)
class AchievablePeak:
    """The best matmul throughput a scan reached on the devices a run used, per precision, with the
    spread of its passes."""

    per_precision: dict[str, dict[str, Any]]  # precision -> {"tflops" (per device), "shape", "passes", "low_tflops"}
    scanned: list[dict[str, Any]]  # every pass, shape and precision timed: {"pass", "shape", "precision", "tflops", ...}
    backend: str
    device: str  # the device scanned (one of the run's)
    method: str
    measured_at: str
    seconds: float  # the scan's wall time
    measured_by: str = "this process"
    passes: int = 1
    agreed: bool = False  # whether the last two passes agreed within `agreement`
    agreement: float = AGREEMENT
    min_seconds: float = MIN_SECONDS
    identity: dict[str, Any] = field(default_factory=dict)  # what it was measured on (scan_identity)

    def best(self, precision: str) -> dict[str, Any] | None:
        """{"tflops", "shape", ...} at `precision` (per device), or None when it was not scanned."""
        return self.per_precision.get(precision)


def _timed_calls(call: Any, min_seconds: float) -> list[float]:
    """The seconds of back-to-back calls, each finished on the device, for at least `min_seconds` and
    MIN_CALLS calls, after one untimed call (compilation, warm-up)."""
    call()
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < MIN_CALLS or time.perf_counter() - started < min_seconds:
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def _jax_timer(kind: str) -> tuple[Any, str]:
    import jax
    import jax.numpy as jnp

    device = jax.devices()[0]  # the default backend's first device: TPU, GPU or CPU, as the run uses
    product = jax.jit(jnp.matmul)

    def time_one(m: int, n: int, k: int, precision: str, min_seconds: float) -> list[float]:
        keys = jax.random.split(jax.random.PRNGKey(0))
        a = jax.device_put(jax.random.normal(keys[0], (m, k), dtype=precision), device)
        b = jax.device_put(jax.random.normal(keys[1], (k, n), dtype=precision), device)
        return _timed_calls(lambda: product(a, b).block_until_ready(), min_seconds)

    return time_one, f"{device.platform}:{device.device_kind}"


def _tensorflow_timer(kind: str) -> tuple[Any, str]:
    import tensorflow as tf

    name = {"gpu": "/GPU:0", "tpu": "/TPU:0"}.get(kind, "/CPU:0")
    # one value back, which needs every element of the product (a single element could be computed alone)
    product = tf.function(lambda a, b: tf.reduce_sum(tf.cast(tf.linalg.matmul(a, b), tf.float32)))

    def time_one(m: int, n: int, k: int, precision: str, min_seconds: float) -> list[float]:
        try:
            with tf.device(name):
                a = tf.random.normal((m, k), dtype=precision, seed=0)
                b = tf.random.normal((k, n), dtype=precision, seed=1)
                return _timed_calls(lambda: product(a, b).numpy(), min_seconds)
        except tf.errors.OpError as error:  # out of memory, no such device, no kernel for the precision
            raise RuntimeError(str(error).splitlines()[0]) from error

    gpus = tf.config.list_physical_devices("GPU") if kind == "gpu" else []
    model = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "") if gpus else ""
    return time_one, f"{name} {model}".strip()


def _pass(time_one: Any, kind: str, number: int, skip: set[tuple[str, tuple[int, int, int]]],
          min_seconds: float) -> list[dict[str, Any]]:
    """One pass over every shape and precision not in `skip` (those that failed before)."""
    rows = []
    for precision in PRECISIONS.get(kind, ("float32",)):
        for m, n, k in SHAPES.get(kind, SHAPES["cpu"]):
            if (precision, (m, n, k)) in skip:
                continue
            try:  # a shape the device cannot take (out of memory beside the trained model) is named and skipped
                times = sorted(time_one(m, n, k, precision, min_seconds))
            except (RuntimeError, ValueError, TypeError) as error:
                skip.add((precision, (m, n, k)))
                rows.append({"pass": number, "shape": [m, n, k], "precision": precision, "tflops": None,
                             "error": f"{type(error).__name__}: {str(error)[:200]}"})
                continue
            if times[0] <= 0:
                raise MeasurementError(f"a {m}x{k} by {k}x{n} product took no measurable time")
            flops = 2.0 * m * n * k
            rows.append({"pass": number, "shape": [m, n, k], "precision": precision, "tflops": flops / times[0] / 1e12,
                         "median_tflops": flops / times[len(times) // 2] / 1e12, "calls": len(times),
                         "seconds": sum(times)})
    return rows


def _bests(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The best row per precision among `rows`."""
    best: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["tflops"] and row["tflops"] > best.get(row["precision"], {}).get("tflops", 0.0):
            best[row["precision"]] = row
    return best


def _agree(earlier: dict[str, dict[str, Any]], later: dict[str, dict[str, Any]], agreement: float) -> bool:
    shared = set(earlier) & set(later)
    return bool(shared) and all(abs(earlier[p]["tflops"] - later[p]["tflops"])
                                <= agreement * max(earlier[p]["tflops"], later[p]["tflops"]) for p in shared)


def scan(kind: str, backend: str, min_seconds: float = MIN_SECONDS, agreement: float = AGREEMENT,
         max_passes: int = MAX_PASSES) -> AchievablePeak:
    """Time every shape of SHAPES[kind] at every precision of PRECISIONS[kind] on `backend` ("jax" or
    "tensorflow"): each back to back for at least `min_seconds` after a warm-up call, 2MNK FLOPs over its
    best call; passes repeated until two in a row agree within `agreement` or `max_passes` were made. The
    peak per precision is the best over the passes, with every pass's best beside it."""
    time_one, device = (_jax_timer if backend == "jax" else _tensorflow_timer)(kind)
    started, scanned, skip, passes = time.perf_counter(), [], set(), []  # type: ignore[var-annotated]
    for number in range(1, max(1, max_passes) + 1):
        rows = _pass(time_one, kind, number, skip, min_seconds)
        scanned += rows
        if all(row["tflops"] is None for row in rows):
            raise MeasurementError(f"no product of the scan ran on {device}: {scanned[0]['error']}")
        passes.append(_bests(rows))
        if len(passes) > 1 and _agree(passes[-2], passes[-1], agreement):
            break
    per_precision: dict[str, dict[str, Any]] = {}
    for precision, row in _bests(scanned).items():
        figures = [bests[precision]["tflops"] for bests in passes if precision in bests]
        per_precision[precision] = {"tflops": row["tflops"], "shape": row["shape"], "passes": figures,
                                    "low_tflops": min(figures), "spread": 1 - min(figures) / row["tflops"]}
    agreed = len(passes) > 1 and _agree(passes[-2], passes[-1], agreement)
    method = (f"matmul scan on {backend} ({device}): {len(SHAPES.get(kind, SHAPES['cpu']))} shapes (M, N, K) x "
              f"{len(PRECISIONS.get(kind, ('float32',)))} precision(s), each timed back to back for at least "
              f"{min_seconds:g} s after a warm-up call, 2MNK FLOPs over its best call; {len(passes)} pass(es) "
              + (f"until two in a row agreed within {agreement:.0%}" if agreed else
                 f"without two in a row agreeing within {agreement:.0%}") +
              "; the best over the passes per precision (after Bekman's mamf-finder)")
    return AchievablePeak(per_precision, scanned, backend, device, method, dt.datetime.now(dt.timezone.utc).isoformat(),
                          time.perf_counter() - started, passes=len(passes), agreed=agreed, agreement=agreement,
                          min_seconds=min_seconds)


def _backend_version(backend: str) -> str:
    from importlib import metadata

    names = ("jax", "jaxlib") if backend == "jax" else ("tensorflow",)
    versions = []
    for name in names:
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} ?")
    return ", ".join(versions)


def scan_identity(kind: str, backend: str) -> dict[str, Any]:
    """What a kept scan must share with this run to be reused (with the host's name, CPU model, cache and
    usable logical CPUs, which colabkit.device.bandwidth.host_facts checks): the device kind, the backend
    and its version, and on a GPU every GPU's name and the driver's version (nvidia-smi). Any change, a
    new TensorFlow or driver included, means a new scan: the peak is what this stack reaches."""
    from colabkit.device.probes import nvidia_smi

    identity: dict[str, Any] = {"kind": kind, "backend": backend, "backend_version": _backend_version(backend)}
    if kind == "gpu":
        identity["gpus"] = [[gpu.get("name"), gpu.get("driver_version")] for gpu in nvidia_smi()]
    if kind == "tpu":
        identity["tpu"] = os.environ.get("TPU_ACCELERATOR_TYPE", "")
    return identity


def _kept(path: str | Path | None, key: str, identity: dict[str, Any], by: str) -> AchievablePeak | None:
    """The scan kept under `key` in the host-facts file `path`, when measured on this host and `identity`."""
    if path is None:
        return None
    try:
        fields = dict(host_facts(path)["achievable_peak"][key])
        peak = AchievablePeak(**{**fields, "measured_by": by})
    except (KeyError, TypeError, ValueError):
        return None
    return peak if peak.identity == identity else None


def _keep(path: str | Path | None, key: str, peak: AchievablePeak) -> str | None:
    """Write `peak` under `key` in the host-facts file `path`: None once written, else why not ('' where there
    is no file to write: none named, or a folder of another host, a Dask worker elsewhere)."""
    if path is None:
        return ""
    problem = host_cache_problem(Path(path))
    if problem:
        return problem
    try:
        update_host_facts(path, achievable_peak={**host_facts(path).get("achievable_peak", {}),
                                                 key: dataclasses.asdict(peak)})
    except OSError as error:
        return f"cannot be written ({error.strerror or error})"
    return None


def first_scan_note(kind: str, backend: str) -> str | None:
    """What a sweep says before its runs when this host keeps no scan a `kind` run on `backend` would reuse: its
    first training run scans (a few seconds per shape and pass), once per host. None where one is kept."""
    key, cache = f"{backend}:{kind}", host_cache_path()
    if _kept(cache, key, scan_identity(kind, backend), "") is not None:
        return None
    seconds = float(os.environ.get(SCAN_SECONDS_ENV) or MIN_SECONDS)
    shapes = len(SHAPES.get(kind, SHAPES["gpu"])) * len(PRECISIONS.get(kind, ("float32",)))
    kept = f"kept in {cache} for later sweeps" if cache else "kept for this sweep's runs only (no host cache)"
    return (f"the first {kind} training run on {backend} also scans the achievable matmul peak: {shapes} shape(s) x "
            f"{seconds:g} s a pass, 2 passes or more (about {2 * shapes * seconds + 2:.0f} s or more), once per host, "
            f"{kept}")


def kept_cpu_best() -> tuple[float, str] | None:
    """The highest float32 rate a kept scan reached on this host's CPU (any backend; the sweep's file
    and the host's cache, where measured on this host), and when: what a CPU peak estimate must not
    fall below (colabkit.device.peaks.at_least); None where nothing is kept."""
    found = []
    for path in (os.environ.get(HOST_FACTS_ENV), host_cache_path()):
        kept = host_facts(path).get("achievable_peak", {}) if path else {}
        for key, scan_fields in kept.items() if isinstance(kept, dict) else ():
            best = (scan_fields.get("per_precision") or {}).get("float32") if isinstance(scan_fields, dict) else None
            if key.endswith(":cpu") and isinstance(best, dict) and isinstance(best.get("tflops"), (int, float)):
                found.append((float(best["tflops"]), str(scan_fields.get("measured_at", ""))[:10]))
    return max(found) if found else None


_SCANNED: dict[str, AchievablePeak] = {}  # by key: once per process
_SAID: set[str] = set()  # the host cache's problems printed already: once per process
_LAST: dict[str, AchievablePeak] = {}  # the latest answer per key: what the run's record keeps (achievable_record)


def achievable_peak(kind: str, backend: str) -> AchievablePeak:
    """This device's achievable peak: kept from an earlier run of this sweep (its host-facts file) or an
    earlier sweep on this host (the host's cache) where measured on the same host, device, driver and
    backend version; else scanned now (once per process) and kept in both for the others."""
    if backend not in ("jax", "tensorflow"):
        raise MeasurementError(f"no matmul scan on the {backend} backend (JAX or TensorFlow only)")
    key = f"{backend}:{kind}"
    _LAST[key] = peak = _achievable_peak(kind, backend, key)
    return peak


def _achievable_peak(kind: str, backend: str, key: str) -> AchievablePeak:
    identity = scan_identity(kind, backend)
    sweep, cache = os.environ.get(HOST_FACTS_ENV), host_cache_path()
    kept = (_kept(sweep, key, identity, "an earlier run of the sweep on this host")
            or _kept(cache, key, identity, "an earlier sweep on this host (the host's cache)"))
    if kept is not None:
        return kept
    if key not in _SCANNED or _SCANNED[key].identity != identity:
        seconds = float(os.environ.get(SCAN_SECONDS_ENV) or MIN_SECONDS)
        _SCANNED[key] = dataclasses.replace(scan(kind, backend, min_seconds=seconds), identity=identity)
    measured = _SCANNED[key]
    outcomes = {name: _keep(path, key, measured) for name, path in (("the sweep's runs", sweep), ("later sweeps", cache))}
    kept_in = [name for name, problem in outcomes.items() if problem is None]
    said = measured.measured_by if not kept_in else f"this run, kept for {' and '.join(kept_in)} on this host"
    if outcomes["later sweeps"]:  # the host's cache named and not kept: said once, in one line, and in the record
        problem = f"{HOST_CACHE_ENV}={cache}: {outcomes['later sweeps']}; the scan is not kept for later sweeps"
        if problem not in _SAID:
            _SAID.add(problem)
            print(f"colabkit: {problem}", file=sys.stderr)
        said += f" ({problem})"
    return dataclasses.replace(measured, measured_by=said)


def achievable_fields(kind: str, backend: str | None, replicas: int, dtype: str, model_tflops: float | None,
                      datasheet_tflops: float | None) -> dict[str, Any]:
    """The record's figures of the achievable peak at the model's compute `dtype` (all `replicas` together), MFU
    against it with the range the scan's passes give it, and its ratio to the datasheet peak;
    `achievable_note` says why a figure is missing, why the scan exceeds the datasheet, or that its passes
    did not agree."""
    fields: dict[str, Any] = {"achievable_tflops": None, "achievable_low_tflops": None, "achievable_spread": None,
                              "achievable_passes": None, "achievable_agreed": None, "achievable_shape": None,
                              "achievable_precision": dtype, "achievable_source": None, "achievable_measured_at": None,
                              "mfu_achievable": None, "mfu_achievable_low": None, "mfu_achievable_high": None,
                              "achievable_over_datasheet": None, "achievable_note": None}
    try:
        peak = achievable_peak(kind, str(backend))
    except (MeasurementError, ImportError) as error:
        return {**fields, "achievable_note": f"no matmul scan: {error}"}
    best = peak.best(dtype)
    if best is None:
        return {**fields, "achievable_note": f"the scan on a {kind} covers {', '.join(PRECISIONS.get(kind, ()))}, "
                                             f"not {dtype}"}
    scale = max(1, replicas if kind != "cpu" else 1)  # CPU replicas share the host's cores
    tflops, low = best["tflops"] * scale, best.get("low_tflops", best["tflops"]) * scale
    fields.update(achievable_tflops=tflops, achievable_low_tflops=low, achievable_spread=1 - low / tflops,
                  achievable_passes=peak.passes, achievable_agreed=peak.agreed, achievable_shape=best["shape"],
                  achievable_source=f"{peak.method}; {peak.measured_by}", achievable_measured_at=peak.measured_at)
    notes = [] if peak.agreed else [
        f"the scan's {peak.passes} passes did not agree within {peak.agreement:.0%} (best {low:.3g} to {tflops:.3g} "
        "TFLOPS): the host was busy, and MFU against it is uncertain by as much"]
    if model_tflops:  # the passes' range: MFU against the best pass (the figure) and against the slowest
        fields.update(mfu_achievable=model_tflops / tflops, mfu_achievable_low=model_tflops / tflops,
                      mfu_achievable_high=model_tflops / low)
    if datasheet_tflops:
        fields["achievable_over_datasheet"] = ratio = tflops / datasheet_tflops
        if ratio > 1:
            notes.append(f"the scan reached {ratio:.2f}x the datasheet peak, so that peak is wrong for this device: " + (
                "a CPU's peak is an estimate at a stated clock (docs/peaks.md), and a core that boosts above it "
                "runs faster" if kind == "cpu" else
                "a clock above the datasheet's, or the backend ran the product at a lower precision than the "
                "datasheet row (TF32 or bf16 passes for float32)"))
    else:
        notes.append("no datasheet peak to compare with")
    fields["achievable_note"] = "; ".join(notes) or None
    return fields


def achievable_record(kind: str, backend: str | None) -> dict[str, Any] | None:
    """The record's `achievable_peak`: the whole scan (every pass, shape and precision, the best per precision
    with its passes, how and when it was taken, what it was measured on), or None where there is none
    (achievable_fields' note says why)."""
    key = f"{backend}:{kind}"
    try:  # the answer this run's figures came from (asked again, a kept scan would say an earlier run took it)
        return dataclasses.asdict(_LAST[key] if key in _LAST else achievable_peak(kind, str(backend)))
    except (MeasurementError, ImportError):
        return None
