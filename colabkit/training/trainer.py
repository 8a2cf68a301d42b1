"""The measured training of a notebook, written once. `Trainer` sets a run up for its device (dtype policy,
seed, per-replica and global batch, input pipelines); `Trainer.fit` trains with every measurement the suite
takes, the same way in every notebook: TrainingTimer (epochs and steps, the first epoch apart, samples
counted exactly), FitEstimate (the time left, after the first steps), EnergyMeter (board power of the
steady epochs on NVIDIA GPUs), then utilisation (model FLOPs, MFU, arithmetic intensity; with `roofline`
the roofline point) and the bottleneck passes (colabkit.training.breakdown, with a profile on request).
It prints what it measured and returns a `Training`: the history, the record's `metrics` and its other
fields. `Trainer.repeat` does the same over fresh models (Kimm, Paik & Kimm 2021's repeats); `Trainer.infer`
times inference instead (single-stream latency percentiles, offline throughput: docs/inference.md). As d2l's
`train_ch6`: a few calls, each doing what it says.

    trainer = colabkit.Trainer(run, dev, batch_size, mixed_precision=mixed_precision, seed=seed,
                               breakdown=breakdown, profile_steps=profile_steps)
    training = trainer.fit(model, (x_train, y_train), epochs=epochs, validation_data=trainer.dataset(x_test, y_test))
    run.record(device=dev, metrics={**training.metrics, ...}, data=..., **training.record_fields)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import keras
import numpy as np

from colabkit.device.achievable import achievable_record
from colabkit.errors import ParameterError
from colabkit.training.breakdown import measure_breakdown
from colabkit.training.compiler_flops import compiler_count
from colabkit.training.energy import EnergyMeter
from colabkit.training.estimate import FitEstimate
from colabkit.training.fit import fit, predict_all, weights_digest
from colabkit.training.flops import PALM_CONVENTION, describe_utilisation, model_flops, utilisation
from colabkit.training.setup import batch_sizes, make_dataset, repeated_batch, scaled_learning_rate, set_precision
from colabkit.training.timer import TrainingTimer, describe_timing

SIZED_FOR = {"cpu": "a CPU runtime", "gpu": "a free Colab T4 GPU", "tpu": "a Colab TPU"}  # what "auto" sizes fit


@dataclass
class Training:
    """What `Trainer.fit` or `.repeat` measured: the model and data trained on, Keras's history, the record's
    `metrics` and other fields (timings, history, estimate, sizes, flops, breakdown); for `repeat`, every
    repeat (colabkit.timing.repeats.RepeatedTraining)."""

    model: Any
    data: Any
    history: dict[str, list[float]]
    metrics: dict[str, Any]
    record_fields: dict[str, Any] = field(default_factory=dict)
    repeats: Any = None

    def weights_digest(self) -> str:
        """A short sha256 of the trained weights (equal on every worker of a multi-worker run)."""
        return weights_digest(self.model)


class Trainer:
    """Training for one run on `device` (its DeviceSetup), `batch_size` per replica or global (`batch_size_is`).
    Sets Keras's dtype policy and seed: make it after setup_device, before the model. `breakdown` and
    `profile_steps` are the notebook's parameters of those names."""

    def __init__(self, run: Any, device: Any, batch_size: int, *, batch_size_is: str = "per_replica",
                 mixed_precision: str = "none", seed: int = 0, breakdown: bool = True, profile_steps: int = 0,
                 echo: Callable[[str], Any] = print) -> None:
        self.run, self.device, self.seed, self.echo = run, device, seed, echo
        self.breakdown, self.profile_steps = breakdown, profile_steps
        self.policy = set_precision(mixed_precision)
        keras.utils.set_random_seed(seed)
        self.per_replica_batch, self.global_batch = batch_sizes(batch_size, device.replicas, batch_size_is)
        self.static_shapes = bool(device.static_shapes)  # TPUs, and JAX over several devices: one batch shape
        self.settings: dict[str, Any] = {"batch_size_per_replica": self.per_replica_batch,
                                         "global_batch_size": self.global_batch, "replicas": device.replicas,
                                         "dtype_policy": self.policy}
        self.sizes: dict[str, Any] | None = None  # the record's `sizes`, once `auto_sizes` chose them
        self._repeat_estimate: FitEstimate | None = None  # inside `repeat`: the first fit's, covering them all
        self._repeating = False

    def __str__(self) -> str:
        rate = self.settings.get("learning_rate_effective")
        return (f"{self.device.summary()}\nbatch: {self.per_replica_batch} per replica x {self.device.replicas} "
                f"replica(s) = {self.global_batch}; dtype policy {self.policy}" + (f"; learning rate {rate:g}" if rate else ""))

    def learning_rate(self, learning_rate: float, rule: str = "none") -> float:
        """The learning rate for the global batch under `rule` (setup.scaled_learning_rate), recorded as
        `learning_rate_effective`."""
        rate = scaled_learning_rate(learning_rate, self.global_batch, self.per_replica_batch, rule)
        self.settings["learning_rate_effective"] = rate
        return rate

    def auto_sizes(self, table: Mapping[str, Mapping[str, Any]], **values: Any) -> tuple[Any, ...]:
        """`values` in order, each "auto" one replaced by `table[device kind][name]`: sizes that run a notebook
        by hand in minutes on the device it landed on (grids give every size; "auto" is for Run all). Printed,
        and kept for the record's `sizes` (what was asked, what was used, which were "auto")."""
        kind, sizes = self.device.kind, table.get(self.device.kind, {})
        auto = [name for name, value in values.items() if isinstance(value, str) and value == "auto"]
        for name in (name for name in auto if name not in sizes):
            raise ParameterError(f"{name}='auto' has no size for a {kind} device: give {name} a value")
        used = {name: sizes[name] if name in auto else value for name, value in values.items()}
        self.sizes = {"device_kind": kind, "sized_for": SIZED_FOR.get(kind, kind), "auto": auto, "asked": dict(values),
                      "used": used}
        chosen = ", ".join(f"{name}={used[name]}" for name in auto)
        self.echo(f"sizes chosen for {self.sizes['sized_for']} (parameters left at \"auto\"): {chosen}; give values "
                  "explicitly (or use a grid's `paper` preset) for other sizes" if auto
                  else 'sizes: as given (no parameter was "auto")')
        return tuple(used.values())

    def dataset(self, x: Any, y: Any = None, *, shuffle: bool = False, seed: int | None = None) -> Any:
        """Batches of the global batch for fit, evaluate or predict (colabkit.training.setup.make_dataset)."""
        return make_dataset(x, y, batch_size=self.global_batch, shuffle=shuffle,
                            seed=self.seed if seed is None else seed, static_shapes=self.static_shapes)

    def repeated_batch(self, x: Any, y: Any) -> Any:
        """One batch, the same every step, without end (an epoch needs `steps_per_epoch`): no input cost."""
        return repeated_batch(x, y)

    def classify(self, model: Any, x: Any, y_one_hot: Any, class_names: Any) -> dict[str, Any]:
        """Exact test scores on the host from the model's predictions for every sample of `x` (padding dropped)."""
        from colabkit.scores import classification_report

        probabilities = predict_all(model, x, batch_size=self.global_batch, static_shapes=self.static_shapes)
        return classification_report(np.argmax(y_one_hot, axis=1), probabilities, list(class_names))

    def fit(self, model: Any, data: Any, *, epochs: int, seed: int | None = None, dataset_size: int | None = None,
            validation_data: Any = None, steps_per_epoch: int | None = None, callbacks: list[Any] | tuple = (),
            target_accuracy: float | None = None, monitor: str = "val_accuracy", sequence_length: int | None = None,
            roofline: bool = False) -> Training:
        """Train `model` (training.fit.fit: Keras's fit, or the multi-worker loop) with the timer, the estimate
        and the energy meter ahead of `callbacks`, then measure utilisation and the bottleneck passes.

        `data`: (x, y) arrays, shuffled into batches with `seed` (the trainer's by default) and counted
        exactly, or a dataset of `dataset_size` samples per pass (None: an endless stream of full batches).
        `target_accuracy`, `monitor`: TrainingTimer's. `sequence_length`: the time steps of a sample, where
        the model takes any (its FLOPs). `roofline`: the bandwidth and roofline point too."""
        if isinstance(data, tuple):
            dataset_size, data = len(data[0]), self.dataset(*data, shuffle=True, seed=seed)
        timer = TrainingTimer(self.global_batch, target_accuracy, monitor, self.device.replicas, dataset_size,
                              self.static_shapes)
        energy = EnergyMeter(self.device.kind, self.device.replicas, self.global_batch, dataset_size=dataset_size,
                             drop_remainder=self.static_shapes)
        estimate = FitEstimate() if not self._repeating else self._repeat_estimate
        self._repeat_estimate = None  # a repeat's estimate goes with its first fit only
        history = fit(model, data, epochs=epochs, device=self.device, validation_data=validation_data,
                      steps_per_epoch=steps_per_epoch, callbacks=[timer, *([estimate] if estimate else []), energy,
                                                                  *callbacks])
        fields = {"timings": timer.timings(), "history": history,
                  "estimate": estimate.as_record() if estimate else None}
        training = Training(model, data, history, {**timer.metrics(), **energy.metrics()}, fields)
        return training if self._repeating else self._measure(training, sequence_length, roofline)

    def repeat(self, train_one: Callable[[int, int], tuple[Training, dict[str, Any]]], repeats: int, *,
               score: str | None = None, sequence_length: int | None = None, roofline: bool = False) -> Training:
        """`train_one(repeat, seed)` trains a fresh model with `fit` and returns (its Training, its classification
        report), for repeat 0 .. repeats-1, seed = the trainer's + repeat (timing.repeats.run_repeats: the scores'
        mean and spread, the timing figures' medians). The estimate covers every repeat; utilisation and the
        bottleneck passes are measured once, on the last repeat's model and data, at the median throughput."""
        from colabkit.scores import headline_scores
        from colabkit.timing.repeats import RepeatResult, run_repeats

        trainings: list[Training] = []

        def one(repeat: int, seed: int) -> RepeatResult:
            training, evaluation = train_one(repeat, seed)
            trainings.append(training)
            return RepeatResult(headline_scores(evaluation), training.metrics, training.record_fields["timings"],
                                training.history, evaluation)

        self._repeating, self._repeat_estimate = True, FitEstimate(repeats=repeats)
        try:
            repeated = run_repeats(one, repeats, self.seed, score=score, echo=self.echo)
        finally:
            self._repeating, self._repeat_estimate = False, None
        history, last = repeated.mean_history(), trainings[-1]
        fields = {"timings": repeated.timings(), "history": history, "estimate": trainings[0].record_fields["estimate"],
                  "history_is": "per-epoch mean over the repeats; histories: every repeat's",
                  "histories": repeated.histories, "evaluation": repeated.pooled_evaluation(),
                  "evaluations": [result.evaluation for result in repeated.results]}
        training = Training(last.model, last.data, history, repeated.metrics(), fields, repeated)
        return self._measure(training, sequence_length, roofline)

    def infer(self, model: Any, samples: Any, *, queries: int, batch_sizes: str = "1", runs: int | None = None,
              tokens_per_sample: int | None = None) -> Any:
        """Inference mode (colabkit.training.inference.measure_inference): `queries` single-stream queries at batch 1
        on `samples` (an array, one sample a row), then offline throughput at `batch_sizes` ('1,32,256,max'). One
        device only: a batch of 1 does not split over replicas. `tokens_per_sample`: a sequence model's tokens per
        sample, for offline tokens/s (a decoder's prefill). Prints the figures; returns an Inference."""
        from colabkit.training.inference import OFFLINE_RUNS, measure_inference, parse_batch_sizes

        # The declarations' inference_on_one_device refuses a count (cpu:2) before anything runs; what only the
        # machine tells ('gpu' is every GPU there is, a TPU's cores) is refused here.
        if self.device.replicas > 1 or self.device.kind == "multiworker":
            raise ParameterError(f"mode = 'inference' runs on one device; {self.device.name} has "
                                 f"{self.device.replicas} replicas: give device 'cpu' or 'gpu:1'")
        inference = measure_inference(model, samples, self.device, queries=queries, runs=runs or OFFLINE_RUNS,
                                      batch_sizes=parse_batch_sizes(batch_sizes), tokens_per_sample=tokens_per_sample)
        inference.metrics.update(dtype_policy=self.policy, replicas=1, params=model.count_params())
        self.echo(inference.describe())
        return inference

    def _measure(self, training: Training, sequence_length: int | None, roofline: bool) -> Training:
        """Utilisation and the bottleneck passes after training; every figure printed."""
        model, metrics = training.model, training.metrics
        flops = model_flops(model, sequence_length)
        metrics.update(utilisation(model, self.device, metrics["samples_per_s"], self.per_replica_batch,
                                   sequence_length=sequence_length, flops=flops, roofline=roofline))
        if flops.convention == PALM_CONVENTION:  # a Transformer: the compiler's own count beside PaLM's formula
            metrics.update(compiler_count(model, self.per_replica_batch, flops.train_per_sample))
        metrics.update(self.settings, params=model.count_params())
        bottlenecks = measure_breakdown(model, training.data, metrics, self.device, enabled=self.breakdown,
                                        profile_steps=self.profile_steps, trace_dir=self.run.artifact(".profile"))
        metrics.update(bottlenecks.metrics)  # input_samples_per_s, device_samples_per_s, the shares, bound_by
        training.record_fields.update(
            flops={"forward_per_sample": flops.forward_per_sample, "train_per_sample": flops.train_per_sample,
                   "convention": flops.convention, "by_layer": [{"layer": name, "class": kind, "forward_per_sample": value}
                                                                for name, kind, value in flops.by_layer]},
            achievable_peak=achievable_record(self.device.kind, getattr(self.device, "backend", None)),
            **({"sizes": self.sizes} if self.sizes else {}), **bottlenecks.record_fields())
        self.echo("\n".join([describe_timing(metrics), describe_utilisation(metrics), bottlenecks.describe()]))
        return training
