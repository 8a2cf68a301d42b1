"""Sizes for runs by hand ("auto" resolved from the device, colabkit's Run.auto_sizes) and the estimate from
the first steps."""

from __future__ import annotations

import time

import numpy as np
import pytest

from colabkit.errors import ParameterError

SIZES = {"cpu": {"units": 32, "epochs": 5}, "gpu": {"units": 128, "epochs": 10}}


def run_on(kind: str, tmp_path):
    from colabkit.device.spec import DeviceSetup
    from colabkit.run import start_run

    return start_run("timeseries_rnn", params={"device": kind}, results_path=tmp_path / f"{kind}.json"), \
        DeviceSetup(kind, kind, None, 1)


def test_auto_takes_the_device_size_and_explicit_values_stay_and_the_record_keeps_them(tmp_path, capsys):
    run, cpu = run_on("cpu", tmp_path)
    assert run.auto_sizes(cpu, SIZES, units="auto", epochs=3) == (32, 3)
    assert run.sizes["used"] == {"units": 32, "epochs": 3} and run.sizes["auto"] == ["units"]
    gpu_run, gpu = run_on("gpu", tmp_path)
    assert gpu_run.auto_sizes(gpu, SIZES, units="auto", epochs="auto") == (128, 10)
    assert gpu_run.sizes["asked"] == {"units": "auto", "epochs": "auto"}
    assert gpu_run.sizes["used"] == {"units": 128, "epochs": 10}
    assert gpu_run.sizes["sized_for"] == "a free Colab T4 GPU" and gpu_run.sizes["auto"] == ["units", "epochs"]
    printed = capsys.readouterr().out.splitlines()
    assert "units=128" in printed[-1] and "a free Colab T4 GPU" in printed[-1]
    assert gpu_run.record(metrics={}, device=gpu) and gpu_run.written["sizes"] == gpu_run.sizes  # in the record
    run.auto_sizes(cpu, SIZES, units=8)
    assert "no parameter was" in capsys.readouterr().out and run.sizes["auto"] == []


def test_auto_without_a_size_for_the_device_is_an_error_not_a_guess(tmp_path):
    run, _ = run_on("tpu", tmp_path)
    from colabkit.device.spec import DeviceSetup

    with pytest.raises(ParameterError, match="units='auto' has no size for a tpu device"):
        run.auto_sizes(DeviceSetup("tpu", "tpu", None, 8), SIZES, units="auto")


def test_format_duration_reads_like_an_estimate():
    from colabkit.training.estimate import format_duration

    assert format_duration(3 * 3600 + 10 * 60 + 12) == "~3 h 10 min"
    assert format_duration(4 * 60 + 20) == "~4 min 20 s"
    assert format_duration(25 * 60 + 20) == "~25 min"
    assert format_duration(35.4) == "~35 s"
    assert format_duration(float("nan")) == "unknown"


def test_estimate_remaining_is_steps_left_times_step_time():
    from colabkit.training.estimate import estimate_remaining

    assert estimate_remaining(10, 2000, 0.5) == pytest.approx(995.0)
    with pytest.raises(ValueError):
        estimate_remaining(10, 5, 0.5)


@pytest.mark.parametrize("steps_per_execution", [1, 2])
def test_fit_estimate_extrapolates_the_first_steps_to_the_whole_fit(steps_per_execution, monkeypatch):
    """A model whose every step takes 20 ms of the estimate's clock (a clock the test moves: nothing else moves
    it, so the figure is exact however busy the host): after the skipped and measured steps the estimate of the
    steps left (4 epochs x 10 steps in all) is their count x 20 ms, and it is printed once."""
    import types

    import keras
    import tensorflow as tf

    import colabkit.training.estimate as estimate_module
    from colabkit.training.estimate import FitEstimate

    now = [0.0]
    monkeypatch.setattr(estimate_module, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))

    class Sleep(keras.layers.Layer):
        def call(self, inputs):
            def nap(value):
                now[0] += 0.02
                return value
            slept = tf.py_function(nap, [inputs], inputs.dtype)
            slept.set_shape(inputs.shape)
            return slept

    model = keras.Sequential([keras.Input((3,)), Sleep(), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", steps_per_execution=steps_per_execution, jit_compile=False)
    printed = []
    estimate = FitEstimate(measure_steps=4, skip_steps=2, echo=printed.append)
    x = np.zeros((40, 3), "float32")
    model.fit(x, x[:, :1], batch_size=4, epochs=4, callbacks=[estimate], verbose=0)

    record = estimate.as_record()
    assert record["total_steps"] == 40 and record["after_steps"] in (6, 7)
    assert record["step_s"] == pytest.approx(0.02)  # each step took its 20 ms
    left = 40 - record["after_steps"]
    assert record["remaining_s"] == pytest.approx(left * record["step_s"])
    assert len(printed) == 1 and printed[0].startswith(f"estimate after {record['after_steps']} steps: ~")
    assert "at this rate" in printed[0]


def test_fit_estimate_covers_the_repeats_still_to_come():
    from colabkit.training.estimate import FitEstimate

    estimate = FitEstimate(measure_steps=2, skip_steps=0, repeats=3, steps_per_epoch=10, echo=lambda _: None)
    estimate.params = {"epochs": 2, "steps": 10}
    estimate.on_train_begin()
    estimate.on_epoch_begin(0)
    for batch in range(3):
        estimate.on_train_batch_begin(batch)
        time.sleep(0.01)
        estimate.on_train_batch_end(batch)
    record = estimate.as_record()
    assert record["total_steps"] == 60
    assert record["remaining_s"] == pytest.approx((20 - record["after_steps"] + 40) * record["step_s"])


@pytest.mark.parametrize("notebook", ["cnn_mnist", "dblstm_har", "timeseries_rnn"])
def test_every_parameter_line_is_declared_and_auto_sizes_accept_grid_integers(notebook):
    """papermill skips a parameter line it cannot parse (an `int | str` annotation, a second '=' in
    the comment), and the grids could then not set it: every assignment must be declared, and the
    "auto" parameters must take the integers the grids give."""
    import ast
    import json
    from pathlib import Path

    from colabkit.sweep.grids import declared_parameters

    path = Path(__file__).resolve().parent.parent / "notebooks" / f"{notebook}.ipynb"
    cell = next(c for c in json.loads(path.read_text())["cells"] if "parameters" in c["metadata"].get("tags", []))
    lines = ast.parse("".join(cell["source"])).body
    assigned = {node.target.id if isinstance(node, ast.AnnAssign) else node.targets[0].id
                for node in lines if isinstance(node, (ast.Assign, ast.AnnAssign))}
    annotated = {node.target.id for node in lines if isinstance(node, ast.AnnAssign)}
    declared = declared_parameters(path)
    assert assigned == set(declared)
    autos = [name for name, parameter in declared.items() if parameter.default == "auto" and name in annotated]
    assert autos, "the training notebooks size some parameters for the device"
    for name in autos:
        assert declared[name].problem(8) is None and declared[name].problem("auto") is None, name
