"""Sweeps on Colab runtimes: `python -m colabkit sweep GRID... --colab T4,v5e1` (docs/colab.md).

Per accelerator A asked, A's share of the plan (its device kind's runs, gpu or tpu:
colabkit.sweep.runners.colab.command) is an ordinary sweep into OUT/colab-A/ (its lock, its decisions, its
resumption), run by the `colab` runner, a ColabExecutor, in Colab sessions one after another (`colab new --gpu
A`; colabkit.sweep.runners.colab.sessions says what each gets and runs). Each session's sweep is given its runs
with the plan's options (its timeout, kernels, --kernel-runs, --wait-quiet: the runner's own aside), as JSON. The
client's runtime token expires after an hour and is never renewed (google-colab-cli issue #106), so no
session outlives `--colab-session-limit` (default 3000 s): each session's runs are cut by the dry-run
estimate to fit what is left of it, and a session that reaches its limit all the same is drained (its
sweep stopped as Ctrl-C would, what finished brought back), stopped, and a fresh session runs the rest.
While a session's sweep runs, a poll (a short `colab exec`) brings the records, notebooks and logs so far
back into OUT/colab-A/, so a lost session loses only what had not come back.

A session counts as stopped only when `colab stop` said "Session terminated." or `colab sessions` no
longer lists its endpoint; otherwise the console and the failed records say that the runtime may still be
running, and how to end it, and its entry stays in OUT/colab-A/.colab-session.json for the next run of
the sweep to try again. Ctrl-C and SIGTERM are this process's alone (every `colab` command runs in a
process session of its own): a `colab new` under way finishes, what finished is brought back, then every
session is stopped. The first session proves the client can run code before anything is uploaded and
before any other session starts: a client that cannot (jupyter-kernel-client 1.x) costs one session start.
"""

from __future__ import annotations

import dataclasses
import json
import tarfile
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colabkit.device.spec import DeviceRequest
from colabkit.errors import ColabClientBroken, ColabClientError, ColabResultsNotBack, HostileArchiveError
from colabkit.records.run_error import RunError
from colabkit.records.schema import ErrorKind
from colabkit.sweep.decide import Decision
from colabkit.sweep.devices import Inventory
from colabkit.sweep.estimate import Speeds, accelerator_speed, estimate_plan
from colabkit.sweep.expand import Combination
from colabkit.sweep.options import RunOptions
from colabkit.sweep.plan import SweepPlan
from colabkit.sweep.runners.base import Executor, Started
from colabkit.sweep.runners.colab.client import ACCELERATORS, CLIENT
from colabkit.sweep.runners.colab.scripts import (
    ALIVE,
    DRAINED,
    INSTALLED,
    POLLED,
    STARTED,
    drain_script,
    poll_script,
    probe_script,
    setup_script,
    start_script,
)
from colabkit.sweep.runners.colab.sessions import (
    PLAN_FILE,
    REMOTE,
    SESSION_LIMIT_S,
    TOKEN_LIFE_S,
    Ending,
    HeldSession,
    LiveSession,
    came_back,
    colab_job,
    fitting,
    forget,
    held_sessions,
    left_running,
    record_seconds,
    record_status,
    remember,
    stamp,
    tail,
    unpack_results,
)
from colabkit.sweep.runners.execute import Outcome, RunFiles, fail_without_crashing

DRAIN_WAIT_S = 120.0  # how long a drained session's sweep may take to stop


def session_limit(options: RunOptions) -> float:
    """The longest one session runs (--colab-session-limit, else SESSION_LIMIT_S)."""
    return SESSION_LIMIT_S if options.colab_session_limit_s is None else options.colab_session_limit_s


def accelerator_speeds(accelerator: str) -> Speeds:
    """The FLOP/s an estimate takes for `accelerator`'s device kind (its peak, colabkit.sweep.estimate)."""
    kind, model = ACCELERATORS[accelerator]
    return {kind: accelerator_speed(kind, "float32", model)}


@dataclass(frozen=True)
class ColabInventory(Inventory):
    """One accelerator of the kind the session asks for; its memory is the runtime's to check."""

    accelerator: str = ""

    def absent_reason(self, combination: Combination) -> str:
        return f"device '{combination.device}' is not on a Colab {self.accelerator} runtime"

    def memory(self, request: DeviceRequest) -> Any:
        return None


class ColabExecutor(Executor):
    """Runs one accelerator's decisions in Colab sessions, one after another (module docstring)."""

    def __init__(self, out: Path, options: RunOptions) -> None:
        super().__init__(out, options)
        [self.accelerator] = options.colab  # one accelerator's share
        self.job = colab_job()
        self.limit_s, self.timeout_s = session_limit(options), options.colab_timeout_s
        self.speeds = accelerator_speeds(self.accelerator)
        # What each session's sweep is given: the plan's options, less this runner's own and the rounds (run here)
        self.session_options = dataclasses.replace(options, colab=(), colab_timeout_s=None, colab_session_limit_s=None,
                                                   repetition=None)
        self.live: LiveSession | None = None
        self.spent_s = 0.0  # the sessions ended so far, in all (--colab-timeout)
        self.results_lost = 0  # sessions stopped because their results could not be downloaded
        self.session_name: str | None = None  # the latest session's (what a failed record names)
        self.left_running = self.job.left_running.setdefault(self.accelerator, [])  # the summary repeats them

    def find_devices(self) -> Inventory:
        return ColabInventory({ACCELERATORS[self.accelerator][0]: 1}, accelerator=self.accelerator)

    @property
    def where(self) -> str:
        return f" on Colab {self.accelerator} (sessions of at most {self.limit_s:g} s)"

    def say(self, line: str) -> None:
        self.job.said_by(self.accelerator)(line)

    def close(self) -> None:
        """Whatever happened: the session held now is stopped."""
        self._end_session()

    def run(self, decisions: Sequence[Decision], started: Started | None = None) -> Iterator[Outcome]:
        remaining = list(decisions)
        while remaining:
            if self.live is None:
                why = self._open()
                if why:
                    yield from (self._failed(decision, why) for decision in remaining)
                    return
            if self.job.stop.is_set():
                raise KeyboardInterrupt  # close() stops the session
            if self._out_of_time():
                why = f"{self._out_of_time()}{self._end_session()}"
                yield from (self._failed(decision, why) for decision in remaining)
                return
            count = self._fitting(remaining)
            if not count:  # too little of this session is left for the next run: a fresh session takes it
                left = self._end_session()
                if left:
                    yield from (self._failed(decision, left.removeprefix("; ")) for decision in remaining)
                    return
                continue
            chunk = remaining[:count]
            stamps = {RunFiles.of(d.combination, self.out).record: stamp(d, self.out) for d in chunk}
            fresh = self.live is not None and not self.live.sweeps
            ending, why = self._sweep(chunk, stamps)
            if ending in (Ending.DRAINED, Ending.OUT_OF_TIME):
                hostile, left = self._drain()
                if hostile or left:  # a session maybe left running: this accelerator goes no further
                    ending, why = Ending.FAILED, (hostile or why or "the session was drained") + left
            elif ending is Ending.RESULTS_LOST:  # stopped first, with proof; a second time, this accelerator stops
                self.results_lost += 1
                left = self._end_session()
                if left or self.results_lost > 1:
                    ending, why = Ending.FAILED, why + (left or "; the second session whose results could not be "
                                                                 "downloaded: no further session was started")
            elif ending is Ending.FAILED:
                why += self._end_session()
            back = [d for d in chunk if came_back(d, self.out, stamps)]
            for decision in back:
                remaining.remove(decision)
                yield self._outcome(decision)
            rest = [d for d in chunk if d not in back]
            if ending is Ending.INTERRUPTED:
                raise KeyboardInterrupt  # close() stops the session
            if ending in (Ending.FAILED, Ending.OUT_OF_TIME):
                yield from (self._failed(decision, why) for decision in remaining)
                return
            if ending is Ending.DONE:
                for decision in rest:
                    remaining.remove(decision)
                    yield self._failed(decision, why)
            elif ending is Ending.DRAINED and rest and rest[0] is chunk[0] and fresh:  # at its limit before any run:
                # the limit holds no run (each session more would cost as much for nothing): this accelerator stops
                said = (f"a fresh Colab session of --colab-session-limit {self.limit_s:g} s ended before "
                        f"its first run ({chunk[0].combination.label}) finished: raise the limit (to at most "
                        f"{TOKEN_LIFE_S - 300:g} s with {CLIENT}) or make the runs smaller; no further session was "
                        "started for this accelerator")
                self.say(said)
                yield from (self._failed(decision, said) for decision in remaining)
                return

    def _out_of_time(self) -> str:
        """Why the sessions may run no more (--colab-timeout spent), or ''."""
        timeout, live = self.timeout_s, self.live
        if timeout is None or self.spent_s + (live.elapsed() if live else 0.0) < timeout:
            return ""
        return f"the Colab sessions' time limit (--colab-timeout {timeout:g} s) ran out"

    # --- a session's life ----------------------------------------------------------------------------

    def _open(self) -> str:
        """A fresh session, proven and set up, in self.live: '' or why there is none. Until a session has
        proved that the client runs code, sessions start one at a time (a broken client costs one)."""
        with self.job.trial:
            if self.job.broken:
                raise ColabClientBroken(self.job.broken)
            if self.job.stop.is_set():  # Ctrl-C while another session was being proved: no new one
                raise KeyboardInterrupt
            if not self.job.proven:
                return self._start_session()
        return self._start_session()

    def _start_session(self) -> str:
        client, name = self.job.client, f"colabkit-{self.accelerator.lower()}-{uuid.uuid4().hex[:6]}"
        remember(self.out, HeldSession(name, self.accelerator))  # before `colab new`: a crash leaves its name
        self.session_name = name
        live = LiveSession(name, None)
        try:
            client.new(name, self.accelerator)
        except ColabClientError as exc:
            return self._refused(live, exc)
        self.live = live
        try:
            live.endpoint = client.endpoint(name)
            remember(self.out, HeldSession(name, self.accelerator, live.endpoint))
            if self.job.stop.is_set():  # Ctrl-C while `colab new` ran: it finished; close() stops the session
                raise KeyboardInterrupt
            self.say(f"session {name} ready (runtime {live.endpoint}): trying it, then uploading {self.job.wheel.name} "
                     "and the grid files")
            output = self._exec(probe_script(), 300, "probe.py", cancel=False)
            if ALIVE not in output:
                raise ColabClientError(f"it ran no Python: {tail(output)}")
            self.job.proven = True
            self._set_up()
        except ColabClientBroken as broken:
            self.job.broken = str(broken)
            self._end_session()
            raise
        except ColabClientError as exc:
            return f"the Colab session {name} could not be set up: {exc}{self._end_session()}"
        live.setup_s = live.elapsed()
        self.say(f"session {name}: colabkit installed {live.setup_s:.0f} s after `colab new`")
        return ""

    def _refused(self, live: LiveSession, exc: ColabClientError) -> str:
        """After a `colab new` that failed: a session the client named anyway is stopped; none was made otherwise."""
        try:
            live.endpoint = self.job.client.endpoint(live.name)
        except ColabClientError:
            live.endpoint = None
        if live.endpoint is None:
            forget(self.out, live.name)
            return f"Colab gave no {self.accelerator} session: {exc}"
        self.live = live
        return f"Colab gave no working {self.accelerator} session: {exc}{self._end_session()}"

    def _set_up(self) -> None:
        client, name, cancel = self.job.client, self.live.name if self.live else "", self.job.stop
        client.run(["upload", str(self.job.wheel), f"{REMOTE}/{self.job.wheel.name}"], name, 1800, cancel)
        output = self._exec(setup_script(self.job.wheel.name), 1800, "setup.py")
        if INSTALLED not in output:
            raise ColabClientError(f"pip could not install colabkit's wheel there: {tail(output)}")

    def _exec(self, script: str, timeout_s: float, label: str, cancel: bool = True) -> str:
        """`colab exec` of `script` (a file named `label`) in the session held; its output. With `cancel`,
        Ctrl-C cuts it short (KeyboardInterrupt)."""
        name = self.live.name if self.live else ""
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / label
            path.write_text(script, encoding="utf-8")
            return self.job.client.run(["exec", "-f", str(path), "--timeout", f"{timeout_s:g}"], name,
                                       timeout_s + 120, self.job.stop if cancel else None)

    def _fitting(self, remaining: Sequence[Decision]) -> int:
        """How many of `remaining` the session held can run by the dry-run estimate in the time it has left:
        at least one in a fresh session, maybe none in one that ran some already."""
        live = self.live
        assert live is not None
        left = self.limit_s - live.elapsed()
        if self.timeout_s is not None:
            left = min(left, self.timeout_s - self.spent_s - live.elapsed())
        seconds = estimate_plan([d.combination for d in remaining], self.speeds).run_seconds
        return fitting(seconds, left, at_least_one=not live.sweeps)

    def _sweep(self, chunk: Sequence[Decision], stamps: dict[str, Any]) -> tuple[Ending, str]:
        """Start the session's sweep over `chunk` and follow it until it ends, the session's time runs out,
        it is lost, or Ctrl-C."""
        live = self.live
        assert live is not None
        with tempfile.TemporaryDirectory() as scratch:
            share = Path(scratch) / PLAN_FILE  # this sweep's runs and options, as planned here: it plans nothing
            share.write_text(SweepPlan([d.combination for d in chunk], self.out, self.session_options).to_json(),
                             encoding="utf-8")
            try:
                self.job.client.run(["upload", str(share), f"{REMOTE}/{PLAN_FILE}"], live.name, 600, self.job.stop)
                output = self._exec(start_script(self.accelerator), 300, "start.py")
            except ColabClientError as exc:
                return Ending.FAILED, f"the sweep could not be started in session {live.name}: {exc}"
        if STARTED not in output:
            return Ending.FAILED, f"the sweep did not start in session {live.name}: {tail(output)}"
        live.sweeps += 1
        self.say(f"session {live.name}: {len(chunk)} run(s) started, {self.limit_s - live.elapsed():.0f} s "
                 "left of the session")
        return self._follow(chunk, stamps)

    def _follow(self, chunk: Sequence[Decision], stamps: dict[str, Any]) -> tuple[Ending, str]:
        live = self.live
        assert live is not None
        failures, last = 0, None
        while True:
            if self.job.stop.wait(self.job.poll_s):
                self._bring_back()
                return Ending.INTERRUPTED, ""
            try:
                state = self._poll(live.name)
                failures = 0
            except HostileArchiveError as exc:
                return Ending.FAILED, self._hostile(exc)
            except ColabResultsNotBack as exc:
                self.say(f"session {live.name}: its results could not be downloaded ({exc}): stopping it before "
                         "anything else is sent to it; a fresh session runs what did not come back")
                return Ending.RESULTS_LOST, f"its results could not be downloaded from session {live.name} ({exc})"
            except ColabClientError as exc:
                failures += 1
                if failures >= 3 or "lost" in str(exc) or "not found" in str(exc):
                    return Ending.FAILED, (f"the Colab session {live.name} was lost: {exc} (run the sweep again "
                                           "to resume)")
                self.say(f"poll failed ({exc}); trying again")
                continue
            back = [record_status(d, self.out) for d in chunk if came_back(d, self.out, stamps)]
            counts = ", ".join(f"{back.count(status)} {status}" for status in sorted(set(back))) or "none yet"
            if (counts, state["done"]) != last:
                self.say(f"{len(back)} of {len(chunk)} back ({counts}), session at {live.elapsed():.0f} s: "
                         f"{state['last'][:80]}")
                last = (counts, state["done"])
            if state["done"]:
                return Ending.DONE, (f"its record did not come back from session {live.name} (its sweep ended with "
                                     f"exit status {state['exit']}: {state['last'][:200]})")
            if live.elapsed() >= self.limit_s:
                self.say(f"session {live.name} reached --colab-session-limit {self.limit_s:g} s: stopping "
                         "its sweep, bringing back what finished; a fresh session runs the rest")
                return Ending.DRAINED, ""
            if self._out_of_time():
                return Ending.OUT_OF_TIME, self._out_of_time()

    def _poll(self, session: str) -> dict[str, Any]:
        """One poll of `session`: its state, its results brought back into out (HostileArchiveError: none)."""
        client = self.job.client
        with tempfile.TemporaryDirectory() as scratch:
            script = Path(scratch) / "poll.py"
            script.write_text(poll_script(session), encoding="utf-8")
            output = client.run(["exec", "-f", str(script), "--timeout", "600"], session, 720)
            lines = [line for line in output.splitlines() if line.startswith(POLLED)]
            if not lines:
                raise ColabClientError(f"no answer from the poll: {tail(output)}")
            state = json.loads(lines[-1][len(POLLED):])
            results = Path(scratch) / "results.tar"
            try:
                client.run(["download", f"{REMOTE}/results.tar", str(results)], session, 1800)
                unpack_results(results, self.out)
            except (ColabClientError, tarfile.TarError) as exc:
                raise ColabResultsNotBack(str(exc)) from None
        return state

    def _hostile(self, exc: HostileArchiveError) -> str:
        line = (f"session {self.live.name if self.live else '?'} sent back a results archive colabkit refused: {exc}; "
                "nothing of it was unpacked")
        self.say(line)
        return line

    def _bring_back(self) -> str:
        """A last poll of the session held (Ctrl-C, a drain): '' or why its archive was refused."""
        try:
            self._poll(self.live.name if self.live else "")
        except HostileArchiveError as exc:
            return self._hostile(exc)
        except ColabClientError as exc:
            self.say(f"could not bring back the last results ({exc})")
        return ""

    def _drain(self) -> tuple[str, str]:
        """The session's sweep stopped, what finished brought back, the session stopped: (why its archive was
        refused, or ''; what _end_session said)."""
        try:
            output = self._exec(drain_script(DRAIN_WAIT_S), DRAIN_WAIT_S + 60, "drain.py", cancel=False)
            if DRAINED not in output:
                self.say(f"the session's sweep did not answer the stop ({tail(output)}): stopping the session")
        except ColabClientError as exc:
            self.say(f"could not stop the session's sweep ({exc}): stopping the session")
        hostile = self._bring_back()
        return hostile, self._end_session()

    def _end_session(self) -> str:
        """Stop the session held (if any): '' once it is proved stopped; else '; ' and the line saying that
        its runtime may still be running (also on the console), its entry kept in the state file."""
        live, self.live = self.live, None
        if live is None:
            return ""
        self.spent_s += live.elapsed()
        stopped, said = self._stop(live.name, live.endpoint)
        if stopped:
            forget(self.out, live.name)
            self.say(f"session {live.name} stopped")
            return ""
        line = left_running(live.name, live.endpoint, said)
        self.say(line)
        self.left_running.append(line)
        return f"; {line}"

    def _stop(self, session: str, endpoint: str | None) -> tuple[bool, str]:
        """(whether `session` is proved stopped, what was said instead): "Session terminated.", or its
        endpoint gone from `colab sessions`."""
        client = self.job.client
        try:
            if client.stop(session):
                return True, ""
            said = "`colab stop` did not say \"Session terminated.\": the client no longer knows the session"
        except ColabClientError as exc:
            said = str(exc)
        if endpoint is None:
            return False, said
        try:
            return endpoint not in client.listed(), said
        except ColabClientError as exc:
            return False, f"{said}; {exc}"

    def salvage(self) -> None:
        """The sessions an earlier sweep of this folder left: what each finished brought back, then each
        stopped; a runtime the client forgot is named again (it can only be ended in Colab)."""
        client = self.job.client
        for held in held_sessions(self.out):
            try:
                known = client.endpoint(held.session)
            except ColabClientError:
                known = None
            if known:
                self.say(f"session {held.session} of an earlier sweep (process {held.pid}) is still held: bringing "
                         "back what it finished, then stopping it")
                self.live = LiveSession(held.session, known)
                if not self._bring_back():
                    self.say(f"brought back what session {held.session} finished")
                self._end_session()
                continue
            try:
                listed = client.listed() if held.endpoint else {}
            except ColabClientError as exc:
                self.left_running.append(left_running(held.session, held.endpoint, str(exc)))
                self.say(self.left_running[-1])
                continue
            if held.endpoint in listed:
                self.left_running.append(left_running(held.session, held.endpoint, "the client no longer knows it: its "
                                                      "runtime token expired (google-colab-cli issue #106)"))
                self.say(self.left_running[-1])
                continue
            forget(self.out, held.session)
            self.say(f"runtime {held.endpoint} of an earlier sweep has ended" if held.endpoint else
                     f"session {held.session} of an earlier sweep was being created when that sweep stopped, and the "
                     "client has no session by that name: if Colab's Runtime > Manage sessions lists a runtime you "
                     "did not start, end it there")

    # --- outcomes -------------------------------------------------------------------------------------

    def _outcome(self, decision: Decision) -> Outcome:
        """The outcome of a run whose record came back from the session."""
        combination = decision.combination
        files = RunFiles.of(combination, self.out)
        record = json.loads(files.record.read_text(encoding="utf-8"))
        error = record.get("error") or {}
        seconds = record_seconds(record)
        return Outcome(combination, record["status"], seconds, files.record,
                       str(error.get("message", "")) if isinstance(error, dict) else "")

    def _failed(self, decision: Decision, why: str) -> Outcome:
        return fail_without_crashing(decision.combination, RunFiles.of(decision.combination, self.out),
                                     decision.fingerprint, RunError("ColabSession", ErrorKind.COLAB, why),
                                     sweep_section={"colab": self.accelerator, "session": self.session_name})
