"""Timing that can be trusted on asynchronous devices.

GPUs and TPUs run ahead of Python: a call returns when work is queued, not done. Every clock
here is read only after the work is forced to completion (`block_until_ready`). The first call
of a compiled function includes tracing and compilation, so `measure` reports it apart (cold)
from the steady-state calls (warm), and summarises warm samples with a central value and spread.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from colabkit.errors import MeasurementError
from colabkit.statistics import summarize  # the summary of warm samples (colabkit.statistics owns it)


def block_until_ready(value: Any) -> Any:
    """Wait until the device work that produced `value` is complete; return `value`.

    Understands TensorFlow tensors and distributed values, JAX arrays, PyTorch tensors, NumPy
    arrays and Python containers of these. Anything else is returned as is.
    """
    if value is None or isinstance(value, (int, float, str, bytes)):
        return value
    if isinstance(value, Mapping):
        for item in value.values():
            block_until_ready(item)
        return value
    if isinstance(value, (list, tuple)):
        for item in value:
            block_until_ready(item)
        return value
    module = type(value).__module__
    if module.startswith("tensorflow") and isinstance(getattr(value, "values", None), tuple):
        for item in value.values:  # PerReplica / Mirrored: one tensor per replica
            block_until_ready(item)
        return value
    if hasattr(value, "block_until_ready"):  # JAX
        value.block_until_ready()
        return value
    if module.startswith("torch"):
        if getattr(value, "is_cuda", False):
            import torch

            torch.cuda.synchronize(value.device)
        return value
    if hasattr(value, "numpy") and module.startswith("tensorflow"):
        value.numpy()  # copying the value out waits for the ops that produce it
    return value


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """Call fn(*args, **kwargs), wait for its device work, return (result, seconds)."""
    start = time.perf_counter_ns()
    result = block_until_ready(fn(*args, **kwargs))
    return result, (time.perf_counter_ns() - start) / 1e9


@dataclass(frozen=True)
class Measurement:
    """Cold (first call: tracing, compile and run) and warm (steady-state) durations in seconds."""

    cold_s: float
    warm_s: tuple[float, ...]
    warmup: int

    @property
    def stats(self) -> dict[str, float | int | None]:
        return summarize(self.warm_s)

    @property
    def median_s(self) -> float:
        return float(self.stats["median"])  # type: ignore[arg-type]

    @property
    def min_s(self) -> float:
        return min(self.warm_s)

    @property
    def max_s(self) -> float:
        return max(self.warm_s)

    def as_dict(self) -> dict[str, Any]:
        """The form a result record's `timings` section stores."""
        stats = self.stats
        return {
            "cold_s": self.cold_s,
            "warm_s": list(self.warm_s),
            "warmup_calls_discarded": self.warmup,
            "min_s": stats["min"],
            "median_s": stats["median"],
            "mean_s": stats["mean"],
            "std_s": stats["std"],
            "repeats": stats["n"],
        }


def measure(fn: Callable[[], Any], repeats: int = 5, warmup: int = 1) -> Measurement:
    """Time `fn`: one cold call, `warmup` discarded calls, then `repeats` warm calls.

    Each call's result is forced to completion before the clock stops. Raises MeasurementError
    for a non-positive repeat count or a duration that is not a positive finite number.
    """
    if repeats < 1:
        raise MeasurementError(f"repeats must be at least 1, got {repeats}")
    if warmup < 0:
        raise MeasurementError(f"warmup must be 0 or more, got {warmup}")
    _, cold = timed(fn)
    for _ in range(warmup):
        timed(fn)
    warm = tuple(timed(fn)[1] for _ in range(repeats))
    for seconds in (cold, *warm):
        if not (math.isfinite(seconds) and seconds > 0):
            raise MeasurementError(f"a timed call took {seconds!r} s: the clock or the call is broken")
    return Measurement(cold_s=cold, warm_s=warm, warmup=warmup)


def format_duration(seconds: float) -> str:
    """A duration as an estimate reads: '~3 h 10 min', '~4 min 20 s', '~35 s' (rounded: an estimate, not a
    measurement); 'unknown' for what is not a duration."""
    if not math.isfinite(seconds) or seconds < 0:
        return "unknown"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"~{hours} h {minutes} min"
    if minutes:
        return f"~{minutes} min {secs} s" if minutes < 10 else f"~{minutes} min"
    return f"~{secs} s"
