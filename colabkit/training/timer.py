"""TrainingTimer: a Keras callback that times epochs and steps with device work finished.

Every epoch and step (execution, divided by its steps) is timed, validation apart, and the device is
forced to finish where a figure ends (the end of an epoch's training, and of the epoch); no
synchronisation per step. Headlines come from the synchronised epoch clocks only: the first epoch
(tracing, compiling, warm-up) on its own; of the steady epochs, median epoch and step times with their
spread, and the throughput as every steady sample over the steady epochs' whole training time (what a
clock around them sees: a median epoch would miss slow epochs' cost). See docs/methodology.md.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import keras

from colabkit.errors import MeasurementError
from colabkit.statistics import summarize
from colabkit.timing.clock import block_until_ready


def _now() -> float:
    return time.perf_counter_ns() / 1e9


@dataclass
class EpochTiming:
    """Wall times of one epoch, in seconds."""

    epoch: int
    epoch_s: float = math.nan  # begin to end of the epoch, validation included (Keras's own epoch time)
    train_s: float = math.nan  # the training steps alone
    validation_s: float = 0.0  # from the end of training to the end of the epoch (0 without validation)
    steps: int = 0
    samples: int = 0  # training samples the epoch's steps really saw (a partial last batch counts as it is)
    step_s: list[float] = field(default_factory=list)  # per step, one entry per step

    def as_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "epoch_s": self.epoch_s, "train_s": self.train_s,
                "validation_s": self.validation_s, "steps": self.steps, "samples": self.samples,
                "step_s": [round(seconds, 7) for seconds in self.step_s]}


def _median(values: list[float]) -> float | None:
    return summarize(values)["median"]  # type: ignore[return-value]


def batch_samples(step: int, global_batch_size: int, dataset_size: int | None = None,
                  drop_remainder: bool = False) -> int:
    """Samples in the `step`-th batch of an epoch (0-based): the global batch, but the last batch of
    each pass over a finite dataset of `dataset_size` samples holds only the remainder (or is dropped,
    with `drop_remainder`). `dataset_size` None: an endless stream of full batches."""
    if dataset_size is None:
        return global_batch_size
    full, remainder = divmod(dataset_size, global_batch_size)
    batches_per_pass = full + (1 if remainder and not drop_remainder else 0)
    position = step % batches_per_pass
    return remainder if position == full else global_batch_size


def steps_in_execution(first_step: int, last_step: int, steps_per_epoch: int | None = None) -> int:
    """Steps one execution of `steps_per_execution` steps ran, from the indices Keras reports it by
    (`on_train_batch_begin`'s and `on_train_batch_end`'s). Keras reports the last as first +
    steps_per_execution - 1 even where the epoch ends inside the execution (a pass of 3 batches at
    steps_per_execution 2 is reported as 0-1 and 2-3, but ran 3 steps), so the epoch's length, where
    fit knows it (`params['steps']`), caps it."""
    if steps_per_epoch:
        last_step = min(last_step, int(steps_per_epoch) - 1)
    return max(1, last_step - first_step + 1)


class TrainingTimer(keras.callbacks.Callback):
    """Times `model.fit`: epochs, steps, validation; first epoch apart from the steady state.

    Args:
        global_batch_size: samples per full step over all replicas.
        target_accuracy: `time_to_accuracy_s` is the time from the start of fit to the end of the
            first epoch whose `monitor` value reached this; None disables it.
        monitor: the logged metric compared with `target_accuracy` (validation accuracy by default).
        replicas: replicas training together (all workers' devices); throughput per replica divides by it.
        dataset_size: samples in one pass when finite: the last batch of a pass holds the remainder (or
            is dropped, `drop_remainder`), so samples are counted exactly, not as steps x batch.
            None: an endless stream of full batches.
        drop_remainder: whether the pipeline drops the partial last batch of a pass (TPU static shapes).
    """

    def __init__(self, global_batch_size: int, target_accuracy: float | None = None,
                 monitor: str = "val_accuracy", replicas: int = 1, dataset_size: int | None = None,
                 drop_remainder: bool = False) -> None:
        super().__init__()
        if global_batch_size < 1:
            raise ValueError(f"global_batch_size must be >= 1, got {global_batch_size}")
        if dataset_size is not None and dataset_size < 1:
            raise ValueError(f"dataset_size must be >= 1 (or None for an endless stream), got {dataset_size}")
        if dataset_size is not None and drop_remainder and dataset_size < global_batch_size:
            raise ValueError(f"a pass of {dataset_size} samples holds no full batch of {global_batch_size} "
                             "when the last partial batch is dropped: no step would run")
        self.global_batch_size = int(global_batch_size)
        self.dataset_size = None if dataset_size is None else int(dataset_size)
        self.drop_remainder = bool(drop_remainder)
        self.replicas = max(1, int(replicas))
        self.target_accuracy = target_accuracy
        self.monitor = monitor
        self.epochs: list[EpochTiming] = []
        self.train_time_s: float | None = None
        self.time_to_accuracy_s: float | None = None
        self._fit_start = self._epoch_start = self._last_step_end = self._validation_start = 0.0
        self._execution_begin = 0
        self._current: EpochTiming | None = None
        self._fit_started = False  # on_train_begin was called: the callback was passed to fit

    # --- forcing completion -------------------------------------------------------------------

    def _finish_device_work(self, logs: dict[str, Any] | None = None) -> None:
        """Wait until the model's queued work is done: reading the step counter (updated by the
        last train step) and the logged values copies them to the host."""
        block_until_ready(logs)
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is not None and getattr(optimizer, "iterations", None) is not None:
            keras.ops.convert_to_numpy(optimizer.iterations)

    # --- Keras hooks --------------------------------------------------------------------------

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self.epochs, self.train_time_s, self.time_to_accuracy_s = [], None, None
        self._fit_started = True
        self._fit_start = _now()

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._current = EpochTiming(epoch=epoch)
        self._epoch_start = self._last_step_end = _now()

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._execution_begin = batch

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        now = _now()
        if self._current is None:
            return
        # Keras calls this once per execution with the index of its last step.
        steps = steps_in_execution(self._execution_begin, batch, (self.params or {}).get("steps"))
        per_step = (now - self._last_step_end) / steps
        self._current.step_s.extend([per_step] * steps)
        self._current.samples += sum(self.batch_samples(index)
                                     for index in range(self._current.steps, self._current.steps + steps))
        self._current.steps += steps
        self._last_step_end = now

    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        if self._current is None:  # an evaluate() outside fit: not ours to time
            return
        self._finish_device_work()
        self._validation_start = _now()
        self._current.train_s = self._validation_start - self._epoch_start

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._finish_device_work(logs)
        now = _now()
        current = self._current
        if current is None:
            return
        current.epoch_s = now - self._epoch_start
        if math.isnan(current.train_s):  # no validation this epoch
            current.train_s = current.epoch_s
        else:  # validation and the epoch's bookkeeping after it: all that is not training
            current.validation_s = now - self._validation_start
        self.epochs.append(current)
        self._current = None
        value = (logs or {}).get(self.monitor)
        if (self.target_accuracy is not None and self.time_to_accuracy_s is None and value is not None
                and float(value) >= self.target_accuracy):
            self.time_to_accuracy_s = now - self._fit_start

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        self._finish_device_work(logs)
        self.train_time_s = _now() - self._fit_start

    # --- counting samples -----------------------------------------------------------------------

    def batch_samples(self, step: int) -> int:
        """Samples in the `step`-th batch of an epoch (0-based): see `batch_samples`."""
        return batch_samples(step, self.global_batch_size, self.dataset_size, self.drop_remainder)

    # --- results ------------------------------------------------------------------------------

    @property
    def steady_epochs(self) -> list[EpochTiming]:
        """The epochs after the first: the steady state (empty if fit ran one epoch)."""
        return self.epochs[1:]

    def metrics(self) -> dict[str, Any]:
        """The figures a record's `metrics` holds. Steady-state figures are None after one epoch:
        with nothing but the compile epoch there is no steady state to report."""
        if not self.epochs:
            if self._fit_started:  # fit ran but trained nothing: epochs < 1 (e.g. epochs=-1)
                raise MeasurementError("model.fit ran no epoch, so nothing was timed: set epochs to 1 or more")
            raise RuntimeError("TrainingTimer has no epochs: was it passed to model.fit(callbacks=...)?")
        empty = [epoch.epoch for epoch in self.epochs if epoch.steps == 0]
        if empty:  # an empty dataset, or steps_per_epoch=0: no step was timed
            raise MeasurementError(f"epoch(s) {', '.join(map(str, empty))} ran no training step, so nothing was "
                                   "timed: check that the training data is not empty and steps_per_epoch >= 1")
        steady = self.steady_epochs
        epoch_steady = _median([e.epoch_s for e in steady])
        train_steady = _median([e.train_s for e in steady])
        step_steady = _median([e.train_s / e.steps for e in steady if e.steps])
        dispatch_steady = _median([s for e in steady for s in e.step_s])
        samples_per_epoch = _median([e.samples for e in steady]) if steady else self.epochs[0].samples
        if samples_per_epoch is not None and float(samples_per_epoch).is_integer():
            samples_per_epoch = int(samples_per_epoch)
        # Throughput: the samples the steady epochs really saw (not steps x batch) over their whole
        # training time, slow epochs included, as an outside clock around them would measure it.
        steady_samples, steady_train_s = sum(e.samples for e in steady), sum(e.train_s for e in steady)
        throughput = steady_samples / steady_train_s if steady_samples and steady_train_s > 0 else None
        sample_steady = steady_train_s / steady_samples if throughput else None
        return {
            "epochs_run": len(self.epochs),
            "epoch_time_first_s": self.epochs[0].epoch_s,
            "epoch_time_steady_s": epoch_steady,
            "epoch_time_steady_std_s": summarize([e.epoch_s for e in steady])["std"],
            "steady_seconds": steady_train_s if steady else None,  # how long the steady part trained
            "train_epoch_time_steady_s": train_steady,
            "validation_time_steady_s": _median([e.validation_s for e in steady]),
            "step_time_steady_ms": step_steady * 1e3 if step_steady is not None else None,
            "step_dispatch_interval_median_ms": dispatch_steady * 1e3 if dispatch_steady is not None else None,
            "sample_time_steady_us": sample_steady * 1e6 if sample_steady is not None else None,
            "samples_per_s": throughput,
            "samples_per_s_per_replica": throughput / self.replicas if throughput is not None else None,
            "samples_per_epoch": samples_per_epoch,
            "train_time_s": self.train_time_s,
            "time_to_accuracy_s": self.time_to_accuracy_s,
            "target_accuracy": self.target_accuracy,
            "global_batch_size": self.global_batch_size,
            "replicas": self.replicas,
            # Whether Keras compiled the train step with XLA (its "auto" turns it on for one GPU,
            # off on CPUs and under tf.distribute strategies): runs differing here did other work.
            "jit_compile": self._jit_compile(),
        }

    def _jit_compile(self) -> bool | None:
        value = getattr(self.model, "jit_compile", None)  # no model: the timer was never given to fit
        return None if value is None else bool(value)

    def timings(self) -> dict[str, Any]:
        """The raw times a record's `timings` holds: every epoch, with every step."""
        return {
            "epochs": [epoch.as_dict() for epoch in self.epochs],
            "epoch_s_steady": summarize([e.epoch_s for e in self.steady_epochs]),
            "train_s_steady": summarize([e.train_s for e in self.steady_epochs]),
            "step_s_steady": summarize([e.train_s / e.steps for e in self.steady_epochs if e.steps]),
            "step_dispatch_interval_s_steady": summarize([s for e in self.steady_epochs for s in e.step_s]),
            "first_epoch_excluded": True,
            "samples_counted": ("every batch's samples, the partial last batch of each pass as it is"
                                if self.dataset_size is not None else "steps x global batch (a stream of full batches)"),
            "step_s_is": "steady epoch training time / steps (synchronised)",
            "epochs_step_s_is": ("interval between consecutive steps' logs reaching the host (Keras on TensorFlow "
                                 "waits for each step's logs; colabkit adds no sync per step)"),
        }


def describe_timing(metrics: dict[str, Any]) -> str:
    """One human line from TrainingTimer.metrics(): first epoch, steady state, throughput."""
    def seconds(key: str) -> str:
        value = metrics.get(key)
        return "n/a" if value is None else f"{value:.2f} s"

    if metrics.get("epoch_time_steady_s") is None:
        return (f"first epoch {seconds('epoch_time_first_s')}; only one epoch ran, so there is no "
                "steady state to report (run 2 or more epochs)")
    return (f"first epoch {seconds('epoch_time_first_s')}; steady: epoch {seconds('epoch_time_steady_s')} "
            f"(training {seconds('train_epoch_time_steady_s')}, validation {seconds('validation_time_steady_s')}), "
            f"step {metrics['step_time_steady_ms']:.2f} ms, {metrics['sample_time_steady_us']:.1f} us/sample, "
            f"{metrics['samples_per_s']:.0f} samples/s")
