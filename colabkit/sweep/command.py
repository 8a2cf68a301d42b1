"""`python -m colabkit sweep` once its plan is made (from grid files, or read from a plan file: `sweep_plan_file`):
the dry run, the sweep on the runner its options name, and the summary with the exit status (0: nothing needs a
look; 1: a run failed, was set aside or refused as too large; 130: interrupted). SIGTERM stops it as Ctrl-C does.
A plan for Colab goes to its accelerators' sessions (colabkit.sweep.runners.colab.command)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from colabkit.errors import SweepInterrupted
from colabkit.io import write_atomic
from colabkit.stages import EXIT_INTERRUPTED, sigterm_stops
from colabkit.sweep.console import outcomes_report, outcomes_table
from colabkit.sweep.driver import dry_run, run_sweep
from colabkit.sweep.plan import SweepPlan, read_plan


def sweep_command(plan: SweepPlan, dry_run_only: bool = False, progress: bool | None = None,
                  save_to: Path | None = None) -> int:
    """Run `plan` (with `dry_run_only`, show what it would do); print its summary; the exit status. `progress`: a
    progress bar (default: on an interactive terminal, or in Colab). `save_to`: the plan written there first, as
    JSON (what `sweep --plan FILE` runs: plan here, run there)."""
    if save_to is not None:
        write_atomic(save_to, plan.to_json())
        print(f"plan of {len(plan)} run(s) saved to {save_to}: `python -m colabkit sweep --plan {save_to}` runs it "
              "(with --out DIR, elsewhere)")
    if plan.options.colab:
        from colabkit.sweep.runners.colab.command import colab_sweep

        return colab_sweep(plan, dry_run_only)
    if dry_run_only:
        print(dry_run(plan))
        return 0
    if progress is None:
        progress = sys.stderr.isatty() or "COLAB_RELEASE_TAG" in os.environ
    try:
        with sigterm_stops():  # a runtime shutting down stops the sweep cleanly
            outcomes = run_sweep(plan, progress=progress)
    except SweepInterrupted as stopped:
        # The abandoned kernel's pending asyncio tasks would print "Task exception was never
        # retrieved ... DeadKernelError" tracebacks at exit: the interruption is reported below.
        logging.getLogger("asyncio").disabled = True
        print()
        if stopped.outcomes:
            print(outcomes_table(stopped.outcomes))
        print(f"\n{stopped}: finished combinations are kept; `python -m colabkit status {plan.out}` shows the "
              "unfinished ones; run the same command again to resume.", file=sys.stderr)
        return EXIT_INTERRUPTED
    lines, status = outcomes_report(outcomes)
    print("\n" + "\n".join(lines) + f"\n\noutputs: {plan.out}")
    return status


def sweep_plan_file(path: Path, out: Path | None = None) -> int:
    """`sweep --plan FILE`: the runs the file holds, as its options say (into `out`, else its own folder)."""
    return sweep_command(read_plan(path, out))
