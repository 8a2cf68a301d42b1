"""This machine's runners: each runs a combination with colabkit.sweep.runners.execute (a fresh kernel, or
with `--kernels reuse` one of the process's warm kernels, colabkit.sweep.runners.kernels; every failure a
failed record):

* SerialExecutor: one after another, in this process (the default, and what published numbers use);
* PoolExecutor: `--jobs N` side by side, each in a worker process of its own, GPUs and the TPU
  handed out as slots (colabkit.sweep.devices.DeviceSlots).

A run whose process dies (a pool worker killed, out of host memory) gets its failed record from
execute.record_lost_run, the one writer of that record for every runner.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import os
import signal
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from colabkit.device.achievable import first_scan_note
from colabkit.device.backends import resolve_backend
from colabkit.device.spec import DEVICE_KINDS
from colabkit.experiments import find
from colabkit.records.run_error import RunError
from colabkit.records.schema import ErrorKind
from colabkit.sweep.decide import Decision
from colabkit.sweep.devices import DeviceSlots, Inventory, Lease, local_inventory
from colabkit.sweep.options import RunOptions
from colabkit.sweep.runners.base import Executor, Started
from colabkit.sweep.runners.execute import Outcome, RunFiles, execute_combination, record_lost_run
from colabkit.sweep.runners.kernels import close_warm_kernels
from colabkit.sweep.runners.notebook import warm_up

PARALLEL_WARNING = (
    "warning: --jobs {jobs} runs combinations side by side. Runs that share a device distort each other's "
    "timings (every CPU run shares the host's cores; GPU runs get a GPU each while there are enough). "
    "Use --jobs 1 for numbers you publish; each record's `sweep.jobs` says how it ran."
)
class LocalExecutor(Executor):
    """An executor on this machine: its devices are detected (or given as `available`)."""

    def __init__(self, out: Path, options: RunOptions, available: Mapping[str, int] | None = None) -> None:
        super().__init__(out, options)
        self.available = available

    def find_devices(self) -> Inventory:
        return local_inventory(self.available)

    def notes(self, to_run: Sequence[Decision]) -> list[str]:
        """Why a first run may take longer: the achievable-peak scan it makes once per host and device kind."""
        scans = {}
        for decision in to_run:
            combination = decision.combination
            experiment = find(combination.name)
            if (experiment is None or "breakdown" not in experiment.parameter_names  # a training notebook's
                    or combination.params.get("mode", experiment.defaults.get("mode")) not in (None, "train")
                    or combination.request.kind not in DEVICE_KINDS):
                continue
            backend = resolve_backend(str(combination.params.get("backend", "auto")), combination.device)
            key = (combination.request.kind.value, backend)
            if key not in scans and backend in ("tensorflow", "jax"):
                scans[key] = first_scan_note(*key)
        return [f"note: {note}" for note in scans.values() if note]


class SerialExecutor(LocalExecutor):
    """One combination after another, in this process (its warm kernels, with --kernels reuse, shut
    down when the runs end)."""

    def run(self, decisions: Sequence[Decision], started: Started | None = None) -> Iterator[Outcome]:
        try:
            for decision in decisions:
                if started:
                    started(decision.combination)
                yield execute_combination(decision.combination, self.out, decision.fingerprint, self.options)
        finally:
            close_warm_kernels()


def _worker_init(parent_pid: int) -> None:
    """In each pool worker: Ctrl-C is the sweep's to handle, and the worker dies with the sweep
    (its kernel follows: ipykernel exits when its parent does)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: Linux only
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:
        os._exit(1)  # the sweep died before prctl took effect
    # Its warm kernels (--kernels reuse) shut down as it exits (they would also exit with it, later).
    multiprocessing.util.Finalize(None, close_warm_kernels, exitpriority=10)
    warm_up()  # so that the first run's time is the run's own


class PoolExecutor(LocalExecutor):
    """`--jobs N`: N combinations side by side, each in a worker process (spawned) and kernel of its
    own; a GPU or TPU combination waits for its device's slot, later ones may start meanwhile."""

    @property
    def slots(self) -> int:
        return self.options.jobs

    def notes(self, to_run: Sequence[Decision]) -> list[str]:
        return [*([PARALLEL_WARNING.format(jobs=self.options.jobs)] if len(to_run) > 1 else []), *super().notes(to_run)]

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=self.options.jobs, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_worker_init, initargs=(os.getpid(),))

    def run(self, decisions: Sequence[Decision], started: Started | None = None) -> Iterator[Outcome]:
        slots = DeviceSlots(self.inventory().counts)
        pending = list(decisions)
        running: dict[Future, tuple[Decision, Lease, float]] = {}
        pool = self._new_pool()
        try:
            while pending or running:
                for decision in list(pending):
                    if len(running) >= self.options.jobs:
                        break
                    lease = slots.take(decision.combination.request)
                    if lease is None:
                        continue  # its accelerator is busy: a later combination may still start
                    pending.remove(decision)
                    future = pool.submit(execute_combination, decision.combination, self.out, decision.fingerprint,
                                         self.options, lease.env)
                    running[future] = (decision, lease, time.perf_counter())
                    if started:
                        started(decision.combination)
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                broken = False
                for future in finished:
                    decision, lease, start = running.pop(future)
                    slots.give_back(lease)
                    try:
                        outcome = future.result()
                    except BrokenProcessPool:
                        broken = True
                        outcome = self._lost(decision, time.perf_counter() - start)
                    yield outcome
                if broken:  # every job of a broken pool fails; start a fresh pool for the rest
                    pool.shutdown(wait=False, cancel_futures=True)
                    pool = self._new_pool()
        except BaseException as stopped:  # Ctrl-C, or the sweep closed this iterator early
            pool.shutdown(wait=False, cancel_futures=True)
            for child in multiprocessing.active_children():
                child.terminate()
            interrupted = isinstance(stopped, (KeyboardInterrupt, GeneratorExit))  # keep the marks `status` shows
            for decision, _, _ in running.values():
                RunFiles.of(decision.combination, self.out).discard_temporaries(keep_notebook=interrupted)
            raise
        pool.shutdown(wait=True)

    def _lost(self, decision: Decision, seconds: float) -> Outcome:
        error = RunError("BrokenProcessPool", ErrorKind.WORKER_DIED,
                         "the worker process running it died (killed, or out of host memory)")
        return record_lost_run(decision.combination, RunFiles.of(decision.combination, self.out), decision.fingerprint,
                               error, seconds=seconds, sweep_section={"jobs": self.options.jobs})
