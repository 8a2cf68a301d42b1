"""A report section: its body (warnings, `text`, the items marked `body`), its appendix (`notes`, the other items)
and `empty`, why it is not in the body. `write_section` writes its files; `section_outputs` shows one part."""

from __future__ import annotations

import base64
import html
import io
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from colabkit.report.writers import format_number, write_figure, write_paper_figure, write_table

Part = Literal["body", "appendix"]
WARNING_STYLE = ("border:3px solid #b00020;background:#fdecea;color:#7a0012;padding:10px 14px;"
                 "margin:12px 0;font-weight:bold;font-size:1.05em;border-radius:4px")


@dataclass
class ReportTable:
    """A table of the report: `name` its file name; `body`: in its section's body, else the appendix."""

    name: str
    table: pd.DataFrame
    caption: str
    body: bool = False


@dataclass
class ReportFigure:
    """A figure of the report and the table behind it (every number it draws); `body`: shown in its section's body,
    else in the appendix; `paper`: draws it again at a width in inches, for a paper's column (writers.PAPER_WIDTHS)."""

    name: str
    figure: Any  # matplotlib.figure.Figure
    data: pd.DataFrame
    caption: str
    body: bool = False
    paper: Callable[[float], Any] | None = None


@dataclass
class Section:
    """One section: loud warnings, paragraphs (Markdown) and the items marked `body` in the body; its other items
    and `notes` in the appendix; `empty`, why it is not in the body (one line)."""

    key: str
    title: str
    text: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    items: list[ReportTable | ReportFigure] = field(default_factory=list)
    empty: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def figures(self) -> dict[str, ReportFigure]:
        return {item.name: item for item in self.items if isinstance(item, ReportFigure)}

    @property
    def tables(self) -> dict[str, ReportTable]:
        return {item.name: item for item in self.items if isinstance(item, ReportTable)}

    def add_figure(self, figure: ReportFigure | None, missing: str) -> None:
        """Add `figure` where it has a row of data behind it, else the note `missing`: what is not drawn and why."""
        if figure is not None and len(figure.data):
            self.items.append(figure)
        else:
            self.notes.append(missing)

    def figure(self, name: str) -> ReportFigure:
        return self.figures[name]

    def table(self, name: str) -> pd.DataFrame:
        return self.tables[name].table


def shown_columns(table: pd.DataFrame) -> pd.DataFrame:
    """`table` without the columns that are empty in every row: the report shows none (its CSV keeps them)."""
    return table.loc[:, [name for name in table.columns if table[name].map(format_number).ne("").any()]]


def _html_table(table: pd.DataFrame) -> str:
    """The table as HTML without its empty columns: numbers right, text left, short text unwrapped."""
    table = shown_columns(table)
    styler = table.style.format(format_number).hide(axis="index").set_table_attributes(
        'class="dataframe colabkit-table"')
    headers = []
    for index, name in enumerate(table.columns):
        text = table[name].dropna()
        if len(text) and text.map(lambda v: isinstance(v, str)).all():
            wrap = "normal" if text.str.len().max() > 40 else "nowrap"
            styler = styler.set_properties(subset=[name], **{"text-align": "left", "white-space": wrap})
            headers.append({"selector": f"th.col_heading.col{index}", "props": "text-align: left"})
    return styler.set_table_styles(headers, overwrite=False).to_html()


def write_section(section: Section, output_dir: str | Path) -> list[Path]:
    """Write the section's figures and tables under output_dir/figures and output_dir/tables."""
    figures, tables, paths = Path(output_dir) / "figures", Path(output_dir) / "tables", []
    for item in section.items:
        if isinstance(item, ReportTable):
            paths += write_table(item.table, item.name, tables, item.caption)
        else:
            paths += write_figure(item.figure, item.name, figures, item.data)
            paths += write_paper_figure(item.paper, item.name, figures) if item.paper else []
    return paths


# One thing a section shows: a MIME bundle (text/html, text/markdown or image/png, and text/plain) and its metadata.
Output = tuple[dict[str, str], dict[str, Any]]


def _html(html_text: str, plain: str) -> Output:
    return {"text/html": html_text, "text/plain": plain}, {}


def _markdown(text: str) -> Output:
    return {"text/markdown": text, "text/plain": text}, {}


def item_outputs(item: ReportTable | ReportFigure) -> list[Output]:
    """A figure (its PNG, then its caption) or a table (its caption, then the table) as the report shows it."""
    if isinstance(item, ReportFigure):  # drawn at 200 dpi, shown at half its pixel width: sharp on dense screens
        png = io.BytesIO()
        item.figure.savefig(png, format="png", dpi=200, bbox_inches="tight")
        width = struct.unpack(">I", png.getvalue()[16:20])[0] // 2  # the IHDR header's width
        return [({"image/png": base64.b64encode(png.getvalue()).decode("ascii"), "text/plain": f"<figure {item.name}>"},
                 {"image/png": {"width": width, "alt": f"{item.name}: {item.caption}"}}),
                _html(f"<p><em>Figure ({html.escape(item.name)}): {html.escape(item.caption)}</em></p>",
                      f"Figure ({item.name}): {item.caption}")]
    return [_html(f"<p><strong>Table ({html.escape(item.name)}):</strong> {html.escape(item.caption)}</p>"
                  + _html_table(item.table), f"Table ({item.name}): {item.caption}\n"
                                             f"{shown_columns(item.table).to_string(index=False)}")]


def has_body(section: Section) -> bool:
    """Whether the section shows anything in the report's body: text or a body item, and no `empty`."""
    return not section.empty and bool(section.text or any(item.body for item in section.items))


def section_outputs(section: Section, part: Part = "body") -> list[Output]:
    """What the section shows in `part`: the body (`## title`, warnings, text, body items; nothing without them) or
    the appendix (`## Appendix: title`, notes, other items; the warnings of a section with no body)."""
    warnings = [_html(f'<div class="colabkit-warning" style="{WARNING_STYLE}">&#9888; WARNING: '  # none can miss it
                      f'{html.escape(warning)}</div>', f"WARNING: {warning}") for warning in section.warnings]
    if part == "body":
        if not has_body(section):
            return []
        return [_markdown(f"## {section.title}"), *warnings, *(_markdown(paragraph) for paragraph in section.text),
                *(output for item in section.items if item.body for output in item_outputs(item))]
    items = [item for item in section.items if not item.body]
    warnings = [] if has_body(section) else warnings
    if not items and not section.notes and not warnings:
        return []
    return [_markdown(f"## Appendix: {section.title}"), *warnings, *(_markdown(note) for note in section.notes),
            *(output for item in items for output in item_outputs(item))]


def show(outputs: list[Output]) -> None:
    """Display outputs in a notebook (section_outputs)."""
    from IPython.display import display

    for data, metadata in outputs:
        display(data, raw=True, metadata=metadata or None)
