"""One plotting style for every notebook and report: the same colours mean the same devices; the
figures notebooks and the report both draw (a roofline)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

DEVICE_COLORS = {"cpu": "#4C72B0", "gpu": "#55A868", "tpu": "#C44E52", "auto": "#8172B2"}


def use_style() -> None:
    """Seaborn's whitegrid theme at paper-friendly sizes; call once per notebook."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    plt.rcParams.update({"figure.figsize": (7.0, 4.0), "figure.dpi": 110, "savefig.dpi": 300,
                         "axes.titleweight": "bold"})


def device_color(kind: str) -> str:
    """The colour of a device kind ('cpu', 'gpu', 'tpu'); grey for anything else."""
    return DEVICE_COLORS.get(kind.split(":")[0].lower(), "#777777")


def training_curves(history: dict[str, list[float]], metrics: list[str], title: str = ""):
    """One panel per metric: its training curve and, when logged, its validation curve, per epoch."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.4), squeeze=False)
    for axis, metric in zip(axes[0], metrics):
        epochs = range(1, len(history[metric]) + 1)
        axis.plot(epochs, history[metric], marker="o", label="training")
        if f"val_{metric}" in history:
            axis.plot(epochs, history[f"val_{metric}"], marker="o", label="validation")
        axis.set_xlabel("epoch")
        axis.set_ylabel(metric)
        axis.legend()
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    return figure


def confusion_heatmap(counts, class_names: list[str], title: str = "Confusion matrix"):
    """A seaborn heatmap of a confusion matrix: rows are true classes, columns predicted ones."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    size = max(4.5, 0.55 * len(class_names) + 2.5)
    figure, axis = plt.subplots(figsize=(size, size * 0.85))
    sns.heatmap(counts, annot=True, fmt="d", cmap="Blues", cbar=False, ax=axis,
                xticklabels=class_names, yticklabels=class_names)
    axis.set_xlabel("predicted")
    axis.set_ylabel("true")
    axis.set_title(title)
    figure.tight_layout()
    return figure


def repeated_training_curves(histories: list[dict[str, list[float]]], metrics: list[str], title: str = ""):
    """One panel per metric, per epoch: the mean over repeated fits with a +/- 1 std band (one fit:
    its curve). Validation curves are drawn too where every fit logged them."""
    import matplotlib.pyplot as plt
    import pandas as pd
    import seaborn as sns
    from matplotlib.ticker import MaxNLocator

    if not histories:
        raise ValueError("no histories to plot")
    rows = []
    for repeat, history in enumerate(histories):
        for metric in metrics:
            for split, key in (("training", metric), ("validation", f"val_{metric}")):
                if all(key in h for h in histories):
                    rows += [{"repeat": repeat, "metric": metric, "split": split, "epoch": epoch + 1, "value": value}
                             for epoch, value in enumerate(history[key])]
    frame = pd.DataFrame(rows)
    band = ("sd", 1) if len(histories) > 1 else None
    figure, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.4), squeeze=False)
    for axis, metric in zip(axes[0], metrics):
        sns.lineplot(data=frame[frame["metric"] == metric], x="epoch", y="value", hue="split", marker="o",
                     errorbar=band, ax=axis)
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_ylabel(metric)
        axis.legend(title=None)
    if len(histories) > 1:
        title = f"{title} (mean of {len(histories)} repeats, band: +/- 1 std)".strip()
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    return figure


def forecast_panels(timestamps, series: dict, target_names: list[str], units: list[str], title: str = ""):
    """One panel per target: each named series ('true', 'predicted', 'persistence'...) over time.

    `series` maps a label to an array (steps, targets) aligned with `timestamps`; the first one is
    drawn as the reference (solid black), the others over it.
    """
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(target_names), 1, figsize=(9.0, 2.4 * len(target_names)), sharex=True,
                                squeeze=False)
    styles = [{"color": "black", "linewidth": 1.4}, {"color": "#C44E52", "linewidth": 1.2},
              {"color": "#8C8C8C", "linewidth": 1.0, "linestyle": "--"}, {"color": "#4C72B0", "linewidth": 1.0}]
    for column, (axis, name, unit) in enumerate(zip(axes[:, 0], target_names, units)):
        for (label, values), style in zip(series.items(), styles * len(series)):
            axis.plot(timestamps, values[:, column], label=label, **style)
        axis.set_ylabel(f"{name}\n({unit})")
    axes[0, 0].legend(loc="upper right", ncol=len(series), fontsize="small")
    if title:
        axes[0, 0].set_title(title)
    figure.autofmt_xdate()
    figure.tight_layout()
    return figure


def _figure_text(value: float) -> str:
    """A figure for a legend: three significant digits, whole numbers from 100 up ('8.1', '1,555')."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def draw_roofline(ax: Any, points: Iterable[tuple[float, float, str, str | None]], peak_tflops: float | None,
                  bandwidth_gb_s: float | None, roof_label: str = "roofline", span: Iterable[float] = ()) -> None:
    """Log-log roofline on `ax`: each point (intensity FLOP/byte, achieved TFLOPS, label, colour) as a
    marker, and the roof min(peak, intensity x bandwidth) (colabkit.training.roofline) as a line where
    both figures are known, drawn over the points' intensities, `span`'s and the ridge point, with a
    margin of 4x; a flat line at the peak where only the peak is known."""
    import numpy as np

    from colabkit.training.roofline import attainable_tflops, known, ridge

    points = [p for p in points if known(p[0]) and known(p[1])]
    xs = [p[0] for p in points] + [x for x in span if known(x)]
    for x, y, label, color in points:
        ax.scatter([x], [y], label=label, color=color, edgecolor="#333333", linewidth=0.5, zorder=3)
    if known(peak_tflops) and known(bandwidth_gb_s):
        meet = ridge(peak_tflops, bandwidth_gb_s)
        grid = np.geomspace(min([*xs, meet]) / 4, max([*xs, meet]) * 4, 200)
        ax.plot(grid, [attainable_tflops(x, peak_tflops, bandwidth_gb_s) for x in grid], color="#444444",
                linewidth=1.5, label=f"{roof_label}: {_figure_text(peak_tflops)} TFLOPS, "
                                     f"{_figure_text(bandwidth_gb_s)} GB/s")
        ax.axvline(meet, color="#999999", linestyle=":", linewidth=1)
    elif known(peak_tflops):
        ax.axhline(peak_tflops, color="#444444", linewidth=1.5, label=f"peak {_figure_text(peak_tflops)} TFLOPS")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs per byte)")
    ax.set_ylabel("achieved TFLOPS")
