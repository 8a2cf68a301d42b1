"""MLPerf Inference's two single-device scenarios and the settings they run under, kept apart as LoadGen keeps them.

- Settings (InferenceSettings, LoadGen's TestSettings): a scenario's measurement issues queries until it has issued
  its minimum count (`min_query_count`) AND run its minimum duration (`min_duration`), and stops at `max_duration`
  whatever it has (`issue_until_met`); it is valid only when both minimums are met, the one met last binding.
- Single-stream, on a system under test (`call`: a model's predict_on_batch, its NumPy answer on the host when it
  returns): one query after another at batch 1, each the next sample; the first call (tracing, compilation) and
  the warm-up queries timed apart; each latency is one call.
- Offline: at one batch size, the batch built from the samples before the clock starts; one call compiles, three
  warm up (the quickest sizes the runs), then runs of back-to-back calls lasting MIN_RUN_S (EXACT_95_RUNS at least,
  the fewest whose median interval reaches 95 %): samples/s per run, their median and its order-statistic interval.
- "max": the largest power of two whose inference memory (the weights, plus every layer's output per sample at
  the compute dtype, all counted live at once) stays within MAX_BATCH_FRACTION of the device's memory
  (colabkit.device.memory), capped; found from that estimate, never by running out of memory.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from colabkit.device.energy_source import Mark
from colabkit.device.memory import setup_memory
from colabkit.errors import ParameterError
from colabkit.statistics import EXACT_95_RUNS, median_ci

Scenario = Literal["single_stream", "offline"]  # LoadGen's SingleStream and Offline
WARMUP_CALLS, MIN_RUN_S = 3, 0.2
# The Keras backends whose greedy decode is built (inference/decode.py); the plan refuses the others before a
# kernel starts. Keras's PyTorch backend is not among them: its slice_update copies the whole cache every step.
DECODE_BACKENDS = ("jax", "tensorflow")
MAX_BATCH_CAP = 8192  # "max" never times more than this per call unless asked (minutes on a CPU otherwise)
MAX_BATCH_FRACTION = 0.5  # the estimate leaves out framework workspace: half the memory, not all of it
Clock = Callable[[], float]


def parse_batch_sizes(text: str | int | Sequence[int | str]) -> list[int | str]:
    """'1, 32, 256, max' -> [1, 32, 256, 'max'] (one whole number: a list of one): whole numbers >= 1 and 'max', in
    the order given, no repeats. ParameterError (one line) for anything else."""
    sizes: list[int | str] = []
    pieces = text.split(",") if isinstance(text, str) else [text] if isinstance(text, int) else text
    for part in (str(piece).strip() for piece in pieces):
        value: int | str = part if part == "max" else int(part) if part.isdigit() and int(part) >= 1 else ""
        if value == "":
            raise ParameterError(f"offline_batch_sizes = {text!r}: expected whole numbers >= 1 and 'max', "
                                 "separated by commas (e.g. '1,32,256,max')")
        if value not in sizes:
            sizes.append(value)
    return sizes


def parse_lengths(text: str | int) -> list[int]:
    """'128,512,2048' -> [128, 512, 2048] (a decode run's prompt lengths): whole numbers >= 1 in the order given, no
    repeats; ParameterError (one line) for anything else."""
    if not all(part.strip().isdigit() and int(part) >= 1 for part in str(text).split(",")):
        raise ParameterError(f"prompt_lengths = {text!r}: expected whole numbers >= 1 separated by commas (e.g. "
                             "'128,512,2048')")
    return list(dict.fromkeys(int(part) for part in str(text).split(",")))


@dataclass(frozen=True)
class InferenceSettings:
    """LoadGen's TestSettings for both scenarios: single-stream issues `min_query_count` queries or more, each offline
    batch size `offline_runs` runs or more, each for `min_duration_s` or more, stopped at `max_duration_s`.
    `offline_batch_sizes`: '1,32,256,max' (max: the largest the memory estimate allows, capped at `max_batch_cap`)."""

    min_query_count: int
    min_duration_s: float
    max_duration_s: float
    offline_batch_sizes: Sequence[int | str] | str = "1"
    warmup_queries: int = 20
    offline_runs: int = EXACT_95_RUNS  # the fewest runs whose median interval reaches 95 %
    max_batch_cap: int = MAX_BATCH_CAP
    batches: list[int | str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "batches", parse_batch_sizes(self.offline_batch_sizes))
        if self.min_query_count < 1 or not 0 <= self.min_duration_s <= self.max_duration_s or self.max_duration_s <= 0:
            raise ParameterError(f"inference settings: need queries >= 1 and 0 <= min_duration_s <= max_duration_s "
                                 f"> 0, got {self.min_query_count}, {self.min_duration_s} and {self.max_duration_s}")


def issue_until_met(query: Callable[[int], Any], settings: InferenceSettings, scenario: Scenario,
                    clock: Clock = time.perf_counter) -> tuple[list[Any], dict[str, Any]]:
    """(every query's result, the record's account of them): `query(i)` called for i = 0, 1, ... until `scenario`'s
    minimum count is issued and its minimum duration has passed, or until `max_duration_s`. The account: the
    `settings` to reach, the `duration_s` from the first issue to the last answer (as LoadGen's), whether both
    minimums were met (`valid`) and the one met last (`binding`: 'min_query_count' or 'min_duration'; None if not)."""
    minimum = settings.min_query_count if scenario == "single_stream" else settings.offline_runs
    results: list[Any] = []
    start, elapsed, elapsed_at_count = clock(), 0.0, 0.0
    while elapsed < settings.max_duration_s and (len(results) < minimum or elapsed < settings.min_duration_s):
        results.append(query(len(results)))
        elapsed = clock() - start
        elapsed_at_count = elapsed if len(results) == minimum else elapsed_at_count
    valid = len(results) >= minimum and elapsed >= settings.min_duration_s
    binding = None if not valid else "min_duration" if elapsed_at_count < settings.min_duration_s else "min_query_count"
    limits = {"min_query_count": minimum, "min_duration_s": settings.min_duration_s,
              "max_duration_s": settings.max_duration_s}
    return results, {"settings": limits, "duration_s": elapsed, "valid": valid, "binding": binding}


def _timed(call: Callable[[Any], Any], batch: Any, clock: Clock) -> float:
    start = clock()
    call(batch)
    return clock() - start


def single_stream(call: Callable[[Any], Any], samples: np.ndarray, settings: InferenceSettings,
                  clock: Clock = time.perf_counter, mark: Callable[[], Mark] | None = None) -> dict[str, Any]:
    """Latencies in seconds at batch 1, after the first call and the warm-up queries (module docstring). `mark`
    (an energy source's): called just before the first timed query and after the last, `energy_marks` the two."""
    count = len(samples)
    first_s = _timed(call, samples[0:1], clock)
    for index in range(settings.warmup_queries):
        call(samples[index % count:index % count + 1])
    begin = mark() if mark else None
    latencies, account = issue_until_met(lambda index: _timed(call, samples[index % count:index % count + 1], clock),
                                         settings, "single_stream", clock)
    marks = (begin, mark()) if mark and begin else None
    return {"first_call_s": first_s, "warmup_queries": settings.warmup_queries, "latencies_s": latencies,
            "energy_marks": marks, **account}


def offline(call: Callable[[Any], Any], samples: np.ndarray, batch: int, settings: InferenceSettings,
            clock: Clock = time.perf_counter, mark: Callable[[], Mark] | None = None) -> dict[str, Any]:
    """Samples/s at `batch`, per run, and their median with its interval (module docstring). `mark`: as
    single_stream's, around the timed runs; `inferences` the samples they inferred."""
    data = np.resize(samples, (batch, *samples.shape[1:])).astype(samples.dtype, copy=False)
    compile_s = _timed(call, data, clock)
    warm = min(_timed(call, data, clock) for _ in range(WARMUP_CALLS))
    calls = max(1, math.ceil(MIN_RUN_S / max(warm, 1e-9)))  # the quickest warm call: a busy moment sizes no run

    def one_run(_: int) -> float:
        start = clock()
        for _ in range(calls):
            call(data)
        return batch * calls / (clock() - start)

    begin = mark() if mark else None
    per_run, account = issue_until_met(one_run, settings, "offline", clock)
    marks = (begin, mark()) if mark and begin else None
    interval = median_ci(per_run)
    return {"batch": batch, "samples_per_s": interval.estimate, "low": interval.low, "high": interval.high,
            "runs": len(per_run), "calls_per_run": calls, "samples_per_s_runs": per_run, "first_call_s": compile_s,
            "note": interval.note, "energy_marks": marks, "inferences": batch * calls * len(per_run), **account}


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
