"""One plotting style for every notebook and report: the same colours mean the same devices."""

from __future__ import annotations

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
