"""The CNN-MNIST notebook through papermill with smoke parameters on the offline data."""

from __future__ import annotations

import statistics

import pytest
from helpers import execute_notebook

from colabkit.device.rapl import RaplCounter
from colabkit.experiments import get
from colabkit.records.record import read_record

pytestmark = pytest.mark.notebook

# Hand-derived parameter count of Alyafeai 2018's CNN:
#   Conv2D(64, 2x2) on 1 channel:  2*2*1*64 + 64     =    320
#   Conv2D(32, 2x2) on 64 channels: 2*2*64*32 + 32   =  8,224
#   Dense(256) on 7*7*32 = 1,568:   1568*256 + 256   = 401,664
#   Dense(10):                      256*10 + 10      =  2,570
ALYAFEAI_2018_CNN_PARAMS = 320 + 8_224 + 401_664 + 2_570  # 412,778


def check_training_record(record, epochs: int, global_batch: int, train_samples: int):
    metrics, timing = record["metrics"], record["timings"]
    per_epoch = timing["epochs"]
    assert len(per_epoch) == epochs == metrics["epochs_run"]
    assert metrics["global_batch_size"] == global_batch
    steps = train_samples // global_batch if record["device"]["kind"] == "tpu" else -(-train_samples // global_batch)
    assert all(epoch["steps"] == steps and len(epoch["step_s"]) == steps for epoch in per_epoch)
    # the first epoch (tracing, compiling) is reported alone and kept out of the steady state
    assert metrics["epoch_time_first_s"] == per_epoch[0]["epoch_s"]
    assert metrics["epoch_time_steady_s"] == pytest.approx(statistics.median(e["epoch_s"] for e in per_epoch[1:]))
    # the headline step time comes from synchronised epoch clocks: steady training time / steps
    assert metrics["step_time_steady_ms"] == pytest.approx(
        1e3 * statistics.median(e["train_s"] / e["steps"] for e in per_epoch[1:]))
    assert metrics["train_epoch_time_steady_s"] == pytest.approx(steps * metrics["step_time_steady_ms"] / 1e3)
    # each step was dispatched within its epoch's training time
    assert all(0 < sum(e["step_s"]) <= e["train_s"] for e in per_epoch)
    # per-sample figures divide by the samples each epoch saw (a partial last batch counts as it is)
    seen = steps * global_batch if record["device"]["kind"] == "tpu" else train_samples
    assert all(e["samples"] == seen for e in per_epoch) and metrics["samples_per_epoch"] == seen
    assert metrics["sample_time_steady_us"] == pytest.approx(
        1e6 * statistics.median(e["train_s"] / e["samples"] for e in per_epoch[1:]))
    assert all(e["train_s"] + e["validation_s"] == pytest.approx(e["epoch_s"]) for e in per_epoch)
    assert all(e["validation_s"] > 0 for e in per_epoch)  # validation ran, and was timed apart


def check_breakdown(record, folder):
    """What bounds the run: three throughputs, shares summing to 1, bound_by, what the passes cost, what a
    CPU "device" is; and the profile of 5 steps beside the record, summarised (or why not)."""
    metrics, breakdown = record["metrics"], record["breakdown"]
    assert metrics["samples_per_s"] > 0 and metrics["input_samples_per_s"] > 0 and metrics["device_samples_per_s"] > 0
    shares = [metrics["input_wait_share"], metrics["host_share"], metrics["device_share"]]
    assert all(0 <= share <= 1 for share in shares) and sum(shares) == pytest.approx(1)
    assert metrics["bound_by"] in ("input", "host", "compute", "memory", "device")
    assert breakdown["measured"] and breakdown["samples_per_s"] == metrics["samples_per_s"]
    assert 0 < breakdown["seconds"]["total"] < 120 and "same cores" in breakdown["device_is"]
    profile = record["op_breakdown"]
    assert profile["steps"] == 5 and profile["trace_dir"] == str(folder / "record.profile")
    assert (folder / "record.profile" / profile["trace_files"][0]).stat().st_size > 0
    if profile["reason"] is None:  # the converter (xprof) is installed
        assert sum(profile["categories"].values()) == pytest.approx(1, abs=0.01) and "idle" in profile["categories"]
        busy = profile["busy_categories"]  # convolutions and matrix products first
        others = max(value for name, value in busy.items() if name not in ("convolution", "matmul"))
        assert busy["convolution"] + busy["matmul"] > others
    else:
        assert "xprof" in profile["reason"]


def test_cpu_smoke_run_on_offline_mnist(tmp_path, warm_kernels):
    executed, record_path = execute_notebook(
        "cnn_mnist", tmp_path, warm_kernels, device="cpu", batch_size=128, epochs=3, train_samples=1000,
        test_samples=256, data_source="offline", target_accuracy=0.0, breakdown=True, profile_steps=5)
    record = read_record(record_path)
    assert record["status"] == "ok" and record["data"]["source"] == "offline"
    metrics = record["metrics"]
    assert metrics["params"] == ALYAFEAI_2018_CNN_PARAMS
    assert set(get("cnn_mnist").metrics) <= set(metrics)  # every metric its declaration promises
    check_training_record(record, epochs=3, global_batch=128, train_samples=1000)  # 7 full batches + 104
    assert 0.0 <= metrics["test_accuracy"] <= 1.0 and metrics["test_loss"] > 0
    assert metrics["time_to_accuracy_s"] == pytest.approx(record["timings"]["epochs"][0]["epoch_s"], rel=0.5)
    assert sum(sum(row) for row in record["evaluation"]["confusion_matrix"]) == 256  # every test digit scored once
    # utilisation: the hand count of Alyafeai 2018's CNN (4,420,608 matmul FLOPs + 56,714 bias adds forward
    # per sample, tests/test_flops.py), achieved TFLOPS = training FLOPs per sample x steady samples/s
    # exactly, MFU against the CPU's estimated peak
    assert metrics["model_flops_forward_per_sample"] == 4_477_322
    assert metrics["model_flops_train_per_sample"] == 3 * metrics["model_flops_forward_per_sample"]
    assert metrics["model_tflops"] == metrics["model_flops_train_per_sample"] * metrics["samples_per_s"] / 1e12
    assert metrics["mfu"] == pytest.approx(metrics["model_tflops"] / metrics["peak_tflops"])
    assert 0 < metrics["mfu"] < 1 and metrics["arithmetic_intensity"] > 0
    # energy: a CPU's is RAPL's; where this host has none readable, the record says so and why
    rapl = RaplCounter().start()
    rapl.stop()
    if rapl.method == "not measured":
        assert metrics["energy_method"] == "not measured" and metrics["energy_reason"] == rapl.reason
        assert metrics["energy_j_per_epoch"] is None and metrics["energy_j_per_sample"] is None
    else:
        assert metrics["energy_method"] == "rapl"
    assert len(record["history"]["val_accuracy"]) == 3
    check_breakdown(record, tmp_path)
    images = [o for cell in executed.cells for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= 2  # training curves and the confusion matrix
    assert "offline" in str([o for cell in executed.cells for o in cell.get("outputs", [])]).lower()


def test_two_logical_cpu_replicas_double_the_global_batch(tmp_path, warm_kernels):
    _, record_path = execute_notebook(
        "cnn_mnist", tmp_path, warm_kernels, device="cpu:2", batch_size=64, epochs=2, train_samples=512,
        test_samples=128, data_source="offline")
    record = read_record(record_path)
    assert record["device"]["strategy"] == "MirroredStrategy" and record["metrics"]["replicas"] == 2
    assert record["metrics"]["batch_size_per_replica"] == 64
    check_training_record(record, epochs=2, global_batch=128, train_samples=512)
