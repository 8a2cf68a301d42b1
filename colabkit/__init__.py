"""colabkit: device set-up, honest timing and result records for the suite's notebooks.

Notebooks import what they need from here; each concern lives in its own module.
"""

from colabkit.data import (
    HarData,
    MnistData,
    WeatherData,
    data_banner,
    load_jena_climate,
    load_mnist,
    load_uci_har,
    load_weather,
)
from colabkit.device.backends import BACKENDS, select_backend
from colabkit.device.peaks import PeakFlops
from colabkit.device.probes import available_devices, machine_details
from colabkit.device.setup import setup_device
from colabkit.device.spec import DeviceSetup, parse_device
from colabkit.errors import (
    BackendError,
    BackendNotInstalledError,
    BackendUnsupportedError,
    ColabkitError,
    CorruptDownloadError,
    DataError,
    DataFormatError,
    DataSourceWarning,
    DataUnavailableError,
    DeviceNotFoundError,
    DownloadError,
    GridError,
    MeasurementError,
    ParameterError,
    RecordError,
    ReportError,
    UnknownDatasetError,
    UnknownDataSourceError,
    UnknownDeviceError,
)
from colabkit.records.loading import load_results
from colabkit.records.record import Run, read_record, start_run
from colabkit.statistics import summarize
from colabkit.timing.clock import Measurement, block_until_ready, measure, timed
from colabkit.version import __version__

__all__ = [
    "BACKENDS",
    "BackendError",
    "BackendNotInstalledError",
    "BackendUnsupportedError",
    "ColabkitError",
    "CorruptDownloadError",
    "DataError",
    "DataFormatError",
    "DataSourceWarning",
    "DataUnavailableError",
    "DeviceNotFoundError",
    "DeviceSetup",
    "DownloadError",
    "GridError",
    "HarData",
    "Measurement",
    "MeasurementError",
    "MnistData",
    "ParameterError",
    "PeakFlops",
    "RecordError",
    "ReportError",
    "Run",
    "UnknownDataSourceError",
    "UnknownDatasetError",
    "UnknownDeviceError",
    "WeatherData",
    "__version__",
    "available_devices",
    "block_until_ready",
    "data_banner",
    "load_jena_climate",
    "load_mnist",
    "load_results",
    "load_uci_har",
    "load_weather",
    "machine_details",
    "measure",
    "parse_device",
    "read_record",
    "select_backend",
    "setup_device",
    "start_run",
    "summarize",
    "timed",
]
