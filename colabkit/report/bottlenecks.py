"""Where each training run's time goes, from its record's breakdown (colabkit.training.breakdown): a
"where the time goes" figure per training section (per device and global batch, a stacked bar of input
wait, host overhead and device time, with a sentence per bar generated from the numbers), a table of the
three throughputs, and, where runs were profiled, an operation-breakdown figure per device in the manner
of ParaDnn's (Wang, Wei & Brooks 2020). The ParaDnn section marks input- or host-bound points on its
roofline with `mark_overhead_bound`, since the roofline does not explain them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from colabkit.report.common import column, device_head, has
from colabkit.report.figures import new_figure
from colabkit.report.records import ReportData, sort_labels
from colabkit.report.section import ReportFigure, ReportTable
from colabkit.report.writers import format_number
from colabkit.training.shares import CATEGORIES, CATEGORY_LABELS, SHARES, describe_shares

SHARE_COLORS = {"input_wait_share": "#d62728", "host_share": "#ff7f0e", "device_share": "#1f77b4"}
SHARE_LABELS = {"input_wait_share": "input wait", "host_share": "host overhead", "device_share": "device time"}
CATEGORY_COLORS = {"matmul": "#1f77b4", "convolution": "#9467bd", "elementwise": "#2ca02c", "reduction": "#17becf",
                   "optimizer": "#ff7f0e", "copy": "#8c564b", "input": "#d62728", "other": "#7f7f7f", "idle": "#dddddd"}
OVERHEAD_MARKERS = {"input": ("#d62728", "input-bound"), "host": ("#ff7f0e", "host-bound")}
METHOD_NOTE = ("Shares of a step per sample: device = the same step on one batch on the device, many steps per "
               "execution; host overhead = the same steps fed from memory at the run's steps_per_execution, minus "
               "that; input wait = the run, minus that (docs/bottlenecks.md). On a CPU the device is the same cores "
               "that run the input pipeline and Python.")



def breakdown_table(data: ReportData, notebook: str) -> pd.DataFrame | None:
    """One row per ok run of `notebook` whose record carries the breakdown (None when none does)."""
    ok = data.ok(notebook)
    if not has(ok, "metrics.device_share"):
        return None
    ok = ok[pd.to_numeric(ok["metrics.device_share"], errors="coerce").notna()]
    table = pd.DataFrame({
        "device": ok["device_label"],
        "batch": pd.to_numeric(column(ok, "metrics.global_batch_size"), errors="coerce"),
        "model": column(ok, "metrics.model", None),
        "samples_per_s": column(ok, "metrics.samples_per_s"),
        "input_samples_per_s": column(ok, "metrics.input_samples_per_s"),
        "memory_samples_per_s": column(ok, "breakdown.memory_samples_per_s"),
        "device_samples_per_s": column(ok, "metrics.device_samples_per_s"),
        **{name: pd.to_numeric(column(ok, f"metrics.{name}"), errors="coerce") for name in SHARES},
        "bound_by": column(ok, "metrics.bound_by", None),
        "extra_s": column(ok, "breakdown.seconds.total"),
        "path": ok["path"],
    })
    order = {label: index for index, label in enumerate(sort_labels(table["device"]))}
    return table.sort_values(["device", "batch"], key=lambda c: c.map(order) if c.name == "device" else c) \
        .reset_index(drop=True)


def _grouped(table: pd.DataFrame) -> pd.DataFrame:
    """Per device and global batch: the median shares (renormalised to sum to 1), the runs behind them
    and the most frequent bound_by."""
    rows = []
    for (device, batch), group in table.groupby(["device", "batch"], sort=False):
        shares = {name: float(group[name].median()) for name in SHARES}
        total = sum(shares.values()) or 1.0
        bound = group["bound_by"].dropna()
        rows.append({"device": device, "batch": batch, "runs": len(group),
                     **{name: value / total for name, value in shares.items()},
                     "bound_by": bound.mode().iloc[0] if len(bound) else None})
    return pd.DataFrame(rows)


def where_time_goes_sentences(grouped: pd.DataFrame) -> list[str]:
    """One sentence per device and global batch, from the numbers."""
    return [describe_shares(f"On {row['device']} at batch {format_number(row['batch'])}", row, row["bound_by"])
            for _, row in grouped.iterrows()]


def where_time_goes_figure(table: pd.DataFrame, name: str) -> ReportFigure:
    """Stacked bars per device and global batch: input wait, host overhead and device time, as shares of
    a step (median over the runs of that device and batch)."""
    grouped = _grouped(table)
    figure, (ax,) = new_figure(width=max(5.0, 1.1 * len(grouped) + 2.5), height=4.2)
    positions = np.arange(len(grouped))
    bottom = np.zeros(len(grouped))
    for share in SHARES:
        values = grouped[share].to_numpy(float)
        ax.bar(positions, values, bottom=bottom, color=SHARE_COLORS[share], label=SHARE_LABELS[share], width=0.7)
        bottom += values
    ax.set_xticks(positions, [f"{device_head(row['device'])}\nbatch {format_number(row['batch'])}\n{row['bound_by'] or ''}"
                              for _, row in grouped.iterrows()], fontsize="small")
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of a training step")
    ax.set_title("Where the time goes")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    caption = " ".join(where_time_goes_sentences(grouped)) + " " + METHOD_NOTE + " Under each bar: what bounds it."
    return ReportFigure(f"{name}_where_time_goes", figure, grouped, caption)


def op_table(data: ReportData, notebook: str) -> pd.DataFrame | None:
    """One row per profiled run whose trace was summarised: its device, batch and category shares."""
    ok = data.ok(notebook)
    columns = [f"op_breakdown.categories.{name}" for name in CATEGORIES]
    if not all(name in ok for name in columns) or not ok[columns[0]].notna().any():
        return None
    ok = ok[ok[columns[0]].notna()]
    table = pd.DataFrame({"device": ok["device_label"],
                          "batch": pd.to_numeric(column(ok, "metrics.global_batch_size"), errors="coerce"),
                          "model": column(ok, "metrics.model", None),
                          "steps": column(ok, "op_breakdown.steps"), "basis": column(ok, "op_breakdown.basis"),
                          **{name: pd.to_numeric(ok[f"op_breakdown.categories.{name}"], errors="coerce")
                             for name in CATEGORIES},
                          "trace_dir": column(ok, "op_breakdown.trace_dir")})
    return table.reset_index(drop=True)


def op_breakdown_figure(table: pd.DataFrame, name: str) -> ReportFigure:
    """Per device, one horizontal stacked bar per profiled run: its time per operation category, idle
    its own (pale) share, as ParaDnn's operation breakdowns."""
    devices = sort_labels(table["device"])
    figure, axes = new_figure(nrows=len(devices), width=8.0, height=0.6 * max(2, len(table)) + 1.2)
    for ax, device in zip(axes, devices):
        rows = table[table["device"] == device].reset_index(drop=True)
        labels = [f"batch {format_number(row['batch'])}"
                  + (f", {row['model']}" if isinstance(row["model"], str) else "") for _, row in rows.iterrows()]
        left = np.zeros(len(rows))
        for category in CATEGORIES:
            values = rows[category].to_numpy(float)
            ax.barh(np.arange(len(rows)), values, left=left, color=CATEGORY_COLORS[category],
                    label=CATEGORY_LABELS[category], hatch="//" if category == "idle" else None, edgecolor="white")
            left += values
        ax.set_yticks(np.arange(len(rows)), labels, fontsize="small")
        ax.set_xlim(0, 1)
        ax.set_xlabel("share of the profiled time")
        ax.set_title(f"{device}: time per operation ({rows['basis'].iloc[0]} time)", fontsize="medium")
    axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    caption = ("Time per operation category in the profiled steady steps (the framework's own profiler, summarised "
               "by xprof's framework_op_stats), idle hatched: on a GPU or TPU the device's kernels, on a CPU the op "
               "threads' time summed, where idle is mostly threads waiting on each other, on the host or on input "
               "(each record's op_breakdown.idle_explained says how much of each). The traces open in TensorBoard "
               "(tensorboard --logdir <the record's .profile folder>).")
    return ReportFigure(f"{name}_op_breakdown", figure, table.drop(columns=["trace_dir"]), caption)


def bottleneck_items(data: ReportData, notebook: str, name: str) -> list[ReportTable | ReportFigure]:
    """The breakdown table and "where the time goes" figure of `notebook`'s runs, and the operation
    figure where runs were profiled (nothing for records that carry no breakdown)."""
    table = breakdown_table(data, notebook)
    items: list[ReportTable | ReportFigure] = []
    if table is not None:
        printed = table.drop(columns=["path", *([] if table["model"].notna().any() else ["model"])]).rename(columns={
            "batch": "global batch", "samples_per_s": "run samples/s", "input_samples_per_s": "input alone",
            "memory_samples_per_s": "fed from memory", "device_samples_per_s": "device alone",
            **SHARE_LABELS, "bound_by": "bound by", "extra_s": "passes (s)"})
        items += [where_time_goes_figure(table, name),
                  ReportTable(f"{name}_breakdown", printed, "Three throughputs per run (samples/s): the run, its input "
                              "pipeline alone, the same steps fed from memory, the device alone; the shares of a step "
                              "they give; and how long the extra passes took. " + METHOD_NOTE)]
    ops = op_table(data, notebook)
    if ops is not None:
        items.append(op_breakdown_figure(ops, name))
    return items


def mark_overhead_bound(ax: Any, rows: pd.DataFrame, x: str = "intensity", y: str = "model_tflops") -> None:
    """Ring the points of `rows` whose bound_by is input or host: the roofline does not explain them."""
    if "bound_by" not in rows:
        return
    for bound, (color, label) in OVERHEAD_MARKERS.items():
        marked = rows[rows["bound_by"] == bound]
        if len(marked):
            ax.scatter(marked[x], marked[y], s=180, facecolors="none", edgecolors=color, linewidths=2, zorder=4,
                       label=label)
