"""A bare Keras fit with one outside clock: the independent side of an agreement check.

Nothing of colabkit's own timing or pipelines is used: a notebook's headline samples/s is compared
with `steady_rate` of the same model and work (benchmarks/agreement.py, `colabkit gpu-check`).
`shuffled_batches` is the notebooks' pipeline written out (one iterator over repeated passes);
`SteadyClock` stamps the end of the first epoch and `on_train_end`, each with the device finished
(fit's pipeline tear-down after it is not training).
"""

from __future__ import annotations

import time
from typing import Any

import keras


def shuffled_batches(x: Any, y: Any, batch_size: int, seed: int = 0) -> dict[str, Any]:
    """fit arguments (x=..., steps_per_epoch=...) for shuffled passes over (x, y), one per epoch."""
    import tensorflow as tf

    dataset = (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
               .batch(batch_size).prefetch(tf.data.AUTOTUNE))
    return {"x": dataset.repeat(), "steps_per_epoch": -(-len(x) // batch_size)}


class SteadyClock(keras.callbacks.Callback):
    """perf_counter stamps at the end of the first epoch and at the end of training, device finished."""

    def __init__(self) -> None:
        super().__init__()
        self.steady_start: float | None = None
        self.ended: float | None = None

    def stamp(self) -> float:
        keras.ops.convert_to_numpy(self.model.optimizer.iterations)  # copying the counter out waits for the steps
        return time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if epoch == 0:
            self.steady_start = self.stamp()

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        self.ended = self.stamp()


def steady_rate(model: Any, samples_per_epoch: int, epochs: int, callbacks: list[Any] | tuple = (),
                **fit_args: Any) -> tuple[float, list[float]]:
    """(steady samples/s, [mean steady epoch seconds]) of one `model.fit` of `epochs` epochs (>= 2).

    samples/s = samples_per_epoch x (epochs - 1) / the time from the end of the first epoch to the
    end of training. `callbacks` run after the clock's own (e.g. an energy meter under test).
    """
    if epochs < 2:
        raise ValueError(f"a steady rate needs 2 or more epochs (the first is left out), got {epochs}")
    clock = SteadyClock()
    model.fit(epochs=epochs, verbose=0, callbacks=[clock, *callbacks], **fit_args)
    epoch_s = (clock.ended - clock.steady_start) / (epochs - 1)  # type: ignore[operator]
    return samples_per_epoch / epoch_s, [epoch_s]
