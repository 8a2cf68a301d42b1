"""Whether a result can be a measurement: the checks a notebook runs before it writes an ok record
(`Run.record`), and the same checks run again on every ok record loaded (`colabkit.records.loading`),
so that a record copied in from elsewhere with `tflops_warm: -5` or a NaN is set aside, never plotted.

One table, METRIC_CHECKS, says what each metric must be; both sides read it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any

from colabkit.device.energy_source import EnergyMethod

MetricCheck = Callable[[Any], bool]
ENERGY_METHODS = tuple(method.value for method in EnergyMethod)


def positive(value: Any) -> bool:
    """True when `value` is absent (None) or a finite number > 0."""
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return math.isfinite(float(value)) and float(value) > 0


def finite_or_absent(value: Any) -> bool:
    """True when `value` is absent, not a number, or a finite one (a NaN loss: training diverged)."""
    if value is None or isinstance(value, bool) or not isinstance(value, numbers.Real):
        return True
    return math.isfinite(float(value))


def share_or_absent(value: Any) -> bool:
    """True when `value` is absent, or a finite number from 0 to 1 (a share of a step)."""
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return math.isfinite(float(value)) and 0.0 <= float(value) <= 1.0


POSITIVE = "must be a finite number > 0"
SHARE = "must be a share from 0 to 1"
FINITE = "must be finite"
# One check per metric a notebook reports: metric -> (check, what it requires). A metric that is
# absent (or None: "unknown", e.g. no MFU without a peak) is not checked; one that is present must pass.
METRIC_CHECKS: dict[str, tuple[MetricCheck, str]] = {
    # matmul: a FLOP count or rate of 0 or NaN means nothing was multiplied or the clock failed.
    **{name: (positive, POSITIVE) for name in (
        "flops_per_call", "tflops_cold", "tflops_warm", "tflops_warm_min", "tflops_warm_max", "seconds_cold",
        "seconds_warm", "blas_tflops", "ratio_to_blas", "fraction_of_peak")},
    # training: steps, samples and times must have happened.
    **{name: (positive, POSITIVE) for name in (
        "epochs_run", "global_batch_size", "train_time_s", "epoch_time_first_s", "epoch_time_steady_s",
        "step_time_steady_ms", "sample_time_steady_us", "samples_per_s", "samples_per_epoch", "steps", "samples")},
    # model FLOPs and the roofline (colabkit.training.flops, ParaDnn): work was done at a rate, on a
    # model with weights, under a roof that is above zero.
    **{name: (positive, POSITIVE) for name in (
        "model_flops_forward_per_sample", "model_flops_train_per_sample", "model_tflops", "mfu",
        "arithmetic_intensity", "params", "peak_tflops", "peak_bandwidth_gb_s", "roofline_tflops",
        "fraction_of_roofline", "ridge_flops_per_byte", "achievable_tflops", "mfu_achievable",
        "achievable_low_tflops", "mfu_achievable_low", "mfu_achievable_high", "compiler_flops_ratio")},
    # what bounds a run (colabkit.training.breakdown): rates that happened, shares of one step.
    **{name: (positive, POSITIVE) for name in ("input_samples_per_s", "device_samples_per_s")},
    **{name: (share_or_absent, SHARE) for name in ("input_wait_share", "host_share", "device_share")},
    # inference (colabkit.inference.scenarios): every scenario met both its minimums, queries and duration.
    "inference_valid": (lambda value: value in (None, True), "must be true: a scenario stopped at max_duration_s "
                        "short of its minimum queries or duration is no valid measurement"),
    # energy (colabkit.device.energy): joules and watts drawn, by a method the record's vocabulary names.
    **{name: (positive, POSITIVE) for name in (
        "energy_j_per_epoch", "energy_j_per_sample", "mean_power_w", "single_stream_energy_j_per_inference",
        "offline_energy_j_per_inference", "decode_energy_j_per_token", "decode_energy_j_per_token_best")},
    "energy_method": (lambda value: value is None or value in ENERGY_METHODS,
                      f"must be one of {', '.join(repr(method) for method in ENERGY_METHODS)}"),
    # decode (colabkit.inference.generation): the cached logits matched the model's full pass at every combination.
    "decode_valid": (lambda value: value in (None, True), "must be true: a decode whose cached logits differ from the "
                     "model's full pass beyond rounding generated other tokens than the model would"),
}


def _shown(value: Any) -> Any:
    """A value as a problem names it: Python numbers as they are, NumPy scalars as floats."""
    return value if isinstance(value, (int, float)) or not isinstance(value, numbers.Real) else float(value)


def measurement_problems(metrics: Mapping[str, Any], timings: Mapping[str, Any] | None = None) -> list[str]:
    """Why `metrics` (and `timings`) cannot be a measurement: empty when they can.

    Checks each metric named in METRIC_CHECKS, every metric whose name holds 'loss' for a finite
    value, and, for training timings (`timings["epochs"]`), that every epoch ran steps. Metrics
    failing the same requirement are named together: 'tflops_warm = 0.0, seconds_warm = 0 (must ...)'.
    """
    failing: dict[str, list[str]] = {}
    for name, value in metrics.items():
        check, requirement = METRIC_CHECKS.get(name, (finite_or_absent, FINITE) if "loss" in name else (None, ""))
        if check is not None and not check(value):
            failing.setdefault(requirement, []).append(f"{name} = {_shown(value)}")
    problems = [f"{', '.join(names)} ({requirement})" for requirement, names in failing.items()]
    epochs = (timings or {}).get("epochs")
    if isinstance(epochs, list):
        if not epochs:
            problems.append("no epoch was timed")
        empty = [str(epoch.get("epoch", "?")) for epoch in epochs
                 if isinstance(epoch, Mapping) and not epoch.get("steps")]
        if empty:
            problems.append(f"epoch(s) {', '.join(empty)} ran no training step")
    return problems


def not_a_measurement(metrics: Mapping[str, Any], timings: Mapping[str, Any] | None = None) -> str | None:
    """'not a measurement: <every problem>' when `metrics` cannot be one; None when they can."""
    problems = measurement_problems(metrics, timings)
    return "not a measurement: " + "; ".join(problems) if problems else None
