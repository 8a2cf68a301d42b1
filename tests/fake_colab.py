"""A stand-in `colab` (google-colab-cli v0.6.0) for the tests of `sweep --colab`, written from the
client's source at tag v0.6.0 (src/colab_cli/commands/session.py, execution.py, files.py,
utility.py; state.py, runtime.py, client.py), read 2026-11-27: the commands colabkit uses, with the
client's words, streams and exit statuses, and what the client does that its docs do not say:

- Colab's backend holds *assignments* (server.json: endpoint -> accelerator), the client its own
  record of the sessions it named (sessions.json, its ~/.config/colab-cli/sessions.json). `colab
  sessions` lists every assignment ("[NAME] ENDPOINT | Hardware: T4 | Variant: GPU", NAME "?" where
  the client has none); `status` and `sessions` first drop the client's records whose endpoint the
  backend no longer lists ("[colab] Pruned N stale local session(s).").
- `new` prints "[colab] Creating session 'N'...", asks for the assignment, and saves the name only
  after the keep-alive pre-flight and the keep-alive daemon's start (the client: a network round trip
  and a process start): an interrupted `new` leaves an assignment with no name. That gap takes
  FAKE_COLAB_ASSIGN_GAP_S seconds of the fake's clock (below); with FAKE_COLAB_HOLD_NEW=1 `new` also
  waits in it until the test writes $FAKE_COLAB_HOME/release-new (the test's window to interrupt it).
  A refused accelerator: "Backend rejected accelerator 'T4'. ..." on stderr, exit 1.
- One persistent interpreter per session (the client keeps one IPython kernel): variables, the
  working directory (each `exec` first goes to /content, the VM's content/ here) and background
  processes survive between calls; `__file__` is not defined; a Python error is printed on stderr
  and `exec` still exits 0. `--timeout` (default 30 s) only stops the waiting: `exec` then prints
  "TimeoutError: Timeout waiting for output" and exits 1 while the code runs on.
- The runtime's proxy token expires FAKE_COLAB_TOKEN_S seconds (default 3600, as at Colab) of the
  fake's clock after the assignment, or with FAKE_COLAB_TOKEN_EXECS=N at the session's Nth `exec`,
  whichever comes first (the client never renews it, its issue #106): that `exec`
  prints "[colab] Session 'N' appears to be lost (404/401). Cleaning up." and drops the client's record
  (exit 1) while the VM runs on, still listed by `colab sessions` as "?"; `upload`/`download` fail with
  404 ("File or directory not found"). `stop` of a name the client has no record of prints "[colab]
  Session 'N' not found." and exits 0; a stop that worked prints "[colab] Session terminated.".
- FAKE_COLAB_KERNEL_CLIENT=1.0.2: the client installed with jupyter-kernel-client 1.x, which has no
  `KernelClient` (the client's issue #94): every `exec` dies with its traceback, exit 1; `new`,
  `status`, `upload`, `download` and `stop` work (they never build a kernel client).

The fake's clock is never real time, so that no test rests on how fast this machine runs: it reads
the seconds in $FAKE_COLAB_HOME/clock (0 while there is none), which the tests move (`advance_clock`)
and `new` moves by its gap, plus FAKE_COLAB_RUN_S seconds for each run finished on any VM (each file
matching FAKE_COLAB_RUN_FILES, a glob under a VM's content/, dot-files aside): a run stands for that
much of the runtime's time. Tokens expire on it; tests that run `sweep --colab` in their own process
give colabkit's session clock the same one (colab_helpers). `exec --timeout` alone waits in real
seconds: it is how long the client waits for output, and what it stops is only the waiting.

The "VM" of an assignment is the folder $FAKE_COLAB_HOME/vms/ENDPOINT, whose content/ is /content:
its interpreter runs on this machine's CPU with COLABKIT_TEST_STAND_IN naming the accelerator
granted (the records say the device the fake reports), and pip there really installs (into the VM's
site folder, no dependencies, no index): the colabkit that runs there is the uploaded wheel's.

Other settings: FAKE_COLAB_LOGGED_OUT (whoami fails), FAKE_COLAB_REFUSE=A,B, FAKE_COLAB_GRANT=T4:L4
(an L4 granted for a T4), FAKE_COLAB_LOSE=A:N (at the Nth `exec` in a session of A the backend has
dropped the VM), FAKE_COLAB_DOWNLOAD_DELAY=S (each download takes S real seconds: a slow link, on
which no outcome rests), FAKE_COLAB_DOWNLOAD_FAILS=N (the first N downloads fail),
FAKE_COLAB_RESULTS=PATH (every download of a results.tar gets that file instead: a hostile session),
FAKE_COLAB_UNASSIGN_FAILS (`stop`'s unassign request fails: a traceback, exit 1, the record kept).
Every call is appended to $FAKE_COLAB_HOME/calls.log.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

# What the backend grants for each accelerator the client asks for, and what the driver (GPU) or JAX
# (TPU) then calls it.
DEVICES = {"T4": ("gpu", "Tesla T4"), "L4": ("gpu", "NVIDIA L4"), "A100": ("gpu", "NVIDIA A100-SXM4-40GB"),
           "H100": ("gpu", "NVIDIA H100 80GB HBM3"), "G4": ("gpu", "NVIDIA RTX PRO 6000 Blackwell Server Edition"),
           "V5E1": ("tpu", "TPU v5 lite"), "V6E1": ("tpu", "TPU v6 lite")}
GPU_FLAGS = {"a100": "A100", "h100": "H100", "l4": "L4", "t4": "T4", "g4": "G4"}  # commands/session.py `new`
KERNEL_CLIENT_TRACEBACK = """Traceback (most recent call last):
  File "/home/user/.local/share/uv/tools/google-colab-cli/lib/python3.13/site-packages/colab_cli/runtime.py", line 106, in kernel_client
    self._kernel_client = jupyter_kernel_client.KernelClient(
                          ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
AttributeError: module 'jupyter_kernel_client' has no attribute 'KernelClient'
"""
TIMEOUT_TRACEBACK = """Traceback (most recent call last):
  File "/home/user/.local/share/uv/tools/google-colab-cli/lib/python3.13/site-packages/jupyter_kernel_client/wsclient.py", line 1097, in execute_interactive
    raise TimeoutError("Timeout waiting for output")
TimeoutError: Timeout waiting for output
"""
UNASSIGN_TRACEBACK = """Traceback (most recent call last):
  File "/home/user/.local/share/uv/tools/google-colab-cli/lib/python3.13/site-packages/colab_cli/client.py", line 233, in unassign
colab_cli.client.ColabRequestError: Failed to issue request POST https://colab.research.google.com/tun/m/unassign/{endpoint}: Service Unavailable
"""


def home() -> Path:
    return Path(os.environ["FAKE_COLAB_HOME"])


def load(name: str) -> dict[str, Any]:
    path = home() / name
    return json.loads(path.read_text()) if path.exists() else {}


def save(name: str, state: dict[str, Any]) -> None:
    path = home() / name
    path.with_suffix(".tmp").write_text(json.dumps(state))
    path.with_suffix(".tmp").replace(path)


def option(args: list[str], *names: str) -> str | None:
    for name in names:
        if name in args:
            return args[args.index(name) + 1]
    return None


def positional(args: list[str]) -> list[str]:
    rest, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-s", "--session", "-f", "--file", "--timeout", "--gpu", "--tpu", "--output-image"):
            skip = True
        else:
            rest.append(arg)
    return rest


def wait_for_file(path: Path, why: str = "", hang_guard_s: float = 600) -> None:
    """Until `path` exists (a test's release, a process's start); `hang_guard_s` only guards against a hang."""
    deadline = time.monotonic() + hang_guard_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"fake colab: {why or f'{path} was never written'}")
        time.sleep(0.05)


def vm_folder(endpoint: str) -> Path:
    return home() / "vms" / endpoint


def kill_vm(vm: Path) -> None:
    """What ending a VM does to what runs on it: every process whose working folder is in it ends."""
    root = str(vm.resolve())
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/cwd").startswith(root) and int(pid) != os.getpid():
                os.kill(int(pid), signal.SIGKILL)
        except OSError:
            continue
    (vm / "kernel.port").unlink(missing_ok=True)


def end_every_vm(fake_home: Path) -> None:
    """The tests' clean-up: every process of every VM the fake made ends (assigned or not)."""
    for vm in sorted((fake_home / "vms").glob("*")) if (fake_home / "vms").is_dir() else []:
        kill_vm(vm)


def line(name: str, endpoint: str, assignment: dict[str, Any], status: str | None = None) -> str:
    """commands/session.py `_format_session_line`."""
    parts = [f"[{name}] {endpoint}", f"Hardware: {assignment['accelerator']}", f"Variant: {assignment['variant']}"]
    return " | ".join(parts + ([f"Status: {status}"] if status else []))


def sync() -> tuple[dict[str, Any], dict[str, Any]]:
    """common.py `State.sync_sessions`: the client's records, less those the backend no longer lists."""
    local, server = load("sessions.json"), load("server.json")
    stale = [name for name, session in local.items() if session["endpoint"] not in server]
    for name in stale:
        del local[name]
    if stale:
        save("sessions.json", local)
        print(f"[colab] Pruned {len(stale)} stale local session(s).")
    return local, server


def clock(fake_home: Path | None = None) -> float:
    """The fake's clock in seconds (module docstring): what the tests and `new` moved it by, and
    FAKE_COLAB_RUN_S for each run finished on a VM."""
    fake_home = fake_home or home()
    path = fake_home / "clock"
    seconds = float(path.read_text()) if path.exists() else 0.0
    run_s, pattern = float(os.environ.get("FAKE_COLAB_RUN_S", 0)), os.environ.get("FAKE_COLAB_RUN_FILES", "")
    if run_s and pattern and (fake_home / "vms").is_dir():
        finished = [path for vm in (fake_home / "vms").iterdir() for path in (vm / "content").glob(pattern)
                    if not path.name.startswith(".")]  # a dot-file is a temporary or a mark, not a result
        seconds += run_s * len(finished)
    return seconds


def advance_clock(fake_home: Path, seconds: float) -> None:
    """Move the fake's clock on by `seconds` (the tests' and `new`'s; atomic, as every state file here)."""
    path = fake_home / "clock"
    moved = (float(path.read_text()) if path.exists() else 0.0) + seconds
    path.with_suffix(".tmp").write_text(repr(moved))
    path.with_suffix(".tmp").replace(path)


def token_expired(session: dict[str, Any]) -> bool:
    execs = int(os.environ.get("FAKE_COLAB_TOKEN_EXECS", 0))
    return (clock() - session["token_at"] >= float(os.environ.get("FAKE_COLAB_TOKEN_S", 3600))
            or 0 < execs <= session.get("execs", 0))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--kernel"]:
        return kernel(Path(argv[1]))
    home().mkdir(parents=True, exist_ok=True)
    with open(home() / "lock", "w") as lock:  # the client's state store is locked too (its filelock)
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(home() / "calls.log", "a") as log:
            log.write(" ".join(argv) + "\n")
        return command(argv[0], argv[1:], lock)


def command(verb: str, args: list[str], lock: Any) -> int:
    if verb == "whoami":
        if os.environ.get("FAKE_COLAB_LOGGED_OUT"):
            print("[colab] whoami: failed to refresh credentials: EOF when reading a line", file=sys.stderr)
            return 1
        print("Auth provider: oauth2\nEmail:         tester@example.com\nAudience:      fake\nExpires in:    59m")
        return 0
    if verb == "sessions":
        local, server = sync()
        if not server:
            print("[colab] No active sessions found on server.")
        names = {session["endpoint"]: name for name, session in local.items()}
        for endpoint, assignment in server.items():
            print(line(names.get(endpoint, "?"), endpoint, assignment))
        return 0
    name = option(args, "-s", "--session")
    if verb == "new":
        return new(name or uuid.uuid4().hex[:6], args, lock)
    if verb == "status":
        local, server = sync()
        if name not in local:
            print(f"[colab] Session '{name}' not found.")
            return 0
        print(line(name, local[name]["endpoint"], server[local[name]["endpoint"]], "IDLE"))
        return 0
    local = load("sessions.json")
    if name not in local:
        print(f"[colab] Session '{name}' not found.")
        return 0 if verb == "stop" else 1
    session = local[name]
    if verb == "stop":
        return stop(name, session)
    vm = vm_folder(session["endpoint"])
    if verb in ("upload", "download"):
        return files(verb, positional(args), session, vm, lock)
    if verb == "exec":
        return execute(name, args, session, vm, lock)
    print(f"fake colab: {verb} is not faked", file=sys.stderr)
    return 2


def new(name: str, args: list[str], lock: Any) -> int:
    tpu, gpu = option(args, "--tpu"), option(args, "--gpu")
    if tpu:
        accelerator, variant = ("V5E1" if tpu.lower() == "v5e1" else "V6E1"), "TPU"
    elif gpu:
        accelerator, variant = GPU_FLAGS.get(gpu.lower(), "A100"), "GPU"
    else:
        accelerator, variant = "NONE", "DEFAULT"
    print(f"[colab] Creating session '{name}'...", flush=True)
    refused = {part.strip().upper() for part in os.environ.get("FAKE_COLAB_REFUSE", "").split(",") if part.strip()}
    if accelerator in refused:
        print(f"[colab] Backend rejected accelerator '{accelerator}'. You may not have quota or entitlement for this "
              "accelerator on your account. Try a different one (e.g. --gpu T4) or omit --gpu/--tpu for a CPU runtime.",
              file=sys.stderr)
        return 1
    grants = dict(pair.upper().split(":") for pair in os.environ.get("FAKE_COLAB_GRANT", "").split(",") if ":" in pair)
    granted = grants.get(accelerator, accelerator)
    endpoint = f"{variant.lower()}-{granted.lower()}-s-{uuid.uuid4().hex[:12]}"
    server = load("server.json")
    server[endpoint] = {"accelerator": granted, "variant": variant}
    (vm_folder(endpoint) / "content").mkdir(parents=True)
    save("server.json", server)
    assigned_at = clock()
    fcntl.flock(lock, fcntl.LOCK_UN)  # the keep-alive pre-flight and the daemon's start: the VM has no name yet
    if os.environ.get("FAKE_COLAB_HOLD_NEW"):
        wait_for_file(home() / "release-new")
    fcntl.flock(lock, fcntl.LOCK_EX)
    advance_clock(home(), float(os.environ.get("FAKE_COLAB_ASSIGN_GAP_S", 0)))
    local = load("sessions.json")
    local[name] = {"endpoint": endpoint, "accelerator": granted, "variant": variant, "token_at": assigned_at}
    save("sessions.json", local)
    print("[colab] Session READY.")
    return 0


def stop(name: str, session: dict[str, Any]) -> int:
    print(f"[colab] Stopping session '{name}'...", flush=True)
    if os.environ.get("FAKE_COLAB_UNASSIGN_FAILS"):
        print(UNASSIGN_TRACEBACK.format(endpoint=session["endpoint"]), file=sys.stderr, end="")
        return 1
    server = load("server.json")
    server.pop(session["endpoint"], None)
    save("server.json", server)
    kill_vm(vm_folder(session["endpoint"]))
    local = load("sessions.json")
    local.pop(name, None)
    save("sessions.json", local)
    print("[colab] Session terminated.")
    return 0


def files(verb: str, paths: list[str], session: dict[str, Any], vm: Path, lock: Any) -> int:
    """commands/files.py through contents.py: a 404 from the proxy is "File or directory not found"."""
    if verb == "upload":
        local_path, remote = paths
        if not os.path.isfile(local_path):
            print(f"[colab] Local file '{local_path}' not found.")
            return 1
        if token_expired(session) or session["endpoint"] not in load("server.json") \
                or not (vm / remote).parent.is_dir():  # Jupyter's contents API makes no folders
            print(f"[colab] Upload failed: File or directory not found: {remote}")
            return 1
        shutil.copy(local_path, vm / remote)
        print(f"[colab] Uploaded '{local_path}' to '{remote}'")
        return 0
    remote, local_path = paths
    fcntl.flock(lock, fcntl.LOCK_UN)
    time.sleep(float(os.environ.get("FAKE_COLAB_DOWNLOAD_DELAY", 0)))
    downloads = sum(entry.startswith("download ") for entry in (home() / "calls.log").read_text().splitlines())
    if downloads <= int(os.environ.get("FAKE_COLAB_DOWNLOAD_FAILS", 0)):
        print("[colab] Download failed: 500 Server Error: Internal Server Error for url: "
              f"https://fake/api/contents/{remote}")
        return 1
    if token_expired(session) or session["endpoint"] not in load("server.json") or not (vm / remote).is_file():
        print(f"[colab] Download failed: File or directory not found: {remote}")
        return 1
    substitute = os.environ.get("FAKE_COLAB_RESULTS")
    shutil.copy(substitute if substitute and remote.endswith("results.tar") else vm / remote, local_path)
    print(f"[colab] Downloaded '{remote}' to '{local_path}'")
    return 0


def execute(name: str, args: list[str], session: dict[str, Any], vm: Path, lock: Any) -> int:
    """commands/execution.py `exec_command` on runtime.py's kernel client."""
    file = option(args, "-f", "--file")
    code = Path(file).read_text() if file else sys.stdin.read()
    if not code.strip():
        return 0
    if os.environ.get("FAKE_COLAB_KERNEL_CLIENT", "0.15.0").split(".")[0] not in ("0", ""):
        print(KERNEL_CLIENT_TRACEBACK, file=sys.stderr, end="")
        return 1
    server = load("server.json")
    lose, _, nth = os.environ.get("FAKE_COLAB_LOSE", "").partition(":")
    session["execs"] = session.get("execs", 0) + 1
    local = load("sessions.json")
    local[name] = session
    save("sessions.json", local)
    if lose.upper() == session["accelerator"] and session["execs"] >= int(nth):  # the backend dropped the VM
        server.pop(session["endpoint"], None)
        save("server.json", server)
        kill_vm(vm)
    if token_expired(session) or session["endpoint"] not in server:
        print(f"[colab] Session '{name}' appears to be lost (404/401). Cleaning up.")
        local.pop(name, None)  # common.py `prune_session`: the client forgets the VM, which runs on
        save("sessions.json", local)
        return 1
    kind, device = DEVICES[session["accelerator"]]
    fcntl.flock(lock, fcntl.LOCK_UN)  # other sessions' commands go on while this one runs
    port = kernel_port(vm, f"{kind}={device}")
    timeout = float(option(args, "--timeout") or 30)
    with socket.create_connection(("127.0.0.1", port)) as connection:
        connection.sendall((json.dumps({"code": code}) + "\n").encode())
        connection.settimeout(timeout)
        deadline = time.monotonic() + timeout
        reader = connection.makefile("r", encoding="utf-8")
        try:
            for frame in map(json.loads, reader):
                if "done" in frame:
                    return 0  # errors in the code included: the client prints them and exits 0
                print(frame["text"], end="", file=sys.stderr if frame["stream"] == "stderr" else sys.stdout, flush=True)
                connection.settimeout(max(0.01, deadline - time.monotonic()))
        except TimeoutError:
            pass
    print(TIMEOUT_TRACEBACK, file=sys.stderr, end="")  # the code runs on in the kernel
    return 1


def kernel_port(vm: Path, stand_in: str) -> int:
    """The port of the VM's interpreter, started at its first `exec`."""
    port_file = vm / "kernel.port"
    if not port_file.exists():
        site = vm / "site"
        env = {key: value for key, value in os.environ.items() if not key.startswith(("FAKE_COLAB_", "PYTHONPATH"))}
        env.update(PYTHONPATH=str(site), PIP_TARGET=str(site), PIP_NO_DEPS="1", PIP_NO_INDEX="1",
                   PIP_DISABLE_PIP_VERSION_CHECK="1", COLABKIT_TEST_STAND_IN=stand_in, FAKE_COLAB_HOME=str(home()))
        subprocess.Popen([sys.executable, os.path.abspath(__file__), "--kernel", str(vm)], cwd=vm / "content", env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(vm / "kernel.log", "a"),
                         start_new_session=True)
        wait_for_file(port_file, why="the VM's interpreter did not start (see kernel.log)")
    return int(port_file.read_text())


class Stream(io.TextIOBase):
    """A kernel's stdout or stderr: each write goes to the `exec` waiting on it (if it still waits)."""

    def __init__(self, name: str) -> None:
        self.stream_name = name
        self.connection: socket.socket | None = None

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.connection is not None and text:
            try:
                self.connection.sendall((json.dumps({"stream": self.stream_name, "text": text}) + "\n").encode())
            except OSError:
                self.connection = None  # the `exec` gave up waiting (its --timeout): the code runs on
        return len(text)


def kernel(vm: Path) -> int:
    """The session's one interpreter: runs each `exec`'s code in the same namespace, one at a time."""
    server = socket.create_server(("127.0.0.1", 0))
    port_file = vm / "kernel.port"
    port_file.with_suffix(".tmp").write_text(str(server.getsockname()[1]))
    port_file.with_suffix(".tmp").replace(port_file)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    out, err = Stream("stdout"), Stream("stderr")
    sys.stdout, sys.stderr = out, err
    while True:
        connection, _ = server.accept()
        with connection:
            request = json.loads(connection.makefile("r", encoding="utf-8").readline())
            out.connection = err.connection = connection
            os.chdir(vm / "content")  # the client's first statement in every exec: os.chdir('/content')
            try:
                exec(compile(request["code"], "<cell>", "exec"), namespace)
            except SystemExit as stopped:  # IPython shows it and the kernel goes on
                err.write(f"An exception has occurred, use %tb to see the full traceback.\n\nSystemExit: {stopped}\n")
            except BaseException:  # a cell's error: shown, and the kernel goes on
                err.write(traceback.format_exc())
            finally:
                with contextlib.suppress(OSError):
                    if out.connection is not None:
                        connection.sendall(b'{"done": true}\n')
                out.connection = err.connection = None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
