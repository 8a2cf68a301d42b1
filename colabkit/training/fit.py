"""fit (Keras's, or the multi-worker loop), predictions on the host, a digest of the weights.

On several replicas (MirroredStrategy) with steps_per_execution > 1, Keras 3's own multi-step train
function on TensorFlow fails: its `tf.cond` around each step meets the optimizer's cross-replica
`merge_call` and TensorFlow raises "You must feed a value for placeholder tensor '...while/cond/Placeholder'"
(keras-team/keras#19246; Keras 3.13 and 3.15 with TensorFlow 2.20 and 2.21). Over an endless input
(a repeated batch, or a finite pass repeated by `one_pass_per_epoch`), where every execution runs its
steps in full and Keras's `tf.cond` has nothing to decide, `fit` puts `replica_train_function` in its
place: the same steps in one `tf.function`, no `tf.cond`; any other input is refused in one line.
"""

from __future__ import annotations

import sys
from typing import Any

import keras

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


def fit(model: Any, train_data: Any, *, epochs: int, device: Any, validation_data: Any = None,
        callbacks: list[Any] | tuple = (), verbose: int = 2, steps_per_epoch: int | None = None,
        validation_steps: int | None = None) -> dict[str, list[float]]:
    """Train like `model.fit` and return the history dict, on any of the suite's devices.

    Under MultiWorkerMirroredStrategy, where Keras 3's fit does not run, the same training goes
    through `colabkit.distribute.fit_multi_worker` (TensorFlow's strategy.run), with the same
    callbacks. Elsewhere this is model.fit (the data pipeline shuffles, so fit's shuffle is off), over
    a finite dataset's passes repeated, one pass per epoch (`one_pass_per_epoch`).
    """
    if (getattr(device, "description", None) or {}).get("multi_worker"):
        from colabkit.training.multiworker import fit_multi_worker

        return fit_multi_worker(model, train_data, epochs=epochs, strategy=device.strategy,
                                validation_data=validation_data, callbacks=callbacks, verbose=verbose,
                                steps_per_epoch=steps_per_epoch, validation_steps=validation_steps)
    train_data, steps_per_epoch = one_pass_per_epoch(train_data, steps_per_epoch,
                                                     int(getattr(model, "steps_per_execution", 1) or 1))
    if steps_on_several_replicas(model):
        model.train_function = replica_train_function(model, train_data)
    history = model.fit(train_data, epochs=epochs, validation_data=validation_data, callbacks=list(callbacks),
                        verbose=verbose, shuffle=False, steps_per_epoch=steps_per_epoch,
                        validation_steps=validation_steps)
    return history.history


def steps_on_several_replicas(model: Any) -> bool:
    """Whether Keras's own multi-step train function would fail for `model` (the module's docstring): Keras
    on TensorFlow, a graph (not run eagerly), several replicas in sync and steps_per_execution > 1."""
    spe = int(getattr(model, "steps_per_execution", 1) or 1)
    strategy = getattr(model, "distribute_strategy", None)
    return (keras.backend.backend() == "tensorflow" and spe > 1 and not getattr(model, "run_eagerly", False)
            and getattr(strategy, "num_replicas_in_sync", 1) > 1)


def replica_train_function(model: Any, train_data: Any) -> Any:
    """A train function for Keras's fit that runs `model.steps_per_execution` steps per call in one
    `tf.function`, each step `strategy.run(model.train_step)` on the iterator's next batch, and returns the
    last step's logs averaged over the replicas (what Keras's own returns under a MirroredStrategy).

    For an endless tf.data `train_data` only: it has no `tf.cond` to stop early (the cause of Keras's
    failure on several replicas; see the module's docstring); any other input raises ExperimentError,
    since Keras's own function would fail on it. The one built for a model's steps_per_execution is
    reused while that stays the same, so that fit traces it once."""
    tf = sys.modules["tensorflow"]
    spe, strategy = int(model.steps_per_execution), model.distribute_strategy
    batches = int(train_data.cardinality()) if isinstance(train_data, tf.data.Dataset) else None
    if batches != int(tf.data.INFINITE_CARDINALITY):
        per_pass = f"one pass of the input is {batches} batches, which {spe} does not divide" if batches and \
            batches > 0 else "the input's passes have no known length"
        raise ExperimentError(
            f"steps_per_execution = {spe} on {strategy.num_replicas_in_sync} replicas needs epochs of whole "
            f"executions, but {per_pass} (Keras 3's own multi-step loop fails on several replicas, "
            "keras-team/keras#19246): use steps_per_execution = 1 or a divisor of the batches per pass")
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
    import hashlib

    import numpy as np

    digest = hashlib.sha256()
    for weight in model.weights:
        digest.update(np.ascontiguousarray(keras.ops.convert_to_numpy(weight)).tobytes())
    return digest.hexdigest()[:16]


def predict_all(model: Any, x: Any, *, batch_size: int, static_shapes: bool = False):
    """Model outputs for every sample of `x`, in order, as a NumPy array (padding removed)."""
    outputs = model.predict(make_dataset(x, batch_size=batch_size, static_shapes=static_shapes), verbose=0)
    return outputs[: len(x)]
