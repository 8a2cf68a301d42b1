"""Run one notebook through papermill with its kernel's chatter in a log, and read how it failed.

Used by the sweep (one run per combination, colabkit.sweep.runners.execute): it executes a notebook whose
kernel process writes its own output (TensorFlow's C++ logs, start-up and shutdown warnings) to a
log file rather than to the terminal, and turns papermill's exceptions into a message naming the
cell that failed. (The report runs no notebook: colabkit.report.build.)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

from colabkit.io import write_atomic
from colabkit.records.run_error import RunError, exception_kind

__all__ = ["CellFailure", "KernelWatch", "cell_error", "cell_failure", "execute_notebook", "export_html_below",
           "export_run_html", "library_logs_to", "logging_kernel_manager", "notebook_error", "source_index",
           "started_cells", "warm_up"]


class KernelWatch:
    """Remembers the kernel process a run started, to tell how it ended if it died."""

    def __init__(self) -> None:
        self.process: Any = None

    @property
    def exit_code(self) -> int | None:
        """The kernel process's exit status; None while it runs or when none was started."""
        return None if self.process is None else self.process.poll()


def logging_kernel_manager(log: IO[str], env: Mapping[str, str] | None = None,
                           watch: KernelWatch | None = None) -> type:
    """A kernel manager class whose kernel process writes its stdout and stderr to `log`, started
    with `env` added to the environment (e.g. CUDA_VISIBLE_DEVICES for parallel jobs); `watch`
    is told the kernel's process."""
    from jupyter_client.manager import AsyncKernelManager

    class LoggingKernelManager(AsyncKernelManager):
        async def start_kernel(self, **kwargs: Any) -> None:
            kwargs.setdefault("stdout", log)
            kwargs.setdefault("stderr", log)
            if env:
                kwargs["env"] = {**os.environ, **kwargs.get("env", {}), **env}
            await super().start_kernel(**kwargs)
            if watch is not None:
                watch.process = getattr(self.provisioner, "process", None)

    return LoggingKernelManager


@contextmanager
def library_logs_to(log: IO[str]) -> Iterator[None]:
    """papermill's and nbclient's own messages ("Kernel died...") go to `log` while this lasts."""
    handler = logging.StreamHandler(log)
    handler.setFormatter(logging.Formatter("[%(name)s %(levelname)s] %(message)s"))
    loggers = [logging.getLogger(name) for name in ("papermill", "nbclient", "traitlets")]
    saved = [(logger.propagate, logger.level) for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.propagate = False
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        for logger, (propagate, level) in zip(loggers, saved):
            logger.removeHandler(handler)
            logger.propagate, logger.level = propagate, level


def execute_notebook(source: str | Path, output: str | Path, parameters: Mapping[str, Any], log: IO[str], *,
                     kernel_name: str | None = None, cwd: str | Path | None = None,
                     env: Mapping[str, str] | None = None, watch: KernelWatch | None = None,
                     start_timeout_s: float = 60, timeout_func: Callable[[Any], int] | None = None,
                     capture_fd_output: bool = True, kernel_manager: Any = None) -> None:
    """Execute `source` with `parameters` into `output` through papermill, output to `log`.

    `capture_fd_output` False keeps C-level output (TensorFlow's logs) out of the cells. A started
    `kernel_manager` (colabkit.sweep.runners.kernels) runs it in that kernel and leaves it running.

    Raises what papermill raises: PapermillExecutionError for an exception in a cell (see
    `cell_failure`), nbclient's DeadKernelError, CellTimeoutError, jupyter_client's NoSuchKernel...
    """
    import papermill

    options: dict[str, Any] = {}
    if timeout_func is not None:
        options["timeout_func"] = timeout_func
    if kernel_manager is not None:
        options["km"] = kernel_manager
    else:
        options["kernel_manager_class"] = logging_kernel_manager(log, env, watch)
        if not capture_fd_output:
            options["extra_arguments"] = ["--IPKernelApp.capture_fd_output=False"]
    papermill.execute_notebook(
        str(source), str(output), parameters=dict(parameters), kernel_name=kernel_name, progress_bar=False,
        stdout_file=log, stderr_file=log, cwd=str(cwd or Path.cwd()), start_timeout=start_timeout_s, **options)


@dataclass(frozen=True)
class CellFailure:
    """An exception raised inside a cell, as papermill reports it."""

    ename: str  # the exception's type name, e.g. "ResourceExhaustedError"
    evalue: str  # its message
    source: str  # the cell's code
    cell_index: int | None  # the cell's index in the executed notebook (papermill adds a parameters cell)
    exec_count: int | None  # its In [n]


def cell_failure(exc: BaseException) -> CellFailure | None:
    """What papermill's PapermillExecutionError says about the cell that raised; None for any other
    error (the kernel died, timed out or never started)."""
    ename = getattr(exc, "ename", None)
    if not ename:
        return None
    return CellFailure(ename=str(ename), evalue=str(getattr(exc, "evalue", "")), source=str(getattr(exc, "source", "")),
                       cell_index=getattr(exc, "cell_index", None), exec_count=getattr(exc, "exec_count", None))


def started_cells(notebook_path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(index, cell) of every code cell papermill marked as started, from the saved notebook."""
    import nbformat

    if not notebook_path.exists():
        return []
    try:
        notebook = nbformat.read(str(notebook_path), as_version=4)
    except (OSError, ValueError):
        return []
    return [(index, cell) for index, cell in enumerate(notebook.cells)
            if cell.get("cell_type") == "code" and cell.get("metadata", {}).get("papermill", {}).get("start_time")]


def source_index(source_notebook: Path, source: str, executed_index: int | None) -> int | None:
    """Where a cell of the executed notebook sits in the notebook as stored (papermill adds a cell
    of injected parameters, so the executed copy's indices run one ahead after it)."""
    import nbformat

    try:
        cells = nbformat.read(str(source_notebook), as_version=4).cells
    except (OSError, ValueError):
        return None
    matches = [index for index, cell in enumerate(cells) if cell.get("source") == source]
    earlier = [index for index in matches if executed_index is None or index <= executed_index]
    return (earlier or matches or [None])[-1]


def cell_error(failure: CellFailure, source_notebook: Path) -> RunError:
    """The error of a run whose cell raised: the exception's type and message, its kind (oom,
    not_a_measurement, filesystem or exception), the cell's index in `source_notebook` as stored,
    its In [n] and its code."""
    return RunError(failure.ename, exception_kind(failure.ename, failure.evalue), failure.evalue[:4000],
                    cell=source_index(source_notebook, failure.source, failure.cell_index),
                    exec_count=failure.exec_count, source=failure.source[:2000])


def notebook_error(notebook_path: Path, source_notebook: Path) -> RunError | None:
    """The exception an executed notebook ended with, read from its first error output; None if it has none."""
    import nbformat

    try:
        cells = nbformat.read(str(notebook_path), as_version=4).cells
    except (OSError, ValueError):
        return None
    for index, cell in enumerate(cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                failure = CellFailure(ename=str(output.get("ename")), evalue=str(output.get("evalue", "")),
                                      source=str(cell.get("source", "")), cell_index=index,
                                      exec_count=cell.get("execution_count"))
                return cell_error(failure, source_notebook)
    return None


@lru_cache(maxsize=1)
def _html_exporter() -> Any:
    from nbconvert import HTMLExporter

    return HTMLExporter()  # built once per process: loading its templates costs about a second


def warm_up() -> None:
    """Import papermill and build the HTML exporter now, not during a run that is being timed."""
    import papermill  # noqa: F401

    _html_exporter()


def export_run_html(notebook_path: Path, html_path: Path, temporary: Path | None = None) -> Path:
    """Export an executed run's notebook to HTML with nbconvert, as it is (code and outputs), atomically
    through `temporary`. (The report's own export, self-contained and code hidden, is
    colabkit.report.build.export_report_html.)"""
    body, _ = _html_exporter().from_filename(str(notebook_path))
    return write_atomic(html_path, body, temporary=temporary)


def export_html_below(folder: str | Path, force: bool = False) -> tuple[list[Path], list[tuple[Path, str]]]:
    """Export to HTML every executed run notebook below `folder` (a sweep's <slug>.ipynb, with its record
    <slug>.json beside it) that has no HTML yet, or an older one than the notebook (every one with
    `force`): what `sweep --html failed` left for later. Returns (the HTML files written, the notebooks
    that could not be exported with why). Hidden files (a running sweep's temporaries) are left alone."""
    written: list[Path] = []
    failed: list[tuple[Path, str]] = []
    for notebook in sorted(Path(folder).rglob("*.ipynb")):
        if notebook.name.startswith(".") or not notebook.with_suffix(".json").exists():
            continue
        html = notebook.with_suffix(".html")
        if not force and html.exists() and html.stat().st_mtime >= notebook.stat().st_mtime:
            continue
        try:
            written.append(export_run_html(notebook, html, html.with_name(f".{html.name}.export.tmp")))
        except Exception as exc:  # noqa: BLE001 - nbconvert raises many types: name the file, go on
            failed.append((notebook, f"{type(exc).__name__}: {exc}"))
    return written, failed
