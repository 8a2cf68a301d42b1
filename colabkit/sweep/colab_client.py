"""The Colab command-line client (`colab`, google-colab-cli) as a sweep drives it, the sessions a sweep
holds (a state file per results folder, so that the next run stops what a crashed one left), and what
a session gets: this checkout's wheel, the records finished earlier, the sweep's arguments.

Built against google-colab-cli v0.6.0 (googlecolab/google-colab-cli, tag v0.6.0, 2026-06-16), read
from its source, docs and tests; not run against real Colab from here (docs/colab.md). The commands
used, each with `-s NAME`: `new --gpu X | --tpu X`, `upload LOCAL REMOTE`, `exec -f FILE --timeout S`,
`download REMOTE LOCAL`, `stop`; and `whoami` (hidden in its --help) to check the login before
anything is created. The client prints `[colab] ...` lines, exits 1 on a failure, and never prompts
when its login works (`whoami` would start the login flow, which fails on a closed stdin).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from colabkit.errors import ColabkitError
from colabkit.records.provenance import git_commit
from colabkit.suite import checkout_root

CLIENT = "google-colab-cli v0.6.0"
INSTALL = "uv tool install google-colab-cli"
# What `--colab` accepts: the client's own spellings, each with its flag and the name the peaks table knows.
ACCELERATORS: dict[str, tuple[str, str]] = {
    "T4": ("gpu", "Tesla T4"), "L4": ("gpu", "NVIDIA L4"), "A100": ("gpu", "NVIDIA A100-SXM4-40GB"),
    "H100": ("gpu", "NVIDIA H100 80GB HBM3"), "G4": ("gpu", "NVIDIA RTX PRO 6000 Blackwell Server Edition"),
    "v5e1": ("tpu", "v5e"), "v6e1": ("tpu", "v6e"),
}
STATE_FILE = ".colab-session.json"  # in each accelerator's results folder while its session lives


class ColabClientError(ColabkitError):
    """`colab` failed: a session refused, lost, or a command that exited non-zero (one line)."""


def accelerators(text: str) -> list[str]:
    """'T4,v5e1' -> ['T4', 'v5e1'] in the client's spelling (any case given); one line naming the choices."""
    by_lower = {name.lower(): name for name in ACCELERATORS}
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name.lower() not in by_lower]
    if unknown or not names:
        raise ColabkitError(f"--colab {text!r}: unknown accelerator {', '.join(unknown) or '(none)'}; "
                            f"choose from {', '.join(ACCELERATORS)}")
    chosen = [by_lower[name.lower()] for name in names]
    if len(set(chosen)) != len(chosen):
        raise ColabkitError(f"--colab {text!r} names an accelerator twice")
    return chosen


@dataclass
class ColabClient:
    """Runs `colab` commands (stdin closed: the client may never wait on a prompt)."""

    executable: str = "colab"

    def check(self) -> None:
        """Before anything is created: the client is on PATH and logged in (else one line, exit 2)."""
        if shutil.which(self.executable) is None:
            raise ColabkitError(f"--colab needs the Colab command-line client `{self.executable}` on PATH: "
                                f"install it with `{INSTALL}` (then log in: run `colab whoami` once)")
        try:
            completed = self._call(["whoami"], timeout=120)
        except subprocess.TimeoutExpired:
            raise ColabkitError("`colab whoami` did not answer in 120 s: check the network, then log in "
                                "with `colab whoami` in a terminal") from None
        if completed.returncode != 0:
            raise ColabkitError(f"the Colab client is not logged in ({_last_line(completed)}): run `colab whoami` "
                                "in a terminal and follow its authorization link, then run the sweep again")

    def run(self, args: Sequence[str], session: str, timeout: float | None = None) -> str:
        """`colab ARGS... -s SESSION`'s output; ColabClientError with its last line on a non-zero exit
        (or its time limit)."""
        try:
            completed = self._call([args[0], "-s", session, *args[1:]], timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ColabClientError(f"`colab {args[0]}` took longer than {timeout:g} s") from None
        if completed.returncode != 0:
            raise ColabClientError(f"`colab {args[0]}` failed: {_last_line(completed)}")
        return completed.stdout

    def new(self, session: str, accelerator: str) -> None:
        kind = ACCELERATORS[accelerator][0]
        self.run(["new", f"--{kind}", accelerator], session, timeout=900)

    def stop(self, session: str) -> None:
        self.run(["stop"], session, timeout=300)

    def _call(self, args: list[str], timeout: float | None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.executable, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)


def _last_line(completed: subprocess.CompletedProcess[str]) -> str:
    for text in (completed.stderr, completed.stdout):  # the client says why on stderr, else on stdout
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return f"exit status {completed.returncode}"


# --- the sessions a sweep holds ----------------------------------------------------------------------

def remember(folder: Path, session: str, accelerator: str) -> None:
    """Note the session before it is asked for, so that a crash at any point leaves its name behind."""
    folder.mkdir(parents=True, exist_ok=True)
    state = {"session": session, "accelerator": accelerator, "pid": os.getpid(), "host": socket.gethostname()}
    (folder / STATE_FILE).write_text(json.dumps(state) + "\n", encoding="utf-8")


def forget(folder: Path) -> None:
    (folder / STATE_FILE).unlink(missing_ok=True)


def orphan(folder: Path) -> dict[str, str] | None:
    """The session an earlier sweep of `folder` left behind (its process is gone), or None; a session
    whose sweep still runs on this host is not an orphan."""
    try:
        state = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ColabkitError(f"{folder / STATE_FILE} cannot be read ({exc}): stop its session with "
                            "`colab sessions` and `colab stop -s NAME`, then delete the file") from None
    if state.get("host") == socket.gethostname() and _alive(int(state.get("pid", 0))):
        raise ColabkitError(f"{folder}: another sweep (process {state['pid']}) holds Colab session "
                            f"{state['session']!r}")
    return state


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- what a session gets ---------------------------------------------------------------------------

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
        raise ColabkitError(f"could not build colabkit's wheel: {(built.stderr.strip().splitlines() or ['no output'])[-1]}")
    return wheels[0]


def pack_kept(out: Path, archive: Path) -> bool:
    """The ok records under `out` in a tar (the session's sweep keeps those whose fingerprint matches)."""
    kept = []
    for path in out.rglob("*.json"):
        try:
            if not path.name.startswith(".") and json.loads(path.read_text(encoding="utf-8")).get("status") == "ok":
                kept.append(path)
        except (OSError, ValueError, AttributeError):
            continue
    if kept:
        with tarfile.open(archive, "w") as tar:
            for path in kept:
                tar.add(path, arcname=str(path.relative_to(out)))
    return bool(kept)


def inner_args(args: argparse.Namespace, kind: str) -> list[str]:
    """The session's `sweep` arguments: the grid files as uploaded, this sweep's options, `--device kind`."""
    command = [f"parameters/{Path(grid).name}" for grid in args.grids] + ["--device", kind]
    flags = {"--preset": args.preset, "--repeats": args.repeats, "--kernels": args.kernels, "--html": args.html,
             "--timeout": args.timeout_s, "--target-ci": args.target_ci, "--max-repeats": args.max_repeats}
    command += [text for flag, value in flags.items() if value is not None for text in (flag, str(value))]
    command += [text for value in args.param or () for text in ("-p", value)]
    return command + [flag for flag, on in (("--force", args.force), ("--rerun", args.rerun_unreadable)) if on]
