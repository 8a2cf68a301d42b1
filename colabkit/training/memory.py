"""The memory a training run needs, estimated from an experiment's parameters before anything is
built, so that a model far too large for its device is refused at once, with the estimate and the
device's memory named, rather than killed minutes later by the allocator or the OOM killer.

Per replica: float32 weights, gradients and optimizer slots (Adam 2, RMSprop 1-2, SGD 0), and one
batch of layer outputs at the compute dtype. It is a lower bound (workspaces, RNN gates, the input
pipeline and the framework are not counted), so a run is refused only when even this is above
FIT_FRACTION of the device's memory. Keras-free: the sweep calls `memory_problem` while planning,
the notebook `check_fits` (through `Run.check_memory`) after its device set-up. The last section does the
same for greedy decoding with a key-value cache (colabkit.inference.decode), with its FLOPs and bytes per step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from colabkit.errors import InsufficientMemoryError
from colabkit.training.choices import COMPUTE_DTYPES
from colabkit.training.roofline import dtype_bytes

if TYPE_CHECKING:
    from colabkit.device.memory import DeviceMemory

FIT_FRACTION = 0.9  # refuse when the estimate is above this fraction of the device's memory
VARIABLE_BYTES = 4  # float32 variables, gradients and optimizer slots
OPTIMIZER_SLOTS = {"SGD": 0, "SGD with momentum": 1, "RMSprop": 1, "RMSprop with momentum": 2, "Adam": 2}


def human_bytes(count: float) -> str:
    """A byte count for a message, in binary units: '512 B', '1.5 KiB', '16 GiB', '3.9 TiB'."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" or value >= 100 else f"{value:.3g} {unit}"
        value /= 1024
    return f"{value:.3g} TiB"  # unreachable: the loop returns at TiB


@dataclass(frozen=True)
class MemoryEstimate:
    """The memory one copy of a model needs to train on one batch (see the module's docstring)."""

    model: str  # what is estimated, for a message: 'paradnn fc layers=64 nodes=65536 ..., batch 64 per replica'
    trainable: int  # weights that get gradients and optimizer state
    non_trainable: int  # weights that do not (batch norm's moving statistics)
    optimizer: str  # a key of OPTIMIZER_SLOTS
    batch: int  # samples per replica
    activation_values: int  # per sample: the values the layers output and the backward pass reads
    activation_bytes: int  # bytes per activation value (the compute dtype's)

    @property
    def weights_bytes(self) -> int:
        return (self.trainable + self.non_trainable) * VARIABLE_BYTES

    @property
    def gradients_bytes(self) -> int:
        return self.trainable * VARIABLE_BYTES

    @property
    def optimizer_bytes(self) -> int:
        return self.trainable * OPTIMIZER_SLOTS[self.optimizer] * VARIABLE_BYTES

    @property
    def activations_bytes(self) -> int:
        return self.batch * self.activation_values * self.activation_bytes

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes + self.activations_bytes

    def parts(self) -> str:
        """'weights 1 TiB, gradients 1 TiB, optimizer state 2 TiB (RMSprop with momentum), activations of a
        batch of 64 1.3 MiB'."""
        return (f"weights {human_bytes(self.weights_bytes)}, gradients {human_bytes(self.gradients_bytes)}, "
                f"optimizer state {human_bytes(self.optimizer_bytes)} ({self.optimizer}), activations of a batch "
                f"of {self.batch} {human_bytes(self.activations_bytes)}")


# --- ParaDnn's families, as notebooks/paradnn.ipynb builds them ------------------------------

# Weights of one recurrent layer of `u` units fed `d` inputs (Keras 3; GRU with reset_after=True,
# its default: two bias vectors of 3u).
_RNN_WEIGHTS = {"rnn": lambda d, u: u * (d + u) + u, "lstm": lambda d, u: 4 * (u * (d + u) + u),
                "gru": lambda d, u: 3 * u * (d + u) + 6 * u}


# Forward FLOPs per time step of one recurrent layer (colabkit.training.flops' FLOP_CONVENTION).
_RNN_FLOPS = {"rnn": lambda d, u: 2 * u * (d + u) + u, "lstm": lambda d, u: 8 * u * (d + u) + 4 * u,
              "gru": lambda d, u: 6 * u * (d + u) + 6 * u}
# Each family's walk returns (trainable weights, frozen weights, activation values per sample, forward
# FLOPs per sample), the FLOPs counted as colabkit.training.flops counts a built model's.


def _fc(values: Mapping[str, Any]) -> tuple[int, int, int, int]:
    widths = [values["input_size"], *[values["nodes"]] * values["layers"], values["output_size"]]
    weights = sum(a * b + b for a, b in zip(widths, widths[1:]))
    flops = sum(2 * a * b + b for a, b in zip(widths, widths[1:]))
    return weights, 0, sum(widths), flops  # activations: every layer's output, and the input batch


def _cnn(values: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """ResNet-v1 (ParaDnn's resnet_model.py): convolutions without bias, each followed by batch norm
    (2 trainable and 2 moving values per channel); 'same' padding, so a stride s makes a side ceil(side / s)."""
    trainable = frozen = flops = 0
    activations = values["input_size"] ** 2 * 3

    def conv(cin: int, cout: int, kernel: int, side: int, stride: int) -> int:
        nonlocal trainable, frozen, activations, flops
        out = math.ceil(side / stride)
        trainable += kernel * kernel * cin * cout + 2 * cout
        frozen += 2 * cout
        activations += out * out * cout  # the convolution's output; batch norm's and ReLU's not counted
        flops += out * out * 2 * kernel * kernel * cin * cout  # no bias
        return out

    filters, channels = values["filters"], values["filters"]
    side = conv(3, filters, 7, values["input_size"], 2)
    side = math.ceil(side / 2)  # the 3x3 max-pool with stride 2
    activations += side * side * channels
    for group, stride in enumerate((1, 2, 2, 2)):
        width = filters * 2 ** group
        for index in range(values["blocks"]):
            step = stride if index == 0 else 1
            if values["block"] == "residual":
                out = conv(channels, width, 3, side, step)
                conv(width, width, 3, out, 1)
                produced = width
            else:  # bottleneck: 1x1, 3x3 (carrying the stride), 1x1 to 4x the width
                inner = conv(channels, width, 1, side, 1)
                out = conv(width, width, 3, inner, step)
                conv(width, 4 * width, 1, out, 1)
                produced = 4 * width
            if index == 0:  # the projection shortcut of each group's first block
                conv(channels, produced, 1, side, step)
            channels, side = produced, out
    trainable += channels * values["output_size"] + values["output_size"]
    flops += 2 * channels * values["output_size"] + values["output_size"]
    return trainable, frozen, activations + channels + values["output_size"], flops


def _rnn(values: Mapping[str, Any]) -> tuple[int, int, int, int]:
    hidden, vocab, length, layers = values["hidden"], values["vocab"], values["length"], values["layers"]
    weights = vocab * hidden + layers * _RNN_WEIGHTS[values["cell"]](hidden, hidden) + hidden * vocab + vocab
    flops = length * (layers * _RNN_FLOPS[values["cell"]](hidden, hidden) + 2 * hidden * vocab + vocab)
    # token ids, the embedding, every layer's output at every step, the logits at every step
    return weights, 0, length + length * hidden * (1 + layers) + length * vocab, flops


def transformer_weights(layers: int, width: int, vocab: int, mlp_ratio: int, length: int) -> tuple[int, int]:
    """(non-embedding weights N, embedding weights) of ParaDnn's decoder-only Transformer: per block two
    layer norms (2d each), Q, K, V and output projections (d x d + d each), an MLP d -> rd -> d with biases;
    a final layer norm and an untied head d -> vocab with bias; token (vocab x d) and position embeddings."""
    d, r = width, mlp_ratio
    block = 2 * 2 * d + 4 * (d * d + d) + (d * r * d + r * d) + (r * d * d + d)
    return layers * block + 2 * d + d * vocab + vocab, vocab * d + length * d


def palm_token_flops(non_embedding: int, attention_width: int, keys: int) -> int:
    """Forward model FLOPs of one token that attends to `keys` positions by PaLM's formula (Chowdhery et al.
    2022, appendix B): 2N + 4 x (sum over layers of H x Q) x keys (scores and weighted values, 2 each)."""
    return 2 * non_embedding + 4 * attention_width * keys


def palm_forward_flops(non_embedding: int, attention_width: int, length: int) -> int:
    """Forward model FLOPs of one sequence by PaLM's formula (Chowdhery et al. 2022, appendix B), a third of
    its training figure 6N + 12LHQT per token: T x (2N + 4 x sum over layers of H x Q x T); the attention
    term not halved for the causal mask (docs/paradnn.md)."""
    return length * palm_token_flops(non_embedding, attention_width, length)


def _transformer(values: Mapping[str, Any]) -> tuple[int, int, int, int]:
    layers, d, heads, length = values["layers"], values["width"], values["heads"], values["length"]
    non_embedding, embedding = transformer_weights(layers, d, values["vocab"], values["mlp_ratio"], length)
    # per block at least: layer norms' outputs, Q, K, V, the context, the projection, the residual sums (8 x Td),
    # the attention probabilities (H x T^2) and the MLP's hidden values (r x Td); the logits (T x vocab)
    block = 8 * length * d + heads * length * length + values["mlp_ratio"] * length * d
    activations = length + length * d + layers * block + length * values["vocab"]
    flops = palm_forward_flops(non_embedding, layers * d, length)
    return non_embedding + embedding, 0, activations, flops


_FAMILIES = {"fc": _fc, "cnn": _cnn, "rnn": _rnn, "transformer": _transformer}


def paradnn_forward_flops(values: Mapping[str, Any]) -> int:
    """Forward FLOPs per sample of a ParaDnn model from its parameters (defaults filled in), counted as
    colabkit.training.flops counts the built model, without building it (Keras-free: the sweep's estimate)."""
    return _FAMILIES[values["family"]](values)[3]


def paradnn_memory(values: Mapping[str, Any], knobs: Mapping[str, tuple[str, ...]]) -> MemoryEstimate:
    """The memory one replica of a ParaDnn model needs to train (`values`: the notebook's parameters,
    defaults filled in; `knobs`: the parameters that shape each family's model, the declaration's
    FAMILY_KNOBS, which name it); its optimizer is ParaDnn's RMSprop with momentum."""
    family = values["family"]
    trainable, frozen, activations, _ = _FAMILIES[family](values)
    named = " ".join(f"{knob}={values[knob]}" for knob in knobs[family])
    dtype = COMPUTE_DTYPES.get(values.get("mixed_precision", "none"), "float32")
    return MemoryEstimate(f"paradnn {family} {named}, batch {values['batch_size']} per replica", trainable, frozen,
                          "RMSprop with momentum", values["batch_size"], activations, dtype_bytes(dtype))


class Estimated(Protocol):
    """An experiment's declaration as the checks read it (colabkit.experiments.Experiment imports this module)."""

    @property
    def defaults(self) -> dict[str, Any]: ...
    @property
    def memory_estimate(self) -> Callable[[Mapping[str, Any]], MemoryEstimate] | None: ...


# --- the checks: the sweep's while planning, the notebook's before it builds its model -------------------

def memory_problem(experiment: Estimated, params: Mapping[str, Any], device_memory_bytes: int, *,
                   where: str = "the device", copies: int = 1) -> str | None:
    """Why `experiment` cannot train with `params` in `device_memory_bytes` (the memory of one GPU or
    TPU core, or of the host, which `copies` model replicas share); None when it may fit or the
    experiment declares no estimate. One line: 'paradnn fc layers=64 ...: training needs about
    3.9 TiB (weights ..., ...) but the CPU host has 24 GiB'."""
    if experiment.memory_estimate is None or device_memory_bytes <= 0:
        return None
    estimate = experiment.memory_estimate({**experiment.defaults, **params})
    needed = estimate.total_bytes * max(1, copies)
    if needed <= FIT_FRACTION * device_memory_bytes:
        return None
    shared = f", x {copies} replicas sharing it" if copies > 1 else ""
    return (f"{estimate.model}: {getattr(estimate, 'activity', 'training')} needs about {human_bytes(needed)} ({estimate.parts()}{shared}) but "
            f"{where} has {human_bytes(device_memory_bytes)}; refused before building it (the estimate is a lower "
            "bound): use a smaller model or batch, or a device with more memory")


def check_fits(experiment: Estimated, params: Mapping[str, Any], memory: DeviceMemory | None) -> None:
    """Raise InsufficientMemoryError (memory_problem's line) when the run clearly cannot fit `memory`;
    nothing when it may, or when the device's memory is unknown."""
    if memory is None:
        return
    problem = memory_problem(experiment, params, memory.bytes, where=memory.where, copies=memory.copies)
    if problem:
        raise InsufficientMemoryError(problem)


# --- greedy decoding with a key-value cache (colabkit.inference.decode): its FLOPs, bytes and memory -------

DECODE_FLOP_CONVENTION = (
    "model FLOPs by PaLM's formula (PALM_CONVENTION's forward, Chowdhery et al. 2022, appendix B): a decoded token "
    "2N + 4 x L x H x Q x K, K the positions it attends to (the prompt, the tokens before it and itself), a step of "
    "batch B B times that; the prefill of a T-token prompt PaLM's forward over T tokens (attention not halved for the "
    "causal mask) but with the output (final layer norm and head, N_out weights) at the last position only: "
    "T x (2(N - N_out) + 4 x L x H x Q x T) + 2 N_out per sequence; the positions a fixed-size cache masks out "
    "are not counted, nor the argmax"
)
DECODE_BYTES_CONVENTION = (
    "bytes a step must move at least: every non-embedding weight read once per step whatever the batch (at its "
    "stored dtype: float32 under mixed precision too), the B token-embedding rows and the position's row; the key-"
    "value cache read over the K positions attended (2 x L x B x K x H x Q values at the cache's dtype, the "
    "attention's compute dtype) and the step's new entry written (K = 1 more position); prefill: the weights and "
    "the prompt's T embedding and position rows read once, the cache's T positions written. Not counted: "
    "activations, the logits, the positions beyond K a fixed-size cache's masked attention also reads (pass the "
    "cache's length as K for those), the tokens' trip to the host"
)


def output_weights(width: int, vocab: int) -> int:
    """N_out: the weights of the Transformer's output, its final layer norm (2d) and untied head d -> vocab (bias
    included)."""
    return 2 * width + width * vocab + vocab


def decode_step_flops(non_embedding: int, attention_width: int, batch: int, keys: int) -> int:
    """Model FLOPs of one decode step of `batch` sequences whose new token attends to `keys` positions
    (DECODE_FLOP_CONVENTION); `attention_width` is L x H x Q, summed over the attention layers."""
    return batch * palm_token_flops(non_embedding, attention_width, keys)


def prefill_flops(non_embedding: int, output: int, attention_width: int, batch: int, prompt_length: int) -> int:
    """Model FLOPs of the prefill of `batch` prompts of `prompt_length` tokens, the output (`output` weights: the
    final norm and head) at the last position only (DECODE_FLOP_CONVENTION)."""
    body = palm_forward_flops(non_embedding - output, attention_width, prompt_length)
    return batch * (body + 2 * output)


def kv_cache_bytes(layers: int, kv_width: int, batch: int, positions: int, value_bytes: int) -> int:
    """Bytes of the keys and values of `layers` attention layers for `batch` sequences over `positions`
    positions, `kv_width` (H x Q) values each: 2 x layers x batch x positions x kv_width x value_bytes."""
    return 2 * layers * batch * positions * kv_width * value_bytes


def decode_step_bytes(non_embedding: int, layers: int, width: int, batch: int, keys: int, weight_bytes: int,
                      cache_bytes: int) -> int:
    """Bytes one decode step of `batch` sequences must move, its tokens attending to `keys` positions
    (DECODE_BYTES_CONVENTION); `width` the model's (ParaDnn's H x Q too: its heads divide it), weights at
    `weight_bytes` a value, the cache at `cache_bytes`."""
    weights = (non_embedding + batch * width + width) * weight_bytes  # N, B token rows, one position row
    return weights + kv_cache_bytes(layers, width, batch, keys + 1, cache_bytes)  # K read, 1 written


def prefill_bytes(non_embedding: int, layers: int, width: int, batch: int, prompt_length: int, weight_bytes: int,
                  cache_bytes: int) -> int:
    """Bytes the prefill of `batch` prompts of `prompt_length` tokens must move (DECODE_BYTES_CONVENTION)."""
    weights = (non_embedding + (batch + 1) * prompt_length * width) * weight_bytes  # N, B x T token rows, T positions
    return weights + kv_cache_bytes(layers, width, batch, prompt_length, cache_bytes)


@dataclass(frozen=True)
class DecodeMemoryEstimate:
    """The memory greedy decoding with a key-value cache needs on one device, a lower bound: the weights as
    stored, the cache for batch x max_length positions, and the prefill's working set (the residual stream and
    the MLP's hidden values of the batch's prompts, the last position's float32 logits). Framework workspace,
    the attention scores (a fused kernel may never hold them) and fragmentation are not counted."""

    model: str  # for a message: 'paradnn transformer layers=12 width=768 ... decoding batch 64 x 2176 positions'
    weights: int  # every weight, the embeddings included
    weight_bytes: int  # per weight, as stored (float32 under mixed precision)
    cache_bytes: int
    working_bytes: int
    batch: int
    max_length: int
    activity = "decoding"  # what memory_problem's line says needs the memory

    @property
    def weights_bytes(self) -> int:
        return self.weights * self.weight_bytes

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.cache_bytes + self.working_bytes

    def parts(self) -> str:
        """'weights 340 MiB, key-value cache 9.56 GiB (batch 64 x 2176 positions), prefill working set 1.2 GiB'."""
        return (f"weights {human_bytes(self.weights_bytes)}, key-value cache {human_bytes(self.cache_bytes)} (batch "
                f"{self.batch} x {self.max_length} positions), prefill working set {human_bytes(self.working_bytes)}")


def decode_memory(name: str, layers: int, width: int, vocab: int, mlp_ratio: int, positions: int, *, batch: int,
                  max_length: int, prompt_length: int, compute_dtype: str = "float32") -> DecodeMemoryEstimate:
    """The memory of decoding `batch` sequences of up to `max_length` tokens (prompts of `prompt_length`) with
    ParaDnn's Transformer (`positions`: its position table's length); the cache and the working set at the
    `compute_dtype`'s bytes, the weights at VARIABLE_BYTES (DecodeMemoryEstimate says what is counted)."""
    non_embedding, embedding = transformer_weights(layers, width, vocab, mlp_ratio, positions)
    value_bytes = dtype_bytes(compute_dtype)
    working = batch * prompt_length * (1 + mlp_ratio) * width * value_bytes + batch * vocab * 4
    return DecodeMemoryEstimate(f"{name}, decoding batch {batch} x {max_length} positions",
                                non_embedding + embedding, VARIABLE_BYTES,
                                kv_cache_bytes(layers, width, batch, max_length, value_bytes), working, batch,
                                max_length)


def paradnn_decode_memory(values: Mapping[str, Any], *, batch: int, max_length: int,
                          prompt_length: int) -> DecodeMemoryEstimate:
    """decode_memory for the ParaDnn Transformer the notebook's `values` (defaults filled in) describe."""
    named = " ".join(f"{knob}={values[knob]}" for knob in ("layers", "width", "heads", "length", "vocab", "mlp_ratio"))
    return decode_memory(f"paradnn transformer {named}", values["layers"], values["width"], values["vocab"],
                         values["mlp_ratio"], values["length"], batch=batch, max_length=max_length,
                         prompt_length=prompt_length,
                         compute_dtype=COMPUTE_DTYPES.get(values.get("mixed_precision", "none"), "float32"))


def largest_decode_batch(estimate_at: Callable[[int], DecodeMemoryEstimate], memory_bytes: int, fraction: float,
                         cap: int) -> int:
    """The largest power-of-two batch, at most `cap`, whose estimate (`estimate_at(batch)`) stays within `fraction`
    of `memory_bytes`; 0 when not even batch 1 does."""
    batch = 1
    if estimate_at(1).total_bytes > fraction * memory_bytes:
        return 0
    while 2 * batch <= cap and estimate_at(2 * batch).total_bytes <= fraction * memory_bytes:
        batch *= 2
    return batch


def decode_memory_problem(estimate: DecodeMemoryEstimate, device_memory_bytes: int, *,
                          where: str = "the device") -> str | None:
    """Why `estimate` cannot decode in `device_memory_bytes`, in one line; None when it may fit, or when the memory is
    unknown."""
    if device_memory_bytes <= 0 or estimate.total_bytes <= FIT_FRACTION * device_memory_bytes:
        return None
    return (f"{estimate.model}: decoding needs about {human_bytes(estimate.total_bytes)} ({estimate.parts()}) but "
            f"{where} has {human_bytes(device_memory_bytes)}; refused before building it (the estimate is a lower "
            "bound): use a smaller batch, a shorter prompt or output, or a device with more memory")


def check_decode_fits(estimate: DecodeMemoryEstimate, memory: DeviceMemory | None) -> None:
    """Raise InsufficientMemoryError (decode_memory_problem's line) when decoding clearly cannot fit `memory`;
    nothing when it may, or when the device's memory is unknown."""
    problem = None if memory is None else decode_memory_problem(estimate, memory.bytes // max(memory.copies, 1),
                                                                where=memory.where)
    if problem:
        raise InsufficientMemoryError(problem)
