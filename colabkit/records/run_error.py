"""How a run failed, as one typed value: `RunError`, the `error` section of a failed (or skipped) record.

Everything that fails a run builds one and writes it with `as_record()`; readers take it back with
`RunError.from_record(record["error"])`. Keys as docs/records.md, `error`, says: `type`, `kind`,
`message`, `cell`, `exec_count`, `source`, a dead kernel's `exit_code`, a multi-worker `chief_error`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from colabkit.records.schema import ErrorKind

OUT_OF_MEMORY_ERRORS = ("ResourceExhaustedError", "OutOfMemoryError", "MemoryError")
# NumPy raises numpy._core._exceptions._ArrayMemoryError ("Unable to allocate 7.3 PiB for an array...");
# PyTorch "CUDA out of memory", CUDA itself CUDA_ERROR_OUT_OF_MEMORY, XLA "RESOURCE_EXHAUSTED".
_OUT_OF_MEMORY_TEXT = ("OOM when allocating", "RESOURCE_EXHAUSTED", "Resource exhausted", "out of memory",
                       "OUT_OF_MEMORY", "Unable to allocate")
_KINDS = frozenset(kind.value for kind in ErrorKind)
_FULL_DISK_TEXT = ("No space left on device", "Disk quota exceeded")

# What opens a log line rather than saying anything: TensorFlow's C++ logs
# ("2024-05-01 10:00:00.123456: W tensorflow/core/kernels/op_kernel.cc:1830] "), absl's
# ("W0501 10:00:00.123456  1234 file.cc:12] ") and Python logging's ("WARNING:tensorflow:").
_LOG_PREFIX = re.compile(r"^(?:\d{4}-\d\d-\d\d[ T][\d:.,]+:? ?[IWEF] \S+\] ?"
                         r"|[IWEF]\d{4} [\d:.]+\s+\d+ \S+\] ?"
                         r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:)")


def first_meaningful_line(text: str) -> str:
    """The first line of `text` that says something: blank lines, lines of punctuation only
    ('-----', '^^^^'), 'Traceback (most recent call last):' and bare log prefixes are passed over,
    and a log line's prefix is cut off. '' when no line says anything."""
    for line in str(text).splitlines():
        line = _LOG_PREFIX.sub("", line.strip()).strip()
        if not line or re.fullmatch(r"[\W_]+", line) or line.startswith("Traceback (most recent call last)"):
            continue
        return line
    return ""


def is_out_of_memory(type_name: str, message: str) -> bool:
    """An out-of-memory error by its type's name (also private subclasses such as NumPy's
    _ArrayMemoryError) or by the allocator's words in its message."""
    return (type_name in OUT_OF_MEMORY_ERRORS or type_name.endswith(OUT_OF_MEMORY_ERRORS)
            or any(text in message for text in _OUT_OF_MEMORY_TEXT))


def exception_kind(type_name: str, message: str) -> ErrorKind:
    """The `kind` of an exception raised in a cell: oom, not_a_measurement, filesystem or exception."""
    if is_out_of_memory(type_name, message):
        return ErrorKind.OOM
    if type_name == "MeasurementError":
        return ErrorKind.NOT_A_MEASUREMENT
    if any(text in message for text in _FULL_DISK_TEXT):
        return ErrorKind.FILESYSTEM
    return ErrorKind.EXCEPTION


@dataclass(frozen=True)
class RunError:
    """Why a run failed (or was skipped): what its record's `error` section says.

    `source` is the code of the cell the failure is placed at; it is set (possibly to '') exactly
    when the failure is placed at a cell, and then `cell` (its index in the notebook as stored,
    0-based) and `exec_count` (its In [n] in the executed copy) are written too, null where unknown.
    """

    type: str  # the exception's class name, e.g. "ValueError"; "DeviceNotAvailable" for a skip
    kind: ErrorKind
    message: str
    cell: int | None = None
    exec_count: int | None = None
    source: str | None = None
    exit_code: int | None = None  # a dead kernel's exit status (negative: the signal)
    chief_error: RunError | None = None  # a multi-worker run: the chief's own error

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", ErrorKind(self.kind))  # "oom" is accepted, a misspelt kind is not

    def as_record(self) -> dict[str, Any]:
        """The record's `error` section: plain JSON values."""
        section: dict[str, Any] = {"type": self.type, "kind": self.kind.value, "message": self.message}
        if self.source is not None:
            section.update(cell=self.cell, exec_count=self.exec_count, source=self.source)
        if self.exit_code is not None:
            section["exit_code"] = self.exit_code
        if self.chief_error is not None:
            section["chief_error"] = self.chief_error.as_record()
        return section

    @classmethod
    def from_record(cls, section: Any) -> RunError:
        """The error a record's `error` section holds. Lenient, as records come from notebooks too:
        a missing type reads 'Error', a kind this colabkit does not know reads 'exception'."""
        section = section if isinstance(section, dict) else {}
        kind = section.get("kind")
        chief = section.get("chief_error")
        source = section.get("source")
        return cls(
            type=str(section.get("type") or "Error"),
            kind=ErrorKind(kind) if kind in _KINDS else ErrorKind.EXCEPTION,
            message=str(section.get("message") or ""),
            cell=_whole(section.get("cell")),
            exec_count=_whole(section.get("exec_count")),
            source=None if source is None else str(source),
            exit_code=_whole(section.get("exit_code")),
            chief_error=cls.from_record(chief) if isinstance(chief, dict) else None,
        )

    def summary(self) -> str:
        """One line for progress lines and tables: 'ValueError: value 2 is set to fail (In [4])', the
        message's first meaningful line only (a TensorFlow message runs over many lines)."""
        cell = f" (In [{self.exec_count}])" if self.exec_count is not None else ""
        return f"{self.type}: {first_meaningful_line(self.message)[:200]}{cell}"


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
