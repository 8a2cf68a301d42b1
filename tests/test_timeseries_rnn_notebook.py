"""The weather-GRU notebook through papermill: a smoke sweep on the offline data, the real-data path
on the weather-denmark fixture archive, and early stopping on a plateau built on purpose."""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
import yaml
from data_fixtures import sha256, weather_tarball, weather_weeks_frame
from helpers import REPO, execute_notebook

from colabkit.experiments import get
from colabkit.records.record import read_record
from colabkit.sweep.plan import plan
from colabkit.sweep.driver import run_sweep

pytestmark = pytest.mark.notebook

# What Keras 3 prints when a callback's monitored metric is missing (Sarkar 2018's, every epoch):
# EarlyStopping and ReduceLROnPlateau "...conditioned on metric `val_loss` which is not available",
# ModelCheckpoint "Can save best model only with val_loss available".
MISSING_VALIDATION = re.compile(r"which is not available|only with val_loss available")


def gru_params(inputs: int, units: int, targets: int = 3) -> int:
    """Keras's GRU (reset_after: two bias vectors per gate) then Dense(targets)."""
    return 3 * (inputs * units + units * units + 2 * units) + units * targets + targets


def notebook_text(executed) -> str:
    """Every output of every cell, as one string."""
    chunks = []
    for cell in executed.cells:
        for output in cell.get("outputs", []):
            chunks.append(output.get("text", ""))
            chunks.extend(str(value) for value in output.get("data", {}).values())
            chunks.append(" ".join(output.get("traceback", [])))
    return "\n".join(chunks)


def count_images(executed) -> int:
    return sum("image/png" in output.get("data", {}) for cell in executed.cells for output in cell.get("outputs", []))


def check_validation_drove_the_callbacks(record):
    """val_loss every epoch, the schedule ReduceLROnPlateau derives from it, the restored best weights."""
    history, metrics = record["history"], record["metrics"]
    val_loss, learning_rate = history["val_loss"], history["learning_rate"]
    assert len(val_loss) == len(history["loss"]) == metrics["epochs_run"] == len(learning_rate)
    assert metrics["val_loss"] == pytest.approx(min(val_loss))
    assert metrics["best_epoch"] == int(np.argmin(val_loss)) + 1
    # the checkpoint of the best epoch was restored: the host recomputes that epoch's val_loss
    assert metrics["val_loss_restored"] == pytest.approx(metrics["val_loss"], rel=1e-4)
    # ReduceLROnPlateau (patience 0, factor 0.1, min_lr 1e-4, Keras's min_delta 1e-4) followed val_loss
    best = None
    for epoch in range(len(val_loss) - 1):
        improved = best is None or val_loss[epoch] + 1e-4 < best
        best = val_loss[epoch] if improved else best
        current = learning_rate[epoch]
        expected = current if improved or current <= np.float32(1e-4) else max(current * 0.1, 1e-4)
        assert learning_rate[epoch + 1] == pytest.approx(expected, rel=1e-5), (epoch, val_loss, learning_rate)
    assert all(epoch["validation_s"] > 0 for epoch in record["timings"]["epochs"])  # validation ran, timed apart


def check_forecasts(record, plot_hours: int):
    metrics = record["metrics"]
    names = ("temp_c", "wind_ms", "pressure_hpa")
    for name in names:
        assert metrics[f"mae_{name}"] > 0 and metrics[f"persistence_mae_{name}"] > 0
    assert math.isfinite(metrics["test_loss"]) and math.isfinite(metrics["persistence_test_loss"])
    assert metrics["beats_persistence"] == (metrics["test_loss"] < metrics["persistence_test_loss"])
    assert [row["name"] for row in record["evaluation"]["targets"]] == ["temperature", "wind speed", "pressure"]
    predictions = record["predictions"]
    points = predictions["points"]
    assert points == min(plot_hours, record["windows"]["test"]["scored_steps"])
    assert len(predictions["timestamps"]) == points
    for series in ("true", "predicted", "persistence"):
        assert all(len(predictions[series][name]) == points for name in predictions["target_names"])
    # the record's excerpt and its MAE agree: the excerpt is the start of the scored test part
    truth = np.array(predictions["true"]["temperature"])
    persistence = np.array(predictions["persistence"]["temperature"])
    assert np.abs(truth - persistence).mean() > 0


def test_smoke_sweep_on_offline_data_writes_record_html_and_log_without_missing_val_loss(tmp_path):
    grid = yaml.safe_load((REPO / "parameters" / "timeseries_rnn.yaml").read_text())
    grid["notebook"] = str(REPO / grid["notebook"])
    grid["presets"]["smoke"]["grid"]["batch_size"] = [32]  # one combination of the committed smoke preset
    grid["fixed"]["data_source"] = "offline"
    grid_path = tmp_path / "timeseries_rnn.yaml"
    grid_path.write_text(yaml.safe_dump(grid))
    (outcome,) = run_sweep(plan([grid_path], preset="smoke", device="cpu", out=tmp_path / "out"),
                           available={"cpu": 1}, echo=lambda line: None)
    base = tmp_path / "out" / "timeseries_rnn" / "cpu" / "batch_size-32"
    record = read_record(base.with_suffix(".json"))
    assert outcome.status == "ok" == record["status"], outcome.message
    assert base.with_suffix(".html").stat().st_size > 0
    log = base.with_suffix(".log").read_text()
    import nbformat

    executed = nbformat.read(base.with_suffix(".ipynb"), as_version=4)
    text = notebook_text(executed)
    assert not MISSING_VALIDATION.search(text) and not MISSING_VALIDATION.search(log)
    assert "OFFLINE SUBSTITUTE" in text and record["data"]["source"] == "offline"
    assert count_images(executed) >= 2  # loss per epoch, forecasts vs truth

    params, metrics = record["params"], record["metrics"]
    assert set(get("timeseries_rnn").metrics) <= set(metrics)  # every metric its declaration promises
    assert params["sequence_length"] == 48 and params["units"] == 8 and params["max_hours"] == 8760
    assert metrics["input_columns"] == 9 and metrics["params"] == gru_params(9, 8)
    assert metrics["epochs_run"] == 3 and metrics["early_stopping_epoch"] is None
    assert all(epoch["steps"] == 4 for epoch in record["timings"]["epochs"])
    assert metrics["global_batch_size"] == 32 and metrics["step_time_steady_ms"] > 0
    check_validation_drove_the_callbacks(record)
    check_forecasts(record, plot_hours=200)
    # the best weights live beside the record, as the checkpoint callback wrote them
    assert record["checkpoint"] == str(base.with_suffix(".weights.h5")) and base.with_suffix(".weights.h5").exists()
    windows = record["windows"]
    assert windows["validation"]["scored_steps"] + 40 >= 437 >= windows["validation"]["scored_steps"]


def test_real_path_on_the_weather_denmark_fixture_archive(tmp_path, monkeypatch, warm_kernels):
    # The loader finds a verified copy in its cache before it tries the network, so placing the
    # archive in $COLABKIT_DATA (inherited by the papermill kernel) takes the real path offline:
    # verify the archive, extract the CSV, resample the five cities, lay out the 20 inputs.
    cache = tmp_path / "cache"
    payload = weather_tarball(weather_weeks_frame(days=30))
    (cache / "weather_denmark").mkdir(parents=True)
    (cache / "weather_denmark" / "weather-denmark.tar.gz").write_bytes(payload)
    monkeypatch.setenv("COLABKIT_DATA", str(cache))
    # A learning rate of 10 drives the sigmoid outputs into saturation within an epoch, where val_loss
    # stops improving by ReduceLROnPlateau's min_delta (1e-4): the rate must be cut tenfold.
    executed, record_path = execute_notebook(
        "timeseries_rnn", tmp_path, warm_kernels, device="cpu", batch_size=16, sequence_length=48, units=8, epochs=4,
        steps_per_epoch=2, warmup_steps=8, learning_rate=10.0, patience=10, data_source="real", plot_hours=30)
    record = read_record(record_path)
    data, metrics = record["data"], record["metrics"]
    assert data["source"] == "real" and data["dataset"] == "weather_denmark" and data["sha256"] == sha256(payload)
    assert data["downloaded"] is False and data["processed_cache"] == "built"
    assert data["target_columns"] == ["Odense_Temp", "Odense_WindSpeed", "Odense_Pressure"]
    assert metrics["input_columns"] == 20 and metrics["params"] == gru_params(20, 8)
    assert "REAL" in notebook_text(executed) and not MISSING_VALIDATION.search(notebook_text(executed))
    check_validation_drove_the_callbacks(record)
    assert record["history"]["learning_rate"][-1] < 10.0  # the plateau cut the rate
    check_forecasts(record, plot_hours=30)
    assert record["predictions"]["timestamps"][0].startswith("2001-03-")


def test_early_stopping_fires_on_a_plateau_across_two_replicas(tmp_path, warm_kernels):
    # learning_rate 1e-30 (the declaration refuses 0): updates vanish below float32 resolution, so the
    # weights never change and val_loss never improves after the first epoch
    # and EarlyStopping(patience=2) stops after epoch 3 of 8.
    _, record_path = execute_notebook(
        "timeseries_rnn", tmp_path, warm_kernels, device="cpu:2", batch_size=8, sequence_length=40, units=4, epochs=8,
        steps_per_epoch=2, warmup_steps=8, learning_rate=1e-30, patience=2, data_source="offline", plot_hours=20)
    record = read_record(record_path)
    metrics, history = record["metrics"], record["history"]
    assert metrics["early_stopping_epoch"] == 3 and metrics["epochs_run"] == 3
    assert len(set(history["val_loss"])) == 1 and metrics["best_epoch"] == 1
    assert record["device"]["strategy"] == "MirroredStrategy" and metrics["global_batch_size"] == 16
    assert record["windows"]["validation"]["windows"] % 2 == 0 and record["windows"]["test"]["windows"] % 2 == 0
    check_validation_drove_the_callbacks(record)


def test_the_warning_pattern_catches_callbacks_left_without_validation_data(tmp_path):
    # The control for the tests above: Sarkar 2018's mistake (no validation data) trips the pattern.
    import keras

    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
    model.compile(optimizer="rmsprop", loss="mse")
    callbacks = [keras.callbacks.EarlyStopping(monitor="val_loss", patience=5),
                 keras.callbacks.ModelCheckpoint(str(tmp_path / "w.weights.h5"), monitor="val_loss",
                                                 save_best_only=True, save_weights_only=True),
                 keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.1, min_lr=1e-4, patience=0)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(np.zeros((8, 4)), np.zeros((8, 1)), epochs=1, callbacks=callbacks, verbose=0)
    messages = [str(warning.message) for warning in caught if MISSING_VALIDATION.search(str(warning.message))]
    assert len(messages) == 3, [str(warning.message) for warning in caught]


@pytest.mark.slow
def test_paper_size_model_trains_a_few_steps_on_the_cpu(tmp_path):
    # The tutorial's model and windows (GRU 512, 256 x 1344 hours, warm-up 50) for 2 steps per epoch:
    # the steady step time extrapolates to the tutorial's 100-step epoch (minutes per step on a CPU).
    _, record_path = execute_notebook(
        "timeseries_rnn", tmp_path, device="cpu", batch_size=256, sequence_length=1344, units=512, epochs=3,
        steps_per_epoch=2, warmup_steps=50, data_source="offline")
    record = read_record(record_path)
    metrics = record["metrics"]
    assert metrics["params"] == gru_params(9, 512)  # with the real data's 20 inputs: 821,763, as in the tutorial
    assert metrics["step_time_steady_ms"] > 0 and metrics["epochs_run"] == 3
    check_validation_drove_the_callbacks(record)


def test_the_tutorial_model_has_the_tutorial_parameter_count():
    # Hvass's model summary: GRU 820,224 and Dense 1,539 parameters on the 20 inputs.
    assert gru_params(20, 512) == 820_224 + 1_539
