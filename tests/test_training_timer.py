"""The Keras timing callback on a toy model whose every step takes a known time: on a clock the test moves
(each step moves it STEP_S, nothing else does), so what each figure must be is known exactly, however busy the host."""

from __future__ import annotations

import types

import numpy as np
import pytest

STEP_S = 0.01
SAMPLES, BATCH = 64, 8  # 8 steps per epoch


class StepClock:
    """The timer's perf_counter_ns, moved only by the toy model's steps (training and validation alike)."""

    def __init__(self) -> None:
        self.ns = 0

    def __call__(self) -> int:
        return self.ns

    def step(self) -> None:
        self.ns += round(STEP_S * 1e9)


@pytest.fixture
def clock(monkeypatch) -> StepClock:
    import colabkit.training.timer as timer_module

    ticking = StepClock()
    monkeypatch.setattr(timer_module, "time", types.SimpleNamespace(perf_counter_ns=ticking))
    return ticking


def slow_toy_model(steps_per_execution: int, clock: StepClock):
    """A tiny classifier whose forward pass moves `clock` by STEP_S on the host, every step."""
    import keras
    import tensorflow as tf

    class Step(keras.layers.Layer):
        def call(self, inputs):
            def tick(value):
                clock.step()
                return value
            ticked = tf.py_function(tick, [inputs], inputs.dtype)
            ticked.set_shape(inputs.shape)
            return ticked

    model = keras.Sequential([keras.Input((4,)), Step(), keras.layers.Dense(3, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"],
                  steps_per_execution=steps_per_execution, jit_compile=False)
    return model


def toy_data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(SAMPLES, 4)).astype("float32")
    return x, (x[:, 0] > 0).astype("int64")


@pytest.mark.parametrize("steps_per_execution", [1, 4])
def test_timings_add_up_to_the_measured_fit_time(steps_per_execution, clock):
    from colabkit.training.timer import TrainingTimer

    x, y = toy_data()
    model = slow_toy_model(steps_per_execution, clock)
    timer = TrainingTimer(global_batch_size=BATCH, target_accuracy=0.0)
    start = clock()
    model.fit(x, y, batch_size=BATCH, epochs=3, validation_data=(x[:16], y[:16]), callbacks=[timer], verbose=0)
    fit_s = (clock() - start) / 1e9
    assert fit_s == pytest.approx(3 * (8 + 2) * STEP_S)  # each epoch's 8 training and 2 validation steps, no more

    assert len(timer.epochs) == 3
    for epoch in timer.epochs:
        assert epoch.steps == SAMPLES // BATCH and epoch.step_s == pytest.approx([STEP_S] * epoch.steps)
        assert epoch.train_s == pytest.approx(8 * STEP_S)  # every step inside the training part of the epoch
        # 16 validation samples = 2 batches, each a step too: validation is timed, and apart.
        assert epoch.validation_s == pytest.approx(2 * STEP_S)
        assert epoch.train_s + epoch.validation_s == pytest.approx(epoch.epoch_s, abs=1e-6)
    assert timer.train_time_s == pytest.approx(fit_s)  # nothing escapes the epoch clocks
    assert sum(epoch.epoch_s for epoch in timer.epochs) == pytest.approx(timer.train_time_s)

    metrics = timer.metrics()
    steady = timer.epochs[1:]
    assert metrics["epoch_time_first_s"] == timer.epochs[0].epoch_s  # the compile epoch stands apart
    assert metrics["epoch_time_steady_s"] == pytest.approx(np.median([e.epoch_s for e in steady]))
    step_ms = metrics["step_time_steady_ms"]  # from synchronised epoch clocks only
    assert step_ms == pytest.approx(1e3 * np.median([e.train_s / e.steps for e in steady]))
    assert step_ms == pytest.approx(1e3 * STEP_S)
    dispatch_ms = metrics["step_dispatch_interval_median_ms"]
    assert dispatch_ms == pytest.approx(1e3 * np.median([s for e in steady for s in e.step_s]))
    assert dispatch_ms == pytest.approx(step_ms)  # no step waits on another here: dispatch and step agree
    steady_train_s = sum(e.train_s for e in steady)
    assert metrics["samples_per_s"] == pytest.approx(len(steady) * SAMPLES / steady_train_s)
    assert metrics["sample_time_steady_us"] == pytest.approx(1e6 / metrics["samples_per_s"])
    assert metrics["steady_seconds"] == pytest.approx(steady_train_s)  # kept: is the run long enough?
    # steady epoch's training ~ steps x step time (the test the notebook's record also passes)
    assert metrics["train_epoch_time_steady_s"] == pytest.approx(8 * step_ms / 1e3)
    # target 0.0 is reached at the end of the first epoch
    assert metrics["time_to_accuracy_s"] == pytest.approx(timer.epochs[0].epoch_s)
    assert metrics["jit_compile"] is bool(model.jit_compile)  # what Keras compiled is on record


def test_throughput_counts_slow_steady_epochs_where_the_epoch_time_is_their_median():
    """Epochs that come in a fast and a slow mode: samples/s is every steady sample over the steady
    epochs' whole training time (what a clock around them measures), not samples / the median epoch,
    which would hide the slow epochs' cost; the epoch and step times stay the typical (median) epoch."""
    from colabkit.training.timer import EpochTiming, TrainingTimer

    timer = TrainingTimer(global_batch_size=100, dataset_size=250)
    timer.epochs = [EpochTiming(epoch, epoch_s=s, train_s=s, steps=3, samples=250)
                    for epoch, s in enumerate([9.0, 1.0, 1.0, 3.0])]  # a compile epoch, then fast, fast, slow
    metrics = timer.metrics()
    assert metrics["samples_per_s"] == pytest.approx(750 / 5.0)  # not 250 / 1.0 (median), nor with epoch 0
    assert metrics["sample_time_steady_us"] == pytest.approx(5.0 / 750 * 1e6)
    assert metrics["epoch_time_steady_s"] == 1.0 and metrics["step_time_steady_ms"] == pytest.approx(1e3 / 3)
    assert metrics["samples_per_epoch"] == 250


def test_unreached_target_and_single_epoch_give_none_not_a_number(clock):
    from colabkit.training.timer import TrainingTimer

    x, y = toy_data()
    timer = TrainingTimer(global_batch_size=BATCH, target_accuracy=1.5)
    slow_toy_model(1, clock).fit(x, y, batch_size=BATCH, epochs=1, validation_data=(x, y), callbacks=[timer], verbose=0)
    metrics = timer.metrics()
    assert metrics["time_to_accuracy_s"] is None
    assert metrics["epoch_time_steady_s"] is None and metrics["samples_per_s"] is None
    assert metrics["epoch_time_first_s"] > 0


def test_metrics_before_fit_is_a_clear_error():
    from colabkit.training.timer import TrainingTimer

    with pytest.raises(RuntimeError, match="passed to model.fit"):
        TrainingTimer(global_batch_size=8).metrics()


@pytest.mark.parametrize("batch_size, replicas, meaning, expected", [
    (256, 1, "per_replica", (256, 256)), (256, 8, "per_replica", (256, 2048)), (1024, 8, "global", (128, 1024))])
def test_batch_sizes(batch_size, replicas, meaning, expected):
    from colabkit.training.setup import batch_sizes

    assert batch_sizes(batch_size, replicas, meaning) == expected


def test_global_batch_must_split_evenly():
    from colabkit.training.setup import batch_sizes

    with pytest.raises(ValueError, match="does not split evenly over 3 replicas"):
        batch_sizes(256, 3, "global")


def test_evaluation_pipeline_pads_with_zero_weights_and_training_drops_remainder():
    from colabkit.training.setup import make_dataset

    x = np.arange(10, dtype="float32").reshape(10, 1)
    y = np.arange(10)
    batches = list(make_dataset(x, y, batch_size=4, static_shapes=True).as_numpy_iterator())
    assert [len(b[0]) for b in batches] == [4, 4, 4]  # static shapes
    weights = np.concatenate([b[2] for b in batches])
    assert weights.tolist() == [1] * 10 + [0, 0]  # every real sample once, padding weightless
    train = list(make_dataset(x, y, batch_size=4, shuffle=True, static_shapes=True).as_numpy_iterator())
    assert [len(b[0]) for b in train] == [4, 4]
    seen = np.concatenate([b[1] for b in make_dataset(x, y, batch_size=4, shuffle=True).as_numpy_iterator()])
    assert sorted(seen.tolist()) == list(range(10))  # without static shapes nothing is dropped


def test_subsample_takes_the_same_seeded_rows_of_every_array_in_their_order():
    from colabkit.training.setup import subsample

    x = np.arange(100).reshape(50, 2)
    y = np.arange(50) // 10  # grouped, as UCI HAR's windows are (by volunteer)
    x_small, y_small = subsample(20, x, y, seed=3)
    assert len(x_small) == len(y_small) == 20
    assert (x_small[:, 0] // 2 // 10 == y_small).all()  # rows stay paired across arrays
    assert (np.diff(x_small[:, 0]) > 0).all()  # original order, no repeats
    assert set(y_small.tolist()) == {0, 1, 2, 3, 4}  # a draw, not the first rows (all group 0-1)
    again, _ = subsample(20, x, y, seed=3)
    assert (again == x_small).all() and not (subsample(20, x, y, seed=4)[0] == x_small).all()
    whole = subsample(0, x, y)
    assert whole[0] is x and whole[1] is y and subsample(80, x)[0] is x


def test_subsample_rejects_negative_counts_and_unpaired_arrays():
    from colabkit.training.setup import subsample

    with pytest.raises(ValueError, match=">= 0"):
        subsample(-1, np.zeros(3))
    with pytest.raises(ValueError, match="differ in length"):
        subsample(2, np.zeros(3), np.zeros(4))


def test_batch_samples_count_the_partial_last_batch_of_each_pass():
    from colabkit.training.timer import TrainingTimer

    timer = TrainingTimer(global_batch_size=1024, dataset_size=4000)  # 3 full batches + 928
    assert [timer.batch_samples(step) for step in range(5)] == [1024, 1024, 1024, 928, 1024]
    assert sum(timer.batch_samples(step) for step in range(4)) == 4000  # not 4 x 1024 = 4096
    dropped = TrainingTimer(global_batch_size=1024, dataset_size=4000, drop_remainder=True)
    assert [dropped.batch_samples(step) for step in range(4)] == [1024] * 4  # 3 per pass, all full
    even = TrainingTimer(global_batch_size=1000, dataset_size=4000)
    assert [even.batch_samples(step) for step in range(5)] == [1000] * 5
    stream = TrainingTimer(global_batch_size=256)
    assert stream.batch_samples(7) == 256
    with pytest.raises(ValueError):
        TrainingTimer(global_batch_size=1024, dataset_size=1000, drop_remainder=True)


@pytest.mark.parametrize("steps_per_execution", [1, 4])
def test_per_sample_figures_use_the_samples_the_epoch_saw(steps_per_execution, clock):
    """60 samples at batch 8: 7 full batches and one of 4. Steps x batch would count 64."""
    import tensorflow as tf

    from colabkit.training.timer import TrainingTimer

    x, y = toy_data()
    x, y = x[:60], y[:60]
    model = slow_toy_model(steps_per_execution, clock)
    timer = TrainingTimer(global_batch_size=BATCH, dataset_size=len(x))
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)
    model.fit(data, epochs=3, callbacks=[timer], verbose=0)

    assert [epoch.steps for epoch in timer.epochs] == [8, 8, 8]
    assert [epoch.samples for epoch in timer.epochs] == [60, 60, 60]
    metrics = timer.metrics()
    steady = timer.epochs[1:]
    assert metrics["samples_per_epoch"] == 60
    assert metrics["samples_per_s"] == pytest.approx(2 * 60 / sum(e.train_s for e in steady))
    assert metrics["sample_time_steady_us"] == pytest.approx(1e6 * sum(e.train_s for e in steady) / 120)
    assert timer.timings()["epochs"][1]["samples"] == 60


def test_dropped_remainder_is_not_counted(clock):
    import tensorflow as tf

    from colabkit.training.timer import TrainingTimer

    x, y = toy_data()
    x, y = x[:60], y[:60]
    model = slow_toy_model(1, clock)
    timer = TrainingTimer(global_batch_size=BATCH, dataset_size=len(x), drop_remainder=True)
    model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH, drop_remainder=True), epochs=2,
              callbacks=[timer], verbose=0)
    assert [epoch.samples for epoch in timer.epochs] == [56, 56]
    assert timer.metrics()["samples_per_epoch"] == 56


def test_an_execution_cut_short_by_the_end_of_the_epoch_counts_the_steps_it_ran():
    from colabkit.training.timer import steps_in_execution

    assert steps_in_execution(0, 1, 3) == 2
    assert steps_in_execution(2, 3, 3) == 1  # Keras reports 2-3 for the pass's last batch alone
    assert steps_in_execution(4, 7) == 4  # epoch length unknown: as reported
    assert steps_in_execution(5, 5, 100) == 1
