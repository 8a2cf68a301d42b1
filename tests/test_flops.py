"""Analytic model FLOPs against hand counts written out here, intensity, utilisation fields, and a
cross-check against XLA's cost analysis on loop-free models (Keras on JAX, in a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import keras
import pytest
from helpers import REPO  # noqa: I001

from colabkit.errors import FlopCountError
from colabkit.training.flops import (
    FLOP_CONVENTION,
    ModelFlops,
    arithmetic_intensity,
    model_flops,
    utilisation_metrics,
)


def seed_cnn() -> keras.Model:
    """notebooks/cnn_mnist.ipynb's network (Alyafeai 2018, GPUvsTPU notebook)."""
    return keras.Sequential([
        keras.Input(shape=(28, 28, 1)),
        keras.layers.Conv2D(64, kernel_size=2, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(pool_size=2),
        keras.layers.Dropout(0.3),
        keras.layers.Conv2D(32, kernel_size=2, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(pool_size=2),
        keras.layers.Dropout(0.3),
        keras.layers.Flatten(),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dropout(0.5),
        keras.layers.Dense(10, activation="softmax"),
    ])


def by_name(flops: ModelFlops) -> dict[str, float]:
    return {name: value for name, _, value in flops.by_layer}


def test_seed_cnn_matches_the_hand_count():
    # Multiply-adds x 2 (the 4.42 MFLOP usually quoted for this network):
    #   conv 1: 28*28 positions x 2*2*1 kernel x 64 filters x 2   =   401,408
    #   conv 2: 14*14 positions x 2*2*64 kernel x 32 filters x 2  = 3,211,264
    #   dense:  1568 -> 256 x 2                                   =   802,816
    #   dense:  256 -> 10 x 2                                     =     5,120
    matmul = 401_408 + 3_211_264 + 802_816 + 5_120
    assert matmul == 4_420_608  # 4.42 MFLOP
    # Bias adds, one per output value: 28*28*64 + 14*14*32 + 256 + 10
    bias = 50_176 + 6_272 + 256 + 10
    model = seed_cnn()
    assert model.count_params() == 412_778
    flops = model_flops(model)
    assert flops.forward_per_sample == matmul + bias == 4_477_322
    assert flops.train_per_sample == 3 * flops.forward_per_sample
    layers = [(cls, value) for _, cls, value in flops.by_layer]
    assert layers == [("Conv2D", 401_408 + 50_176), ("MaxPooling2D", 0), ("Dropout", 0),
                      ("Conv2D", 3_211_264 + 6_272), ("MaxPooling2D", 0), ("Dropout", 0), ("Flatten", 0),
                      ("Dense", 802_816 + 256), ("Dropout", 0), ("Dense", 5_120 + 10)]
    assert flops.convention == FLOP_CONVENTION and "2 FLOPs" in FLOP_CONVENTION and "3 x forward" in FLOP_CONVENTION


def test_conv_stride_valid_padding_dilation_and_no_bias():
    inputs = keras.Input((32, 30, 3))
    a = keras.layers.Conv2D(8, 3, strides=2, padding="valid", use_bias=False, name="valid_s2")(inputs)  # 15 x 14
    b = keras.layers.Conv2D(4, 3, strides=2, padding="same", name="same_s2")(inputs)  # 16 x 15
    c = keras.layers.Conv2D(5, 3, dilation_rate=2, padding="valid", name="dilated")(inputs)  # 28 x 26
    model = keras.Model(inputs, [a, b, c])
    counted = by_name(model_flops(model))
    assert counted["valid_s2"] == 15 * 14 * (2 * 3 * 3 * 3 * 8)
    assert counted["same_s2"] == 16 * 15 * (2 * 3 * 3 * 3 * 4 + 4)
    assert counted["dilated"] == 28 * 26 * (2 * 3 * 3 * 3 * 5 + 5)


def test_lstm_and_gru_per_step_from_the_formulas():
    d, u, steps = 9, 32, 128
    lstm_model = keras.Sequential([keras.Input((steps, d)), keras.layers.LSTM(u, return_sequences=True, name="lstm"),
                                   keras.layers.GRU(16, name="gru")])
    counted = by_name(model_flops(lstm_model))
    # LSTM: 4 gates, each a (d+u) x u matmul and a bias: 8u(d+u) + 4u per step
    lstm_step = 8 * 32 * (9 + 32) + 4 * 32  # 10,624
    assert lstm_model.layers[0].count_params() == 4 * u * (d + u + 1)
    assert counted["lstm"] == steps * lstm_step == 1_359_872
    # Keras 3 GRU, reset_after=True: 3 gates, input and recurrent bias each: 6u(d+u) + 6u per step
    gru_step = 6 * 16 * (32 + 16) + 6 * 16  # 4,704
    assert lstm_model.layers[1].count_params() == 3 * 16 * (32 + 16 + 2)
    assert counted["gru"] == steps * gru_step


def test_simple_rnn_gru_without_reset_after_and_sequence_length_for_unknown_time_axis():
    model = keras.Sequential([keras.Input((None, 5)), keras.layers.SimpleRNN(7, return_sequences=True, name="rnn"),
                              keras.layers.GRU(3, reset_after=False, return_sequences=True, name="gru")])
    with pytest.raises(FlopCountError, match="sequence_length"):
        model_flops(model)
    counted = by_name(model_flops(model, sequence_length=10))
    assert counted["rnn"] == 10 * (2 * 7 * (5 + 7) + 7)
    assert counted["gru"] == 10 * (6 * 3 * (7 + 3) + 3 * 3)  # one bias vector of 3u without reset_after


def test_bidirectional_counts_both_directions_and_concat_doubles_the_next_input():
    steps, d, u = 20, 6, 8
    model = keras.Sequential([
        keras.Input((steps, d)),
        keras.layers.Bidirectional(keras.layers.LSTM(u, return_sequences=True), name="bi"),
        keras.layers.LSTM(4, name="head"),  # fed 2u = 16 values per step
    ])
    counted = by_name(model_flops(model))
    assert counted["bi"] == 2 * steps * (8 * u * (d + u) + 4 * u)
    assert counted["head"] == steps * (8 * 4 * (2 * u + 4) + 4 * 4)


def test_dense_on_sequences_and_time_distributed_run_once_per_step():
    model = keras.Sequential([
        keras.Input((12, 5)),
        keras.layers.Dense(7, name="dense_seq"),
        keras.layers.TimeDistributed(keras.layers.Dense(3), name="td"),
    ])
    counted = by_name(model_flops(model))
    assert counted["dense_seq"] == 12 * (2 * 5 * 7 + 7)
    assert counted["td"] == 12 * (2 * 7 * 3 + 3)


def test_embedding_is_a_lookup_and_the_stacked_rnn_cells_chain_their_sizes():
    model = keras.Sequential([
        keras.Input((10,), dtype="int32"),
        keras.layers.Embedding(100, 16, name="embed"),
        keras.layers.RNN(keras.layers.StackedRNNCells([keras.layers.LSTMCell(16), keras.layers.GRUCell(8)]),
                         return_sequences=True, name="stack"),
        keras.layers.Dense(100, name="to_vocab"),
    ])
    counted = by_name(model_flops(model))
    assert counted["embed"] == 0
    assert counted["stack"] == 10 * ((8 * 16 * (16 + 16) + 4 * 16) + (6 * 8 * (16 + 8) + 6 * 8))
    assert counted["to_vocab"] == 10 * (2 * 8 * 100 + 100)


def test_resnet_block_counts_its_convs_and_ignores_the_add_and_normalisation():
    inputs = keras.Input((8, 8, 16))
    x = keras.layers.Conv2D(16, 3, padding="same", use_bias=False, name="c1")(inputs)
    x = keras.layers.BatchNormalization(name="bn1")(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.Conv2D(16, 3, padding="same", use_bias=False, name="c2")(x)
    x = keras.layers.BatchNormalization(name="bn2")(x)
    x = keras.layers.Add(name="add")([x, inputs])
    x = keras.layers.Activation("relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(10, name="fc")(x)
    counted = by_name(model_flops(keras.Model(inputs, outputs)))
    conv = 8 * 8 * 2 * 3 * 3 * 16 * 16
    assert counted["c1"] == counted["c2"] == conv
    assert counted["bn1"] == counted["add"] == 0
    assert sum(counted.values()) == 2 * conv + 2 * 16 * 10 + 10


def test_nested_models_are_opened():
    inner = keras.Sequential([keras.Input((6,)), keras.layers.Dense(4, name="inner_dense")], name="inner")
    outer = keras.Sequential([keras.Input((6,)), inner, keras.layers.Dense(2, name="outer_dense")])
    counted = by_name(model_flops(outer))
    assert counted == {"inner_dense": 2 * 6 * 4 + 4, "outer_dense": 2 * 4 * 2 + 2}


def test_an_unknown_layer_raises_naming_it():
    class Mystery(keras.layers.Layer):
        def call(self, x):
            return x * 2

    model = keras.Sequential([keras.Input((4,)), Mystery(name="mystery"), keras.layers.Dense(2)])
    with pytest.raises(FlopCountError, match=r"'mystery' of class Mystery"):
        model_flops(model)


def test_intensity_counts_weights_six_times_and_activations_twice():
    model = keras.Sequential([keras.Input((100,)), keras.layers.Dense(50), keras.layers.Flatten(),
                              keras.layers.Dense(10)])
    flops = model_flops(model)
    weights = 100 * 50 + 50 + 50 * 10 + 10
    batch, dtype_bytes = 32, 4
    # weights: forward read, backward read, gradient write, update (read w, read g, write w) = 6
    # activations: inputs read once; each materialised output written and read back (Flatten is a view)
    expected_bytes = dtype_bytes * (6 * weights + batch * (100 + 2 * (50 + 10)))
    intensity = arithmetic_intensity(model, flops, batch_size=batch, dtype_bytes=dtype_bytes)
    assert intensity.bytes_per_step == expected_bytes
    assert intensity.flops_per_step == batch * 3 * ((2 * 100 * 50 + 50) + (2 * 50 * 10 + 10))
    assert intensity.intensity == pytest.approx(intensity.flops_per_step / expected_bytes)
    bigger = arithmetic_intensity(model, flops, batch_size=4096, dtype_bytes=dtype_bytes)
    assert bigger.intensity > intensity.intensity  # weight traffic amortised over a bigger batch


def test_utilisation_fields():
    flops = ModelFlops(forward_per_sample=1e6, train_per_sample=3e6, by_layer=(), convention="c")
    fields = utilisation_metrics(flops, samples_per_s=2500.0, peak_tflops=0.05)
    assert fields["model_tflops"] == 3e6 * 2500.0 / 1e12
    assert fields["mfu"] == pytest.approx(fields["model_tflops"] / 0.05) and fields["mfu_reason"] is None
    unknown = utilisation_metrics(flops, samples_per_s=2500.0, peak_tflops=None, peak_reason="no peak for float16 on CPU")
    assert unknown["mfu"] is None and unknown["mfu_reason"] == "no peak for float16 on CPU"
    assert unknown["model_tflops"] == fields["model_tflops"]
    one_epoch = utilisation_metrics(flops, samples_per_s=None, peak_tflops=0.05)
    assert one_epoch["model_tflops"] is None and one_epoch["mfu"] is None and "epoch" in one_epoch["mfu_reason"]
    assert set(fields) == {"model_flops_forward_per_sample", "model_flops_train_per_sample", "model_tflops", "mfu",
                           "mfu_reason", "flop_convention"}


_XLA_SCRIPT = textwrap.dedent("""
    import json, os
    os.environ["KERAS_BACKEND"] = "jax"
    import jax, keras, numpy as np
    from colabkit.training.flops import model_flops

    def xla_forward_flops(model, batch):
        x = np.zeros((batch, *model.inputs[0].shape[1:]), "float32")
        trainable = [v.value for v in model.trainable_variables]
        frozen = [v.value for v in model.non_trainable_variables]
        def forward(trainable, frozen, x):
            return model.stateless_call(trainable, frozen, x)[0]
        cost = jax.jit(forward).lower(trainable, frozen, x).compile().cost_analysis()
        if isinstance(cost, (list, tuple)):  # older JAX: one dict per computation
            cost = cost[0]
        return float(cost["flops"]) / batch

    keras.utils.set_random_seed(0)
    mlp = keras.Sequential([keras.Input((512,)), keras.layers.Dense(1024), keras.layers.Dense(256),
                            keras.layers.Dense(10)])
    cnn = keras.Sequential([keras.Input((32, 32, 3)), keras.layers.Conv2D(32, 3, padding="same"),
                            keras.layers.Conv2D(64, 3, strides=2, padding="valid"), keras.layers.Flatten(),
                            keras.layers.Dense(10)])
    out = {}
    for name, model in (("mlp", mlp), ("cnn", cnn)):
        out[name] = {"xla": xla_forward_flops(model, 8), "ours": model_flops(model).forward_per_sample}
    print("RESULT " + json.dumps(out))
""")


def test_forward_flops_agree_with_xla_cost_analysis_on_loop_free_models():
    pytest.importorskip("jax")
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", _XLA_SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    for name, counts in result.items():
        assert counts["ours"] == pytest.approx(counts["xla"], rel=0.02), (name, counts)
