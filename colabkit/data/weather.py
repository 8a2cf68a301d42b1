"""Weather: tables to hourly frames (Hvass weather-denmark, Jena climate, TMY3 stations), and loaders.

    weather = load_weather(data_source)      # Hvass weather-denmark, hourly, 20 inputs, Odense targets
    jena = load_jena_climate(data_source)    # Keras's Jena climate example, hourly

The processing functions are pure; the loaders fetch the files and call them (offline: two real TMY3
stations shipped by pvlib). The weather-denmark steps follow Hvass-Labs tutorial #23's weather.py
(docs/sources.md); `resample_hourly` computes its 1-minute-then-hourly resampling directly, without
the 20-million-row series (tests/test_weather.py checks it against the literal pandas pipeline).
"""

from __future__ import annotations

import csv
import json
import tarfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from colabkit.data.common import Provenanced, mirror_variable, mirrors, package_file, resolve_source
from colabkit.data.download import DEFAULT_TIMEOUT_S, cached_arrays, check_tar, check_zip, fetch, sha256_of
from colabkit.errors import DataError, DataFormatError

HOUR = pd.Timedelta(minutes=60)
WEATHER_PROCESSING_VERSION = 1  # part of the processed cache's name: new processing never reads older frames

# weather-denmark (Hvass-Labs), as the tutorial uses it
CITIES = ("Aalborg", "Aarhus", "Esbjerg", "Odense", "Roskilde")
MEASUREMENTS = ("Temp", "Pressure", "WindSpeed", "WindDir")
DENMARK_DROPPED = ("Esbjerg_Pressure", "Roskilde_Pressure")  # long gaps, bridged by straight lines
TARGET_CITY = "Odense"
TARGET_MEASUREMENTS = ("Temp", "WindSpeed", "Pressure")
TARGET_NAMES = ("temperature", "wind speed", "pressure")
# Temperature in degrees C and sea-level pressure in hPa, as the tutorial's text and plots show;
# wind speed in m/s is NCDC's metric output (the archive itself carries no units).
SERIES_UNITS = {"Temp": "degC", "Pressure": "hPa", "WindSpeed": "m/s", "WindDir": "degrees"}
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


# --- the loaders: the offline substitute's stations, what a loader returns, and the loaders ------

TMY3_STATIONS = (("SandPoint", "703165TY.csv"), ("Greensboro", "723170TYA.CSV"))
TMY3_TARGET_STATION = "Greensboro"
TMY3_DROPPED = ("SandPoint_Pressure",)  # a constant 1012 mbar fill in this file: no information
TMY3_NOMINAL_YEAR = 1990


@dataclass(frozen=True, repr=False, eq=False)
class WeatherData(Provenanced):
    """An hourly weather frame (DatetimeIndex 'DateTime') and what its columns are.

    `input_columns` are all of the frame's columns (the targets' current values among them);
    `target_columns` are the three series to forecast, `target_names` say what they are
    (temperature, wind speed, pressure); `units` maps every column to its unit.
    """

    frame: pd.DataFrame
    input_columns: tuple[str, ...]
    target_columns: tuple[str, ...]
    target_names: tuple[str, ...]
    units: dict[str, str]
    provenance: dict[str, Any]

    def shifted_arrays(self, shift_steps: int = 24, dtype: Any = np.float64) -> tuple[np.ndarray, np.ndarray]:
        """(x, y): inputs at hour t and targets at hour t + shift_steps, len(frame) - shift_steps rows."""
        return shifted_arrays(self.frame, self.input_columns, self.target_columns, shift_steps, dtype)

    def __repr__(self) -> str:
        return (f"WeatherData({self.source}: {len(self.frame)} hours x {len(self.input_columns)} inputs, "
                f"targets {', '.join(self.target_columns)})")


def _cached_frame(path: Path, build: Callable[[], tuple[pd.DataFrame, dict[str, Any]]]) -> tuple[pd.DataFrame, dict[str, Any], bool]:
    """A processed float frame and its stats, saved as .npz (no pickle) and reloaded when present."""

    def arrays() -> dict[str, np.ndarray]:
        frame, stats = build()
        return {"values": frame.to_numpy(dtype=np.float64), "index": frame.index.to_numpy().astype("datetime64[ns]"),
                "columns": np.array(frame.columns, dtype=str), "stats": np.array(json.dumps(stats))}

    stored, hit = cached_arrays(path, arrays)
    frame = pd.DataFrame(stored["values"], index=pd.DatetimeIndex(stored["index"], name="DateTime"),
                         columns=[str(name) for name in stored["columns"]])
    return frame, json.loads(str(stored["stats"])), hit


def _weather(frame: pd.DataFrame, inputs: tuple[str, ...], targets: tuple[str, ...], units: dict[str, str],
             provenance: dict[str, Any]) -> WeatherData:
    provenance.update(
        shapes={"frame": list(frame.shape)}, sizes={"hours": len(frame)},
        start=str(frame.index[0]) if len(frame) else None, end=str(frame.index[-1]) if len(frame) else None,
        input_columns=list(inputs), target_columns=list(targets), target_names=list(TARGET_NAMES),
        nan_cells=int(frame.isna().to_numpy().sum()),
    )
    return WeatherData(frame, inputs, targets, TARGET_NAMES, units, provenance)


def _denmark_from_archive(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read the archive's weather-denmark.csv (at any depth) and resample it; the pickle is ignored."""
    with tarfile.open(path) as archive:
        for member in archive:
            if member.isfile() and member.name.rsplit("/", 1)[-1] == "weather-denmark.csv":
                with archive.extractfile(member) as stream:  # type: ignore[union-attr]
                    return denmark_hourly(read_denmark_csv(stream))
    raise DataFormatError(f"{path.name} holds no weather-denmark.csv")


def _weather_denmark_real(cache_dir: str | Path | None, timeout_s: float, progress: bool) -> WeatherData:
    fetched = fetch(mirrors("weather_denmark"), "weather_denmark", mirror_variable=mirror_variable("weather_denmark"),
                    validate=check_tar, cache_dir=cache_dir,
                    timeout_s=timeout_s, progress=progress)
    # The CSV, not the pickle: the 2018 pickle may not load in pandas 2+, and unpickling a file that
    # no pin vouches for would run whatever code it holds.
    processed = fetched.path.with_name(f"processed-{fetched.sha256[:16]}-v{WEATHER_PROCESSING_VERSION}.npz")
    hourly, stats, hit = _cached_frame(processed, lambda: _denmark_from_archive(fetched.path))
    frame, inputs, targets = denmark_layout(hourly)
    units = {name: SERIES_UNITS[name.split("_", 1)[1]] for name in frame.columns if "_" in name}
    provenance = {"dataset": "weather_denmark", "source": "real",
                  "description": "Hvass-Labs weather-denmark (NCDC observations of 5 Danish cities, 1980-2018), "
                                 "resampled hourly as in Hvass's tutorial #23",
                  **fetched.provenance(), "processed_cache": "hit" if hit else "built", "processing": stats,
                  "note": None}
    return _weather(frame, inputs, targets, {**units, **CALENDAR_UNITS}, provenance)


def _jena_real(cache_dir: str | Path | None, timeout_s: float, progress: bool) -> WeatherData:
    fetched = fetch(mirrors("jena_climate"), "jena_climate", mirror_variable=mirror_variable("jena_climate"),
                    validate=check_zip, cache_dir=cache_dir,
                    timeout_s=timeout_s, progress=progress)

    def build() -> tuple[pd.DataFrame, dict[str, Any]]:
        with zipfile.ZipFile(fetched.path) as archive:
            names = [name for name in archive.namelist() if name.endswith(".csv") and not name.startswith("__MACOSX")]
            if not names:
                raise DataFormatError(f"{fetched.path.name} holds no CSV file: {archive.namelist()[:10]}")
            with archive.open(names[0]) as stream:
                return read_jena_csv(stream)

    processed = fetched.path.with_name(f"processed-{fetched.sha256[:16]}-v{WEATHER_PROCESSING_VERSION}.npz")
    hourly, stats, hit = _cached_frame(processed, build)
    frame = add_calendar_columns(hourly)
    provenance = {"dataset": "jena_climate", "source": "real",
                  "description": "Jena climate 2009-2016 (Max Planck Institute for Biogeochemistry), "
                                 "10-minute records resampled hourly",
                  **fetched.provenance(), "processed_cache": "hit" if hit else "built", "processing": stats,
                  "note": None}
    return _weather(frame, tuple(frame.columns), JENA_TARGETS, jena_units(frame.columns), provenance)


def _weather_offline(dataset: str) -> WeatherData:
    """Two real TMY3 stations from pvlib's data folder, laid out like the real loaders' frames."""
    hourly, stations, digests, sizes, version = {}, [], {}, {}, ""
    for place, filename in TMY3_STATIONS:
        path, version = package_file("pvlib", f"data/{filename}")
        station, table = read_tmy3(path, TMY3_NOMINAL_YEAR)
        hourly[place] = resample_hourly(table)
        stations.append({"column_prefix": place, "file": filename, **station})
        digests[filename], sizes[filename] = sha256_of(path), path.stat().st_size
    frame = add_calendar_columns(join_places(hourly).drop(columns=list(TMY3_DROPPED)))
    targets = tuple(column_name(TMY3_TARGET_STATION, name) for name in TARGET_MEASUREMENTS)
    units = {name: TMY3_UNITS[name.split("_", 1)[1]] for name in frame.columns if "_" in name}
    names = " and ".join(f"{station['name']}, {station['state']} (USAF {station['usaf']})" for station in stations)
    provenance = {
        "dataset": dataset, "source": "offline",
        "description": f"pvlib {version} TMY3 hourly records of {names}",
        "url": f"https://pypi.org/project/pvlib/{version}/",
        "file": ", ".join(f"pvlib/data/{filename}" for _, filename in TMY3_STATIONS),
        "sha256": digests, "sha256_pinned": False, "bytes": sizes, "downloaded": False, "stations": stations,
        "note": f"OFFLINE SUBSTITUTE, not the {dataset} data: real hourly observations of two US stations, "
                f"{names}, from the typical-meteorological-year files shipped with the PyPI package pvlib. "
                "Each month comes from a different real year (1980-2005); rows are stamped with the nominal "
                f"year {TMY3_NOMINAL_YEAR} in local standard time. One year only ({TMY3_HOURS} hours), "
                f"targets are {TMY3_TARGET_STATION}'s temperature, wind speed and station pressure; "
                "Sand Point's pressure (a constant fill) is dropped. Losses are not comparable.",
    }
    return _weather(frame, tuple(frame.columns), targets, {**units, **CALENDAR_UNITS}, provenance)


def load_weather(
    data_source: str = "auto",
    *,
    cache_dir: str | Path | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress: bool = True,
) -> WeatherData:
    """Hvass-Labs' weather-denmark, hourly (tutorial #23, docs/sources.md), or the TMY3 offline substitute.

    Real: five cities' Temp, Pressure, WindSpeed, WindDir resampled to hours and inner-joined, minus
    Esbjerg's and Roskilde's pressure, plus DayOfYear and Hour: 20 input columns; targets
    Odense_Temp, Odense_WindSpeed, Odense_Pressure. The 24-hour shift, the train split and the
    scaling are the notebook's (see WeatherData.shifted_arrays). The processed frame is cached
    beside the archive, keyed by its sha256, so only the first call parses the CSV.
    """
    return resolve_source(data_source, lambda: _weather_denmark_real(cache_dir, timeout_s, progress),
                    lambda: _weather_offline("weather_denmark"))


def load_jena_climate(
    data_source: str = "auto",
    *,
    cache_dir: str | Path | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress: bool = True,
) -> WeatherData:
    """The Jena climate CSV of Keras's weather example, hourly: its 14 measurements plus DayOfYear
    and Hour as inputs; targets 'T (degC)', 'wv (m/s)', 'p (mbar)'. Substitute: the TMY3 stations."""
    return resolve_source(data_source, lambda: _jena_real(cache_dir, timeout_s, progress),
                    lambda: _weather_offline("jena_climate"))
