"""Each experiment's answer, drawn once for every experiment from its declaration (colabkit.experiments: its
headline and its `Figures`: the axis, bars or lines, the published values beside ours, and the figures it names).

`headline_rows` gives the headline per combination: the median over runs, its interval and level, the speedup over
the CPU with its verdict. `notebook_section` is every experiment's section: in the body its headline figure (the
form its source paper drew) and one short table (headline_table); in the appendix everything else, the common
figures (COMMON_FIGURES: the speedup over the CPU, the fraction of peak, accuracy, where the time goes) and the
experiment's own, each figure drawn only where it sets two points side by side.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from colabkit.errors import ExperimentDeclarationError
from colabkit.experiments import find
from colabkit.experiments.declaration import COMMON_FIGURES, Experiment, Headline
from colabkit.plots import device_color
from colabkit.report.bottlenecks import bottleneck_items
from colabkit.report.common import (
    column,
    figure_warning,
    global_batch,
    mark_stand_in_data,
    not_plotted,
    series_labels,
    too_short,
    without_results,
    work_column,
)
from colabkit.report.figures import (
    grouped_bars,
    levels,
    log_scale_if_wide,
    mark_substitute_data,
    new_figure,
    plot_lines,
    powers_of_two_axis,
    series_colors,
)
from colabkit.report.records import ReportData, sort_labels
from colabkit.report.runs import figures_over_runs
from colabkit.report.section import ReportFigure, ReportTable, Section, shown_columns
from colabkit.report.summary import configuration_speedups
from colabkit.report.utilisation import utilisation_items
from colabkit.report.writers import format_number

ACCURACY = Headline("test_accuracy", "test accuracy", "", "higher")
# An experiment's own figure: drawn from its table (its report module's) and the report's data, None when it has
# nothing to draw.
OwnFigure = Callable[[pd.DataFrame, ReportData], "ReportFigure | None"]
Fill = Callable[[Section, pd.DataFrame, ReportData], None]


def sentence(text: str) -> str:
    """`text` with its first letter a capital, the rest as it is ('Warm matmul TFLOPS')."""
    return text[:1].upper() + text[1:]


def axis_name(experiment: Experiment) -> str:
    """How a table and a figure name the experiment's axis: 'global batch' for batch_size, else the parameter."""
    return "global batch" if experiment.figures.axis == "batch_size" else experiment.figures.axis


def _implied(ok: pd.DataFrame, label: str) -> tuple[str, ...]:
    """The parameters whose value a row's `label` (a metric naming a model) settles: left out of its series."""
    return tuple(name[7:] for name in ok.columns if name.startswith("params.")
                 and ok.groupby(label, dropna=False)[name].nunique().le(1).all())


def headline_rows(experiment: Experiment, data: ReportData) -> pd.DataFrame:
    """One row per combination of the experiment's training runs: `device`, `series` (the device and the
    parameters that vary, but the axis), `x` (the axis's value), `label` (the metric Figures.label names), the
    headline's median over runs (`value`) with its interval (`low`, `high`) and `level` (the level it reaches and its
    runs), the speedup over the CPU baseline (`over`) with its interval and verdict (summary.configuration_speedups;
    1 and 'baseline' on the baseline's rows), accuracy with its interval, and MFU."""
    ok = data.ok(experiment.name)
    if not len(ok):
        return pd.DataFrame()
    figures, metric = experiment.figures, experiment.headline.metric
    over = figures_over_runs(ok, [experiment.headline, ACCURACY])

    def of(name: str, field: str) -> pd.Series:
        return ok["combination_id"].map(over[over["metric"] == name].set_index("combination_id")[field])

    label = f"metrics.{figures.label}" if figures.label and f"metrics.{figures.label}" in ok else None
    exclude = ("batch_size_is", *(_implied(ok, label) if label else ()))
    x = global_batch(ok) if figures.axis == "batch_size" else column(ok, f"params.{figures.axis}")
    rows = pd.DataFrame({
        "device": ok["device_label"], "series": series_labels(ok, [f"params.{figures.axis}", *([label] if label else [])],
                                                             exclude=exclude),
        "x": pd.to_numeric(x, errors="coerce"), "label": ok[label] if label else None,
        "value": of(metric, "median"), "low": of(metric, "between_runs_low"), "high": of(metric, "between_runs_high"),
        "level": of(metric, "between_runs_level"), "runs": of(metric, "runs"),
        "accuracy": of(ACCURACY.metric, "median"), "accuracy_low": of(ACCURACY.metric, "between_runs_low"),
        "accuracy_high": of(ACCURACY.metric, "between_runs_high"),
        "accuracy_level": of(ACCURACY.metric, "between_runs_level"),
        "mfu": pd.to_numeric(column(ok, "metrics.mfu"), errors="coerce").fillna(  # matmul: its fraction of peak
            pd.to_numeric(column(ok, "metrics.fraction_of_peak"), errors="coerce")), "combination": ok["combination"],
        **{f"work.{name}": work_column(ok, name).fillna(column(ok, f"metrics.{name}"))
           for point in figures.published for name in point.work}})
    speedups = configuration_speedups(data, experiment.name, inference=False).set_index("combination")
    columns = ["speedup", "speedup_low", "speedup_high", "speedup_verdict", "over", "measure"]
    rows = rows.join(speedups[columns], on="combination") if len(speedups) else rows.assign(
        **{name: np.nan for name in columns})
    if rows["speedup"].notna().any():  # the baseline's own rows: 1 by definition
        baseline = rows["device"] == rows["over"].dropna().iloc[0]
        rows.loc[baseline, ["speedup", "speedup_verdict"]] = [1.0, "baseline"]
    order = {label: index for index, label in enumerate(sort_labels(rows["device"]))}
    return rows.sort_values(["device", "series", "x"], key=lambda c: c.map(order) if c.name == "device" else c) \
        .reset_index(drop=True)


def interval_text(low: Any, high: Any) -> str | None:
    """'0.512-0.534' for an interval, None without one."""
    return None if pd.isna(low) or pd.isna(high) else f"{format_number(low, 3)}-{format_number(high, 3)}"


def headline_table(experiment: Experiment, rows: pd.DataFrame) -> pd.DataFrame:
    """The body's table (at most 8 columns, none empty): per combination its series, label, axis value, the headline's
    median over runs, its interval and level, and the speedup over the CPU with its verdict."""
    headline = experiment.headline
    table = pd.DataFrame({
        "device": rows["series"], **({experiment.figures.label: rows["label"]} if experiment.figures.label else {}),
        axis_name(experiment): rows["x"], f"{headline.label} ({headline.unit})": rows["value"],
        "interval": [interval_text(low, high) for low, high in zip(rows["low"], rows["high"])],
        "level": rows["level"], "speedup over the CPU": rows["speedup"], "verdict": rows["speedup_verdict"]})
    return shown_columns(table)


def published_rows(experiment: Experiment, rows: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The declaration's published values of the headline that may stand beside these rows (their `work` was ours
    in every row), and a sentence for the caption: who they are, or why they are not drawn."""
    points = experiment.figures.published
    if not points:
        return pd.DataFrame(columns=["series", "kind", "x", "value"]), ""
    same = [point for point in points if all(rows[f"work.{name}"].eq(value).all() for name, value in point.work.items())]
    cited = ", ".join(dict.fromkeys(point.series.split(":")[0] for point in points))
    if not same:
        work = "; ".join(dict.fromkeys(", ".join(f"{value:,} {name.replace('_', ' ')}"
                                                 for name, value in point.work.items()) for point in points))
        return pd.DataFrame(columns=["series", "kind", "x", "value"]), f" {cited} ({work}): other work, not drawn."
    return (pd.DataFrame([{"series": point.series, "kind": point.kind, "x": point.at, "value": point.value}
                          for point in same]), f" {'Hatched' if experiment.figures.bars else 'Stars'}: {cited}.")


def headline_figure(experiment: Experiment, rows: pd.DataFrame, data: ReportData) -> ReportFigure | None:
    """The headline against the axis per series, as the source paper drew it (bars per device, else lines), the
    between-run intervals as error bars, the published values beside them; drawn again for a paper's column."""
    drawn = rows[rows["value"].notna() & rows["x"].notna()]
    if not len(drawn):
        return None
    headline, bars = experiment.headline, experiment.figures.bars
    published, cited = published_rows(experiment, drawn)
    note = figure_warning(data.ok(experiment.name))
    colors = {**series_colors(drawn, palette=data.palette),
              **{row.series: device_color(row.kind) for row in published.itertuples()}}

    def draw(width: float) -> Any:
        count = drawn["series"].nunique() + len(published["series"].unique())
        columns = 1 if width < 5 else min(3, count)
        figure, (ax,) = new_figure(width=width, height=2.4 + 0.22 * -(-count // columns) + 0.4 * (width > 5))
        if bars:
            grouped_bars(ax, pd.concat([drawn, published], ignore_index=True), "x", "value", low="low", high="high",
                         colors=colors, hatched=published["series"])
        else:
            plot_lines(ax, drawn, "x", "value", low="low", high="high", colors=data.palette)
            for row in published.itertuples():
                ax.plot([row.x], [row.value], marker="*", markersize=11, linestyle="none", color=colors[row.series],
                        markeredgecolor="black", label=row.series)
            powers_of_two_axis(ax, [*drawn["x"], *published["x"]])
        log_scale_if_wide(ax, [*drawn["value"], *published["value"]])
        ax.set_xlabel(axis_name(experiment))
        ax.set_ylabel(f"{headline.label} ({headline.unit})")
        handles, labels = ax.get_legend_handles_labels()
        figure.legend(handles, labels, loc="outside lower center", ncols=columns)
        if note:
            mark_substitute_data(figure, note)
        return figure

    caption = (f"{sentence(headline.label)} against {axis_name(experiment)} per device: the median over runs; error "
               f"bars: the interval over runs ({levels(drawn['level'])}; Methods).{cited}")
    behind = pd.concat([drawn[["series", "device", "x", "runs", "value", "low", "high", "level"]],
                        published.rename(columns={"kind": "device"})], ignore_index=True)
    return ReportFigure(f"{experiment.name}_headline", draw(7.0), behind.rename(columns={"x": axis_name(experiment)}),
                        caption, body=True, paper=draw)


def _along_axis(experiment: Experiment, rows: pd.DataFrame, data: ReportData, value: str, name: str, ylabel: str,
                caption: str, low: str | None = None, high: str | None = None,
                line: float | None = None) -> ReportFigure | None:
    """`value` of `rows` against the axis per series, where it sets two points side by side (None otherwise)."""
    drawn = rows[rows[value].notna() & rows["x"].notna()]
    if len(drawn) < 2:
        return None
    figure, (ax,) = new_figure(width=7.0, height=3.8)
    plot_lines(ax, drawn, "x", value, low=low, high=high, colors=data.palette)
    if line is not None:
        ax.axhline(line, color="black", linewidth=1, linestyle=":")
    powers_of_two_axis(ax, drawn["x"])
    log_scale_if_wide(ax, [*drawn[value], *([line] if line else [])], ratio=10)
    ax.set(xlabel=axis_name(experiment), ylabel=ylabel)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    columns = ["series", "device", "x", value, *(name for name in (low, high) if name)]
    return ReportFigure(f"{experiment.name}_{name}", figure, drawn[columns].rename(columns={"x": axis_name(experiment)}),
                        caption)


def speedup_figure(experiment: Experiment, rows: pd.DataFrame, data: ReportData) -> ReportFigure | None:
    """Each device's speedup over the CPU against the axis (the baseline is the dotted line at 1)."""
    rows = rows[rows["speedup_verdict"].ne("baseline")]
    over = rows["over"].dropna()
    return _along_axis(experiment, rows, data, "speedup", "speedup", f"speedup over {over.iloc[0] if len(over) else 'CPU'}",
                       "The ratio of the medians over runs, same parameters on both (summary_speedup_per_configuration "
                       f"has each interval and verdict); error bars: {levels(rows['speedup_verdict'])}.",
                       low="speedup_low", high="speedup_high", line=1.0)


def fraction_of_peak_figure(experiment: Experiment, rows: pd.DataFrame, data: ReportData) -> ReportFigure | None:
    """Achieved model TFLOPS as a percentage of each device's peak against the axis."""
    return _along_axis(experiment, rows.assign(mfu=100 * rows["mfu"]), data, "mfu", "fraction_of_peak", "% of peak (MFU)",
                       "Achieved model TFLOPS over the device's peak at the run's precision, median over runs; a "
                       "CPU's peak is an estimate (docs/peaks.md).")


def accuracy_figure(experiment: Experiment, rows: pd.DataFrame, data: ReportData) -> ReportFigure | None:
    """Test accuracy against the axis per series, with its interval over runs; the axis starts where the values do."""
    return _along_axis(experiment, rows, data, "accuracy", "accuracy", "test accuracy",
                       f"Accuracy on the test set, median over runs; error bars: {levels(rows['accuracy_level'])}.",
                       low="accuracy_low", high="accuracy_high")


COMMON: dict[str, Callable[[Experiment, pd.DataFrame, ReportData], ReportFigure | None]] = {
    "headline": headline_figure, "speedup": speedup_figure, "fraction_of_peak": fraction_of_peak_figure,
    "accuracy": accuracy_figure}
assert set(COMMON) | {"where_time_goes"} == set(COMMON_FIGURES)


def named_items(name: str, experiment: Experiment, rows: pd.DataFrame, table: pd.DataFrame, data: ReportData,
                own: dict[str, OwnFigure], prefix: str) -> list[ReportTable | ReportFigure]:
    """The items of the figure the declaration names `name`: a common one, or the experiment's own."""
    if name == "where_time_goes":
        return bottleneck_items(data, experiment.name, prefix)
    if name in COMMON:
        figure = COMMON[name](experiment, rows, data)
    elif name in own:
        figure = own[name](table, data)
    else:
        raise ExperimentDeclarationError(f"experiment {experiment.name} names the figure {name!r}, which is neither "
                                         f"a common one ({', '.join(COMMON_FIGURES)}) nor one of its own "
                                         f"({', '.join(own) or 'none'})")
    return [] if figure is None else [figure]


def notebook_section(data: ReportData, notebook: str, title: str, prefix: str,
                     table_of: Callable[[ReportData], pd.DataFrame], fill: Fill, intro: str = "",
                     own: dict[str, OwnFigure] | None = None) -> Section:
    """Every experiment's section. `table_of(data)` gives the table of its ok runs (without any, the section is not in
    the body, and its failed or skipped runs are listed in the appendix). The body: `intro`, the warnings of stand-in
    data and of runs too short, the headline figure its declaration names first and the headline table. The appendix:
    what `fill` adds (its detail tables and notes), the declaration's other figures (`own`: the experiment's own
    figure functions, by name), the utilisation table, and the runs that failed or were skipped."""
    section = Section(notebook, title)
    listed = not_plotted(data, notebook, f"{prefix}_runs_not_plotted")
    table = table_of(data)
    if not len(table):
        return without_results(section, data, notebook, listed)
    experiment, own = find(notebook), own or {}
    section.text += [intro] if intro else []
    if experiment is not None:
        rows = headline_rows(experiment, data)
        first, *rest = experiment.figures.names
        for item in named_items(first, experiment, rows, table, data, own, prefix):
            item.body = True
            section.items.append(item)
        if len(rows) and rows["value"].notna().any():
            throughput = rows["measure"].dropna().ne(experiment.headline.label).any()
            section.items.append(ReportTable(
                f"{notebook}_headline", headline_table(experiment, rows),
                f"{sentence(experiment.headline.label)} per combination: the median over runs, its interval and the "
                "level it reaches; speedup: over the CPU at the same parameters, with its verdict (Methods)."
                + (" Where the work per epoch differed, the speedup is of samples/s." if throughput else ""),
                body=True))
        else:
            section.text.append(f"No run recorded its {experiment.headline.label}: nothing to draw.")
    fill(section, table, data)
    if experiment is not None:
        section.items += [item for name in rest for item in named_items(name, experiment, rows, table, data, own,
                                                                         prefix)]
        if "fraction_of_peak" in experiment.figures.names:
            section.items += utilisation_items(data, notebook, prefix)
    mark_stand_in_data(section, data, notebook, list(section.figures.values()))
    short = too_short(data.runs(notebook))
    if short:
        section.warnings.append(short)
    if listed:
        section.items.append(listed)
    return section
