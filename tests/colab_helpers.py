"""What the tests of `sweep --colab` share: a fake `colab` first on PATH (tests/fake_colab.py, written from
google-colab-cli v0.6.0's source), a sweep run through it (in a process of its own, or in the test's with its
sessions' ages on the fake's clock), and what the fake's backend and client hold."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import fake_colab
import pytest

from colabkit.cli import main
from colabkit.sweep.runners.colab import executor
from colabkit.sweep.runners.colab.sessions import LiveSession

ROOT = Path(__file__).resolve().parents[1]
GRID = str(ROOT / "parameters" / "matmul_tflops.yaml")
ONE_RUN = ["--preset", "smoke", "--repeats", "1", "-p", "n=256"]  # one run per accelerator


def fake_environment(tmp_path: Path) -> dict[str, str]:
    """The environment of a sweep with the fake `colab` first on PATH (and a fast poll)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    colab = bin_dir / "colab"
    colab.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{ROOT / "tests" / "fake_colab.py"}" "$@"\n')
    colab.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_COLAB_HOME": str(tmp_path / "home"),
            "COLABKIT_COLAB_POLL_S": "0.5", "COLABKIT_COLAB_SESSION_START_S": "2"}  # the fake starts a session in ~1 s


def fake_colab_for(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A `fake` fixture's body: the fake's environment; afterwards every process its VMs started ends (a
    test that failed midway leaves no kernel or sweep running)."""
    environment = fake_environment(tmp_path)
    yield environment
    fake_colab.end_every_vm(tmp_path / "home")


def sweep(env: dict[str, str], out: Path, *args: str, grid_args: tuple[str, ...] = tuple(ONE_RUN),
          timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "colabkit", "sweep", GRID, *grid_args, "--out", str(out), *args],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@dataclass
class SessionOnTheFakesClock(LiveSession):
    """A session whose age is read on the fake's clock (fake_colab.clock), not in real seconds: the age at
    which colabkit cuts and drains its sessions then follows what the test and the fake move it by (a
    gap in `colab new`, each finished run), however fast this machine runs."""

    started: float = field(default_factory=lambda: fake_colab.clock())

    def elapsed(self) -> float:
        return fake_colab.clock() - self.started


def sweep_here(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: dict[str, str], out: Path,
               *args: str, grid_args: tuple[str, ...] = tuple(ONE_RUN)) -> tuple[int, str]:
    """`python -m colabkit sweep ...` run in this process with `env` (the fake's) and its sessions on the fake's
    clock (SessionOnTheFakesClock): its exit status and what it printed (stdout, then stderr)."""
    for key, value in env.items():
        if os.environ.get(key) != value:
            monkeypatch.setenv(key, value)
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(executor, "LiveSession", SessionOnTheFakesClock)
    capsys.readouterr()
    status = main(["sweep", GRID, *grid_args, "--out", str(out), *args])
    printed = capsys.readouterr()
    return status, printed.out + printed.err


def advance_clock(env: dict[str, str], seconds: float) -> None:
    """Move the fake's clock (fake_colab's docstring) on by `seconds`."""
    fake_colab.advance_clock(Path(env["FAKE_COLAB_HOME"]), seconds)


def release_new(env: dict[str, str]) -> None:
    """Let a `colab new` held by FAKE_COLAB_HOLD_NEW name its session and return."""
    path = Path(env["FAKE_COLAB_HOME"]) / "release-new"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def sweep_command(out: Path, *args: str, grid_args: tuple[str, ...] = tuple(ONE_RUN)) -> list[str]:
    return [sys.executable, "-m", "colabkit", "sweep", GRID, *grid_args, "--out", str(out), *args]


def start_at_a_terminal(command: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """`command` started as a terminal starts it, for Ctrl-C tests: a process group of its own (os.killpg is the
    terminal's Ctrl-C) and SIGINT's default disposition. A shell starts background jobs (CI run under nohup ... &)
    with SIGINT ignored, and Python keeps an ignored SIGINT ignored: the sweep would never see the Ctrl-C."""
    return subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def calls(env: dict[str, str]) -> list[str]:
    log = Path(env["FAKE_COLAB_HOME"]) / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def verbs(env: dict[str, str], verb: str) -> list[str]:
    """The calls of one command ('new', 'stop', ...)."""
    return [line for line in calls(env) if line.split()[0] == verb]


def assignments(env: dict[str, str]) -> dict[str, dict]:
    """The runtimes the fake's backend still holds (assigned, billing): endpoint -> accelerator."""
    path = Path(env["FAKE_COLAB_HOME"]) / "server.json"
    return json.loads(path.read_text()) if path.exists() else {}


def client_sessions(env: dict[str, str]) -> dict[str, dict]:
    """The sessions the fake client has a name for."""
    path = Path(env["FAKE_COLAB_HOME"]) / "sessions.json"
    return json.loads(path.read_text()) if path.exists() else {}


def records(folder: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(folder.rglob("*.json")) if not path.name.startswith(".")]


def remote_records(env: dict[str, str]) -> list[dict]:
    """The records the sessions' sweeps have written on their VMs (brought back or not)."""
    vms = Path(env["FAKE_COLAB_HOME"]) / "vms"
    found = []
    for path in sorted(vms.glob("*/content/colabkit/out/**/*.json")) if vms.is_dir() else []:
        if path.name.startswith("."):
            continue
        try:
            found.append(json.loads(path.read_text()))
        except ValueError:
            continue  # being written
    return found
