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
