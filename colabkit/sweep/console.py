"""What a user of a sweep sees: the progress bar and a line per run, the summary table at the end,
and the table of a dry run. Text only; nothing here runs or decides anything."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from colabkit.records.run_error import first_meaningful_line
from colabkit.sweep.decide import Decision, SweepAction
from colabkit.sweep.expand import Combination
from colabkit.sweep.folder import SweepStatus, lock_holder
from colabkit.sweep.runners.execute import Outcome
from colabkit.timing.clock import format_duration


class Progress:
    """One progress bar over the combinations to run (ETA, current ones named) and a line per run."""

    def __init__(self, total: int, jobs: int, echo: Callable[[str], None], bar: bool) -> None:
        from tqdm import tqdm

        self.total, self.jobs, self.echo, self.done = total, jobs, echo, 0
        self.running: list[str] = []
        self.seconds: list[float] = []
        self.bar = tqdm(total=total, unit="run", desc="sweep", file=sys.stderr, dynamic_ncols=True,
                        disable=not bar or total == 0)
        self.with_bar = bar and total > 0

    def say(self, line: str) -> None:
        if self.with_bar:
            with self.bar.external_write_mode():
                self.echo(line)
        else:
            self.echo(line)

    def started(self, combination: Combination) -> None:
        self.running.append(combination.label)
        self.bar.set_postfix_str(" | ".join(self.running), refresh=True)
        if not self.with_bar:  # in a log file, say what runs (it names the culprit if one hangs)
            self.say(f"[{self.done + len(self.running)}/{self.total}] start  {combination.label}")

    def finished(self, outcome: Outcome) -> None:
        label = outcome.combination.label
        if label in self.running:
            self.running.remove(label)
        self.done += 1
        self.seconds.append(outcome.seconds)
        left = self.total - self.done
        eta = f"; {format_duration(sum(self.seconds) / len(self.seconds) * left / self.jobs)} left" if left else ""
        note = f" - {first_meaningful_line(outcome.message)}" if outcome.message else ""
        self.say(f"[{self.done}/{self.total}] {outcome.status:<6} {label} ({outcome.seconds:.1f} s{eta}){note}")
        self.bar.set_postfix_str(" | ".join(self.running), refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def text_table(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows (the first a header) as aligned plain-text lines, with a rule under the header."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return lines


def outcomes_table(outcomes: list[Outcome]) -> str:
    """A plain-text table of the outcomes and their counts, one line per combination (a message
    over several lines, as TensorFlow's are, shows its first meaningful line)."""
    rows = [("notebook", "device", "combination", "status", "seconds", "note")]
    for o in outcomes:
        seconds = "-" if o.resumed or o.status == "skipped" else f"{o.seconds:.1f}"
        rows.append((o.combination.name, o.combination.device, o.combination.run_slug, o.status, seconds,
                     first_meaningful_line(o.message)[:100]))
    lines = text_table(rows)
    counts = {status: sum(o.status == status and not o.set_aside for o in outcomes)
              for status in ("ok", "failed", "skipped")}
    ran = [o for o in outcomes if not o.resumed and o.status != "skipped"]
    lines.append(", ".join(f"{count} {status}" for status, count in counts.items())
                 + f"; {sum(o.resumed for o in outcomes)} of the ok finished earlier; "
                 + f"ran {len(ran)}, {sum(o.seconds for o in ran):.1f} s in all")
    aside = [o for o in outcomes if o.set_aside]
    if aside:
        folders = sorted({str(o.record_path.parent) for o in aside})
        lines.append(f"{len(aside)} set aside: record file(s) that cannot be read, kept as they are, in "
                     f"{', '.join(folders)} (fix or move them, or run again with --rerun to replace them)")
    return "\n".join(lines)


def outcomes_report(outcomes: list[Outcome]) -> tuple[list[str], int]:
    """The summary of a sweep's outcomes (the table, then each failure with the files to inspect, each record set
    aside, the runs refused as too large) and its exit status: 1 where something needs a look, else 0."""
    lines = [outcomes_table(outcomes)]
    failed = [outcome for outcome in outcomes if outcome.status == "failed"]
    for outcome in failed:
        base = str(outcome.record_path)[: -len(".json")]
        products = [path for path in (f"{base}.ipynb", f"{base}.log") if Path(path).exists()]
        inspect = f"\n        inspect {' and '.join(products)}" if products else ""
        lines.append(f"failed: {outcome.combination.label}: {outcome.message}{inspect}")
    aside = [outcome for outcome in outcomes if outcome.set_aside]
    lines += [f"set aside: {outcome.record_path}: {outcome.message}" for outcome in aside]
    too_large = [outcome for outcome in outcomes if outcome.too_large]
    if too_large:
        lines.append(f"too large: {len(too_large)} combination(s) refused before they ran, their model too large for "
                     "their device's memory (skipped records say the estimate); trim the grid or use a device with "
                     "more memory")
    return lines, 1 if failed or too_large or aside else 0


def dry_run_table(decisions: list[Decision], out: str | Path, notes: list[str] | tuple[str, ...] = ()) -> str:
    """What a sweep would do, per combination, and where each record is or would be; `notes` (the time
    estimate) go between the table and its summary line."""
    rows = [("notebook", "device", "combination", "action", "why")]
    rows += [(d.combination.name, d.combination.device, d.combination.run_slug, d.action, d.reason + d.note)
             for d in decisions]
    lines = text_table(rows) + list(notes)
    counts = {action.value: sum(d.action == action for d in decisions) for action in SweepAction}
    combinations = len({d.combination.with_repeat(1).output_base(Path(out)) for d in decisions})
    if combinations != len(decisions):  # repeats: say how the runs add up
        lines.append(f"{len(decisions)} runs of {combinations} combinations (their repeats, each its own kernel "
                     "and record; a combination that cannot run here is recorded as skipped once)")
    lines.append(f"would run {counts['run'] + counts['rerun']} ({counts['rerun']} of them again), keep "
                 f"{counts['done']} finished earlier, skip {counts['skip']}"
                 + (f", set aside {counts['set_aside']} (record file unreadable; --rerun replaces it)"
                    if counts["set_aside"] else "")
                 + (f", leave {counts['running']} running in the other sweep" if counts["running"] else "")
                 + f"; outputs in {out}")
    holder = lock_holder(out)
    if holder is not None:
        lines.append(f"a sweep (pid {holder}) is writing to {out} now: this sweep would be refused until it ends")
    return "\n".join(lines)


def format_status(status: SweepStatus) -> str:
    """The status as text: a table per notebook and device, then failures, skips and unfinished runs."""
    if not status.groups and not status.unreadable:
        return f"no records below {status.out} (nothing has run here, or this is not a sweep's output folder)"
    if not status.groups:
        return "\n".join([f"no readable records below {status.out}; {len(status.unreadable)} file(s) set aside:"]
                         + [f"unreadable {path}: {reason.removeprefix(f'{path}: ')}"
                            for path, reason in status.unreadable])
    rows = [("notebook", "device", "ok", "ok combinations", "failed", "skipped", "unfinished", "run time",
             "last finished (UTC)")]
    for group in status.groups.values():
        rows.append((group.notebook, group.device, str(group.counts["ok"]), str(len(group.combinations)),
                     *(str(group.counts[key]) for key in ("failed", "skipped", "unfinished")),
                     f"{group.seconds:.0f} s", group.last_finished[:19]))
    lines = text_table(rows)
    unreadable = f", {len(status.unreadable)} unreadable (set aside, not counted above)" if status.unreadable else ""
    lines.append(", ".join(f"{status.total(key)} {key}" for key in ("ok", "failed", "skipped", "unfinished"))
                 + unreadable)
    if status.lock_holder:
        lines.append(f"a sweep (pid {status.lock_holder}) is writing here now")
    for group in status.groups.values():
        for path, error in group.failures:
            cell = f" in In [{error['exec_count']}]" if error.get("exec_count") is not None else ""
            kind = f" [{error['kind']}]" if error.get("kind") else ""
            first_line = (str(error.get("message", "")).strip().splitlines() or [""])[0][:160]
            lines.append(f"failed  {path}: {error.get('type', 'Error')}{kind}{cell}: {first_line}")
        for reason, count in group.skip_reasons.items():
            lines.append(f"skipped {group.notebook} {group.device} ({count}): {reason}")
        for base in group.unfinished:
            note = "running now" if status.lock_holder else "interrupted; the next sweep runs it again"
            lines.append(f"unfinished {base}: {note}")
    for path, reason in status.unreadable:
        lines.append(f"unreadable {path}: {reason.removeprefix(f'{path}: ')}")
    return "\n".join(lines)
