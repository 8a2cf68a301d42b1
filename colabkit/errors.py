"""Typed exceptions. Every message says what went wrong and what the user can do about it."""

from __future__ import annotations


class ColabkitError(Exception):
    """Base class of every error colabkit raises on purpose."""


class DeviceNotFoundError(ColabkitError):
    """A requested device is absent. colabkit never falls back to another device silently."""


class UnknownDeviceError(ColabkitError, ValueError):
    """A device name that colabkit does not understand."""


class BackendError(ColabkitError, ValueError):
    """A Keras backend that is unknown, or cannot be switched to in this process."""


class BackendNotInstalledError(BackendError):
    """The package a Keras backend needs (jax, torch) is not installed; the message says how."""


class ExtraNotInstalledError(ColabkitError):
    """A run needs an optional part of colabkit that is not installed (an extra: profile, cluster...); the message
    names the extra and how to install it (colabkit.extras)."""


class BackendUnsupportedError(ColabkitError):
    """A backend and device pair that cannot run (PyTorch on TPU without torch_xla; several
    replicas on Keras's PyTorch backend). Refused plainly rather than run somewhere else."""


class MeasurementError(ColabkitError):
    """A measurement produced a value that cannot be trusted (non-finite result, zero time...)."""


class RecordError(ColabkitError):
    """A result record is malformed, or has a schema version this colabkit cannot read."""


class GridError(ColabkitError):
    """A parameter grid file is invalid. Raised before anything is executed."""

    def __init__(self, problems: list[str] | str, path: str | None = None) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.path = path
        where = f"{path}: " if path else ""
        if len(self.problems) == 1:
            message = where + self.problems[0]
        else:
            message = where + f"{len(self.problems)} problems:\n" + "\n".join(
                f"  - {problem}" for problem in self.problems
            )
        super().__init__(message)


class SweepLockedError(ColabkitError):
    """Another sweep is writing to the same output folder."""


class OutputFolderError(ColabkitError):
    """A sweep's output folder cannot be written (a file in its place, no permission, read-only)."""


class SweepInterrupted(ColabkitError):
    """A sweep stopped by Ctrl-C or SIGTERM. Holds the outcomes that finished before it stopped."""

    def __init__(self, outcomes: list, message: str = "interrupted") -> None:
        self.outcomes = outcomes
        super().__init__(message)


class ColabClientError(ColabkitError):
    """The Colab command-line client (`colab`) failed: a session refused or lost, a command that exited
    non-zero or took too long (one line, the client's own last words)."""


class ColabResultsNotBack(ColabClientError):
    """A session's results could not be downloaded (or were no archive): the session is stopped before anything
    else is sent to it, since the client's next call to a session whose token expired makes it forget the session,
    which then runs on, and bills, out of its reach."""


class ColabClientBroken(ColabClientError):
    """The Colab client cannot run code at all (its kernel library does not match it): every session
    would fail the same way, so the whole `sweep --colab` stops, naming the fix."""


class HostileArchiveError(ColabkitError):
    """An archive to unpack holds a member that would land outside its folder, or a link or device:
    nothing of it is unpacked."""


class MultiWorkerError(ColabkitError):
    """A multi-worker run cannot be set up or run as asked (worker count, cluster spec, loop options)."""


class ClusterSpecError(MultiWorkerError, ValueError):
    """TF_CONFIG is not JSON, or does not name a cluster of workers and this worker's task."""


class WorkersFailed(MultiWorkerError):
    """A multi-worker run did not finish on every worker; the message says which and how.
    `outcomes` holds each worker's colabkit.sweep.runners.multiworker.WorkerOutcome, chief first."""

    def __init__(self, message: str, outcomes: list) -> None:
        super().__init__(message)
        self.outcomes = outcomes


class DeviceSetupError(ColabkitError):
    """A device cannot be set up in this process as asked (e.g. TensorFlow was already initialised
    with another layout); the message says to restart the kernel."""


class SuiteNotFoundError(ColabkitError):
    """The suite's notebooks and grid files cannot be found (no checkout beside colabkit, not in Colab)."""


class GpuCheckError(ColabkitError):
    """A measurement of `python -m colabkit gpu-check` did not come back: its worker process died,
    ran past its time limit or raised. The check turns it into a FAIL row naming the worker's log."""


class GpuCheckFailed(ColabkitError):
    """A row of `python -m colabkit gpu-check` FAILED: this GPU runtime does not measure right (the
    Colab sweep notebook stops before its sweep on this)."""


class DevicePackError(ColabkitError):
    """The device pack (`./run.sh device-pack`, colabkit.ondevice) cannot be built, installed or imported as
    asked: a malformed list, a requirement neither the image nor the pack meets, a pack over its size, a zip
    that is not a device run's. The message names the file or package and what to change."""


class FolderNotFoundError(ColabkitError, FileNotFoundError):
    """A folder colabkit was asked to read (outputs to archive, results to report) does not exist."""


class BootstrapError(ColabkitError):
    """The Colab bootstrap could not install what the runtime lacks (pip failed)."""


class CoordinatesError(ColabkitError, ValueError):
    """A repository (OWNER/NAME) or ref that cannot be used in a badge URL or a pip requirement."""


class NotebookTemplateError(ColabkitError):
    """A notebook cannot be stamped with the Colab header and bootstrap (e.g. it has no title cell)."""


class UnknownDataSourceError(ColabkitError, ValueError):
    """A `data_source` other than "auto", "real" or "offline"."""


class DataError(ColabkitError):
    """A dataset could not be provided as asked."""


class DataUnavailableError(DataError):
    """The data cannot be had: its source is unreachable or keeps serving a corrupt file, or an
    offline substitute's package is missing. `data_source="auto"` falls back on this error only."""


class DownloadError(DataUnavailableError):
    """Every mirror of a file was unreachable (no network, DNS failure, HTTP error, timeout)."""


class CorruptDownloadError(DataUnavailableError):
    """A downloaded file failed verification (pinned sha256, size, archive checks) twice."""


class MirrorUnreachableError(DataUnavailableError):
    """One mirror of a file could not be reached or refused the request; `fetch` tries the next
    one, and raises DownloadError once none is left."""


class CorruptFileError(DataError):
    """A file failed one check (its pinned sha256, its size, its archive's own integrity checks).
    Raised by the validators `fetch` runs; `fetch` downloads once more, then raises CorruptDownloadError."""


class DataFormatError(DataError):
    """A file is intact but does not hold what the dataset's layout promises (missing member,
    wrong shape, labels out of range). Never silenced by a fallback: it means a changed source."""


class DataCacheWarning(UserWarning):
    """A cached data file failed verification and was removed (the message names it and why)."""


class DataSourceWarning(UserWarning):
    """Issued whenever a loader returns anything but the real data (an offline or synthetic
    substitute), so that no result can pass for one made on the real dataset."""


class RatesFileError(ColabkitError):
    """A rates file (`--rates FILE`, docs/cost.md) cannot be used: missing, not YAML or JSON, or an entry without a
    positive rate, its source or the date it was read. Raised before any cost is computed; the line names the entry."""


class ReportError(ColabkitError):
    """A report cannot be built as asked (a results folder that does not exist, the report notebook
    missing or failing)."""


class NoRecordsError(ReportError):
    """No readable record below the results folders: nothing to report. `rejected` lists the files
    found there that are not records, (path, why), so that a caller can name them."""

    def __init__(self, message: str, rejected: list[tuple[str, str]] | None = None) -> None:
        self.rejected = list(rejected or [])
        super().__init__(message)


class ExperimentError(ColabkitError, ValueError):
    """A repeated experiment cannot be run or summarised as asked (no repeats, repeats that
    reported different scores)."""


class UnknownDatasetError(ColabkitError, ValueError):
    """A dataset name that no loader of this notebook knows."""


class ParameterError(ColabkitError, ValueError):
    """Values a notebook's parameters cell was given (by papermill, a sweep, or an edit in Colab) that
    its experiment's declaration does not allow; one line per problem, naming parameter, value and
    what is allowed. Raised right after the parameters cell, before any work."""

    def __init__(self, problems: list[str] | str) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("; ".join(self.problems))


class ExperimentDeclarationError(ColabkitError):
    """An experiment declaration that contradicts itself (a default outside its own range, a headline
    metric it does not record) or a module named in COLABKIT_EXPERIMENTS that cannot be imported."""


class UnknownExperimentError(ColabkitError, KeyError):
    """An experiment name no declaration registers."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0]) if self.args else ""


class InsufficientMemoryError(ColabkitError):
    """A model whose training (or decoding: its key-value cache) clearly cannot fit the device's memory (its
    estimate, colabkit.training.memory, above 90 % of what the device has), refused before it is built. The name ends in
    MemoryError on purpose: a sweep files the run's failure as `oom`, as it would the real one."""


class DecodeModelError(ColabkitError, ValueError):
    """A model the key-value-cache decode (colabkit.inference.decode) cannot read: not ParaDnn's decoder-only
    Transformer as notebooks/paradnn.ipynb builds it (the message names the layer out of place)."""


class FlopCountError(ColabkitError):
    """A model's FLOPs cannot be counted analytically: a layer type without a formula (named in the
    message), an axis of unknown length, or a model that was never built on keras.Input."""


class ProfileSummaryUnavailable(ColabkitError):
    """A profile's trace was written but cannot be broken down here: the converter (xprof) is absent,
    or the trace holds no operation it counts. The record says why; the trace still opens in TensorBoard."""
