"""fit (Keras's, or the multi-worker loop), predictions on the host, a digest of the weights."""

from __future__ import annotations

import sys
from typing import Any

import keras

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
    history = model.fit(train_data, epochs=epochs, validation_data=validation_data, callbacks=list(callbacks),
                        verbose=verbose, shuffle=False, steps_per_epoch=steps_per_epoch,
                        validation_steps=validation_steps)
    return history.history


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
