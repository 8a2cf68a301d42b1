"""Warm kernels: `sweep --kernels reuse` runs combinations one after another in a kernel that stays up.

Each process that executes combinations keeps its kernels in one `KernelPool` (`warm_kernels()`);
colabkit.sweep.runners.execute runs a combination through papermill into a pooled kernel (`km=`). A kernel
serves only combinations that agree on its `KernelKey` (backend, device and replicas, mixed precision,
Jupyter kernel, folder, environment; never two repeats of one combination), is cleared between runs
(CLEANUP), and is replaced after any failure, a failed clean-up or `max_runs` runs. Each record's
`kernel` field says how it ran. The guarantees and the measurement that warm and fresh kernels agree:
docs/sweep.md, "Warm kernels".
"""

from __future__ import annotations

import codecs
import functools
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from colabkit.device.backends import resolve_backend
from colabkit.device.spec import MULTI_WORKER
from colabkit.records.record import utc_now
from colabkit.sweep.expand import Combination
from colabkit.sweep.options import DEFAULT_MAX_RUNS, RunOptions

if TYPE_CHECKING:
    from colabkit.sweep.runners.notebook import KernelWatch

__all__ = ["KernelKey", "KernelLease", "KernelPool", "WarmKernel", "close_warm_kernels", "kernel_key", "warm_kernels"]

CLEAN_TIMEOUT_S = 60

# Run once in a new kernel (silently): what the clean-up restores between runs.
BASELINE = """
import os as _os, sys as _sys, types as _types, warnings as _warnings
_sys.modules["colabkit_pool_baseline"] = _types.SimpleNamespace(
    environ=dict(_os.environ), cwd=_os.getcwd(), path=list(_sys.path), filters=list(_warnings.filters))
del _os, _sys, _types, _warnings
"""

# Run after each run that went well (silently). Only what is loaded is touched: nothing is imported.
CLEANUP = """
def _colabkit_clean():
    import gc, os, random, sys, warnings
    baseline = sys.modules["colabkit_pool_baseline"]
    loaded = sys.modules.get
    if loaded("matplotlib.pyplot") is not None:
        loaded("matplotlib.pyplot").close("all")
    keras = loaded("keras")
    if keras is not None and hasattr(keras, "backend"):
        keras.backend.clear_session(free_memory=False)  # names, dtype policy, seed generator, graph, caches
    if loaded("jax") is not None:
        loaded("jax").clear_caches()
    random.seed()
    if loaded("numpy") is not None:
        loaded("numpy").random.seed()
    tf = loaded("tensorflow")
    if tf is not None and hasattr(tf, "random"):
        tf.random.set_seed(None)
    os.environ.clear()
    os.environ.update(baseline.environ)
    os.chdir(baseline.cwd)
    sys.path[:] = baseline.path
    warnings.filters[:] = baseline.filters
    get_ipython().reset(new_session=True)  # the notebook's names, In/Out, and In [1] next
    gc.collect()  # the run's models and tensors (reference cycles) freed now, not during the next run
    gc.freeze()  # what survives (modules) is left out of later collections: 0.2-0.3 s each with TensorFlow loaded
_colabkit_clean()
"""


@dataclass(frozen=True)
class KernelKey:
    """What a kernel's runs must agree on: what a process cannot change once set, and how it started."""

    kernel_name: str
    cwd: str
    env: tuple[tuple[str, str], ...]  # added to the kernel's environment (CUDA_VISIBLE_DEVICES, a sweep token)
    backend: str | None  # the Keras backend, resolved ("auto": JAX on a TPU, TensorFlow elsewhere)
    device: str  # the device and its replica count ('cpu:2'): the set-up and its strategy
    precision: str  # the global mixed-precision policy ("none": Keras's default)
    # A combination's repeat index, where it has one: repeats are independent runs, so the repeats of
    # one combination never share a kernel (docs/sweep.md, "Warm kernels").
    repeat: int | None = None

    def as_record(self) -> dict[str, Any]:
        return {"backend": self.backend, "device": self.device, "mixed_precision": self.precision,
                **({"repeat": self.repeat} if self.repeat is not None else {})}


def _kernel_name(notebook: Path) -> str:
    try:
        spec = json.loads(notebook.read_text(encoding="utf-8")).get("metadata", {}).get("kernelspec", {})
    except (OSError, ValueError):
        spec = {}
    return str(spec.get("name") or "python3")


def kernel_key(combination: Combination, kernel_name: str | None, cwd: str | None,
               env: Mapping[str, str] | None) -> KernelKey | None:
    """The key of the kernel that may run `combination`; None when it always runs in a fresh kernel
    (a multi-worker run: its processes are launched for it)."""
    if combination.request.kind == MULTI_WORKER:
        return None
    params = combination.params
    backend = params.get("backend")
    if isinstance(backend, str):
        backend = resolve_backend(backend, combination.device)
    # A notebook without the parameter never sets a policy: its kernel's is Keras's default, "none"'s.
    precision = str(params.get("mixed_precision", "none"))
    return KernelKey(kernel_name or _kernel_name(combination.notebook), str(cwd or Path.cwd()),
                     tuple(sorted((env or {}).items())), backend, str(combination.request), precision,
                     combination.repeat)


@functools.lru_cache(maxsize=1)
def _pooled_manager_class() -> Callable[..., Any]:
    from jupyter_client.asynchronous import AsyncKernelClient
    from jupyter_client.manager import AsyncKernelManager

    class QuickReadyClient(AsyncKernelClient):
        """A client of a warm kernel, ready once the kernel answered a kernel_info request on the shell
        channel and its idle status came on iopub (so iopub is connected and drained of it): a few ms,
        where jupyter_client's own check then waits 0.2 s for iopub to fall silent, every run. Falls
        back to that check when the status does not come."""

        async def wait_for_ready(self, timeout: float | None = None) -> None:
            from queue import Empty

            deadline = time.monotonic() + (timeout or 60)
            request = self.kernel_info()
            try:
                while True:  # the reply to this request (an earlier client's may still be queued)
                    reply = await self.shell_channel.get_msg(timeout=max(0.01, deadline - time.monotonic()))
                    if reply["parent_header"].get("msg_id") == request:
                        break
                while True:
                    message = await self.iopub_channel.get_msg(timeout=1.0)
                    if (message["parent_header"].get("msg_id") == request
                            and message["content"].get("execution_state") == "idle"):
                        return
            except Empty:
                await super().wait_for_ready(timeout=max(1.0, deadline - time.monotonic()))

    class PooledKernelManager(AsyncKernelManager):
        """Remembers the clients it hands out (nbclient makes one per run and, not owning the
        kernel, leaves it open) so that each run's client can be closed after it."""

        def client(self, **kwargs: Any) -> Any:
            made = super().client(**kwargs)
            self.colabkit_clients.append(made)
            return made

    return functools.partial(PooledKernelManager, client_factory=QuickReadyClient)


class WarmKernel:
    """One started kernel of the pool: its manager (for papermill's `km=`), its output forwarded to
    the log of the run it serves, and how many runs it has made."""

    def __init__(self, key: KernelKey, start_timeout_s: float = 60) -> None:
        from jupyter_client import BlockingKernelClient
        from jupyter_core.utils import run_sync

        self.key, self.runs, self.started_at = key, 0, utc_now()
        self.sink: IO[str] | None = None
        self._lock = threading.Lock()
        self.manager = _pooled_manager_class()(kernel_name=key.kernel_name)
        self.manager.colabkit_clients = []
        reading, writing = os.pipe()
        try:
            run_sync(self.manager.start_kernel)(
                extra_arguments=["--HistoryManager.hist_file=:memory:", "--IPKernelApp.capture_fd_output=False"],
                cwd=key.cwd, env={**os.environ, **dict(key.env)}, stdout=writing, stderr=writing)
        except BaseException:
            os.close(reading)
            raise
        finally:
            os.close(writing)
        threading.Thread(target=self._forward, args=(reading,), name="colabkit-kernel-output", daemon=True).start()
        self.control = BlockingKernelClient()
        self.control.load_connection_info(self.manager.get_connection_info())
        self.control.start_channels(iopub=False, stdin=False, hb=False, control=False)
        try:
            self.control.wait_for_ready(timeout=start_timeout_s)
            self._run_quietly(BASELINE, start_timeout_s)
        except BaseException:
            self.shutdown()
            raise

    @property
    def process(self) -> Any:
        return getattr(self.manager.provisioner, "process", None)

    def alive(self) -> bool:
        process = self.process
        return process is not None and process.poll() is None

    def _forward(self, reading: int) -> None:
        """The kernel's own output (C-level logs) to the log of the run it serves; dropped between runs."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        with os.fdopen(reading, "rb", buffering=0) as stream:
            while chunk := stream.read(65536):
                text = decoder.decode(chunk)
                with self._lock:
                    if self.sink is not None and text:
                        try:
                            self.sink.write(text)
                        except (OSError, ValueError):  # the log is full or closed: the run's record still says
                            self.sink = None

    def lend(self, log: IO[str], watch: KernelWatch | None = None) -> None:
        """Serve the next run: its output goes to `log`, `watch` learns the kernel's process."""
        with self._lock:
            self.sink = log
        if watch is not None:
            watch.process = self.process

    def _close_clients(self) -> None:
        for made in self.manager.colabkit_clients:
            try:
                made.stop_channels()
            except Exception:  # noqa: BLE001 - a client of a dead kernel may fail to close; it is dropped anyway
                pass
        self.manager.colabkit_clients.clear()

    def finish_run(self) -> None:
        """The run it served ended: its output goes nowhere now, its client is closed."""
        with self._lock:
            self.sink = None
        self._close_clients()
        self.runs += 1

    def _run_quietly(self, code: str, timeout_s: float) -> None:
        message_id = self.control.execute(code, silent=True, store_history=False)
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self.control.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
            if reply.get("parent_header", {}).get("msg_id") == message_id:
                break
        content = reply.get("content", {})
        if content.get("status") != "ok":
            raise RuntimeError(f"{content.get('ename')}: {content.get('evalue')}")

    def clean(self) -> None:
        """Clear what a run left (CLEANUP); raises when the kernel cannot be cleared."""
        self._run_quietly(CLEANUP, CLEAN_TIMEOUT_S)

    def shutdown(self) -> None:
        """Stop the kernel now (killed: a timed-out or wedged kernel does not answer a request)."""
        from jupyter_core.utils import run_sync

        with self._lock:
            self.sink = None
        self._close_clients()
        try:
            self.control.stop_channels()
        except Exception:  # noqa: BLE001 - never started, or already gone
            pass
        try:
            if self.manager.has_kernel:
                run_sync(self.manager.shutdown_kernel)(now=True)
        except Exception:  # noqa: BLE001 - a dead kernel's manager may fail to clean up after it
            process = self.process
            if process is not None and process.poll() is None:
                process.kill()


class KernelPool:
    """The warm kernels of one process, lent one run at a time. At most `capacity` kernels are kept
    (one per slot of the process: 1 in the sweep and each --jobs worker, a Dask worker's threads):
    a kernel of another key is shut down before a new one starts, so that two never hold one GPU."""

    def __init__(self, capacity: int = 1) -> None:
        self.capacity = capacity
        self.idle: list[WarmKernel] = []
        self.lent = 0
        self._lock = threading.Lock()

    def take(self, key: KernelKey, start_timeout_s: float = 60) -> WarmKernel:
        """An idle kernel of `key` that is still alive, else a new one (which may raise: the kernel
        did not start)."""
        with self._lock:
            stale = [kernel for kernel in self.idle if not kernel.alive()]
            alive = [kernel for kernel in self.idle if kernel.alive()]
            found = next((kernel for kernel in alive if kernel.key == key), None)
            if found is not None:
                alive.remove(found)
            while found is None and alive and len(alive) + self.lent + 1 > self.capacity:
                stale.append(alive.pop(0))  # make room, oldest first: no two kernels hold one device
            self.idle = alive
            self.lent += 1
        for kernel in stale:
            kernel.shutdown()
        if found is not None:
            return found
        try:
            return WarmKernel(key, start_timeout_s)
        except BaseException:
            with self._lock:
                self.lent -= 1
            raise

    def give_back(self, kernel: WarmKernel, reusable: bool, max_runs: int = DEFAULT_MAX_RUNS,
                  log: Callable[[str], None] | None = None) -> None:
        """Take back a kernel after its run: cleared and kept if the run went well and it has runs
        left, else shut down (the next run of its key then gets a fresh kernel)."""
        kernel.finish_run()
        keep = reusable and kernel.runs < max_runs and kernel.alive()
        if keep:
            try:
                kernel.clean()
            except Exception as exc:  # noqa: BLE001 - a kernel that cannot be cleared serves no other run
                keep = False
                if log is not None:
                    log(f"[colabkit] the warm kernel could not be cleared ({type(exc).__name__}: {exc}); "
                        "the next run gets a fresh one\n")
        with self._lock:
            self.lent -= 1
            if keep:
                self.idle.append(kernel)
        if not keep:
            kernel.shutdown()

    def close(self, where: Callable[[KernelKey], bool] | None = None) -> int:
        """Shut down the idle kernels (those whose key `where` accepts); how many."""
        with self._lock:
            closing = [kernel for kernel in self.idle if where is None or where(kernel.key)]
            self.idle = [kernel for kernel in self.idle if kernel not in closing]
        for kernel in closing:
            kernel.shutdown()
        return len(closing)


class KernelLease:
    """How one combination gets its kernel: `fresh`, papermill starts one for it (`manager` None);
    `reuse`, one of this process's warm kernels of its key (`acquire`, then `release` once it ended)."""

    def __init__(self, key: KernelKey | None, max_runs: int = DEFAULT_MAX_RUNS, start_timeout_s: float = 60) -> None:
        self.key, self.max_runs, self.start_timeout_s = key, max_runs, start_timeout_s
        self.kernel: WarmKernel | None = None
        self.record: dict[str, Any] = {"mode": "fresh" if key is None else "reuse", "runs_before": 0}

    @classmethod
    def of(cls, combination: Combination, options: RunOptions, env: Mapping[str, str] | None) -> KernelLease:
        """The lease of `combination` in the kernels its settings say (a multi-worker run is always fresh)."""
        reuse = combination.settings.kernels == "reuse"
        key = kernel_key(combination, options.kernel_name, options.cwd, env) if reuse else None
        return cls(key, options.max_kernel_runs, options.start_timeout_s)

    @property
    def manager(self) -> Any:
        """The started kernel's manager for papermill's `km=` (None: papermill starts a fresh kernel)."""
        return None if self.kernel is None else self.kernel.manager

    def acquire(self, log: IO[str], watch: KernelWatch | None = None) -> None:
        """Take a warm kernel (reuse), its output to `log`; raises if a new one does not start."""
        if self.key is None:
            return
        self.release(False)  # an earlier attempt's kernel, if any: it failed
        self.kernel = warm_kernels().take(self.key, self.start_timeout_s)
        self.kernel.lend(log, watch)
        self.record = {"mode": "reuse", "runs_before": self.kernel.runs, "started_at": self.kernel.started_at,
                       "max_runs": self.max_runs, "key": self.key.as_record()}

    def release(self, ok: bool, log: IO[str] | None = None) -> None:
        """The run ended (`ok`: its record is ok): its kernel is cleared for the next run, or shut down
        after a failure. Idempotent."""
        kernel, self.kernel = self.kernel, None
        if kernel is not None:
            warm_kernels().give_back(kernel, ok, self.max_runs, log.write if log is not None else None)


_POOL: KernelPool | None = None
_POOL_LOCK = threading.Lock()


def warm_kernels(capacity: int | None = None) -> KernelPool:
    """This process's pool (made on first use; `capacity` raises its size, e.g. a Dask worker's threads)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = KernelPool(capacity or 1)
        elif capacity and capacity > _POOL.capacity:
            _POOL.capacity = capacity
        return _POOL


def close_warm_kernels(env: Mapping[str, str] | None = None) -> int:
    """Shut down this process's idle warm kernels (only those started with `env` in their environment,
    e.g. one sweep's token on a Dask worker); how many. Called when a sweep ends."""
    if _POOL is None:
        return 0
    wanted = set((env or {}).items())
    return _POOL.close(lambda key: wanted <= set(key.env))
