"""`python -m colabkit compare BASELINE CANDIDATE`: is the difference between two results folders real?

Two folders of records (before and after a TensorFlow upgrade, a T4 and an L4 runtime, two Colab
sessions) are read through colabkit.records (each record checked once; a combination's ok records
are its runs, every one counted). Their combinations are paired by the work they did, as the report
pairs them (colabkit.records.identity: the device found, the backend that ran, the global batch, the
sizes used, the other parameters), the device's model apart: two sides on different CPU or GPU models
are paired, and every output names the models. `by` names what is left out of the pairing, to compare
across one axis: `--by device` leaves out the device (its kind, replicas, workers and model), so a
CPU run at a global batch of 256 pairs with 128 per replica on 2 replicas, never with 256 per replica
on 2. Per pair, on its experiment's declared headline: each side's number of runs, median and
interval (with the level it reaches), the ratio candidate / baseline with its interval and the
verdict, read in the headline's direction (colabkit.statistics: faster, slower, no difference
resolved, too few runs). An inference combination is compared on each figure it has, each over its runs:
its single-stream p50, p90 (its headline) and p99 latency and its offline samples/s per batch
(colabkit.experiments.inference.inference_figures), one row each; a record's intervals from inside one run
never enter. `mode` keeps inference and training runs apart. Nothing is left out without a word: the files set
aside as not readable records and the combinations found on one side only are named.

`--by cost` judges on cost instead (`cost` is no parameter: it leaves nothing more out of the pairing): each
combination on the dollars of its mode's unit of work (colabkit.cost.per_unit.HEADLINE_UNITS: per 1,000 training
samples, 1,000 offline inferences, a million generated tokens), each run's seconds at its runtime's rate (the
shipped rates, or `rates_file`'s: colabkit.cost.rates), verdicts cheaper, costlier, no difference resolved. A pair
whose runs have no rate on a side is listed as not judged, with why.

`exclude_busy` (`--exclude-busy`) leaves out the runs whose host was not quiet (`host_quiet` false), as
the report can. `fail_above` (`--fail-above 5%`) makes the comparison fail (exit status 1) when a combination's
candidate is resolved slower and its estimated slowdown exceeds that share: for CI. A folder that
cannot be read, or two folders with nothing in common, is a one-line error (ColabkitError, exit 2).
This module reads records only; it never imports the report.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colabkit.cost.per_unit import headline_unit, record_costs
from colabkit.cost.rates import RateTable, load_rates
from colabkit.errors import ColabkitError
from colabkit.experiments import find
from colabkit.experiments.declaration import Headline
from colabkit.experiments.inference import headline_for, inference_figures, is_inference, voided_by
from colabkit.records.loading import LoadedRecords, load_records
from colabkit.records.identity import record_mode, work_key
from colabkit.records.merging import RunGroup
from colabkit.statistics import (RATIO_METHOD, TOLERANCE, Comparison, Interval, Verdict, VerdictWords, compare,
                                 finite, percent, verdict_text)
from colabkit.sweep.console import text_table

HEADER = ("notebook", "combination", "device model", "measure", "baseline n", "baseline median", "baseline interval",
          "candidate n", "candidate median", "candidate interval", "candidate / baseline", "ratio interval", "change",
          "verdict")


@dataclass(frozen=True)
class Side:
    """One folder's combinations with ok runs, by the key of the work they did (`by` left out): each
    its records (RunGroup) and, per figure it is compared on, that figure of each run."""

    folder: str
    runs: dict[str, tuple[RunGroup, dict[Headline, list[float]]]]
    skipped: list[str] = field(default_factory=list)  # notebooks without a declared headline
    busy_left_out: int = 0  # runs made on a busy host, left out (exclude_busy)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (file, why): every file set aside (records.loading)
    unpriced: dict[str, str] = field(default_factory=dict)  # by key: why a combination has no cost (--by cost)
    priced_by: set[str] = field(default_factory=set)  # the rates (their runtimes) that priced a run (--by cost)


@dataclass(frozen=True)
class Row:
    """One pair of combinations compared."""

    notebook: str
    description: str
    measure: str
    higher_is_better: bool
    comparison: Comparison
    baseline_model: str = "unknown"
    candidate_model: str = "unknown"

    @property
    def models(self) -> str:
        """'AMD EPYC', or 'AMD EPYC -> Intel Xeon' where the two sides ran on different models."""
        same = self.baseline_model == self.candidate_model
        return self.baseline_model if same else f"{self.baseline_model} -> {self.candidate_model}"

    @property
    def slowdown(self) -> float | None:
        """How much slower the candidate is (0.08: 8 % slower), in the headline's direction; None without a ratio."""
        ratio = self.comparison.ratio.estimate
        if ratio is None or ratio <= 0:
            return None
        return (1 / ratio if self.higher_is_better else ratio) - 1


def cost_measure(mode: str | None) -> Headline | None:
    """What `--by cost` judges runs of `mode` on: dollars per its unit of work (lower is better); None for a mode
    without one."""
    unit = headline_unit(mode)
    return None if unit is None else Headline(unit.column("usd"), f"$ per {unit.label}", "$", "lower")


def _costs(records: list[dict[str, Any]], rates: RateTable,
           priced_by: set[str]) -> tuple[dict[Headline, list[float]], str | None]:
    """A combination's runs' dollars per unit of work at `rates`, or {} and why there are none; the rates that
    priced a run added to `priced_by`."""
    mode = record_mode(records[-1])
    figure = cost_measure(mode)
    if figure is None:
        return {}, f"its mode ({mode}) has no unit of work to price"
    costs = [record_costs(record, rates) for record in records]
    priced_by.update(cost["cost.runtime"] for cost in costs if cost.get("cost.usd_per_hour") is not None)
    values = finite(cost.get(figure.metric) for cost in costs)
    if values:
        return {figure: values}, None
    reasons = [cost["cost.no_rate"] for cost in costs if cost.get("cost.no_rate")]
    return {}, reasons[-1] if reasons else f"no run has a time per {headline_unit(mode).label}"  # type: ignore[union-attr]


def read_side(folder: str | Path, by: Sequence[str], exclude_busy: bool = False,
              rates: RateTable | None = None) -> Side:
    """The combinations with ok runs below `folder`, keyed by the work they did (colabkit.records.identity;
    the device model and `by` left out); with `exclude_busy`, without the runs made on a busy host; with `rates`,
    each valued on its cost (`cost_measure`), or listed in `unpriced` with why it has none.
    ColabkitError when the folder does not exist, holds no readable ok record, or holds two combinations
    that only `by` (or the device model) tells apart."""
    path = Path(folder)
    if not path.exists():
        raise ColabkitError(f"compare: results folder {folder} does not exist")
    loaded: LoadedRecords = load_records(path)
    runs: dict[str, tuple[RunGroup, dict[Headline, list[float]]]] = {}
    skipped = set()
    busy = 0
    unpriced: dict[str, str] = {}
    priced_by: set[str] = set()
    for group in loaded.combinations():
        counted = [path for path in group.repeats
                   if not (exclude_busy and loaded.records[path].get("host_quiet") is False)]
        busy += len(group.repeats) - len(counted)
        if not counted:
            continue
        experiment = find(group.notebook)
        if experiment is None:
            skipped.add(group.notebook)
            continue
        key = work_key(group.work, ("device_model", *by))
        if rates is not None:
            values, why = _costs([loaded.records[path] for path in counted], rates, priced_by)
            if why:
                unpriced[key] = why
        else:
            metrics = [loaded.records[path]["metrics"] for path in counted]
            figures = (inference_figures(name for values in metrics for name in values) if is_inference(group.params)
                       else [headline_for(experiment, group.params)])
            values = {figure: finite(values.get(figure.metric) for values in metrics
                                     if values.get(voided_by(figure.metric) or figure.metric) is not None)
                      for figure in figures}
            values = {figure: runs_of for figure, runs_of in values.items() if runs_of}  # too few queries in every run
        if key in runs:  # two combinations of one side pair alike once `by` is left out: a pair would mix them
            raise ColabkitError(f"compare: {folder} holds several combinations that differ only in "
                                f"{', '.join(by) or 'the device model'} ({group.notebook}: {runs[key][0].description}, "
                                f"{group.description}); compare one of them at a time")
        runs[key] = (group, values)
    if not runs:
        why = (f"; {len(loaded.rejected)} file(s) set aside, the first {loaded.rejected[0][0]}: {loaded.rejected[0][1]}"
               if loaded.rejected else "")
        raise ColabkitError(f"compare: no readable ok record of a declared experiment below {folder}{why}")
    return Side(str(folder), runs, sorted(skipped), busy, list(loaded.rejected), unpriced, priced_by)


def _differs(baseline: dict[str, Any], candidate: dict[str, Any], by: Sequence[str]) -> str:
    """'device: cpu:2 -> cpu, batch_size: 128 -> 256': the parameters two paired combinations asked for
    differently (the same work asked for in other words, or `by`), `by` first."""
    names = [*by, *sorted((baseline.keys() | candidate.keys()) - set(by))]
    return ", ".join(f"{name}: {baseline.get(name)} -> {candidate.get(name)}" for name in names
                     if baseline.get(name) != candidate.get(name))


def _words(figure: Headline) -> VerdictWords:
    """The verdict's words for `figure`: cheaper or costlier for a cost (`cost_measure`), else faster or slower."""
    return "cost" if figure.metric.startswith("cost.") else "speed"


def compare_sides(before: Side, after: Side, by: Sequence[str] = (), tolerance: float = TOLERANCE) -> list[Row]:
    """Every combination the two sides (read_side) have in common (parameters equal but `by`), compared on its
    headline (or its cost, where the sides were read with rates); ColabkitError (one line) when they share no
    combination, or none with a cost on both sides."""
    baseline, candidate = before.folder, after.folder
    rows = []
    for key, (ours, values) in before.runs.items():
        if key not in after.runs:
            continue
        theirs, other_values = after.runs[key]
        across = _differs(ours.params, theirs.params, by)
        for headline in (figure for figure in values if figure in other_values):
            rows.append(Row(ours.notebook, ours.description + (f" ({across})" if across else ""), headline.label,
                            headline.higher_is_better,
                            compare(values[headline], other_values[headline], headline.higher_is_better, tolerance,
                                    _words(headline)),
                            *(str(group.work.get("device_model") or "unknown") for group in (ours, theirs))))
    common = [key for key in before.runs if key in after.runs]
    if not rows and common and (before.unpriced or after.unpriced):
        why = next(side.unpriced[key] for key in common for side in (before, after) if key in side.unpriced)
        raise ColabkitError(f"compare --by cost: none of the {len(common)} combination(s) {baseline} and {candidate} "
                            f"have in common has a cost on both sides: {why}")
    if not rows and common:  # they share runs, but no figure was measured on both sides
        group = before.runs[common[0]][0]
        raise ColabkitError(f"compare: {baseline} and {candidate} have {len(common)} combination(s) in common, but "
                            f"none with a figure measured on both sides (the first: {group.notebook} "
                            f"{group.description}): their ok runs lack the figure it is compared on")
    if not rows:
        hint = "" if by else "; --by device (or another parameter) compares across that parameter"
        raise ColabkitError(f"compare: {baseline} ({len(before.runs)} combination(s)) and {candidate} "
                            f"({len(after.runs)}) have no combination in common{hint}")
    return rows


def notes(before: Side, after: Side, rows: list[Row]) -> list[str]:
    """What the table leaves out or cannot show, one line each: the device models where the two sides
    differ, the combinations found on one side only, the records of notebooks no experiment declares,
    the files set aside (not readable records, not measurements, runs their experiment no longer offers), with why."""
    differ = Counter(models for models, _, _ in {(row.models, row.notebook, row.description) for row in rows
                                                 if row.baseline_model != row.candidate_model})  # an inference one: once
    lines = [f"measured on different device models (each ratio compares the models too): {models} "
             f"({count} combination(s))" for models, count in differ.items()]
    lines += [f"only in {side.folder}, compared with nothing: {group.notebook} {group.description}"
              for side, other in ((before, after), (after, before))
              for key, (group, _) in side.runs.items() if key not in other.runs]
    lines += [f"not compared, no experiment declares it: {notebook} in {side.folder}" for side in (before, after)
              for notebook in side.skipped]
    lines += [f"not judged on cost: {group.notebook} {group.description} in {side.folder}: {side.unpriced[key]}"
              for side, other in ((before, after), (after, before))
              for key, (group, _) in side.runs.items() if key in side.unpriced and key in other.runs]
    lines += list(dict.fromkeys(f"set aside: {path}: {why}"  # a folder compared with itself: each file once
                                for side in (before, after) for path, why in side.rejected))
    return lines


def _number(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _interval(interval: Interval) -> str:
    """'[1.02, 1.31] 75 %': the interval and the level it reaches (its runs are in the n columns)."""
    if not interval.resolved:
        return "no interval"
    return f"[{_number(interval.low)}, {_number(interval.high)}] {percent(interval.confidence)}"


def table_rows(rows: list[Row]) -> list[tuple[str, ...]]:
    """The comparison as text cells, HEADER first."""
    lines = [HEADER]
    for row in rows:
        base, cand, ratio = row.comparison.baseline, row.comparison.candidate, row.comparison.ratio
        change = row.comparison.change
        lines.append((row.notebook, row.description, row.models, row.measure, str(base.n), _number(base.estimate),
                      _interval(base), str(cand.n), _number(cand.estimate), _interval(cand), _number(ratio.estimate),
                      _interval(ratio), "-" if change is None else f"{100 * change:+.1f} %",
                      verdict_text(row.comparison.verdict, ratio)))
    return lines


INTERVALS = (f"Intervals: a median's between two of its runs' order statistics; a ratio's from {RATIO_METHOD}, "
             "at the lower of the two sides' levels whatever their spreads (docs/statistics.md); an inference "
             "figure's over runs too, never from inside one run (docs/inference.md).")


def to_markdown(rows: list[Row], baseline: str, candidate: str, tolerance: float = TOLERANCE,
                notes: Sequence[str] = ()) -> str:
    """A Markdown page: what was compared (with the `tolerance` the verdicts used), the table, then
    the `notes` (what the table leaves out or cannot show) as a list."""
    cells = table_rows(rows)
    text = [f"# {candidate} against {baseline}", "",
            "Per combination, on its experiment's headline: each side's runs, median and interval with the level it "
            "reaches (75 % at 3 runs, 95 % or more from 6; docs/statistics.md), "
            "the ratio candidate / baseline with its interval, and the verdict (faster or slower, cheaper or costlier, "
            "only where the "
            f"interval lies beyond +/- {100 * tolerance:g} %).", "", INTERVALS, "",
            "| " + " | ".join(cells[0]) + " |", "|" + "---|" * len(cells[0])]
    text += ["| " + " | ".join(cell.replace("|", "/") for cell in line) + " |" for line in cells[1:]]
    text += ["", "Notes:", "", *(f"- {line}" for line in notes)] if notes else []
    return "\n".join(text) + "\n"


def to_csv(rows: list[Row]) -> str:
    """The comparison as CSV, numbers unformatted."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["notebook", "combination", "baseline_device_model", "candidate_device_model", "measure",
                     "baseline_n", "baseline_median", "baseline_ci_low", "baseline_ci_high", "baseline_ci_level",
                     "candidate_n", "candidate_median", "candidate_ci_low", "candidate_ci_high", "candidate_ci_level",
                     "ratio", "ratio_ci_low", "ratio_ci_high", "ratio_ci_level", "verdict"])
    for row in rows:
        base, cand, ratio = row.comparison.baseline, row.comparison.candidate, row.comparison.ratio
        writer.writerow([row.notebook, row.description, row.baseline_model, row.candidate_model, row.measure, base.n,
                         base.estimate, base.low, base.high, _level(base), cand.n, cand.estimate, cand.low, cand.high,
                         _level(cand), ratio.estimate, ratio.low, ratio.high, _level(ratio), row.comparison.verdict.value])
    return buffer.getvalue()


def _level(interval: Interval) -> float | None:
    return interval.confidence if interval.resolved else None


def regressions(rows: list[Row], fail_above: float) -> list[Row]:
    """The rows whose candidate is resolved slower (costlier) by more than `fail_above` (0.05: 5 %)."""
    return [row for row in rows if row.comparison.verdict in (Verdict.SLOWER, Verdict.COSTLIER)
            and row.slowdown is not None and row.slowdown > fail_above]


def summary_line(rows: list[Row]) -> str:
    """'12 combination(s) in common: 2 faster, 1 slower, 9 no difference resolved' (with inference combinations, which
    give a row per figure: '2 combination(s) in common, 7 figures compared: ...')."""
    counts = Counter(row.comparison.verdict.value for row in rows)
    combinations = len({(row.notebook, row.description) for row in rows})
    figures = f", {len(rows)} figures compared" if len(rows) != combinations else ""
    return f"{combinations} combination(s) in common{figures}: " + ", ".join(f"{count} {name}"
                                                                            for name, count in counts.items())


def _check_destination(path: str) -> None:
    """ColabkitError (one line) when `path` cannot be written: its folder missing or read-only, or a folder there."""
    target = Path(path)
    folder = target.parent
    why = ("no such folder" if not folder.is_dir() else "permission denied" if not os.access(folder, os.W_OK)
           else "is a folder" if target.is_dir() else None)
    if why:
        raise ColabkitError(f"compare: cannot write {path}: {why}")


def _write(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ColabkitError(f"compare: cannot write {path}: {exc.strerror or exc}") from None


def run_compare(baseline: str, candidate: str, by: Sequence[str] = (), markdown: str | None = None,
                csv_path: str | None = None, fail_above: float | None = None, tolerance: float = TOLERANCE,
                exclude_busy: bool = False, rates_file: str | None = None) -> int:
    """The `compare` verb: print the table, write Markdown/CSV on request; 1 when `fail_above` finds a
    regression, else 0. `by` naming `cost` judges on cost, at the shipped rates or `rates_file`'s. The Markdown and
    CSV destinations and the rates file are checked before anything is read."""
    on_cost = "cost" in by
    by = [name for name in by if name != "cost"]
    if rates_file and not on_cost:
        raise ColabkitError("compare: --rates prices runs for --by cost: add --by cost, or drop --rates")
    rates = load_rates(rates_file) if on_cost else None
    for path in (markdown, csv_path):
        if path:
            _check_destination(path)
    before, after = read_side(baseline, by, exclude_busy, rates), read_side(candidate, by, exclude_busy, rates)
    rows = compare_sides(before, after, by, tolerance)
    print("\n".join(text_table(table_rows(rows))))
    print(summary_line(rows))
    print(INTERVALS)
    said = notes(before, after, rows)
    for line in said:
        print(line)
    if rates:
        priced_by = before.priced_by | after.priced_by
        for line in rates.sources(priced_by):
            print(f"rates: {line}")
        unused = rates.unused(priced_by)
        if unused:
            print(unused)
    if exclude_busy:
        print(f"left out, made on a busy host: {before.busy_left_out} run(s) of {baseline}, "
              f"{after.busy_left_out} of {candidate}")
    if markdown:
        _write(markdown, to_markdown(rows, baseline, candidate, tolerance, said))
        print(f"markdown: {markdown}")
    if csv_path:
        _write(csv_path, to_csv(rows))
        print(f"csv: {csv_path}")
    if fail_above is not None:
        worse = regressions(rows, fail_above)
        for row in worse:
            print(f"regression: {row.notebook} {row.description}: {100 * row.slowdown:.1f} % "  # type: ignore[operator]
                  f"{row.comparison.verdict.value} (beyond {100 * fail_above:g} %)")
        return 1 if worse else 0
    return 0
