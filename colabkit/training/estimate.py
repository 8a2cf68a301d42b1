"""An estimate of how long `fit` will take, from the rate of its first steps, printed before a long
run is under way ("~3 h 10 min at this rate") and kept for the record."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import keras

from colabkit.timing.clock import format_duration
from colabkit.training.timer import steps_in_execution

__all__ = ["FitEstimate", "estimate_remaining", "format_duration"]


def estimate_remaining(done_steps: int, total_steps: int, step_s: float) -> float:
    """Seconds the `total_steps - done_steps` steps left take at `step_s` seconds per step."""
    if step_s < 0 or done_steps < 0 or total_steps < done_steps:
        raise ValueError(f"need 0 <= done_steps <= total_steps and step_s >= 0, got {done_steps}, {total_steps}, {step_s}")
    return (total_steps - done_steps) * step_s


class FitEstimate(keras.callbacks.Callback):
    """After the first `measure_steps` steps that follow `skip_steps` (tracing and compilation make the
    very first steps slow), print how long the rest of training will take at that rate.

    The step rate is the host's dispatch rate over those steps, and training steps only: validation,
    checkpoints and a later slow-down are not in it, so the figure is a guide for "wait or stop", not a
    result. `repeats`: fits of the same size still to come after this one (the estimate covers them).
    Steps per epoch come from fit (Keras's `params['steps']`) unless `steps_per_epoch` is given.
    """

    def __init__(self, measure_steps: int = 5, skip_steps: int = 2, repeats: int = 1,
                 steps_per_epoch: int | None = None, echo: Callable[[str], Any] = print) -> None:
        super().__init__()
        if measure_steps < 1 or skip_steps < 0 or repeats < 1:
            raise ValueError(f"need measure_steps >= 1, skip_steps >= 0, repeats >= 1, got {measure_steps}, "
                             f"{skip_steps}, {repeats}")
        self.measure_steps, self.skip_steps, self.repeats = measure_steps, skip_steps, repeats
        self.steps_per_epoch, self.echo = steps_per_epoch, echo
        self.estimate: dict[str, Any] | None = None
        self._done = 0  # steps finished in this fit
        self._epoch = 0
        self._start: tuple[int, float] | None = None  # (steps done, clock) when measuring began
        self._execution_begin = 0

    def _total_steps(self) -> int | None:
        steps = self.steps_per_epoch or (self.params or {}).get("steps")
        epochs = (self.params or {}).get("epochs")
        if not steps or not epochs:
            return None
        return int(steps) * int(epochs)

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._done, self._start, self.estimate = 0, None, None

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch = epoch

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._execution_begin = batch

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        now = time.perf_counter()
        # Keras calls this once per execution of steps_per_execution steps
        self._done += steps_in_execution(self._execution_begin, batch, (self.params or {}).get("steps"))
        if self.estimate is not None:
            return
        if self._start is None:
            if self._done >= self.skip_steps:
                self._start = (self._done, now)
            return
        measured = self._done - self._start[0]
        if measured < self.measure_steps:
            return
        step_s = (now - self._start[1]) / measured
        total = self._total_steps()
        if total is None:
            return  # an endless dataset without steps_per_epoch: nothing to extrapolate to
        remaining = estimate_remaining(min(self._done, total), total, step_s)
        remaining += (self.repeats - 1) * total * step_s
        self.estimate = {"after_steps": self._done, "measured_steps": measured, "step_s": step_s,
                         "total_steps": total * self.repeats, "remaining_s": remaining,
                         "text": format_duration(remaining),
                         "covers": "training steps only (no validation, checkpoints or compilation)"}
        fits = f" ({self.repeats} fits)" if self.repeats > 1 else ""
        self.echo(f"estimate after {self._done} steps: {format_duration(remaining)} of training left{fits} "
                  f"at this rate ({step_s * 1e3:.1f} ms per step, {total * self.repeats} steps in all; "
                  "validation not included)")

    def as_record(self) -> dict[str, Any] | None:
        """The estimate for the record (None when fit ran too few steps to make one)."""
        return None if self.estimate is None else dict(self.estimate)
