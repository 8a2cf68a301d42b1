"""Where each training run's time goes (colabkit.training.breakdown): per combination the shares of a step (input
wait, host, device) and what bounds it, as a table and a stacked bar per device and batch, and, where runs were
profiled, the time per operation category as ParaDnn's breakdowns (Wang, Wei & Brooks 2020)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from colabkit.report.common import column, device_head, has, series_labels
from colabkit.report.figures import new_figure
from colabkit.report.records import ReportData, in_report_order, sort_labels
from colabkit.report.section import ReportFigure, ReportTable
from colabkit.report.writers import format_number
from colabkit.statistics import median_ci
from colabkit.training.shares import CATEGORIES, CATEGORY_LABELS, SHARES, bound_by, describe_shares, step_shares

SHARE_COLORS = {"input_wait_share": "#d62728", "host_share": "#ff7f0e", "device_share": "#1f77b4"}
SHARE_LABELS = {"input_wait_share": "input wait", "host_share": "host overhead", "device_share": "device time"}
CATEGORY_COLORS = {"matmul": "#1f77b4", "convolution": "#9467bd", "elementwise": "#2ca02c", "reduction": "#17becf",
                   "optimizer": "#ff7f0e", "copy": "#8c564b", "input": "#d62728", "other": "#7f7f7f", "idle": "#dddddd"}
ROOFLINE_ANSWERS = ("compute", "memory")
METHOD_NOTE = ("Shares of a step per sample: device = the same step on one batch on the device, many steps per "
               "execution; host overhead = the same steps fed from memory at the run's steps_per_execution, minus "
               "that; input wait = the run, minus that (docs/bottlenecks.md). On a CPU the device is the same cores "
               "that run the input pipeline and Python.")


def shares_and_bound(rows: pd.DataFrame) -> dict[str, Any]:
    """The shares of a step (summing to 1) and bound_by of `rows`, from their median throughputs (else shares)."""
    rates = [float(rows[name].median()) for name in ("samples_per_s", "memory_samples_per_s", "device_samples_per_s")]
    roof = rows["roofline"].dropna()
    try:
        shares = step_shares(*rates)
    except ValueError:
        medians = {name: float(rows[name].median()) for name in SHARES}
        total = sum(medians.values()) or 1.0
        shares = {name: value / total for name, value in medians.items()}
    return {**shares, "bound_by": bound_by(shares, roof.mode().iloc[0] if len(roof) else None)}


def _resolved_bound(row: pd.Series) -> str | None:
    """bound_by where the share that bounds the step is resolved (input or host), else 'not resolved'."""
    bound = row["bound_by"]
    share = {"input": "input_wait_share", "host": "host_share"}.get(str(bound))
    return bound if share is None or bool(row.get(f"{share}_resolved", False)) else "not resolved"


def _rows(ok: pd.DataFrame, **columns: Any) -> pd.DataFrame:
    """A bottleneck table's rows of `ok`: device, series (beside the batch), global batch, model, `columns`."""
    return pd.DataFrame({"device": ok["device_label"], "series": series_labels(ok, ["params.batch_size"],
                                                                               exclude=("batch_size_is",)),
                         "batch": pd.to_numeric(column(ok, "metrics.global_batch_size"), errors="coerce"),
                         "model": column(ok, "metrics.model", None), **columns})


def breakdown_table(data: ReportData, notebook: str) -> pd.DataFrame | None:
    """One row per combination whose runs made the breakdown's passes (None without any): the medians over those runs,
    the shares and bound_by, each share's interval over runs (`_resolved`: it stays above 0) and `share_level`."""
    ok = data.ok(notebook)
    if not has(ok, "metrics.device_share"):
        return None
    ok = ok[pd.to_numeric(ok["metrics.device_share"], errors="coerce").notna()]
    runs = data.runs(notebook)
    runs = runs[pd.to_numeric(runs["metrics.device_share"], errors="coerce").notna()]
    by_combination = runs["combination_id"]

    def over_runs(name: str, how: Any = "median") -> pd.Series:
        values = pd.to_numeric(column(runs, name), errors="coerce")
        return ok["combination_id"].map(values.groupby(by_combination, sort=False).agg(how))

    said, bound = column(runs, "breakdown.roofline_bound", None), column(runs, "metrics.bound_by", None)
    answer = said.where(said.isin(ROOFLINE_ANSWERS), bound.where(bound.isin(ROOFLINE_ANSWERS)))
    table = _rows(ok, runs=over_runs("metrics.device_share", "count").astype(int),
                  samples_per_s=over_runs("metrics.samples_per_s").astype(float),
                  input_samples_per_s=pd.to_numeric(column(ok, "metrics.input_samples_per_s"), errors="coerce"),
                  memory_samples_per_s=over_runs("breakdown.memory_samples_per_s").astype(float),
                  device_samples_per_s=pd.to_numeric(column(ok, "metrics.device_samples_per_s"), errors="coerce"),
                  **{name: pd.to_numeric(column(ok, f"metrics.{name}"), errors="coerce") for name in SHARES},
                  bound_by=None, roofline=ok["combination_id"].map(answer.groupby(by_combination, sort=False).agg(
                      lambda values: values.dropna().mode().iloc[0] if values.notna().any() else None)),
                  extra_s=over_runs("breakdown.seconds.total").astype(float), path=ok["path"])
    for index in table.index:
        for name, value in shares_and_bound(table.loc[[index]]).items():
            table.at[index, name] = value
    for share in SHARES:  # a share is resolved where its interval over runs stays above 0
        intervals = over_runs(f"metrics.{share}", median_ci)
        table[f"{share}_low"] = intervals.map(lambda i: i.low if i.resolved else np.nan)
        table[f"{share}_high"] = intervals.map(lambda i: i.high if i.resolved else np.nan)
        table[f"{share}_resolved"] = table[f"{share}_low"].gt(0)
        table["share_level"] = intervals.map(lambda i: i.label)
    table["bound_by"] = table.apply(_resolved_bound, axis=1)
    return in_report_order(table, ["device", "series", "batch"])


def _grouped(table: pd.DataFrame) -> pd.DataFrame:
    """Per series and global batch: its runs, shares and bound_by (shares_and_bound over its combinations)."""
    rows = []
    for (series, batch), group in table.groupby(["series", "batch"], sort=False):
        resolved = {f"{share}_resolved": bool(group[f"{share}_resolved"].all()) for share in SHARES}
        row = {"device": group["device"].iloc[0], "series": series, "batch": batch,
               "runs": int(pd.to_numeric(group["runs"], errors="coerce").fillna(1).sum()),
               **shares_and_bound(group), **resolved}
        rows.append({**row, "bound_by": _resolved_bound(pd.Series(row))})
    return pd.DataFrame(rows)


def series_rest(row: pd.Series) -> str:
    """What a row's series says beside its device ('backend=jax, family=fc'; '' when nothing else varies)."""
    series, device = str(row["series"]), str(row["device"])
    return series[len(device):].lstrip(", ") if series.startswith(device) else series


def where_time_goes_figure(table: pd.DataFrame, name: str) -> ReportFigure:
    """Stacked bars per series and global batch: the shares of a step (shares_and_bound)."""
    grouped = _grouped(table)
    figure, (ax,) = new_figure(width=max(5.0, 1.1 * len(grouped) + 2.5), height=4.2)
    positions = np.arange(len(grouped))
    bottom = np.zeros(len(grouped))
    for share in SHARES:
        values = grouped[share].to_numpy(float)
        resolved = grouped[f"{share}_resolved"].to_numpy(bool)
        ax.bar(positions, np.where(resolved, values, 0), bottom=bottom, color=SHARE_COLORS[share],
               label=SHARE_LABELS[share], width=0.7)
        if not resolved.all():  # drawn pale and hatched: its interval over runs reaches 0
            ax.bar(positions, np.where(resolved, 0, values), bottom=bottom, color=SHARE_COLORS[share], alpha=0.3,
                   hatch="//", width=0.7, label=f"{SHARE_LABELS[share]} (not resolved)")
        bottom += values
    ticks = ["\n".join(part for part in (device_head(row["device"]), *series_rest(row).split(", "),
                                       f"batch {format_number(row['batch'])}", row["bound_by"] or "") if part)
             for _, row in grouped.iterrows()]
    ax.set_xticks(positions, ticks, fontsize="small")
    ax.set(ylim=(0, 1), ylabel="share of a training step", title="Where the time goes")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    sentences = []  # one per series and global batch, from the numbers
    for _, row in grouped.iterrows():
        unresolved = [SHARE_LABELS[share] for share in SHARES[:2] if not row.get(f"{share}_resolved", True)]
        sentences.append(describe_shares(f"On {row['series']} at batch {format_number(row['batch'])}", row,
                                         row["bound_by"]) + (f" Not resolved from 0 over its runs: "
                                                             f"{' and '.join(unresolved)}." if unresolved else ""))
    caption = (" ".join(sentences) + " " + METHOD_NOTE + " Under each bar: what bounds it. Pale and hatched: a share "
               "whose interval over runs reaches 0, not resolved from noise.")
    return ReportFigure(f"{name}_where_time_goes", figure, grouped, caption)


def op_table(data: ReportData, notebook: str) -> pd.DataFrame | None:
    """One row per profiled combination whose trace was summarised: its category shares."""
    ok = data.ok(notebook)
    columns = [f"op_breakdown.categories.{name}" for name in CATEGORIES]
    if not all(name in ok for name in columns) or not ok[columns[0]].notna().any():
        return None
    ok = ok[ok[columns[0]].notna()]
    return _rows(ok, steps=column(ok, "op_breakdown.steps"), basis=column(ok, "op_breakdown.basis"),
                 **{name: pd.to_numeric(ok[f"op_breakdown.categories.{name}"], errors="coerce") for name in CATEGORIES},
                 trace_dir=column(ok, "op_breakdown.trace_dir")).reset_index(drop=True)


def op_breakdown_figure(table: pd.DataFrame, name: str) -> ReportFigure:
    """Per device, a stacked bar per profiled run: its time per operation category (ParaDnn's)."""
    devices = sort_labels(table["device"])
    figure, axes = new_figure(nrows=len(devices), width=8.0, height=0.6 * max(2, len(table)) + 1.2)
    for ax, device in zip(axes, devices):
        rows = table[table["device"] == device].reset_index(drop=True)
        labels = [", ".join(part for part in (series_rest(row), f"batch {format_number(row['batch'])}",
                                              row["model"] if isinstance(row["model"], str) else "") if part)
                  for _, row in rows.iterrows()]
        left = np.zeros(len(rows))
        for category in CATEGORIES:
            values = rows[category].to_numpy(float)
            ax.barh(np.arange(len(rows)), values, left=left, color=CATEGORY_COLORS[category],
                    label=CATEGORY_LABELS[category], hatch="//" if category == "idle" else None, edgecolor="white")
            left += values
        ax.set_yticks(np.arange(len(rows)), labels, fontsize="small")
        ax.set(xlim=(0, 1), xlabel="share of the profiled time")
        ax.set_title(f"{device}: time per operation ({rows['basis'].iloc[0]} time)", fontsize="medium")
    axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    caption = ("Time per operation category in the profiled steady steps (the framework's own profiler, summarised "
               "by xprof's framework_op_stats), idle hatched: on a GPU or TPU the device's kernels, on a CPU the op "
               "threads' time summed, where idle is mostly threads waiting on each other, on the host or on input "
               "(each record's op_breakdown.idle_explained says how much of each). The traces open in TensorBoard "
               "(tensorboard --logdir <the record's .profile folder>).")
    return ReportFigure(f"{name}_op_breakdown", figure, table.drop(columns=["trace_dir"]), caption)


def bottleneck_items(data: ReportData, notebook: str, name: str) -> list[ReportTable | ReportFigure]:
    """The breakdown table and its figure, and the operation figure of profiled runs (or nothing)."""
    table = breakdown_table(data, notebook)
    items: list[ReportTable | ReportFigure] = []
    if table is not None:
        unused = ["model"] if not table["model"].notna().any() else []
        unused += ["series"] if (table["series"] == table["device"]).all() else []
        intervals = table.apply(lambda row: "; ".join(
            f"{SHARE_LABELS[share]} {100 * row[f'{share}_low']:.0f}-{100 * row[f'{share}_high']:.0f} %"
            + ("" if row[f"{share}_resolved"] else " not resolved") for share in SHARES)
            + f" ({row['share_level']})" if pd.notna(row[f"{SHARES[0]}_low"]) else "no interval", axis=1)
        extra = [f"{share}_{part}" for share in SHARES for part in ("low", "high", "resolved")] + ["share_level"]
        printed = table.drop(columns=["path", "roofline", *unused, *extra]).assign(**{"shares' intervals": intervals})
        printed = printed.rename(columns={
            "batch": "global batch", "samples_per_s": "run samples/s", "input_samples_per_s": "input alone",
            "memory_samples_per_s": "fed from memory", "device_samples_per_s": "device alone",
            **SHARE_LABELS, "bound_by": "bound by", "extra_s": "passes (s)"})
        items += [where_time_goes_figure(table, name),
                  ReportTable(f"{name}_breakdown", printed, "Per combination, the medians over its runs of "
                              "the run's throughput and three beside it (samples/s): its input pipeline alone, the "
                              "same steps fed from memory, the device alone; the shares of a step and what bounds it, "
                              "both from those medians (so the shares sum to 1), each share's interval over runs with its "
                              "level (a share whose interval reaches 0 is not resolved, and no bound is named from "
                              "it); and how long the extra passes took. " + METHOD_NOTE)]
    ops = op_table(data, notebook)
    if ops is not None:
        items.append(op_breakdown_figure(ops, name))
    return items
