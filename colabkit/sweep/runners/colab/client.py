"""The Colab command-line client (`colab`, google-colab-cli) as a sweep drives it: each command, and
what its words and exit statuses mean, as the client's source has them.

Built against google-colab-cli v0.6.0 (googlecolab/google-colab-cli, tag v0.6.0, 2026-06-16), read in
its source (src/colab_cli/) on 2026-11-27; not run against real Colab from here (docs/colab.md says
what still needs a real run). What the source shows, and this module relies on:

- `whoami` (hidden in --help) mints a token and exits 1 with "[colab] whoami: ..." when it cannot;
  the other commands would start the login flow instead, which fails on a closed stdin.
- `new -s NAME --gpu T4 | --tpu v5e1` prints "[colab] Session READY." once the session is named; a
  refused accelerator prints "Backend rejected accelerator ..." on stderr and exits 1. The name is
  saved ~10 s after the VM is assigned: an interrupted `new` leaves an assigned VM with no name, so
  every `colab` command runs in a process session of its own (Ctrl-C and SIGTERM are colabkit's to
  handle, and it lets a `new` finish).
- `status -s NAME` prints "[NAME] ENDPOINT | Hardware: T4 | Variant: GPU | Status: IDLE";
  `sessions` prints one such line per assignment Colab holds ("[?] ENDPOINT ..." where the client
  has no name for it), or "[colab] No active sessions found on server.".
- `exec` runs code in the session's one IPython kernel; a Python error still exits 0 (the scripts
  print a mark when they got through); `--timeout` only stops the waiting. With jupyter-kernel-client
  1.x installed (the unpinned dependency resolves to it) every `exec` dies with "AttributeError:
  module 'jupyter_kernel_client' has no attribute 'KernelClient'" (the client's issues #94, #125, #133).
- The session's proxy token expires after 3600 s and is never renewed (issue #106): the next `exec`
  prints "appears to be lost (404/401)" and the client forgets the session, whose VM runs on.
- `stop -s NAME` prints "[colab] Session terminated." when it ended the VM, and "[colab] Session
  'NAME' not found." *with exit status 0* when the client has no such name: only the first words,
  or the endpoint gone from `sessions`, prove a session stopped.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from colabkit.colab.runtime import CLI_ACCELERATORS as ACCELERATORS  # what `--colab` accepts: kind, model
from colabkit.errors import ColabClientBroken, ColabClientError, ColabkitError

CLIENT = "google-colab-cli v0.6.0"
KERNEL_CLIENT_PIN = "jupyter-kernel-client==0.15.0"  # the last release with `KernelClient` (1.0.0 renamed it)
INSTALL = f"uv tool install google-colab-cli==0.6.0 --with {KERNEL_CLIENT_PIN}"
BROKEN_KERNEL_CLIENT = "has no attribute 'KernelClient'"
TERMINATED = "Session terminated."
READY = "Session READY."
SESSION_LINE = re.compile(r"^\[(?P<name>[^\]]+)\] (?P<endpoint>\S+) \| Hardware: (?P<hardware>[^|]+?) \|")

def accelerators(text: str) -> list[str]:
    """'T4,v5e1' -> ['T4', 'v5e1'] in the client's spelling (any case given); one line naming the choices."""
    by_lower = {name.lower(): name for name in ACCELERATORS}
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise ColabkitError(f"--colab {text!r} names no accelerator: give one or more of {', '.join(ACCELERATORS)} "
                            "(e.g. --colab T4,v5e1)")
    unknown = [name for name in names if name.lower() not in by_lower]
    if unknown:
        raise ColabkitError(f"--colab {text!r}: unknown accelerator {', '.join(unknown)}; "
                            f"choose from {', '.join(ACCELERATORS)}")
    chosen = [by_lower[name.lower()] for name in names]
    if len(set(chosen)) != len(chosen):
        raise ColabkitError(f"--colab {text!r} names an accelerator twice")
    return chosen


def broken_client_message() -> str:
    """The one line for a client whose `exec` cannot build a kernel client."""
    return (f"the Colab client cannot run code: its jupyter-kernel-client is 1.x, which has no KernelClient "
            f"(google-colab-cli issue #94); reinstall it with `{INSTALL.replace('install', 'install --force', 1)}` "
            "and run the sweep again")


@dataclass(frozen=True)
class Reply:
    """What one `colab` command said."""

    returncode: int
    stdout: str
    stderr: str

    def last_line(self) -> str:
        for text in (self.stderr, self.stdout):  # the client says why on stderr, else on stdout
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            if lines:
                return lines[-1]
        return f"exit status {self.returncode}"


@dataclass
class ColabClient:
    """Runs `colab` commands: stdin closed (the client may never wait on a prompt), each in a process
    session of its own (a Ctrl-C at the terminal reaches colabkit only)."""

    executable: str = "colab"

    def check(self) -> None:
        """Before anything is created: the client is on PATH and logged in (else one line, exit 2)."""
        if shutil.which(self.executable) is None:
            raise ColabkitError(f"--colab needs the Colab command-line client `{self.executable}` on PATH: "
                                f"install it with `{INSTALL}` (then log in: run `colab whoami` once)")
        try:
            reply = self.call(["whoami"], timeout=120)
        except ColabClientError:
            raise ColabkitError("`colab whoami` did not answer in 120 s: check the network, then log in "
                                "with `colab whoami` in a terminal") from None
        if reply.returncode != 0:
            raise ColabkitError(f"the Colab client is not logged in ({reply.last_line()}): run `colab whoami` "
                                "in a terminal and follow its authorization link, then run the sweep again")

    def call(self, args: Sequence[str], timeout: float, cancel: threading.Event | None = None) -> Reply:
        """`colab ARGS...` as it answered; ColabClientError past `timeout`, ColabClientBroken when the
        client's kernel library is the one that cannot work. With `cancel` (only for commands that leave
        nothing behind when cut short: `exec`, `upload`), the command is ended once it is set, and
        KeyboardInterrupt raised."""
        if cancel is not None and cancel.is_set():
            raise KeyboardInterrupt(f"`colab {args[0]}` not started")
        with subprocess.Popen([self.executable, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True) as process:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    stdout, stderr = process.communicate(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    late = time.monotonic() > deadline
                    if late or (cancel is not None and cancel.is_set()):
                        process.kill()
                        process.communicate()
                        if not late:
                            raise KeyboardInterrupt(f"`colab {args[0]}` cut short") from None
                        hint = (" (it was ended: a runtime Colab may have assigned it has no name; see Colab's "
                                "Runtime > Manage sessions)") if args[0] == "new" else ""
                        raise ColabClientError(f"`colab {args[0]}` took longer than {timeout:g} s{hint}") from None
        reply = Reply(process.returncode, stdout, stderr)
        if reply.returncode != 0 and BROKEN_KERNEL_CLIENT in reply.stderr + reply.stdout:
            raise ColabClientBroken(broken_client_message())
        return reply

    def run(self, args: Sequence[str], session: str, timeout: float, cancel: threading.Event | None = None) -> str:
        """`colab ARGS... -s SESSION`'s output; ColabClientError with its last line on a non-zero exit."""
        reply = self.call([args[0], "-s", session, *args[1:]], timeout, cancel)
        if reply.returncode != 0:
            raise ColabClientError(f"`colab {args[0]}` failed: {reply.last_line()}")
        return reply.stdout

    def new(self, session: str, accelerator: str) -> None:
        """A session of `accelerator` named `session`; ColabClientError (the client's words) if refused."""
        kind = ACCELERATORS[accelerator][0]
        output = self.run(["new", f"--{kind}", accelerator], session, timeout=900)
        if READY not in output:
            raise ColabClientError(f"`colab new` did not say the session is ready: {Reply(0, output, '').last_line()}")

    def endpoint(self, session: str) -> str | None:
        """The endpoint (the VM's name at Colab) of `session`, from `colab status`; None where the
        client has no such session."""
        reply = self.call(["status", "-s", session], timeout=300)
        for line in reply.stdout.splitlines():
            found = SESSION_LINE.match(line.strip())
            if found and found["name"] == session:
                return found["endpoint"]
        if reply.returncode != 0:
            raise ColabClientError(f"`colab status` failed: {reply.last_line()}")
        return None

    def listed(self) -> dict[str, str]:
        """Every runtime Colab holds for the account, from `colab sessions`: endpoint -> the client's name
        for it ('?' where it has none); ColabClientError when the listing failed."""
        reply = self.call(["sessions"], timeout=300)
        if reply.returncode != 0:
            raise ColabClientError(f"`colab sessions` failed: {reply.last_line()}")
        found = (SESSION_LINE.match(line.strip()) for line in reply.stdout.splitlines())
        return {match["endpoint"]: match["name"] for match in found if match}

    def stop(self, session: str) -> bool:
        """Ask the client to stop `session`: True only when it said "Session terminated." (its exit status
        is 0 also for a name it does not know); ColabClientError on a failure or its time limit."""
        reply = self.call(["stop", "-s", session], timeout=300)
        if reply.returncode != 0:
            raise ColabClientError(f"`colab stop` failed: {reply.last_line()}")
        return TERMINATED in reply.stdout
