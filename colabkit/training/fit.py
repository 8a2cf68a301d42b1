"""fit (Keras's, or the multi-worker loop), predictions on the host, a digest of the weights."""

from __future__ import annotations

from typing import Any

import keras

from colabkit.training.setup import make_dataset


def fit(model: Any, train_data: Any, *, epochs: int, device: Any, validation_data: Any = None,
        callbacks: list[Any] | tuple = (), verbose: int = 2, steps_per_epoch: int | None = None,
        validation_steps: int | None = None) -> dict[str, list[float]]:
    """Train like `model.fit` and return the history dict, on any of the suite's devices.

    Under MultiWorkerMirroredStrategy, where Keras 3's fit does not run, the same training goes
    through `colabkit.distribute.fit_multi_worker` (TensorFlow's strategy.run), with the same
    callbacks. Elsewhere this is model.fit (the data pipeline shuffles, so fit's shuffle is off).
    """
    if (getattr(device, "description", None) or {}).get("multi_worker"):
        from colabkit.training.multiworker import fit_multi_worker

        return fit_multi_worker(model, train_data, epochs=epochs, strategy=device.strategy,
                                validation_data=validation_data, callbacks=callbacks, verbose=verbose,
                                steps_per_epoch=steps_per_epoch, validation_steps=validation_steps)
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
