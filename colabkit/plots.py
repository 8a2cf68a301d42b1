"""One plotting style for every notebook and report: the same colours mean the same devices; the
figure notebooks and the report both draw (a roofline). A notebook's own figures (training curves, a
confusion matrix, forecasts) are drawn in the notebook, with pandas and seaborn, in plain sight."""

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


def _figure_text(value: float) -> str:
    """A figure for a legend: three significant digits, whole numbers from 100 up ('8.1', '1,555')."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def draw_roofline(ax: Any, points: Iterable[tuple[float, float, str, str | None]], peak_tflops: float | None,
                  bandwidth_gb_s: float | None, roof_label: str = "roofline", span: Iterable[float] = (),
                  achievable_tflops: float | None = None) -> None:
    """Log-log roofline on `ax`: each point (intensity FLOP/byte, achieved TFLOPS, label, colour) as a
    marker, and the roof min(peak, intensity x bandwidth) (colabkit.training.roofline) as a line where
    both figures are known, drawn over the points' intensities, `span`'s and the ridge point, with a
    margin of 4x; a flat line at the peak where only the peak is known. `achievable_tflops` (a matmul
    scan's best, colabkit.device.achievable) adds a second, dashed ceiling under the same bandwidth."""
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
        if known(achievable_tflops):
            ax.plot(grid, [attainable_tflops(x, achievable_tflops, bandwidth_gb_s) for x in grid], color="#444444",
                    linewidth=1.2, linestyle="--", label=f"achievable (matmul scan): {_figure_text(achievable_tflops)} TFLOPS")
    elif known(peak_tflops):
        ax.axhline(peak_tflops, color="#444444", linewidth=1.5, label=f"peak {_figure_text(peak_tflops)} TFLOPS")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs per byte)")
    ax.set_ylabel("achieved TFLOPS")
