"""What every training notebook sets up before fit: the dtype policy, per-replica and global batch
sizes, the tf.data pipelines (static shapes for TPUs), the learning-rate scaling rule, and seeded
subsamples for smoke-size runs."""

from __future__ import annotations

from typing import Any

import keras

MIXED_PRECISION_CHOICES = ("none", "mixed_float16", "mixed_bfloat16")
BATCH_SIZE_MEANINGS = ("per_replica", "global")


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
    """A tf.data pipeline: (shuffle,) batch, prefetch.

    Training (`shuffle=True`) drops the last partial batch when `static_shapes` (TPUs need every
    batch the same shape). Evaluation never drops samples: with `static_shapes` the last batch is
    padded with zero-weight samples (dataset elements are then (x, y, sample_weight)), so every
    real sample counts exactly once and padding counts for nothing.
    """
    import numpy as np
    import tensorflow as tf

    count = len(x)
    if shuffle:
        data = (x,) if y is None else (x, y)
        dataset = tf.data.Dataset.from_tensor_slices(data).shuffle(count, seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.batch(batch_size, drop_remainder=static_shapes)
    else:
        padding = (-count) % batch_size if static_shapes else 0
        if padding:
            weights = np.concatenate([np.ones(count, "float32"), np.zeros(padding, "float32")])
            x = np.concatenate([x, np.zeros((padding, *x.shape[1:]), x.dtype)])
            if y is not None:
                y = np.concatenate([y, np.zeros((padding, *y.shape[1:]), y.dtype)])
            data = (x,) if y is None else (x, y, weights)
        else:
            data = (x,) if y is None else (x, y)
        dataset = tf.data.Dataset.from_tensor_slices(data).batch(batch_size, drop_remainder=static_shapes)
    return dataset.prefetch(tf.data.AUTOTUNE)


LR_SCALING_RULES = ("none", "linear")


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
