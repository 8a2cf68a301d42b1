"""The ParaDnn notebook through papermill with smoke parameters, one run per family, on the CPU, in the test worker's
warm kernel as `sweep --kernels reuse` runs ParaDnn (colabkit.sweep.runners.kernels; tests/helpers.py's WarmKernels):
the kernel start and TensorFlow's import are paid once, and each run after the first shows that a cleared kernel
gives a complete, correct record."""

from __future__ import annotations

import statistics

import pytest
from helpers import execute_notebook

from colabkit.records.record import read_record

pytestmark = pytest.mark.notebook

SMOKE = dict(device="cpu", batch_size=16, steps=4, epochs=3, steps_per_execution=2,
             breakdown=False)  # the bottleneck passes are tests/test_breakdown.py's (as helpers.execute_notebook)

# FC smoke model: Dense 256->64, 64->64, 64->16. Dense d->u forward: 2du + u FLOPs; params du + u.
FC = dict(family="fc", layers=2, nodes=64, input_size=256, output_size=16)
FC_FORWARD = (2 * 256 * 64 + 64) + (2 * 64 * 64 + 64) + (2 * 64 * 16 + 16)  # 43,152
FC_PARAMS = (256 * 64 + 64) + (64 * 64 + 64) + (64 * 16 + 16)  # 21,648

# RNN smoke model: Embedding(256, 32), one GRU(32) over 10 steps, Dense(256) at every step.
# Keras 3 GRU (reset_after): 6u(d+u) + 6u per step; Dense 32->256: 2*32*256 + 256 per step; lookups 0.
RNN = dict(family="rnn", layers=1, cell="gru", hidden=32, length=10, vocab=256)
RNN_FORWARD = 10 * (6 * 32 * (32 + 32) + 6 * 32) + 10 * (2 * 32 * 256 + 256)  # 291,200
RNN_PARAMS = 256 * 32 + 3 * 32 * (32 + 32 + 2) + (32 * 256 + 256)

# CNN smoke model: ResNet-v1, 1 bottleneck block per group: 7x7 stem + 4 x (3 convs + 1x1 projection).
CNN = dict(family="cnn", blocks=1, filters=4, block="bottleneck", input_size=32, output_size=16)
CNN_CONVS = 1 + 4 * 4


def run_family(warm_kernels, tmp_path, **knobs):
    _, record_path = execute_notebook("paradnn", tmp_path, warm_kernels, **SMOKE, **knobs)
    record = read_record(record_path)
    assert record["status"] == "ok"
    for knob, value in knobs.items():
        assert record["params"][knob] == value
    return record


def check_record(record, forward: float | None = None, params: int | None = None):
    metrics, timings = record["metrics"], record["timings"]
    batch, steps = SMOKE["batch_size"], SMOKE["steps"]
    # the timer: the first epoch apart, then steady epochs of exactly `steps` steps
    assert [epoch["steps"] for epoch in timings["epochs"]] == [steps] * SMOKE["epochs"]
    steady_train_s = statistics.median(epoch["train_s"] for epoch in timings["epochs"][1:])
    assert metrics["samples_per_s"] == pytest.approx(steps * batch / steady_train_s)
    # model FLOPs and the achieved TFLOPS: train FLOPs per sample x samples/s, exactly
    assert metrics["model_flops_train_per_sample"] == 3 * metrics["model_flops_forward_per_sample"]
    assert metrics["model_tflops"] == metrics["model_flops_train_per_sample"] * metrics["samples_per_s"] / 1e12
    if forward is not None:
        assert metrics["model_flops_forward_per_sample"] == forward
    if params is not None:
        assert metrics["params"] == params
    assert record["flops"]["train_per_sample"] == metrics["model_flops_train_per_sample"]
    assert sum(layer["forward_per_sample"] for layer in record["flops"]["by_layer"]) == pytest.approx(
        metrics["model_flops_forward_per_sample"])
    # utilisation against the CPU's estimated peak (or a reason when this CPU has none)
    if metrics["peak_tflops"] is not None:
        assert metrics["mfu"] == pytest.approx(metrics["model_tflops"] / metrics["peak_tflops"])
        assert metrics["peak_tflops_source"]
    else:
        assert metrics["mfu"] is None and metrics["mfu_reason"]
    # arithmetic intensity per training step and the roofline it implies
    assert metrics["flops_per_step_per_replica"] == metrics["model_flops_train_per_sample"] * batch
    assert metrics["arithmetic_intensity"] == pytest.approx(
        metrics["flops_per_step_per_replica"] / metrics["bytes_per_step_per_replica"])
    assert metrics["peak_bandwidth_gb_s"] > 0 and metrics["peak_bandwidth_quality"] == "measured"
    assert "STREAM" in metrics["peak_bandwidth_source"]
    if metrics["peak_tflops"] is not None:
        attainable = min(metrics["peak_tflops"], metrics["arithmetic_intensity"] * metrics["peak_bandwidth_gb_s"] / 1e3)
        assert metrics["roofline_tflops"] == pytest.approx(attainable)
        ridge = metrics["peak_tflops"] * 1e3 / metrics["peak_bandwidth_gb_s"]
        assert metrics["bound"] == ("memory" if metrics["arithmetic_intensity"] < ridge else "compute")
        assert metrics["fraction_of_roofline"] == pytest.approx(metrics["model_tflops"] / attainable)


def test_fc_smoke(warm_kernels, tmp_path):
    record = run_family(warm_kernels, tmp_path, **FC)
    check_record(record, forward=FC_FORWARD, params=FC_PARAMS)
    assert record["metrics"]["family"] == "fc" and record["data"]["source"] == "synthetic"
    assert record["data"]["shape"] == {"inputs": [16, 256], "labels": [16]}


def test_rnn_smoke(warm_kernels, tmp_path):
    record = run_family(warm_kernels, tmp_path, **RNN)
    check_record(record, forward=RNN_FORWARD, params=RNN_PARAMS)
    assert record["data"]["shape"] == {"inputs": [16, 10], "labels": [16, 10]}


def test_cnn_smoke(warm_kernels, tmp_path):
    record = run_family(warm_kernels, tmp_path, **CNN)
    check_record(record)
    layers = record["flops"]["by_layer"]
    assert sum(layer["class"] == "Conv2D" for layer in layers) == CNN_CONVS
    assert sum(layer["class"] == "BatchNormalization" for layer in layers) == CNN_CONVS
    # the last group's bottleneck ends with 4 x 8F channels: the Dense head reads 128 features
    head = layers[-1]
    assert head["class"] == "Dense" and head["forward_per_sample"] == 2 * 4 * 8 * 4 * 16 + 16


# Transformer smoke model: 2 blocks, width 64, 4 heads of 16, 32 tokens, vocabulary 256, MLP 4 x 64. PaLM's N (every
# weight but the embeddings): per block 2 layer norms (2 x 128) + Q, K, V, output (4 x (64*64 + 64)) + MLP
# (64*256 + 256) + (256*64 + 64); a final layer norm (128) and the head (64*256 + 256).
TRANSFORMER = dict(family="transformer", layers=2, width=64, heads=4, length=32, vocab=256, mlp_ratio=4)
TRANSFORMER_N = 2 * (256 + 4 * (64 * 64 + 64) + (64 * 256 + 256) + (256 * 64 + 64)) + 128 + (64 * 256 + 256)  # 116,736
# 6N + 12 L H Q T per token for training, x 32 tokens per sequence; forward a third
TRANSFORMER_TRAIN = 32 * (6 * TRANSFORMER_N + 12 * 2 * 4 * 16 * 32)  # 23,986,176


def check_transformer(record, backend):
    metrics = record["metrics"]
    check_record(record, forward=TRANSFORMER_TRAIN / 3)
    assert metrics["model_flops_train_per_sample"] == TRANSFORMER_TRAIN
    assert "PaLM" in metrics["flop_convention"] and record["device"]["backend"] == backend
    # the compiler's own count beside the formula, within the band (or the record says why)
    ratio = metrics["compiler_flops_ratio"]
    assert 0.8 <= ratio <= 1.25 and metrics["compiler_flops_note"] is None, metrics["compiler_flops_note"]
    assert metrics["compiler_dot_flops_ratio"] == pytest.approx(0.98, abs=0.02)  # dots: N's biases and norms aside
    if backend == "jax":  # XLA's cost analysis counts every op: a little above the dots
        assert metrics["compiler_flops_train_per_sample"] > metrics["compiler_dot_flops_train_per_sample"]
    # MFU against the datasheet and against the achievable peak of the matmul scan, which the record keeps
    scan = record["achievable_peak"]
    assert scan["backend"] == backend and scan["per_precision"]["float32"]["tflops"] == max(
        row["tflops"] for row in scan["scanned"] if row["precision"] == "float32")
    assert metrics["achievable_tflops"] == scan["per_precision"]["float32"]["tflops"]
    assert metrics["achievable_shape"] == scan["per_precision"]["float32"]["shape"]
    assert metrics["mfu_achievable"] == pytest.approx(metrics["model_tflops"] / metrics["achievable_tflops"])
    if metrics["peak_tflops"] is not None:
        assert metrics["achievable_over_datasheet"] == pytest.approx(metrics["achievable_tflops"] / metrics["peak_tflops"])
        # a CPU estimate is never below the scan: raised to it where it was, and the record says so
        assert metrics["achievable_over_datasheet"] <= 1 + 1e-9 and metrics["peak_basis"].startswith("estimate at")
        if "raised" in metrics["peak_tflops_source"]:
            assert "implies" in metrics["peak_basis"]
    assert metrics["achievable_low_tflops"] <= metrics["achievable_tflops"] and scan["passes"] >= 1
    assert metrics["mfu_achievable_low"] <= metrics["mfu_achievable_high"]
    print(f"{backend}: compiler/model {ratio:.4f}, dots {metrics['compiler_dot_flops_ratio']:.4f}, achievable "
          f"{metrics['achievable_tflops']:.4f} TFLOPS at {metrics['achievable_shape']} = "
          f"{metrics['achievable_over_datasheet']} of the datasheet's {metrics['peak_tflops']}")


def test_transformer_smoke(warm_kernels, tmp_path):
    record = run_family(warm_kernels, tmp_path, **TRANSFORMER)
    check_transformer(record, "tensorflow")
    assert record["data"]["shape"] == {"inputs": [16, 32], "labels": [16, 32]}


def test_transformer_smoke_on_jax(tmp_path, warm_kernels):
    _, path = execute_notebook("paradnn", tmp_path, warm_kernels, **SMOKE, **TRANSFORMER, backend="jax")
    check_transformer(read_record(path), "jax")


def test_fc_on_two_cpu_replicas_with_the_default_settings_gives_its_breakdown(tmp_path, warm_kernels):
    """The bottleneck passes on two replicas: the device pass runs its steps as one execution, where Keras 3's
    own multi-step loop fails on a MirroredStrategy (colabkit.training.fit's replica_train_function instead)."""
    _, path = execute_notebook("paradnn", tmp_path, warm_kernels, device="cpu:2", steps=4, epochs=3, breakdown=True, **FC)
    record = read_record(path)
    assert record["status"] == "ok", record.get("error")
    assert record["device"]["strategy"] == "MirroredStrategy" and record["metrics"]["replicas"] == 2
    assert record["metrics"]["global_batch_size"] == 2 * 64  # the declaration's default batch per replica
    breakdown = record["breakdown"]
    assert breakdown["measured"] and breakdown["device"]["steps_per_epoch"] >= 10
    assert record["metrics"]["device_samples_per_s"] > 0 and record["metrics"]["bound_by"] is not None
