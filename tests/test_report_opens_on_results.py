"""The report opens on results (issue 51): runs made on a busy host are one line of the Summary, their table is in the
appendix; every legend names each run it draws and lists only what is drawn; no figure draws nothing and no CSV
beside a figure is empty (a section says in its text what is missing instead)."""

from __future__ import annotations

from pathlib import Path

import report_fixtures as fx

from colabkit import report


# --- the Summary: busy runs in one line, their table in the appendix -------------------------------------------------

def busy_and_quiet(root: Path) -> Path:
    """CPU matmul runs: 3 at n = 256 on a busy host, 3 at n = 512 on a quiet one (a CPU only: no speedup table)."""
    fx.repeats(root, lambda run: fx.busy(fx.matmul("cpu", 256, 0.2 + run / 100)), 3, "n-256")
    fx.repeats(root, lambda run: {**fx.matmul("cpu", 512, 0.3 + run / 100), "host_quiet": True}, 3, "n-512")
    return root


def test_busy_runs_are_one_line_of_the_summary_and_a_table_of_the_appendix(tmp_path):
    data = report.load_report_data([busy_and_quiet(tmp_path)])
    summary = report.summary_section(data)
    assert not summary.warnings  # the Summary opens on its reading, not on a red box
    assert "runs_on_a_busy_host" not in summary.tables and not summary.tables  # nothing before a result
    lines = [text for text in summary.text if "busy host" in text]
    assert len(lines) == 1 and summary.text.index(lines[0]) == 1  # right after the reading
    assert lines[0].startswith("3 of the 6 ok run(s) were made on a busy host") and "\n" not in lines[0]
    assert "they count in the figures and intervals" in lines[0] and "the appendix (Records" in lines[0]
    appendix = report.overview_section(data).table("runs_on_a_busy_host")
    assert len(appendix) == 3 and appendix["counted"].all()
    assert set(appendix["why"]) == {"other processes took 40 % of the CPUs' time"}
    assert appendix["record"].str.contains("n-256").all()


def test_busy_runs_left_out_are_said_left_out_in_the_same_one_line(tmp_path):
    """(Every ok run left out: a red warning, as nothing is left to draw: test_report_inputs.)"""
    data = report.load_report_data([busy_and_quiet(tmp_path)], exclude_busy=True)
    summary = report.summary_section(data)
    (line,) = [text for text in summary.text if "busy host" in text]
    assert line.startswith("3 of the 6 ok run(s) were made on a busy host") and "are left out of the figures" in line
    assert not summary.warnings and not report.overview_section(data).table("runs_on_a_busy_host")["counted"].any()
