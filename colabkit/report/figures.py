"""Figure helpers the sections share: one style, one colour per device, lines and bars with error bars. Figures are
made without pyplot (nothing shown or leaked); every series is a labelled line or bar container."""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from colabkit.plots import use_style
from colabkit.report.records import device_palette, kind_positions, shade, sort_labels
from colabkit.report.writers import format_number

WARNING_COLOR = "#b00020"
PUBLISHED_HATCH = "//"


def report_style() -> None:
    """colabkit's plotting style, plus what papers need: TrueType fonts in PDFs (journals reject Type 3)."""
    import matplotlib

    use_style()
    matplotlib.rcParams.update({"pdf.fonttype": 42, "ps.fonttype": 42, "legend.fontsize": "small",
                                "figure.constrained_layout.use": False})


def new_figure(ncols: int = 1, nrows: int = 1, width: float = 6.4, height: float = 4.0) -> tuple[Any, np.ndarray]:
    """A figure (not registered with pyplot) and its axes as a flat array."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    return figure, figure.subplots(nrows, ncols, squeeze=False).ravel()


def label_markers(labels: Iterable[str]) -> dict[str, str]:
    """A marker per device label: circles for the first label of a kind, then squares, triangles..."""
    return {label: "os^Dv"[index % 5] for label, index in kind_positions(labels).items()}


def label_colors(labels: Iterable[str], palette: dict[str, str] | None = None) -> dict[str, str]:
    """A colour per device label: the report's `palette`'s where it has the label, else device_palette's."""
    return {label: (palette or {}).get(label, color) for label, color in device_palette(labels).items()}


def series_colors(table: pd.DataFrame, palette: dict[str, str] | None = None) -> dict[str, str]:
    """A colour per `series` of `table`: its `device`'s (label_colors), shaded per series of that device."""
    pairs = table[["series", "device"]].drop_duplicates("series")
    base = label_colors(pairs["device"], palette)
    order = {label: index for index, label in enumerate(sort_labels(pairs["device"]))}
    colors: dict[str, str] = {}
    used: dict[str, int] = {}
    for name, label in sorted(zip(pairs["series"], pairs["device"]), key=lambda pair: (order[pair[1]], str(pair[0]))):
        colors[name] = shade(base[label], used.get(label, 0))
        used[label] = used.get(label, 0) + 1
    return colors


def mark_substitute_data(figure: Any, text: str) -> None:
    """Print a red warning at the top of the figure, so that a copy of the figure file carries it too."""
    width = int(figure.get_figwidth() * 13)  # about the characters of 9-point bold text per inch
    figure.suptitle("\n".join(textwrap.wrap(f"\u26a0 WARNING: {text}", width)), color=WARNING_COLOR,
                    fontsize=9, fontweight="bold")


def error_bars(rows: pd.DataFrame, y: str, low: str | None, high: str | None) -> Any:
    """Error bar lengths from `low` to `high`; a zero spread drawn as nothing, not a flat cap (None: nothing at all)."""
    if not (low in rows and high in rows):
        return None
    lower = (rows[y] - rows[low]).clip(lower=0).to_numpy(float, copy=True)
    upper = (rows[high] - rows[y]).clip(lower=0).to_numpy(float, copy=True)
    empty = ~((lower > 0) | (upper > 0))
    lower[empty], upper[empty] = np.nan, np.nan
    return None if empty.all() else np.vstack([lower, upper])


def levels(values: Any) -> str:
    """The levels and runs of some intervals ('75 %, n = 3'), from labels or verdicts ('no interval')."""
    found = pd.Series(list(values), dtype=object).dropna().astype(str).str.extract(
        r"(\d[\d.]* %, n = \d+(?: and \d+)?)")[0]
    return "; ".join(dict.fromkeys(found.dropna())) or "no interval"


def state_levels(ax: Any, rows: pd.DataFrame, low: str | None) -> None:
    """Write the level of the error bars drawn from `<prefix>_low` in the axes' corner, once per axes."""
    prefix = low[: -len("_low")] if low and low.endswith("_low") else None
    column = next((name for name in (f"{prefix}_level", f"{prefix}_verdict") if prefix and name in rows), None)
    text = levels(rows[column]) if column else "no interval"
    stated = ax.__dict__.setdefault("_colabkit_levels", [])
    if text == "no interval" or text in stated:
        return
    stated.append(text)
    ax.text(0.99, 0.01 + 0.07 * (len(stated) - 1), f"error bars: {text}", transform=ax.transAxes, ha="right",
            va="bottom", fontsize="small", color="#555555")


def _infinite(values: pd.Series) -> pd.Series:
    """Which values are infinite: no place on an axis (tables print them); NaN breaks a line."""
    return pd.Series(np.isinf(pd.to_numeric(values, errors="coerce").astype(float)), index=values.index)


def plot_lines(ax: Any, table: pd.DataFrame, x: str, y: str, *, low: str | None = None, high: str | None = None,
               colors: dict[str, str] | None = None) -> None:
    """One line per `series` of `table` in its `device`'s colour, error bars from `low` to `high`; one x: a marker."""
    colors, markers = label_colors(table["device"], colors), label_markers(table["device"])
    styles, per_device = ["-", "--", "-.", ":"], Counter()
    for name, rows in table.groupby("series", sort=False):
        rows = rows[~(_infinite(rows[x]) | _infinite(rows[y]))].sort_values(x)
        if not len(rows):
            continue
        label = rows["device"].iloc[0]
        style, color = styles[per_device[label] % len(styles)], colors[label]
        per_device[label] += 1
        ax.plot(rows[x], rows[y], linestyle=style if rows[x].nunique() > 1 else "none", marker=markers[label],
                color=color, label=name)
        yerr = error_bars(rows, y, low, high)
        if yerr is not None:
            ax.errorbar(rows[x], rows[y], yerr=yerr, fmt="none", ecolor=color, capsize=3, linewidth=1)
            state_levels(ax, rows, low)


def grouped_bars(ax: Any, table: pd.DataFrame, category: str, value: str, *, colors: dict[str, str] | None = None,
                 low: str | None = None, high: str | None = None, hatched: Iterable[str] = ()) -> None:
    """Bars of `value` per `category`, one per `series` side by side, `hatched` ones (published) pale and hatched."""
    categories = sorted(set(table[category].dropna()), key=lambda c: (isinstance(c, str), c))
    names, hatched = list(dict.fromkeys(table["series"])), set(hatched)
    width = 0.8 / max(1, len(names))
    for index, name in enumerate(names):
        rows = table[table["series"] == name].set_index(category).reindex(categories)
        rows = rows[rows[value].notna() & ~_infinite(rows[value])]
        positions = [categories.index(c) - 0.4 + width * (index + 0.5) for c in rows.index]
        color = (colors or {}).get(name, "#999999")
        yerr = error_bars(rows, value, low, high)
        ax.bar(positions, rows[value], width=width * 0.95, label=name, color=color,
               alpha=0.45 if name in hatched else 1.0, hatch=PUBLISHED_HATCH if name in hatched else None,
               edgecolor="#333333" if name in hatched else color, yerr=yerr, capsize=3 if yerr is not None else 0)
        if yerr is not None:
            state_levels(ax, rows, low)
    ax.set_xticks(range(len(categories)), [textwrap.fill(format_number(c), 10) for c in categories])


def powers_of_two_axis(ax: Any, values: Iterable[float]) -> None:
    """A log2 x axis ticked at the values measured, printed as plain numbers (256, 512, ...)."""
    ticks = sorted({float(v) for v in values if v is not None and np.isfinite(v) and v > 0})
    ax.set_xscale("log", base=2)
    if ticks:
        ax.set_xticks(ticks, [format_number(t) for t in ticks])
        ax.minorticks_off()


def wide(values: Iterable[float], ratio: float = 30.0) -> bool:
    """Whether the positive values span more than `ratio`: an axis for a log scale."""
    positive = [v for v in values if v is not None and np.isfinite(v) and v > 0]
    return bool(positive) and max(positive) / min(positive) > ratio
