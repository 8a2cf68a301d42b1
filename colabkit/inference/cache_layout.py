"""The key-value cache's layout for colabkit.inference.decode, and the step's attention over it (docs/decode.md).

Per layer a cache of keys and one of values, [batch x heads, max_length, head_size]: a row per sequence and head. The
step's attention over it is written here, two einsums and a softmax, so that XLA's products read the cache where its
in-place update left it. Measured on this CPU's XLA (JAX 0.10.2, TensorFlow 2.21), counting the compiled step's
whole-cache transposes and copies (colabkit.inference.compiled): given Keras's [B, T, N, H] for
keras.ops.dot_product_attention, XLA copied every layer's keys and values into a transposed layout each step (2.8x the
bytes the step must read at batch 16 x 544 positions, by XLA's cost analysis); given [B, N, T, H] it did so at batch
1, where it drops the unit axis between the update and the product and updates a second copy. Where batch x heads is 1
the backends part: JAX's XLA copied a [1, T, H] cache and not a [T, H] one, TensorFlow's the other way round; each gets
the one it keeps in place (tests/test_decode.py checks every case).
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np


def cache_shape(batch: int, heads: int, length: int, size: int, backend: str) -> tuple[int, ...]:
    """The shape of a layer's key cache, and of its value cache: [batch x heads, length, size], a row per sequence
    and head; [length, size] on JAX where batch x heads is 1 (module docstring: which unit axes XLA copies)."""
    return ((batch * heads,) if batch * heads > 1 or backend != "jax" else ()) + (length, size)


def to_cache_layout(x: Any, rank: int) -> Any:
    """[B, T, N, H] (what the attention's projections emit) in the layout of a cache of `rank` axes: [B x N, T, H],
    or [T, H] (rank 2, where B x N is 1)."""
    batch, length, heads, size = x.shape
    rows = keras.ops.reshape(keras.ops.transpose(x, (0, 2, 1, 3)), (batch * heads, length, size))
    return rows if rank == 3 else rows[0]


def attend_to_cache(query: Any, keys: Any, values: Any, keep: Any, scale: float) -> Any:
    """Softmax attention of the step's queries [B, 1, N, H] over the cache's `keys` and `values` (to_cache_layout's),
    the positions where `keep` [max_length] is false masked: [B, 1, N, H]. As keras.ops.dot_product_attention computes
    it (the logits scaled and masked in float32 with its large negative, the softmax in float32, its probabilities in
    the cache's dtype), but in the cache's layout, so that XLA's products read the cache where the update left it."""
    batch, _, heads, size = query.shape
    rank = len(keys.shape)
    rows = "x" if rank == 3 else ""  # the B x N axis, absent where it is 1 (on JAX)
    logits = keras.ops.einsum(f"{rows}qh,{rows}kh->{rows}qk", to_cache_layout(query, rank), keys)
    logits = keras.ops.cast(logits, "float32") * scale
    logits = keras.ops.where(keep, logits, -0.7 * float(np.finfo(np.float32).max))
    probs = keras.ops.cast(keras.ops.softmax(logits, axis=-1), values.dtype)
    context = keras.ops.einsum(f"{rows}qk,{rows}kh->{rows}qh", probs, values)  # [B x N, 1, H] or [1, H]
    return keras.ops.transpose(keras.ops.reshape(context, (batch, heads, 1, size)), (0, 2, 1, 3))
