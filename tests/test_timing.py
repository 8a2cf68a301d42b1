"""Timing: completion is forced inside the clock, cold is kept apart, statistics are right."""

from __future__ import annotations

import time
import types

import numpy as np
import pytest

import colabkit.timing.clock as clock_module
from colabkit.errors import MeasurementError
from colabkit.timing.clock import block_until_ready, measure, summarize, timed


class SlowToFinish:
    """A result whose device work finishes only when waited for (like a GPU tensor)."""

    waits = 0

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def block_until_ready(self) -> "SlowToFinish":
        SlowToFinish.waits += 1
        time.sleep(self.seconds)
        return self


def test_summarize_known_values():
    stats = summarize([1.0, 2.0, 3.0, 10.0])
    assert stats == {"n": 4, "min": 1.0, "median": 2.5, "mean": 4.0, "std": pytest.approx(np.std([1, 2, 3, 10], ddof=1))}
    assert summarize([5.0])["std"] == 0.0
    assert summarize([])["median"] is None


def test_clock_stops_only_after_the_device_finished():
    _, seconds = timed(lambda: SlowToFinish(0.03))
    assert seconds >= 0.03


def test_measure_separates_cold_call_and_discards_warmup(monkeypatch):
    now = [0]  # the clock's nanoseconds: a clock the test moves, so each call takes what it says, loaded host or not
    monkeypatch.setattr(clock_module, "time", types.SimpleNamespace(perf_counter_ns=lambda: now[0]))
    calls = []

    def work():
        calls.append(len(calls))
        now[0] += 250_000_000 if len(calls) == 1 else 2_000_000 + len(calls)  # the first call "compiles"
        return SlowToFinish(0.0)

    SlowToFinish.waits = 0
    measurement = measure(work, repeats=4, warmup=2)
    assert len(calls) == 1 + 2 + 4
    assert SlowToFinish.waits == 7  # every call was waited for
    assert len(measurement.warm_s) == 4 and measurement.warmup == 2
    assert measurement.cold_s == 0.25  # the first call alone
    assert measurement.warm_s == tuple((2_000_000 + call) / 1e9 for call in (4, 5, 6, 7))  # the warm-up's 2 and 3 not
    record = measurement.as_dict()
    assert record["median_s"] == pytest.approx(np.median(measurement.warm_s))
    assert record["repeats"] == 4 and record["cold_s"] == measurement.cold_s


def test_measure_rejects_nonsense_counts():
    with pytest.raises(MeasurementError, match="repeats must be at least 1"):
        measure(lambda: None, repeats=0)


def test_block_until_ready_walks_containers():
    SlowToFinish.waits = 0
    block_until_ready({"a": [SlowToFinish(0), SlowToFinish(0)], "b": (SlowToFinish(0),)})
    assert SlowToFinish.waits == 3


def test_block_until_ready_on_tensorflow_values():
    import tensorflow as tf

    value = tf.linalg.matmul(tf.ones((64, 64)), tf.ones((64, 64)))
    assert block_until_ready(value) is value
    strategy = tf.distribute.get_strategy()
    per_replica = strategy.run(lambda: tf.ones((2,)))
    assert block_until_ready(per_replica) is per_replica


def test_a_blas_baseline_child_that_hangs_or_prints_no_result_is_a_measurement_error(monkeypatch):
    import subprocess

    from colabkit.timing import baseline

    with pytest.raises(MeasurementError, match=r"ran past its 0\.01 s limit"):
        baseline.numpy_matmul_baseline(64, timeout_s=0.01)  # the child cannot even import NumPy in time
    for printed in ("", "warming up\nnot json\n"):
        monkeypatch.setattr(baseline.subprocess, "run",
                            lambda args, out=printed, **_: subprocess.CompletedProcess(args, 0, out, ""))
        with pytest.raises(MeasurementError, match="printed no JSON result"):
            baseline.numpy_matmul_baseline(64)


def test_a_blas_baseline_child_that_fails_is_one_line_naming_its_exception():
    from colabkit.timing import baseline

    with pytest.raises(MeasurementError) as caught:
        baseline.numpy_matmul_baseline(8, dtype="float7", min_time_s=0.01)  # the child's NumPy refuses it
    assert str(caught.value) == "the NumPy BLAS baseline failed: TypeError: data type 'float7' not understood"
