"""colabkit: device set-up, honest timing and result records for the suite's notebooks.

Notebooks import what they need from here; each concern lives in its own module. `import colabkit`
loads only the exceptions and the version: every other name below is imported the first time it is
used (PEP 562), so a training kernel pays for no data loader, table or plotting library it does not
call (the data loaders bring pandas, about 0.15 s of a 0.33 s import on this project's machines).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
from colabkit.version import __version__

if TYPE_CHECKING:  # what a type checker and an IDE see
    from colabkit.colab.install import setup_device
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
    from colabkit.device.peaks import PeakFlops, at_least
    from colabkit.device.probes import available_devices, machine_details
    from colabkit.device.spec import DeviceSetup, parse_device
    from colabkit.records.loading import load_results
    from colabkit.records.record import Run, read_record, start_run
    from colabkit.statistics import summarize
    from colabkit.timing.clock import Measurement, block_until_ready, measure, timed
    from colabkit.training.trainer import Trainer

_LAZY = {
    "HarData": "colabkit.data",
    "MnistData": "colabkit.data",
    "WeatherData": "colabkit.data",
    "data_banner": "colabkit.data",
    "load_jena_climate": "colabkit.data",
    "load_mnist": "colabkit.data",
    "load_uci_har": "colabkit.data",
    "load_weather": "colabkit.data",
    "BACKENDS": "colabkit.device.backends",
    "select_backend": "colabkit.device.backends",
    "PeakFlops": "colabkit.device.peaks",
    "at_least": "colabkit.device.peaks",
    "available_devices": "colabkit.device.probes",
    "machine_details": "colabkit.device.probes",
    "setup_device": "colabkit.colab.install",  # installs what Colab lacks, then colabkit.device.setup's
    "DeviceSetup": "colabkit.device.spec",
    "parse_device": "colabkit.device.spec",
    "load_results": "colabkit.records.loading",
    "Run": "colabkit.records.record",
    "read_record": "colabkit.records.record",
    "start_run": "colabkit.records.record",
    "Measurement": "colabkit.timing.clock",
    "block_until_ready": "colabkit.timing.clock",
    "measure": "colabkit.timing.clock",
    "summarize": "colabkit.statistics",
    "timed": "colabkit.timing.clock",
    "Trainer": "colabkit.training.trainer",  # imports Keras: use it after setup_device
}

# The exceptions imported above, the version and every lazily loaded name: one list, kept by the table.
__all__ = sorted({"__version__", *_LAZY, *(name for name, value in list(globals().items())
                                          if isinstance(value, type) and issubclass(value, Exception))})


def __getattr__(name: str) -> Any:
    """A name of `__all__` not loaded yet: imported from its module now, then kept."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'colabkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
