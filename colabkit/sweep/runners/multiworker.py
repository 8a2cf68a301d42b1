"""Launch N worker processes of one notebook for multi-worker training, on this machine.

Each worker is papermill in its own process with a generated TF_CONFIG (127.0.0.1 ports, its own
index) and `device="multiworker:N"`. Worker 0 is the chief and writes the run's notebook and record;
the others write to a scratch folder. A dead worker never hangs the run: the others are stopped
`grace_s` seconds later. On N real machines: the same cluster list, each its own index
(docs/multi-device.md).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from colabkit.errors import MultiWorkerError, WorkersFailed
from colabkit.records.run_error import RunError
from colabkit.records.schema import ErrorKind
from colabkit.sweep.runners.notebook import notebook_error


@dataclass
class WorkerOutcome:
    """How one worker process ended."""

    index: int
    returncode: int | None
    seconds: float
    notebook: Path
    log: Path
    stopped: bool = False  # True: the launcher stopped it (a peer died, or the time limit)

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        role = "chief (worker 0)" if self.index == 0 else f"worker {self.index}"
        if self.ok:
            return f"{role} finished in {self.seconds:.1f} s"
        if self.stopped:
            return f"{role} was stopped after {self.seconds:.1f} s (waiting for a dead peer, or out of time)"
        if self.returncode is not None and self.returncode < 0:
            name = signal.Signals(-self.returncode).name if -self.returncode in signal.Signals._value2member_map_ else "?"
            return f"{role} was killed by signal {-self.returncode} ({name}) after {self.seconds:.1f} s"
        return f"{role} failed with exit status {self.returncode} after {self.seconds:.1f} s (see {self.log})"


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` TCP ports free on `host` right now (held open together, so they differ)."""
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for sock in sockets:
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]


def tf_configs(count: int, ports: list[int], host: str = "127.0.0.1") -> list[str]:
    """The TF_CONFIG of each of `count` workers: the same cluster, each its own index."""
    cluster = {"worker": [f"{host}:{port}" for port in ports[:count]]}
    return [json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}) for index in range(count)]


def run_workers(notebook: str | Path, count: int, parameters: dict[str, Any], chief_notebook: str | Path,
                scratch: str | Path, *, cwd: str | Path | None = None, timeout_s: float | None = None,
                grace_s: float = 60.0, env: dict[str, str] | None = None, poll_s: float = 0.2) -> list[WorkerOutcome]:
    """Run `notebook` on `count` local workers; return each worker's outcome, chief first.

    The chief's executed notebook goes to `chief_notebook` (its record to parameters' results_path);
    the others' notebooks and every worker's log go to `scratch`. Raises WorkersFailed (with the
    outcomes) unless every worker finished.
    """
    if count < 1:
        raise MultiWorkerError(f"a multi-worker run needs at least 1 worker, got {count}: give --count 1 or more")
    scratch = Path(scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    configs = tf_configs(count, free_ports(count))
    processes, outcomes, logs = [], [], []
    start = time.monotonic()
    try:
        for index, config in enumerate(configs):
            worker_parameters = {**parameters, "device": f"multiworker:{count}"}
            output = Path(chief_notebook) if index == 0 else scratch / f"worker-{index}.ipynb"
            if index:
                worker_parameters["results_path"] = str(scratch / f"worker-{index}.json")  # never written
            log_path = scratch / f"worker-{index}.log"
            log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed in finally
            logs.append(log)
            command = [sys.executable, "-m", "papermill", str(notebook), str(output),
                       "-y", json.dumps(worker_parameters), "--no-progress-bar"]
            if cwd:
                command += ["--cwd", str(cwd)]
            processes.append(subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,  # kill kernel too
                env={**os.environ, **(env or {}), "TF_CONFIG": config}))
            outcomes.append(WorkerOutcome(index, None, 0.0, output, log_path))
        _wait(processes, outcomes, start, timeout_s, grace_s, poll_s)
    finally:
        for process in processes:
            if process.poll() is None:
                _stop(process)
        for log in logs:
            log.close()
    if not all(outcome.ok for outcome in outcomes):
        failed = [outcome for outcome in outcomes if not outcome.ok and not outcome.stopped] or outcomes
        first = min(failed, key=lambda outcome: outcome.seconds)
        raise WorkersFailed(f"{count}-worker run failed: {first.describe()}; "
                            + "; ".join(outcome.describe() for outcome in outcomes if outcome is not first), outcomes)
    return outcomes


@dataclass
class MultiWorkerRun:
    """How a multi-worker run of a notebook ended."""

    outcomes: list[WorkerOutcome]  # one per worker, chief first
    error: RunError | None  # how the run failed (its failed record's `error`); None: every worker finished

    @property
    def ok(self) -> bool:
        return self.error is None


def run_multiworker_notebook(notebook: str | Path, count: int, parameters: dict[str, Any],
                             chief_notebook: str | Path, scratch: str | Path, *, cwd: str | Path | None = None,
                             timeout_s: float | None = None, grace_s: float = 60.0,
                             env: dict[str, str] | None = None, log: IO[str] | None = None) -> MultiWorkerRun:
    """Run `notebook` on `count` local workers (see `run_workers`) and say how it ended, without raising
    for a failed worker: the sweep and `python -m colabkit workers` both launch through here.

    A failure's error (type WorkersFailed, kind multi_worker) names every worker's end and carries the
    chief's own exception when its notebook shows one (e.g. a collective that aborted), placed at its cell.
    With `log`, each worker's log is appended to it, chief first.
    """
    error = None
    try:
        outcomes = run_workers(notebook, count, parameters, chief_notebook, scratch, cwd=cwd, timeout_s=timeout_s,
                               grace_s=grace_s, env=env)
    except WorkersFailed as exc:
        outcomes = exc.outcomes
        chief = notebook_error(Path(chief_notebook), Path(notebook))
        # The chief's own exception says best what went wrong (e.g. a collective aborted): its cell is the run's.
        error = RunError("WorkersFailed", ErrorKind.MULTI_WORKER, str(exc)[:4000],
                         cell=chief.cell if chief else None, exec_count=chief.exec_count if chief else None,
                         source=chief.source if chief else None, chief_error=chief)
    if log is not None:
        for outcome in outcomes:
            log.write(f"\n[colabkit] ---- {outcome.describe()}: log {outcome.log} ----\n")
            log.write(outcome.log.read_text(encoding="utf-8", errors="replace") if outcome.log.exists() else "")
    return MultiWorkerRun(outcomes, error)


def _stop(process: subprocess.Popen) -> None:
    """Stop a worker and its kernel (its whole session)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    process.wait()


def _wait(processes: list[subprocess.Popen], outcomes: list[WorkerOutcome], start: float,
          timeout_s: float | None, grace_s: float, poll_s: float) -> None:
    first_failure: float | None = None
    while True:
        now = time.monotonic()
        for process, outcome in zip(processes, outcomes):
            if outcome.returncode is None and process.poll() is not None:
                outcome.returncode, outcome.seconds = process.returncode, now - start
                if process.returncode != 0 and first_failure is None:
                    first_failure = now
        running = [(p, o) for p, o in zip(processes, outcomes) if o.returncode is None]
        if not running:
            return
        out_of_time = timeout_s is not None and now - start > timeout_s
        if out_of_time or (first_failure is not None and now - first_failure > grace_s):
            for process, outcome in running:
                _stop(process)
                outcome.returncode, outcome.seconds, outcome.stopped = process.returncode, now - start, True
            return
        time.sleep(poll_s)
