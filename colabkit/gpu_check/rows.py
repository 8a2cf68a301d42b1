"""The GPU check's rows, its one table (text, Markdown, JSON) and its exit status.

A row is a typed value: what was checked (`name`), the verdict (PASS, FAIL, SKIP, or RAN on the CPU
rehearsal), the figure it rests on, the rule that turned the figure into the verdict, and for any verdict
but PASS the reason. The check exits 0 only when no row failed: a SKIP (the machine lacks what a row needs)
is not a failure, nor a RAN (measured where the rule does not apply, so not judged).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from colabkit.io import write_atomic

EXIT_PASSED, EXIT_FAILED = 0, 1
NO_GPU_LINE = "gpu-check: no NVIDIA GPU here (nvidia-smi lists none); nothing to check"


class CheckVerdict(StrEnum):
    """A row's verdict; the member is the plain string it prints as."""

    PASS = "PASS"
    FAIL = "FAIL"
    SKIP = "SKIP"  # the machine lacks what the row needs (a backend, a second GPU, a table entry): not a failure
    RAN = "RAN"  # measured on the CPU rehearsal (`--rehearse-on-cpu`): its figure is shown, its GPU rule not applied


@dataclass(frozen=True)
class CheckRow:
    """One line of the table. `values` holds the numbers behind the figure (they go to the JSON)."""

    name: str
    verdict: CheckVerdict
    figure: str
    rule: str
    reason: str = ""  # why it was skipped or failed; empty for PASS
    stage: str = ""  # the stage that measured it (its time is in the table's footer)
    values: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", CheckVerdict(self.verdict))
        if self.verdict != CheckVerdict.PASS and not self.reason:
            raise ValueError(f"row {self.name!r}: a {self.verdict} row must say why")

    def in_stage(self, stage: str) -> CheckRow:
        return replace(self, stage=stage)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "verdict": str(self.verdict), "figure": self.figure, "rule": self.rule,
                "reason": self.reason, "stage": self.stage, "values": dict(self.values)}


def exit_code(rows: Sequence[CheckRow]) -> int:
    """0 when no row failed (SKIP rows included), else 1."""
    return EXIT_FAILED if any(row.verdict == CheckVerdict.FAIL for row in rows) else EXIT_PASSED


def counts(rows: Sequence[CheckRow]) -> dict[str, int]:
    return {str(verdict): sum(row.verdict == verdict for row in rows) for verdict in CheckVerdict}


def table_summary(rows: Sequence[CheckRow]) -> str:
    """'gpu-check: 18 PASS, 1 FAIL, 2 SKIP: FAILED' (or ': passed'; RAN rows counted where there are any)."""
    tally = counts(rows)
    outcome = "FAILED" if exit_code(rows) else "passed"
    ran = f", {tally['RAN']} RAN (not judged)" if tally["RAN"] else ""
    return f"gpu-check: {tally['PASS']} PASS, {tally['FAIL']} FAIL, {tally['SKIP']} SKIP{ran}: {outcome}"


def _stage_line(stages: Mapping[str, tuple[float, float]]) -> str:
    parts = [f"{stage} {seconds:.0f}/{budget:.0f} s" for stage, (seconds, budget) in stages.items()]
    total = sum(seconds for seconds, _ in stages.values())
    budget = sum(budget for _, budget in stages.values())
    return f"time (stage actual/budget): {', '.join(parts)}; total {total:.0f} s of {budget:.0f} s"


def table_text(rows: Sequence[CheckRow], title: str, stages: Mapping[str, tuple[float, float]] | None = None) -> str:
    """The table for a terminal: one line per row (name, verdict, figure), the reasons of the FAIL
    and SKIP rows under it, then the stages' times against their budgets and the summary line."""
    width = max([len(row.name) for row in rows] + [4])
    lines = [title, f"{'row':<{width}}  verdict  figure", f"{'-' * width}  -------  {'-' * 40}"]
    lines += [f"{row.name:<{width}}  {row.verdict:<7}  {row.figure}" for row in rows]
    notes = [row for row in rows if row.verdict != CheckVerdict.PASS]
    if notes:
        lines.append("")
        lines += [f"{row.verdict} {row.name}: {row.reason}" for row in notes]
    if stages:
        lines += ["", _stage_line(stages)]
    lines += ["", table_summary(rows)]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table_markdown(rows: Sequence[CheckRow], title: str, stages: Mapping[str, tuple[float, float]] | None = None) -> str:
    """The table in Markdown, with each row's rule and reason (for docs and notes)."""
    lines = [f"**{_cell(title)}**", "", "| row | verdict | figure | rule | why |", "|---|---|---|---|---|"]
    lines += [f"| {_cell(row.name)} | {row.verdict} | {_cell(row.figure)} | {_cell(row.rule)} | {_cell(row.reason)} |"
              for row in rows]
    if stages:
        lines += ["", _stage_line(stages)]
    lines += ["", table_summary(rows)]
    return "\n".join(lines) + "\n"


def table_payload(rows: Sequence[CheckRow], meta: Mapping[str, Any],
                  stages: Mapping[str, tuple[float, float]] | None = None) -> dict[str, Any]:
    """The JSON form: the machine and run (`meta`), every row, the stages' times, the exit status."""
    return {"meta": dict(meta), "rows": [row.as_dict() for row in rows],
            "stages": {stage: {"seconds": seconds, "budget_s": budget} for stage, (seconds, budget) in
                       (stages or {}).items()},
            "counts": counts(rows), "exit_code": exit_code(rows)}


def write_tables(folder: Path, rows: Sequence[CheckRow], title: str, meta: Mapping[str, Any],
                 stages: Mapping[str, tuple[float, float]]) -> str:
    """The table written in its three forms into `folder` (table.txt, table.md, table.json); its text."""
    text = table_text(rows, title, stages)
    forms = {"table.txt": text + "\n", "table.md": table_markdown(rows, title, stages),
             "table.json": json.dumps(table_payload(rows, meta, stages), indent=2, default=str) + "\n"}
    for name, content in forms.items():
        write_atomic(folder / name, content)
    return text
