"""Run a plan's notebooks, through papermill, into OUT/ -- and resume.

A sweep (1) is planned once: every grid file, `-p` override and the combinations they make validated, and
how each runs decided (colabkit.sweep.plan: a SweepPlan, which carries its RunOptions and goes to every runner
as it is); its options are checked together when they are made (colabkit.sweep.options), so nothing runs on a
bad plan or options. Then `run_sweep` (2) checks the output folder, then takes its lock
(colabkit.sweep.folder); (3) asks the runner its options name (RUNNERS) which devices there are: this
machine's, from a child process so the sweep itself never claims a GPU or TPU, a Dask cluster's workers', or
a Colab runtime's; (4) decides per run (colabkit.sweep.decide): run it, keep the result an earlier sweep
finished, or skip it because it cannot run here; (5) runs the rest on the runner (one after another, `jobs`
side by side, on a Dask cluster, or in Colab sessions), each in a fresh kernel or a warm one as its settings
say, the host's CPU bandwidth measured once for them all; with a Repetition (6) further rounds until each
headline's interval is narrow enough; (7) returns one Outcome per run for the summary table. `prepare` takes
steps 2-4 the same way and writes nothing; `dry_run` shows it, with the estimate.

Rounds (`sweep --target-ci 3%`): more runs, in interleaved rounds, until each combination's headline is
known to within the target (colabkit.statistics.median_ci over its ok runs in OUT): one more run per round
for each combination above the target or under MIN_RUNS, up to `max_repeats`. Combinations without a
declared headline, or that cannot run here, are left as they are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from colabkit.errors import RecordError, SweepInterrupted
from colabkit.experiments import find
from colabkit.records.loading import checked_record
from colabkit.records.run_error import RunError
from colabkit.records.schema import ErrorKind
from colabkit.statistics import Interval, median_ci
from colabkit.sweep.console import Progress
from colabkit.sweep.console import dry_run_table
from colabkit.sweep.decide import Decision, SweepAction, decide, fingerprint
from colabkit.sweep.devices import cpu_only, host_facts_file
from colabkit.sweep.estimate import PlanEstimate, Speeds, earlier_runs, estimate_plan
from colabkit.sweep.expand import Combination
from colabkit.sweep.folder import check_output_folder, sweep_lock
from colabkit.sweep.options import Repetition, RunnerName, RunOptions
from colabkit.sweep.plan import SweepPlan
from colabkit.sweep.runners.base import Executor
from colabkit.sweep.runners.colab.executor import ColabExecutor
from colabkit.sweep.runners.dask import DaskExecutor
from colabkit.sweep.runners.execute import Outcome, RunFiles, is_filesystem_fault, write_skipped_record
from colabkit.sweep.runners.local import PoolExecutor, SerialExecutor


@dataclass(frozen=True)
class TargetState:
    """Where one combination stands: its runs so far (the repeats in a row whose records were made
    by today's code and parameters), its ok headline values' interval, whether that meets the
    target, and whether its latest run failed (then it gets no more runs: a failure repeats)."""

    combination: Combination  # repeat 1's
    runs: int
    interval: Interval | None  # None: the notebook declares no headline
    met: bool
    latest_failed: bool = False


def _runs_in(combination: Combination, out: Path) -> tuple[int, list[float], bool]:
    """(how many repeats in a row have a record in `out` with today's fingerprint, the headline
    values of the ok ones, whether the latest of them is not ok). A record of other code or
    parameters ends the row: that repeat is run again (plan.decide: RERUN), never counted."""
    experiment = find(combination.name)
    metric = experiment.headline.metric if experiment else None
    digest = fingerprint(combination.notebook, combination.params)["digest"]
    runs, values, latest_failed = 0, [], False
    while True:
        path = RunFiles.of(combination.with_repeat(runs + 1), out).record
        if not path.exists():
            break
        try:
            record = checked_record(path)
        except (RecordError, OSError):
            break  # unreadable or not a measurement: plan.decide sets it aside or reruns it
        if (record.get("fingerprint") or {}).get("digest") != digest:
            break
        runs += 1
        value = record["metrics"].get(metric) if metric and record["status"] == "ok" else None
        latest_failed = record["status"] != "ok"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            values.append(float(value))
    return runs, values, latest_failed


def target_states(combinations: Iterable[Combination], out: Path, target: float) -> list[TargetState]:
    """Each combination's (repeat 1 stands for all its runs) state against `target` from the records in OUT."""
    states = []
    for combination in combinations:
        runs, values, latest_failed = _runs_in(combination, out)
        if find(combination.name) is None:
            states.append(TargetState(combination, runs, None, True))
            continue
        interval = median_ci(values)
        width = interval.half_width
        states.append(TargetState(combination, runs, interval, width is not None and width <= target, latest_failed))
    return states


def next_round(combinations: Iterable[Combination], out: Path, target: float, max_repeats: int,
               proposed: set[Path]) -> tuple[list[Combination], list[TargetState]]:
    """(the runs of the next round: one more repeat of each combination short of the target and of
    `max_repeats` runs whose latest run did not fail, every state). `proposed`, the runs of earlier
    rounds, is updated: a run proposed again is left out, because it left no countable record (a
    file-system fault, a record set aside) and running it once more would not change that, so the
    rounds would never end."""
    states = target_states(combinations, out, target)
    more = [state.combination.with_repeat(state.runs + 1) for state in states
            if not state.met and state.runs < max_repeats and not state.latest_failed]
    more = [combination for combination in more if combination.output_base(out) not in proposed]
    proposed.update(combination.output_base(out) for combination in more)
    return more, states


def describe_missed(states: list[TargetState], target: float) -> list[str]:
    """One line per combination that did not reach the target: its runs and its interval."""
    lines = []
    for state in states:
        if state.met:
            continue
        interval = state.interval
        width = "no interval" if interval is None or interval.half_width is None else \
            f"+/- {100 * interval.half_width:.1f} %"
        failed = "; its latest run failed, so it got no more" if state.latest_failed else ""
        lines.append(f"{state.combination.label}: {width} after {state.runs} run(s) "
                     f"({interval.n if interval else 0} ok), target +/- {100 * target:g} %{failed}")
    return lines


__all__ = ["RUNNERS", "dry_run", "prepare", "run_sweep"]

Runner = Callable[[Path, RunOptions, Mapping[str, int] | None], Executor]
# The runners a plan runs on, by the name RunOptions.runner gives (papermill's engines are the model): each is given
# the output folder, the options and this machine's devices, and takes the plan's runs as they are.
RUNNERS: dict[RunnerName, Runner] = {
    "serial": SerialExecutor,  # one run after another, in this process: what published numbers use
    "pool": PoolExecutor,  # `jobs` runs side by side, each in a worker process of its own
    "dask": lambda out, options, available: DaskExecutor(out, options),  # a Dask cluster's devices, not ours
    # one accelerator's share of the plan in Colab sessions (colabkit.sweep.runners.colab.command makes the shares)
    "colab": lambda out, options, available: ColabExecutor(out, options),
}


@contextmanager
def _executor(plan: SweepPlan, available: Mapping[str, int] | None) -> Iterator[Executor]:
    """The plan's output folder checked, and the runner its options name (RUNNERS), with this machine's devices
    `available` (else detected when some run asks for more than a CPU)."""
    check_output_folder(plan.out)
    with RUNNERS[plan.options.runner](plan.out, plan.options, cpu_only(plan, available)) as executor:
        yield executor


def prepare(plan: SweepPlan, available: Mapping[str, int] | None = None) -> list[Decision]:
    """What `--dry-run` shows: the output folder checked, the devices found (as `run_sweep` finds
    them) and every run of the plan decided. Runs and writes nothing."""
    with _executor(plan, available) as executor:
        return decide(plan, executor.out, executor.inventory(), plan.options.force, plan.options.rerun_unreadable)


def dry_run(plan: SweepPlan, speeds: Speeds | None = None,
            describe: Callable[[PlanEstimate], list[str]] = PlanEstimate.lines) -> str:
    """The dry run's table (`prepare`): what would run, be kept, skipped or set aside, and the estimate of what would
    run (at `speeds` where given; a run timed before in the output folder by those times), which `describe` puts in
    words."""
    decisions = prepare(plan)
    to_run = [d.combination for d in decisions if d.action in (SweepAction.RUN, SweepAction.RERUN)]
    return dry_run_table(decisions, plan.out, describe(estimate_plan(to_run, speeds, earlier_runs(plan.out))))


def run_sweep(plan: SweepPlan, *, available: Mapping[str, int] | None = None, echo: Callable[[str], None] = print,
              progress: bool = False) -> list[Outcome]:
    """Run every run of `plan` that is not finished yet, as its options say, and (their `repetition`) further
    rounds until each headline's interval is narrow enough; one Outcome per run.

    Nothing runs if `out` cannot be written or is locked by another sweep (OutputFolderError,
    SweepLockedError), decided before devices are detected or a cluster contacted. Runs whose record
    is ok with a matching fingerprint are kept (`resumed`) unless `options.force`; those that cannot
    run here are recorded as skipped; record files that cannot be read are set aside untouched unless
    `options.rerun_unreadable`. A file-system fault of one run fails that run only. `available` gives
    this machine's devices ({"cpu": 1}) instead of detecting them; `echo` prints the sweep's lines,
    `progress` adds a progress bar. Raises SweepInterrupted (with the outcomes so far) on Ctrl-C or SIGTERM.
    """
    options = dataclasses.replace(plan.options, cwd=plan.options.cwd or str(Path.cwd()))
    with _executor(plan, available) as executor:
        out = executor.out  # a cluster's workers need it absolute
        with sweep_lock(out):
            decisions = decide(plan, out, executor.inventory(), options.force, options.rerun_unreadable)
            outcomes = [_settled(decision, out, options.rerun_unreadable) for decision in decisions
                        if decision.action not in (SweepAction.RUN, SweepAction.RERUN)]
            to_run = [decision for decision in decisions if decision.action in (SweepAction.RUN, SweepAction.RERUN)]
            echo(_first_line(len(decisions), len(to_run), outcomes, executor.where))
            for note in executor.notes(to_run):
                echo(note)
            with host_facts_file([decision.combination for decision in to_run]) as facts:
                executor.options = dataclasses.replace(options, host_facts=facts)
                _run(executor, to_run, echo, progress, outcomes)
                if options.repetition is not None:
                    decisions += _until_target(executor, decisions, options.repetition, echo, progress, outcomes)
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
    `target_ci` (colabkit.sweep.driver), until none is or each has `max_repeats` runs; the decisions of
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
