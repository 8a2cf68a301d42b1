"""Each experiment's section, drawn for every experiment from its declaration (its headline and `Figures`: the
axis, bars or lines, the published values beside ours, the figures it names): in the body its headline figure and
one short table (headline_table), in the appendix its detail, the common figures (COMMON) and its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from colabkit.errors import ExperimentDeclarationError
from colabkit.experiments import find
from colabkit.experiments.declaration import COMMON_FIGURES, Experiment, Headline
from colabkit.plots import device_color
from colabkit.report.bottlenecks import bottleneck_items
from colabkit.report.common import (column, figure_warning, global_batch, has, interval_texts, mark_stand_in_data,
                                    not_plotted, series_labels, too_short, work_column)
from colabkit.report.figures import (grouped_bars, levels, mark_substitute_data, new_figure, plot_lines,
                                     powers_of_two_axis, series_colors, wide)
from colabkit.report.records import ReportData, in_report_order
from colabkit.report.runs import figures_over_runs
from colabkit.report.section import ReportFigure, ReportTable, Section, shown_columns
from colabkit.report.summary import configuration_speedups

ACCURACY = Headline("test_accuracy", "test accuracy", "", "higher")
OwnFigure = Callable[[pd.DataFrame, ReportData], "ReportFigure | None"]  # from the experiment's table and the data
# record metric -> (column name, scale: None for text): what the utilisation table prints
UTILISATION = {"global_batch_size": ("global batch", 1.0),
               "model_flops_forward_per_sample": ("forward MFLOP/sample", 1e-6),
               "model_tflops": ("achieved GFLOPS", 1e3), "peak_tflops": ("peak TFLOPS", 1.0),
               "peak_precision": ("peak precision", None), "peak_basis": ("peak basis", None),
               "mfu": ("fraction of peak (MFU)", 1.0), "achievable_tflops": ("achievable TFLOPS (matmul scan)", 1.0),
               "mfu_achievable": ("fraction of achievable peak", 1.0),
               "mfu_achievable_high": ("fraction of achievable peak: slowest scan pass", 1.0),
               "arithmetic_intensity": ("FLOPs/byte", 1.0), "energy_j_per_sample": ("J/sample", 1.0),
               "mean_power_w": ("mean power (W)", 1.0)}


def sentence(text: str) -> str:
    """`text` with its first letter a capital ('Warm matmul TFLOPS')."""
    return text[:1].upper() + text[1:]


def axis_name(experiment: Experiment) -> str:
    return "global batch" if experiment.figures.axis == "batch_size" else experiment.figures.axis


def headline_rows(experiment: Experiment, data: ReportData) -> pd.DataFrame:
    """One row per training combination: device, series, `x` (the axis), label, the headline's median over runs with
    its interval, the speedup over the CPU with its verdict ('baseline' on the CPU's rows), accuracy and MFU."""
    ok = data.ok(experiment.name)
    if not len(ok):
        return pd.DataFrame()
    figures, metric = experiment.figures, experiment.headline.metric
    over = figures_over_runs(ok, [experiment.headline, ACCURACY])

    def of(name: str, field: str) -> pd.Series:
        return ok["combination_id"].map(over[over["metric"] == name].set_index("combination_id")[field])

    label = f"metrics.{figures.label}" if figures.label and f"metrics.{figures.label}" in ok else None
    keys = [f"params.{figures.axis}", *([label] if label else [])]
    exclude = tuple(name[7:] for name in ok.columns if label and name.startswith("params.")  # what the label settles
                    and ok.groupby(label, dropna=False)[name].nunique().le(1).all())
    x = global_batch(ok) if figures.axis == "batch_size" else column(ok, f"params.{figures.axis}")
    mfu = pd.to_numeric(column(ok, "metrics.mfu"), errors="coerce")
    rows = pd.DataFrame({
        "device": ok["device_label"], "series": series_labels(ok, keys, ("batch_size_is", *exclude)),
        "x": pd.to_numeric(x, errors="coerce"), "label": ok[label] if label else None, "value": of(metric, "median"),
        **{name: of(metric, f"between_runs_{name}") for name in ("low", "high", "level")},
        "runs": of(metric, "runs"), "combination": ok["combination"],
        **{f"accuracy{end}": of(ACCURACY.metric, field) for end, field in
           (("", "median"), ("_low", "between_runs_low"), ("_high", "between_runs_high"), ("_level", "between_runs_level"))},
        "mfu": mfu.fillna(pd.to_numeric(column(ok, "metrics.fraction_of_peak"), errors="coerce")),
        **{f"work.{name}": work_column(ok, name).fillna(column(ok, f"metrics.{name}"))
           for point in figures.published for name in point.work}})
    columns = ["speedup", "speedup_low", "speedup_high", "speedup_verdict", "over", "measure"]
    speedups = configuration_speedups(data, experiment.name, inference=False).set_index("combination")
    rows = rows.join(speedups[columns], on="combination") if len(speedups) else rows.assign(**dict.fromkeys(columns))
    if rows["speedup"].notna().any():  # the baseline's own rows: 1 by definition
        rows.loc[rows["device"] == rows["over"].dropna().iloc[0], ["speedup", "speedup_verdict"]] = [1.0, "baseline"]
    return in_report_order(rows, ["device", "series", "x"])


def headline_table(experiment: Experiment, rows: pd.DataFrame) -> pd.DataFrame:
    """The body's table of `rows` (at most 8 columns, none empty)."""
    headline, label = experiment.headline, experiment.figures.label
    return shown_columns(pd.DataFrame({
        "device": rows["series"], **({label: rows["label"]} if label else {}), axis_name(experiment): rows["x"],
        f"{headline.label} ({headline.unit})": rows["value"],
        "interval": interval_texts(rows, "low", "high"), "level": rows["level"],
        "speedup over the CPU": rows["speedup"], "verdict": rows["speedup_verdict"]}))


def published_rows(experiment: Experiment, rows: pd.DataFrame, figure: str) -> tuple[pd.DataFrame, str]:
    """The published values for `figure` whose work was ours in every row, and the caption's sentence on them."""
    points = [point for point in experiment.figures.published if point.figure == figure]
    same = [point for point in points if all(rows[f"work.{name}"].eq(value).all() for name, value in point.work.items())]
    cited = ", ".join(dict.fromkeys(point.series.split(":")[0] for point in points))
    table = pd.DataFrame([{"series": point.series, "kind": point.kind, "x": point.at, "value": point.value}
                          for point in same], columns=["series", "kind", "x", "value"])
    if points and not same:
        work = "; ".join(dict.fromkeys(", ".join(f"{value:,} {name.replace('_', ' ')}" for name, value in
                                                 point.work.items()) for point in points))
        return table, f" {cited} ({work}): other work, not drawn."
    return table, f" {'Hatched' if experiment.figures.bars and figure == 'headline' else 'Stars'}: {cited}." * bool(same)


def _draw(experiment: Experiment, drawn: pd.DataFrame, published: pd.DataFrame, value: str, ylabel: str,
          data: ReportData, bars: bool, line: float | None = None) -> Callable[[float], Any]:
    """A function drawing `value` of `drawn` and the `published` values against the axis at a width (inches)."""
    colors = {**series_colors(drawn, palette=data.palette),
              **{row.series: device_color(row.kind) for row in published.itertuples()}}
    note = figure_warning(data.ok(experiment.name))

    def draw(width: float) -> Any:
        count = drawn["series"].nunique() + published["series"].nunique()
        columns = 1 if width < 5 else min(3, count)
        figure, (ax,) = new_figure(width=width, height=2.4 + 0.22 * -(-count // columns) + 0.4 * (width > 5))
        if bars:
            grouped_bars(ax, pd.concat([drawn, published], ignore_index=True), "x", value, low=f"{value}_low",
                         high=f"{value}_high", colors=colors, hatched=published["series"])
        else:
            plot_lines(ax, drawn, "x", value, low=f"{value}_low", high=f"{value}_high", colors=data.palette)
            for series, points in published.groupby("series", sort=False):
                ax.plot(points["x"], points["value"], marker="*", markersize=11, linestyle="none",
                        color=colors[series], markeredgecolor="black", label=series)
            powers_of_two_axis(ax, [*drawn["x"], *published["x"]])
        if line is not None:
            ax.axhline(line, color="black", linewidth=1, linestyle=":")
        drawn_values = [*drawn[value], *published["value"], *([line] if line else [])]
        ax.set_yscale("log" if wide(drawn_values, ratio=10) else "linear")
        ax.set(xlabel=axis_name(experiment), ylabel=ylabel)
        figure.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=columns)
        if note:
            mark_substitute_data(figure, note)
        return figure

    return draw


# The common figures (but where_time_goes, bottlenecks.py's): name -> the column of headline_rows drawn, its axis
COMMON = {"headline": ("value", None), "speedup": ("speedup", "speedup over the CPU"),
          "fraction_of_peak": ("mfu", "% of peak (MFU)"), "accuracy": ("accuracy", "test accuracy")}
assert set(COMMON) | {"where_time_goes"} == set(COMMON_FIGURES)


def common_figure(name: str, experiment: Experiment, rows: pd.DataFrame, data: ReportData) -> ReportFigure | None:
    """A common figure of `rows` against the axis per device, with the published values for it: the headline in the
    body (and drawn again for a paper's columns); the others in the appendix, where they set two points side by side."""
    headline, body, (value, ylabel) = experiment.headline, name == "headline", COMMON[name]
    rows = rows.rename(columns={"low": "value_low", "high": "value_high"}).assign(mfu=100 * rows["mfu"])
    rows = rows[rows["speedup_verdict"].ne("baseline")] if name == "speedup" else rows
    caption = {"headline": f"{sentence(headline.label)} against {axis_name(experiment)} per device: the median over "
                           f"runs; error bars: the interval over runs ({levels(rows['level'])}; Methods).",
               "speedup": "The ratio of the medians over runs at the same parameters (its verdict: summary_speedup_"
                          f"per_configuration); error bars: {levels(rows['speedup_verdict'])}.",
               "fraction_of_peak": "Achieved TFLOPS over the device's peak at the run's precision, median over runs "
                                   "(a CPU's peak: an estimate, docs/peaks.md).",
               "accuracy": f"Accuracy on the test set, median over runs; error bars: {levels(rows['accuracy_level'])}."}
    drawn = rows[rows[value].notna() & rows["x"].notna()]
    published, cited = published_rows(experiment, drawn, name)
    if not len(drawn) or (not body and len(drawn) < 2):
        return None
    draw = _draw(experiment, drawn, published, value, ylabel or f"{headline.label} ({headline.unit})", data,
                 experiment.figures.bars and body, 1.0 if name == "speedup" else None)
    columns = ["series", "device", "x", "runs", value, f"{value}_low", f"{value}_high"]
    behind = pd.concat([drawn[[c for c in columns if c in drawn]], published.rename(columns={"value": value})])
    return ReportFigure(f"{experiment.name}_{name}", draw(7.0), behind.rename(columns={"x": axis_name(experiment)}),
                        caption[name] + cited, body=body, paper=draw if body else None)


def named_items(name: str, experiment: Experiment, rows: pd.DataFrame, table: pd.DataFrame, data: ReportData,
                own: dict[str, OwnFigure], prefix: str) -> list[ReportTable | ReportFigure]:
    """The items of the figure the declaration names `name`: a common one, or the experiment's own."""
    if name == "where_time_goes":
        return bottleneck_items(data, experiment.name, prefix)
    if name not in COMMON and name not in own:
        raise ExperimentDeclarationError(f"experiment {experiment.name} names the figure {name!r}: neither a common one "
                                         f"({', '.join(COMMON_FIGURES)}) nor its own ({', '.join(own) or 'none'})")
    figure = common_figure(name, experiment, rows, data) if name in COMMON else own[name](table, data)
    return [] if figure is None else [figure]


def notebook_section(data: ReportData, notebook: str, title: str, prefix: str,
                     table_of: Callable[[ReportData], pd.DataFrame], fill: Callable[[Section, pd.DataFrame,
                                                                                    ReportData], None],
                     intro: str = "", own: dict[str, OwnFigure] | None = None) -> Section:
    """Every experiment's section from `table_of(data)` (none: why, in one line). The body: `intro`, warnings, the
    first figure its declaration names, the headline table; the appendix: `fill`'s, the other figures (`own`'s)."""
    section, own = Section(notebook, title), own or {}
    listed = not_plotted(data, notebook, f"{prefix}_runs_not_plotted")
    table, experiment = table_of(data), find(notebook)
    if not len(table):  # why not in the body; its failed or skipped runs listed in the appendix
        section.empty = (f"no successful run: {len(listed.table)} failed or skipped (listed in the appendix)."
                         if listed else "no record in these results.")
        section.items += [listed] if listed else []
        return section
    section.text += [intro] if intro else []
    names: tuple[str, ...] = experiment.figures.names if experiment else ()
    rows = headline_rows(experiment, data) if experiment else pd.DataFrame()
    for item in (named_items(names[0], experiment, rows, table, data, own, prefix) if names else []):
        item.body = True
        section.items.append(item)
    if len(rows) and rows["value"].notna().any():
        throughput = rows["measure"].dropna().ne(experiment.headline.label).any()
        section.items.append(ReportTable(
            f"{notebook}_headline", headline_table(experiment, rows), f"{sentence(experiment.headline.label)} per "
            "combination: the median over runs, its interval and the level it reaches; speedup: over the CPU at the "
            "same parameters, with its verdict (Methods)." + (" Where the work per epoch differed, the speedup is of "
                                                              "samples/s." if throughput else ""), body=True))
    elif experiment is not None:
        section.text.append(f"No run recorded its {experiment.headline.label}: nothing to draw.")
    fill(section, table, data)
    section.items += [item for name in names[1:] for item in named_items(name, experiment, rows, table, data, own,
                                                                         prefix)]
    section.items += utilisation_items(data, notebook, prefix) if "fraction_of_peak" in names else []
    mark_stand_in_data(section, data, notebook, list(section.figures.values()))
    section.warnings += [warning for warning in [too_short(data.runs(notebook))] if warning]
    section.items += [listed] if listed else []
    return section


def utilisation_items(data: ReportData, notebook: str, name: str) -> list[ReportTable]:
    """How well each of `notebook`'s ok runs that counted its model FLOPs used its device (else nothing)."""
    ok = data.ok(notebook)
    if not has(ok, "metrics.model_tflops"):
        return []
    ok = ok[ok["metrics.model_tflops"].notna()]
    table = pd.DataFrame({"device": ok["device_label"], **{
        label: ok[f"metrics.{metric}"] if scale is None else pd.to_numeric(ok[f"metrics.{metric}"], errors="coerce")
        * scale for metric, (label, scale) in UTILISATION.items() if f"metrics.{metric}" in ok},
        "MFU unknown because": ok.get("metrics.mfu_reason")})
    return [ReportTable(f"{name}_utilisation", table.sort_values(["device", "global batch"]).reset_index(drop=True),
                        "How well each run used its device: analytic model FLOPs, achieved GFLOPS, fraction of the "
                        "device's peak (MFU), arithmetic intensity of a training step per replica (docs/roofline.md) "
                        "and, on NVIDIA GPUs, energy per sample.")]
