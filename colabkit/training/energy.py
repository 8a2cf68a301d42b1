"""EnergyMeter: a Keras callback that samples GPU board power during the steady epochs.

The first epoch (tracing, compilation) is left out, as in TrainingTimer: sampling starts when the
second epoch begins and each steady epoch's training steps (up to validation) form one interval.
On anything but an NVIDIA GPU, or without NVML, the energy fields are None with the reason.
"""

from __future__ import annotations

import time
from typing import Any

import keras

from colabkit.device.energy import PowerSampler, energy_metrics, visible_gpu_indices
from colabkit.training.timer import batch_samples, steps_in_execution


class EnergyMeter(keras.callbacks.Callback):
    """Energy of the steady epochs' training steps (NVML on NVIDIA GPUs; None elsewhere, with why).

    Args:
        device_kind: the run's device kind ("gpu" samples; "cpu", "tpu" record the reason).
        replicas: GPUs in use (their power is summed).
        global_batch_size: samples per step over all replicas.
        dataset_size, drop_remainder: as TrainingTimer's, so that energy per sample divides by the
            samples the epochs really saw (a partial last batch counts as what it holds).
        interval_s: time between power readings.
    """

    def __init__(self, device_kind: str, replicas: int, global_batch_size: int, interval_s: float = 0.05,
                 dataset_size: int | None = None, drop_remainder: bool = False) -> None:
        super().__init__()
        self.device_kind = device_kind
        self.global_batch_size = int(global_batch_size)
        self.dataset_size, self.drop_remainder = dataset_size, drop_remainder
        self.reason: str | None = None
        if device_kind != "gpu":
            self.reason = f"power is read through NVML on NVIDIA GPUs only; this run used a {device_kind.upper()}"
        self.sampler = PowerSampler(visible_gpu_indices(max(1, replicas)), interval_s=interval_s)
        self.intervals: list[tuple[float, float]] = []
        self.samples: list[int] = []
        self._begin: float | None = None
        self._steps = 0
        self._execution_begin = 0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if epoch < 1 or self.reason is not None:
            return
        self.sampler.start()  # a no-op once started
        self._begin, self._steps = time.perf_counter(), 0

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._execution_begin = batch

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self._begin is not None:  # Keras calls this once per execution of steps_per_execution steps
            self._steps += steps_in_execution(self._execution_begin, batch, (self.params or {}).get("steps"))

    def _close_interval(self) -> None:
        if self._begin is None:
            return
        # Device work of the epoch is finished here: TrainingTimer (listed first) synchronised it.
        self.intervals.append((self._begin, time.perf_counter()))
        self.samples.append(sum(batch_samples(step, self.global_batch_size, self.dataset_size, self.drop_remainder)
                                for step in range(self._steps)))
        self._begin = None

    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._close_interval()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._close_interval()

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        self.sampler.stop()

    def metrics(self) -> dict[str, Any]:
        """energy_j_per_epoch, energy_j_per_sample, mean_power_w and energy_reason for a record."""
        return energy_metrics(self.sampler, self.intervals, self.samples, reason=self.reason)
