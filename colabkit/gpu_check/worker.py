"""A child process that measures for the GPU check, and the parent's handle on it.

The check's process never imports TensorFlow, JAX or PyTorch (a Keras backend is fixed per process):
each backend runs in `python -m colabkit.gpu_check.worker`, which reads one JSON request per line
and answers with one line, `RESULT_PREFIX` then {"ok": result} or {"error": ...}; all else goes to
its log. A worker lives across requests, so bare fits and notebook runs can alternate.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import IO, Any

from colabkit.errors import GpuCheckError

RESULT_PREFIX = "GPU-CHECK-RESULT "
_ENDED = object()
# The worker shares the GPU with the notebooks' kernels that run between its requests: TensorFlow
# takes memory as it needs it rather than all of it, JAX does not take 75 % up front.
WORKER_ENV = {"TF_FORCE_GPU_ALLOW_GROWTH": "true", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


class Worker:
    """A running worker process for one Keras backend; a context manager that stops it."""

    def __init__(self, backend: str, log_path: Path, env: dict[str, str] | None = None) -> None:
        self.backend = backend
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log: IO[str] = open(self.log_path, "a", encoding="utf-8")
        environment = {"TF_CPP_MIN_LOG_LEVEL": "2", **os.environ, **WORKER_ENV, "KERAS_BACKEND": backend,
                       "PYTHONUNBUFFERED": "1", **(env or {})}
        self._process = subprocess.Popen([sys.executable, "-m", "colabkit.gpu_check.worker"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self._log, text=True, env=environment)
        self._replies: queue.Queue[Any] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name=f"gpu-check-{backend}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            if line.startswith(RESULT_PREFIX):
                self._replies.put(json.loads(line[len(RESULT_PREFIX):]))
            elif not self._log.closed:  # after a kill, the last lines may arrive once the log is closed
                self._log.write(line)
                self._log.flush()
        self._replies.put(_ENDED)

    def request(self, task: str, timeout_s: float, **params: Any) -> Any:
        """Run `task` in the worker; its result. GpuCheckError when it raised, died or ran past `timeout_s`
        (the worker is then stopped: a request that hangs leaves the GPU in an unknown state)."""
        if self._process.poll() is not None:
            raise GpuCheckError(f"the {self.backend} worker has stopped (exit {self._process.returncode}); "
                                f"see {self.log_path}")
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(json.dumps({"task": task, **params}) + "\n")
            self._process.stdin.flush()
        except OSError as error:
            raise GpuCheckError(f"the {self.backend} worker cannot be reached ({error}); "
                                f"see {self.log_path}") from error
        try:
            reply = self._replies.get(timeout=timeout_s)
        except queue.Empty:
            self.close(kill=True)
            raise GpuCheckError(f"{task} took longer than {timeout_s:.0f} s on the {self.backend} worker, which was "
                                f"stopped; see {self.log_path}") from None
        if reply is _ENDED:
            self._process.wait()
            raise GpuCheckError(f"the {self.backend} worker died during {task} (exit {self._process.returncode}); "
                                f"see {self.log_path}")
        if "error" in reply:
            self._log.write(f"{task} failed:\n{reply.get('traceback', '')}\n")
            self._log.flush()
            raise GpuCheckError(f"{task} on {self.backend}: {reply['error']} (traceback in {self.log_path})")
        return reply["ok"]

    def close(self, kill: bool = False) -> None:
        """Stop the worker: end its input and wait (30 s at most), or kill it at once."""
        if self._process.poll() is None:
            if kill:
                self._process.kill()
            else:
                try:
                    assert self._process.stdin is not None
                    self._process.stdin.close()
                    self._process.wait(timeout=30)
                except (OSError, subprocess.TimeoutExpired):
                    self._process.kill()
            self._process.wait()
        self._reader.join(timeout=5)
        self._log.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(requests: IO[str], replies: IO[str]) -> None:
    """The worker's loop: one request per input line, one RESULT line per request."""
    from colabkit.gpu_check.tasks import run_task

    for line in requests:
        if not line.strip():
            continue
        try:
            reply: dict[str, Any] = {"ok": run_task(json.loads(line))}
        except Exception as error:  # noqa: BLE001 - any failure of a measurement goes back to the parent
            reply = {"error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()[-6000:]}
        replies.write(RESULT_PREFIX + json.dumps(reply, default=float) + "\n")
        replies.flush()


if __name__ == "__main__":
    # Library chatter printed to stdout (not ours) goes to stderr, the log: stdout carries replies only.
    protocol = sys.stdout
    sys.stdout = sys.stderr
    serve(sys.stdin, protocol)
