"""A fake `colab` (google-colab-cli v0.6.0) for the tests of `sweep --colab`: the commands colabkit
uses, with the client's output lines and exit statuses (its src/colab_cli/commands/*.py), and a "VM"
per session: a folder under $FAKE_COLAB_HOME/vms/NAME whose content/ is /content. `exec -f FILE`
runs FILE there with this Python, on this machine's CPU, with COLABKIT_TEST_STAND_IN (test only,
colabkit.device.probes) naming the accelerator asked, so the records say the device the fake reports;
pip only pretends to install (PIP_DRY_RUN): the code that runs is this checkout's.

Failures, set by environment variables: FAKE_COLAB_LOGGED_OUT (whoami fails), FAKE_COLAB_REFUSE=A,B
(`new` refuses those accelerators as the client does on a 400), FAKE_COLAB_LOSE=A:N (the Nth `exec`
in a session of accelerator A finds the session lost), FAKE_COLAB_DOWNLOAD_DELAY=S (every download
takes S seconds), FAKE_COLAB_DOWNLOAD_FAILS=N (the first N downloads exit 1). Every call is appended
to $FAKE_COLAB_HOME/calls.log.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HOME = Path(os.environ["FAKE_COLAB_HOME"])
SESSIONS = HOME / "sessions.json"
DEVICES = {"T4": ("gpu", "Tesla T4"), "L4": ("gpu", "NVIDIA L4"), "A100": ("gpu", "NVIDIA A100-SXM4-40GB"),
           "H100": ("gpu", "NVIDIA H100 80GB HBM3"), "G4": ("gpu", "NVIDIA RTX PRO 6000"),
           "v5e1": ("tpu", "TPU v5 lite"), "v6e1": ("tpu", "TPU v6 lite")}


def sessions() -> dict:
    return json.loads(SESSIONS.read_text()) if SESSIONS.exists() else {}


def save(state: dict) -> None:
    SESSIONS.write_text(json.dumps(state))


def option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def positional(args: list[str]) -> list[str]:
    rest, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-s", "--session", "-f", "--file", "--timeout", "--gpu", "--tpu"):
            skip = True
        else:
            rest.append(arg)
    return rest


def kill_vm(name: str) -> None:
    """What stopping a VM does to what runs on it: every process whose folder is in the VM ends."""
    vm = str((HOME / "vms" / name).resolve())
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/cwd").startswith(vm):
                os.kill(int(pid), signal.SIGKILL)
        except OSError:
            continue


def main(argv: list[str]) -> int:
    HOME.mkdir(parents=True, exist_ok=True)
    with open(HOME / "lock", "w") as lock:  # the client's state store is locked too (its StateStore)
        fcntl.flock(lock, fcntl.LOCK_EX)
        return command(argv, lock)


def command(argv: list[str], lock: object) -> int:
    with open(HOME / "calls.log", "a") as log:
        log.write(" ".join(argv) + "\n")
    verb, args = argv[0], argv[1:]
    if verb == "whoami":
        if os.environ.get("FAKE_COLAB_LOGGED_OUT"):
            print("[colab] whoami: failed to refresh credentials: EOF when reading a line", file=sys.stderr)
            return 1
        print("Auth provider: oauth2\nEmail:         tester@example.com")
        return 0
    name, state = option(args, "-s"), sessions()
    if verb == "new":
        accelerator = option(args, "--gpu") or option(args, "--tpu")
        print(f"[colab] Creating session '{name}'...")
        if accelerator in os.environ.get("FAKE_COLAB_REFUSE", "").split(","):
            print(f"[colab] Backend rejected accelerator '{accelerator.upper()}'. You may not have quota or "
                  "entitlement for this accelerator on your account.", file=sys.stderr)
            return 1
        (HOME / "vms" / name / "content").mkdir(parents=True)
        state[name] = {"accelerator": accelerator, "execs": 0}
        save(state)
        print("[colab] Session READY.")
        return 0
    if name not in state:
        print(f"[colab] Session '{name}' not found.")
        return 0 if verb == "stop" else 1
    vm = HOME / "vms" / name
    if verb == "stop":
        print(f"[colab] Stopping session '{name}'...")
        kill_vm(name)
        del state[name]
        save(state)
        print("[colab] Session terminated.")
        return 0
    if verb == "upload":
        local, remote = positional(args)
        if not (vm / remote).parent.is_dir():  # Jupyter's contents API makes no folders
            print(f"[colab] Upload failed: 404 Client Error: Not Found (No such directory: {Path(remote).parent})")
            return 1
        shutil.copy(local, vm / remote)
        print(f"[colab] Uploaded '{local}' to '{remote}'")
        return 0
    if verb == "download":
        remote, local = positional(args)
        fcntl.flock(lock, fcntl.LOCK_UN)
        time.sleep(float(os.environ.get("FAKE_COLAB_DOWNLOAD_DELAY", 0)))
        downloads = sum(line.startswith("download ") for line in (HOME / "calls.log").read_text().splitlines())
        if downloads <= int(os.environ.get("FAKE_COLAB_DOWNLOAD_FAILS", 0)) or not (vm / remote).exists():
            print("[colab] Download failed: 500 Server Error: Internal Server Error")
            return 1
        shutil.copy(vm / remote, local)
        print(f"[colab] Downloaded '{remote}' to '{local}'")
        return 0
    if verb == "exec":
        accelerator = state[name]["accelerator"]
        state[name]["execs"] += 1
        save(state)
        lose, _, nth = os.environ.get("FAKE_COLAB_LOSE", "").partition(":")
        if lose == accelerator and state[name]["execs"] >= int(nth):
            kill_vm(name)
            del state[name]
            save(state)
            print(f"[colab] Session '{name}' appears to be lost (404/401). Cleaning up.")
            return 1
        kind, device = DEVICES[accelerator]
        env = dict(os.environ, COLABKIT_TEST_STAND_IN=f"{kind}={device}", PIP_DRY_RUN="1", PIP_NO_DEPS="1",
                   PIP_NO_INDEX="1")
        fcntl.flock(lock, fcntl.LOCK_UN)  # other sessions' commands go on while this one runs
        completed = subprocess.run([sys.executable, os.path.abspath(option(args, "-f"))], cwd=vm / "content",
                                   env=env, timeout=float(option(args, "--timeout") or 30))
        return 0 if completed.returncode in (0, 1) else 1  # the client prints a cell's error and exits 0
    print(f"fake colab: {verb} is not faked", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
