"""The forecasting pieces of the time-series notebook, each against values worked out by hand."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from colabkit.errors import (
    DataError,
    DataFormatError,
    DataSourceWarning,
    UnknownDatasetError,
)
from colabkit.training import timeseries
from colabkit.training.timeseries import MinMaxScaler, WarmupMSE, tile_windows

NAMES = ["temperature", "wind speed", "pressure"]
UNITS = ["degC", "m/s", "hPa"]


# --- the loss ignores the warm-up ---------------------------------------------------------------

def test_errors_only_in_the_warmup_steps_cost_nothing():
    y_true = np.zeros((2, 10, 3), np.float32)
    y_pred = np.zeros((2, 10, 3), np.float32)
    y_pred[:, :4, :] = 5.0  # wildly wrong, but only in the first 4 steps
    assert float(WarmupMSE(4)(y_true, y_pred)) == 0.0
    assert float(WarmupMSE(3)(y_true, y_pred)) > 0  # one of the wrong steps is scored now


def test_the_loss_is_the_mean_over_every_scored_value():
    y_true = np.zeros((2, 6, 3), np.float32)
    y_pred = np.zeros((2, 6, 3), np.float32)
    y_pred[0, 5, 1] = 2.0  # one scored error of 2 in sequence 0: squared 4
    y_pred[1, 2, 0] = 1.0  # one scored error of 1 in sequence 1: squared 1
    # warm-up 2: each sequence scores 4 steps x 3 targets = 12 values; 24 values in all
    assert float(WarmupMSE(2)(y_true, y_pred)) == pytest.approx((4 + 1) / 24)


def test_a_compiled_model_reports_zero_loss_for_warmup_only_errors():
    import keras

    model = keras.Sequential([keras.Input(shape=(None, 3)), keras.layers.Dense(3, use_bias=False, kernel_initializer="zeros")])
    model.compile(optimizer="rmsprop", loss=WarmupMSE(5))
    x = np.ones((4, 12, 3), np.float32)
    y = np.zeros((4, 12, 3), np.float32)
    y[:, :5] = 1.0  # the zero model is wrong exactly in the warm-up
    assert model.evaluate(x, y, batch_size=2, verbose=0) == 0.0
    y[:, 5:] = 0.5
    assert model.evaluate(x, y, batch_size=2, verbose=0) == pytest.approx(0.25)


def test_windows_no_longer_than_the_warmup_are_refused():
    with pytest.raises(ValueError, match="score nothing"):
        WarmupMSE(6)(np.zeros((1, 6, 3), np.float32), np.zeros((1, 6, 3), np.float32))
    with pytest.raises(ValueError, match="warmup_steps must be >= 0"):
        WarmupMSE(-1)


def test_the_loss_survives_serialization_with_its_warmup():
    import keras

    restored = keras.losses.deserialize(keras.losses.serialize(WarmupMSE(7)))
    assert isinstance(restored, WarmupMSE) and restored.warmup_steps == 7


# --- scaling and physical units -------------------------------------------------------------------

def test_min_max_scaler_maps_the_fitted_range_to_0_1_and_back():
    train = np.array([[-10.0, 0.0, 990.0], [30.0, 20.0, 1030.0], [10.0, 5.0, 1000.0]])
    scaler = MinMaxScaler.fit(train)
    np.testing.assert_allclose(scaler.transform(train), [[0, 0, 0], [1, 1, 1], [0.5, 0.25, 0.25]])
    assert scaler.transform(train).dtype == np.float32
    # outside the training range maps outside [0, 1]: nothing is clipped
    np.testing.assert_allclose(scaler.transform([[50.0, -4.0, 1010.0]]), [[1.5, -0.2, 0.5]], rtol=1e-6)
    np.testing.assert_allclose(scaler.inverse_transform(scaler.transform(train)), train, rtol=1e-6)


def test_a_constant_column_is_shifted_not_divided_by_zero():
    scaler = MinMaxScaler.fit([[3.0, 1.0], [3.0, 2.0]])
    np.testing.assert_allclose(scaler.transform([[3.0, 1.5], [4.0, 2.0]]), [[0.0, 0.5], [1.0, 1.0]])


def test_a_scaler_refuses_nan_and_empty_data():
    with pytest.raises(DataError, match="1 NaN"):
        MinMaxScaler.fit([[1.0], [np.nan]])
    with pytest.raises(DataError, match="non-empty"):
        MinMaxScaler.fit(np.zeros((0, 3)))


def test_mae_is_in_physical_units_through_the_scaler():
    # temperature spans 40 degC, wind 20 m/s, pressure 40 hPa in the training part
    scaler = MinMaxScaler.fit([[-10.0, 0.0, 990.0], [30.0, 20.0, 1030.0]])
    true_scaled = np.array([[0.5, 0.5, 0.5], [0.25, 0.1, 0.75]])
    predicted_scaled = true_scaled + np.array([[0.05, -0.1, 0.0], [-0.05, 0.1, 0.025]])
    scores = timeseries.mean_absolute_errors(scaler.inverse_transform(true_scaled),
                                             scaler.inverse_transform(predicted_scaled), NAMES)
    # scaled errors 0.05 -> 2 degC; 0.1 -> 2 m/s; (0 + 0.025) / 2 -> 0.5 hPa
    assert scores == {"mae_temp_c": pytest.approx(2.0), "mae_wind_ms": pytest.approx(2.0),
                      "mae_pressure_hpa": pytest.approx(0.5)}


def test_comparison_with_persistence_scores_both_and_says_which_is_better():
    truth = np.array([[10.0, 2.0, 1000.0], [12.0, 4.0, 1002.0]])
    model = truth + [[1.0, 1.0, 0.0], [-1.0, 1.0, 0.0]]
    persistence = truth + [[3.0, 0.0, 1.0], [3.0, 0.0, -3.0]]
    metrics, rows = timeseries.compare_with_persistence(truth, model, persistence, NAMES, UNITS)
    assert metrics == {"mae_temp_c": 1.0, "mae_wind_ms": 1.0, "mae_pressure_hpa": 0.0,
                       "persistence_mae_temp_c": 3.0, "persistence_mae_wind_ms": 0.0,
                       "persistence_mae_pressure_hpa": 2.0}
    assert [row["beats_persistence"] for row in rows] == [True, False, True]
    assert rows[1] == {"name": "wind speed", "unit": "m/s", "mae": 1.0, "persistence_mae": 0.0,
                       "beats_persistence": False}


def test_metric_names_only_for_targets_in_the_units_they_promise():
    timeseries.check_target_units(NAMES, ["degC", "m/s", "hPa (mbar, station level)"])
    timeseries.check_target_units(NAMES, ["degC", "m/s", "mbar"])  # Jena's pressure
    with pytest.raises(DataFormatError, match="'temperature' is in 'K'"):
        timeseries.check_target_units(NAMES, ["K", "m/s", "hPa"])
    with pytest.raises(DataFormatError, match="no metric name for target 'humidity'"):
        timeseries.check_target_units(["humidity"], ["%"])


# --- persistence and splits --------------------------------------------------------------------

class _Weather:
    """Just what persistence_forecast and shifted_arrays read from a WeatherData."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame, self.target_columns = frame, ("T", "W", "P")


def test_persistence_for_hour_t_plus_shift_is_the_value_at_hour_t():
    from colabkit.data.weather import shifted_arrays

    hours = pd.date_range("2001-01-01", periods=30, freq="h")
    frame = pd.DataFrame({"T": np.arange(30.0), "W": 100 + np.arange(30.0), "P": 1000 + np.arange(30.0)}, index=hours)
    forecast = timeseries.persistence_forecast(_Weather(frame), 24)
    _, y = shifted_arrays(frame, ["T"], ["T", "W", "P"], 24)
    assert forecast.shape == y.shape == (6, 3)
    np.testing.assert_array_equal(forecast[:, 0], np.arange(6.0))  # the value now...
    np.testing.assert_array_equal(y[:, 0], 24 + np.arange(6.0))  # ...for the value 24 hours later
    with pytest.raises(DataError):
        timeseries.persistence_forecast(_Weather(frame), 30)


def test_split_points_train_on_90_percent_then_halve_the_rest_in_time():
    assert timeseries.split_points(1000) == (900, 950)
    assert timeseries.split_points(8736) == (7862, 8299)  # the offline substitute's rows at shift 24
    with pytest.raises(DataError, match="too few"):
        timeseries.split_points(5)
    with pytest.raises(ValueError):
        timeseries.split_points(1000, train_split=1.0)


def test_unknown_dataset_is_a_typed_error_naming_the_known_ones():
    with pytest.raises(UnknownDatasetError, match="'weather_denmark', 'jena_climate'"):
        timeseries.load_weather_series("weather_london", "offline")


def test_the_jena_substitute_loads_by_name():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataSourceWarning)
        loaded = timeseries.load_weather_series("jena_climate", "offline")
    assert loaded.provenance["dataset"] == "jena_climate" and loaded.target_names == tuple(NAMES)


# --- held-out windows ----------------------------------------------------------------------------

@pytest.mark.parametrize("start, stop, warmup, max_length, multiple", [
    (7862, 8299, 8, 48, 1), (7862, 8299, 8, 48, 8), (100, 101, 5, 10, 1), (900, 1000, 50, 1344, 2),
    (30000, 63000, 50, 1344, 8),
])
def test_tiling_scores_every_row_once_in_equal_windows(start, stop, warmup, max_length, multiple):
    tiling = tile_windows(start, stop, warmup_steps=warmup, max_length=max_length, multiple=multiple)
    rows = np.arange(stop + 5, dtype=float)[:, None]
    windows = tiling.cut(rows)
    assert windows.shape == (tiling.count, tiling.length, 1)
    assert tiling.count % multiple == 0 and tiling.length <= max_length
    # the scored parts, in order, are exactly the rows first_scored..stop-1
    np.testing.assert_array_equal(tiling.scored(windows)[:, 0], np.arange(tiling.first_scored, stop))
    assert tiling.stop == stop and 0 <= tiling.first_scored - start < tiling.count
    # each window's warm-up is the rows just before its scored part
    assert all(window[0, 0] == window_start for window, window_start in zip(windows, tiling.starts))


def test_tiling_refuses_a_part_too_short_for_its_windows():
    with pytest.raises(DataError, match="too few for 8 windows"):
        tile_windows(100, 104, warmup_steps=5, max_length=20, multiple=8)
    with pytest.raises(ValueError, match="must exceed warmup_steps"):
        tile_windows(100, 200, warmup_steps=20, max_length=20)


def test_tiling_cannot_cut_past_the_series():
    tiling = tile_windows(10, 50, warmup_steps=2, max_length=12)
    with pytest.raises(DataError, match="ends at row 50"):
        tiling.cut(np.zeros((40, 1)))


# --- random training windows -----------------------------------------------------------------------

def test_random_windows_are_contiguous_aligned_and_of_fixed_shape():
    rows = 200
    x = np.stack([np.arange(rows), -np.arange(rows)], axis=1).astype(np.float32)
    y = (np.arange(rows, dtype=np.float32) * 10)[:, None].repeat(3, axis=1)
    dataset = timeseries.random_windows(x, y, sequence_length=16, batch_size=8, seed=3)
    assert tuple(dataset.element_spec[0].shape) == (8, 16, 2) and tuple(dataset.element_spec[1].shape) == (8, 16, 3)
    starts = []
    for x_batch, y_batch in dataset.take(25):
        x_batch, y_batch = x_batch.numpy(), y_batch.numpy()
        first = x_batch[:, 0, 0]
        np.testing.assert_array_equal(x_batch[:, :, 0], first[:, None] + np.arange(16))  # consecutive hours
        np.testing.assert_array_equal(x_batch[:, :, 1], -x_batch[:, :, 0])
        np.testing.assert_array_equal(y_batch[:, :, 0], 10 * x_batch[:, :, 0])  # targets of the same hours
        starts.extend(first.tolist())
    assert min(starts) >= 0 and max(starts) <= rows - 16
    assert len(set(starts)) > 100  # 200 draws over 185 possible starts: random, not a fixed few


def test_random_windows_repeat_the_same_draws_for_the_same_seed_only():
    x = np.arange(100, dtype=np.float32)[:, None]
    first = lambda seed: next(iter(timeseries.random_windows(x, x, sequence_length=5, batch_size=16, seed=seed)))[0]
    np.testing.assert_array_equal(first(1).numpy(), first(1).numpy())
    assert not np.array_equal(first(1).numpy(), first(2).numpy())


def test_a_window_longer_than_the_training_part_is_a_data_error():
    with pytest.raises(DataError, match="does not fit in the 10 training rows"):
        timeseries.random_windows(np.zeros((10, 2)), np.zeros((10, 3)), sequence_length=11, batch_size=2, seed=0)


def test_forecast_excerpt_keeps_the_first_points_per_series_and_target():
    stamps = pd.date_range("2001-01-02", periods=5, freq="h")
    truth = np.arange(15.0).reshape(5, 3)
    excerpt = timeseries.forecast_excerpt(stamps, {"true": truth, "predicted": truth + 0.5}, NAMES, UNITS, 3)
    assert excerpt["points"] == 3 and excerpt["timestamps"][0] == "2001-01-02 00:00:00"
    assert excerpt["true"]["wind speed"] == [1.0, 4.0, 7.0] and excerpt["predicted"]["pressure"] == [2.5, 5.5, 8.5]
