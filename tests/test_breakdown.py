"""What bounds a training run: the shares' arithmetic, the passes on tiny Keras models in this process
(an input pipeline made slow on purpose), and a profile of the CNN read back with the profiler's own
converter. How the host's share shrinks from steps_per_execution 1 to 50 is measured, not tested: its
passes time real work in quarter-second windows that a busy host moves (benchmarks/host_share.py)."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from colabkit.training.shares import (  # noqa: E402  (Keras's backend is chosen before anything imports Keras)
    CATEGORIES,
    SHARES,
    bound_by,
    describe_shares,
    explain_idle,
    op_category,
    step_shares,
    summarise_ops,
)


class CpuSetup:
    """Stands in for the notebook's DeviceSetup: one CPU, no multi-worker, no known bandwidth."""

    kind = "cpu"
    description: dict = {}

    def peak_bandwidth(self):
        return None


# --- the arithmetic -----------------------------------------------------------------------------

def test_the_shares_of_a_step_follow_the_three_rates_and_sum_to_one():
    # per sample: run 10 us, fed from memory 4 us, device 1 us -> input 60 %, host 30 %, device 10 %
    shares = step_shares(100_000, 250_000, 1_000_000)
    assert shares == pytest.approx({"input_wait_share": 0.6, "host_share": 0.3, "device_share": 0.1})
    assert bound_by(shares) == "input"
    # the device alone slower than the steps fed from memory (noise): no negative host share
    noisy = step_shares(100_000, 250_000, 200_000)
    assert noisy["host_share"] == 0 and sum(noisy.values()) == pytest.approx(1)
    with pytest.raises(ValueError, match="run = 0"):
        step_shares(0, 1, 1)


def test_bound_by_takes_the_largest_share_and_the_roofline_for_the_device():
    host = {"input_wait_share": 0.1, "host_share": 0.6, "device_share": 0.3}
    device = {"input_wait_share": 0.1, "host_share": 0.2, "device_share": 0.7}
    assert bound_by(host, "compute") == "host"
    assert bound_by(device, "memory") == "memory" and bound_by(device, "compute") == "compute"
    assert bound_by(device, None) == "device"


def test_the_sentence_is_made_from_the_numbers():
    text = describe_shares("On GPU: Tesla T4 at batch 256", {"input_wait_share": 0.38, "host_share": 0.12,
                                                               "device_share": 0.5}, "input")
    assert text == ("On GPU: Tesla T4 at batch 256, 38 % of each step waits for input, 12 % is host overhead and "
                    "50 % device time: bound by input.")
    assert "no breakdown" in describe_shares("On CPU", dict.fromkeys(SHARES), None)


@pytest.mark.parametrize("op_type, name, expected", [
    ("_MklNativeConv2DBackpropFilterWithBias", "gradient_tape/conv2d/Conv2DBackpropFilter", "convolution"),
    ("_MklMatMul", "gradient_tape/dense/MatMul", "matmul"),
    ("BatchMatMulV2", "", "matmul"),
    ("_MklNativeMaxPoolGrad", "gradient_tape/max_pooling2d/MaxPoolGrad", "reduction"),
    ("ReluGrad", "gradient_tape/conv2d/ReluGrad", "elementwise"),
    ("Mul", "StatefulPartitionedCall/adam/Mul_19", "optimizer"),
    ("AssignSubVariableOp", "StatefulPartitionedCall/rmsprop/AssignSubVariableOp", "optimizer"),
    ("ResourceApplyAdam", "", "optimizer"),
    ("MemcpyHtoD", "", "copy"),
    ("Dataset", "Iterator::Root::Prefetch", "input"),
    ("IDLE", "IDLE", "idle"),
    ("StridedSlice", "sequential/flatten/strided_slice", "other"),
])
def test_operations_fall_into_their_categories(op_type, name, expected):
    assert op_category(op_type, name, optimizer="adam") == expected


def test_a_summary_sums_to_one_with_idle_its_own_share():
    rows = [{"type": "IDLE", "operation": "IDLE", "occurrences": 0, "self_time_us": 700.0},
            {"type": "Conv2D", "operation": "conv", "occurrences": 5, "self_time_us": 200.0},
            {"type": "MatMul", "operation": "dense", "occurrences": 5, "self_time_us": 60.0},
            {"type": "Relu", "operation": "relu", "occurrences": 5, "self_time_us": 40.0}]
    summary = summarise_ops(rows)
    assert set(summary["categories"]) == set(CATEGORIES)
    assert sum(summary["categories"].values()) == pytest.approx(1)
    assert summary["categories"]["idle"] == pytest.approx(0.7)
    assert summary["busy_categories"]["convolution"] == pytest.approx(200 / 300)
    assert [op["operation"] for op in summary["top_ops"]] == ["conv", "dense", "relu"]
    profile = {**summary, "basis": "host", "wall_s": 0.0005, "steps": 5, "cores": 2}
    text = explain_idle(profile, {"input_wait_share": 0.25, "host_share": 0.1, "device_share": 0.65})
    assert "0.60 of the 2 cores busy" in text and "25 % of a step waits for input" in text
    with pytest.raises(ValueError, match="no operation time"):
        summarise_ops([])


# --- the passes, on tiny models in this process ----------------------------------------------------

def _fit_and_break_down(data, *, steps_per_execution: int = 1, samples: int, batch: int, **options):
    import keras

    from colabkit.training.breakdown import measure_breakdown
    from colabkit.training.fit import fit
    from colabkit.training.timer import TrainingTimer

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(1)])
    model.compile("adam", "mse", steps_per_execution=steps_per_execution)
    timer = TrainingTimer(global_batch_size=batch, dataset_size=samples)
    fit(model, data, epochs=3, callbacks=[timer], verbose=0)
    before = [weight.copy() for weight in model.get_weights()]
    found = measure_breakdown(model, data, timer.metrics(), CpuSetup(), target_s=0.25, **options)
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))  # the passes left it as it was
    return found


def _arrays(samples: int):
    rng = np.random.default_rng(0)
    return rng.random((samples, 8), dtype="float32"), rng.random((samples, 1), dtype="float32")


def test_an_input_pipeline_slow_on_purpose_bounds_the_run():
    import tensorflow as tf

    from colabkit.training.setup import make_dataset

    def slow(x, y):
        time.sleep(0.05)  # 50 ms per batch: far longer than the tiny model's step, even on a busy host
        return x, y

    x, y = _arrays(256)
    data = (make_dataset(x, y, batch_size=32, shuffle=True)
            .map(lambda a, b: tf.numpy_function(slow, [a, b], [tf.float32, tf.float32], stateful=True))
            .map(lambda a, b: (tf.ensure_shape(a, [None, 8]), tf.ensure_shape(b, [None, 1]))))
    found = _fit_and_break_down(data, samples=256, batch=32)
    metrics = found.metrics
    assert metrics["bound_by"] == "input" and metrics["input_wait_share"] > 0.5, found.describe()
    # the pipeline alone is about as slow as the run (at most 32 / 0.05 s = 640 samples/s, a bound its sleep sets);
    # the device far faster (a step under 9 ms: the tiny model's takes about 1 ms here)
    assert metrics["input_samples_per_s"] < 700 < 5 * 700 < metrics["device_samples_per_s"]
    assert sum(metrics[name] for name in SHARES) == pytest.approx(1)
    section = found.section
    assert section["measured"] and section["input"]["samples"] % 32 == 0 and section["seconds"]["total"] > 0
    assert "same cores" in section["device_is"] and set(section["method"]) == {"input", "memory", "device", "shares"}


def test_skipped_on_request_every_metric_is_there_and_says_why():
    from colabkit.training.breakdown import measure_breakdown
    from colabkit.training.shares import BREAKDOWN_METRICS

    found = measure_breakdown(None, None, {"samples_per_s": 10.0}, CpuSetup(), enabled=False)
    assert found.metrics == dict.fromkeys(BREAKDOWN_METRICS)
    assert found.record_fields() == {"breakdown": {"measured": False, "reason": "breakdown=False: skipped on request"}}
    one_epoch = measure_breakdown(None, None, {"samples_per_s": None}, CpuSetup())
    assert one_epoch.section["reason"] == "the run has no steady throughput to break down (one epoch only)"
    # a profile asked for where the passes are not taken is said not taken, never dropped unsaid
    profiled = measure_breakdown(None, None, {"samples_per_s": None}, CpuSetup(), profile_steps=5)
    assert profiled.section["reason"].endswith("(one epoch only); the profile of 5 steps asked for was not taken")
    assert "op_breakdown" not in profiled.record_fields() and "not taken" in profiled.describe()


def test_a_profile_without_a_trace_folder_or_a_pipeline_it_cannot_iterate_is_a_colabkit_error():
    from colabkit.errors import ColabkitError
    from colabkit.training.breakdown import input_rate, measure_breakdown

    never_run = object()  # refused before a pass could touch the model or its data
    with pytest.raises(ColabkitError, match="profile_steps > 0 needs a trace_dir"):
        measure_breakdown(never_run, never_run, {"samples_per_s": 10.0}, CpuSetup(), profile_steps=5)
    with pytest.raises(ColabkitError, match="cannot be iterated alone"):
        input_rate([np.zeros((4, 2))])


# --- a profile of the CNN, read back with the converter ------------------------------------------------

def _cnn_run():
    import keras

    from colabkit.training.fit import fit
    from colabkit.training.setup import make_dataset
    from colabkit.training.timer import TrainingTimer

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.random((512, 28, 28, 1), dtype="float32")
    y = keras.utils.to_categorical(rng.integers(0, 10, 512), 10)
    data = make_dataset(x, y, batch_size=128, shuffle=True)
    model = keras.Sequential([  # Alyafeai 2018's CNN, as the notebook builds it
        keras.Input((28, 28, 1)), keras.layers.Conv2D(64, 2, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(2), keras.layers.Dropout(0.3),
        keras.layers.Conv2D(32, 2, padding="same", activation="relu"), keras.layers.MaxPooling2D(2),
        keras.layers.Dropout(0.3), keras.layers.Flatten(), keras.layers.Dense(256, activation="relu"),
        keras.layers.Dropout(0.5), keras.layers.Dense(10, activation="softmax")])
    model.compile(keras.optimizers.Adam(0.001), "categorical_crossentropy")
    timer = TrainingTimer(global_batch_size=128, dataset_size=512)
    fit(model, data, epochs=2, callbacks=[timer], verbose=0)
    return model, data, timer.metrics()


def test_five_profiled_cnn_steps_load_in_the_converter_and_break_down(tmp_path):
    pytest.importorskip("xprof")
    from colabkit.training.breakdown import measure_breakdown
    from colabkit.training.profile import read_op_stats, trace_files

    model, data, metrics = _cnn_run()
    found = measure_breakdown(model, data, metrics, CpuSetup(), profile_steps=5, trace_dir=tmp_path / "run.profile",
                              target_s=0.2)
    profile = found.record_fields()["op_breakdown"]
    assert profile["profiler"] == "tf.profiler.experimental" and profile["steps"] == 5 and profile["reason"] is None
    files = trace_files(tmp_path / "run.profile")
    assert [str(path.relative_to(tmp_path / "run.profile")) for path in files] == profile["trace_files"]
    rows, basis = read_op_stats(files)  # TensorBoard's profile plugin's own converter loads the trace
    assert basis == "host" and any(row["type"] == "IDLE" for row in rows)
    shares = profile["categories"]
    assert sum(shares.values()) == pytest.approx(1, abs=0.01) and 0 < shares["idle"] < 1
    busy = profile["busy_categories"]  # of the busy time, convolutions and matrix products take the largest share
    others = max(value for name, value in busy.items() if name not in ("convolution", "matmul"))
    assert busy["convolution"] + busy["matmul"] > others, busy
    assert profile["wall_s"] > 0 and profile["busy_cores"] > 0 and "waiting on each other" in profile["idle_explained"]


def test_without_the_converter_the_trace_is_kept_and_the_record_says_why(tmp_path, monkeypatch):
    import colabkit.training.profile as profile_module

    monkeypatch.setattr(profile_module, "converter_version", lambda: None)
    model, data, _ = _cnn_run()
    profile = profile_module.capture_profile(model, data, 2, tmp_path / "p")
    assert "categories" not in profile
    assert "needs the profile extra" in profile["reason"] and profile["trace_files"]
    assert (tmp_path / "p" / profile["trace_files"][0]).stat().st_size > 0

