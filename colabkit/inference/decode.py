"""Greedy generation with a key-value cache for ParaDnn's decoder-only Transformer (notebooks/paradnn.ipynb's
`build_transformer`), on the weights of the Keras model the notebook built, trained or not (docs/decode.md).

`read_decoder` finds the model's layers and `GreedyDecoder` runs them: a prefill passes the prompt once, filling
each layer's cache of keys and values, its last position's logits giving the first token; then each step feeds the
newest token at the next position. Every layer is the model's own Keras layer (the attention's projections are its
MultiHeadAttention's EinsumDense sublayers); only the attention is written here: the prefill's over the prompt with
keras.ops.dot_product_attention as the model's layer calls it, the step's over the cache by hand. One
implementation, compiled per backend: jax.jit, compiled ahead of the first call (the weights passed in through
keras.StatelessScope, not baked in as constants; the cache donated, updated in place; `compiled_step` gives that
executable's HLO and XLA's cost analysis) or tf.function(jit_compile=True) (the cache in tf.Variables, assigned in
place under XLA). PyTorch is refused: Keras's slice_update on torch copies the whole cache every step.

Shapes never change per token: per layer a cache of keys and one of values, [batch x heads, max_length, head_size]
(colabkit.inference.cache_layout: the layout XLA reads in place, and why), the position an int32 scalar kept on the
device, the attention over the whole cache masked beyond it: one compiled step, whose work does not grow as the cache
fills (docs/decode.md says why not a window that grows). Every timed call ends with its tokens on the host
(np.asarray): the device has finished the step, cache update included, before the clock stops.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import keras
import numpy as np

from colabkit.errors import BackendUnsupportedError, DecodeModelError, ParameterError
from colabkit.inference.scenarios import DECODE_BACKENDS
from colabkit.inference.cache_layout import attend_to_cache, cache_shape, to_cache_layout
from colabkit.inference.compiled import CompiledProgram, jax_program, tensorflow_program
from colabkit.training.memory import (
    DecodeMemoryEstimate,
    check_decode_fits,
    decode_memory,
    decode_step_bytes,
    decode_step_flops,
    output_weights,
    prefill_bytes,
    prefill_flops,
)
from colabkit.training.roofline import dtype_bytes

if TYPE_CHECKING:
    from colabkit.device.memory import DeviceMemory

# A backend's compiled programs: the prefill's call, the step's call, and the step as XLA compiled it
_Programs = tuple[Callable[..., Any], Callable[..., Any], Callable[[], CompiledProgram]]
# A block's layers in model.layers' order, as build_transformer applies them.
_BLOCK = ("LayerNormalization", "MultiHeadAttention", "Add", "LayerNormalization", "Dense", "Dense", "Add")


@dataclass(frozen=True)
class DecoderBlock:
    """One pre-norm block's layers: x + attention(norm(x)), then x + mlp_out(mlp_in(norm(x)))."""

    attention_norm: Any
    attention: Any  # keras.layers.MultiHeadAttention
    mlp_norm: Any
    mlp_in: Any  # Dense(mlp_ratio x width, gelu)
    mlp_out: Any  # Dense(width)


@dataclass(frozen=True)
class DecoderLayers:
    """ParaDnn's Transformer as the decode reads it: its layers, in the order the model applies them."""

    embedding: Any
    positions: Any | None  # the learned position table, a (positions, width) variable; None: the model has none
    blocks: tuple[DecoderBlock, ...]
    final_norm: Any
    head: Any

    @property
    def width(self) -> int:
        return int(self.embedding.output_dim)

    @property
    def heads(self) -> int:
        return int(self.blocks[0].attention.num_heads)

    @property
    def head_size(self) -> int:
        return int(self.blocks[0].attention.key_dim)

    @property
    def vocab(self) -> int:
        return int(self.head.units)

    @property
    def max_positions(self) -> int | None:
        return None if self.positions is None else int(self.positions.shape[0])

    @property
    def cache_dtype(self) -> str:
        """The attention's compute dtype (float16 or bfloat16 under mixed precision): what its keys are."""
        return str(self.blocks[0].attention.key_dense.compute_dtype)


def read_decoder(model: Any) -> DecoderLayers:
    """The layers of `model`, a built ParaDnn Transformer; DecodeModelError (one line naming what is out of place)
    for any other model: an attention layer with dropout, a gate, a sliding window, other attention axes or an
    output shape of its own, key and value sizes that differ, blocks of different attention shapes."""
    layers = [layer for layer in getattr(model, "layers", []) if type(layer).__name__ != "InputLayer"]
    names = [type(layer).__name__ for layer in layers]

    def refuse(why: str) -> DecodeModelError:
        return DecodeModelError(f"model {getattr(model, 'name', model)!r} is not ParaDnn's decoder-only Transformer "
                                f"as notebooks/paradnn.ipynb builds it: {why}")

    if not names or names[0] != "Embedding":
        raise refuse(f"its first layer is {names[0] if names else 'missing'}, expected an Embedding")
    width, index, positions = int(layers[0].output_dim), 1, None
    if index < len(layers) and names[index] != "LayerNormalization":  # the learned position table
        weights = layers[index].weights
        if len(weights) != 1 or len(weights[0].shape) != 2 or int(weights[0].shape[1]) != width:
            raise refuse(f"layer {layers[index].name!r} ({names[index]}) after the embedding is not a position table "
                         f"(one (positions, {width}) weight)")
        positions, index = weights[0], index + 1
    blocks = []
    while names[index:index + len(_BLOCK)] == list(_BLOCK):
        norm, attention, _, mlp_norm, mlp_in, mlp_out, _ = layers[index:index + len(_BLOCK)]
        config = attention.get_config()
        odd = {key: config.get(key) for key in ("dropout", "use_gate", "sliding_window", "output_shape")
               if config.get(key) not in (None, 0, 0.0, False)}
        if config.get("attention_axes") not in (None, (1,), [1]):  # built: (1,), the sequence axis
            odd["attention_axes"] = config["attention_axes"]
        if config.get("value_dim") not in (None, config["key_dim"]):
            odd["value_dim"] = config["value_dim"]
        if blocks and (config["num_heads"], config["key_dim"]) != (blocks[0].attention.num_heads,
                                                                   blocks[0].attention.key_dim):
            odd["num_heads, key_dim"] = (config["num_heads"], config["key_dim"])
        if odd:
            raise refuse(f"attention layer {attention.name!r} has {odd}")
        blocks.append(DecoderBlock(norm, attention, mlp_norm, mlp_in, mlp_out))
        index += len(_BLOCK)
    if not blocks or names[index:] != ["LayerNormalization", "Dense"]:
        raise refuse(f"after {len(blocks)} blocks found {names[index:index + 4]}, expected LayerNormalization, Dense "
                     f"(or a block: {', '.join(_BLOCK)})")
    return DecoderLayers(layers[0], positions, tuple(blocks), layers[index], layers[index + 1])


def decoder_memory(model: Any, *, batch: int, prompt_length: int, max_length: int) -> DecodeMemoryEstimate:
    """The memory estimate (colabkit.training.memory.decode_memory) of decoding `batch` sequences of up to
    `max_length` tokens with `model`, a built ParaDnn Transformer (read_decoder's refusals)."""
    d = read_decoder(model)
    return decode_memory(model.name, len(d.blocks), d.width, d.vocab, int(d.blocks[0].mlp_in.units) // d.width,
                         d.max_positions or 0, batch=batch, max_length=max_length, prompt_length=prompt_length,
                         compute_dtype=d.cache_dtype)


def _embed(decoder: DecoderLayers, tokens: Any, start: Any) -> Any:
    """Token embeddings of `tokens` [B, T] plus the position table's rows start .. start + T - 1, cast as the
    notebook's PositionEmbedding casts them."""
    x = decoder.embedding(tokens)
    if decoder.positions is None:
        return x
    # A gather, not a slice: TensorFlow's XLA bridge takes a slice's start as a compile-time constant (a program per
    # position); a gather's indices are data.
    rows = keras.ops.take(decoder.positions.value, keras.ops.arange(tokens.shape[1]) + start, axis=0)
    return keras.ops.add(x, keras.ops.cast(rows, x.dtype))


def _blocks(decoder: DecoderLayers, x: Any, attend: Callable[[int, Any, Any], Any]) -> Any:
    """The residual stream after every block, `attend(index, attention layer, normed input)` giving each block's
    attention output; then the final norm and the head on the last position: float32 logits [B, vocab]."""
    for index, block in enumerate(decoder.blocks):
        x = keras.ops.add(x, attend(index, block.attention, block.attention_norm(x)))
        x = keras.ops.add(x, block.mlp_out(block.mlp_in(block.mlp_norm(x))))
    return decoder.head(decoder.final_norm(x[:, -1:, :]))[:, 0, :]


def _prefill(decoder: DecoderLayers, cache: list[Any], tokens: Any) -> tuple[Any, Any, list[Any], Any]:
    """The prompt `tokens` [B, T] through the model, causal attention over the prompt as the model's layer runs
    it; its keys and values written at positions 0 .. T - 1. (first tokens [B], logits, cache, position T)."""
    new = list(cache)

    def attend(index: int, attention: Any, h: Any) -> Any:
        query, key, value = attention.query_dense(h), attention.key_dense(h), attention.value_dense(h)
        rank = len(cache[2 * index].shape)
        new[2 * index] = keras.ops.slice_update(cache[2 * index], (0,) * rank, to_cache_layout(key, rank))
        new[2 * index + 1] = keras.ops.slice_update(cache[2 * index + 1], (0,) * rank, to_cache_layout(value, rank))
        context = keras.ops.dot_product_attention(query, key, value, scale=1 / math.sqrt(attention.key_dim),
                                                  is_causal=True)
        return attention.output_dense(context)

    logits = _blocks(decoder, _embed(decoder, tokens, 0), attend)
    return _argmax(logits), logits, new, keras.ops.convert_to_tensor(tokens.shape[1], "int32")


def _step(decoder: DecoderLayers, cache: list[Any], tokens: Any, position: Any) -> tuple[Any, Any, list[Any], Any]:
    """`tokens` [B] at `position`: their keys and values written there, attention over the whole cache, the
    positions beyond `position` masked. (next tokens [B], logits, cache, position + 1)."""
    new, length, rank = list(cache), cache[0].shape[-2], len(cache[0].shape)
    keep = keras.ops.arange(length) <= position
    at = (0,) * (rank - 2) + (position, 0)  # the row of every sequence and head at `position`

    def attend(index: int, attention: Any, h: Any) -> Any:
        query, key, value = attention.query_dense(h), attention.key_dense(h), attention.value_dense(h)
        keys = new[2 * index] = keras.ops.slice_update(cache[2 * index], at, to_cache_layout(key, rank))
        values = new[2 * index + 1] = keras.ops.slice_update(cache[2 * index + 1], at, to_cache_layout(value, rank))
        context = attend_to_cache(query, keys, values, keep, 1 / math.sqrt(attention.key_dim))
        return attention.output_dense(context)

    logits = _blocks(decoder, _embed(decoder, keras.ops.expand_dims(tokens, 1), position), attend)
    return _argmax(logits), logits, new, position + 1


def _argmax(logits: Any) -> Any:
    return keras.ops.cast(keras.ops.argmax(logits, axis=-1), "int32")


@dataclass(frozen=True)
class Generation:
    """What one greedy generation gave and took: `tokens` [batch, new_tokens] (int32) in order; `prefill_s` from the
    prompt handed over (host array) to the first tokens on the host (the prefill and its argmax: the time to first
    token); `step_s[i]` from the call of step i to its tokens, token i + 1, on the host; `total_s` from the prompt
    handed over to the last tokens on the host (the Python between the steps included, and the logits' fetch when
    kept: time with keep_logits=False); `logits` [batch, new_tokens, vocab] (float32) when kept, fetched after each
    clock stopped; `step_keys[i]` the positions step i's tokens attended to (prompt_length + i + 1: its FLOPs and
    must-read bytes; the step's attention reads the whole cache, max_length positions, all the same)."""

    tokens: np.ndarray
    prefill_s: float
    step_s: tuple[float, ...]
    total_s: float
    logits: np.ndarray | None
    step_keys: tuple[int, ...]


class GreedyDecoder:
    """Greedy generation from a built ParaDnn Transformer (module docstring): `batch` prompts of `prompt_length`
    tokens, up to `max_length` tokens in all (prompt and output), on the current Keras backend.

    Refused before the cache is built, one line each: lengths that do not fit the model's position table
    (ParameterError), a model that is not the notebook's Transformer (DecodeModelError), PyTorch
    (BackendUnsupportedError), a cache and weights that clearly do not fit `memory` (InsufficientMemoryError,
    colabkit.training.memory.decode_memory's estimate, kept as `estimate`)."""

    def __init__(self, model: Any, *, batch: int, prompt_length: int, max_length: int,
                 memory: DeviceMemory | None = None) -> None:
        self.model, self.batch, self.prompt_length, self.max_length = model, batch, prompt_length, max_length
        d = self.decoder = read_decoder(model)
        limit = d.max_positions
        if batch < 1 or prompt_length < 1 or max_length <= prompt_length or (limit and max_length > limit):
            raise ParameterError(f"decode batch {batch}, prompt {prompt_length}, max_length {max_length}: expected "
                                 "batch >= 1 and 1 <= prompt < max_length" + (f" <= the model's {limit} positions"
                                                                               if limit else ""))
        self.backend = keras.backend.backend()
        if self.backend not in DECODE_BACKENDS:
            raise BackendUnsupportedError(f"decode on Keras's {self.backend} backend: not built (its slice_update "
                                          "copies the whole cache every step); use jax or tensorflow")
        self.estimate: DecodeMemoryEstimate = decoder_memory(model, batch=batch, prompt_length=prompt_length,
                                                             max_length=max_length)
        check_decode_fits(self.estimate, memory)
        tables = {id(d.embedding.embeddings), id(d.positions)}  # lookups: no FLOPs, outside N
        self.non_embedding = int(sum(math.prod(w.shape) for w in model.trainable_weights if id(w) not in tables))
        self.output_weights = output_weights(d.width, d.vocab)  # the final norm and the head: N_out
        self.attention_width = len(d.blocks) * d.heads * d.head_size  # L x H x Q
        self.weight_bytes = dtype_bytes(str(model.dtype_policy.variable_dtype))
        self.cache_bytes = dtype_bytes(d.cache_dtype)
        self._variables = list(model.variables)
        self.cache_shape = cache_shape(batch, d.heads, max_length, d.head_size, self.backend)
        compile_backend = self._compile_jax if self.backend == "jax" else self._compile_tensorflow
        self._prefill_call, self._step_call, self._step_program = compile_backend(self.cache_shape)

    def _compile_jax(self, shape: tuple[int, ...]) -> _Programs:
        import jax

        variables, decoder = self._variables, self.decoder

        def stateless(run: Callable[..., Any]) -> Callable[..., Any]:
            def call(values: list[Any], cache: list[Any], *args: Any) -> Any:
                with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                    return run(decoder, cache, *args)
            return call

        self._cache = [jax.numpy.zeros(shape, self.decoder.cache_dtype) for _ in range(2 * len(decoder.blocks))]
        spec = jax.ShapeDtypeStruct
        arguments = {_prefill: (spec((self.batch, self.prompt_length), "int32"),),
                     _step: (spec((self.batch,), "int32"), spec((), "int32"))}
        programs: dict[Callable[..., Any], Any] = {}

        def program(run: Callable[..., Any]) -> Any:
            # Compiled ahead of its first call, and that executable called: compiled_step's is the one the steps run.
            if run not in programs:
                programs[run] = jax.jit(stateless(run), donate_argnums=(1,)).lower(
                    [spec(v.value.shape, v.value.dtype) for v in variables], self._cache, *arguments[run]).compile()
            return programs[run]

        values: list[Any] = []  # the weights as the prefill found them (the model's current ones), for its steps

        def call(run: Callable[..., Any], *args: Any) -> tuple[Any, Any, Any]:
            tokens, logits, self._cache, position = program(run)(values, self._cache, *args)
            return tokens, logits, position

        def start(tokens: Any) -> tuple[Any, Any, Any]:
            values[:] = [v.value for v in variables]
            return call(_prefill, jax.numpy.asarray(tokens))

        return start, lambda tokens, position: call(_step, tokens, position), lambda: jax_program(program(_step))

    def _compile_tensorflow(self, shape: tuple[int, ...]) -> _Programs:
        import tensorflow as tf

        decoder = self.decoder
        cache = self._cache = [tf.Variable(tf.zeros(shape, decoder.cache_dtype), trainable=False)
                               for _ in range(2 * len(decoder.blocks))]
        functions: dict[Callable[..., Any], Any] = {}

        def assigning(run: Callable[..., Any]) -> Callable[..., Any]:
            def body(*args: Any) -> tuple[Any, Any, Any]:
                tokens, logits, new, position = run(decoder, [v.read_value() for v in cache], *args)
                for variable, value in zip(cache, new):
                    variable.assign(value)  # in place under XLA: no copy of the cache per step (docs/decode.md)
                return tokens, logits, position

            function, traced = tf.function(body, jit_compile=True, autograph=False), []
            functions[run] = function

            def call(*args: Any) -> Any:
                # Traced once, on the first call, as a concrete function: tf.function's own call would count the
                # traces of every decoder's `body` (one code object) and warn of retracing after five.
                if not traced:
                    traced.append(function.get_concrete_function(*args))
                return traced[0](*args)
            return call

        prefill = assigning(_prefill)
        return (lambda tokens: prefill(tf.convert_to_tensor(tokens, tf.int32)), assigning(_step),
                lambda: tensorflow_program(functions[_step], tf.zeros((self.batch,), tf.int32),  # a step's arguments
                                           tf.constant(self.prompt_length, tf.int32)))

    def compiled_step(self) -> CompiledProgram:
        """The step as XLA compiled it: its optimized HLO and, on JAX, XLA's cost analysis of the executable the steps
        run (bytes accessed, FLOPs: CompiledProgram); on TensorFlow the same function compiled again for its HLO, no
        cost analysis. Compiles the step if no call has yet. Its whole-cache copies: `.whole_copies(cache_shape)`."""
        return self._step_program()

    def allocated_cache_bytes(self) -> int:
        """The bytes the cache's arrays hold on the device (what the estimate's cache_bytes counts)."""
        return sum(math.prod(c.shape) * dtype_bytes(keras.backend.standardize_dtype(c.dtype)) for c in self._cache)

    def compile(self, clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
        """Compile the prefill and the step on a prompt of zeros, each first call timed (seconds, tokens on the host):
        {'prefill_first_call_s', 'step_first_call_s'}. Later calls reuse the programs."""
        prompt = np.zeros((self.batch, self.prompt_length), np.int32)
        start = clock()
        tokens, _, position = self._prefill_call(prompt)
        np.asarray(tokens)
        prefill_s, start = clock() - start, clock()
        np.asarray(self._step_call(tokens, position)[0])
        return {"prefill_first_call_s": prefill_s, "step_first_call_s": clock() - start}

    def generate(self, prompt: Any, new_tokens: int, *, keep_logits: bool = False,
                 clock: Callable[[], float] = time.perf_counter) -> Generation:
        """`new_tokens` greedy tokens after each of the batch's prompts ([batch, prompt_length] token ids), timed per
        token (Generation). The first call of each program compiles it: call `compile` first to keep that apart."""
        prompt = np.asarray(prompt, np.int32)
        room = self.max_length - self.prompt_length
        if prompt.shape != (self.batch, self.prompt_length) or not 1 <= new_tokens <= room:
            raise ParameterError(f"prompt of shape {prompt.shape} and {new_tokens} new tokens: expected ({self.batch}, "
                                 f"{self.prompt_length}) and 1 .. {room} new tokens")
        if prompt.min() < 0 or prompt.max() >= self.decoder.vocab:
            raise ParameterError(f"prompt token ids must lie in 0 .. {self.decoder.vocab - 1}")
        keys = [self.prompt_length + index for index in range(1, new_tokens)]  # the prompt and the tokens so far
        began = clock()
        tokens, logits, position = self._prefill_call(prompt)
        found, times, kept = [np.asarray(tokens)], [], []
        prefill_s = (stop := clock()) - began
        kept += [np.asarray(logits)] if keep_logits else []
        for _ in keys:
            start = clock()
            tokens, logits, position = self._step_call(tokens, position)
            found.append(np.asarray(tokens))
            times.append((stop := clock()) - start)
            kept += [np.asarray(logits)] if keep_logits else []
        return Generation(np.stack(found, axis=1), prefill_s, tuple(times), stop - began,
                          np.stack(kept, axis=1) if keep_logits else None, tuple(keys))

    # --- the work each call does, as colabkit.training.memory counts it (DECODE_FLOP_CONVENTION and
    # DECODE_BYTES_CONVENTION); `keys`: the positions a step's tokens attend to (Generation.step_keys), or
    # max_length for what a step over the whole fixed-size cache reads

    def step_flops(self, keys: int) -> int:
        """Model FLOPs of one step of the batch, its tokens attending to `keys` positions."""
        return decode_step_flops(self.non_embedding, self.attention_width, self.batch, keys)

    def prefill_flops(self) -> int:
        """Model FLOPs of the batch's prefill, the output at the last position only."""
        return prefill_flops(self.non_embedding, self.output_weights, self.attention_width, self.batch,
                             self.prompt_length)

    def step_bytes(self, keys: int) -> int:
        """Bytes one step of the batch must move, its tokens attending to `keys` positions."""
        return decode_step_bytes(self.non_embedding, len(self.decoder.blocks), self.decoder.width, self.batch, keys,
                                 self.weight_bytes, self.cache_bytes)

    def prefill_bytes(self) -> int:
        """Bytes the batch's prefill must move."""
        return prefill_bytes(self.non_embedding, len(self.decoder.blocks), self.decoder.width, self.batch,
                             self.prompt_length, self.weight_bytes, self.cache_bytes)
