"""Around Keras's own fit: one input iterator for all epochs, several steps per execution on several replicas, the
bottleneck passes' fit, predictions on the host, a digest of the weights.

On several replicas (MirroredStrategy) with steps_per_execution > 1, Keras 3's own multi-step train function on
TensorFlow fails: its `tf.cond` around each step meets the optimizer's cross-replica `merge_call` ("You must feed a
value for placeholder tensor '...while/cond/Placeholder'", keras-team/keras#19246; Keras 3.13 and 3.15, TensorFlow
2.20 and 2.21). Where steps_per_execution divides an epoch's steps, that `tf.cond` has nothing to decide: the
ReplicaSteps callback puts `replica_train_function` in its place when fit begins (fit calls `model.train_function`
afresh at every step), the same steps in one `tf.function`; any other epoch is refused in one line.
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any

import keras
import numpy as np

from colabkit.errors import ExperimentError
from colabkit.training.batches import ArrayBatches
from colabkit.training.setup import make_dataset


def one_pass_per_epoch(train_data: Any, steps_per_epoch: int | None,
                       steps_per_execution: int = 1) -> tuple[Any, int | None]:
    """(dataset, steps_per_epoch) that train on the same batches with one input iterator for all epochs.

    Keras's fit makes a new iterator over a finite dataset at every epoch, and on a 2-core CPU the
    CNN's epochs then stalled ~0.9 s at their first step in a third to a half of the epochs. The same
    passes repeated, steps_per_epoch = one pass's batches, keep one iterator and still show each sample
    once per epoch. Done for tf.data and `ArrayBatches`; anything else is returned unchanged (other
    data, steps_per_epoch given, an endless, empty or unknown-length dataset, or a pass that
    `steps_per_execution` does not divide).
    """
    if steps_per_epoch is not None:
        return train_data, steps_per_epoch
    if isinstance(train_data, ArrayBatches):
        batches = -1 if train_data.is_endless else train_data.batches_per_pass
        repeated = train_data.endless
    else:
        tf = sys.modules.get("tensorflow")  # a tf.data dataset exists only where TensorFlow is loaded
        if tf is None or not isinstance(train_data, tf.data.Dataset):
            return train_data, steps_per_epoch
        batches = int(train_data.cardinality())  # INFINITE (-1), UNKNOWN (-2), or 0 (fit must still fail)
        repeated = train_data.repeat
    if batches < 1 or batches % max(1, steps_per_execution):  # or executions would straddle two passes
        return train_data, steps_per_epoch
    return repeated(), batches


def fit(model: Any, train_data: Any, *, epochs: int, callbacks: list[Any] | tuple = (),
        verbose: int = 2, steps_per_epoch: int | None = None) -> dict[str, list[float]]:
    """Train as a notebook's `model.fit` trains (the bottleneck passes', the profile's and the benchmarks' fits, on
    one machine) and return the history dict: model.fit with ReplicaSteps (the data pipeline shuffles, so fit's
    shuffle is off), over a finite dataset's passes repeated, one pass an epoch (`one_pass_per_epoch`)."""
    train_data, steps_per_epoch = one_pass_per_epoch(train_data, steps_per_epoch,
                                                     int(getattr(model, "steps_per_execution", 1) or 1))
    history = model.fit(train_data, epochs=epochs, callbacks=[*callbacks, ReplicaSteps()], verbose=verbose,
                        shuffle=False, steps_per_epoch=steps_per_epoch)
    return history.history


def steps_on_several_replicas(model: Any) -> bool:
    """Whether Keras's own multi-step train function fails for `model` (module docstring): on TensorFlow, in a graph."""
    spe, strategy = int(getattr(model, "steps_per_execution", 1) or 1), getattr(model, "distribute_strategy", None)
    if keras.backend.backend() != "tensorflow" or spe < 2 or getattr(model, "run_eagerly", False):
        return False
    multi_worker = isinstance(strategy, sys.modules["tensorflow"].distribute.MultiWorkerMirroredStrategy)
    return getattr(strategy, "num_replicas_in_sync", 1) > 1 and not multi_worker  # across machines: our own loop


class ReplicaSteps(keras.callbacks.Callback):
    """Puts `replica_train_function` in place of Keras's own when fit begins, where that fails; else a no-op."""

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        if steps_on_several_replicas(self.model):
            self.model.train_function = replica_train_function(self.model, (self.params or {}).get("steps"))


def replica_train_function(model: Any, steps_per_epoch: int | None) -> Any:
    """A train function for Keras's fit that runs `model.steps_per_execution` steps per call in one `tf.function`,
    each step `strategy.run(model.train_step)` on the iterator's next batch, and returns the last step's logs averaged
    over the replicas (what Keras's own returns under a MirroredStrategy). It has no `tf.cond` to stop early, so every
    execution must run whole: ExperimentError unless steps_per_execution divides `steps_per_epoch` (fit's
    `params['steps']`). The one built for a model's steps_per_execution is reused, so that fit traces it once."""
    tf = sys.modules["tensorflow"]
    spe, strategy = int(model.steps_per_execution), model.distribute_strategy
    if not steps_per_epoch or steps_per_epoch % spe:
        raise ExperimentError(
            f"steps_per_execution = {spe} on {strategy.num_replicas_in_sync} replicas needs epochs of whole "
            f"executions, but an epoch is {steps_per_epoch or 'an unknown number of'} steps, which {spe} does not "
            "divide (Keras 3's own multi-step loop fails on several replicas, keras-team/keras#19246): use "
            "steps_per_execution = 1 or a divisor of the steps per epoch")
    current = getattr(model, "train_function", None)
    if getattr(current, "replica_steps", None) == spe:
        return current

    def mean_over_replicas(value: Any) -> Any:
        if isinstance(value, tf.distribute.DistributedValues):
            return tf.reduce_mean(strategy.experimental_local_results(value), axis=0)
        return value

    @tf.function(jit_compile=getattr(model, "jit_compile", False) is True, reduce_retracing=True)
    def one_step(data: Any) -> Any:
        return tf.nest.map_structure(mean_over_replicas, strategy.run(model.train_step, args=(data,)))

    @tf.function(reduce_retracing=True)
    def steps(iterator: Any) -> Any:
        logs = one_step(next(iterator))
        for _ in tf.range(spe - 1):
            logs = one_step(next(iterator))
        return logs

    def train_function(iterator: Any) -> Any:
        return steps(iterator)

    train_function.replica_steps = spe  # type: ignore[attr-defined]
    return train_function


def weights_digest(model: Any) -> str:
    """A short sha256 of every weight's bytes, in order: equal digests mean identical weights
    (e.g. on every worker of a synchronous multi-worker run)."""
    digest = hashlib.sha256()
    for weight in model.weights:
        digest.update(np.ascontiguousarray(keras.ops.convert_to_numpy(weight)).tobytes())
    return digest.hexdigest()[:16]


def predict_all(model: Any, x: Any, *, batch_size: int, static_shapes: bool = False):
    """Model outputs for every sample of `x`, in order, as a NumPy array (padding removed)."""
    outputs = model.predict(make_dataset(x, batch_size=batch_size, static_shapes=static_shapes), verbose=0)
    return outputs[: len(x)]
