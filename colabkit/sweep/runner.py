"""Run notebooks once per combination of their grids, through papermill, into OUT/ -- and resume.

A sweep (1) validates every grid file, `-p` override and the combinations they make, before
anything runs (colabkit.sweep.plan); (2) checks the output folder, then takes its lock
(colabkit.sweep.outfolder); (3) asks which devices there are: this machine's, from a child process
so the sweep itself never claims a GPU or TPU, or a Dask cluster's workers'; (4) decides per
combination: run it, keep the result an earlier sweep finished (its record is ok and its fingerprint
matches, see colabkit.sweep.fingerprint), or skip it because it cannot run here; (5) runs the rest
through an executor (colabkit.sweep.executors: one after another, `jobs` side by side, or on a Dask
cluster), one fresh kernel each, or with `--kernels reuse` warm kernels (colabkit.sweep.kernels),
the host's CPU bandwidth measured once for them all; each combination as many times as its `repeats`
say, in interleaved rounds (colabkit.sweep.plan.interleave); with `target_ci`, further rounds until
each headline's interval is narrow enough (colabkit.sweep.target); (6) returns one Outcome per run
for the summary table.

Products per combination (see colabkit.sweep.execution): OUT/<notebook>/<device>/<slug>.ipynb,
.html, .json (the record), .log.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

from colabkit.errors import ColabkitError, SweepInterrupted
from colabkit.records.run_error import RunError
from colabkit.records.schema import ErrorKind
from colabkit.sweep.console import Progress
from colabkit.sweep.devices import cpu_only, host_facts
from colabkit.sweep.execution import (HTML_MODES, Outcome, RunFiles, RunOptions, is_filesystem_fault,
                                      write_skipped_record)
from colabkit.sweep.executors import Executor, PoolExecutor, SerialExecutor
from colabkit.sweep.kernels import DEFAULT_MAX_RUNS, KERNEL_MODES
from colabkit.sweep.outfolder import check_output_folder, sweep_lock
from colabkit.sweep.plan import Decision, SweepAction, decide, plan
from colabkit.sweep.target import DEFAULT_MAX_REPEATS, describe_missed, next_round

__all__ = ["open_executor", "prepare", "run_sweep"]


def open_executor(out: Path, options: RunOptions, *, available: Mapping[str, int] | None = None,
                  cluster: str | None = None, shared_out: bool | None = None) -> Executor:
    """The executor a sweep runs with: a Dask cluster's (`cluster`: a scheduler's address or local:N,
    connected now), else this machine's, serial or with `options.jobs` worker processes."""
    if cluster:
        from colabkit.sweep.cluster import DaskExecutor

        return DaskExecutor(out, options, cluster, shared_out)
    return (SerialExecutor if options.jobs == 1 else PoolExecutor)(out, options, available)


def _check_arguments(jobs: int, timeout_s: float | None, cluster: str | None, kernels: str | None = None,
                     max_kernel_runs: int = DEFAULT_MAX_RUNS, wait_quiet_s: float | None = None,
                     target_ci: float | None = None, max_repeats: int | None = None) -> None:
    if jobs < 1:
        raise ColabkitError(f"--jobs must be at least 1, got {jobs}")
    if kernels is not None and kernels not in KERNEL_MODES:
        raise ColabkitError(f"--kernels {kernels!r}: expected one of {', '.join(KERNEL_MODES)}")
    if max_kernel_runs < 1:
        raise ColabkitError(f"--kernel-runs must be at least 1, got {max_kernel_runs}")
    if cluster and jobs != 1:
        raise ColabkitError("--jobs does not apply with --cluster: each Dask worker thread runs one combination")
    if timeout_s is not None and not timeout_s > 0:
        raise ColabkitError(f"--timeout must be more than 0 seconds, got {timeout_s:g}")
    if wait_quiet_s is not None and jobs != 1:
        raise ColabkitError("--wait-quiet waits for an idle host before each run; with --jobs the other runs keep it "
                            "busy: use --jobs 1")
    if max_repeats is not None and target_ci is None:
        raise ColabkitError("--max-repeats goes with --target-ci (it caps the runs made to reach the target)")
    if target_ci is not None and not 0 < target_ci < 1:
        raise ColabkitError(f"--target-ci must be a share between 0 and 100 %, got {target_ci}")
    if max_repeats is not None and max_repeats < 1:
        raise ColabkitError(f"--max-repeats must be at least 1, got {max_repeats}")


def prepare(grid_paths: list[str | Path], preset: str | None = None, device: str | None = None,
            out: str | Path = "outputs", available: Mapping[str, int] | None = None,
            overrides: dict[str, Any] | None = None, force: bool = False,
            rerun_unreadable: bool = False, *, cluster: str | None = None,
            repeats: int | None = None) -> list[Decision]:
    """What `--dry-run` shows: validate, check the output folder, find the devices (detected unless
    `available` is given; a cluster's workers' with `cluster`) and decide every run of every
    combination (`repeats` of each, or as its grid says). Runs and writes nothing."""
    combinations = plan(grid_paths, preset, device, overrides, out, repeats)
    check_output_folder(out)
    available = cpu_only(combinations, available, cluster)
    with open_executor(Path(out), RunOptions(), available=available, cluster=cluster) as executor:
        return decide(combinations, executor.out, executor.inventory(), force, rerun_unreadable)


def run_sweep(
    grid_paths: list[str | Path],
    preset: str | None = None,
    device: str | None = None,
    out: str | Path = "outputs",
    available: Mapping[str, int] | None = None,
    kernel_name: str | None = None,
    echo: Callable[[str], None] = print,
    *,
    overrides: dict[str, Any] | None = None,
    force: bool = False,
    rerun_unreadable: bool = False,
    timeout_s: float | None = None,
    jobs: int = 1,
    html: bool | str | None = None,
    progress: bool = False,
    worker_grace_s: float = 60,
    cluster: str | None = None,
    shared_out: bool | None = None,
    kernels: str | None = None,
    max_kernel_runs: int = DEFAULT_MAX_RUNS,
    repeats: int | None = None,
    target_ci: float | None = None,
    max_repeats: int | None = None,
    wait_quiet_s: float | None = None,
) -> list[Outcome]:
    """Run every combination that is not finished yet; return one Outcome per combination.

    Nothing runs if a grid file, override or combination is invalid (GridError), or if `out`
    cannot be written or is locked by another sweep (OutputFolderError, SweepLockedError): all
    decided before devices are detected or a cluster contacted. Combinations whose record is ok
    with a matching fingerprint are kept (`resumed`) unless `force`; those that cannot run here are
    recorded as skipped; record files that cannot be read are set aside untouched unless
    `rerun_unreadable`. A file-system fault of one combination fails that combination only.
    `cluster` runs them on a Dask cluster (`shared_out`: see colabkit.sweep.cluster.DaskExecutor).
    `kernels` ("fresh" or "reuse", colabkit.sweep.kernels) and `html` ("all", "failed", "none"; True:
    as the grid says, False: none) override what each grid file or preset asks for (default fresh
    kernels, HTML for every run); a reused kernel serves at most `max_kernel_runs` runs. Devices are
    detected only when some combination asks for more than a CPU; a CPU's bandwidth is measured once for
    all the runs (`host_facts`). `repeats` runs each combination that many times (else as its grid file
    says), each run in its own kernel with its own record; `target_ci` (a share: 0.03) adds rounds until
    each headline's 95 % interval is within +/- that of its median, up to `max_repeats` runs;
    `wait_quiet_s` waits up to that long for a quiet host before each run.
    Raises SweepInterrupted (with the outcomes so far) on Ctrl-C or SIGTERM.
    """
    _check_arguments(jobs, timeout_s, cluster, kernels, max_kernel_runs, wait_quiet_s, target_ci, max_repeats)
    if isinstance(html, bool):  # True: as each grid says (else every run); False: none
        html = None if html else "none"
    if html is not None and html not in HTML_MODES:
        raise ColabkitError(f"--html {html!r}: expected one of {', '.join(HTML_MODES)}")
    combinations = plan(grid_paths, preset, device, overrides, out, repeats)
    check_output_folder(out)
    available = cpu_only(combinations, available, cluster)
    if target_ci is not None and max_repeats is None:
        max_repeats = DEFAULT_MAX_REPEATS
    options = RunOptions(timeout_s=timeout_s, kernel_name=kernel_name, html=html, cwd=str(Path.cwd()), jobs=jobs,
                         worker_grace_s=worker_grace_s, kernels=kernels, max_kernel_runs=max_kernel_runs,
                         wait_quiet_s=wait_quiet_s, target_ci=target_ci, max_repeats=max_repeats)
    with open_executor(Path(out), options, available=available, cluster=cluster, shared_out=shared_out) as executor:
        out = executor.out  # a cluster's workers need it absolute
        with sweep_lock(out):
            decisions = decide(combinations, out, executor.inventory(), force, rerun_unreadable)
            outcomes = [_settled(decision, out, rerun_unreadable) for decision in decisions
                        if decision.action not in (SweepAction.RUN, SweepAction.RERUN)]
            to_run = [decision for decision in decisions if decision.action in (SweepAction.RUN, SweepAction.RERUN)]
            echo(_first_line(len(decisions), len(to_run), outcomes, executor.where))
            for note in executor.notes(to_run):
                echo(note)
            with host_facts([decision.combination for decision in to_run]) as facts:
                executor.options = dataclasses.replace(options, host_facts=facts)
                _run(executor, to_run, echo, progress, outcomes)
                if target_ci is not None and max_repeats is not None:
                    decisions += _until_target(executor, decisions, target_ci, max_repeats, force, echo, progress,
                                               outcomes)
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


def _until_target(executor: Executor, decisions: list[Decision], target: float, max_repeats: int, force: bool,
                  echo: Callable[[str], None], progress: bool, outcomes: list[Outcome]) -> list[Decision]:
    """Rounds of one more run of each combination whose headline interval is wider than `target`
    (colabkit.sweep.target), until none is or each has `max_repeats` runs; the decisions of those runs.
    The combinations that never got there are named at the end."""
    # one entry per combination (repeat 1 stands for all), of those that ran or finished earlier
    firsts = {decision.combination.with_repeat(1).output_base(executor.out): decision.combination.with_repeat(1)
              for decision in decisions if decision.action in (SweepAction.RUN, SweepAction.RERUN, SweepAction.DONE)}
    added: list[Decision] = []
    proposed: set[Path] = set()
    while True:
        more, states = next_round(firsts.values(), executor.out, target, max_repeats, proposed)
        if not more:
            break
        round_decisions = decide(more, executor.out, executor.inventory(), force)
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
