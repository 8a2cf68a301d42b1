"""colabkit: device set-up, honest timing and result records for the suite's notebooks.

Notebooks import what they need from here; each concern lives in its own module. `import colabkit`
loads only the exceptions and the version: every other name below is imported the first time it is
used (PEP 562), so a training kernel pays for no data loader, table or plotting library it does not
call (the data loaders bring pandas, about 0.15 s of a 0.33 s import on this project's machines).
"""

from __future__ import annotations

import importlib
from typing import Any

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

# Where each lazily loaded name lives, module by module: each name listed once, here (the ones of training/ import
# Keras: use them after setup_device, which installs nothing: bootstrap and start_run install what Colab lacks).
_LAZY = {name: module for module, names in {
    "colabkit.colab.install": ("bootstrap",),
    "colabkit.data": ("HarData", "MnistData", "WeatherData", "data_banner", "load_jena_climate", "load_mnist",
                      "load_uci_har", "load_weather"),
    "colabkit.device.backends": ("BACKENDS", "select_backend"),
    "colabkit.device.peaks": ("PeakFlops", "at_least", "peak_metrics"),
    "colabkit.device.probes": ("available_devices", "machine_details"),
    "colabkit.device.setup": ("setup_device",),
    "colabkit.device.spec": ("DeviceSetup", "parse_device"),
    "colabkit.inference": ("InferenceSettings", "measure_inference"),
    "colabkit.inference.generation": ("measure_decode",),
    "colabkit.records.loading": ("load_results",),
    "colabkit.records.record": ("read_record",),
    "colabkit.run": ("Run", "start_run"),
    "colabkit.scores": ("classification_report",),
    "colabkit.statistics": ("summarize",),
    "colabkit.timing.clock": ("Measurement", "block_until_ready", "measure", "timed"),
    "colabkit.timing.repeats": ("RepeatResult", "run_repeats"),
    "colabkit.training.fit": ("weights_digest",),
    "colabkit.training.setup": ("repeated_batch", "subsample"),
    "colabkit.training.trainer": ("Trainer",),
}.items() for name in names}

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
