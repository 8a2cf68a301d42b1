"""Inference as a mode of a notebook (docs/inference.md): the trained-or-not model's forward pass timed the
two ways MLPerf Inference scores a single device.

- Single-stream: one query after another at batch 1, each the next sample; the first call (tracing,
  compilation) and `warmup` more are timed apart; each latency is one `model.predict_on_batch`, whose
  answer comes back as NumPy, so the device has finished and the result is on the host when the
  clock stops. p50, p90 and p99 with their order-statistic intervals (colabkit.timing.percentiles).
- Offline: throughput at each of `batch_sizes`, the batch built from the samples before the clock
  starts; each size compiled and warmed up apart (three calls), then `runs` timed runs of enough calls to last
  `min_run_s`: samples/s per run, the median and its interval over runs (colabkit.statistics).
- The largest batch: "max" in `batch_sizes` is the largest power of two whose inference memory (the
  weights, plus every layer's output per sample at the compute dtype, all counted live at once) stays
  within MAX_BATCH_FRACTION of the device's memory (colabkit.device.memory), capped at `max_batch_cap`;
  found from that estimate, never by running out of memory. The record says which it was.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from colabkit.device.memory import setup_memory
from colabkit.errors import ParameterError
from colabkit.statistics import median_ci, summarize
from colabkit.timing.percentiles import CONFIDENCE, PERCENTILES, latency_percentiles, min_queries

MAX_BATCH_FRACTION = 0.5  # the estimate leaves out framework workspace: half the memory, not all of it
MAX_BATCH_CAP = 8192  # "max" never times more than this per call unless asked (minutes on a CPU otherwise)
WARMUP_QUERIES = 20
OFFLINE_RUNS = 6  # the fewest whose order-statistic interval reaches 95 % (colabkit.statistics.EXACT_95_RUNS)
WARMUP_CALLS = 3
MIN_RUN_S = 0.2
LATENCY_METHOD = ("one predict_on_batch per query at batch 1, its NumPy answer on the host before the clock stops "
                  "(time.perf_counter); the first call and the warm-up queries apart; percentiles by linear "
                  "interpolation, their intervals from order statistics (Binomial(n, q)), equal-tailed")
OFFLINE_METHOD = ("per batch size: one call compiles, three warm up (the quickest sizes the runs), then runs of "
                  "back-to-back predict_on_batch calls on one batch built before the clock starts (host-to-device "
                  "copy of the batch included, as an offline server's); samples/s per run, the median and its "
                  "order-statistic interval over runs (colabkit.statistics.median_ci, its level stated)")


def parse_batch_sizes(text: str) -> list[int | str]:
    """'1, 32, 256, max' -> [1, 32, 256, 'max']: whole numbers >= 1 and 'max', in the order given, no repeats.
    ParameterError (one line) for anything else."""
    sizes: list[int | str] = []
    for part in (piece.strip() for piece in str(text).split(",")):
        value: int | str = part if part == "max" else int(part) if part.isdigit() and int(part) >= 1 else ""
        if value == "":
            raise ParameterError(f"offline_batch_sizes = {text!r}: expected whole numbers >= 1 and 'max', "
                                 "separated by commas (e.g. '1,32,256,max')")
        if value not in sizes:
            sizes.append(value)
    return sizes


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


def single_stream(call: Callable[[Any], Any], samples: np.ndarray, queries: int, warmup: int = WARMUP_QUERIES,
                  clock: Callable[[], float] = time.perf_counter) -> dict[str, Any]:
    """`queries` latencies in seconds at batch 1, after the first call and `warmup` queries (module docstring)."""
    count = len(samples)
    start = clock()
    call(samples[0:1])
    first_s = clock() - start
    for index in range(warmup):
        call(samples[index % count:index % count + 1])
    latencies = []
    for index in range(queries):
        query = samples[index % count:index % count + 1]
        start = clock()
        call(query)
        latencies.append(clock() - start)
    return {"first_call_s": first_s, "warmup_queries": warmup, "latencies_s": latencies}


def offline(call: Callable[[Any], Any], samples: np.ndarray, batch: int, runs: int = OFFLINE_RUNS,
            min_run_s: float = MIN_RUN_S, clock: Callable[[], float] = time.perf_counter) -> dict[str, Any]:
    """Samples/s at `batch`, per run and their median with its interval (module docstring)."""
    data = np.resize(samples, (batch, *samples.shape[1:])).astype(samples.dtype, copy=False)
    start = clock()
    call(data)
    compile_s = clock() - start
    warm = []
    for _ in range(WARMUP_CALLS):
        start = clock()
        call(data)
        warm.append(clock() - start)
    calls = max(1, math.ceil(min_run_s / max(min(warm), 1e-9)))  # the quickest warm call: a busy moment sizes no run
    per_run = []
    for _ in range(runs):
        start = clock()
        for _ in range(calls):
            call(data)
        per_run.append(batch * calls / (clock() - start))
    interval = median_ci(per_run)
    return {"batch": batch, "samples_per_s": interval.estimate, "low": interval.low, "high": interval.high,
            "runs": runs, "calls_per_run": calls, "samples_per_s_runs": per_run, "first_call_s": compile_s,
            "note": interval.note}


@dataclass
class Inference:
    """What `measure_inference` measured: the record's `metrics` and other fields, and the latencies in seconds."""

    metrics: dict[str, Any]
    record_fields: dict[str, Any] = field(default_factory=dict)
    latencies_s: list[float] = field(default_factory=list)

    def describe(self) -> str:
        """The figures in a few lines."""
        single = self.record_fields["inference"]["single_stream"]
        lines = [f"single-stream, {single['queries']} queries at batch 1 (first call {single['first_call_s']:.3g} s "
                 "apart):"]
        for entry in single["percentiles"]:
            interval = (f"[{entry['low_ms']:.4g}, {entry['high_ms']:.4g}] ({100 * entry['coverage']:.1f} %)"
                        if entry["low_ms"] is not None else f"no interval: {entry['note']}")
            lines.append(f"  p{entry['percentile']:g} {entry['estimate_ms']:.4g} ms {interval}")
        for row in self.record_fields["inference"]["offline"]:
            interval = f" [{row['low']:.4g}, {row['high']:.4g}]" if row["low"] is not None else f" ({row['note']})"
            lines.append(f"offline batch {row['batch']}: {row['samples_per_s']:.4g} samples/s{interval}, "
                         f"{row['runs']} runs")
        return "\n".join(lines)


def measure_inference(model: Any, samples: Any, device: Any, *, queries: int, batch_sizes: Sequence[int | str],
                      runs: int = OFFLINE_RUNS, warmup: int = WARMUP_QUERIES, max_batch_cap: int = MAX_BATCH_CAP,
                      call: Callable[[Any], Any] | None = None,
                      clock: Callable[[], float] = time.perf_counter,
                      tokens_per_sample: int | None = None) -> Inference:
    """Single-stream latencies and offline throughput of `model` on `samples` (an array, one sample a row).
    `call` replaces model.predict_on_batch, `clock` time.perf_counter (a test's fakes). A family that measures
    more adds its entry to `record_fields["inference"]` beside these. `tokens_per_sample` (a sequence model's
    tokens in one sample): each offline row also gives `tokens_per_s`, samples/s x tokens, and the metrics
    `offline_tokens_per_s`: for a decoder whose forward pass reads the whole prompt, its prefill tokens/s."""
    samples = np.asarray(samples)
    if not len(samples):
        raise ParameterError("inference needs at least one sample to query with")
    call = call or model.predict_on_batch
    single = single_stream(call, samples, queries, warmup, clock)
    latencies = single["latencies_s"]
    percentiles = latency_percentiles(latencies)
    maximum = largest_batch(model, device, samples[:1], max_batch_cap) if "max" in batch_sizes else None
    batches = sorted({int(maximum["batch"]) if size == "max" and maximum else int(size) for size in batch_sizes})
    rows = [offline(call, samples, batch, runs, clock=clock) for batch in batches]
    metrics: dict[str, Any] = {"latency_queries": len(latencies), "latency_min_queries_p99": min_queries(99),
                               "latency_mean_ms": 1e3 * float(np.mean(latencies)),
                               "latency_first_call_ms": 1e3 * single["first_call_s"]}
    for entry in percentiles:
        name = f"latency_p{entry.percentile:g}"
        metrics.update({f"{name}_ms": 1e3 * entry.estimate,
                        f"{name}_low_ms": None if entry.low is None else 1e3 * entry.low,
                        f"{name}_high_ms": None if entry.high is None else 1e3 * entry.high})
    for row in rows if tokens_per_sample else []:
        row.update(tokens_per_sample=tokens_per_sample, tokens_per_s=row["samples_per_s"] * tokens_per_sample,
                   tokens_low=None if row["low"] is None else row["low"] * tokens_per_sample,
                   tokens_high=None if row["high"] is None else row["high"] * tokens_per_sample)
    best = max(rows, key=lambda row: row["samples_per_s"] or 0.0)
    metrics.update(offline_samples_per_s=best["samples_per_s"], offline_batch=best["batch"])
    if tokens_per_sample:
        metrics["offline_tokens_per_s"] = best["tokens_per_s"]
    for row in rows:
        metrics[f"offline_samples_per_s_b{row['batch']}"] = row["samples_per_s"]
    ms = [1e3 * value for value in latencies]
    inference = {
        "confidence": CONFIDENCE,
        "single_stream": {"queries": len(latencies), "warmup_queries": warmup, "first_call_s": single["first_call_s"],
                          "latencies_ms": ms, "method": LATENCY_METHOD,
                          "percentiles": [{"percentile": entry.percentile, "estimate_ms": 1e3 * entry.estimate,
                                           "low_ms": None if entry.low is None else 1e3 * entry.low,
                                           "high_ms": None if entry.high is None else 1e3 * entry.high,
                                           "coverage": entry.coverage, "min_queries": entry.min_queries,
                                           "note": entry.note} for entry in percentiles]},
        "offline": rows, "offline_method": OFFLINE_METHOD, "max_batch": maximum,
    }
    fields = {"inference": inference, "timings": {"single_stream_latency_s": summarize(latencies),
                                                  "offline_samples_per_s": {str(row["batch"]): row["samples_per_s_runs"]
                                                                            for row in rows}}}
    return Inference(metrics, fields, latencies)
