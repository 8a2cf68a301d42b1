"""A report section: its text, warnings, tables and figures, shown in the notebook and written to disk.

Section builders (colabkit.report.matmul_tflops, .cnn_mnist, ...) return a `Section`; `publish` writes its
figures (figures/NAME.png|pdf|svg plus NAME.csv, the data behind the figure) and tables
(tables/NAME.csv|tex|md) under the output folder, then displays what it shows (`section_outputs`).
A section with no data has `empty` set and says why instead of showing anything else.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from colabkit.report.writers import format_number, write_figure, write_table

WARNING_STYLE = ("border:3px solid #b00020;background:#fdecea;color:#7a0012;padding:10px 14px;"
                 "margin:12px 0;font-weight:bold;font-size:1.05em;border-radius:4px")


@dataclass
class ReportTable:
    """A table of the report: `name` is its file name (no extension), `caption` says what it holds."""

    name: str
    table: pd.DataFrame
    caption: str


@dataclass
class ReportFigure:
    """A figure of the report and the table behind it (every number it draws)."""

    name: str
    figure: Any  # matplotlib.figure.Figure
    data: pd.DataFrame
    caption: str


@dataclass
class Section:
    """One section: paragraphs (Markdown), loud warnings, then tables and figures in order."""

    key: str
    title: str
    text: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    items: list[ReportTable | ReportFigure] = field(default_factory=list)
    empty: str | None = None

    @property
    def figures(self) -> dict[str, ReportFigure]:
        return {item.name: item for item in self.items if isinstance(item, ReportFigure)}

    @property
    def tables(self) -> dict[str, ReportTable]:
        return {item.name: item for item in self.items if isinstance(item, ReportTable)}

    def add_figure(self, figure: ReportFigure | None, missing: str) -> None:
        """Add `figure` where it draws something (a row of data behind it); else add `missing` to the text,
        saying what is not drawn and why: a report holds no empty figure and no CSV without a row."""
        if figure is not None and len(figure.data):
            self.items.append(figure)
        else:
            self.text.append(missing)

    def figure(self, name: str) -> ReportFigure:
        return self.figures[name]

    def table(self, name: str) -> pd.DataFrame:
        return self.tables[name].table


def warning_html(text: str) -> str:
    """A red box that no reader can miss."""
    return f'<div class="colabkit-warning" style="{WARNING_STYLE}">&#9888; WARNING: {html.escape(text)}</div>'


def _html_table(table: pd.DataFrame) -> str:
    """The table as HTML: numbers right-aligned, text left-aligned (headers too), short text unwrapped."""
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


def figure_png(figure: Any, dpi: int = 200) -> tuple[bytes, int]:
    """The figure as PNG bytes drawn at `dpi`, and the width (pixels) to show it at: half its
    pixel width, so it is sharp on high-density screens. Independent of matplotlib's backend."""
    import io
    import struct

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    data = buffer.getvalue()
    width = struct.unpack(">I", data[16:20])[0]  # the PNG header's IHDR width
    return data, width // 2


def write_section(section: Section, output_dir: str | Path) -> list[Path]:
    """Write the section's figures and tables under output_dir/figures and output_dir/tables."""
    output_dir = Path(output_dir)
    paths: list[Path] = []
    for item in section.items:
        if isinstance(item, ReportFigure):
            paths += write_figure(item.figure, item.name, output_dir / "figures", item.data)
        else:
            paths += write_table(item.table, item.name, output_dir / "tables", item.caption)
    return paths


# One thing a section shows: a MIME bundle (text/html, text/markdown or image/png, and text/plain) and its metadata.
Output = tuple[dict[str, str], dict[str, Any]]


def section_outputs(section: Section, heading: bool = False) -> list[Output]:
    """What the section shows, in order (its `## title` first with `heading`): warnings first, then
    text, tables and figures. A notebook displays them (show); `colabkit report` keeps them as the
    outputs of the report notebook's cells (colabkit.report.build)."""
    def bundle(html_text: str, plain: str) -> Output:
        return {"text/html": html_text, "text/plain": plain}, {}

    def markdown(text: str) -> Output:
        return {"text/markdown": text, "text/plain": text}, {}

    shown = [markdown(f"## {section.title}")] if heading else []
    shown += [bundle(warning_html(warning), f"WARNING: {warning}") for warning in section.warnings]
    if section.empty:
        return [*shown, bundle(f"<p><em>{html.escape(section.empty)}</em></p>", section.empty)]
    shown += [markdown(paragraph) for paragraph in section.text]
    for item in section.items:
        if isinstance(item, ReportFigure):
            png, width = figure_png(item.figure)
            shown.append(({"image/png": base64.b64encode(png).decode("ascii"), "text/plain": f"<figure {item.name}>"},
                          {"image/png": {"width": width, "alt": f"{item.name}: {item.caption}"}}))
            shown.append(bundle(f"<p><em>Figure ({html.escape(item.name)}): {html.escape(item.caption)}</em></p>",
                                f"Figure ({item.name}): {item.caption}"))
        else:
            shown.append(bundle(f"<p><strong>Table ({html.escape(item.name)}):</strong> {html.escape(item.caption)}</p>"
                                + _html_table(item.table), f"Table ({item.name}): {item.caption}\n"
                                                           f"{item.table.to_string(index=False)}"))
    return shown


def show(section: Section, heading: bool = False) -> None:
    """Display the section in a notebook (section_outputs)."""
    from IPython.display import display

    for data, metadata in section_outputs(section, heading):
        display(data, raw=True, metadata=metadata or None)


def publish(section: Section, output_dir: str | Path, display: bool = True, heading: bool = False) -> list[Path]:
    """Write the section's files, then (in a notebook) display it, under its `## title` with `heading`;
    return the files written."""
    paths = write_section(section, output_dir)
    if display:
        show(section, heading)
    return paths
