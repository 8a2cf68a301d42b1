"""Sweeps on a Dask cluster: one Dask task per combination, the same records as a local sweep.

`python -m colabkit sweep GRIDS --cluster tcp://host:8786` submits every combination that is not
finished yet to a running Dask scheduler; `--cluster local:N` starts a LocalCluster of N worker
processes (one thread each) on this machine. Each task runs `execute_combination` (the local
sweep's own runner: papermill, a fresh kernel, every failure a `failed` record) on the worker, in a
scratch folder there, then hands back the products:

* returned (default when the workers cannot see OUT): the notebook, HTML, record and log come back
  as bytes and this process writes them under OUT/<notebook>/<device>/<slug>.*, each through a
  temporary name and a rename, the record last;
* shared (`--shared-out`, or detected: the task sees this sweep's token file in OUT at the same
  absolute path): the worker writes them into OUT itself, in the same order and the same way.

Devices are Dask worker resources: a `gpu` combination asks for GPU=1 (`gpu:N` for GPU=N), a `tpu`
one for TPU=1, so a worker started with `--resources "GPU=1" --nthreads 1` never runs two
measurements on its GPU at once. CPU, `auto` and `multiworker` combinations ask for nothing: any
worker runs them (start one worker thread per host for CPU timings you publish). Devices that no
worker declares are recorded as skipped, as a local sweep skips devices the machine lacks.

A worker that dies while running a combination (killed, out of host memory, its node preempted)
is retried by the scheduler on another worker as often as its `allowed-failures` setting says
(`local:N` sets 1: one retry); after that the combination gets a `failed` record of kind
`worker_died` naming the last worker. Ctrl-C cancels every submitted task, stops the kernels this
sweep started on the workers, and removes the temporaries, so no half file remains.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from colabkit.device.spec import parse_device
from colabkit.errors import ColabkitError, SweepInterrupted
from colabkit.io import write_json_atomic
from colabkit.records.record import make_record, utc_now
from colabkit.records.schema import ErrorKind
from colabkit.notebook_runner import warm_up
from colabkit.sweep.execution import Outcome, RunFiles, RunOptions, execute_combination, write_skipped_record
from colabkit.sweep.grid import Combination
from colabkit.sweep.runner import (
    Decision,
    Progress,
    check_output_folder,
    decide,
    missing_device_reason,
    plan,
    sweep_lock,
)

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["ClusterSession", "TaskResult", "cluster_devices", "connect", "on_cluster", "prepare_on_cluster", "resources_for", "run_cluster_sweep",
           "run_on_worker", "stop_sweep_kernels"]

MISSING_EXTRA = "--cluster needs the cluster extra: pip install colabkit[cluster]"
LOCAL_PREFIX = "local:"
LOCAL_ALLOWED_FAILURES = 1  # a combination whose worker dies is retried once on another worker
PROBE_PREFIX = ".colabkit-cluster-"  # OUT/<prefix><token>: a task that sees it writes into OUT itself
TOKEN_ENV = "COLABKIT_SWEEP_TOKEN"  # set in every kernel a cluster sweep starts, to find them on Ctrl-C
ShareMode = Literal["auto", "shared", "returned"]


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ColabkitError(MISSING_EXTRA) from None
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


def connect(cluster: str, *, timeout_s: float = 30, local_resources: dict[str, float] | None = None,
            local_threads: int = 1) -> ClusterSession:
    """Connect to the scheduler at `cluster` ('tcp://host:8786'), or start `local:N` worker processes
    on this machine (`local_resources` are what each local worker declares, for tests)."""
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
    try:
        client = distributed.Client(cluster, timeout=timeout_s)
    except ValueError as exc:  # distributed's parser: "missing port number in address ..."
        raise ColabkitError(f"--cluster {cluster!r}: {exc}; expected a scheduler's address (tcp://host:8786) "
                            "or local:N") from None
    except (OSError, TimeoutError) as exc:
        raise ColabkitError(f"--cluster {cluster}: no Dask scheduler answered ({exc}); start one with "
                            "`dask scheduler` and workers with `dask worker ADDRESS` (see docs/cluster.md)") from None
    session = ClusterSession(cluster, client)
    if not session.workers():
        session.close()
        raise ColabkitError(f"--cluster {cluster}: the scheduler has no workers; start some with "
                            f"`dask worker {cluster} --nthreads 1` (see docs/cluster.md)")
    return session


def cluster_devices(workers: dict[str, dict[str, Any]]) -> dict[str, int]:
    """What the sweep's device check sees: CPUs everywhere, and the most GPUs (TPUs) one worker
    declares as Dask resources (a `gpu:2` combination needs one worker with GPU=2)."""
    def most(resource: str) -> int:
        return max((int(info.get("resources", {}).get(resource, 0)) for info in workers.values()), default=0)

    return {"cpu": 1, "gpu": most("GPU"), "tpu": min(most("TPU"), 1)}


def resources_for(device: str) -> dict[str, int] | None:
    """The Dask resources a combination on `device` asks for (None: any worker may run it)."""
    request = parse_device(device)
    if request.kind == "gpu":
        return {"GPU": request.count or 1}
    if request.kind == "tpu":
        return {"TPU": 1}
    return None


def _inventory(workers: dict[str, dict[str, Any]]) -> str:
    declared = [f"{info.get('host', address)} {dict(info.get('resources') or {})}" for address, info in workers.items()]
    return "; ".join(sorted(declared)) or "no workers"


# --- on the worker -------------------------------------------------------------------------------

@dataclass
class TaskResult:
    """What one task sends back: the outcome, where it ran, and the products unless written in OUT."""

    status: str
    seconds: float
    message: str
    error: dict[str, Any]
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


def _annotate_record(record_path: Path, worker: dict[str, Any], cluster_section: dict[str, Any]) -> bytes:
    import json

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
        error = {"type": "SharedOutMissing", "kind": ErrorKind.CLUSTER,
                 "message": f"--shared-out: worker {worker['host']} does not see {out}"}
        return TaskResult("failed", 0.0, error["message"], error, worker)
    shared = sees_out and share != "returned"
    if token in _cancelled_tokens:
        return TaskResult("failed", 0.0, "cancelled", {}, worker, cancelled=True)
    warm_up()
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
            return TaskResult(outcome.status, outcome.seconds, "cancelled", {}, worker, cancelled=True)
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


# --- on the client -------------------------------------------------------------------------------

@dataclass
class _Submitted:
    decision: Decision
    files: RunFiles
    submitted: float = field(default_factory=time.perf_counter)


def _worker_died(submitted: _Submitted, exc: BaseException, fingerprint: dict[str, Any],
                 cluster_section: dict[str, Any]) -> Outcome:
    """The failed record of a combination whose task did not come back (its worker died, or the task
    itself could not run there, e.g. colabkit missing on the worker)."""
    combination = submitted.decision.combination
    last = getattr(getattr(exc, "last_worker", None), "address", None)
    if type(exc).__name__ == "KilledWorker":
        tries = getattr(exc, "allowed_failures", 0) + 1
        error = {"type": "KilledWorker", "kind": ErrorKind.WORKER_DIED,
                 "message": f"the Dask worker running it died (killed, or out of host memory), on each of {tries} "
                            f"tries; the last was {last}"}
    else:
        error = {"type": type(exc).__name__, "kind": ErrorKind.CLUSTER, "message": f"the Dask task failed: {exc}"[:2000]}
    record = make_record(combination.name, "failed", combination.params, device={"requested": combination.device},
                         error=error, fingerprint=fingerprint, sweep={"cluster": cluster_section},
                         worker={"address": last} if last else {})
    files = submitted.files
    if files.log.exists():
        with open(files.log, "a", encoding="utf-8") as log:
            log.write(f"[colabkit] {utc_now()} {error['message']}\n")
    write_json_atomic(files.record, record)
    files.discard_temporaries()
    return Outcome(combination, "failed", time.perf_counter() - submitted.submitted, files.record,
                   f"{error['type']}: {error['message'][:200]}", error=error)


def _placeholders(files: RunFiles, notebook_source: bytes, address: str) -> None:
    """What OUT holds while a task is out: the running notebook (so `colabkit status` and the next
    sweep see it as running or interrupted, as for local runs) and a log saying where it runs."""
    files.prepare()
    files.running_notebook.write_bytes(notebook_source)
    files.log.write_text(f"[colabkit] {utc_now()} submitted to the Dask cluster at {address}; "
                         "the run's own log replaces this once it finishes\n", encoding="utf-8")


def _decide(combinations: list[Combination], out: Path, workers: dict[str, dict[str, Any]],
            force: bool, rerun_unreadable: bool) -> list[Decision]:
    """The local sweep's decisions, with the cluster's resources as the devices at hand."""
    available = cluster_devices(workers)
    decisions = decide(combinations, out, available, force, rerun_unreadable)
    for decision in decisions:
        if decision.action == "skip" and missing_device_reason(decision.combination.device, available):
            need = resources_for(decision.combination.device) or {}
            wanted = ", ".join(f"{name}={count}" for name, count in need.items())
            decision.reason = (f"device '{decision.combination.device}' is on no worker of the Dask cluster "
                               f"(none declares {wanted}; workers: {_inventory(workers)})")
    return decisions


def prepare_on_cluster(grid_paths: list[str | Path], preset: str | None = None, device: str | None = None,
                       out: str | Path = "outputs", *, cluster: str, overrides: dict[str, Any] | None = None,
                       force: bool = False, rerun_unreadable: bool = False) -> list[Decision]:
    """What `--dry-run --cluster` shows: validate, read the workers' resources, decide; submit nothing."""
    combinations = plan(grid_paths, preset, device, overrides, out)
    check_output_folder(out)
    session = connect(cluster)
    try:
        return _decide(combinations, Path(out), session.workers(), force, rerun_unreadable)
    finally:
        session.close()


def on_cluster(cluster: str, shared_out: bool | None = None) -> tuple[Callable[..., list[Decision]],
                                                                       Callable[..., list[Outcome]]]:
    """`prepare` and `run_sweep` (colabkit.sweep.runner's, same arguments) that run on `cluster`."""
    return (partial(prepare_on_cluster, cluster=cluster),
            partial(run_cluster_sweep, cluster=cluster, shared_out=shared_out))


def run_cluster_sweep(
    grid_paths: list[str | Path],
    preset: str | None = None,
    device: str | None = None,
    out: str | Path = "outputs",
    kernel_name: str | None = None,
    echo: Callable[[str], None] = print,
    *,
    cluster: str,
    jobs: int = 1,
    overrides: dict[str, Any] | None = None,
    force: bool = False,
    rerun_unreadable: bool = False,
    timeout_s: float | None = None,
    html: bool = True,
    progress: bool = False,
    shared_out: bool | None = None,
    worker_grace_s: float = 60,
    local_resources: dict[str, float] | None = None,
    local_threads: int = 1,
) -> list[Outcome]:
    """`run_sweep` on a Dask cluster: validate, decide from the records in `out` (resume by
    fingerprint), submit the rest, write each result as it comes back; one Outcome per combination.

    `shared_out`: True, every worker must see `out` and writes there; False, products always come
    back as bytes; None, each task writes into `out` when it sees it and returns the bytes otherwise.
    Raises GridError before connecting if anything is invalid, SweepInterrupted on Ctrl-C.
    """
    if jobs != 1:
        raise ColabkitError("--jobs does not apply with --cluster: each Dask worker thread runs one combination")
    if timeout_s is not None and not timeout_s > 0:
        raise ColabkitError(f"--timeout must be more than 0 seconds, got {timeout_s:g}")
    out = Path(out).absolute()
    combinations = plan(grid_paths, preset, device, overrides, out)  # every problem, before any connection
    check_output_folder(out)
    session = connect(cluster, local_resources=local_resources, local_threads=local_threads)
    try:
        workers = session.workers()
        decisions = _decide(combinations, out, workers, force, rerun_unreadable)
        return _run(decisions, session, workers, out, echo, progress, shared_out, rerun_unreadable,
                    RunOptions(timeout_s=timeout_s, kernel_name=kernel_name, html=html, cwd=str(Path.cwd()),
                               jobs=1, worker_grace_s=worker_grace_s))
    finally:
        session.close()


def _run(decisions: list[Decision], session: ClusterSession, workers: dict[str, dict[str, Any]], out: Path,
         echo: Callable[[str], None], progress: bool, shared_out: bool | None, rerun_unreadable: bool,
         options: RunOptions) -> list[Outcome]:
    distributed = _distributed()
    token = secrets.token_hex(8)
    share: ShareMode = "auto" if shared_out is None else ("shared" if shared_out else "returned")
    threads = sum(int(info.get("nthreads", 1)) for info in workers.values())
    outcomes: list[Outcome] = []
    with sweep_lock(out):
        for decision in decisions:
            record_path = RunFiles.of(decision.combination, out).record
            if decision.action == "skip":
                outcomes.append(write_skipped_record(decision.combination, out, decision.fingerprint, decision.reason,
                                                     replace_unreadable=rerun_unreadable))
            elif decision.action == "done":
                outcomes.append(Outcome(decision.combination, "ok", 0.0, record_path, "finished earlier", resumed=True))
            elif decision.action == "set_aside":
                outcomes.append(Outcome(decision.combination, "skipped", 0.0, record_path, decision.reason,
                                        set_aside=True))
        to_run = [decision for decision in decisions if decision.action in ("run", "rerun")]
        kept = sum(outcome.resumed for outcome in outcomes)
        set_aside = sum(outcome.set_aside for outcome in outcomes)
        echo(f"{len(decisions)} combinations: {len(to_run)} to run on the Dask cluster at {session.address} "
             f"({len(workers)} workers, {threads} threads), {kept} finished earlier (kept), "
             f"{len(outcomes) - kept - set_aside} skipped (device absent)"
             + (f", {set_aside} set aside (record file unreadable; --rerun replaces it)" if set_aside else ""))
        hosts = [info.get("host") for info in workers.values() for _ in range(int(info.get("nthreads", 1)))]
        if len(hosts) != len(set(hosts)) and len(to_run) > 1 and any(resources_for(d.combination.device) is None for d in to_run):
            echo("warning: several worker threads share a host: CPU combinations that run side by side there "
                 "distort each other's timings; start one worker thread per host for numbers you publish")
        probe = out / f"{PROBE_PREFIX}{token}"
        probe.write_text(session.address, encoding="utf-8")
        bar = Progress(len(to_run), max(1, min(threads, len(to_run))), echo, progress)
        section = {"scheduler": session.address}
        running: dict[Any, _Submitted] = {}
        try:
            _warm_up_workers(session)
            futures = []
            for decision in to_run:
                combination = decision.combination
                source = combination.notebook.read_bytes()
                files = RunFiles.of(combination, out)
                _placeholders(files, source, session.address)
                future = session.client.submit(
                    run_on_worker, combination, source, decision.fingerprint, options, str(out), token, share,
                    section, key=f"colabkit-{combination.name}-{combination.device}-{combination.slug}-{token}",
                    resources=resources_for(combination.device), pure=False)
                running[future] = _Submitted(decision, files)
                futures.append(future)
            for future in distributed.as_completed(futures):
                submitted = running.pop(future)
                outcomes.append(_collect(future, submitted, section))
                bar.finished(outcomes[-1])
        except KeyboardInterrupt:
            _cancel(session, list(running), token)
            for submitted in running.values():
                submitted.files.discard_temporaries()
            bar.close()
            raise SweepInterrupted(outcomes, f"interrupted after {bar.done} of {len(to_run)} runs") from None
        except BaseException:
            _cancel(session, list(running), token)
            for submitted in running.values():
                submitted.files.discard_temporaries()
            raise
        finally:
            probe.unlink(missing_ok=True)
        bar.close()
    order = {decision.combination.output_base(out): index for index, decision in enumerate(decisions)}
    return sorted(outcomes, key=lambda outcome: order[outcome.combination.output_base(out)])


def _warm_up_workers(session: ClusterSession) -> None:
    """Load papermill and nbconvert on every worker before the first timed run; a worker without
    colabkit (or with a broken install) is reported here, before anything is submitted."""
    try:
        session.client.run(warm_up)
    except Exception as exc:  # noqa: BLE001 - whatever a worker raised (ImportError, pickling errors) means the same
        raise ColabkitError(f"the Dask workers cannot run colabkit ({type(exc).__name__}: {exc}); install colabkit "
                            "and the notebooks' dependencies in every worker's environment") from None


def _collect(future: Any, submitted: _Submitted, section: dict[str, Any]) -> Outcome:
    """The Outcome of a finished task, its products written under OUT if they came back as bytes."""
    decision = submitted.decision
    if future.cancelled():  # not by this sweep (it stops collecting first): the scheduler restarted or lost it
        lost = ColabkitError("the scheduler cancelled the task (restarted, or lost its state)")
        return _worker_died(submitted, lost, decision.fingerprint, section)
    if future.status != "finished":
        return _worker_died(submitted, future.exception(), decision.fingerprint, section)
    result: TaskResult = future.result()
    files = submitted.files
    if result.files is not None:
        commit_products(files, result.files)
    elif not result.shared:  # refused before running (e.g. --shared-out and a worker that lacks OUT)
        record = make_record(decision.combination.name, "failed", decision.combination.params, error=result.error,
                             device={"requested": decision.combination.device}, fingerprint=decision.fingerprint,
                             sweep={"cluster": section}, worker=result.worker)
        write_json_atomic(files.record, record)
        files.discard_temporaries()
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
