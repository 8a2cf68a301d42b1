"""Weather processing: the direct hourly resampling equals the tutorial's 1-minute pandas pipeline."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from data_fixtures import weather_long_frame

from colabkit.data import weather
from colabkit.errors import DataError, DataFormatError


def tutorial_resample(frame: pd.DataFrame) -> pd.DataFrame:
    """Hvass's weather.py _resample, literally (1-minute upsampling), in today's pandas spelling."""
    frame = frame.dropna(axis=0, how="all").dropna(axis=1, how="all")
    frame = frame.resample("1min").interpolate(method="time")
    return frame.resample("60min").interpolate().dropna(how="all")


def tutorial_frame(long: pd.DataFrame) -> pd.DataFrame:
    """The tutorial's whole preparation: per-city resampling, inner join, drops, day and hour."""
    indexed = long.set_index(["City", "DateTime"])
    cities = list(weather.CITIES)
    frame = pd.concat([tutorial_resample(indexed.xs(city)) for city in cities], keys=cities, axis=1, join="inner")
    frame = frame.drop(columns=[("Esbjerg", "Pressure"), ("Roskilde", "Pressure")])
    frame["Various", "Day"] = frame.index.day_of_year
    frame["Various", "Hour"] = frame.index.hour
    return frame


def irregular_series(seed: int) -> pd.DataFrame:
    """Irregular minute-stamped observations with gaps, NaNs, a late-starting and an all-NaN column."""
    rng = np.random.default_rng(seed)
    minutes = np.sort(rng.choice(np.arange(3 * 24 * 60), size=150, replace=False)) + 7
    index = pd.DatetimeIndex(pd.Timestamp("1999-12-31 22:00") + pd.to_timedelta(minutes, unit="min"), name="DateTime")
    frame = pd.DataFrame(rng.normal(size=(150, 3)), index=index, columns=["a", "b", "c"])
    frame.iloc[rng.choice(150, size=30, replace=False), 0] = np.nan
    frame.iloc[:40, 1] = np.nan  # starts late: NaN before its first observation
    frame.iloc[[5, 6, 7]] = np.nan  # rows with no value at all
    frame["empty"] = np.nan
    return frame


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_direct_hourly_resampling_equals_the_one_minute_pipeline(seed):
    frame = irregular_series(seed)
    expected = tutorial_resample(frame)
    result = weather.resample_hourly(frame)
    pd.testing.assert_frame_equal(result, expected, check_freq=False, rtol=1e-9, atol=1e-12)
    assert "empty" not in result.columns and result["b"].isna().any()  # dropped; NaN before its start


def test_hourly_values_are_time_interpolated_by_hand():
    index = pd.to_datetime(["2000-01-01 10:20", "2000-01-01 10:50", "2000-01-01 11:20", "2000-01-01 11:50",
                            "2000-01-01 12:20", "2000-01-01 14:50"])
    frame = pd.DataFrame({"t": [1.0, 4.0, 7.0, np.nan, 1.0, 2.0], "p": [np.nan, np.nan, 1.0, 2.0, 3.0, np.nan]},
                         index=index)
    hourly = weather.resample_hourly(frame)
    assert list(hourly.index.strftime("%H:%M")) == ["11:00", "12:00", "13:00", "14:00"]  # 10:00 precedes the data
    # 11:00 lies 10 of 30 minutes from 10:50 (4) to 11:20 (7); 12:00 lies 40 of 60 from 11:20 (7) to 12:20 (1)
    np.testing.assert_allclose(hourly["t"], [5.0, 3.0, 1.0 + 40 / 150, 1.0 + 100 / 150])
    np.testing.assert_allclose(hourly["p"], [np.nan, 2.0 + 10 / 30, 3.0, 3.0])  # NaN before its first value


def test_duplicate_timestamps_are_refused_until_dropped():
    index = pd.to_datetime(["2000-01-01 10:00", "2000-01-01 10:00", "2000-01-01 11:00"])
    frame = pd.DataFrame({"t": [1.0, 9.0, 2.0]}, index=index)
    with pytest.raises(DataFormatError, match="1 duplicate"):
        weather.resample_hourly(frame)
    unique, dropped = weather.drop_duplicate_times(frame)
    assert dropped == 1 and weather.resample_hourly(unique)["t"].tolist() == [1.0, 2.0]


def test_denmark_processing_matches_the_tutorial_on_the_fixture():
    long = weather_long_frame()
    hourly, stats = weather.denmark_hourly(weather.read_denmark_csv(io.BytesIO(long.to_csv(index=False).encode())))
    frame, inputs, targets = weather.denmark_layout(hourly)
    expected = tutorial_frame(long)
    assert len(inputs) == 20 and list(frame.columns) == list(inputs)
    assert inputs == tuple(f"{city}_{name}" for city, name in expected.columns[:-2]) + ("DayOfYear", "Hour")
    assert targets == ("Odense_Temp", "Odense_WindSpeed", "Odense_Pressure")
    np.testing.assert_allclose(frame.to_numpy(dtype=float), expected.to_numpy(dtype=float), rtol=1e-9)
    assert frame.index.equals(expected.index)
    assert frame.loc["2000-01-01 11:00", "Odense_Temp"] == pytest.approx(5.0)
    assert frame.loc["2000-01-01 12:00", "Odense_Temp"] == pytest.approx(3.0)
    assert frame.index[0] == pd.Timestamp("2000-01-01 11:00") and frame.index[-1] == pd.Timestamp("2000-01-02 20:00")
    assert stats["observations"] == len(long) and set(stats["duplicate_timestamps_dropped"]) == set(weather.CITIES)


def test_denmark_csv_missing_a_city_or_column_is_a_format_error():
    long = weather_long_frame()
    with pytest.raises(DataFormatError, match="no rows for Roskilde"):
        weather.denmark_hourly(long[long["City"] != "Roskilde"])
    with pytest.raises(DataFormatError, match="lacks column"):
        weather.read_denmark_csv(io.BytesIO(long.drop(columns="WindDir").to_csv(index=False).encode()))


def test_tmy3_rows_become_one_nominal_year_with_24_00_as_next_midnight():
    from colabkit.data.common import package_file

    path, _ = package_file("pvlib", "data/723170TYA.CSV")
    station, frame = weather.read_tmy3(path, 1990)
    assert station["usaf"] == "723170" and station["state"] == "NC"
    assert len(frame) == 8760 and frame.index.is_unique and frame.index.is_monotonic_increasing
    assert frame.index[0] == pd.Timestamp("1990-01-01 01:00") and frame.index[-1] == pd.Timestamp("1991-01-01 00:00")
    assert frame.iloc[0].tolist() == [10.0, 993.0, 6.2, 200.0]  # the file's first data row
    assert list(frame.columns) == ["Temp", "Pressure", "WindSpeed", "WindDir"]


def test_shifted_arrays_pair_inputs_with_targets_24_hours_later():
    index = pd.date_range("2000-01-01", periods=50, freq="60min")
    frame = pd.DataFrame({"a": np.arange(50.0), "b": np.arange(50.0) * 10}, index=index)
    x, y = weather.shifted_arrays(frame, ["a", "b"], ["b"], shift_steps=24)
    assert x.shape == (26, 2) and y.shape == (26, 1)
    np.testing.assert_array_equal(y[:, 0], frame["b"].shift(-24).to_numpy()[:26])
    assert y[0, 0] == 240.0 and x[0, 1] == 0.0
    with pytest.raises(DataError, match="shift_steps"):
        weather.shifted_arrays(frame, ["a"], ["b"], shift_steps=50)
