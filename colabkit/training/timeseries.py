"""Sequence-to-sequence forecasting as in Hvass-Labs tutorial #23, lifted out of the notebook.

Forecasts three weather targets `shift_steps` hours ahead: `split_points` (train on the first 90 %,
then validation and test in time order), `MinMaxScaler` (fitted on the training part only),
`random_windows` (the tutorial's batch generator), `WarmupMSE` (ignores each sequence's first
`warmup_steps`), `tile_windows` (held-out windows scoring each step once), `persistence_forecast`
and `mean_absolute_errors` (in physical units), and `Forecast`, all of them as the notebook uses them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np

from colabkit.errors import DataError, DataFormatError, UnknownDatasetError
from colabkit.training.batches import ArrayBatches, RandomWindows

# What each target is called in a metric's name, and the units that name promises.
METRIC_SUFFIXES = {"temperature": "temp_c", "wind speed": "wind_ms", "pressure": "pressure_hpa"}
UNIT_PREFIXES = {"temperature": ("degC",), "wind speed": ("m/s",), "pressure": ("hPa", "mbar")}


# --- data ---------------------------------------------------------------------------------------

def load_weather_series(dataset: str, data_source: str = "auto", max_hours: int = 0):
    """The hourly weather series `dataset` names: 'weather_denmark' (the tutorial's) or 'jena_climate';
    with `max_hours`, only its first hours (smoke runs)."""
    from colabkit.data import load_jena_climate, load_weather

    loaders = {"weather_denmark": load_weather, "jena_climate": load_jena_climate}
    if dataset not in loaders:
        raise UnknownDatasetError(f"unknown dataset {dataset!r}: expected one of {', '.join(map(repr, loaders))}")
    weather = loaders[dataset](data_source)
    return dataclasses.replace(weather, frame=weather.frame.iloc[:max_hours]) if max_hours else weather


def split_points(rows: int, train_split: float = 0.9, validation_share: float = 0.5) -> tuple[int, int]:
    """(train_end, validation_end): rows [0, train_end) train, then validation, then test.

    The first `train_split` of the rows train, as in the tutorial (`int(train_split * rows)`); the
    held-out rest is split in time, its first `validation_share` validating (early stopping,
    checkpoints, learning-rate schedule) and the remainder kept for the final scores only.
    """
    if not 0 < train_split < 1 or not 0 < validation_share < 1:
        raise ValueError(f"train_split and validation_share must lie in (0, 1), got {train_split}, {validation_share}")
    train_end = int(train_split * rows)
    validation_end = train_end + int(validation_share * (rows - train_end))
    if not 0 < train_end < validation_end < rows:
        raise DataError(f"{rows} rows are too few to split into train, validation and test parts")
    return train_end, validation_end


@dataclass(frozen=True)
class MinMaxScaler:
    """Per-column scaling to [0, 1] by the minimum and range of the data it was fitted on.

    As scikit-learn's MinMaxScaler: a constant column (range 0) is shifted, not divided. Values
    outside the fitted range map outside [0, 1]; that is what fitting on the training part alone
    means for the held-out parts.
    """

    minimum: np.ndarray
    scale: np.ndarray

    @classmethod
    def fit(cls, values: Any) -> MinMaxScaler:
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 2 or len(values) == 0:
            raise DataError(f"a scaler is fitted on a non-empty (rows, columns) array, got shape {values.shape}")
        if np.isnan(values).any():
            raise DataError(f"{int(np.isnan(values).sum())} NaN value(s) in the data the scaler is fitted on")
        minimum = values.min(axis=0)
        span = values.max(axis=0) - minimum
        return cls(minimum, np.where(span > 0, span, 1.0))

    def transform(self, values: Any) -> np.ndarray:
        """Scaled float32 values, (values - min) / range."""
        return ((np.asarray(values, dtype=np.float64) - self.minimum) / self.scale).astype(np.float32)

    def inverse_transform(self, scaled: Any) -> np.ndarray:
        """Back to the original units (float64): scaled * range + min. Works on (..., columns)."""
        return np.asarray(scaled, dtype=np.float64) * self.scale + self.minimum


def persistence_forecast(weather: Any, shift_steps: int) -> np.ndarray:
    """The trivial forecast "in shift_steps hours it will be as it is now", aligned with
    `weather.shifted_arrays(shift_steps)`: row t holds the targets at hour t, the forecast for
    y[t] (the targets at hour t + shift_steps)."""
    if not 1 <= shift_steps < len(weather.frame):
        raise DataError(f"shift_steps must be between 1 and {len(weather.frame) - 1}, got {shift_steps}")
    return weather.frame[list(weather.target_columns)].to_numpy(dtype=np.float64)[:-shift_steps]


# --- training windows ---------------------------------------------------------------------------

def random_windows(x: np.ndarray, y: np.ndarray, *, sequence_length: int, batch_size: int, seed: int):
    """An endless stream of batches of random windows: the tutorial's batch_generator.

    Each element is (x, y) of static shapes (batch_size, sequence_length, columns): every window
    starts at a uniformly drawn row of the training part. The stream never ends (bound an epoch with
    `steps_per_epoch`) and every batch is full; fixed shapes are what a TPU compiles for. On
    TensorFlow a tf.data pipeline whose draws come from `tf.data.Dataset.random` (seeded, different
    on every pass); on any other backend NumPy batches (colabkit.training.batches.RandomWindows,
    seeded per batch), so a JAX kernel never imports TensorFlow. The two draw different windows.
    """
    if len(x) != len(y):
        raise DataError(f"x and y differ in length: {len(x)} vs {len(y)}")
    if sequence_length < 1 or batch_size < 1:
        raise ValueError(f"sequence_length and batch_size must be >= 1, got {sequence_length}, {batch_size}")
    if len(x) < sequence_length:
        raise DataError(f"a window of {sequence_length} steps does not fit in the {len(x)} training rows")
    if keras.backend.backend() != "tensorflow":
        return RandomWindows(x, y, sequence_length=sequence_length, batch_size=batch_size, seed=seed)
    import tensorflow as tf

    starts = len(x) - sequence_length + 1
    x_all = tf.constant(np.asarray(x, dtype=np.float32))
    y_all = tf.constant(np.asarray(y, dtype=np.float32))
    offsets = tf.range(sequence_length, dtype=tf.int64)

    def windows(draws):
        rows = tf.math.floormod(draws, starts)[:, tf.newaxis] + offsets[tf.newaxis, :]  # (batch, steps)
        return tf.gather(x_all, rows), tf.gather(y_all, rows)

    dataset = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=True).map(windows, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


@dataclass(frozen=True)
class WindowTiling:
    """Equal windows over a series whose scored steps, all but each window's first
    `warmup_steps`, are the consecutive rows [first_scored, stop), each exactly once."""

    starts: tuple[int, ...]
    length: int
    warmup_steps: int

    @property
    def count(self) -> int:
        return len(self.starts)

    @property
    def scored_per_window(self) -> int:
        return self.length - self.warmup_steps

    @property
    def first_scored(self) -> int:
        return self.starts[0] + self.warmup_steps

    @property
    def stop(self) -> int:
        return self.starts[-1] + self.length

    def cut(self, values: np.ndarray) -> np.ndarray:
        """The windows of `values` (rows along axis 0): (count, length, columns)."""
        if self.stop > len(values):
            raise DataError(f"the tiling ends at row {self.stop}, the series has {len(values)} rows")
        return np.stack([values[start:start + self.length] for start in self.starts])

    def scored(self, windows: np.ndarray) -> np.ndarray:
        """The scored steps of per-window values (count, length, columns), in time order:
        (count * scored_per_window, columns), row i for series row first_scored + i."""
        windows = np.asarray(windows)
        if windows.shape[:2] != (self.count, self.length):
            raise ValueError(f"expected ({self.count}, {self.length}, ...) windows, got {windows.shape}")
        return windows[:, self.warmup_steps:].reshape(-1, *windows.shape[2:])

    def as_dict(self) -> dict[str, int]:
        return {"windows": self.count, "window_length": self.length, "warmup_steps": self.warmup_steps,
                "scored_steps": self.count * self.scored_per_window, "first_scored_row": self.first_scored,
                "stop_row": self.stop}


def tile_windows(start: int, stop: int, *, warmup_steps: int, max_length: int, multiple: int = 1) -> WindowTiling:
    """Windows that score the rows [start, stop) of a series once each, with a warm-up before each.

    Every window is `warmup_steps` of context followed by its share of the scored rows, so the
    first window's warm-up comes from the rows before `start` (the end of the preceding part:
    inputs the model could see at forecast time; their targets are never scored). The number of
    windows is the fewest that keeps windows within `max_length`, rounded up to a multiple of
    `multiple` (the replicas, so one batch of all windows splits evenly); windows are then shortened
    to share the rows equally, and the few rows that do not divide evenly (fewer than the number of
    windows) are dropped from the start of the scored range.
    """
    if warmup_steps < 0 or max_length <= warmup_steps:
        raise ValueError(f"max_length ({max_length}) must exceed warmup_steps ({warmup_steps}) >= 0")
    if multiple < 1:
        raise ValueError(f"multiple must be >= 1, got {multiple}")
    start = max(start, warmup_steps)  # the very first rows of a series have no context to warm up on
    span = stop - start
    count = math.ceil(max(span, 1) / (max_length - warmup_steps))
    count = math.ceil(count / multiple) * multiple
    per_window = span // count
    if per_window < 1:
        raise DataError(f"rows {start}-{stop} are too few for {count} windows (a multiple of {multiple})")
    first = stop - count * per_window
    starts = tuple(first - warmup_steps + index * per_window for index in range(count))
    return WindowTiling(starts, warmup_steps + per_window, warmup_steps)


def window_batch(x_windows: np.ndarray, y_windows: np.ndarray | None = None):
    """Exactly one batch holding all the windows (static shapes): a tf.data dataset on TensorFlow,
    NumPy batches (ArrayBatches) on any other backend."""
    element = (np.asarray(x_windows, np.float32),) if y_windows is None else (
        np.asarray(x_windows, np.float32), np.asarray(y_windows, np.float32))
    if keras.backend.backend() != "tensorflow":
        return ArrayBatches(element, batch_size=len(element[0]))
    import tensorflow as tf

    return tf.data.Dataset.from_tensors(element if y_windows is not None else element[0])


# --- loss and scores ----------------------------------------------------------------------------

@keras.saving.register_keras_serializable(package="colabkit")
class WarmupMSE(keras.losses.Loss):
    """Mean squared error over all steps but the first `warmup_steps` of each sequence.

    The tutorial's loss_mse_warmup: early in a sequence the recurrent state has seen too little
    of the series for a forecast, so those outputs are not trained on. The per-sequence means are
    averaged over the batch (every sequence scores the same number of steps, so this is the mean
    over every scored value); under a distribution strategy Keras scales it per replica.
    """

    def __init__(self, warmup_steps: int, name: str = "warmup_mse", **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
        self.warmup_steps = int(warmup_steps)

    def call(self, y_true, y_pred):
        steps = y_pred.shape[1]
        if steps is not None and steps <= self.warmup_steps:
            raise ValueError(f"sequences of {steps} steps score nothing after {self.warmup_steps} warm-up steps")
        y_true = keras.ops.cast(y_true, y_pred.dtype)
        error = y_pred[:, self.warmup_steps:, :] - y_true[:, self.warmup_steps:, :]
        return keras.ops.mean(keras.ops.square(error), axis=[1, 2])

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "warmup_steps": self.warmup_steps}


def check_target_units(target_names: Sequence[str], units: Sequence[str]) -> None:
    """Raise DataFormatError unless every target is in the unit its metric names promise
    (temperature degC, wind speed m/s, pressure hPa or mbar)."""
    for name, unit in zip(target_names, units, strict=True):
        if name not in UNIT_PREFIXES:
            raise DataFormatError(f"no metric name for target {name!r}; known: {', '.join(UNIT_PREFIXES)}")
        if not str(unit).startswith(UNIT_PREFIXES[name]):
            raise DataFormatError(f"target {name!r} is in {unit!r}, its metrics promise {UNIT_PREFIXES[name][0]}")


def mean_absolute_errors(y_true: Any, y_pred: Any, target_names: Sequence[str], prefix: str = "mae") -> dict[str, float]:
    """Per-target mean absolute error, in the units of the arrays given (pass physical values):
    {'<prefix>_temp_c': ..., '<prefix>_wind_ms': ..., '<prefix>_pressure_hpa': ...}."""
    y_true, y_pred = np.asarray(y_true, np.float64), np.asarray(y_pred, np.float64)
    if y_true.shape != y_pred.shape or y_true.ndim != 2 or y_true.shape[1] != len(target_names):
        raise ValueError(f"expected two (steps, {len(target_names)}) arrays, got {y_true.shape} and {y_pred.shape}")
    errors = np.abs(y_pred - y_true).mean(axis=0)
    return {f"{prefix}_{METRIC_SUFFIXES[name]}": float(error) for name, error in zip(target_names, errors)}


def compare_with_persistence(y_true: Any, predicted: Any, persistence: Any, target_names: Sequence[str],
                             units: Sequence[str]) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Score a forecast and the persistence forecast against the truth, all in physical units.

    Returns (metrics, rows): metrics holds 'mae_<target>' and 'persistence_mae_<target>' for every
    target; rows is one dict per target with its name, unit, both errors and whether the model's is
    the smaller.
    """
    model = mean_absolute_errors(y_true, predicted, target_names)
    baseline = mean_absolute_errors(y_true, persistence, target_names, prefix="persistence_mae")
    rows = []
    for name, unit in zip(target_names, units, strict=True):
        suffix = METRIC_SUFFIXES[name]
        mae, persistence_mae = model[f"mae_{suffix}"], baseline[f"persistence_mae_{suffix}"]
        rows.append({"name": name, "unit": unit, "mae": mae, "persistence_mae": persistence_mae,
                     "beats_persistence": mae < persistence_mae})
    return {**model, **baseline}, rows


def mean_squared_error(y_true: Any, y_pred: Any) -> float:
    """The mean of every squared difference (the loss's value over scored steps)."""
    y_true, y_pred = np.asarray(y_true, np.float64), np.asarray(y_pred, np.float64)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"shapes differ: {y_true.shape} vs {y_pred.shape}")
    return float(np.mean(np.square(y_pred - y_true)))


def forecast_excerpt(timestamps: Sequence[Any], series: dict[str, np.ndarray], target_names: Sequence[str],
                     units: Sequence[str], points: int) -> dict[str, Any]:
    """The first `points` steps of aligned forecasts, for a record: timestamps (ISO), and per
    series name ('true', 'predicted', 'persistence') a list per target name."""
    points = min(points, len(timestamps))
    excerpt: dict[str, Any] = {"timestamps": [str(stamp) for stamp in list(timestamps)[:points]],
                               "target_names": list(target_names), "units": list(units), "points": points}
    for label, values in series.items():
        values = np.asarray(values, np.float64)[:points]
        excerpt[label] = {name: [round(float(v), 4) for v in values[:, column]] for column, name in enumerate(target_names)}
    return excerpt


# --- the notebook's forecast, put together ------------------------------------------------------------

class Forecast:
    """The weather GRU's data as the notebook uses it: inputs and the targets `shift_hours` later, each
    scaled to [0, 1] by a scaler fitted on the training part (`split_points`: the first 90 % of the hours;
    the rest validates, then is scored once); each held-out part cut into windows with `warmup_steps` of
    context (`tile_windows`, within `sequence_length`, a multiple of `replicas`); persistence beside it."""

    def __init__(self, weather: Any, *, shift_hours: int, sequence_length: int, warmup_steps: int,
                 replicas: int = 1) -> None:
        self.weather, self.sequence_length, self.warmup_steps = weather, sequence_length, warmup_steps
        self.names, self.units = list(weather.target_names), [weather.units[c] for c in weather.target_columns]
        check_target_units(self.names, self.units)  # the metric names promise degC, m/s, hPa
        self.x, self.y = weather.shifted_arrays(shift_hours)  # y[t]: the targets shift_hours after x[t]
        self.persistence = persistence_forecast(weather, shift_hours)  # for y[t]: the targets at t
        self.times = weather.frame.index[shift_hours:]  # the hour each row of y is for
        self.train_end, self.validation_end = split_points(len(self.x), train_split=0.9, validation_share=0.5)
        self.y_scaler = MinMaxScaler.fit(self.y[:self.train_end])
        self.x_scaled = MinMaxScaler.fit(self.x[:self.train_end]).transform(self.x)
        self.y_scaled = self.y_scaler.transform(self.y)
        tile = {"warmup_steps": warmup_steps, "max_length": sequence_length, "multiple": replicas}
        self.validation = tile_windows(self.train_end, self.validation_end, **tile)
        self.test = tile_windows(self.validation_end, len(self.x), **tile)
        self.predicted: np.ndarray | None = None  # the scored test hours' forecasts, once evaluated

    def describe(self) -> str:
        """The data, its parts and the held-out windows, for the notebook."""
        parts = [f"{part}: {tiling.count} windows of {tiling.length} hours ({self.warmup_steps} warm-up), "
                 f"{tiling.count * tiling.scored_per_window} hours scored"
                 for part, tiling in (("validation", self.validation), ("test", self.test))]
        held_out = self.validation_end - self.train_end
        return "\n".join([self.weather.banner(), f"{self.x.shape[1]} inputs, targets "
                          f"{', '.join(self.weather.target_columns)} ({', '.join(self.units)})",
                          f"hours: {self.train_end} train, {held_out} validation, {len(self.x) - self.validation_end} test",
                          *parts])

    def train_windows(self, batch_size: int, seed: int) -> Any:
        """The training part's endless batches of random windows (`random_windows`)."""
        return random_windows(self.x_scaled[:self.train_end], self.y_scaled[:self.train_end],
                              sequence_length=self.sequence_length, batch_size=batch_size, seed=seed)

    def validation_data(self) -> Any:
        """The validation windows as one batch (`window_batch`)."""
        return window_batch(self.validation.cut(self.x_scaled), self.validation.cut(self.y_scaled))

    def _scored(self, model: Any, tiling: WindowTiling) -> tuple[slice, np.ndarray]:
        """The rows a tiling scores, and the model's scaled forecasts for them, in time order."""
        forecasts = model.predict(window_batch(tiling.cut(self.x_scaled)), verbose=0)
        return slice(tiling.first_scored, tiling.stop), tiling.scored(forecasts)

    def evaluate(self, model: Any, history: dict[str, list[float]]) -> dict[str, Any]:
        """The record's scores of `model` (its best weights restored), printed: the best epoch's val_loss and
        the host's recomputation of it, the test loss on the scaled targets beside persistence's, and each
        target's mean absolute error in its own unit beside persistence's."""
        (validation, validated), (self.rows, test) = self._scored(model, self.validation), self._scored(model, self.test)
        self.predicted = self.y_scaler.inverse_transform(test)
        scores, self.targets = compare_with_persistence(self.y[self.rows], self.predicted, self.persistence[self.rows],
                                                        self.names, self.units)
        persistence = self.y_scaler.transform(self.persistence[self.rows])
        metrics = {"val_loss": float(np.nanmin(history["val_loss"])),
                   "best_epoch": int(np.nanargmin(history["val_loss"])) + 1,
                   "val_loss_restored": mean_squared_error(self.y_scaled[validation], validated),
                   "test_loss": mean_squared_error(self.y_scaled[self.rows], test),
                   "persistence_test_loss": mean_squared_error(self.y_scaled[self.rows], persistence),
                   **scores, "input_columns": self.x.shape[1]}
        metrics["beats_persistence"] = metrics["test_loss"] < metrics["persistence_test_loss"]
        self.evaluation = {"test_hours": len(self.predicted), "validation_hours": len(validated), "targets": self.targets}
        print(f"best epoch {metrics['best_epoch']}: val_loss {metrics['val_loss']:.5f} (restored weights give "
              f"{metrics['val_loss_restored']:.5f}); test loss {metrics['test_loss']:.5f} (persistence "
              f"{metrics['persistence_test_loss']:.5f})")
        for row in self.targets:
            print(f"  {row['name']:>11}: MAE {row['mae']:.3f} {row['unit']}, persistence {row['persistence_mae']:.3f} "
                  f"-> {'better than' if row['beats_persistence'] else 'NOT better than'} persistence")
        return metrics

    def series(self, hours: int | None = None) -> dict[str, np.ndarray]:
        """The scored test hours (the first `hours`): the truth, the model's forecast, persistence's."""
        return {"true": self.y[self.rows][:hours], "predicted": self.predicted[:hours],
                "persistence": self.persistence[self.rows][:hours]}

    def record_fields(self, plot_hours: int) -> dict[str, Any]:
        """The record's `evaluation`, `predictions` (the first `plot_hours` of the test part) and `windows`."""
        return {"evaluation": self.evaluation,
                "predictions": forecast_excerpt(self.times[self.rows], self.series(), self.names, self.units, plot_hours),
                "windows": {"train": {"rows": self.train_end, "window_length": self.sequence_length, "random_starts": True},
                            "validation": self.validation.as_dict(), "test": self.test.as_dict()}}
