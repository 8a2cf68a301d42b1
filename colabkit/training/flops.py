"""Analytic model FLOPs of Keras 3 models, arithmetic intensity of a training step, and MFU.

`model_flops(model)` walks a built model layer by layer, with each layer's real input and output
shapes, and counts the multiply-adds of its matrix products and convolutions (2 FLOPs each) plus
its bias adds (1 FLOP per output value). Everything else (activations, pooling, normalisation,
dropout, residual adds, reshapes) is listed with 0 FLOPs: small next to the products, and left out
by the usual model-FLOPs convention (PaLM's MFU, Chowdhery et al. 2022, appendix B). A layer type
the counter does not know raises FlopCountError naming it: never a silent zero.

Profilers are no substitute for RNNs: XLA's cost analysis and tf.profiler cost a loop body once,
whatever the trip count, so a recurrent layer is counted here from its formula (docs/roofline.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import keras

from colabkit.device.achievable import achievable_fields, achievable_record
from colabkit.device.peaks import at_least, peak_metrics
from colabkit.errors import FlopCountError
from colabkit.phases import phase
from colabkit.training.compiler_flops import compiler_count
from colabkit.training.roofline import dtype_bytes, roofline_point

FLOP_CONVENTION = (
    "model FLOPs, analytic: one multiply-add = 2 FLOPs; per layer the matrix products and convolutions "
    "(2 x multiply-adds) plus one FLOP per bias add; Dense d->u: 2du+u per position, Conv: "
    "2*Ho*Wo*kh*kw*Cin*Cout + Ho*Wo*Cout, SimpleRNN 2u(d+u)+u, LSTM 8u(d+u)+4u, GRU (reset_after) "
    "6u(d+u)+6u per time step, x time steps, Bidirectional = both directions; training = 3 x forward "
    "(forward + 2 x backward, as PaLM's MFU counts them; no recomputation); 0 FLOPs (ignored): "
    "activations (fused or as layers), pooling, dropout, normalisation, residual adds and merges, "
    "reshapes, padding, embedding lookups, the loss and the optimizer update"
)

PALM_CONVENTION = (
    "model FLOPs by PaLM's formula (Chowdhery et al. 2022, appendix B), for a model with attention layers: "
    "training 6N + 12 x L x H x Q x T per token, forward a third (2N + 4LHQT); N = every trainable weight outside "
    "the embedding tables (token and position lookups cost no FLOPs), the untied output head, biases and layer "
    "norms included; L x H x Q = heads x head size summed over the attention layers; T = the sequence length; the "
    "attention term counts the full T x T scores and weighted values, NOT halved for the causal mask (the kernels "
    "compute the masked half and discard it; PaLM and nanoGPT's estimate_mfu count it whole); softmax, layer norm, "
    "activations, the loss and the optimizer update: 0 FLOPs; no recomputation"
)

TRAIN_TO_FORWARD = 3.0  # forward + backward (gradients for the inputs and for the weights)


@dataclass(frozen=True)
class ModelFlops:
    """Forward and training FLOPs per sample of a model, with the per-layer forward counts."""

    forward_per_sample: float
    train_per_sample: float
    by_layer: tuple[tuple[str, str, float], ...]  # (layer name, class, forward FLOPs per sample)
    convention: str


@dataclass(frozen=True)
class Intensity:
    """FLOPs and bytes moved by one training step, and their ratio."""

    flops_per_step: float
    bytes_per_step: float
    intensity: float  # FLOPs per byte


Shape = tuple[Any, ...]  # one tensor's shape without the batch axis

# Layers with no FLOPs under the convention. True: the layer writes a new tensor (counted as
# activation traffic by `arithmetic_intensity`); False: a view or nothing at all.
_IGNORED: dict[str, bool] = {
    "InputLayer": False, "Flatten": False, "Reshape": False, "Permute": True, "RepeatVector": True,
    "Activation": True, "ReLU": True, "LeakyReLU": True, "PReLU": True, "ELU": True, "Softmax": True,
    "Dropout": True, "SpatialDropout1D": True, "SpatialDropout2D": True, "SpatialDropout3D": True,
    "GaussianNoise": True, "GaussianDropout": True, "AlphaDropout": True, "ActivityRegularization": False,
    "BatchNormalization": True, "LayerNormalization": True, "GroupNormalization": True,
    "UnitNormalization": True, "Rescaling": True, "Normalization": True,
    "MaxPooling1D": True, "MaxPooling2D": True, "MaxPooling3D": True,
    "AveragePooling1D": True, "AveragePooling2D": True, "AveragePooling3D": True,
    "GlobalAveragePooling1D": True, "GlobalAveragePooling2D": True, "GlobalAveragePooling3D": True,
    "GlobalMaxPooling1D": True, "GlobalMaxPooling2D": True, "GlobalMaxPooling3D": True,
    "ZeroPadding1D": True, "ZeroPadding2D": True, "ZeroPadding3D": True,
    "Cropping1D": True, "Cropping2D": True, "Cropping3D": True,
    "Add": True, "Subtract": True, "Multiply": True, "Average": True, "Maximum": True, "Minimum": True,
    "Concatenate": True, "Embedding": True, "Masking": True,
}


def _shapes(tensors: Any) -> list[Shape]:
    """Shapes without the batch axis of a tensor or a (nested) list of tensors."""
    if isinstance(tensors, dict):
        tensors = list(tensors.values())
    if isinstance(tensors, (list, tuple)):
        return [shape for tensor in tensors for shape in _shapes(tensor)]
    return [tuple(tensors.shape)[1:]]


def _elements(shape: Shape, layer: Any, sequence_length: int | None) -> int:
    """Number of values of a per-sample shape; a None axis takes `sequence_length`."""
    count = 1
    for axis in shape:
        if axis is None:
            if sequence_length is None:
                raise FlopCountError(
                    f"layer {layer.name!r} ({type(layer).__name__}) has an axis of unknown length {shape}: "
                    "pass model_flops(model, sequence_length=...) (the time steps of one training sample)"
                )
            axis = sequence_length
        count *= int(axis)
    return count


def _dense(layer: Any, inputs: Shape, outputs: Shape, length: int | None) -> float:
    d, u = int(inputs[-1]), int(outputs[-1])
    positions = _elements(inputs[:-1], layer, length)  # Dense on (T, d) runs once per time step
    return positions * (2.0 * d * u + (u if layer.use_bias else 0))


def _conv(layer: Any, inputs: Shape, outputs: Shape, length: int | None) -> float:
    channels_last = getattr(layer, "data_format", "channels_last") == "channels_last"
    cin = int(inputs[-1] if channels_last else inputs[0])
    cout = int(outputs[-1] if channels_last else outputs[0])
    spatial_out = outputs[:-1] if channels_last else outputs[1:]
    groups = int(getattr(layer, "groups", 1) or 1)
    kernel = math.prod(int(k) for k in layer.kernel_size)
    positions = _elements(spatial_out, layer, length)
    return positions * (2.0 * kernel * (cin // groups) * cout + (cout if layer.use_bias else 0))


def _cell_step(cell: Any, d: int) -> tuple[float, int]:
    """FLOPs of one time step of an RNN cell fed `d` inputs, and the cell's output size."""
    name = type(cell).__name__
    if name == "StackedRNNCells":
        total = 0.0
        for inner in cell.cells:
            flops, d = _cell_step(inner, d)
            total += flops
        return total, d
    u = int(cell.units)
    bias = bool(getattr(cell, "use_bias", True))
    if name == "SimpleRNNCell":
        return 2.0 * u * (d + u) + (u if bias else 0), u
    if name == "LSTMCell":
        return 8.0 * u * (d + u) + (4 * u if bias else 0), u
    if name == "GRUCell":
        # reset_after=True (Keras 3's default) has two bias vectors of 3u: input and recurrent.
        biases = (6 * u if cell.reset_after else 3 * u) if bias else 0
        return 6.0 * u * (d + u) + biases, u
    raise FlopCountError(f"RNN cell {getattr(cell, 'name', name)!r} of class {name} has no FLOP formula: "
                         "add one to colabkit/training/flops.py")


def _rnn(layer: Any, inputs: Shape, outputs: Shape, length: int | None) -> float:
    steps = _elements(inputs[:1], layer, length)
    per_step, _ = _cell_step(layer.cell, int(inputs[-1]))
    return steps * per_step


def _bidirectional(layer: Any, inputs: Shape, outputs: Shape, length: int | None) -> float:
    total = 0.0
    for direction in (layer.forward_layer, layer.backward_layer):
        inner_out = _shapes_of(direction.compute_output_shape((None, *inputs)))
        total += _layer_flops(direction, [inputs], inner_out, length)
    return total


def _time_distributed(layer: Any, inputs: Shape, outputs: Shape, length: int | None) -> float:
    steps = _elements(inputs[:1], layer, length)
    inner_in = inputs[1:]
    inner_out = _shapes_of(layer.layer.compute_output_shape((None, *inner_in)))
    return steps * _layer_flops(layer.layer, [inner_in], inner_out, length)


def _shapes_of(shape: Any) -> list[Shape]:
    """compute_output_shape's answer (one shape or several, batch axis first) without batch axes."""
    if isinstance(shape, (list, tuple)) and shape and isinstance(shape[0], (list, tuple)):
        return [tuple(s)[1:] for s in shape]
    return [tuple(shape)[1:]]


_COUNTERS: dict[str, Callable[[Any, Shape, Shape, int | None], float]] = {
    "Dense": _dense,
    "Conv1D": _conv, "Conv2D": _conv, "Conv3D": _conv,
    "SimpleRNN": _rnn, "LSTM": _rnn, "GRU": _rnn, "RNN": _rnn,
    "Bidirectional": _bidirectional,
    "TimeDistributed": _time_distributed,
}


def _layer_flops(layer: Any, inputs: Sequence[Shape], outputs: Sequence[Shape], length: int | None) -> float:
    name = type(layer).__name__
    counter = _COUNTERS.get(name)
    if counter is None:
        # Subclasses of known layers (e.g. a custom Dense) are counted like their base class.
        for base in type(layer).__mro__[1:]:
            if base.__module__.startswith("keras") and base.__name__ in _COUNTERS:
                counter = _COUNTERS[base.__name__]
                break
    if counter is not None:
        return counter(layer, inputs[0], outputs[0], length)
    if name in _IGNORED:
        return 0.0
    raise FlopCountError(
        f"layer {layer.name!r} of class {name} has no FLOP formula: add one to colabkit/training/flops.py "
        "(or list it among the layers ignored by the convention) rather than count it as zero"
    )


def _walk(model: Any, length: int | None) -> list[tuple[Any, list[Shape], list[Shape]]]:
    """(layer, input shapes, output shapes) of every leaf layer, nested models opened."""
    rows = []
    for layer in model.layers:
        if isinstance(layer, keras.Model):
            rows.extend(_walk(layer, length))
            continue
        try:
            inputs, outputs = _shapes(layer.input), _shapes(layer.output)
        except (AttributeError, ValueError) as error:
            raise FlopCountError(
                f"layer {layer.name!r} ({type(layer).__name__}) has no input shape: build the model on "
                f"keras.Input(...) (a functional or Sequential model) before counting its FLOPs ({error})"
            ) from error
        rows.append((layer, inputs, outputs))
    return rows


def _palm_flops(rows: list[tuple[Any, list[Shape], list[Shape]]], length: int | None) -> list[tuple[str, str, float]]:
    """Forward FLOPs per sequence of each layer under PALM_CONVENTION: 2 x its non-embedding weights x T, and
    for an attention layer 4 x H x Q x T^2 more (Q: the mean of its key and value head sizes)."""
    attention = [(layer, inputs) for layer, inputs, _ in rows if type(layer).__name__ == "MultiHeadAttention"]
    lengths = {_elements(inputs[0][:1], layer, length) for layer, inputs in attention}
    if len(lengths) != 1:
        raise FlopCountError(f"attention layers over sequences of different lengths {sorted(lengths)}: PaLM's "
                             "formula takes one T")
    tokens = lengths.pop()
    by_layer = []
    for layer, _, _ in rows:
        name = type(layer).__name__
        weights = 0 if "Embedding" in name else sum(math.prod(w.shape) for w in layer.trainable_weights)
        flops = 2.0 * weights * tokens
        if name == "MultiHeadAttention":
            flops += 2.0 * layer.num_heads * (layer.key_dim + (layer.value_dim or layer.key_dim)) * tokens * tokens
        by_layer.append((layer.name, name, flops))
    return by_layer


def model_flops(model: Any, sequence_length: int | None = None) -> ModelFlops:
    """Forward and training FLOPs per sample of a built Keras 3 model, counted layer by layer; a model with
    MultiHeadAttention layers by PaLM's formula (PALM_CONVENTION), each layer's share listed.

    `sequence_length` fills an axis of unknown length (a model built on keras.Input((None, d)))
    with the time steps of one training sample. Raises FlopCountError on a layer without a formula,
    on an unknown axis length, and on a model whose layers were never called on a keras.Input.
    """
    if not getattr(model, "layers", None):
        raise FlopCountError(f"model {getattr(model, 'name', model)!r} has no layers to count")
    with phase("flop_count"):
        rows = _walk(model, sequence_length)
        palm = any(type(layer).__name__ == "MultiHeadAttention" for layer, _, _ in rows)
        by_layer = _palm_flops(rows, sequence_length) if palm else [
            (layer.name, type(layer).__name__, float(_layer_flops(layer, inputs, outputs, sequence_length)))
            for layer, inputs, outputs in rows]
    forward = sum(flops for _, _, flops in by_layer)
    return ModelFlops(forward_per_sample=forward, train_per_sample=TRAIN_TO_FORWARD * forward,
                      by_layer=tuple(by_layer), convention=PALM_CONVENTION if palm else FLOP_CONVENTION)


# Weight traffic of one training step, in values per weight (docs/roofline.md):
# forward read 1 + backward read 1 + gradient write 1 + update (read weight, read gradient, write weight) 3.
WEIGHT_ACCESSES_PER_STEP = 6
INTENSITY_CONVENTION = (
    "bytes per training step = dtype bytes x (6 x trainable weights (forward read, backward read, gradient "
    "write, update reads weight and gradient and writes weight; optimizer slots not counted) + 1 x "
    "non-trainable weights (forward read) + batch x (model inputs read once + 2 x every materialised layer "
    "output: written in the forward pass, read in the backward pass))"
)


def arithmetic_intensity(model: Any, flops: ModelFlops, batch_size: int, dtype_bytes: int,
                         sequence_length: int | None = None) -> Intensity:
    """FLOPs per byte moved by one training step of `batch_size` samples (formula in INTENSITY_CONVENTION).

    Weights and activations are counted at `dtype_bytes` per value (the compute dtype); views
    (Flatten, Reshape, the input layer) move nothing; an RNN's per-step internal gate values are
    not counted, so its bytes are a lower bound and its intensity an upper bound.
    """
    if batch_size < 1 or dtype_bytes < 1:
        raise ValueError(f"batch_size and dtype_bytes must be >= 1, got {batch_size} and {dtype_bytes}")
    trainable = sum(math.prod(w.shape) for w in model.trainable_weights)
    frozen = sum(math.prod(w.shape) for w in model.non_trainable_weights)
    inputs = sum(_elements(shape, model, sequence_length) for shape in _shapes(model.inputs))
    written = 0
    for layer, _, outputs in _walk(model, sequence_length):
        if _IGNORED.get(type(layer).__name__, True):
            written += sum(_elements(shape, layer, sequence_length) for shape in outputs)
    values = WEIGHT_ACCESSES_PER_STEP * trainable + frozen + batch_size * (inputs + 2 * written)
    step_flops = flops.train_per_sample * batch_size
    step_bytes = float(values * dtype_bytes)
    return Intensity(flops_per_step=step_flops, bytes_per_step=step_bytes, intensity=step_flops / step_bytes)


def utilisation_metrics(flops: ModelFlops, samples_per_s: float | None, peak_tflops: float | None,
                        peak_reason: str | None = None) -> dict[str, Any]:
    """The record fields of model FLOPs and utilisation.

    `model_tflops` = train FLOPs per sample x samples/s / 1e12 exactly (None without a steady
    throughput); `mfu` = model_tflops / peak, None with `mfu_reason` when either is unknown.
    """
    model_tflops = None if samples_per_s is None else flops.train_per_sample * samples_per_s / 1e12
    mfu, reason = None, None
    if model_tflops is None:
        reason = "no steady-state throughput (only one epoch ran)"
    elif peak_tflops is None or peak_tflops <= 0:
        reason = peak_reason or "no published peak for this device at this precision"
    else:
        mfu = model_tflops / peak_tflops
    return {
        "model_flops_forward_per_sample": flops.forward_per_sample,
        "model_flops_train_per_sample": flops.train_per_sample,
        "model_tflops": model_tflops,
        "mfu": mfu,
        "mfu_reason": reason,
        "flop_convention": flops.convention,
    }


def utilisation(model: Any, device: Any, samples_per_s: float | None, batch_size_per_replica: int, *,
                sequence_length: int | None = None, flops: ModelFlops | None = None,
                roofline: bool = False) -> dict[str, Any]:
    """How well a trained model used its device, as record fields: model FLOPs per sample, achieved
    model TFLOPS and MFU (utilisation_metrics), the peak it was divided by (with its source, at the
    model's compute precision), MFU against the achievable peak too (colabkit.device.achievable: a matmul
    scan, once per host), and the arithmetic intensity of one training step per replica; with
    `roofline`, the device's memory bandwidth (`device.peak_bandwidth()`: datasheet on GPUs and TPUs, a
    STREAM measurement on a CPU) and the run's point on the roofline (roofline_point).

    `device` is the notebook's DeviceSetup; `samples_per_s` the steady global throughput
    (TrainingTimer's); `flops` the model's, where already counted. The intensity's bytes are counted as
    INTENSITY_CONVENTION says.
    """
    compute_dtype = str(getattr(getattr(model, "dtype_policy", None), "compute_dtype", None) or "float32")
    flops = flops or model_flops(model, sequence_length)
    peak = device.peak(compute_dtype)
    reason = f"no published peak for {device.name} at {compute_dtype}"
    achieved = utilisation_metrics(flops, samples_per_s, None)["model_tflops"]
    achievable = achievable_fields(device.kind, getattr(device, "backend", None), device.replicas, compute_dtype,
                                   achieved, peak.tflops if peak else None)
    raised = at_least(peak, achievable["achievable_tflops"], "this run's matmul scan")
    if peak is not None and raised is not peak:  # a CPU estimate below the scan had the wrong clock: raised to it
        achievable["achievable_over_datasheet"] = achievable["achievable_tflops"] / raised.tflops
        achievable["achievable_note"] = f"{achievable['achievable_note']}; the estimate was raised to it (peak_basis)"
        peak = raised
    fields = utilisation_metrics(flops, samples_per_s, peak.tflops if peak else None, peak_reason=reason)
    intensity = arithmetic_intensity(model, flops, batch_size_per_replica, dtype_bytes(compute_dtype), sequence_length)
    fields.update({
        "compute_dtype": compute_dtype,
        **peak_metrics(peak, reason),
        "arithmetic_intensity": intensity.intensity,
        "flops_per_step_per_replica": intensity.flops_per_step,
        "bytes_per_step_per_replica": intensity.bytes_per_step,
        "intensity_convention": INTENSITY_CONVENTION,
        **achievable,
    })
    if roofline:
        bandwidth = device.peak_bandwidth()
        fields.update({
            "peak_bandwidth_gb_s": bandwidth.gb_per_s if bandwidth else None,
            "peak_bandwidth_source": bandwidth.source if bandwidth else f"no published bandwidth for {device.name}",
            "peak_bandwidth_quality": bandwidth.quality if bandwidth else None,  # vendor, secondary or measured
            "peak_bandwidth_min_gb_s": bandwidth.min_gb_s if bandwidth else None,  # measured: its slowest pass
            "peak_bandwidth_measured_at": bandwidth.measured_at if bandwidth else None,
            **roofline_point(intensity.intensity, fields["model_tflops"], fields["peak_tflops"],
                             bandwidth.gb_per_s if bandwidth else None),
        })
    return fields


def account(model: Any, device: Any, samples_per_s: float | None, batch_size_per_replica: int, *,
            sequence_length: int | None = None, roofline: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics, record fields) of a trained model: `utilisation` (a Transformer's with the compiler's own count beside
    PaLM's formula), the record's `flops` (per sample, by layer) and `achievable_peak`."""
    flops = model_flops(model, sequence_length)
    metrics = utilisation(model, device, samples_per_s, batch_size_per_replica, sequence_length=sequence_length,
                          flops=flops, roofline=roofline)
    if flops.convention == PALM_CONVENTION:
        metrics.update(compiler_count(model, batch_size_per_replica, flops.train_per_sample))
    layers = [{"layer": name, "class": kind, "forward_per_sample": value} for name, kind, value in flops.by_layer]
    per_sample = {"forward_per_sample": flops.forward_per_sample, "train_per_sample": flops.train_per_sample}
    return metrics, {"flops": {**per_sample, "convention": flops.convention, "by_layer": layers},
                     "achievable_peak": achievable_record(device.kind, getattr(device, "backend", None))}


def describe_utilisation(metrics: dict[str, Any]) -> str:
    """One line for a notebook: model FLOPs, achieved TFLOPS and the fraction of peak (or why not)."""
    forward = metrics.get("model_flops_forward_per_sample")
    achieved = metrics.get("model_tflops")
    text = f"model FLOPs: {forward / 1e6:,.2f} MFLOP forward per sample" if forward is not None else "model FLOPs: -"
    if achieved is not None:
        text += f"; achieved {achieved * 1e3:,.2f} GFLOPS"
    if metrics.get("mfu") is not None:
        text += f" = {metrics['mfu']:.2%} of the {metrics['peak_precision']} peak ({metrics['peak_tflops']:g} TFLOPS)"
    else:
        text += f"; MFU unknown: {metrics.get('mfu_reason')}"
    if metrics.get("mfu_achievable") is not None:
        text += (f", {metrics['mfu_achievable']:.2%} of the achievable {metrics['achievable_tflops']:.3g} TFLOPS "
                 f"(matmul scan, {metrics['achievable_shape']})")
    if metrics.get("compiler_flops_ratio") is not None:
        text += f"; the compiler counts {metrics['compiler_flops_ratio']:.3f}x these FLOPs"
    return text + f"; arithmetic intensity {metrics.get('arithmetic_intensity', float('nan')):.1f} FLOPs/byte"
