"""Run a plan's notebooks, through papermill, into OUT/ -- and resume.

A sweep (1) is planned once: every grid file, `-p` override and the combinations they make validated, and
how each runs decided (colabkit.sweep.plan: a SweepPlan, which goes to every runner as it is); its options
are checked together when they are made (colabkit.sweep.options), so nothing runs on a bad plan or options.
Then `run_sweep` (2) checks the output folder, then takes its lock (colabkit.sweep.outfolder); (3) asks
the runner (by name from RUNNERS, or one given: a Colab session's) which devices there are: this machine's,
from a child process so the sweep itself never claims a GPU or TPU, or a Dask cluster's workers'; (4)
decides per run: run it, keep the result an earlier sweep finished (its record is ok and its fingerprint
matches, see colabkit.sweep.fingerprint), or skip it because it cannot run here; (5) runs the rest on the
runner (one after another, `jobs` side by side, or on a Dask cluster), each in a fresh kernel or a warm one
(colabkit.sweep.kernels) as its settings say, the host's CPU bandwidth measured once for them all; with a
Repetition, further rounds until each headline's interval is narrow enough (colabkit.sweep.target); (6)
returns one Outcome per run for the summary table. `prepare` (the dry run) takes steps 2-4 the same way,
and writes nothing.

Products per combination (see colabkit.sweep.execution): OUT/<notebook>/<device>/<slug>.ipynb,
.html, .json (the record), .log.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path

from colabkit.errors import SweepInterrupted
from colabkit.records.run_error import RunError
from colabkit.records.schema import ErrorKind
from colabkit.sweep.console import Progress
from colabkit.sweep.devices import cpu_only, host_facts
from colabkit.sweep.execution import Outcome, RunFiles, is_filesystem_fault, write_skipped_record
from colabkit.sweep.cluster import DaskExecutor
from colabkit.sweep.executors import Executor, PoolExecutor, SerialExecutor
from colabkit.sweep.options import Repetition, RunnerName, RunOptions
from colabkit.sweep.outfolder import check_output_folder, sweep_lock
from colabkit.sweep.plan import Decision, SweepAction, SweepPlan, decide
from colabkit.sweep.target import describe_missed, next_round

__all__ = ["RUNNERS", "prepare", "run_sweep"]

Runner = Callable[[Path, RunOptions, Mapping[str, int] | None], Executor]
# The runners a plan runs on here, by the name RunOptions.runner gives (papermill's engines are the model). A
# Colab session's runner is made per accelerator by colabkit.sweep.remote_colab.command and given to run_sweep.
RUNNERS: dict[RunnerName, Runner] = {
    "serial": SerialExecutor,  # one run after another, in this process: what published numbers use
    "pool": PoolExecutor,  # `jobs` runs side by side, each in a worker process of its own
    "dask": lambda out, options, available: DaskExecutor(out, options),  # a Dask cluster's devices, not ours
}


@contextmanager
def _executor(plan: SweepPlan, options: RunOptions, available: Mapping[str, int] | None,
              given: Executor | None = None) -> Iterator[Executor]:
    """The plan's output folder checked, and the runner it runs on: the one `given` (a Colab session's:
    colabkit.sweep.remote_colab.executor), else RUNNERS' entry for `options.runner` (this machine's devices
    `available`, else detected when some run asks for more than a CPU)."""
    check_output_folder(plan.out)
    executor = given or RUNNERS[options.runner](plan.out, options, cpu_only(plan, available))
    with executor:
        yield executor


def prepare(plan: SweepPlan, options: RunOptions = RunOptions(),
            available: Mapping[str, int] | None = None, executor: Executor | None = None) -> list[Decision]:
    """What `--dry-run` shows: the output folder checked, the devices found (as `run_sweep` finds
    them) and every run of the plan decided. Runs and writes nothing."""
    with _executor(plan, options, available, executor) as executor:
        return decide(plan, executor.out, executor.inventory(), options.force, options.rerun_unreadable)


def run_sweep(plan: SweepPlan, options: RunOptions = RunOptions(), repetition: Repetition | None = None, *,
              available: Mapping[str, int] | None = None, echo: Callable[[str], None] = print, progress: bool = False,
              executor: Executor | None = None) -> list[Outcome]:
    """Run every run of `plan` that is not finished yet, as `options` say, and (`repetition`) further rounds
    until each headline's interval is narrow enough; one Outcome per run.

    Nothing runs if `out` cannot be written or is locked by another sweep (OutputFolderError,
    SweepLockedError), decided before devices are detected or a cluster contacted. Runs whose record
    is ok with a matching fingerprint are kept (`resumed`) unless `options.force`; those that cannot
    run here are recorded as skipped; record files that cannot be read are set aside untouched unless
    `options.rerun_unreadable`. A file-system fault of one run fails that run only. `available` gives
    this machine's devices ({"cpu": 1}) instead of detecting them; `echo` prints the sweep's lines,
    `progress` adds a progress bar. Raises SweepInterrupted (with the outcomes so far) on Ctrl-C or SIGTERM.
    """
    options = dataclasses.replace(options, cwd=options.cwd or str(Path.cwd()), repetition=repetition)
    with _executor(plan, options, available, executor) as executor:
        out = executor.out  # a cluster's workers need it absolute
        with sweep_lock(out):
            decisions = decide(plan, out, executor.inventory(), options.force, options.rerun_unreadable)
            outcomes = [_settled(decision, out, options.rerun_unreadable) for decision in decisions
                        if decision.action not in (SweepAction.RUN, SweepAction.RERUN)]
            to_run = [decision for decision in decisions if decision.action in (SweepAction.RUN, SweepAction.RERUN)]
            echo(_first_line(len(decisions), len(to_run), outcomes, executor.where))
            for note in executor.notes(to_run):
                echo(note)
            with host_facts([decision.combination for decision in to_run]) as facts:
                executor.options = dataclasses.replace(options, host_facts=facts)
                _run(executor, to_run, echo, progress, outcomes)
                if repetition is not None:
                    decisions += _until_target(executor, decisions, repetition, echo, progress, outcomes)
    # Outcomes come back in the order runs finish, with copies of their combinations: order them as decided.
    order = {decision.combination.output_base(out): index for index, decision in enumerate(decisions)}
    return sorted(outcomes, key=lambda outcome: order[outcome.combination.output_base(out)])


def _run(executor: Executor, to_run: list[Decision], echo: Callable[[str], None], progress: bool,
         outcomes: list[Outcome]) -> None:
    """Run `to_run` through `executor` under a progress bar, adding each outcome to `outcomes` as it
    comes; on Ctrl-C, SweepInterrupted with every outcome so far (those kept and skipped included)."""
    bar = Progress(len(to_run), max(1, min(executor.slots, len(to_run))), echo, progress)
    try:
        # closing: an interruption between two outcomes still stops the executor's runs under way
        with closing(executor.run(to_run, bar.started)) as finished:
            for outcome in finished:
                outcomes.append(outcome)
                bar.finished(outcome)
    except KeyboardInterrupt:
        bar.close()
        raise SweepInterrupted(outcomes, f"interrupted after {bar.done} of {len(to_run)} runs") from None
    bar.close()


def _until_target(executor: Executor, decisions: list[Decision], repetition: Repetition, echo: Callable[[str], None],
                  progress: bool, outcomes: list[Outcome]) -> list[Decision]:
    """Rounds of one more run of each combination whose headline interval is wider than `repetition`'s
    `target_ci` (colabkit.sweep.target), until none is or each has `max_repeats` runs; the decisions of
    those runs. The combinations that never got there are named at the end."""
    options = executor.options
    target, max_repeats = repetition.target_ci, repetition.max_repeats
    # one entry per combination (repeat 1 stands for all), of those that ran or finished earlier
    firsts = {decision.combination.with_repeat(1).output_base(executor.out): decision.combination.with_repeat(1)
              for decision in decisions if decision.action in (SweepAction.RUN, SweepAction.RERUN, SweepAction.DONE)}
    added: list[Decision] = []
    proposed: set[Path] = set()
    while True:
        more, states = next_round(firsts.values(), executor.out, target, max_repeats, proposed)
        if not more:
            break
        round_decisions = decide(more, executor.out, executor.inventory(), options.force)
        echo(f"--target-ci {100 * target:g} %: {len(more)} combination(s) short of it; one more run each "
             f"(repeat {min(c.repeat for c in more)}-{max(c.repeat for c in more)})")
        added += round_decisions
        to_run = [d for d in round_decisions if d.action in (SweepAction.RUN, SweepAction.RERUN)]
        outcomes += [_settled(d, executor.out, False) for d in round_decisions if d not in to_run]
        _run(executor, to_run, echo, progress, outcomes)
    missed = describe_missed(states, target)
    if missed:
        echo(f"{len(missed)} combination(s) did not reach +/- {100 * target:g} % within {max_repeats} runs:")
        for line in missed:
            echo(f"  {line}")
    return added


def _first_line(total: int, to_run: int, settled: list[Outcome], where: str) -> str:
    kept = sum(outcome.resumed for outcome in settled)
    set_aside = sum(outcome.set_aside for outcome in settled)
    return (f"{total} runs: {to_run} to run{where}, {kept} finished earlier (kept), "
            f"{len(settled) - kept - set_aside} skipped (cannot run here: device absent, backend or memory)"
            + (f", {set_aside} set aside (record file unreadable; --rerun replaces it)" if set_aside else ""))


def _settled(decision: Decision, out: Path, rerun_unreadable: bool) -> Outcome:
    """The outcome of a combination that does not run: kept, set aside, or skipped (its record written)."""
    record_path = RunFiles.of(decision.combination, out).record
    if decision.action == SweepAction.DONE:
        return Outcome(decision.combination, "ok", 0.0, record_path, "finished earlier", resumed=True)
    if decision.action == SweepAction.SET_ASIDE:
        return Outcome(decision.combination, "skipped", 0.0, record_path, decision.reason, set_aside=True)
    if decision.action == SweepAction.RUNNING:  # another sweep's (a folder without locks): left to it
        return Outcome(decision.combination, "skipped", 0.0, record_path, decision.reason)
    try:
        return write_skipped_record(decision.combination, out, decision.fingerprint, decision.reason,
                                    replace_unreadable=rerun_unreadable, error_type=decision.skip_type)
    except OSError as exc:  # a file-system fault fails this combination only
        if not is_filesystem_fault(exc):
            raise
        return Outcome(decision.combination, "failed", 0.0, record_path,
                       f"{type(exc).__name__}: could not write its skipped record ({exc.strerror}: {exc.filename})",
                       error=RunError(type(exc).__name__, ErrorKind.FILESYSTEM, str(exc)))
