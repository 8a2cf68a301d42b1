"""The report's body holds what a paper can use (issue 56): counted in its HTML, the body being everything before
the first `Appendix` heading. At most 1,800 words of prose, at most 8 columns per table, no column empty in every
row, a Summary of at most 200 words, captions of at most 50 words; no figure of the body draws a line through a
single point per series.

`body_counts(html)` is the one count: `python tests/test_report_limits.py REPORT.html` prints it for any report."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest
import report_fixtures as fx

from colabkit import report

WORD = re.compile(r"[^\W_]", re.UNICODE)  # a word has a letter or a digit: '|', '-' and '&#9888;' are not words
LIMITS = {"body_words": 1800, "summary_words": 200, "columns": 8, "empty_columns": 0, "caption_words": 50}


@dataclass
class BodyCounts:
    """What the body of a report holds: words of prose (everything but tables), of the Summary and of its longest
    caption; tables, the widest's columns, columns empty in every row (`empty`: table and column), figures."""

    body_words: int = 0
    summary_words: int = 0
    caption_words: int = 0
    tables: int = 0
    widest: int = 0
    empty_columns: int = 0
    figures: int = 0
    empty: list[str] = field(default_factory=list)
    headings: list[str] = field(default_factory=list)


def words(text: str) -> int:
    return sum(1 for token in text.split() if WORD.search(token))


def body_counts(html: str) -> BodyCounts:
    """Count the body of a report's HTML (report.html: code hidden)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for hidden in soup(["style", "script", "head"]):
        hidden.decompose()
    counts, section = BodyCounts(), ""
    prose: list[str] = []
    for element in soup.body.find_all(True):
        if element.name in ("h1", "h2") and element.get_text(strip=True).startswith("Appendix"):
            break
        if element.name in ("h1", "h2", "h3"):
            section = element.get_text(" ", strip=True).replace("¶", "").strip()
            counts.headings.append(section)
        if element.name == "img":
            counts.figures += 1
        if element.name == "table" and not element.find_parent("table"):
            counts.tables += 1
            head = element.find("thead")
            names = [cell.get_text(" ", strip=True) for cell in (head.find_all("tr")[-1] if head else
                                                                  element.find("tr")).find_all(["th", "td"])]
            rows = [[cell.get_text(" ", strip=True) for cell in row.find_all(["th", "td"])]
                    for row in (element.find("tbody") or element).find_all("tr")[0 if head else 1:]]
            counts.widest = max(counts.widest, len(names))
            for index, name in enumerate(names):
                if rows and all(index >= len(row) or not row[index] for row in rows):
                    counts.empty_columns += 1
                    counts.empty.append(f"{section}: {name}")
        if element.name in ("p", "li", "h1", "h2", "h3", "h4", "div") and not element.find_parent("table") \
                and not element.find(["p", "li", "h1", "h2", "h3", "h4", "div", "table"]):
            text = element.get_text(" ", strip=True)
            prose.append(text)
            counts.body_words += words(text)
            if section == "Summary":
                counts.summary_words += words(text)
            if re.match(r"(Figure|Table) \(", text):
                counts.caption_words = max(counts.caption_words, words(text.split(":", 1)[-1]))
    return counts


def over_limits(counts: BodyCounts) -> list[str]:
    """Each limit of the body that `counts` breaks, in words."""
    return [f"{name} = {value} > {LIMITS[key]}" for name, value, key in (
        ("words of prose in the body", counts.body_words, "body_words"),
        ("words in the Summary", counts.summary_words, "summary_words"),
        ("columns of the widest table", counts.widest, "columns"),
        ("empty columns", counts.empty_columns, "empty_columns"),
        ("words in the longest caption", counts.caption_words, "caption_words")) if value > LIMITS[key]]


def one_point_lines(figure) -> list[str]:
    """The series of a matplotlib figure drawn as a line (a line style, not markers alone) through fewer than two
    distinct x values: a line that joins nothing."""
    found = []
    for ax in figure.axes:
        for line in ax.get_lines():
            if line.get_label().startswith("_") or line.get_linestyle() in ("None", "", " ", "none"):
                continue
            if len(set(map(str, line.get_xdata()))) < 2:
                found.append(f"{ax.get_title() or ax.get_ylabel()}: {line.get_label()}")
    return found


# --- the report built over records -----------------------------------------------------------------------------------

FIXTURES = Path(__file__).parent / "fixtures" / "smoke-50bcef2"


@pytest.fixture(scope="module")
def smoke_report(tmp_path_factory):
    """The report of the sample of 50bcef2's smoke records (tests/fixtures/smoke-50bcef2: a CPU only). A report of
    three devices keeps the same limits: test_report's test of the report command."""
    return report.build_report([FIXTURES], tmp_path_factory.mktemp("smoke") / "report")


@pytest.mark.long("its fixture builds a whole report: every figure as PNG, PDF and SVG, the HTML twice")
def test_a_report_over_the_records_of_50bcef2_builds_and_keeps_the_bodys_limits(smoke_report):
    counts = body_counts(smoke_report.html.read_text(encoding="utf-8"))
    assert over_limits(counts) == [], counts
    assert counts.tables >= 5 and counts.figures >= 5  # each experiment's headline table and figure
    assert counts.headings[1:3] == ["Summary", "Not in this report, and why"]


@pytest.fixture(scope="module")
def smoke_sections():
    """The same records' sections, as the report builds them (contents.report_sections)."""
    return report.report_sections(report.load_report_data([FIXTURES]))


def test_no_figure_of_the_body_draws_a_line_through_a_single_point_and_no_caption_runs_over_50_words(smoke_sections):
    body = [item for section in smoke_sections for item in section.items if item.body]
    figures = [item for item in body if isinstance(item, report.ReportFigure)]
    assert len(figures) >= 6  # each experiment's headline figure, inference's and decode's
    assert {name: one_point_lines(figure.figure) for name, figure in
            ((figure.name, figure) for figure in figures) if one_point_lines(figure.figure)} == {}
    assert max(words(item.caption) for item in body) <= LIMITS["caption_words"]
    tables = [item.table for item in body if isinstance(item, report.ReportTable)]
    assert max(len(table.columns) for table in tables) <= LIMITS["columns"]


def test_the_checker_counts_what_it_claims():
    html = ("<html><body><h2>Summary</h2><p>Two words.</p><table><thead><tr><th>a</th><th>b</th></tr></thead>"
            "<tbody><tr><td>1</td><td></td></tr></tbody></table><img src='x'><p><em>Figure (f): one two three</em></p>"
            "<h2>Appendix: records</h2><p>not counted here</p><table><tr><th>x</th></tr></table></body></html>")
    counts = body_counts(html)
    assert (counts.body_words, counts.summary_words, counts.tables, counts.widest, counts.empty_columns,
            counts.figures, counts.caption_words) == (8, 8, 1, 2, 1, 1, 3)
    assert counts.empty == ["Summary: b"] and over_limits(counts) == ["empty columns = 1 > 0"]
    from matplotlib.figure import Figure

    figure = Figure()
    ax = figure.subplots()
    ax.plot([8, 8], [1.0, 2.0], label="one prompt length")  # a line, but through one x: caught
    ax.plot([1, 4], [1.0, 2.0], label="two batches")
    ax.plot([1], [3.0], marker="o", linestyle="none", label="a marker alone")
    assert one_point_lines(figure) == [": one prompt length"]


if __name__ == "__main__":  # python tests/test_report_limits.py REPORT.html: the body's counts
    for path in sys.argv[1:]:
        print(path, json.dumps(asdict(body_counts(Path(path).read_text(encoding="utf-8"))), indent=1))
