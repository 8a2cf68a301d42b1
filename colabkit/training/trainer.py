"""What a training notebook sets up around Keras's own `model.fit`, and reads back from it (docs/methodology.md).

`Trainer` sets a run up for its device (dtype policy and seed, per-replica and global batch, learning-rate scaling,
input pipelines) and hands `model.fit` the suite's measurements as callbacks: TrainingTimer (epochs and steps, the
first epoch apart, samples counted exactly), FitEstimate (the time left), EnergyMeter (board power on NVIDIA GPUs),
ReplicaSteps (several steps per execution on several TensorFlow replicas, keras-team/keras#19246). `measured` reads
them after fit, then accounts (model FLOPs, MFU: training.flops.account) and measures what bounds the run
(training.breakdown), printing every figure. Repeated fits of fresh models (timing.repeats.run_repeats) are read
each with `timed`, accounted once with `measured_repeats`. Inference is colabkit.inference's, "auto" sizes the Run's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import keras

from colabkit.errors import ExperimentError
from colabkit.training.breakdown import measure_breakdown
from colabkit.training.energy import EnergyMeter
from colabkit.training.estimate import FitEstimate
from colabkit.training.fit import ReplicaSteps, one_pass_per_epoch, predict_all
from colabkit.training.flops import account, describe_utilisation
from colabkit.training.setup import batch_sizes, make_dataset, scaled_learning_rate, set_precision
from colabkit.training.timer import TrainingTimer, describe_timing


@dataclass
class Training:
    """What a fit (or repeated fits) measured: the model and data trained on, Keras's history, the record's fields."""

    model: Any
    data: Any
    history: dict[str, list[float]]
    metrics: dict[str, Any]
    record_fields: dict[str, Any] = field(default_factory=dict)


class Trainer:
    """Training for one run on `device` (its DeviceSetup), `batch_size` per replica or global (`batch_size_is`).
    Sets Keras's dtype policy and seed: make it after setup_device, before the model. `breakdown` and
    `profile_steps` are the notebook's parameters of those names (the bottleneck passes after training)."""

    def __init__(self, run: Any, device: Any, batch_size: int, *, batch_size_is: str = "per_replica",
                 mixed_precision: str = "none", seed: int = 0, breakdown: bool = True, profile_steps: int = 0) -> None:
        self.run, self.device, self.seed, self.breakdown, self.profile_steps = run, device, seed, breakdown, profile_steps
        self.policy = set_precision(mixed_precision)
        keras.utils.set_random_seed(seed)
        self.per_replica_batch, self.global_batch = batch_sizes(batch_size, device.replicas, batch_size_is)
        self.static_shapes = bool(device.static_shapes)  # TPUs, and JAX over several devices: one batch shape
        self.settings: dict[str, Any] = {"batch_size_per_replica": self.per_replica_batch,
                                         "global_batch_size": self.global_batch, "replicas": device.replicas,
                                         "dtype_policy": self.policy}
        self._measuring: tuple[TrainingTimer, FitEstimate, EnergyMeter] | None = None  # the last callbacks()

    def __str__(self) -> str:
        rate = self.settings.get("learning_rate_effective")
        return (f"{self.device.summary()}\nbatch: {self.per_replica_batch} per replica x {self.device.replicas} "
                f"replica(s) = {self.global_batch}; dtype policy {self.policy}" + (f"; learning rate {rate:g}" if rate else ""))

    def learning_rate(self, learning_rate: float, rule: str = "none") -> float:
        """The learning rate for the global batch under `rule` (setup.scaled_learning_rate), recorded."""
        rate = scaled_learning_rate(learning_rate, self.global_batch, self.per_replica_batch, rule)
        self.settings["learning_rate_effective"] = rate
        return rate

    def dataset(self, x: Any, y: Any = None, *, shuffle: bool = False, seed: int | None = None) -> Any:
        """Batches of the global batch for fit, evaluate or predict (colabkit.training.setup.make_dataset)."""
        return make_dataset(x, y, batch_size=self.global_batch, shuffle=shuffle,
                            seed=self.seed if seed is None else seed, static_shapes=self.static_shapes)

    def training_batches(self, model: Any, x: Any, y: Any, *, seed: int | None = None) -> tuple[Any, int | None]:
        """(batches, steps_per_epoch) for `model.fit`: (x, y) reshuffled every pass, one pass an epoch on one input
        iterator (training.fit.one_pass_per_epoch: the pass as it is where `model`'s steps per execution do not
        divide it)."""
        return one_pass_per_epoch(self.dataset(x, y, shuffle=True, seed=seed), None,
                                  int(getattr(model, "steps_per_execution", 1) or 1))

    def predict(self, model: Any, x: Any) -> Any:
        """The model's outputs for every sample of `x`, in order, as NumPy (a padded last batch's padding dropped)."""
        return predict_all(model, x, batch_size=self.global_batch, static_shapes=self.static_shapes)

    def callbacks(self, samples_per_epoch: int | None = None, *, target_accuracy: float | None = None,
                  monitor: str = "val_accuracy", fits: int = 1) -> list[Any]:
        """Fresh measuring callbacks for one `model.fit`, listed before the notebook's own (a checkpoint's saving is then
        in no figure). `samples_per_epoch`: one pass's, an epoch one pass (None: a stream of full batches);
        `target_accuracy`, `monitor`: TrainingTimer's; `fits`: this fit and those still to come (the time left)."""
        timer = TrainingTimer(self.global_batch, target_accuracy, monitor, self.device.replicas, samples_per_epoch,
                              self.static_shapes)
        energy = EnergyMeter(self.device.kind, self.device.replicas, self.global_batch, dataset_size=samples_per_epoch,
                             drop_remainder=self.static_shapes)
        self._measuring = (timer, FitEstimate(repeats=fits), energy)
        return [*self._measuring, ReplicaSteps()]

    def multi_worker_fit(self, model: Any) -> Any:
        """`model.fit` across machines (MultiWorkerMirroredStrategy), where Keras 3's own does not run (keras-team/keras
        #20585): the same arguments and callbacks, TensorFlow's strategy.run underneath (training.multiworker)."""
        from colabkit.training.multiworker import fit_multi_worker

        def fit(train_data: Any, shuffle: bool = False, **arguments: Any) -> Any:  # the input pipeline shuffles
            return fit_multi_worker(model, train_data, strategy=self.device.strategy, **arguments)

        return fit

    def timed(self, history: Any, data: Any) -> Training:
        """What the last `callbacks()` measured in the `model.fit` that returned `history`, on `data`."""
        timer, estimate, energy = self._measuring or (None, None, None)
        if timer is None or timer.model is not history.model:
            raise ExperimentError("model.fit ran without this trainer's measurements: pass "
                                  "callbacks=trainer.callbacks(...) to the fit whose history you measure")
        fields = {"timings": timer.timings(), "history": history.history, "estimate": estimate.as_record()}
        return Training(history.model, data, history.history, {**timer.metrics(), **energy.metrics()}, fields)

    def measured(self, history: Any, data: Any, *, sequence_length: int | None = None,
                 roofline: bool = False) -> Training:
        """`timed`, then the accounting: model FLOPs and MFU (`sequence_length`: a sample's time steps where the model
        takes any; `roofline`: the bandwidth and roofline point too) and the bottleneck passes."""
        return self._account(self.timed(history, data), sequence_length, roofline)

    def measured_repeats(self, repeated: Any, *, sequence_length: int | None = None,
                         roofline: bool = False) -> Training:
        """Fits of fresh models (timing.repeats.run_repeats, each repeat's Training `timed`): their figures over the
        repeats, then the accounting once, on the last repeat's model and data, at the median throughput."""
        last = repeated.results[-1].training
        return self._account(Training(last.model, last.data, repeated.mean_history(), repeated.metrics(),
                                      repeated.record_fields()), sequence_length, roofline)

    def _account(self, training: Training, sequence_length: int | None, roofline: bool) -> Training:
        model, metrics = training.model, training.metrics
        figures, fields = account(model, self.device, metrics["samples_per_s"], self.per_replica_batch,
                                  sequence_length=sequence_length, roofline=roofline)
        metrics.update(figures, **self.settings, params=model.count_params())
        bottlenecks = measure_breakdown(model, training.data, metrics, self.device, enabled=self.breakdown,
                                        profile_steps=self.profile_steps, trace_dir=self.run.artifact(".profile"))
        metrics.update(bottlenecks.metrics)  # input_samples_per_s, device_samples_per_s, the shares, bound_by
        training.record_fields.update(fields, **bottlenecks.record_fields())
        print("\n".join([describe_timing(metrics), describe_utilisation(metrics), bottlenecks.describe()]))
        return training
