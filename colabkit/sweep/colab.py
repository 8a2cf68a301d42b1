"""Sweeps on Colab runtimes: `python -m colabkit sweep GRID... --colab T4,v5e1` (docs/colab.md).

Per accelerator A asked, the sweep of A's device kind (gpu or tpu) is an ordinary sweep into
OUT/colab-A/ (its lock, its decisions, its resumption), run by a ColabExecutor: one Colab session
(`colab new --gpu A`), the wheel of this checkout built here (with its commit), the grid files and
the records finished earlier uploaded, and `python -m colabkit sweep` started there in the
background over A's combinations, with COLABKIT_ACCELERATOR_ASKED=A. The executor then polls it
(a short `colab exec`), bringing the records, notebooks and logs so far back into OUT/colab-A/ each
time, so a lost session loses only what had not come back; the runtimes run side by side, one
thread each. Every session is stopped when its work ends, fails or is interrupted; a crash of this
process leaves OUT/colab-A/.colab-session.json, and the next run of the sweep brings back what that
session finished and stops it. A session Colab refuses fails that accelerator's combinations only.
"""

from __future__ import annotations

import argparse
import json
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from colabkit.device.spec import DeviceRequest
from colabkit.errors import ColabkitError, SweepInterrupted
from colabkit.records.provenance import git_commit
from colabkit.records.run_error import RunError
from colabkit.records.schema import ErrorKind
from colabkit.sweep.colab_client import (ACCELERATORS, ColabClient, ColabClientError, accelerators, build_wheel, forget,
                                         inner_args, orphan, pack_kept, remember)
from colabkit.sweep.combination import Combination
from colabkit.sweep.devices import Inventory
from colabkit.sweep.execution import Outcome, RunFiles, fail_without_crashing
from colabkit.sweep.executors import Executor, Started
from colabkit.sweep.options import SweepOptions
from colabkit.sweep.plan import Decision

REMOTE = "content/colabkit"  # the client's paths start at the VM's file root; `colab exec` runs in /content
POLL_MARK = "COLABKIT-POLL "
# Started in the session by `colab exec`: installs the wheel, restores the records finished earlier and
# starts the sweep in the background (a `colab exec` is bounded by its --timeout; the sweep is not).
START = """import os, subprocess, sys, tarfile
os.chdir("colabkit")
subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", {wheel!r}], check=True)
if os.path.exists("kept.tar"):
    with tarfile.open("kept.tar") as kept:
        kept.extractall("out", filter="data")
env = dict(os.environ, COLABKIT_ACCELERATOR_ASKED={accelerator!r})
command = [sys.executable, "-m", "colabkit", "sweep", *{args!r}, "--out", "../out", "--no-progress"]
with open("sweep.log", "w") as log:
    subprocess.Popen(["sh", "-c", '"$@"; echo $? > ../sweep.exit', "sweep", *command], cwd="suite", env=env,
                     stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
print("COLABKIT-STARTED")
"""
# Each poll: the records' statuses so far, whether the sweep ended, and everything under out/ in results.tar.
POLL = """import json, os, tarfile
os.chdir("colabkit")
counts = {}
for folder, _, names in os.walk("out"):
    for name in names:
        if name.endswith(".json") and not name.startswith("."):
            try:
                status = json.load(open(os.path.join(folder, name))).get("status", "?")
            except ValueError:
                status = "unreadable"
            counts[status] = counts.get(status, 0) + 1
with tarfile.open("results.tar", "w") as results:
    if os.path.isdir("out"):
        results.add("out", arcname="out", filter=lambda info: None if os.path.basename(info.name).startswith(".") else info)
    if os.path.exists("sweep.log"):
        results.add("sweep.log", arcname="out/colab-sweep.log")
done = os.path.exists("sweep.exit")
lines = open("sweep.log").read().splitlines() if os.path.exists("sweep.log") else []
print(""" + repr(POLL_MARK) + """ + json.dumps({"done": done, "exit": open("sweep.exit").read().strip() if done else None,
                                            "counts": counts, "last": lines[-1] if lines else ""}))
"""


@dataclass
class ColabJob:
    """What every session of a sweep gets, and how the sweep talks to them."""

    wheel: Path
    grids: list[Path]
    client: ColabClient = field(default_factory=ColabClient)
    stop: threading.Event = field(default_factory=threading.Event)  # set on Ctrl-C: every executor stops
    echo: Callable[[str], None] = print
    timeout_s: float | None = None  # --colab-timeout: a session's wall-clock limit
    poll_s: float = 30.0


@dataclass(frozen=True)
class ColabInventory(Inventory):
    """One accelerator of the kind the session asks for; its memory is the runtime's to check."""

    accelerator: str = ""

    def absent_reason(self, combination: Combination) -> str:
        return f"device '{combination.device}' is not on a Colab {self.accelerator} runtime"

    def memory(self, request: DeviceRequest) -> Any:
        return None


class ColabExecutor(Executor):
    """Runs one accelerator's decisions in one Colab session (module docstring)."""

    def __init__(self, out: Path, options: SweepOptions, accelerator: str, job: ColabJob) -> None:
        super().__init__(out, options)
        self.accelerator, self.job = accelerator, job
        self.args: list[str] = []  # the session's `sweep` arguments (inner_args)
        self.session = f"colabkit-{accelerator.lower()}-{uuid.uuid4().hex[:6]}"

    def find_devices(self) -> Inventory:
        return ColabInventory({ACCELERATORS[self.accelerator][0]: 1}, accelerator=self.accelerator)

    @property
    def where(self) -> str:
        return f" on Colab {self.accelerator} (session {self.session})"

    def say(self, line: str) -> None:
        self.job.echo(f"[{self.accelerator}] {line}")

    def run(self, decisions: Sequence[Decision], started: Started | None = None) -> Iterator[Outcome]:
        if not decisions:
            return
        reason, asked = "", False
        try:
            remember(self.out, self.session, self.accelerator)
            asked = True
            try:
                self.job.client.new(self.session, self.accelerator)
            except ColabClientError as exc:
                reason = f"Colab gave no {self.accelerator} session: {exc}"
            if not reason:
                self.say(f"session {self.session} ready: uploading {self.job.wheel.name} and the grid files")
                reason = self._start(decisions) or self._follow(len(decisions))
        except ColabClientError as exc:
            reason = f"the Colab session {self.session} failed: {exc}"
        finally:
            if asked:
                self._end()
        yield from (self._outcome(decision, reason) for decision in decisions)

    def _start(self, decisions: Sequence[Decision]) -> str:
        client, session = self.job.client, self.session
        with tempfile.TemporaryDirectory() as scratch:  # Jupyter's contents API makes no folders: make them first
            folders = Path(scratch) / "folders.py"
            folders.write_text('import os\nos.makedirs("colabkit/suite/parameters", exist_ok=True)\n', encoding="utf-8")
            client.run(["exec", "-f", str(folders), "--timeout", "120"], session, timeout=300)
        client.run(["upload", str(self.job.wheel), f"{REMOTE}/{self.job.wheel.name}"], session, timeout=1800)
        for grid in self.job.grids:
            client.run(["upload", str(grid), f"{REMOTE}/suite/parameters/{grid.name}"], session, timeout=600)
        with tempfile.TemporaryDirectory() as scratch:
            kept = Path(scratch) / "kept.tar"
            if pack_kept(self.out, kept):
                client.run(["upload", str(kept), f"{REMOTE}/kept.tar"], session, timeout=1800)
            script = Path(scratch) / "start.py"
            script.write_text(START.format(wheel=self.job.wheel.name, accelerator=self.accelerator,
                                           args=self.args), encoding="utf-8")
            output = client.run(["exec", "-f", str(script), "--timeout", "1800"], session, timeout=1900)
        if "COLABKIT-STARTED" not in output:
            return f"the sweep did not start in session {self.session}: {_tail(output)}"
        self.say(f"started {len(decisions)} run(s)")
        return ""

    def _follow(self, total: int) -> str:
        """Poll until the session's sweep ends ('' then), its time runs out, it is lost, or Ctrl-C."""
        start, failures, last = time.monotonic(), 0, None
        while True:
            if self.job.stop.wait(self.job.poll_s):
                raise KeyboardInterrupt
            try:
                state = self._poll()
                failures = 0
            except ColabClientError as exc:
                failures += 1
                if failures >= 3 or "lost" in str(exc) or "not found" in str(exc):
                    return f"the Colab session {self.session} was lost: {exc} (run the sweep again to resume)"
                self.say(f"poll failed ({exc}); trying again")
                continue
            counts = ", ".join(f"{n} {status}" for status, n in sorted(state["counts"].items())) or "no records yet"
            if (counts, state["done"]) != last:
                self.say(f"{counts} of {total} ({time.monotonic() - start:.0f} s) {state['last'][:80]}")
                last = (counts, state["done"])
            if state["done"]:
                return ""
            if self.job.timeout_s is not None and time.monotonic() - start > self.job.timeout_s:
                return f"the Colab session's time limit (--colab-timeout {self.job.timeout_s:g} s) ran out"

    def _poll(self, session: str | None = None) -> dict[str, Any]:
        """One poll of `session` (this executor's): its state, its results brought back into out."""
        session = session or self.session
        with tempfile.TemporaryDirectory() as scratch:
            script = Path(scratch) / "poll.py"
            script.write_text(POLL, encoding="utf-8")
            output = self.job.client.run(["exec", "-f", str(script), "--timeout", "600"], session, timeout=700)
            lines = [line for line in output.splitlines() if line.startswith(POLL_MARK)]
            if not lines:
                raise ColabClientError(f"no answer from the poll: {_tail(output)}")
            state = json.loads(lines[-1][len(POLL_MARK):])
            results = Path(scratch) / "results.tar"
            try:
                self.job.client.run(["download", f"{REMOTE}/results.tar", str(results)], session, timeout=1800)
            except ColabClientError as exc:
                if state["done"]:
                    raise
                self.say(f"results not brought back this time ({exc}); the next poll tries again")
                return state
            with tarfile.open(results) as archive:  # out/... (running marks left out): into OUT/colab-A/
                for member in archive.getmembers():
                    member.name = member.name.removeprefix("out").lstrip("/")
                archive.extractall(self.out, [m for m in archive.getmembers() if m.name], filter="data")
        return state

    def _end(self) -> None:
        """Stop the session (whatever happened); its state file goes once Colab says it stopped."""
        try:
            self.job.client.stop(self.session)
            forget(self.out)
            self.say(f"session {self.session} stopped")
        except ColabClientError as exc:
            self.say(f"could not stop session {self.session} ({exc}): stop it with `colab stop -s {self.session}`; "
                     "the next run of this sweep tries again")

    def _outcome(self, decision: Decision, reason: str) -> Outcome:
        combination = decision.combination
        files = RunFiles.of(combination, self.out)
        try:
            record = json.loads(files.record.read_text(encoding="utf-8"))
            error = record.get("error") or {}
            seconds = (datetime.fromisoformat(record["finished_at"]) - datetime.fromisoformat(record["started_at"]))
            return Outcome(combination, record["status"], seconds.total_seconds(), files.record,
                           str(error.get("message", "")) if isinstance(error, dict) else "")
        except (OSError, ValueError, KeyError, TypeError):
            pass
        why = reason or f"its record did not come back from Colab session {self.session}"
        return fail_without_crashing(combination, files, decision.fingerprint,
                                     RunError("ColabSession", ErrorKind.COLAB, why),
                                     sweep_section={"colab": self.accelerator, "session": self.session})

    def salvage(self, session: str) -> None:
        """What an orphaned `session` finished, brought back (if it answers); then it is stopped."""
        try:
            state = self._poll(session)
            self.say(f"brought back {sum(state['counts'].values())} record(s) from session {session}")
        except ColabClientError as exc:
            self.say(f"nothing came back from session {session} ({exc})")
        self.session = session
        self._end()


def _tail(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


# --- the sweep: every accelerator side by side ---------------------------------------------------------



POLL_ENV = "COLABKIT_COLAB_POLL_S"  # seconds between polls (default 30; the tests' fake client polls faster)


def colab_sweep(args: argparse.Namespace, out: Path, options: SweepOptions) -> int:
    """`sweep ... --colab A,B`: every accelerator's sweep in its session, side by side; the exit status."""
    import os
    import signal

    from colabkit.sweep.console import dry_run_table, summary_table
    from colabkit.sweep.estimate import accelerator_rate, estimate_plan
    from colabkit.sweep.overrides import parse_overrides
    from colabkit.sweep.plan import SweepAction, plan
    from colabkit.sweep.runner import prepare, run_sweep

    names = accelerators(args.colab)
    if args.device or options.cluster or options.jobs != 1:
        raise ColabkitError("--colab runs each accelerator's combinations in its own session, one at a time: "
                            "drop --device, --cluster and --jobs")
    plans = {name: plan(args.grids, args.preset, ACCELERATORS[name][0], parse_overrides(args.param),
                        out / f"colab-{name}", args.repeats, kernels=args.kernels, html=args.html) for name in names}
    lock = threading.Lock()

    def echo(line: str) -> None:
        with lock:
            print(line, flush=True)

    job = ColabJob(Path(), [Path(grid) for grid in args.grids], echo=echo, timeout_s=args.colab_timeout,
                   poll_s=float(os.environ.get(POLL_ENV, 30)))
    executors = {name: ColabExecutor(plans[name].out, options, name, job) for name in names}
    if args.dry_run:
        for name, executor in executors.items():
            decisions = prepare(plans[name], options, executor=executor)
            to_run = [d.combination for d in decisions if d.action in (SweepAction.RUN, SweepAction.RERUN)]
            kind, model = ACCELERATORS[name]
            lines = [f"Colab session {executor.session}: {name} ({kind}), {len(to_run)} run(s)",
                     *estimate_plan(to_run, {kind: accelerator_rate(kind, "float32", model)}).lines(),
                     "  plus the session's start, the install of colabkit's wheel and its dependencies, and the "
                     "downloads (minutes per session, not in the estimate); Colab bills compute units for every "
                     "hour a session is held, at its accelerator's rate (docs/colab.md)"]
            print(dry_run_table(decisions, plans[name].out, lines))
        return 0
    job.client.check()
    previous = signal.signal(signal.SIGTERM, _interrupt)
    results: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory() as scratch:
            job.wheel = build_wheel(Path(scratch))
            echo(f"colabkit's wheel {job.wheel.name} built from commit {git_commit() or 'unknown'}")
            for name, executor in executors.items():
                left = orphan(executor.out)
                if left:
                    new_name = executor.session
                    executor.say(f"session {left['session']} of an earlier sweep (process {left['pid']}) is still "
                                 "held: bringing back what it finished, then stopping it")
                    executor.salvage(left["session"])
                    executor.session = new_name
            _side_by_side(plans, executors, inner=lambda name: inner_args(args, ACCELERATORS[name][0]),
                          run=lambda name: run_sweep(plans[name], options, executor=executors[name],
                                                     echo=executors[name].say), results=results, job=job)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return _summary(names, results, summary_table, out)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _side_by_side(plans: dict[str, Any], executors: dict[str, ColabExecutor], inner: Callable[[str], list[str]],
                  run: Callable[[str], list[Outcome]], results: dict[str, Any], job: ColabJob) -> None:
    """Each accelerator's sweep in a thread; Ctrl-C (here, in the main thread) stops them all."""

    def one(name: str) -> None:
        executors[name].args = inner(name)
        try:
            results[name] = run(name)
        except (SweepInterrupted, ColabkitError) as stopped:
            results[name] = stopped

    threads = [threading.Thread(target=one, args=(name,), daemon=True) for name in plans]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.5)
    except KeyboardInterrupt:
        job.stop.set()
        job.echo("interrupted: stopping every Colab session (finished combinations are kept)")
        for thread in threads:
            thread.join()


def _summary(names: list[str], results: dict[str, Any], summary_table: Callable[[list[Outcome]], str],
             out: Path) -> int:
    """Each accelerator's table, what its runtimes really had where a record says, and the exit status."""
    status = 0
    for name in names:
        result = results.get(name)
        print(f"\n== Colab {name}")
        if isinstance(result, list):
            print(summary_table(result))
            for outcome in result:
                if outcome.status == "failed":
                    print(f"failed: {outcome.combination.label}: {outcome.message}")
            found = _found(result)
            if found - {name}:
                print(f"[{name}] asked for {name}; the runtime reported {', '.join(sorted(found))} "
                      "(each record's accelerator_found)")
            status = max(status, 1 if any(outcome.status == "failed" for outcome in result) else 0)
        else:
            print(f"[{name}] {result}")
            status = 130 if isinstance(result, SweepInterrupted) else max(status, 1)
    print(f"\noutputs: {out}")
    return status


def _found(outcomes: list[Outcome]) -> set[str]:
    """The accelerators the records say their runtimes had (`accelerator_found`, where present)."""
    found = set()
    for outcome in outcomes:
        try:
            record = json.loads(outcome.record_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        value = record.get("accelerator_found") or (record.get("device") or {}).get("accelerator_found")
        if value:
            found.add(str(value))
    return found
