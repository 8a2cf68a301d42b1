"""Greedy decode with a key-value cache (colabkit.inference.decode) on the Transformer notebooks/paradnn.ipynb builds:
its logits equal the model's own full forward pass over the same tokens on JAX and on TensorFlow (each in a process
of its own), its tokens are that pass's argmax; its compiled step copies no cache and, on JAX, accesses about the
bytes the model must read (XLA's cost analysis); what it refuses before building; the FLOPs, bytes and memory it is
accounted with (colabkit.training.memory)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest
from helpers import REPO, notebook_builders

from colabkit.device.memory import DeviceMemory
from colabkit.errors import BackendUnsupportedError, DecodeModelError, InsufficientMemoryError, ParameterError
from colabkit.inference import decode
from colabkit.inference.decode import GreedyDecoder, read_decoder
from colabkit.training.flops import model_flops
from colabkit.training.memory import (
    FIT_FRACTION,
    decode_memory,
    decode_memory_problem,
    decode_step_bytes,
    decode_step_flops,
    kv_cache_bytes,
    largest_decode_batch,
    output_weights,
    palm_forward_flops,
    paradnn_decode_memory,
    prefill_bytes,
    prefill_flops,
    transformer_weights,
)

GIB = 2**30
# layers, width, heads, length (the position table), vocab, mlp_ratio: build_transformer's arguments
TINY = (2, 64, 4, 48, 97, 4)

# Runs in a fresh process per backend: the decode of the notebook's Transformer against its full pass.
AGAINST_THE_FULL_PASS = """
import json, sys
import keras, numpy as np
from helpers import notebook_builders
from colabkit.inference import decode
from colabkit.inference.decode import GreedyDecoder
from colabkit.inference.decode_check import check_against_full_pass

build = notebook_builders()["build_transformer"]
keras.utils.set_random_seed(7)
model = build(*TINY)
prompt = np.random.default_rng(7).integers(0, 97, (3, 20)).astype("int32")
other = np.random.default_rng(8).integers(0, 97, (3, 20)).astype("int32")
result = {}

def checked(model, decoder, prompt, new_tokens, **kwargs):
    generation = decoder.generate(prompt, new_tokens, keep_logits=True)
    check = check_against_full_pass(model, prompt, generation, **kwargs)
    return generation, {"difference": check.max_abs_difference, "tolerance": check.tolerance, "passed": check.passed,
                        "agree": check.tokens_agree, "ties": check.ties, "positions": check.positions,
                        "tokens": generation.tokens.tolist(), "keys": generation.step_keys,
                        "steps": len(generation.step_s)}

decoder = GreedyDecoder(model, batch=3, prompt_length=20, max_length=48)
decoder.compile()
_, found = checked(model, decoder, prompt, 28)
decoder.generate(other, 28)  # another prompt through the same programs and cache, then the first again
found.update(again=decoder.generate(prompt, 28).tokens.tolist(), cache=decoder.allocated_cache_bytes(),
             estimate=decoder.estimate.cache_bytes)
program = decoder.compiled_step()
found.update(copies=program.whole_copies(decoder.cache_shape), compiler_bytes=program.bytes_accessed,
             cache_shape=list(decoder.cache_shape), backend=keras.backend.backend())
result["float32"] = found

# batch 1, and a one-head model at batch 1: unit axes, where XLA copied a [B, N, T, H] cache every step. Their caches
# hold 44 positions, not the position table's 48: a cache of [48, width] elements would be as large as the table, and
# whole_copies, which goes by size, would count a copy of the table (XLA's CPU fusions differ from CPU to CPU)
one = GreedyDecoder(model, batch=1, prompt_length=20, max_length=44)
_, result["batch 1"] = checked(model, one, prompt[:1], 24)
result["batch 1"].update(copies=one.compiled_step().whole_copies(one.cache_shape),
                         cache_shape=list(one.cache_shape))
keras.utils.set_random_seed(7)
single = build(2, 16, 1, 48, 97, 4)
alone = GreedyDecoder(single, batch=1, prompt_length=20, max_length=44)
_, result["one head"] = checked(single, alone, prompt[:1], 24)
result["one head"].update(copies=alone.compiled_step().whole_copies(alone.cache_shape),
                          cache_shape=list(alone.cache_shape))

# decode_smoke's largest step (2 blocks of width 256, batch 16, prompt 512 + 32 tokens): compiled, not run
keras.utils.set_random_seed(7)
smoke = GreedyDecoder(build(2, 256, 4, 544, 256, 4), batch=16, prompt_length=512, max_length=544)
program = smoke.compiled_step()
result["smoke"] = {"copies": program.whole_copies(smoke.cache_shape), "compiler_bytes": program.bytes_accessed,
                   "model_bytes": smoke.step_bytes(544), "compiler_flops": program.flops,
                   "model_flops": smoke.step_flops(544)}

# a fault the check must catch: every position read one row further down the position table
original = decode._embed
decode._embed = lambda layers, tokens, start: original(layers, tokens, start + 1)
_, result["shifted"] = checked(model, GreedyDecoder(model, batch=3, prompt_length=20, max_length=40), prompt, 20)
decode._embed = original

keras.mixed_precision.set_global_policy("mixed_bfloat16")  # the cache in the attention's compute dtype
keras.utils.set_random_seed(7)
half = build(*TINY)
decoder = GreedyDecoder(half, batch=3, prompt_length=20, max_length=48)
_, result["bfloat16"] = checked(half, decoder, prompt, 28)
result["bfloat16"].update(cache=decoder.allocated_cache_bytes(), estimate=decoder.estimate.cache_bytes,
                          dtype=decoder.decoder.cache_dtype)
from importlib.metadata import version
result["jax"] = version("jax")
print("RESULT " + json.dumps(result))
"""


@pytest.fixture(scope="module", params=["jax", "tensorflow"])
def against_the_full_pass(request) -> dict:
    """The script's findings on one backend."""
    env = {**os.environ, "KERAS_BACKEND": request.param, "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    script = AGAINST_THE_FULL_PASS.replace("TINY", repr(TINY))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.mark.long("its module fixture: one process per backend imports Keras, builds and compiles the decoder")
def test_cached_logits_equal_the_full_pass_and_the_tokens_are_its_argmax(against_the_full_pass):
    found = against_the_full_pass["float32"]
    assert found["positions"] == 28 and found["steps"] == 27  # the prefill's token, then 27 steps
    assert found["keys"] == list(range(21, 48))  # step i attends to the prompt and i + 1 tokens
    assert found["difference"] <= found["tolerance"] < 1e-4, found  # float32: 256 unit roundoffs x logit scale
    assert found["agree"] and found["ties"] == 0  # each token the full pass's argmax, none a rounding tie
    assert found["passed"]
    assert found["again"] == found["tokens"]  # a used cache leaves no trace in the next generation
    assert found["cache"] == found["estimate"] == 2 * 2 * 3 * 48 * 64 * 4  # the estimate counts what is allocated


def test_the_compiled_step_reads_its_cache_in_place_without_a_copy(against_the_full_pass):
    # [B x N, T, H] per layer's keys and values ([T, H] on JAX where B x N is 1); no instruction of the optimized HLO
    # transposes or copies a whole cache (the [B, T, N, H] layout had 8 here: 2 layers' keys and values, transposed
    # then copied; [B, N, T, H] had 8 at batch 1; on TensorFlow [T, H] had 8, on JAX 0.10 [1, T, H])
    assert against_the_full_pass["float32"]["cache_shape"] == [3 * 4, 48, 16]
    assert against_the_full_pass["batch 1"]["cache_shape"] == [4, 44, 16]
    jax = against_the_full_pass["float32"]["backend"] == "jax"
    assert against_the_full_pass["one head"]["cache_shape"] == ([44, 16] if jax else [1, 44, 16])
    for case in ("float32", "batch 1", "smoke"):
        assert against_the_full_pass[case]["copies"] == [], case
    one_head = against_the_full_pass["one head"]["copies"]
    if jax and tuple(int(part) for part in against_the_full_pass["jax"].split(".")[:2]) < (0, 10):
        # Colab's JAX 0.7.2 copies a one-head [T, H] cache at batch 1 each step (2 layers' keys and values, each
        # copied, then the copy copied: docs/decode.md); what a record counts in compiler_cache_copies is such a
        # copy, nothing else
        assert len(one_head) == 8 and all(re.search(r" copy\(%(cache_|copy)", line) for line in one_head), one_head
    else:
        assert one_head == []
    for case in ("batch 1", "one head"):  # each layout decodes as the model's full pass
        assert against_the_full_pass[case]["passed"], against_the_full_pass[case]


def test_on_jax_the_compiled_step_accesses_about_the_bytes_the_model_must_read(against_the_full_pass):
    smoke = against_the_full_pass["smoke"]
    if against_the_full_pass["float32"]["backend"] == "tensorflow":  # TensorFlow exposes no cost analysis
        assert smoke["compiler_bytes"] is None and against_the_full_pass["float32"]["compiler_bytes"] is None
        return
    # decode_smoke's batch 16 x 544 positions: XLA's count within 1.25x of the 42.3 MB the model must read (a copy of
    # every cache, as the [B, T, N, H] layout made, was 2.8x); its FLOPs about the model's (the masked positions too)
    assert smoke["model_bytes"] == 42_317_824
    assert smoke["model_bytes"] <= smoke["compiler_bytes"] <= 1.25 * smoke["model_bytes"], smoke
    assert 0.9 <= smoke["compiler_flops"] / smoke["model_flops"] <= 1.25, smoke


def test_the_check_catches_a_position_off_by_one(against_the_full_pass):
    shifted = against_the_full_pass["shifted"]
    assert not shifted["passed"] and shifted["difference"] > 1e-2 > shifted["tolerance"]


def test_under_mixed_bfloat16_the_cache_is_half_the_size_and_the_check_holds_to_its_tolerance(against_the_full_pass):
    half = against_the_full_pass["bfloat16"]
    assert half["dtype"] == "bfloat16" and half["cache"] == half["estimate"] == 2 * 2 * 3 * 48 * 64 * 2
    assert half["passed"], half  # 16 unit roundoffs of bfloat16 (6 %) of the logits' scale; ties allowed
    assert half["difference"] > 1e-4  # the check really ran at half precision


# --- what the decoder reads and refuses (the pytest process's backend) -------------------------------------------

def tiny_model(**changes):
    arguments = dict(zip(("layers", "width", "heads", "length", "vocab", "mlp_ratio"), TINY)) | changes
    keras.utils.set_random_seed(3)
    return notebook_builders()["build_transformer"](*arguments.values())


def test_the_decoder_reads_the_notebooks_layers_and_counts_their_weights_as_training_does():
    model = tiny_model()
    layers = read_decoder(model)
    assert (len(layers.blocks), layers.width, layers.heads, layers.head_size, layers.vocab) == (2, 64, 4, 16, 97)
    assert layers.max_positions == 48 and layers.cache_dtype == "float32"
    decoder = GreedyDecoder(model, batch=2, prompt_length=8, max_length=40)
    non_embedding, _ = transformer_weights(2, 64, 97, 4, 48)
    assert decoder.non_embedding == non_embedding and decoder.attention_width == 2 * 64
    # N and L x H x Q are the training convention's: PaLM's forward over the model's 48 positions
    assert model_flops(model).forward_per_sample == palm_forward_flops(non_embedding, 2 * 64, 48)
    assert decoder.step_flops(30) == decode_step_flops(non_embedding, 128, 2, 30) == 2 * (2 * non_embedding + 4 * 128 * 30)
    assert decoder.prefill_flops() == prefill_flops(non_embedding, output_weights(64, 97), 128, 2, 8)
    assert decoder.step_bytes(30) == decode_step_bytes(non_embedding, 2, 64, 2, 30, 4, 4)
    assert decoder.prefill_bytes() == prefill_bytes(non_embedding, 2, 64, 2, 8, 4, 4)


def test_a_greedy_generation_times_the_prefill_and_each_step_apart():
    decoder = GreedyDecoder(tiny_model(), batch=2, prompt_length=5, max_length=12)
    ticks = iter(range(1000))
    generation = decoder.generate(np.ones((2, 5), np.int32), 6, clock=lambda: float(next(ticks)))
    assert generation.tokens.shape == (2, 6) and generation.tokens.dtype == np.int32
    assert generation.prefill_s == 1.0 and generation.step_s == (1.0,) * 5  # one start and one stop per token
    assert generation.total_s == 11.0  # the first start to the last stop: 6 tokens, 5 gaps between the clocks
    assert generation.step_keys == (6, 7, 8, 9, 10)
    assert generation.logits is None


def test_what_is_not_the_notebooks_transformer_is_refused_naming_why():
    fc = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)], name="fc")
    with pytest.raises(DecodeModelError, match="'fc' is not ParaDnn's decoder-only Transformer.*first layer is Dense"):
        read_decoder(fc)
    tokens = keras.Input((6,), dtype="int32")
    x = keras.layers.Embedding(10, 8)(tokens)
    h = keras.layers.LayerNormalization()(x)
    x = keras.layers.Add()([x, keras.layers.MultiHeadAttention(2, 4, dropout=0.1)(h, h, use_causal_mask=True)])
    h = keras.layers.Dense(16, activation="gelu")(keras.layers.LayerNormalization()(x))
    x = keras.layers.Add()([x, keras.layers.Dense(8)(h)])
    model = keras.Model(tokens, keras.layers.Dense(10)(keras.layers.LayerNormalization()(x)), name="dropout")
    with pytest.raises(DecodeModelError, match="has {'dropout': 0.1}"):
        read_decoder(model)


def test_lengths_beyond_the_position_table_and_pytorch_are_refused(monkeypatch):
    model = tiny_model()
    with pytest.raises(ParameterError, match="max_length 49: expected .* <= the model's 48 positions"):
        GreedyDecoder(model, batch=1, prompt_length=8, max_length=49)
    with pytest.raises(ParameterError, match="1 <= prompt < max_length"):
        GreedyDecoder(model, batch=1, prompt_length=8, max_length=8)
    decoder = GreedyDecoder(model, batch=1, prompt_length=8, max_length=12)
    with pytest.raises(ParameterError, match=r"expected \(1, 8\) and 1 .. 4 new tokens"):
        decoder.generate(np.zeros((1, 8), np.int32), 5)
    with pytest.raises(ParameterError, match="token ids must lie in 0 .. 96"):
        decoder.generate(np.full((1, 8), 97), 2)
    monkeypatch.setattr(decode.keras.backend, "backend", lambda: "torch")
    with pytest.raises(BackendUnsupportedError, match="torch backend: not built .* copies the whole cache"):
        GreedyDecoder(model, batch=1, prompt_length=8, max_length=12)


def test_a_cache_that_does_not_fit_is_refused_in_one_line_before_it_is_built(monkeypatch):
    def built(*_):
        raise AssertionError("the cache was built")

    monkeypatch.setattr(GreedyDecoder, "_compile_jax", built)
    monkeypatch.setattr(GreedyDecoder, "_compile_tensorflow", built)
    small = DeviceMemory(4 * 2**20, "each GPU (a small one)")
    with pytest.raises(InsufficientMemoryError) as refused:
        GreedyDecoder(tiny_model(), batch=64, prompt_length=8, max_length=48, memory=small)
    message = str(refused.value)
    assert "\n" not in message and "decoding needs about" in message and "but each GPU (a small one) has 4 MiB" in message
    assert "key-value cache 3 MiB (batch 64 x 48 positions)" in message  # 2 x 2 layers x 64 x 48 x 64 x 4 bytes


# --- the accounting, Keras-free ---------------------------------------------------------------------------------

def test_decode_flops_follow_palms_forward_per_token():
    n, out, attention = 1_000, 110, 2 * 16  # N, N_out, L x H x Q
    assert decode_step_flops(n, attention, 4, 9) == 4 * (2 * 1_000 + 4 * 32 * 9)
    # the prefill is PaLM's forward over the prompt less the output on every position but the last
    assert prefill_flops(n, out, attention, 3, 7) == 3 * (palm_forward_flops(n, attention, 7) - 6 * 2 * out)
    assert output_weights(16, 5) == 2 * 16 + 16 * 5 + 5


def test_decode_bytes_count_the_weights_once_and_the_cache_up_to_the_keys():
    # N weights, 4 token rows and one position row of width 8, float32; keys and values of 2 layers, 9 positions
    # read and 1 written, for 4 sequences, bfloat16
    assert decode_step_bytes(1_000, 2, 8, 4, 9, 4, 2) == (1_000 + 4 * 8 + 8) * 4 + 2 * 2 * 4 * 10 * 8 * 2
    assert prefill_bytes(1_000, 2, 8, 4, 7, 4, 2) == (1_000 + 5 * 7 * 8) * 4 + 2 * 2 * 4 * 7 * 8 * 2
    assert kv_cache_bytes(12, 768, 64, 2176, 4) == 2 * 12 * 64 * 2176 * 768 * 4  # the `decode` preset's: 9.56 GiB


def test_the_decode_memory_estimate_and_the_largest_batch_it_allows():
    estimate = decode_memory("tiny", 2, 64, 97, 4, 48, batch=8, max_length=48, prompt_length=20)
    non_embedding, embedding = transformer_weights(2, 64, 97, 4, 48)
    cache = 2 * 2 * 8 * 48 * 64 * 4
    working = 8 * 20 * (1 + 4) * 64 * 4 + 8 * 97 * 4  # residual stream and MLP hidden of the prompts; the logits
    assert estimate.total_bytes == 4 * (non_embedding + embedding) + cache + working
    half = decode_memory("tiny", 2, 64, 97, 4, 48, batch=8, max_length=48, prompt_length=20, compute_dtype="bfloat16")
    assert half.cache_bytes * 2 == cache and half.weights_bytes == estimate.weights_bytes
    values = {"layers": 2, "width": 64, "heads": 4, "length": 48, "vocab": 97, "mlp_ratio": 4,
              "mixed_precision": "mixed_bfloat16"}  # the notebook's parameters
    named = paradnn_decode_memory(values, batch=8, max_length=48, prompt_length=20)
    assert named.total_bytes == half.total_bytes and named.model == (
        "paradnn transformer layers=2 width=64 heads=4 length=48 vocab=97 mlp_ratio=4, decoding batch 8 x 48 positions")
    assert decode_memory_problem(estimate, int(estimate.total_bytes / FIT_FRACTION) + 1) is None
    assert "decoding needs about" in decode_memory_problem(estimate, int(estimate.total_bytes / FIT_FRACTION) - 1024)

    def at(batch):
        return decode_memory("preset", 12, 768, 32_000, 4, 2176, batch=batch, max_length=2176, prompt_length=2048)

    batch = largest_decode_batch(at, 15 * GIB, 0.5, 1024)  # half a T4's 15 GiB
    assert batch & (batch - 1) == 0 and at(batch).total_bytes <= 0.5 * 15 * GIB < at(2 * batch).total_bytes
    assert largest_decode_batch(at, 15 * GIB, 0.5, 2) <= 2 and largest_decode_batch(at, 2**20, 0.5, 64) == 0
