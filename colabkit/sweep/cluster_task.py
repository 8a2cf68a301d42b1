"""What a sweep on a Dask cluster runs on a worker (colabkit.sweep.cluster submits it): one combination
through the local sweep's own runner, in a scratch folder there, its products then handed back as
bytes or written into the shared OUT; and, when the sweep is stopped, the kernels it started killed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from colabkit.notebook_runner import warm_up
from colabkit.records.run_error import RunError
from colabkit.records.schema import ErrorKind
from colabkit.sweep.combination import Combination
from colabkit.sweep.execution import RunFiles, execute_combination
from colabkit.sweep.kernels import warm_kernels
from colabkit.sweep.options import RunOptions

__all__ = ["PROBE_PREFIX", "TOKEN_ENV", "ShareMode", "TaskResult", "commit_products", "run_on_worker",
           "stop_sweep_kernels"]

PROBE_PREFIX = ".colabkit-cluster-"  # OUT/<prefix><token>: a task that sees it writes into OUT itself
TOKEN_ENV = "COLABKIT_SWEEP_TOKEN"  # set in every kernel a cluster sweep starts, to find them on Ctrl-C
ShareMode = Literal["auto", "shared", "returned"]


@dataclass
class TaskResult:
    """What one task sends back: the outcome, where it ran, and the products unless written in OUT."""

    status: str
    seconds: float
    message: str
    error: RunError | None
    worker: dict[str, Any]
    files: dict[str, bytes] | None = None  # suffix -> content; None: written into the shared OUT
    shared: bool = False
    cancelled: bool = False  # the sweep was stopped: nothing was written


_cancelled_tokens: set[str] = set()  # per worker process: sweeps stopped with Ctrl-C


def _worker_identity() -> dict[str, Any]:
    from distributed import get_worker

    worker = get_worker()
    # CUDA_VISIBLE_DEVICES: the GPU a one-GPU-per-worker set-up gave this worker (its kernels inherit it).
    return {"host": socket.gethostname(), "address": worker.address, "name": str(worker.name),
            "resources": dict(worker.state.total_resources),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}


def _worker_threads() -> int:
    from distributed import get_worker

    return max(1, int(getattr(get_worker().state, "nthreads", 1) or 1))


def _annotate_record(record_path: Path, worker: dict[str, Any], cluster_section: dict[str, Any]) -> bytes:
    record = json.loads(record_path.read_text(encoding="utf-8"))
    record["worker"] = worker
    record.setdefault("sweep", {})["cluster"] = cluster_section
    return (json.dumps(record, indent=2) + "\n").encode("utf-8")


def _write_bytes(path: Path, data: bytes, temporary: Path) -> None:
    """Write `data` to `path` through `temporary` and a rename; no half file if interrupted."""
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def commit_products(files: RunFiles, products: dict[str, bytes]) -> None:
    """Write a combination's products (suffix -> bytes) under their final names, the record last,
    each through a temporary name, so a reader sees a complete record or none."""
    files.base.parent.mkdir(parents=True, exist_ok=True)
    for suffix, path, temporary in ((".ipynb", files.notebook, files.running_notebook),
                                    (".html", files.html, files.running_html),
                                    (".log", files.log, files.log.with_name(f".{files.log.name}.tmp"))):
        if suffix in products:
            _write_bytes(path, products[suffix], temporary)
    _write_bytes(files.record, products[".json"], files.record.with_name(f".{files.record.name}.cluster.tmp"))
    files.discard_temporaries()


def run_on_worker(combination: Combination, notebook_source: bytes, fingerprint: dict[str, Any],
                  options: RunOptions, out: str, token: str, share: ShareMode,
                  cluster_section: dict[str, Any]) -> TaskResult:
    """The Dask task of one combination: run it with the local sweep's runner in a scratch folder on
    this worker, then return its products (or write them into `out` when this worker sees it)."""
    worker = _worker_identity()
    sees_out = (Path(out) / f"{PROBE_PREFIX}{token}").exists()
    if share == "shared" and not sees_out:
        error = RunError("SharedOutMissing", ErrorKind.CLUSTER,
                         f"--shared-out: worker {worker['host']} does not see {out}")
        return TaskResult("failed", 0.0, error.message, error, worker)
    shared = sees_out and share != "returned"
    if token in _cancelled_tokens:
        return TaskResult("failed", 0.0, "cancelled", None, worker, cancelled=True)
    warm_up()
    warm_kernels(capacity=_worker_threads())  # --kernels reuse: one warm kernel per worker thread
    with tempfile.TemporaryDirectory(prefix="colabkit-task-") as scratch:
        # The notebook travels with the task: workers need colabkit installed, not the project's files.
        notebook = Path(scratch) / "notebook" / combination.notebook.name
        notebook.parent.mkdir()
        notebook.write_bytes(notebook_source)
        local = dataclasses.replace(combination, notebook=notebook)
        cwd = options.cwd if options.cwd and os.path.isdir(options.cwd) else os.getcwd()
        with _CancelWatch(token):
            outcome = execute_combination(local, Path(scratch) / "out", fingerprint,
                                          dataclasses.replace(options, cwd=cwd), env={TOKEN_ENV: token})
        if token in _cancelled_tokens:
            return TaskResult(outcome.status, outcome.seconds, "cancelled", None, worker, cancelled=True)
        files = RunFiles.of(local, Path(scratch) / "out")
        products = {suffix: path.read_bytes() for suffix, path in
                    ((".ipynb", files.notebook), (".html", files.html), (".log", files.log)) if path.exists()}
        section = {**cluster_section, "out": "shared" if shared else "returned"}
        products[".json"] = _annotate_record(files.record, worker, section)
        result = TaskResult(outcome.status, outcome.seconds, outcome.message, outcome.error, worker)
        if shared:
            commit_products(RunFiles.of(combination, out), products)
            result.shared = True
        else:
            result.files = products
        return result


class _CancelWatch:
    """While a task runs: once its sweep is stopped, kill the kernels it starts, even those that a
    kernel start-up under way when `stop_sweep_kernels` ran brings up later."""

    def __init__(self, token: str, interval_s: float = 0.5) -> None:
        self.token, self.interval_s = token, interval_s
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="colabkit-cancel-watch", daemon=True)

    def _watch(self) -> None:
        while not self.done.wait(self.interval_s):
            if self.token in _cancelled_tokens:
                _kill_kernels(self.token)

    def __enter__(self) -> _CancelWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.done.set()
        self.thread.join()


def stop_sweep_kernels(token: str) -> int:
    """Run on each worker when a sweep is stopped: kill the kernels (and multi-worker processes) that
    sweep started there, so the tasks end now; their results are thrown away. Returns how many."""
    _cancelled_tokens.add(token)
    return _kill_kernels(token)


def _kill_kernels(token: str) -> int:
    import psutil

    killed = 0
    for child in psutil.Process().children(recursive=True):
        try:
            if child.environ().get(TOKEN_ENV) == token:
                child.kill()
                killed += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return killed
