"""The scripts a `sweep --colab` session runs with `colab exec`.

The client runs them in the session's one IPython kernel (google-colab-cli v0.6.0, runtime.py): variables,
the working folder and background processes persist between calls, `__file__` is not defined, each call
first goes to /content, and an error in the code still exits 0. So each script is a function of its own
(nothing left in the kernel's namespace), starts from /content, and prints a mark when it got through.
"""

from __future__ import annotations

# The marks the scripts print when they got through (an error in them still exits 0).
ALIVE, INSTALLED, STARTED, DRAINED, POLLED = ("COLABKIT-ALIVE", "COLABKIT-INSTALLED", "COLABKIT-STARTED",
                                              "COLABKIT-DRAINED", "COLABKIT-POLL ")
# The first `exec` of a session: the client can run code there (a broken client fails here, before any
# upload), and the folders the uploads and the sweeps need (Jupyter's contents API makes none).
PROBE = f"""import os, sys
os.makedirs("colabkit/suite", exist_ok=True)
print({ALIVE!r}, sys.version.split()[0])
"""
# Once per session: the wheel installed.
SETUP = """def _colabkit_setup():
    import os, subprocess, sys
    os.chdir("colabkit")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", {wheel!r}], capture_output=True,
                          text=True)
    if done.returncode != 0:
        print("COLABKIT-INSTALL-FAILED", ((done.stderr or done.stdout).strip().splitlines() or ["no output"])[-1])
        return
    print({mark!r})
_colabkit_setup()
"""
# Waits for the session's sweep (started by START) in a process of its own: its process id, then its exit status.
WAITER = ("import os, subprocess, sys\n"
          "sweep = subprocess.Popen(sys.argv[1:])\n"
          "open('../sweep.pid.tmp', 'w').write(str(sweep.pid)); os.replace('../sweep.pid.tmp', '../sweep.pid')\n"
          "status = sweep.wait()\n"
          "open('../sweep.exit.tmp', 'w').write(str(status)); os.replace('../sweep.exit.tmp', '../sweep.exit')\n")
# Per sweep of the session: `python -m colabkit sweep --plan` over the runs of plan.json, as its options say (both
# planned on the user's machine), in the background (an `exec` waits at most its --timeout; the sweep takes what it
# takes). The command line is the same for every sweep: where it writes, and no progress bar in its log.
START = """def _colabkit_start():
    import os, subprocess, sys, time
    os.chdir("colabkit")
    for stale in ("sweep.exit", "sweep.pid"):
        if os.path.exists(stale):
            os.remove(stale)
    env = dict(os.environ, COLABKIT_ACCELERATOR_ASKED={accelerator!r})
    command = [sys.executable, "-m", "colabkit", "sweep", "--plan", "../plan.json", "--out", "../out",
               "--no-progress"]
    with open("sweep.log", "a") as log:
        subprocess.Popen([sys.executable, "-c", {waiter!r}, *command], cwd="suite", env=env, stdout=log,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 60
    while not os.path.exists("sweep.pid") and time.time() < deadline:
        time.sleep(0.2)
    print({mark!r} if os.path.exists("sweep.pid") else "COLABKIT-NOT-STARTED")
_colabkit_start()
"""
# Each poll: whether the sweep ended (asked first, so the archive then holds all it wrote), and everything
# under out/ (less the running marks) with the session's log, in results.tar.
POLL = """def _colabkit_poll():
    import json, os, tarfile
    os.chdir("colabkit")
    done = os.path.exists("sweep.exit")
    status = open("sweep.exit").read().strip() if done else None
    with tarfile.open("results.tar", "w") as results:
        if os.path.isdir("out"):
            results.add("out", arcname="out",
                        filter=lambda info: None if os.path.basename(info.name).startswith(".") else info)
        if os.path.exists("sweep.log"):
            results.add("sweep.log", arcname={log!r})
    lines = open("sweep.log").read().splitlines() if os.path.exists("sweep.log") else []
    print({mark!r} + json.dumps({{"done": done, "exit": status, "last": lines[-1] if lines else ""}}))
_colabkit_poll()
"""
# At the session's limit: the sweep stopped as Ctrl-C would (what finished is kept, the run under way
# leaves no half result), waiting up to `wait` seconds for it to end.
DRAIN = """def _colabkit_drain():
    import os, signal, time
    os.chdir("colabkit")
    if os.path.exists("sweep.pid") and not os.path.exists("sweep.exit"):
        try:
            os.kill(int(open("sweep.pid").read()), signal.SIGTERM)
        except (OSError, ValueError):
            pass
    deadline = time.time() + {wait}
    while os.path.exists("sweep.pid") and not os.path.exists("sweep.exit") and time.time() < deadline:
        time.sleep(0.5)
    print({mark!r}, os.path.exists("sweep.exit"))
_colabkit_drain()
"""


def probe_script() -> str:
    return PROBE


def setup_script(wheel: str) -> str:
    return SETUP.format(wheel=wheel, mark=INSTALLED)


def start_script(accelerator: str) -> str:
    return START.format(accelerator=accelerator, waiter=WAITER, mark=STARTED)


def poll_script(session: str) -> str:
    return POLL.format(log=f"out/colab-sweep-{session}.log", mark=POLLED)


def drain_script(wait_s: float) -> str:
    return DRAIN.format(wait=float(wait_s), mark=DRAINED)
