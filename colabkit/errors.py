"""Typed exceptions. Every message says what went wrong and what the user can do about it."""

from __future__ import annotations


class ColabkitError(Exception):
    """Base class of every error colabkit raises on purpose."""


class DeviceNotFoundError(ColabkitError):
    """A requested device is absent. colabkit never falls back to another device silently."""


class UnknownDeviceError(ColabkitError, ValueError):
    """A device name that colabkit does not understand."""


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


class SweepInterrupted(ColabkitError):
    """A sweep stopped by Ctrl-C or SIGTERM. Holds the outcomes that finished before it stopped."""

    def __init__(self, outcomes: list, message: str = "interrupted") -> None:
        self.outcomes = outcomes
        super().__init__(message)
