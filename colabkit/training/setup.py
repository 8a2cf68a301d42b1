"""What every training notebook sets up before fit: the dtype policy, per-replica and global batch
sizes, the input pipelines (tf.data on TensorFlow, NumPy batches on JAX; static shapes for TPUs), the
learning-rate scaling rule, and seeded subsamples for smoke-size runs."""

from __future__ import annotations

from typing import Any

import keras

from colabkit.training.batches import ArrayBatches, RepeatedBatch, pad_to_full_batches
from colabkit.training.choices import BATCH_SIZE_MEANINGS, LR_SCALING_RULES, MIXED_PRECISION_CHOICES


def set_precision(mixed_precision: str) -> str:
    """Set Keras's global dtype policy from a notebook parameter; return the policy's name."""
    if mixed_precision not in MIXED_PRECISION_CHOICES:
        raise ValueError(f"mixed_precision must be one of {', '.join(MIXED_PRECISION_CHOICES)}, got {mixed_precision!r}")
    policy = "float32" if mixed_precision == "none" else mixed_precision
    keras.mixed_precision.set_global_policy(policy)
    return policy


def batch_sizes(batch_size: int, replicas: int, batch_size_is: str = "per_replica") -> tuple[int, int]:
    """(per-replica, global) batch sizes. `batch_size_is` says which of the two `batch_size` is.

    A global batch must split evenly across replicas: every replica gets the same static shape.
    """
    if batch_size_is not in BATCH_SIZE_MEANINGS:
        raise ValueError(f"batch_size_is must be one of {', '.join(BATCH_SIZE_MEANINGS)}, got {batch_size_is!r}")
    if batch_size < 1 or replicas < 1:
        raise ValueError(f"batch_size and replicas must be >= 1, got {batch_size} and {replicas}")
    if batch_size_is == "per_replica":
        return batch_size, batch_size * replicas
    if batch_size % replicas:
        raise ValueError(f"a global batch of {batch_size} does not split evenly over {replicas} replicas")
    return batch_size // replicas, batch_size


def make_dataset(x: Any, y: Any = None, *, batch_size: int, shuffle: bool = False, seed: int = 0,
                 static_shapes: bool = False):
    """Batches of (x, y) for fit, evaluate or predict: (shuffle,) batch, on the Keras backend in use.

    On TensorFlow a tf.data pipeline (`tf_dataset`); on any other backend NumPy batches
    (`colabkit.training.batches.ArrayBatches`), so that a JAX kernel never imports TensorFlow. Both
    batch alike: training (`shuffle=True`) reshuffles every pass and drops the last partial batch when
    `static_shapes` (TPUs, and JAX over several devices, need every batch the same shape). Evaluation
    never drops samples: with `static_shapes` the last batch is padded with zero-weight samples
    (elements are then (x, y, sample_weight)), so every real sample counts exactly once and padding
    counts for nothing.
    """
    if keras.backend.backend() == "tensorflow":
        return tf_dataset(x, y, batch_size=batch_size, shuffle=shuffle, seed=seed, static_shapes=static_shapes)
    return array_batches(x, y, batch_size=batch_size, shuffle=shuffle, seed=seed, static_shapes=static_shapes)


def array_batches(x: Any, y: Any = None, *, batch_size: int, shuffle: bool = False, seed: int = 0,
                  static_shapes: bool = False) -> ArrayBatches:
    """make_dataset's batches as a keras.utils.PyDataset over NumPy arrays (no TensorFlow)."""
    if shuffle:
        arrays = (x,) if y is None else (x, y)
        return ArrayBatches(arrays, batch_size=batch_size, shuffle=True, seed=seed, drop_remainder=static_shapes)
    arrays = pad_to_full_batches(x, y, batch_size) if static_shapes else ((x,) if y is None else (x, y))
    return ArrayBatches(arrays, batch_size=batch_size)


def tf_dataset(x: Any, y: Any = None, *, batch_size: int, shuffle: bool = False, seed: int = 0,
               static_shapes: bool = False):
    """make_dataset's batches as a tf.data pipeline, prefetched (imports TensorFlow)."""
    import tensorflow as tf

    if shuffle:
        data = (x,) if y is None else (x, y)
        dataset = tf.data.Dataset.from_tensor_slices(data).shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.batch(batch_size, drop_remainder=static_shapes)
    else:
        data = pad_to_full_batches(x, y, batch_size) if static_shapes else ((x,) if y is None else (x, y))
        dataset = tf.data.Dataset.from_tensor_slices(data).batch(batch_size, drop_remainder=static_shapes)
    return dataset.prefetch(tf.data.AUTOTUNE)


def repeated_batch(x: Any, y: Any, *more: Any):
    """One batch (x, y, and sample weights if given), the same every step, without end: tf.data on
    TensorFlow, NumPy elsewhere. Bound each epoch with steps_per_epoch."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.data.Dataset.from_tensors((x, y, *more)).repeat()
    return RepeatedBatch(x, y, *more)



def scaled_learning_rate(learning_rate: float, global_batch: int, reference_batch: int, rule: str = "none") -> float:
    """The learning rate for `global_batch` under a scaling rule.

    "none": unchanged. "linear": multiplied by global_batch / reference_batch (Goyal et al. 2017,
    "Accurate, Large Minibatch SGD"): with R replicas each seeing the reference batch, R times the
    rate. It helps SGD-like optimisers keep the same progress per sample; with Adam the gain is
    smaller, which is why the rule is optional and off by default.
    """
    if rule not in LR_SCALING_RULES:
        raise ValueError(f"lr_scaling must be one of {', '.join(LR_SCALING_RULES)}, got {rule!r}")
    if rule == "none":
        return learning_rate
    return learning_rate * global_batch / reference_batch


def subsample(count: int, *arrays: Any, seed: int = 0) -> tuple[Any, ...]:
    """The same `count` rows of every array, drawn without replacement with a seeded generator and
    kept in their original order; `count` 0 (or >= the rows there are) returns the arrays whole.

    For smoke-size runs on data stored grouped (UCI HAR's files are sorted by volunteer): the first
    rows would hold a few volunteers and classes only, a seeded draw holds them all.
    """
    import numpy as np

    if count < 0:
        raise ValueError(f"count must be >= 0 (0: all rows), got {count}")
    rows = {len(array) for array in arrays}
    if len(rows) > 1:
        raise ValueError(f"arrays differ in length: {sorted(rows)}")
    total = rows.pop() if rows else 0
    if count == 0 or count >= total:
        return tuple(arrays)
    keep = np.sort(np.random.default_rng(seed).choice(total, size=count, replace=False))
    return tuple(array[keep] for array in arrays)
