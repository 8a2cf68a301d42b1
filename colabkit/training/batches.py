"""Input pipelines in NumPy, for every Keras backend but TensorFlow: a JAX (or PyTorch) kernel never
imports TensorFlow, so its batches come from `keras.utils.PyDataset`s over in-memory arrays (as fast
as tf.data for the CNN on JAX here: docs/frameworks.md).

They keep tf.data's semantics (colabkit.training.setup.make_dataset): passes in batches of
`batch_size`, reshuffled every pass from a seeded generator, the last partial batch kept or dropped
with `drop_remainder`; `endless()` is one iterator for all epochs. Batches are built in the training
thread: a worker thread would take a core from training on a 2-core host.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np


def pad_to_full_batches(x: Any, y: Any, batch_size: int) -> tuple[Any, ...]:
    """(x, y, sample_weight) padded with zero-weight samples up to a whole number of batches, so that
    every batch has one static shape and padding counts for nothing; (x, y) when nothing is padded,
    (x,) without labels (predictions: the caller drops the padded rows)."""
    count = len(x)
    padding = (-count) % batch_size
    if not padding:
        return (x,) if y is None else (x, y)
    x = np.concatenate([x, np.zeros((padding, *x.shape[1:]), x.dtype)])
    if y is None:
        return (x,)
    weights = np.concatenate([np.ones(count, "float32"), np.zeros(padding, "float32")])
    y = np.concatenate([y, np.zeros((padding, *y.shape[1:]), y.dtype)])
    return x, y, weights


class ArrayBatches(keras.utils.PyDataset):
    """Batches of in-memory arrays (inputs, targets and sample weights alike, split on axis 0).

    A pass visits every row once, reshuffled every pass when `shuffle` (the order of pass p comes from
    a generator seeded with (seed, p): the same run gives the same batches). Finite by default:
    `num_batches` batches per pass, Keras's fit running one pass per epoch; `endless()` gives the same
    passes repeated without end (bound the epoch with steps_per_epoch = `batches_per_pass`).
    """

    def __init__(self, arrays: tuple[Any, ...], *, batch_size: int, shuffle: bool = False, seed: int = 0,
                 drop_remainder: bool = False, endless: bool = False) -> None:
        super().__init__(workers=0)
        rows = {len(array) for array in arrays}
        if not arrays or len(rows) != 1:
            raise ValueError(f"expected one or more arrays of the same length, got lengths {sorted(rows)}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.arrays = tuple(np.asarray(array) for array in arrays)
        self.rows = rows.pop()
        self.batch_size = int(batch_size)
        self.shuffle, self.seed = bool(shuffle), int(seed)
        self.drop_remainder, self.is_endless = bool(drop_remainder), bool(endless)
        full, remainder = divmod(self.rows, self.batch_size)
        self.batches_per_pass = full + (1 if remainder and not drop_remainder else 0)
        self._finite_pass = 0  # finite use: the pass Keras is on (it calls on_epoch_end after each)
        self._order_pass: int | None = None
        self._order = np.arange(self.rows)

    @property
    def num_batches(self) -> int | None:
        """Batches of one pass; None when endless (Keras then needs steps_per_epoch)."""
        return None if self.is_endless else self.batches_per_pass

    def endless(self) -> ArrayBatches:
        """The same passes, repeated without end: one input iterator for all of fit's epochs."""
        return ArrayBatches(self.arrays, batch_size=self.batch_size, shuffle=self.shuffle, seed=self.seed,
                            drop_remainder=self.drop_remainder, endless=True)

    def order(self, pass_index: int) -> np.ndarray:
        """The row order of pass `pass_index` (the identity without shuffling)."""
        if not self.shuffle:
            return self._order
        if self._order_pass != pass_index:
            self._order = np.random.default_rng((self.seed, pass_index)).permutation(self.rows)
            self._order_pass = pass_index
        return self._order

    def __len__(self) -> int:
        return self.batches_per_pass

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        if self.batches_per_pass == 0:
            raise IndexError("no batch: fewer rows than one batch, and the partial batch is dropped")
        if self.is_endless:
            pass_index, position = divmod(int(index), self.batches_per_pass)
        else:
            pass_index, position = self._finite_pass, int(index)
            if not 0 <= position < self.batches_per_pass:
                raise IndexError(f"batch {index} of a pass of {self.batches_per_pass}")
        rows = self.order(pass_index)[position * self.batch_size:(position + 1) * self.batch_size]
        if not self.shuffle:  # a contiguous slice: a view, no copy
            rows = slice(position * self.batch_size, position * self.batch_size + len(rows))
        return tuple(array[rows] for array in self.arrays)

    def on_epoch_end(self) -> None:
        self._finite_pass += 1  # the next finite pass is reshuffled (tf.data's reshuffle_each_iteration)


class RepeatedBatch(keras.utils.PyDataset):
    """One batch, the same every step, without end (ParaDnn's synthetic input: the pipeline costs
    nothing and every step does the same work). Bound each epoch with steps_per_epoch."""

    def __init__(self, *arrays: Any) -> None:
        super().__init__(workers=0)
        self.batch = tuple(np.asarray(array) for array in arrays)

    @property
    def num_batches(self) -> None:
        return None

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        return self.batch


class RandomWindows(keras.utils.PyDataset):
    """Batches of `batch_size` windows of `sequence_length` rows starting at uniformly drawn rows of
    (x, y), without end (the weather tutorial's batch generator). Batch i's starts come from a
    generator seeded with (seed, i), so the stream is the same on every run with the same seed."""

    def __init__(self, x: Any, y: Any, *, sequence_length: int, batch_size: int, seed: int) -> None:
        super().__init__(workers=0)
        self.x, self.y = np.asarray(x, np.float32), np.asarray(y, np.float32)
        self.sequence_length, self.batch_size, self.seed = int(sequence_length), int(batch_size), int(seed)
        self.starts = len(self.x) - self.sequence_length + 1
        self._offsets = np.arange(self.sequence_length)

    @property
    def num_batches(self) -> None:
        return None

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        starts = np.random.default_rng((self.seed, int(index))).integers(0, self.starts, self.batch_size)
        rows = starts[:, np.newaxis] + self._offsets[np.newaxis, :]  # (batch, steps)
        return self.x[rows], self.y[rows]
