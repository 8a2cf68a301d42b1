"""What bounds a training run (its input pipeline, the host, or the device), measured after training
by short extra passes over the same model and data, and a profile of a few steps on request.

Three throughputs beside the run's own, in samples/s: the input pipeline alone
(`input_samples_per_s`), the same steps fed from memory (one of the run's batches repeated), and the
compiled step with no input and no per-step host round trip (`device_samples_per_s`: the whole epoch
as one execution on TensorFlow, Keras's multi-step loop on JAX, per-step dispatch on PyTorch, said
so). Compile passes are left out; the model's weights and optimizer state are restored afterwards.
colabkit.training.shares turns the rates into shares and `bound_by`. See docs/bottlenecks.md.
"""

from __future__ import annotations

import itertools
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import keras

from colabkit.errors import ExperimentError
from colabkit.training.fit import fit, one_pass_per_epoch
from colabkit.training.roofline import roofline_point
from colabkit.training.setup import repeated_batch
from colabkit.training.shares import BREAKDOWN_METRICS, bound_by, describe_shares, explain_idle, step_shares
from colabkit.training.timer import TrainingTimer

TARGET_S = 0.5  # steady seconds per timed epoch (or whole input passes) of each pass
EPOCHS = 3  # of each fit-based pass: one warm-up (tracing, compiling) and two steady
MIN_STEPS, MAX_STEPS = 10, 20_000
MAX_EPOCHS = 50  # steady epochs of the fed-from-memory pass, at most
WARMUP_BATCHES = 2  # of an endless input stream (a finite one skips a whole first pass)
CPU_DEVICE_IS = ("on a CPU the device is the host's own cores: the same cores run the input pipeline, the host's "
                 "Python and the computation, so device time is what the cores take to compute a step when nothing "
                 "else is asked of them, and input wait and host overhead include the contention for those cores")
METHOD = {
    "input": "the run's input pipeline iterated alone (no model) over whole steady passes, samples counted exactly",
    "memory": ("fit at the run's steps_per_execution and steps per epoch on one of its batches repeated from memory, "
               "with a batch-level callback as in the run (TrainingTimer): the run without its input pipeline"),
    "device": {"tensorflow": "fit with each epoch one execution (tf.while_loop in one tf.function) on one batch "
                             "repeated on the device: no input, no per-step host round trip",
               "jax": ("fit with each epoch one execution on one batch repeated: no input and no log or callback "
                       "round trip between steps; Keras on JAX still dispatches each step of an execution from "
                       "Python, asynchronously, so dispatch counts as device time where it is slower than the step"),
               "torch": ("fit on one batch repeated, one step per call (Keras on PyTorch has no steps_per_execution): "
                         "per-step dispatch remains, so the host share is a lower bound")},
    "shares": ("per sample t = 1/throughput; device = t_device/t, host = (t_memory - t_device)/t, input wait = "
               "(t_run - t_memory)/t, t = max(t_run, t_memory, t_device); bound_by: the largest share, the "
               "roofline's compute or memory where the device's share is the largest"),
}


@dataclass
class Breakdown:
    """What `measure_breakdown` found: `metrics` (flat, merged into the record's metrics), `section` (the
    record's `breakdown`) and, when a profile was asked for, `op_breakdown`."""

    metrics: dict[str, Any]
    section: dict[str, Any]
    op_breakdown: dict[str, Any] | None = None

    def record_fields(self) -> dict[str, Any]:
        """The record's top-level fields: `breakdown`, and `op_breakdown` when a profile was taken."""
        return {"breakdown": self.section, **({"op_breakdown": self.op_breakdown} if self.op_breakdown else {})}

    def describe(self) -> str:
        """A few lines for the notebook: the shares, the three throughputs and what the passes cost."""
        if not self.section.get("measured"):
            return f"breakdown not measured: {self.section.get('reason')}"
        m = self.metrics
        lines = [describe_shares("Where the time goes", m, m["bound_by"]),
                 f"throughput: run {self.section['samples_per_s']:,.0f}, input pipeline alone "
                 f"{m['input_samples_per_s']:,.0f}, fed from memory {self.section['memory_samples_per_s']:,.0f}, "
                 f"device alone {m['device_samples_per_s']:,.0f} samples/s; the passes took "
                 f"{self.section['seconds']['total']:.1f} s"]
        profile = self.op_breakdown
        if profile:
            if profile.get("categories"):
                shown = sorted(profile["categories"].items(), key=lambda item: -item[1])[:5]
                lines.append(f"profile of {profile['steps']} steps ({profile['trace_dir']}): "
                             + ", ".join(f"{name} {share:.0%}" for name, share in shown))
            else:
                lines.append(f"profile of {profile['steps']} steps written to {profile['trace_dir']}; "
                             f"not summarised: {profile['reason']}")
        return "\n".join(lines)


def batch_rows(batch: Any) -> int:
    """Samples in a batch: the leading axis of its first array."""
    return int(keras.tree.flatten(batch)[0].shape[0])


def _batches(data: Any) -> tuple[Iterator[Any], int | None]:
    """The batches fit draws from `data` (its passes repeated, one iterator) and the batches of one
    pass (None for an endless stream)."""
    repeated, per_pass = one_pass_per_epoch(data, None)
    if isinstance(repeated, keras.utils.PyDataset):
        count = repeated.num_batches
        return (repeated[index % count if count else index] for index in itertools.count()), per_pass
    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(repeated, tf.data.Dataset):
        return iter(repeated), per_pass
    raise ExperimentError(f"an input pipeline of type {type(data).__name__} cannot be iterated alone: "
                          "pass a tf.data dataset or a keras.utils.PyDataset")


def input_rate(data: Any, target_s: float = TARGET_S, max_batches: int = MAX_STEPS) -> tuple[dict[str, Any], Any]:
    """The run's input pipeline alone: ({samples_per_s, batches, samples, seconds, ...}, its first batch).
    A finite pipeline's first pass is left out and whole passes are timed (a pass's start, e.g. filling
    a shuffle buffer, counts once per pass, as in training); an endless one skips WARMUP_BATCHES."""
    batches, per_pass = _batches(data)
    warmup = per_pass or WARMUP_BATCHES
    first = next(batches)
    for _ in range(warmup - 1):
        next(batches)
    samples = count = 0
    start = time.perf_counter()
    for batch in batches:
        samples += batch_rows(batch)
        count += 1
        whole = per_pass is None or count % per_pass == 0
        if whole and (time.perf_counter() - start >= target_s or count >= max_batches):
            break
    seconds = time.perf_counter() - start
    return {"samples_per_s": samples / seconds, "batches": count, "samples": samples, "seconds": seconds,
            "warmup_batches": warmup, "batches_per_pass": per_pass}, first


def _timed_fit(model: Any, data: Any, steps: int, rows: int, epochs: int = EPOCHS) -> dict[str, Any]:
    """Steady samples/s of fit over `steps` steps per epoch for `epochs` epochs (the first left out),
    clocked by a TrainingTimer."""
    timer = TrainingTimer(global_batch_size=rows)
    fit(model, data, epochs=epochs, steps_per_epoch=steps, callbacks=[timer], verbose=0)
    figures = timer.metrics()
    return {"samples_per_s": figures["samples_per_s"], "steps_per_epoch": steps, "epochs": epochs,
            "first_epoch_s": figures["epoch_time_first_s"], "step_ms": figures["step_time_steady_ms"]}


def device_rate(model: Any, batch: tuple[Any, ...], steps: int) -> tuple[dict[str, Any], str]:
    """The same training step on one batch with no input and no per-step host round trip: (figures,
    the method's key in METHOD["device"])."""
    backend = keras.backend.backend()
    saved = model.steps_per_execution, model.train_function
    model.steps_per_execution = 1 if backend == "torch" else steps
    model.train_function = None  # rebuilt for the new steps_per_execution; the run's is put back after
    try:
        return _timed_fit(model, repeated_batch(*batch), steps, batch_rows(batch)), backend
    finally:
        model.steps_per_execution, model.train_function = saved


class _KeptState:
    """Puts the model's weights and optimizer state back as they were: the passes train the model."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def __enter__(self) -> _KeptState:
        self.weights = self.model.get_weights()
        optimizer = getattr(self.model, "optimizer", None)
        self.slots = [(v, keras.ops.convert_to_numpy(v.value)) for v in getattr(optimizer, "variables", [])]
        return self

    def __exit__(self, *exc: Any) -> None:
        self.model.set_weights(self.weights)
        for variable, value in self.slots:
            variable.assign(value)


def steps_per_pass(step_ms: float | None, steps_per_execution: int, target_s: float = TARGET_S) -> int:
    """Steps per epoch of a pass: about `target_s` of the run's steady steps, at least MIN_STEPS and two
    executions, a whole number of executions."""
    wanted = MIN_STEPS if not step_ms else math.ceil(target_s / (step_ms / 1e3))
    wanted = min(MAX_STEPS, max(MIN_STEPS, 2 * steps_per_execution, wanted))
    return steps_per_execution * math.ceil(wanted / steps_per_execution)


def run_epochs(metrics: dict[str, Any], steps_per_execution: int, target_s: float = TARGET_S) -> tuple[int, int] | None:
    """(steps per epoch, epochs) that repeat the run's own epochs (its steps per epoch, so that what an
    epoch's start and end cost counts alike) for about 2 x `target_s` of steady epochs; None when the
    run's metrics do not say how long its epochs were."""
    samples, batch, step_ms = (metrics.get(key) for key in ("samples_per_epoch", "global_batch_size",
                                                            "step_time_steady_ms"))
    if not (samples and batch and step_ms):
        return None
    steps = steps_per_execution * math.ceil(math.ceil(samples / batch) / steps_per_execution)
    return steps, 1 + min(MAX_EPOCHS, max(2, math.ceil(2 * target_s / (steps * step_ms / 1e3))))


def roofline_bound(metrics: dict[str, Any], device: Any) -> tuple[str | None, str]:
    """'compute' or 'memory' by the roofline (the run's own point where it has one, else its arithmetic
    intensity against the device's ridge), or None; and where the answer came from."""
    if metrics.get("bound") in ("compute", "memory"):
        return metrics["bound"], "the run's roofline point"
    bandwidth = device.peak_bandwidth() if hasattr(device, "peak_bandwidth") else None
    point = roofline_point(metrics.get("arithmetic_intensity"), metrics.get("model_tflops"),
                           metrics.get("peak_tflops"), bandwidth.gb_per_s if bandwidth else None)
    if point["bound"] is None:
        return None, f"roofline unknown: {point['bound_reason']}"
    return point["bound"], (f"arithmetic intensity {metrics['arithmetic_intensity']:.1f} FLOPs/byte against the "
                            f"ridge at {point['ridge_flops_per_byte']:.1f}")


def _not_measured(reason: str) -> Breakdown:
    return Breakdown(dict.fromkeys(BREAKDOWN_METRICS), {"measured": False, "reason": reason})


def measure_breakdown(model: Any, train_data: Any, metrics: dict[str, Any], device: Any, *, enabled: bool = True,
                      profile_steps: int = 0, trace_dir: str | Path | None = None,
                      target_s: float = TARGET_S) -> Breakdown:
    """Where the run's time goes: the input pipeline alone, the same steps fed from memory and the device
    alone (the module's docstring says how), the shares and `bound_by`, and, with `profile_steps` > 0, a
    profile of that many steps written to `trace_dir` (colabkit.training.profile).

    `metrics` are the run's (TrainingTimer's samples_per_s, step_time_steady_ms and global_batch_size;
    the roofline's arithmetic_intensity and peak_tflops where known); `device` the notebook's DeviceSetup.
    Returns every metric of BREAKDOWN_METRICS (None, with the reason, when not measured: `enabled`
    False, no steady throughput, a multi-worker run)."""
    # A profile is taken with the passes: where they are not, a profile asked for is said not taken (the
    # declarations' PROFILE_RULES refuse such runs before they start; a notebook without one gets here).
    dropped = f"; the profile of {profile_steps} steps asked for was not taken" if profile_steps > 0 else ""
    if not enabled:
        return _not_measured("breakdown=False: skipped on request" + dropped)
    if not metrics.get("samples_per_s"):
        return _not_measured("the run has no steady throughput to break down (one epoch only)" + dropped)
    if getattr(device, "multi_worker", None):
        return _not_measured("not measured across several machines (the passes would need every worker)" + dropped)
    if profile_steps > 0 and trace_dir is None:  # refused before the passes, not after them
        raise ExperimentError("profile_steps > 0 needs a trace_dir (e.g. run.artifact('.profile'))")
    backend = keras.backend.backend()
    began = time.perf_counter()
    spe = max(1, int(getattr(model, "steps_per_execution", 1) or 1))
    steps = steps_per_pass(metrics.get("step_time_steady_ms"), spe, target_s)
    seconds: dict[str, float] = {}
    with _KeptState(model):
        clock = time.perf_counter()
        pipeline, batch = input_rate(train_data, target_s)
        batch = tuple(batch) if isinstance(batch, (tuple, list)) else (batch,)
        seconds["input"] = time.perf_counter() - clock
        clock = time.perf_counter()
        memory_steps, memory_epochs = run_epochs(metrics, spe, target_s) or (steps, EPOCHS)
        memory = _timed_fit(model, repeated_batch(*batch), memory_steps, batch_rows(batch), memory_epochs)
        seconds["memory"] = time.perf_counter() - clock
        clock = time.perf_counter()
        alone, method = device_rate(model, batch, max(steps, 10 * spe))
        seconds["device"] = time.perf_counter() - clock
        profile = None
        if profile_steps > 0 and trace_dir is not None:  # (checked above: trace_dir is given)
            from colabkit.training.profile import capture_profile

            clock = time.perf_counter()
            profile = capture_profile(model, train_data, profile_steps, trace_dir)
            seconds["profile"] = time.perf_counter() - clock
    shares = step_shares(metrics["samples_per_s"], memory["samples_per_s"], alone["samples_per_s"])
    clock = time.perf_counter()
    largest_is_device = bound_by(shares) in ("device",)
    roof, roof_from = roofline_bound(metrics, device) if largest_is_device else (None, "not needed: not device-bound")
    seconds["roofline"] = time.perf_counter() - clock
    seconds["total"] = time.perf_counter() - began
    found = {"input_samples_per_s": pipeline["samples_per_s"], "device_samples_per_s": alone["samples_per_s"],
             **shares, "bound_by": bound_by(shares, roof)}
    kind = getattr(device, "kind", None)
    section = {
        "measured": True, "reason": None, "backend": backend, "device_kind": kind,
        "device_is": CPU_DEVICE_IS if kind == "cpu" else f"the {str(kind).upper()} the run trained on",
        "samples_per_s": metrics["samples_per_s"], "memory_samples_per_s": memory["samples_per_s"],
        "global_batch_size": metrics.get("global_batch_size"), "steps_per_execution": spe,
        "input": pipeline, "memory": memory, "device": alone, "roofline_bound": roof, "roofline_from": roof_from,
        "method": {"input": METHOD["input"], "memory": METHOD["memory"], "device": METHOD["device"][method],
                   "shares": METHOD["shares"]},
        "seconds": seconds,
    }
    if profile is not None:
        profile["shares_of_a_step"] = shares  # what the idle time holds, beside what the profile calls idle
        profile["idle_explained"] = explain_idle(profile, shares)
    return Breakdown(found, section, profile)
