"""The compiler's own count of a Transformer's training FLOPs beside PaLM's formula (docs/paradnn.md): the
gradient step on one batch of zeros, compiled by XLA; on JAX its cost analysis (every op), on both backends
the dot ops of its HLO (TensorFlow exposes no cost analysis). A ratio outside RATIO_BAND gets a note.
"""

from __future__ import annotations

import math
import re
from typing import Any

import keras
import numpy as np

RATIO_BAND = (0.8, 1.25)
# 'ROOT dot.3 = f32[8,64,64]{2,1,0} dot(a.1, b.2), lhs_batch_dims={0}, lhs_contracting_dims={2}, ...' (operands by
# name, their shapes where they are defined; TensorFlow's HLO prefixes names with '%' and may print shapes inline)
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*\w+\[([\d,]*)\]\S*\s+([\w\-]+)\((.*)$")
_OPERAND = re.compile(r"\s*(?:\w+\[([\d,]*)\]\S*\s+)?%?([\w.\-]+)")
_CONTRACTING = re.compile(r"lhs_contracting_dims=\{([\d,]*)\}")


def _dims(text: str) -> list[int]:
    return [int(d) for d in text.split(",") if d]


def hlo_dot_flops(hlo_text: str) -> float:
    """FLOPs of every dot op of an HLO module's text: 2 x (elements of its output) x (the product of the lhs's
    contracting dimensions)."""
    shapes: dict[str, list[int]] = {}
    total = 0.0
    for line in hlo_text.splitlines():
        match = _INSTRUCTION.match(line)
        if not match:
            continue
        name, dims, op, rest = match.groups()
        shapes[name] = _dims(dims)
        if op != "dot":
            continue
        operand = _OPERAND.match(rest)
        inline, lhs = operand.groups() if operand else (None, "")
        lhs_dims = _dims(inline) if inline is not None else shapes.get(lhs)
        contracting = _CONTRACTING.search(rest)
        if lhs_dims is None or not contracting:
            raise ValueError(f"an HLO dot whose operand shape or contraction is not found: {line.strip()[:200]}")
        total += 2.0 * math.prod(shapes[name]) * math.prod(lhs_dims[a] for a in _dims(contracting.group(1)))
    return total


def _batch(model: Any, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """Zeros of the model's input (its dtype) and integer labels of its output without the class axis."""
    inputs = model.inputs[0]
    x = np.zeros((batch, *inputs.shape[1:]), dtype=str(inputs.dtype))
    y = np.zeros((batch, *model.outputs[0].shape[1:-1]), dtype="int32")
    return x, y


def _jax(model: Any, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    import jax

    def loss(trainable: Any, frozen: Any) -> Any:
        predictions, _ = model.stateless_call(trainable, frozen, x, training=True)
        return model.loss(y, predictions)

    lowered = jax.jit(jax.grad(loss)).lower([v.value for v in model.trainable_variables],
                                           [v.value for v in model.non_trainable_variables])
    cost = lowered.compile().cost_analysis()
    if isinstance(cost, (list, tuple)):  # older JAX: one dict per computation
        cost = cost[0]
    return float(cost["flops"]), hlo_dot_flops(lowered.as_text(dialect="hlo"))


def _tensorflow(model: Any, x: np.ndarray, y: np.ndarray) -> tuple[None, float]:
    import tensorflow as tf

    @tf.function(jit_compile=True)
    def step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = model.loss(y, model(x, training=True))
        return tape.gradient(loss, model.trainable_variables)

    try:
        return None, hlo_dot_flops(step.experimental_get_compiler_ir(tf.constant(x), tf.constant(y))(stage="hlo"))
    except tf.errors.OpError as error:  # XLA could not compile the step (an op it lacks, a strategy's variables)
        raise RuntimeError(str(error).splitlines()[0]) from error


def compiler_count(model: Any, batch: int, model_train_per_sample: float) -> dict[str, Any]:
    """The record's fields of the compiler's count of one training step of `batch` samples, per sample, and its
    ratio to `model_train_per_sample` (the model FLOPs): `compiler_flops_train_per_sample` (XLA's cost analysis,
    every op: JAX only), `compiler_dot_flops_train_per_sample` (the HLO's dots), `compiler_flops_ratio` (the
    cost analysis's where there is one, else the dots'), `compiler_flops_source`, `compiler_flops_note`."""
    backend = keras.backend.backend()
    fields: dict[str, Any] = {"compiler_flops_train_per_sample": None, "compiler_dot_flops_train_per_sample": None,
                              "compiler_flops_ratio": None, "compiler_dot_flops_ratio": None,
                              "compiler_flops_source": None, "compiler_flops_note": None}
    counters = {"jax": _jax, "tensorflow": _tensorflow}
    if backend not in counters:
        return {**fields, "compiler_flops_note": f"no compiler count on the {backend} backend (XLA's: JAX, TensorFlow)"}
    try:
        total, dots = counters[backend](model, *_batch(model, batch))
    except (ValueError, TypeError, RuntimeError, NotImplementedError, AttributeError, KeyError) as error:
        return {**fields, "compiler_flops_note": f"the compiler's count failed: {type(error).__name__}: {error}"}
    fields["compiler_flops_source"] = (
        "XLA cost analysis of the jitted gradient step (jax.jit(...).lower(...).compile().cost_analysis()), and the "
        "dot ops of its HLO" if backend == "jax" else
        "the dot ops of the XLA HLO of the gradient step (tf.function(jit_compile=True).experimental_get_compiler_ir, "
        "stage hlo; TensorFlow exposes no cost analysis)") + f", batch {batch}, divided by the batch"
    fields["compiler_dot_flops_train_per_sample"] = dots / batch
    fields["compiler_dot_flops_ratio"] = dots / batch / model_train_per_sample
    if total is not None:
        fields["compiler_flops_train_per_sample"] = total / batch
    ratio = (total if total is not None else dots) / batch / model_train_per_sample
    fields["compiler_flops_ratio"] = ratio
    low, high = RATIO_BAND
    if not low <= ratio <= high:
        share = f"; the dots alone are {fields['compiler_dot_flops_ratio']:.3f}x" if total is not None else ""
        fields["compiler_flops_note"] = (
            f"ratio {ratio:.3f} outside {low}-{high}{share}: " + (
                "XLA's cost analysis counts every op (softmax, layer norm, GELU, residual adds, the loss and their "
                "gradients), which PaLM's formula leaves out; they weigh most where the model is narrow (small "
                "width and head size) next to its sequence length" if total is not None and ratio > high else
                "the compiled step's matrix products differ from the formula's (docs/paradnn.md)"))
    return fields
