"""Weather tables to hourly frames: the Hvass weather-denmark processing, Jena climate, TMY3 stations.

Pure processing (no downloads): `colabkit.data` fetches the files and calls these.

The weather-denmark steps follow Hvass-Labs tutorial #23's weather.py (docs/sources.md): per city, drop
the rows and columns that are entirely NaN, resample to 1 minute with time interpolation, then to
60 minutes, drop the hours with no value at all; inner-join the cities; drop Esbjerg's and
Roskilde's pressure; add day-of-year and hour. `resample_hourly` computes that resampling
directly: a value at an hour mark of the 1-minute time-interpolated series is the time-linear
interpolation of the observations around it, so the 1-minute series (20 million rows per city
for 1980-2018) is never built. tests/test_weather.py checks it against the literal pandas
pipeline.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from colabkit.errors import DataError, DataFormatError

HOUR = pd.Timedelta(minutes=60)

# weather-denmark (Hvass-Labs), as the tutorial uses it
CITIES = ("Aalborg", "Aarhus", "Esbjerg", "Odense", "Roskilde")
MEASUREMENTS = ("Temp", "Pressure", "WindSpeed", "WindDir")
DENMARK_DROPPED = ("Esbjerg_Pressure", "Roskilde_Pressure")  # long gaps, bridged by straight lines
TARGET_CITY = "Odense"
TARGET_MEASUREMENTS = ("Temp", "WindSpeed", "Pressure")
TARGET_NAMES = ("temperature", "wind speed", "pressure")
# Temperature in degrees C and sea-level pressure in hPa, as the tutorial's text and plots show;
# wind speed in m/s is NCDC's metric output (the archive itself carries no units).
UNITS = {"Temp": "degC", "Pressure": "hPa", "WindSpeed": "m/s", "WindDir": "degrees"}
CALENDAR_COLUMNS = ("DayOfYear", "Hour")
CALENDAR_UNITS = {"DayOfYear": "day (1-366)", "Hour": "hour (0-23)"}

# Jena climate (Max Planck Institute for Biogeochemistry, as Keras's example ships it)
JENA_TIME_COLUMN = "Date Time"
JENA_TIME_FORMAT = "%d.%m.%Y %H:%M:%S"
JENA_TARGETS = ("T (degC)", "wv (m/s)", "p (mbar)")
JENA_MISSING = -9999.0  # the wind columns mark missing readings with it

# TMY3 files (NREL typical meteorological year, hourly, local standard time, hour ending)
TMY3_COLUMNS = {"Dry-bulb (C)": "Temp", "Pressure (mbar)": "Pressure", "Wspd (m/s)": "WindSpeed",
                "Wdir (degrees)": "WindDir"}
TMY3_UNITS = {"Temp": "degC", "Pressure": "hPa (mbar, station level)", "WindSpeed": "m/s", "WindDir": "degrees"}
TMY3_MISSING = -9900.0
TMY3_HOURS = 8760


def column_name(place: str, measurement: str) -> str:
    """The frame's flat column name for a measurement at a place: 'Odense_Temp'."""
    return f"{place}_{measurement}"


def resample_hourly(frame: pd.DataFrame) -> pd.DataFrame:
    """Hourly values of an irregular series, as `df.resample('1min').interpolate(method='time')
    .resample('60min').interpolate().dropna(how='all')` gives after dropping all-NaN rows and columns.

    At every hour mark from the first to the last observation, each column takes the time-linear
    interpolation of its two neighbouring observations (its last value after its last observation,
    NaN before its first); hours where every column is NaN are dropped. The index must be a unique
    DatetimeIndex (DataFormatError otherwise: the 1-minute pipeline cannot take duplicates either).
    """
    if not isinstance(frame.index, pd.DatetimeIndex):
        raise DataFormatError(f"resample_hourly needs a DatetimeIndex, got {type(frame.index).__name__}")
    if frame.index.has_duplicates:
        raise DataFormatError(f"{int(frame.index.duplicated().sum())} duplicate timestamps: drop them first")
    frame = frame.dropna(axis=0, how="all").dropna(axis=1, how="all").sort_index()
    if frame.empty:
        return pd.DataFrame(columns=frame.columns, index=pd.DatetimeIndex([], name=frame.index.name), dtype=float)
    start = frame.index[0]
    hours = pd.date_range(start.ceil(HOUR), frame.index[-1].floor(HOUR), freq=HOUR, name=frame.index.name)
    # Minutes since the first observation: exact in float64, unlike nanoseconds since 1970.
    observed = ((frame.index - start) / pd.Timedelta(minutes=1)).to_numpy(dtype=float)
    wanted = ((hours - start) / pd.Timedelta(minutes=1)).to_numpy(dtype=float)
    columns = {}
    for name in frame.columns:
        values = frame[name].to_numpy(dtype=float)
        valid = ~np.isnan(values)
        hourly = np.interp(wanted, observed[valid], values[valid])
        hourly[wanted < observed[valid][0]] = np.nan  # interpolation fills forward only
        columns[name] = hourly
    return pd.DataFrame(columns, index=hours).dropna(how="all")


def join_places(hourly: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Inner-join per-place hourly frames on time, naming columns '<place>_<measurement>'."""
    joined = pd.concat(list(hourly.values()), keys=list(hourly), axis=1, join="inner")
    joined.columns = [column_name(place, measurement) for place, measurement in joined.columns]
    return joined


def add_calendar_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy with DayOfYear (1-366) and Hour (0-23) of each row's timestamp appended."""
    frame = frame.copy()
    frame["DayOfYear"] = frame.index.day_of_year.astype(np.int64)
    frame["Hour"] = frame.index.hour.astype(np.int64)
    return frame


def drop_duplicate_times(frame: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Keep the first row of each timestamp; return the frame and how many rows were dropped."""
    duplicated = frame.index.duplicated(keep="first")
    return frame[~duplicated], int(duplicated.sum())


def _require_columns(frame: pd.DataFrame, wanted: Sequence[str], what: str) -> None:
    missing = [name for name in wanted if name not in frame.columns]
    if missing:
        raise DataFormatError(f"{what} lacks column(s) {', '.join(missing)}; it has {', '.join(map(str, frame.columns))}")


# --- weather-denmark --------------------------------------------------------------------------

def read_denmark_csv(stream: IO[bytes] | str | Path) -> pd.DataFrame:
    """The archive's weather-denmark.csv: columns City, DateTime, Temp, Pressure, WindSpeed, WindDir."""
    try:
        frame = pd.read_csv(stream)
    except (ValueError, pd.errors.ParserError) as exc:
        raise DataFormatError(f"weather-denmark.csv is not a readable CSV ({exc})") from exc
    _require_columns(frame, ("City", "DateTime", *MEASUREMENTS), "weather-denmark.csv")
    try:
        frame["DateTime"] = pd.to_datetime(frame["DateTime"])
    except (ValueError, TypeError) as exc:
        raise DataFormatError(f"weather-denmark.csv has unreadable DateTime values ({exc})") from exc
    return frame


def denmark_hourly(long: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Resample each city to hours and inner-join them: 5 cities x 4 measurements, and stats."""
    hourly, duplicates = {}, {}
    for city in CITIES:
        rows = long[long["City"] == city]
        if rows.empty:
            raise DataFormatError(f"weather-denmark.csv has no rows for {city}; it has {sorted(long['City'].unique())}")
        series = rows.set_index("DateTime")[list(MEASUREMENTS)].astype(float)
        series, duplicates[city] = drop_duplicate_times(series)
        hourly[city] = resample_hourly(series)
    joined = join_places(hourly)
    expected = [column_name(city, measurement) for city in CITIES for measurement in MEASUREMENTS]
    _require_columns(joined, expected, "the resampled weather-denmark frame")
    stats = {"observations": int(len(long)), "duplicate_timestamps_dropped": duplicates}
    return joined[expected], stats


def denmark_layout(hourly: pd.DataFrame) -> tuple[pd.DataFrame, tuple[str, ...], tuple[str, ...]]:
    """The tutorial's frame: drop Esbjerg's and Roskilde's pressure, add day and hour.

    Returns (frame, input columns (20), target columns (Odense Temp, WindSpeed, Pressure)).
    """
    frame = add_calendar_columns(hourly.drop(columns=list(DENMARK_DROPPED)))
    targets = tuple(column_name(TARGET_CITY, measurement) for measurement in TARGET_MEASUREMENTS)
    return frame, tuple(frame.columns), targets


# --- Jena climate -----------------------------------------------------------------------------

def read_jena_csv(stream: IO[bytes] | str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """jena_climate_2009_2016.csv resampled to hours: every numeric column, and stats.

    Duplicate timestamps keep their first row; the wind columns' -9999 markers become NaN and are
    bridged by the same time interpolation as every other gap.
    """
    try:
        raw = pd.read_csv(stream)
    except (ValueError, pd.errors.ParserError) as exc:
        raise DataFormatError(f"the Jena CSV is not readable ({exc})") from exc
    _require_columns(raw, (JENA_TIME_COLUMN, *JENA_TARGETS), "the Jena CSV")
    try:
        index = pd.to_datetime(raw.pop(JENA_TIME_COLUMN), format=JENA_TIME_FORMAT)
    except (ValueError, TypeError) as exc:
        raise DataFormatError(f"the Jena CSV has unreadable '{JENA_TIME_COLUMN}' values ({exc})") from exc
    values = raw.set_axis(pd.DatetimeIndex(index, name="DateTime")).astype(float)
    missing = values == JENA_MISSING
    values, duplicates = drop_duplicate_times(values.mask(missing))
    stats = {"observations": int(len(raw)), "duplicate_timestamps_dropped": duplicates,
             "missing_markers_replaced": {name: int(count) for name, count in missing.sum().items() if count}}
    return resample_hourly(values), stats


def jena_units(columns: Sequence[str]) -> dict[str, str]:
    """Units from the Jena column names ('T (degC)' -> 'degC'), plus the calendar columns'."""
    units = {name: name[name.rfind("(") + 1:-1] for name in columns if name.endswith(")") and "(" in name}
    return {**units, **{name: CALENDAR_UNITS[name] for name in columns if name in CALENDAR_UNITS}}


# --- TMY3 station files (the offline substitute) ------------------------------------------------

def read_tmy3(path: str | Path, year: int) -> tuple[dict[str, Any], pd.DataFrame]:
    """A TMY3 file's station metadata and its hourly Temp, Pressure, WindSpeed, WindDir.

    TMY3 months come from different real years; the rows are stamped with the nominal `year`
    (not a leap year), hour ending, the file's '24:00' being 00:00 of the next day.
    """
    with open(path, encoding="utf-8", newline="") as stream:
        header = next(csv.reader(stream))
    if len(header) < 7:
        raise DataFormatError(f"{path}: first line is not a TMY3 station header: {header}")
    station = {"usaf": header[0].strip(), "name": header[1].strip(), "state": header[2].strip(),
               "utc_offset_h": float(header[3]), "latitude": float(header[4]), "longitude": float(header[5]),
               "elevation_m": float(header[6])}
    table = pd.read_csv(path, skiprows=1)
    _require_columns(table, ("Date (MM/DD/YYYY)", "Time (HH:MM)", *TMY3_COLUMNS), str(path))
    if len(table) != TMY3_HOURS:
        raise DataFormatError(f"{path}: {len(table)} rows, a TMY3 year has {TMY3_HOURS}")
    dates = table["Date (MM/DD/YYYY)"].str.split("/", expand=True).astype(int)
    hours = table["Time (HH:MM)"].str.slice(0, 2).astype(int)
    index = pd.to_datetime(pd.DataFrame({"year": year, "month": dates[0], "day": dates[1]}))
    index = pd.DatetimeIndex(index + pd.to_timedelta(hours, unit="h"), name="DateTime")
    expected = pd.date_range(pd.Timestamp(year, 1, 1, 1), periods=TMY3_HOURS, freq=HOUR)
    if not index.equals(expected):
        raise DataFormatError(f"{path}: rows are not the {TMY3_HOURS} consecutive hours of one non-leap year")
    frame = table[list(TMY3_COLUMNS)].rename(columns=TMY3_COLUMNS).astype(float).set_axis(index)
    return station, frame.mask(frame == TMY3_MISSING)


# --- supervised arrays ------------------------------------------------------------------------

def shifted_arrays(
    frame: pd.DataFrame,
    input_columns: Sequence[str],
    target_columns: Sequence[str],
    shift_steps: int = 24,
    dtype: Any = np.float64,
) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) with x[t] = inputs at row t and y[t] = targets at row t + shift_steps.

    The tutorial's `df[targets].shift(-shift_steps)` with the last `shift_steps` rows (whose
    targets lie beyond the data) removed: both arrays have len(frame) - shift_steps rows.
    """
    if not 1 <= shift_steps < len(frame):
        raise DataError(f"shift_steps must be between 1 and {len(frame) - 1} for {len(frame)} rows, got {shift_steps}")
    x = frame[list(input_columns)].to_numpy(dtype=dtype)[:-shift_steps]
    y = frame[list(target_columns)].to_numpy(dtype=dtype)[shift_steps:]
    return x, y
