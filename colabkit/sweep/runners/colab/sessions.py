"""What a Colab session of `sweep --colab` gets and runs, and what comes back from it.

- The sessions a results folder holds (`.colab-session.json`: each session's name and, right after
  `colab new`, the endpoint `colab status` gave), so that a crashed or interrupted sweep leaves every
  runtime it may still hold named, and the next run can bring back what it finished and stop it.
- What a session gets: this checkout's wheel (with its commit), and for each of its sweeps the share
  of the plan cut for it (its runs as JSON: `sweep --plan`, colabkit.sweep.runners.colab.executor),
  which it runs as planned here.
- What a session is given to run (colabkit.sweep.runners.colab.scripts) and the runs it makes.
- The results tar brought back, unpacked only when every member stays inside the accelerator's
  folder (a member outside it, a link or a device refuses the whole archive, naming the member).
"""

from __future__ import annotations

import functools
import json
import os
import posixpath
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any

import psutil

from colabkit.errors import ColabkitError, HostileArchiveError
from colabkit.io import inside, write_json_atomic
from colabkit.records.provenance import git_commit
from colabkit.suite import checkout_root
from colabkit.sweep.decide import Decision
from colabkit.sweep.runners.colab.client import ColabClient
from colabkit.sweep.runners.execute import RunFiles

STATE_FILE = ".colab-session.json"  # in each accelerator's results folder while it may hold a session
REMOTE = "content/colabkit"  # the client's file paths start at the VM's file root; `colab exec` runs in /content
PLAN_FILE = "plan.json"  # the runs of the session's current sweep, as planned here (`sweep --plan`)
SESSION_LIMIT_S = 3000.0  # --colab-session-limit's default: drained at 50 min, stopped well inside 55
TOKEN_LIFE_S = 3600.0  # the client's runtime token (issue #106): a session older than this is lost to it
TOKEN_MARGIN_S = 300.0  # --colab-session-limit's most is the token's life less this: a drain and a stop fit in it
# What a session takes before its first run: `colab new` (about 10 s of it before the client saves the name), the
# wheel's upload and pip install. An allowance, not yet measured on a real runtime (docs/colab.md); the tests' fake
# client, which starts a session in a second, sets it lower through SESSION_START_ENV.
SESSION_START_S = 60.0
SESSION_START_ENV = "COLABKIT_COLAB_SESSION_START_S"
POLL_ENV = "COLABKIT_COLAB_POLL_S"  # seconds between polls (default 30; the tests' fake client polls faster)

# --- the sessions a results folder holds ----------------------------------------------------------------

@dataclass
class HeldSession:
    """A session a sweep asked for and has not seen stopped."""

    session: str
    accelerator: str
    endpoint: str | None = None  # the VM's name at Colab, from `colab status` right after `colab new`
    pid: int = field(default_factory=os.getpid)
    host: str = field(default_factory=socket.gethostname)


def held_sessions(folder: Path) -> list[HeldSession]:
    """The sessions the state file of `folder` names (an earlier sweep's, its process gone); one line
    when it cannot be read, or when a sweep still running on this host holds them."""
    path = folder / STATE_FILE
    try:
        held = _read_entries(path)
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ColabkitError(f"{path} cannot be read ({exc}): list the runtimes with `colab sessions`, stop those "
                            "of this sweep with `colab stop -s NAME` (or in Colab's Runtime > Manage sessions), "
                            "then delete the file") from None
    for entry in held:
        if entry.host == socket.gethostname() and entry.pid != os.getpid() and psutil.pid_exists(entry.pid):
            raise ColabkitError(f"{folder}: another sweep (process {entry.pid}) holds Colab session {entry.session!r}")
    return held


def remember(folder: Path, held: HeldSession) -> None:
    """Add or update `held` in the state file (before `colab new`, and again once its endpoint is known)."""
    others = [entry for entry in _entries(folder) if entry.session != held.session]
    write_json_atomic(folder / STATE_FILE, {"sessions": [asdict(entry) for entry in [*others, held]]})


def forget(folder: Path, session: str) -> None:
    """`session` is stopped (or was never made): out of the state file, which goes with its last entry."""
    left = [entry for entry in _entries(folder) if entry.session != session]
    if left:
        write_json_atomic(folder / STATE_FILE, {"sessions": [asdict(entry) for entry in left]})
    else:
        (folder / STATE_FILE).unlink(missing_ok=True)


def _read_entries(path: Path) -> list[HeldSession]:
    state = json.loads(path.read_text(encoding="utf-8"))
    entries = state["sessions"] if "sessions" in state else [state]  # before 2026-11-27: one session, no list
    return [HeldSession(str(entry["session"]), str(entry.get("accelerator", "")), entry.get("endpoint"),
                        int(entry.get("pid", 0)), str(entry.get("host", ""))) for entry in entries]


def _entries(folder: Path) -> list[HeldSession]:
    try:
        return _read_entries(folder / STATE_FILE)
    except (OSError, ValueError, KeyError, TypeError):
        return []


# --- what a session gets ------------------------------------------------------------------------------

def build_wheel(folder: Path) -> Path:
    """The wheel of this checkout as it is (uncommitted edits too), its commit written into it
    (colabkit/source_commit.txt, which records read where there is no checkout)."""
    root = checkout_root()
    if root is None:
        raise ColabkitError("--colab builds colabkit's wheel from a checkout: run it from a clone of colabkit")
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True,
                            text=True, check=True).stdout.split("\0")
    source = folder / "source"
    for name in filter(None, listed):
        if (root / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, source / name)
    (source / "colabkit" / "source_commit.txt").write_text(f"{git_commit() or 'unknown'}\n", encoding="utf-8")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                            "-w", str(folder), str(source)], capture_output=True, text=True)
    wheels = sorted(folder.glob("colabkit-*.whl"))
    if built.returncode != 0 or not wheels:
        said = (built.stderr.strip().splitlines() or ["no output"])[-1]
        raise ColabkitError(f"could not build colabkit's wheel: {said}")
    return wheels[0]


# --- the runs of a session -------------------------------------------------------------------------------

def fitting(run_seconds: Sequence[float], budget_s: float, at_least_one: bool = True) -> int:
    """How many of the first runs (their estimated seconds) fit in `budget_s`: at least one, unless
    `at_least_one` is False (a session that has run some already need not take a run it has no time for)."""
    total, count = 0.0, 0
    for seconds in run_seconds:
        if (count or not at_least_one) and total + seconds > budget_s:
            break
        total, count = total + seconds, count + 1
    return count


def session_count(run_seconds: Sequence[float], limit_s: float) -> int:
    """How many sessions of `limit_s` the runs take by their estimates (the sessions' starts not counted)."""
    sessions, start = 0, 0
    while start < len(run_seconds):
        start += fitting(run_seconds[start:], limit_s)
        sessions += 1
    return sessions


def stamp(decision: Decision, out: Path) -> tuple[Any, Any] | None:
    """What a run's record says before a session runs it (status, started_at), to tell the record that
    comes back from the session from one written earlier; None without a readable record."""
    try:
        record = json.loads(RunFiles.of(decision.combination, out).record.read_text(encoding="utf-8"))
        return record.get("status"), record.get("started_at")
    except (OSError, ValueError, AttributeError):
        return None


def came_back(decision: Decision, out: Path, stamps: dict[str, Any]) -> bool:
    """Whether the run's record is a new one (`stamps`: by record path, what `stamp` gave before)."""
    now = stamp(decision, out)
    return now is not None and now != stamps[RunFiles.of(decision.combination, out).record]


def record_status(decision: Decision, out: Path) -> str:
    found = stamp(decision, out)
    return str(found[0]) if found else "?"


def record_seconds(record: dict[str, Any]) -> float:
    """A record's wall time (finished_at - started_at), 0 where it does not say."""
    try:
        finished, started = (datetime.fromisoformat(record[key]) for key in ("finished_at", "started_at"))
        return (finished - started).total_seconds()
    except (KeyError, TypeError, ValueError):
        return 0.0


def left_running(session: str, endpoint: str | None, said: str) -> str:
    """The line for a session not proved stopped (the console's, and its failed records')."""
    return (f"runtime {endpoint or '(endpoint unknown)'} of Colab session {session} may still be running, and billing "
            f"({said}): end it in Colab's Runtime > Manage sessions; running this sweep again tries to stop it again")


def tail(output: str) -> str:
    """The last line of a command's output, for a one-line message."""
    lines = [line for line in output.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


# --- what comes back ------------------------------------------------------------------------------------

def unpack_results(archive: Path, out: Path) -> int:
    """The session's results tar (members under out/) unpacked into `out`; how many files. Every member is
    checked first: one whose path leaves out/, or `out` once resolved here (colabkit.io.inside: a link
    already in `out` that points out), or that is not a plain file or folder, refuses the whole archive
    (HostileArchiveError naming it); tarfile.TarError when it is no tar."""
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        for member in members:
            inner = posixpath.normpath(member.name)
            if not (member.isfile() or member.isdir()):
                raise HostileArchiveError(f"member {member.name!r} is a link or a device, not a file or folder")
            if not (inner == "out" or inner.startswith("out/")):
                raise HostileArchiveError(f"member {member.name!r} is not under out/: it would land outside {out}")
            if inside(out, inner[4:]) is None:
                raise HostileArchiveError(f"member {member.name!r} would land outside {out}")
        for member in members:
            member.name = posixpath.normpath(member.name)[4:]
        files = [member for member in members if member.name]
        out.mkdir(parents=True, exist_ok=True)
        tar.extractall(out, files, filter="data")
    return sum(member.isfile() for member in files)


class Ending(Enum):
    """How a session's sweep ended."""

    DONE = "done"  # the sweep ended by itself
    DRAINED = "drained"  # the session reached its limit: stopped; the rest goes to a fresh session
    RESULTS_LOST = "results lost"  # a download failed: stopped at once; the rest goes to a fresh session
    FAILED = "failed"  # the session was lost, sent back a hostile archive, or its sweep did not start
    OUT_OF_TIME = "out of time"  # --colab-timeout: what is left fails
    INTERRUPTED = "interrupted"  # Ctrl-C or SIGTERM here


@dataclass
class ColabJob:
    """What every Colab session of this process shares: the client, the wheel they install, Ctrl-C (every
    executor stops), the console, and whether the client has proved it runs code (`colab_job`: the one job)."""

    wheel: Path = Path()  # built once per sweep, before any session (colabkit.sweep.runners.colab.command)
    client: ColabClient = field(default_factory=ColabClient)
    stop: threading.Event = field(default_factory=threading.Event)  # set on Ctrl-C: every executor stops
    echo: Callable[[str], None] = print
    poll_s: float = 30.0
    trial: threading.Lock = field(default_factory=threading.Lock)  # held while a first session proves the client
    proven: bool = False  # a session ran code: the client works
    broken: str = ""  # why the client cannot work: every executor stops
    left_running: dict[str, list[str]] = field(default_factory=dict)  # per accelerator, each session not proved stopped

    def said_by(self, accelerator: str) -> Callable[[str], None]:
        """The console, each line marked with the accelerator that says it."""
        return lambda line: self.echo(f"[{accelerator}] {line}")


@functools.cache
def colab_job() -> ColabJob:
    """This process's one ColabJob, its console's lines whole where threads print side by side."""
    lock = threading.Lock()

    def echo(line: str) -> None:
        with lock:
            print(line, flush=True)

    return ColabJob(echo=echo, poll_s=float(os.environ.get(POLL_ENV, 30)))


@dataclass
class LiveSession:
    """A session this sweep holds now."""

    name: str
    endpoint: str | None
    started: float = field(default_factory=time.monotonic)  # just before its `colab new`: its token's age
    setup_s: float = 0.0  # from `colab new` to the wheel installed
    sweeps: int = 0  # the sweeps started in it so far

    def elapsed(self) -> float:
        return time.monotonic() - self.started
