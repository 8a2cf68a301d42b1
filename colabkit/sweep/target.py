"""`sweep --target-ci 3%`: more runs, in interleaved rounds, until each combination's headline is known
to within the target (colabkit.statistics.median_ci over its ok runs in OUT): one more run per round
for each combination above the target or under MIN_RUNS, up to `max_repeats`. Combinations without a
declared headline, or that cannot run here, are left as they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from colabkit.errors import RecordError
from colabkit.experiments import find
from colabkit.records.loading import checked_record
from colabkit.statistics import Interval, median_ci
from colabkit.sweep.combination import Combination
from colabkit.sweep.execution import RunFiles
from colabkit.sweep.fingerprint import fingerprint

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
