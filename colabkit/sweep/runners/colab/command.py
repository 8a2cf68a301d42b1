"""`python -m colabkit sweep GRID... --colab T4,v5e1`: the plan, made once, cut into each accelerator's share (its
device kind's runs, into OUT/colab-A/, the options naming it alone), each share run by the `colab` runner
(colabkit.sweep.driver.RUNNERS: colabkit.sweep.runners.colab.executor) side by side, one thread each; the dry run
(each share's runs, their estimate and the sessions it takes); and the summary, which names an accelerator granted
other than the one asked (once per accelerator, by kind and model: "Tesla T4" is a T4)."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from colabkit.colab.runtime import accelerator_mismatch
from colabkit.errors import ColabClientBroken, ColabkitError, SweepInterrupted
from colabkit.records.provenance import git_commit
from colabkit.stages import EXIT_INTERRUPTED, sigterm_stops
from colabkit.sweep.console import outcomes_report, outcomes_table
from colabkit.sweep.driver import dry_run, run_sweep
from colabkit.sweep.estimate import PlanEstimate, estimate_plan
from colabkit.sweep.plan import SweepPlan
from colabkit.sweep.runners.colab.client import ACCELERATORS, CLIENT
from colabkit.sweep.runners.colab.executor import ColabExecutor, accelerator_speeds, session_limit
from colabkit.sweep.runners.colab.sessions import (
    SESSION_START_ENV,
    SESSION_START_S,
    TOKEN_LIFE_S,
    TOKEN_MARGIN_S,
    ColabJob,
    build_wheel,
    colab_job,
    held_sessions,
    session_count,
)
from colabkit.sweep.runners.execute import Outcome


def shares(plan: SweepPlan) -> dict[str, SweepPlan]:
    """Each accelerator's share of `plan`: the runs of its device kind, into OUT/colab-A/, its options naming it
    alone (what the `colab` runner takes)."""
    return {name: SweepPlan([run for run in plan if run.request.kind == ACCELERATORS[name][0]],
                            plan.out / f"colab-{name}", dataclasses.replace(plan.options, colab=(name,)))
            for name in plan.options.colab}


def colab_sweep(plan: SweepPlan, dry_run_only: bool = False) -> int:
    """Every accelerator's share of `plan` run in its sessions, side by side (with `dry_run_only`, what each would
    run, and the sessions it takes); the exit status."""
    parts = shares(plan)
    for share in parts.values():
        share.to_json()  # what each session is given: a notebook no plan file can name is refused here, before any
    limit = session_limit(plan.options)
    check_session_limit(limit, {name: estimate_plan(list(share), accelerator_speeds(name)).run_seconds
                                for name, share in parts.items()})
    if dry_run_only:
        for name, share in parts.items():
            def describe(estimate: PlanEstimate, name: str = name) -> list[str]:
                return [f"Colab {name} ({ACCELERATORS[name][0]}): {estimate.runs} run(s), in about "
                        f"{session_count(estimate.run_seconds, limit)} session(s) of at most {limit:g} s each "
                        "(--colab-session-limit; cut by this estimate, then by measured time)", *estimate.lines(),
                        "  plus each session's start, the install of colabkit's wheel and its dependencies, and the "
                        "downloads (minutes per session, not in the estimate); Colab bills compute units for every "
                        "hour a session is held, at its accelerator's rate (docs/colab.md)"]
            print(dry_run(share, accelerator_speeds(name), describe))
        return 0
    for share in parts.values():
        held_sessions(share.out)  # another sweep still running here holds them: one line, before anything
    job = colab_job()
    job.client.check()
    results: dict[str, Any] = {}
    with sigterm_stops(), tempfile.TemporaryDirectory() as scratch:
        job.wheel = build_wheel(Path(scratch))
        job.echo(f"colabkit's wheel {job.wheel.name} built from commit {git_commit() or 'unknown'}")
        def one(name: str) -> list[Outcome]:
            ColabExecutor(parts[name].out, parts[name].options).salvage()  # what an earlier sweep's sessions left
            return run_sweep(parts[name], echo=job.said_by(name))

        _side_by_side(list(parts), one, results, job)
    if job.broken:
        raise ColabClientBroken(job.broken)
    return _summary(list(parts), results, plan.out, job.left_running)


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


def _summary(names: list[str], results: dict[str, Any], out: Path,
             left_running: dict[str, list[str]] | None = None) -> int:
    """Each accelerator's summary (colabkit.sweep.console.outcomes_report), an accelerator granted other than the
    one asked, the runtimes that may still be running (exit status 1 at least: they bill), and the exit status."""
    status = 0
    for name in names:
        result = results.get(name)
        print(f"\n== Colab {name}")
        outcomes = (result if isinstance(result, list) else
                    result.outcomes if isinstance(result, SweepInterrupted) else [])
        if isinstance(result, list):
            lines, status_here = outcomes_report(result)
            print("\n".join(lines))
            status = max(status, status_here)
        elif outcomes:
            print(outcomes_table(outcomes))
        granted = sorted(found for found in _found(outcomes) if accelerator_mismatch(name, found))
        if granted:
            print(f"[{name}] asked for {name}; Colab granted {', '.join(granted)}: each record names what ran "
                  "(accelerator_found)")
        if isinstance(result, SweepInterrupted):
            print(f"[{name}] {result}: finished runs are kept; run the same command again to resume")
            status = EXIT_INTERRUPTED
        elif result is None:
            print(f"[{name}] stopped by an error inside colabkit (its traceback is above): please report it")
            status = max(status, 1)
        elif not isinstance(result, list):
            print(f"[{name}] {result}")
            status = max(status, 1)
        for line in (left_running or {}).get(name, []):
            print(f"[{name}] {line}")
            status = max(status, 1)
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
