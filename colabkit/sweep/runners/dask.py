"""Sweeps on a Dask cluster: one Dask task per combination, the same records as a local sweep.

`--cluster tcp://host:8786` submits every unfinished combination to a running scheduler;
`--cluster local:N` starts a LocalCluster of N one-thread worker processes. Each task (`run_on_worker`,
on the worker) runs `execute_combination` (the local sweep's runner) in a scratch folder there; its
products come back as bytes (returned) or are written into OUT by the worker (shared, `--shared-out` or
detected through the sweep's token file), each through a temporary name, the record last. Devices are
worker resources (GPU=1, TPU=1); a worker that dies is retried as `allowed-failures` says, then recorded
`worker_died`; Ctrl-C cancels the tasks and kills the kernels they started. See docs/cluster.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from colabkit.device.memory import DeviceMemory
from colabkit.device.spec import DeviceKind, DeviceRequest
from colabkit.errors import ColabkitError, ExtraNotInstalledError
from colabkit.extras import needs
from colabkit.records.record import utc_now
from colabkit.records.run_error import RunError
from colabkit.records.schema import ErrorKind
from colabkit.sweep.decide import Decision
from colabkit.sweep.devices import Inventory
from colabkit.sweep.expand import Combination
from colabkit.sweep.options import RunOptions
from colabkit.sweep.runners.base import Executor, Started
from colabkit.sweep.runners.execute import (
    Outcome,
    RunFiles,
    execute_combination,
    filesystem_error,
    is_filesystem_fault,
    record_lost_run,
    write_failed_record,
)
from colabkit.sweep.runners.kernels import close_warm_kernels, warm_kernels
from colabkit.sweep.runners.notebook import warm_up

if TYPE_CHECKING:
    from distributed import Client


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


__all__ = ["TOKEN_ENV", "ClusterInventory", "ClusterSession", "DaskExecutor", "cluster_devices", "connect",
           "not_a_scheduler", "resources_for"]

MISSING_EXTRA = f"--cluster {needs('cluster')}"
LOCAL_PREFIX = "local:"
LOCAL_ALLOWED_FAILURES = 1  # a combination whose worker dies is retried once on another worker
ANSWER_TIMEOUT_S = 4  # a scheduler accepts a TCP connection, and sends its handshake, within this


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ExtraNotInstalledError(MISSING_EXTRA) from None
    return distributed


# --- the cluster ---------------------------------------------------------------------------------

@dataclass
class ClusterSession:
    """A connected Dask client (and the LocalCluster it started, for `local:N`)."""

    address: str
    client: Client
    local_cluster: Any = None

    def workers(self) -> dict[str, dict[str, Any]]:
        """The scheduler's view of each worker: host, nthreads, resources, name."""
        try:
            info = self.client.scheduler_info(n_workers=-1)  # every worker (newer versions list 5 by default)
        except TypeError:  # distributed before n_workers existed lists them all
            info = self.client.scheduler_info()
        return dict(info.get("workers", {}))

    def close(self) -> None:
        self.client.close()
        if self.local_cluster is not None:
            self.local_cluster.close()


def connect(cluster: str, *, timeout_s: float = 10, local_resources: dict[str, float] | None = None,
            local_threads: int = 1) -> ClusterSession:
    """Connect to the scheduler at `cluster` ('tcp://host:8786'), or start `local:N` worker processes
    on this machine (`local_resources` are what each local worker declares, for tests). Anything at
    `cluster` that is not a Dask scheduler is a one-line ColabkitError within about 2 x ANSWER_TIMEOUT_S
    (`not_a_scheduler`); distributed's Client then has `timeout_s` to connect."""
    distributed = _distributed()
    if cluster.startswith(LOCAL_PREFIX):
        count_text = cluster[len(LOCAL_PREFIX):]
        if not count_text.isdigit() or int(count_text) < 1:
            raise ColabkitError(f"--cluster {cluster!r}: expected local:N with N >= 1 worker processes, e.g. local:2")
        import dask

        with dask.config.set({"distributed.scheduler.allowed-failures": LOCAL_ALLOWED_FAILURES}):
            local = distributed.LocalCluster(n_workers=int(count_text), threads_per_worker=local_threads,
                                             processes=True, dashboard_address=None, resources=local_resources,
                                             silence_logs=40)
        return ClusterSession(local.scheduler_address, distributed.Client(local), local)
    why = not_a_scheduler(cluster, min(timeout_s, ANSWER_TIMEOUT_S))
    if why is None:
        try:
            client = distributed.Client(cluster, timeout=timeout_s)
        except ValueError as exc:  # distributed's parser: "missing port number in address ..."
            raise ColabkitError(f"--cluster {cluster!r}: {exc}; expected a scheduler's address (tcp://host:8786) "
                                "or local:N") from None
        except (OSError, TimeoutError, MemoryError) as exc:  # MemoryError: a reply read as a huge frame length
            why = str(exc)
    if why is not None:
        raise ColabkitError(f"--cluster {cluster}: no Dask scheduler answered ({why}); start one with "
                            "`dask scheduler` and workers with `dask worker ADDRESS` (see docs/cluster.md)")
    session = ClusterSession(cluster, client)
    if not session.workers():
        session.close()
        raise ColabkitError(f"--cluster {cluster}: the scheduler has no workers; start some with "
                            f"`dask worker {cluster} --nthreads 1` (see docs/cluster.md)")
    return session


def not_a_scheduler(address: str, timeout_s: float) -> str | None:
    """Why no Dask scheduler answers at a tcp:// address, from one plain TCP connection (where
    distributed's Client would retry for its whole timeout, or read an HTTP reply as a frame length and
    try to allocate exbibytes): nothing accepts it (a closed port refuses at once, an unreachable host
    within `timeout_s`), or what does sends no whole Dask handshake within `timeout_s` (a scheduler sends
    one, a small frame, as soon as it accepts; an HTTP server waits for a request, a proxy may answer 400,
    a listener may send a frame's start and stop).
    None when a handshake comes, or the address is not plain TCP (distributed then says what it makes
    of it). A scheduler logs the probe at INFO level ("... closed before handshake completed")."""
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(address)
        host, port = parse_host_port(location)
    except (ValueError, TypeError):
        return None
    if scheme != "tcp" or port is None:
        return None
    head, deadline = b"", time.monotonic() + timeout_s
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as connection:
            # the whole handshake once its frame's length is known (distributed's Client reads it with no
            # time limit: a listener that stops midway would hold a sweep for ever), else 128 bytes or a line
            while len(head) < (_frame_end(head) or 128) and (_dask_frame(head) or b"\r\n" not in head):
                connection.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    chunk = connection.recv(min(1 << 16, (_frame_end(head) or 128) - len(head)))
                except TimeoutError:
                    break  # what came so far (if anything) says who answered
                if not chunk:
                    break
                head += chunk
    except OSError as exc:  # refused, unreachable (timed out), no such host
        return exc.strerror or str(exc) or type(exc).__name__
    if _dask_frame(head) and len(head) >= _frame_end(head):
        return None
    if _dask_frame(head):
        return (f"something sent the start of a Dask handshake ({len(head)} of its {_frame_end(head)} bytes), then no "
                f"more within {timeout_s:g} s")
    if head.startswith(b"HTTP/"):
        status = head.split(b"\r\n")[0].decode("ascii", "replace")
        return f"an HTTP server did: {status}"
    if not head:
        return f"something accepts connections there but sent no Dask handshake within {timeout_s:g} s"
    return f"what answered does not speak Dask's protocol; its first bytes: {head[:16]!r}"


def _frame_end(head: bytes) -> int:
    """The bytes of the whole message `head` opens where it opens one as distributed frames it (`_dask_frame`):
    its 8-byte length and what that counts; 0 where it does not."""
    return 8 + struct.unpack("<Q", head[:8])[0] if _dask_frame(head) else 0


def _dask_frame(head: bytes) -> bool:
    """Whether `head` opens a small message framed as distributed's TCP comm frames one: its length
    (8 bytes, little-endian, counting what follows), then the number of frames and each frame's length."""
    if len(head) < 16:
        return False
    length, frames = struct.unpack("<QQ", head[:16])
    return 1 <= frames <= 64 and 8 * (1 + frames) <= length <= 1 << 20


def cluster_devices(workers: dict[str, dict[str, Any]]) -> dict[str, int]:
    """What the sweep's device check sees: CPUs everywhere, and the most GPUs (TPUs) one worker
    declares as Dask resources (a `gpu:2` combination needs one worker with GPU=2)."""
    def most(resource: str) -> int:
        return max((int(info.get("resources", {}).get(resource, 0)) for info in workers.values()), default=0)

    return {"cpu": 1, "gpu": most("GPU"), "tpu": min(most("TPU"), 1)}


def resources_for(request: DeviceRequest) -> dict[str, int] | None:
    """The Dask resources a combination asking for `request` needs (None: any worker may run it)."""
    if request.kind == DeviceKind.GPU:
        return {"GPU": request.count or 1}
    if request.kind == DeviceKind.TPU:
        return {"TPU": 1}
    return None


@dataclass(frozen=True)
class ClusterInventory(Inventory):
    """The devices of a Dask cluster's workers (see `cluster_devices`); an absent one is named as
    the resource no worker declares."""

    workers: dict[str, dict[str, Any]] = field(default_factory=dict)

    def absent_reason(self, combination: Combination) -> str:
        need = resources_for(combination.request) or {}
        wanted = ", ".join(f"{name}={count}" for name, count in need.items())
        declared = sorted(f"{info.get('host', address)} {dict(info.get('resources') or {})}"
                          for address, info in self.workers.items())
        return (f"device '{combination.device}' is on no worker of the Dask cluster "
                f"(none declares {wanted}; workers: {'; '.join(declared) or 'no workers'})")

    def memory(self, request: DeviceRequest) -> DeviceMemory | None:
        """Unknown here: the workers' memory is theirs; each run's notebook checks it on its worker."""
        return None


# --- on the client -------------------------------------------------------------------------------

@dataclass
class _Submitted:
    decision: Decision
    files: RunFiles
    submitted: float = field(default_factory=time.perf_counter)


def _placeholders(files: RunFiles, notebook_source: bytes, address: str) -> None:
    """What OUT holds while a task is out: the running notebook (so `colabkit status` and the next
    sweep see it as running or interrupted, as for local runs) and a log saying where it runs."""
    files.prepare()
    files.running_notebook.write_bytes(notebook_source)
    files.log.write_text(f"[colabkit] {utc_now()} submitted to the Dask cluster at {address}; "
                         "the run's own log replaces this once it finishes\n", encoding="utf-8")


class DaskExecutor(Executor):
    """One Dask task per combination on the cluster at `options.cluster` (connected on creation); the
    devices are what its workers declare. `options.shared_out`: True, every worker must see `out` and
    writes there; False, products always come back as bytes; None, each task writes into `out` when it
    sees it and returns the bytes otherwise."""

    def __init__(self, out: Path, options: RunOptions) -> None:
        super().__init__(Path(out).absolute(), options)
        shared_out = options.shared_out
        self.share: ShareMode = "auto" if shared_out is None else ("shared" if shared_out else "returned")
        self.session = connect(str(options.cluster))
        self.workers: dict[str, dict[str, Any]] = {}

    def find_devices(self) -> Inventory:
        self.workers = self.session.workers()
        return ClusterInventory(cluster_devices(self.workers), self.workers)

    @property
    def threads(self) -> int:
        return sum(int(info.get("nthreads", 1)) for info in self.workers.values())

    @property
    def slots(self) -> int:
        return max(1, self.threads)

    @property
    def where(self) -> str:
        return f" on the Dask cluster at {self.session.address} ({len(self.workers)} workers, {self.threads} threads)"

    def notes(self, to_run: Sequence[Decision]) -> list[str]:
        hosts = [info.get("host") for info in self.workers.values() for _ in range(int(info.get("nthreads", 1)))]
        if len(hosts) != len(set(hosts)) and len(to_run) > 1 and any(
                resources_for(decision.combination.request) is None for decision in to_run):
            return ["warning: several worker threads share a host: CPU combinations that run side by side there "
                    "distort each other's timings; start one worker thread per host for numbers you publish"]
        return []

    def close(self) -> None:
        self.session.close()

    def run(self, decisions: Sequence[Decision], started: Started | None = None) -> Iterator[Outcome]:
        distributed = _distributed()
        token = secrets.token_hex(8)
        probe = self.out / f"{PROBE_PREFIX}{token}"
        probe.write_text(self.session.address, encoding="utf-8")
        section = {"scheduler": self.session.address}
        running: dict[Any, _Submitted] = {}
        try:
            _warm_up_workers(self.session)
            futures = []
            for decision in decisions:
                combination = decision.combination
                source = combination.notebook.read_bytes()
                files = RunFiles.of(combination, self.out)
                _placeholders(files, source, self.session.address)
                key = f"colabkit-{combination.name}-{combination.device}-{combination.run_slug}-{token}"
                future = self.session.client.submit(
                    run_on_worker, combination, source, decision.fingerprint, self.options, str(self.out), token,
                    self.share, section, key=key, resources=resources_for(combination.request), pure=False)
                running[future] = _Submitted(decision, files)
                futures.append(future)
            for future in distributed.as_completed(futures):
                yield _collect(future, running.pop(future), section)
        except BaseException:  # Ctrl-C, or the sweep closed this iterator early
            _cancel(self.session, list(running), token)
            for submitted in running.values():
                submitted.files.discard_temporaries()
            raise
        finally:
            probe.unlink(missing_ok=True)
            if any(decision.combination.settings.kernels == "reuse" for decision in decisions):  # left on the workers
                with contextlib.suppress(OSError, TimeoutError):  # the scheduler is gone: so are they
                    self.session.client.run(close_warm_kernels, {TOKEN_ENV: token}, on_error="ignore")


def _warm_up_workers(session: ClusterSession) -> None:
    """Load papermill and nbconvert on every worker before the first timed run; a worker without
    colabkit (or with a broken install) is reported here, before anything is submitted."""
    try:
        session.client.run(warm_up)
    except Exception as exc:  # noqa: BLE001 - whatever a worker raised (ImportError, pickling errors) means the same
        raise ColabkitError(f"the Dask workers cannot run colabkit ({type(exc).__name__}: {exc}); install colabkit "
                            "and the notebooks' dependencies in every worker's environment") from None


def _lost(submitted: _Submitted, exc: BaseException, section: dict[str, Any]) -> Outcome:
    """The failed record of a combination whose task did not come back (its worker died, or the task
    itself could not run there, e.g. colabkit missing on the worker)."""
    last = getattr(getattr(exc, "last_worker", None), "address", None)
    if type(exc).__name__ == "KilledWorker":
        tries = getattr(exc, "allowed_failures", 0) + 1
        error = RunError("KilledWorker", ErrorKind.WORKER_DIED,
                         f"the Dask worker running it died (killed, or out of host memory), on each of {tries} "
                         f"tries; the last was {last}")
    else:
        error = RunError(type(exc).__name__, ErrorKind.CLUSTER, f"the Dask task failed: {exc}"[:2000])
    decision = submitted.decision
    return record_lost_run(decision.combination, submitted.files, decision.fingerprint, error,
                           seconds=time.perf_counter() - submitted.submitted, sweep_section={"cluster": section},
                           worker={"address": last} if last else {})


def _collect(future: Any, submitted: _Submitted, section: dict[str, Any]) -> Outcome:
    """The Outcome of a finished task, its products written under OUT if they came back as bytes."""
    decision = submitted.decision
    if future.cancelled():  # not by this sweep (it stops collecting first): the scheduler restarted or lost it
        lost = ColabkitError("the scheduler cancelled the task (restarted, or lost its state)")
        return _lost(submitted, lost, section)
    if future.status != "finished":
        return _lost(submitted, future.exception(), section)
    result: TaskResult = future.result()
    files = submitted.files
    try:
        if result.files is not None:
            commit_products(files, result.files)
        elif not result.shared and result.error is not None:  # refused before running (--shared-out, OUT unseen)
            write_failed_record(decision.combination, files, decision.fingerprint, result.error,
                                sweep_section={"cluster": section}, worker=result.worker)
    except OSError as exc:  # a full or unwritable OUT here fails this combination, not the sweep
        if not is_filesystem_fault(exc):
            raise
        error = filesystem_error(exc, files.record)
        return Outcome(decision.combination, "failed", result.seconds, files.record,
                       f"its products could not be written here: {error.message}", error=error)
    message = f"{result.message} [{result.worker.get('host')}]" if result.message else f"on {result.worker.get('host')}"
    return Outcome(decision.combination, result.status, result.seconds, files.record, message, error=result.error)


def _cancel(session: ClusterSession, futures: list[Any], token: str) -> None:
    """Cancel the tasks still out and kill the kernels this sweep started on the workers."""
    if not futures:
        return
    try:
        session.client.cancel(futures, force=True)
        session.client.run(stop_sweep_kernels, token, on_error="ignore")
    except (OSError, TimeoutError) as exc:  # the scheduler is gone: nothing left to cancel there
        print(f"warning: could not cancel the cluster's tasks ({exc})")
