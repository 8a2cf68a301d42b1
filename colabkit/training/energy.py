"""EnergyMeter: a Keras callback that measures the energy of the steady epochs' training steps (docs/cost.md).

The first epoch (tracing, compilation) is left out, as in TrainingTimer: the meter opens its energy source
(colabkit.device.energy: a GPU's energy counter, its power sampled, a CPU's RAPL, or "not measured" with why)
when the second epoch begins, and marks each steady epoch's training steps (up to validation) as one window.
"""

from __future__ import annotations

from typing import Any

import keras

from colabkit.device.energy import energy_metrics, open_energy_source
from colabkit.device.energy_source import MIN_WINDOW_S, EnergySource, Mark
from colabkit.device.nvml import visible_gpu_indices
from colabkit.training.timer import batch_samples, steps_in_execution


class EnergyMeter(keras.callbacks.Callback):
    """Energy of the steady epochs' training steps, per epoch and per training sample, and how it was measured.

    Args:
        device_kind: the run's device kind ("gpu": NVML; "cpu": RAPL; "tpu", "multiworker": not measured, with why).
        replicas: GPUs in use (their energy is summed).
        global_batch_size: samples per step over all replicas.
        dataset_size, drop_remainder: as TrainingTimer's, so that energy per sample divides by the
            samples the epochs really saw (a partial last batch counts as what it holds).
        interval_s: time between power readings where power is sampled.
        min_window_s: the shortest epoch given an energy figure (MIN_WINDOW_S: the counters move in steps).
        sampled: sample a GPU's power even where it has an energy counter (to compare the two).
    """

    def __init__(self, device_kind: str, replicas: int, global_batch_size: int, interval_s: float = 0.05,
                 dataset_size: int | None = None, drop_remainder: bool = False, min_window_s: float = MIN_WINDOW_S,
                 sampled: bool = False) -> None:
        super().__init__()
        self.device_kind = device_kind
        self.replicas = max(1, replicas)
        self.global_batch_size = int(global_batch_size)
        self.dataset_size, self.drop_remainder = dataset_size, drop_remainder
        self.interval_s, self.min_window_s, self.sampled = interval_s, min_window_s, sampled
        self.source: EnergySource | None = None
        self.windows: list[tuple[Mark, Mark]] = []
        self.samples: list[int] = []
        self._begin: Mark | None = None
        self._steps = 0
        self._execution_begin = 0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if epoch < 1:
            return
        if self.source is None:
            self.source = self._open()
        self._begin, self._steps = self.source.mark(), 0

    def _open(self) -> EnergySource:
        gpus = visible_gpu_indices(self.replicas) if self.device_kind == "gpu" else []
        return open_energy_source(self.device_kind, gpus, interval_s=self.interval_s, min_window_s=self.min_window_s,
                                  sampled=self.sampled)

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._execution_begin = batch

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self._begin is not None:  # Keras calls this once per execution of steps_per_execution steps
            self._steps += steps_in_execution(self._execution_begin, batch, (self.params or {}).get("steps"))

    def _close_window(self) -> None:
        if self._begin is None or self.source is None:
            return
        # Device work of the epoch is finished here: TrainingTimer (listed first) synchronised it.
        self.windows.append((self._begin, self.source.mark()))
        self.samples.append(sum(batch_samples(step, self.global_batch_size, self.dataset_size, self.drop_remainder)
                                for step in range(self._steps)))
        self._begin = None

    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._close_window()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._close_window()

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        if self.source is not None:
            self.source.stop()

    @property
    def intervals(self) -> list[tuple[float, float]]:
        """The steady epochs' windows, (start, end) in perf_counter seconds."""
        return [(begin.at_s, end.at_s) for begin, end in self.windows]

    def metrics(self) -> dict[str, Any]:
        """energy_j_per_epoch, energy_j_per_sample, mean_power_w, energy_method, energy_source and energy_reason
        for a record (colabkit.device.energy.energy_metrics)."""
        if self.source is None:  # no steady epoch began: what this device would have been measured with, and why not
            probe = self._open()
            probe.stop()
            return energy_metrics(probe, [], [], reason=probe.reason or "no steady-state epoch (only one epoch ran)")
        return energy_metrics(self.source, self.windows, self.samples)
