"""MLPerf Inference's two single-device scenarios on a system under test (`call`: a model's predict_on_batch, whose
NumPy answer is on the host when it returns), each issuing its queries under the settings (inference.settings).

- Single-stream: one query after another at batch 1, each the next sample; the first call (tracing, compilation)
  and the warm-up queries timed apart; each latency is one call.
- Offline: at one batch size, the batch built from the samples before the clock starts; one call compiles, three
  warm up (the quickest sizes the runs), then runs of back-to-back calls lasting MIN_RUN_S: samples/s per run,
  the median and its order-statistic interval over runs (colabkit.statistics.median_ci).
- "max": the largest power of two whose inference memory (the weights, plus every layer's output per sample at
  the compute dtype, all counted live at once) stays within MAX_BATCH_FRACTION of the device's memory
  (colabkit.device.memory), capped; found from that estimate, never by running out of memory.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from colabkit.device.memory import setup_memory
from colabkit.errors import ParameterError
from colabkit.inference.settings import MAX_BATCH_CAP, InferenceSettings, issue_until_met
from colabkit.statistics import median_ci

MAX_BATCH_FRACTION = 0.5  # the estimate leaves out framework workspace: half the memory, not all of it
WARMUP_CALLS = 3
MIN_RUN_S = 0.2
Clock = Callable[[], float]


def _timed(call: Callable[[Any], Any], batch: Any, clock: Clock) -> float:
    start = clock()
    call(batch)
    return clock() - start


def single_stream(call: Callable[[Any], Any], samples: np.ndarray, settings: InferenceSettings,
                  clock: Clock = time.perf_counter) -> dict[str, Any]:
    """Latencies in seconds at batch 1, after the first call and the warm-up queries (module docstring)."""
    count = len(samples)
    first_s = _timed(call, samples[0:1], clock)
    for index in range(settings.warmup_queries):
        call(samples[index % count:index % count + 1])
    latencies, account = issue_until_met(lambda index: _timed(call, samples[index % count:index % count + 1], clock),
                                         settings, "single_stream", clock)
    return {"first_call_s": first_s, "warmup_queries": settings.warmup_queries, "latencies_s": latencies, **account}


def offline(call: Callable[[Any], Any], samples: np.ndarray, batch: int, settings: InferenceSettings,
            clock: Clock = time.perf_counter) -> dict[str, Any]:
    """Samples/s at `batch`, per run, and their median with its interval (module docstring)."""
    data = np.resize(samples, (batch, *samples.shape[1:])).astype(samples.dtype, copy=False)
    compile_s = _timed(call, data, clock)
    warm = min(_timed(call, data, clock) for _ in range(WARMUP_CALLS))
    calls = max(1, math.ceil(MIN_RUN_S / max(warm, 1e-9)))  # the quickest warm call: a busy moment sizes no run

    def one_run(_: int) -> float:
        start = clock()
        for _ in range(calls):
            call(data)
        return batch * calls / (clock() - start)

    per_run, account = issue_until_met(one_run, settings, "offline", clock)
    interval = median_ci(per_run)
    return {"batch": batch, "samples_per_s": interval.estimate, "low": interval.low, "high": interval.high,
            "runs": len(per_run), "calls_per_run": calls, "samples_per_s_runs": per_run, "first_call_s": compile_s,
            "note": interval.note, **account}


def per_sample_values(model: Any) -> int | None:
    """Every layer's output values per sample, summed (None where a layer's output shape is unknown)."""
    total = 0
    for layer in model.layers:
        try:
            outputs = layer.output
        except (AttributeError, ValueError):
            return None
        for output in outputs if isinstance(outputs, (list, tuple)) else [outputs]:
            shape = [dim for dim in tuple(output.shape)[1:]]
            if any(dim is None for dim in shape):
                return None
            total += math.prod(shape)
    return total


def largest_batch(model: Any, device: Any, sample: np.ndarray, cap: int = MAX_BATCH_CAP) -> dict[str, Any]:
    """The largest power-of-two batch the inference memory estimate allows (module docstring), with how it was found."""
    memory = setup_memory(device)
    values = per_sample_values(model)
    compute_bytes = 2 if "16" in str(getattr(model, "dtype_policy", "")) else 4
    found: dict[str, Any] = {"cap": cap, "fraction": MAX_BATCH_FRACTION}
    if memory is None or values is None:
        why = "the device's memory is unknown" if memory is None else "a layer's output shape is unknown"
        return {**found, "estimate": None, "batch": cap, "how": f"{why}: the cap, {cap}, taken as it is"}
    weights = int(sum(math.prod(tuple(weight.shape)) for weight in model.weights)) * 4
    per_sample = values * compute_bytes + int(sample.nbytes)
    room = MAX_BATCH_FRACTION * memory.bytes / max(memory.copies, 1) - weights
    estimate = 2 ** int(math.log2(room / per_sample)) if room >= per_sample else 0
    if estimate < 1:
        raise ParameterError(f"offline_batch_sizes 'max': not even batch 1 fits {memory.where} by the estimate "
                             f"({per_sample} bytes a sample, {weights} of weights)")
    return {**found, "estimate": estimate, "batch": min(estimate, cap), "per_sample_bytes": per_sample,
            "weights_bytes": weights, "device_memory_bytes": memory.bytes, "where": memory.where,
            "how": f"weights + every layer's output per sample x batch <= {MAX_BATCH_FRACTION:g} of {memory.where}'s "
                   f"memory, the largest power of two{', capped' if estimate > cap else ''}"}
