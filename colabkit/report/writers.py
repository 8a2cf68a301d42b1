"""Files a report writes: figures as PNG (300 dpi), PDF and SVG (a body figure also as PDFs one and two columns of a
paper wide, text at PAPER_POINTS or larger); tables as CSV (every digit), LaTeX (booktabs, at most LATEX_COLUMNS a
part) and Markdown (4 significant digits, no scientific notation)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from colabkit.io import write_atomic

FIGURE_FORMATS = ("png", "pdf", "svg")
PNG_DPI = 300
SIGNIFICANT_DIGITS = 4
PAPER_WIDTHS = {"1col": 3.5, "2col": 7.0}  # inches: one column and the whole page of a two-column paper
PAPER_POINTS = 8  # the smallest text a paper's figure has
PAPER_STYLE = {"font.size": PAPER_POINTS, "axes.labelsize": PAPER_POINTS, "axes.titlesize": PAPER_POINTS + 1,
               "xtick.labelsize": PAPER_POINTS, "ytick.labelsize": PAPER_POINTS, "legend.fontsize": PAPER_POINTS,
               "legend.title_fontsize": PAPER_POINTS, "figure.titlesize": PAPER_POINTS + 1}
LATEX_COLUMNS = 10  # the most columns a LaTeX table has: what fits a paper's page (the CSV keeps them all)


def _missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # lists and arrays are values, not missing
        return False


def format_number(value: Any, digits: int = SIGNIFICANT_DIGITS) -> str:
    """A value for a printed table: floats to `digits` significant digits (1711.4 -> '1711'), integers as they are,
    'inf', text as it is, '' when missing."""
    if _missing(value):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and math.isinf(value):  # no digits to round, and int() of it raises
        return "inf" if value > 0 else "-inf"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return str(int(value))
    if isinstance(value, float):
        if value == 0:
            return "0"
        magnitude = math.floor(math.log10(abs(value)))
        if magnitude < -4:
            return f"{value:.{digits - 1}e}"
        return f"{value:.{max(0, digits - 1 - magnitude)}f}"
    if hasattr(value, "item"):  # NumPy scalars
        return format_number(value.item(), digits)
    return str(value)


def formatted(table: pd.DataFrame) -> pd.DataFrame:
    """`table` with every cell formatted for print (see format_number)."""
    return table.apply(lambda column: column.map(format_number)).astype(str)


def _numeric(column: pd.Series) -> bool:
    values = [value for value in column if not _missing(value)]
    return bool(values) and all(isinstance(value, (int, float)) and not isinstance(value, bool)
                                or hasattr(value, "dtype") for value in values)


def _tabular(table: pd.DataFrame) -> str:
    text = formatted(table).replace("", "--")
    columns = "".join("r" if _numeric(table[name]) else "l" for name in table.columns) or "l"
    return text.to_latex(index=False, escape=True, column_format=columns)


def latex_table(table: pd.DataFrame, caption: str = "") -> str:
    """A booktabs tabular, escaped, numbers right-aligned, the caption a comment above; wider than LATEX_COLUMNS:
    several tabulars, each led by the row's naming columns."""
    header = "".join(f"% {line}\n" for line in caption.splitlines()) if caption else ""
    if len(table.columns) <= LATEX_COLUMNS:
        return header + _tabular(table)
    keys = []
    for name in table.columns[:3]:
        if _numeric(table[name]):
            break
        keys.append(name)
    rest = [name for name in table.columns if name not in keys]
    width = LATEX_COLUMNS - len(keys)
    parts = [rest[start:start + width] for start in range(0, len(rest), width)]
    return header + "\n".join(f"% part {index} of {len(parts)} (every column in one table: the CSV)\n"
                               + _tabular(table[[*keys, *part]]) for index, part in enumerate(parts, start=1))


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(table: pd.DataFrame, caption: str = "") -> str:
    """A pipe table, numbers right-aligned; the caption after it as `Table: ...` (pandoc's form)."""
    text = formatted(table).replace("", "–")
    align = ["---:" if _numeric(table[name]) else ":---" for name in table.columns]
    lines = ["| " + " | ".join(_markdown_cell(str(name)) for name in table.columns) + " |",
             "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(_markdown_cell(cell) for cell in row) + " |" for row in text.itertuples(index=False)]
    if caption:
        lines += ["", f"Table: {' '.join(caption.split())}"]
    return "\n".join(lines) + "\n"


def write_table(table: pd.DataFrame, name: str, folder: str | Path, caption: str = "") -> list[Path]:
    """Write `table` as folder/name.csv (every digit), .tex (booktabs) and .md; return the paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    table.to_csv(folder / f"{name}.csv", index=False)
    return [folder / f"{name}.csv", write_atomic(folder / f"{name}.tex", latex_table(table, caption)),
            write_atomic(folder / f"{name}.md", markdown_table(table, caption))]


def write_figure(figure: Any, name: str, folder: str | Path, data: pd.DataFrame) -> list[Path]:
    """Save a figure as folder/name.png (300 dpi), .pdf, .svg and its data as .csv; the paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for extension in FIGURE_FORMATS:
        figure.savefig(folder / f"{name}.{extension}", dpi=PNG_DPI, bbox_inches="tight", format=extension)
    data.to_csv(folder / f"{name}.csv", index=False)
    return [folder / f"{name}.{extension}" for extension in (*FIGURE_FORMATS, "csv")]


def write_paper_figure(draw: Any, name: str, folder: str | Path) -> list[Path]:
    """`draw(width)` at each of PAPER_WIDTHS, text at PAPER_POINTS or larger, saved as name-1col.pdf, name-2col.pdf."""
    import matplotlib

    for suffix, width in PAPER_WIDTHS.items():
        with matplotlib.rc_context(PAPER_STYLE):
            draw(width).savefig(Path(folder) / f"{name}-{suffix}.pdf", format="pdf")
    return [Path(folder) / f"{name}-{suffix}.pdf" for suffix in PAPER_WIDTHS]


def write_records_csv(frame: pd.DataFrame, path: str | Path) -> Path:
    """Every record, one row each (nested fields with dots; lists and mappings as compact JSON, one value a cell)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.apply(lambda column: column.map(lambda value: json.dumps(value, separators=(",", ":"), default=str)
                                          if isinstance(value, (list, dict, tuple)) else value)).to_csv(path, index=False)
    return path
