"""`python -m colabkit sweep GRID... --colab T4,v5e1`: the options checked, the dry run (each
accelerator's runs, their estimate and the sessions it takes), every accelerator's sessions side by
side (one thread each: colabkit.sweep.runners.colab.executor), and the summary, which names an accelerator granted
other than the one asked (once per accelerator, by kind and model: "Tesla T4" is a T4)."""

from __future__ import annotations

import json
import os
import signal
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from colabkit.colab.runtime import accelerator_mismatch
from colabkit.errors import ColabClientBroken, ColabkitError, SweepInterrupted
from colabkit.records.provenance import git_commit
from colabkit.sweep.console import dry_run_table, summary_table
from colabkit.sweep.decide import SweepAction
from colabkit.sweep.estimate import estimate_plan
from colabkit.sweep.options import PlanRequest, Repetition, RunOptions
from colabkit.sweep.plan import plan_requested
from colabkit.sweep.driver import prepare, run_sweep
from colabkit.sweep.runners.colab.client import ACCELERATORS, CLIENT
from colabkit.sweep.runners.colab.executor import POLL_ENV, ColabExecutor
from colabkit.sweep.runners.colab.sessions import (
    SESSION_LIMIT_S,
    SESSION_START_ENV,
    SESSION_START_S,
    TOKEN_LIFE_S,
    TOKEN_MARGIN_S,
    ColabJob,
    build_wheel,
    held_sessions,
    session_count,
)
from colabkit.sweep.runners.execute import Outcome


def colab_sweep(request: PlanRequest, options: RunOptions, repetition: Repetition | None, out: Path, *,
                dry_run: bool = False) -> int:
    """`sweep ... --colab A,B` (`options.colab`): every accelerator's plan (made here, once: its sessions are
    each given their share of it as JSON) run in its sessions, side by side (with `dry_run`, what each would
    run, and the sessions it takes); the exit status."""
    if request.device:
        raise ColabkitError("--colab runs each accelerator's combinations on its own runtime: drop --device")
    names = list(options.colab)
    limit = SESSION_LIMIT_S if options.colab_session_limit_s is None else options.colab_session_limit_s
    plans = {name: plan_requested(request, out / f"colab-{name}", ACCELERATORS[name][0]) for name in names}
    lock = threading.Lock()

    def echo(line: str) -> None:
        with lock:
            print(line, flush=True)

    job = ColabJob(Path(), echo=echo, timeout_s=options.colab_timeout_s, session_limit_s=limit,
                   poll_s=float(os.environ.get(POLL_ENV, 30)))
    executors = {name: ColabExecutor(plans[name].out, options, name, job) for name in names}
    check_session_limit(limit, {name: estimate_plan(list(plans[name]), executors[name].rates).run_seconds
                                for name in names})
    if dry_run:
        for name, executor in executors.items():
            decisions = prepare(plans[name], options, executor=executor)
            to_run = [d.combination for d in decisions if d.action in (SweepAction.RUN, SweepAction.RERUN)]
            estimate = estimate_plan(to_run, executor.rates)
            lines = [f"Colab {name} ({ACCELERATORS[name][0]}): {len(to_run)} run(s), in about "
                     f"{session_count(estimate.run_seconds, limit)} session(s) of at most {limit:g} s each "
                     "(--colab-session-limit; cut by this estimate, then by measured time)",
                     *estimate.lines(),
                     "  plus each session's start, the install of colabkit's wheel and its dependencies, and the "
                     "downloads (minutes per session, not in the estimate); Colab bills compute units for every "
                     "hour a session is held, at its accelerator's rate (docs/colab.md)"]
            print(dry_run_table(decisions, plans[name].out, lines))
        return 0
    for executor in executors.values():
        held_sessions(executor.out)  # another sweep still running here holds them: one line, before anything
    job.client.check()
    previous = signal.signal(signal.SIGTERM, _interrupt)
    results: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory() as scratch:
            job.wheel = build_wheel(Path(scratch))
            echo(f"colabkit's wheel {job.wheel.name} built from commit {git_commit() or 'unknown'}")

            def one(name: str) -> list[Outcome]:
                executors[name].salvage()
                return run_sweep(plans[name], options, repetition, executor=executors[name], echo=executors[name].say)

            _side_by_side(names, one, results, job)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if job.broken:
        raise ColabClientBroken(job.broken)
    left = {name: executor.left_running for name, executor in executors.items()}
    return _summary(names, results, summary_table, out, left)


def check_session_limit(limit: float, run_seconds: dict[str, list[float]]) -> None:
    """Refuse (one line, before any session) a session limit past the client's token life less its margin, or
    under what one session needs before its first run (SESSION_START_S: `colab new`, colabkit's wheel
    uploaded and installed) plus the shortest run's estimate on an accelerator (`run_seconds`)."""
    most = TOKEN_LIFE_S - TOKEN_MARGIN_S
    if limit > most:
        raise ColabkitError(f"--colab-session-limit {limit:g}: at most {most:g} s ({CLIENT} loses a session "
                            f"{TOKEN_LIFE_S:g} s after it starts: its runtime token is never renewed, its issue #106)")
    start = float(os.environ.get(SESSION_START_ENV, SESSION_START_S))
    for name, seconds in run_seconds.items():
        if seconds and limit < start + min(seconds):
            raise ColabkitError(f"--colab-session-limit {limit:g}: under the {start + min(seconds):.0f} s a {name} "
                                f"session needs for one run (about {start:g} s to start and install colabkit, and "
                                f"{min(seconds):.0f} s for its shortest run by the estimate); at most {most:g} s")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _side_by_side(names: list[str], run: Callable[[str], list[Outcome]], results: dict[str, Any],
                  job: ColabJob) -> None:
    """Each accelerator's sweep in a thread; Ctrl-C (here, in the main thread) stops them all, each
    bringing back what finished and stopping its session, however often Ctrl-C is pressed meanwhile.
    The threads are waited for through events: on Python 3.11, a Ctrl-C inside Thread.join(timeout)
    leaves is_alive() False for a thread that still runs."""
    finished = {name: threading.Event() for name in names}

    def one(name: str) -> None:
        try:
            results[name] = run(name)
        except (SweepInterrupted, ColabkitError) as stopped:
            results[name] = stopped
        finally:
            finished[name].set()

    for name in names:
        threading.Thread(target=one, args=(name,), daemon=True).start()
    try:
        for done in finished.values():
            while not done.wait(0.5):
                pass
    except KeyboardInterrupt:
        job.stop.set()
        job.echo("interrupted: bringing back what finished, then stopping every Colab session (wait: a runtime left "
                 "running keeps billing)")
        for done in finished.values():
            while not done.is_set():
                try:
                    done.wait(0.5)
                except KeyboardInterrupt:
                    job.echo("still stopping the Colab sessions: wait")


def _summary(names: list[str], results: dict[str, Any], summary_table: Callable[[list[Outcome]], str],
             out: Path, left_running: dict[str, list[str]] | None = None) -> int:
    """Each accelerator's table, an accelerator granted other than the one asked, the runtimes that may
    still be running (exit status 1 at least: they bill), and the exit status."""
    status = 0
    for name in names:
        if (left_running or {}).get(name):
            status = max(status, 1)
        result = results.get(name)
        print(f"\n== Colab {name}")
        outcomes = (result if isinstance(result, list) else
                    result.outcomes if isinstance(result, SweepInterrupted) else [])
        if outcomes:
            print(summary_table(outcomes))
        for outcome in outcomes:
            if outcome.status == "failed":
                print(f"failed: {outcome.combination.label}: {outcome.message}")
        granted = sorted(found for found in _found(outcomes) if accelerator_mismatch(name, found))
        if granted:
            print(f"[{name}] asked for {name}; Colab granted {', '.join(granted)}: each record names what ran "
                  "(accelerator_found)")
        if isinstance(result, list):
            status = max(status, 1 if any(outcome.status == "failed" for outcome in result) else 0)
        elif isinstance(result, SweepInterrupted):
            print(f"[{name}] {result}: finished runs are kept; run the same command again to resume")
            status = 130
        elif result is None:
            print(f"[{name}] stopped by an error inside colabkit (its traceback is above): please report it")
            status = max(status, 1)
        else:
            print(f"[{name}] {result}")
            status = max(status, 1)
        for line in (left_running or {}).get(name, []):
            print(f"[{name}] {line}")
    print(f"\noutputs: {out}")
    return status


def _found(outcomes: list[Outcome]) -> set[str]:
    """The accelerators the ok records say their runtimes had (`accelerator_found`): a failed record may be
    this machine's (a session that never ran the combination), which has none."""
    found = set()
    for outcome in outcomes:
        if outcome.status != "ok":
            continue
        try:
            record = json.loads(outcome.record_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        value = record.get("accelerator_found") or (record.get("device") or {}).get("accelerator_found")
        if value:
            found.add(str(value))
    return found
