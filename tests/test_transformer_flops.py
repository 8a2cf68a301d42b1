"""The Transformer's model FLOPs by PaLM's formula (Chowdhery et al. 2022, appendix B) against a hand count, the
HLO dot counter the compiler's cross-check reads, and the roofline's achievable ceiling (the achievable peak
itself: tests/test_achievable_peak.py)."""

from __future__ import annotations

import keras
import pytest

from colabkit.errors import FlopCountError
from colabkit.training.compiler_flops import hlo_dot_flops
from colabkit.training.flops import FLOP_CONVENTION, PALM_CONVENTION, model_flops
from colabkit.training.memory import palm_forward_flops, transformer_weights


def tiny_decoder(layers=2, width=24, heads=3, length=10, vocab=50, mlp_ratio=2):
    """One pre-norm decoder block stack, as the ParaDnn notebook builds it (no position table: optional)."""
    L = keras.layers
    tokens = keras.Input(shape=(length,), dtype="int32")
    x = L.Embedding(vocab, width)(tokens)
    for _ in range(layers):
        h = L.LayerNormalization()(x)
        x = L.Add()([x, L.MultiHeadAttention(heads, width // heads)(h, h, use_causal_mask=True)])
        h = L.Dense(mlp_ratio * width, activation="gelu")(L.LayerNormalization()(x))
        x = L.Add()([x, L.Dense(width)(h)])
    return keras.Model(tokens, L.Dense(vocab)(L.LayerNormalization()(x)))


def test_palm_formula_against_a_hand_count():
    model = tiny_decoder()
    # N by hand: per block 2 layer norms (2 x 2 x 24), Q, K, V and the output projection (4 x (24*24 + 24)),
    # the MLP 24 -> 48 -> 24 with biases; then a final layer norm and the head 24 -> 50; the embedding is not in N
    n = 2 * (2 * 2 * 24 + 4 * (24 * 24 + 24) + (24 * 48 + 48) + (48 * 24 + 24)) + 2 * 24 + (24 * 50 + 50)
    assert n == 11_042
    per_token_train = 6 * n + 12 * 2 * 3 * 8 * 10  # 6N + 12 L H Q T: L 2, H 3, Q 8, T 10, not halved for the mask
    flops = model_flops(model)
    assert flops.train_per_sample == 10 * per_token_train == 720_120
    assert flops.forward_per_sample * 3 == flops.train_per_sample and flops.convention == PALM_CONVENTION
    assert sum(value for _, _, value in flops.by_layer) == flops.forward_per_sample
    rows = {kind: value for _, kind, value in flops.by_layer if kind in ("Embedding", "MultiHeadAttention")}
    assert rows["Embedding"] == 0  # a lookup
    assert rows["MultiHeadAttention"] == 2 * 4 * (24 * 24 + 24) * 10 + 4 * 3 * 8 * 10 * 10  # 2 x weights x T + 4HQT^2
    # the sweep's Keras-free estimate gives the same (with the notebook's position table outside N)
    non_embedding, embedding = transformer_weights(2, 24, 50, 2, 10)
    assert (non_embedding, embedding) == (n, 50 * 24 + 10 * 24)
    assert palm_forward_flops(non_embedding, 2 * 24, 10) == flops.forward_per_sample
    # a model without attention keeps the layer-by-layer convention
    assert model_flops(keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])).convention == FLOP_CONVENTION


def test_attention_over_two_sequence_lengths_is_refused():
    a, b = keras.Input((6, 8)), keras.Input((4, 8))
    out_a = keras.layers.MultiHeadAttention(2, 4)(a, a)
    out_b = keras.layers.MultiHeadAttention(2, 4)(b, b)
    with pytest.raises(FlopCountError, match="one T"):
        model_flops(keras.Model([a, b], [out_a, out_b]))


JAX_HLO = """
ENTRY main.5 {
  a.1 = f32[2,3,4]{2,1,0} parameter(0)
  b.1 = f32[2,4,5]{2,1,0} parameter(1)
  ROOT dot.2 = f32[2,3,5]{2,1,0} dot(a.1, b.1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
"""
TF_HLO = """
  %MatMul.54 = f32[8,32,64]{2,1,0} dot(f32[8,32,16]{2,1,0} %add_2.5, f32[16,64]{1,0} %Reshape.84), lhs_contracting_dims={2}, rhs_contracting_dims={0}
  %add.1 = f32[8,32,64]{2,1,0} add(f32[8,32,64]{2,1,0} %MatMul.54, f32[8,32,64]{2,1,0} %MatMul.54)
"""


def test_hlo_dot_flops_reads_both_printings():
    assert hlo_dot_flops(JAX_HLO) == 2 * (2 * 3 * 5) * 4  # operands by name: their shapes where defined
    assert hlo_dot_flops(TF_HLO) == 2 * (8 * 32 * 64) * 16  # operands with their shapes inline; the add is no dot
    with pytest.raises(ValueError, match="not found"):
        hlo_dot_flops("ROOT d.1 = f32[2,2]{1,0} dot(x.1, y.1), lhs_contracting_dims={1}")


def test_the_roofline_draws_the_achievable_ceiling_under_the_datasheet_one():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from colabkit.plots import draw_roofline

    figure, ax = plt.subplots()
    draw_roofline(ax, [(2.0, 0.01, "run", None)], 0.27, 20.0, achievable_tflops=0.15)
    lines = {line.get_label().split(":")[0]: line for line in ax.get_lines() if not line.get_label().startswith("_")}
    assert set(lines) == {"roofline", "achievable (matmul scan)"} and lines["achievable (matmul scan)"].get_linestyle() == "--"
    x, y = lines["achievable (matmul scan)"].get_data()
    assert max(y) == pytest.approx(0.15) and y[0] == pytest.approx(x[0] * 20.0 / 1e3)  # same bandwidth slope below
    assert max(lines["roofline"].get_data()[1]) == pytest.approx(0.27)
    plt.close(figure)
