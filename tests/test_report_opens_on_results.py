"""The report opens on results (issue 51): runs made on a busy host are one line of the Summary, their table is in the
appendix; every legend names each run it draws and lists only what is drawn; no figure draws nothing and no CSV
beside a figure is empty (a section says in its text what is missing instead)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import report_fixtures as fx
from matplotlib.collections import Collection, PathCollection
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from colabkit import report


def _finite(values: Any) -> bool:
    return bool(np.isfinite(np.asarray(values, dtype=float)).any()) if len(values) else False


def drawn(artist: Any) -> bool:
    """Whether `artist` puts something on the axes: a line or points with a finite value, a bar, a patch."""
    if isinstance(artist, Line2D):
        x, y = artist.get_xdata(), artist.get_ydata()
        return len(x) > 0 and _finite(y) and _finite(x if not isinstance(x[0], (np.datetime64, pd.Timestamp)) else [0])
    if isinstance(artist, PathCollection):
        return len(artist.get_offsets()) > 0 and _finite(np.asarray(artist.get_offsets(), dtype=float).ravel())
    if isinstance(artist, Collection):
        return len(artist.get_paths()) > 0
    if isinstance(artist, BarContainer):
        return any(np.isfinite(patch.get_height()) for patch in artist.patches)
    if isinstance(artist, ErrorbarContainer):
        return drawn(artist.lines[0]) if artist.lines[0] is not None else any(map(drawn, artist.lines[2]))
    return isinstance(artist, Patch)


def drawn_labels(figure: Any) -> set[str]:
    """The labels of the artists of `figure` that draw something."""
    return {artist.get_label() for ax in figure.axes
            for artist in [*ax.lines, *ax.collections, *ax.patches, *ax.containers] if drawn(artist)}


def legend_labels(figure: Any) -> list[str]:
    """Every entry of every legend of `figure` (an axes' or the figure's own)."""
    legends = [ax.get_legend() for ax in figure.axes if ax.get_legend() is not None] + list(figure.legends)
    return [text.get_text() for legend in legends for text in legend.get_texts()]


def every_figure(data: report.ReportData) -> list[report.ReportFigure]:
    """Every figure of the report of `data`, in the report's order (contents.report_sections)."""
    return [figure for section in report.report_sections(data) for figure in section.figures.values()]


# --- the Summary: busy runs in one line, their table in the appendix -------------------------------------------------

def busy_and_quiet(root: Path) -> Path:
    """CPU matmul runs: 3 at n = 256 on a busy host, 3 at n = 512 on a quiet one (a CPU only: no speedup table)."""
    fx.repeats(root, lambda run: fx.busy(fx.matmul("cpu", 256, 0.2 + run / 100)), 3, "n-256")
    fx.repeats(root, lambda run: {**fx.matmul("cpu", 512, 0.3 + run / 100), "host_quiet": True}, 3, "n-512")
    return root


def test_busy_runs_are_one_line_of_the_summary_and_a_table_of_the_appendix(tmp_path):
    data = report.load_report_data([busy_and_quiet(tmp_path)])
    summary = report.summary_section(data)
    assert not summary.warnings  # the Summary opens on its reading, not on a red box
    assert "runs_on_a_busy_host" not in summary.tables and not summary.tables  # nothing before a result
    lines = [text for text in summary.text if "busy host" in text]
    assert len(lines) == 1 and summary.text.index(lines[0]) == 1  # right after the reading
    assert lines[0].startswith("3 of the 6 ok run(s) were made on a busy host") and "\n" not in lines[0]
    assert "they count in the figures and intervals" in lines[0] and "the appendix (Records" in lines[0]
    appendix = report.overview_section(data).table("runs_on_a_busy_host")
    assert len(appendix) == 3 and appendix["counted"].all()
    assert set(appendix["why"]) == {"other processes took 40 % of the CPUs' time"}
    assert appendix["record"].str.contains("n-256").all()


def test_busy_runs_left_out_are_said_left_out_in_the_same_one_line(tmp_path):
    """(Every ok run left out: a red warning, as nothing is left to draw: test_report_inputs.)"""
    data = report.load_report_data([busy_and_quiet(tmp_path)], exclude_busy=True)
    summary = report.summary_section(data)
    (line,) = [text for text in summary.text if "busy host" in text]
    assert line.startswith("3 of the 6 ok run(s) were made on a busy host") and "are left out of the figures" in line
    assert not summary.warnings and not report.overview_section(data).table("runs_on_a_busy_host")["counted"].any()


# --- legends: each run drawn named, only what is drawn listed --------------------------------------------------------

def test_the_latency_figure_names_each_run_and_lists_only_the_percentiles_drawn(tmp_path):
    fx.repeats(tmp_path, lambda run: fx.inference(level=1.0 + run / 10, seed=run), 3, "mode-inference")
    figure = report.inference_section(report.load_report_data([tmp_path])).figure("inference_latency_distribution")
    legend = figure.figure.axes[0].get_legend()
    assert legend.get_title().get_text() == "cnn_mnist, CPU: AMD EPYC, device=cpu"  # the one combination, once
    assert legend_labels(figure.figure) == [
        "run 1: mode-inference.json (400 queries)", "run 2: mode-inference_repeat-2.json (400 queries)",
        "run 3: mode-inference_repeat-3.json (400 queries)", "p50 and its interval (within the run)",
        "p90 and its interval (within the run)", "p99 and its interval (within the run)"]
    behind = figure.data
    assert list(behind.groupby("run", sort=False)["point"].apply(lambda points: (points == "query").sum())) == [400] * 3
    assert len(behind[behind["point"] != "query"]) == 9  # three percentiles of three runs, each with its interval


@pytest.fixture(scope="module")
def varied(tmp_path_factory) -> list[report.ReportData]:
    """Reports to draw: every training section (fixtures' three machines); inference runs of two combinations,
    one with too few queries for any percentile's interval; decode runs, a device's without arithmetic intensities."""
    root = tmp_path_factory.mktemp("varied")
    fx.repeats(root / "modes", lambda run: fx.inference(level=1.0 + run / 10, seed=run), 3, "mode-inference")
    fx.repeats(root / "modes", lambda run: fx.inference(queries=5, seed=10 + run), 2, "mode-inference_queries-5")
    fx.repeats(root / "modes", lambda run: fx.decode("cpu", 1.0 + run / 100), 3, "decode")
    fx.repeats(root / "modes", lambda run: fx.decode("gpu", 0.1, intensities=False), 3, "decode")
    report.report_style()
    return [report.load_report_data(fx.multi_device_results(root / "training")),
            report.load_report_data([root / "modes"])]


def test_every_legend_entry_is_something_drawn_and_every_figure_draws(varied):
    checked = 0
    for data in varied:
        for figure in every_figure(data):
            shown = drawn_labels(figure.figure)
            assert shown, f"{figure.name} draws nothing"
            assert [label for label in legend_labels(figure.figure) if label not in shown] == [], figure.name
            checked += 1
    assert checked >= 20  # the training sections' 17 figures, and the inference and decode sections'


def test_a_run_whose_queries_give_no_percentile_is_named_and_its_dots_are_not_listed(varied):
    figure = report.inference_section(varied[1]).figure("inference_latency_distribution")
    labels = legend_labels(figure.figure)
    assert sum(label.startswith("cnn_mnist, CPU: AMD EPYC, device=cpu, queries=5, run ") for label in labels) == 2
    assert len(set(labels)) == len(labels) == 5 + 3  # 5 runs, each its own entry, and p50, p90, p99 once each


def test_lines_drawn_from_one_run_of_a_combination_name_that_run(varied):
    """The weather model's loss curves (each combination's most recent run) and forecasts (each device's best run)
    draw one run where there may be several: each line names its record."""
    section = report.timeseries_section(varied[0])
    curves = legend_labels(section.figure("timeseries_loss_curves").figure)
    assert len(curves) == 8 and all(".json (" in label for label in curves)
    forecasts = legend_labels(section.figure("timeseries_predictions").figure)
    assert [label for label in forecasts if label.endswith("predicted")] == [
        "CPU: AMD EPYC, batch_size-128.json: predicted", "GPU: Tesla T4, batch_size-128.json: predicted"]


# --- no empty figure, no CSV without a row ---------------------------------------------------------------------------

def test_no_csv_beside_a_figure_is_empty_and_a_missing_figure_is_said(tmp_path):
    fx.repeats(tmp_path / "records", lambda run: fx.inference(queries=5, seed=run), 3, "mode-inference")
    fx.repeats(tmp_path / "records", lambda run: fx.decode("cpu", intensities=False), 3, "decode")
    data = report.load_report_data([tmp_path / "records"])
    sections = [report.inference_section(data), report.decode_section(data)]
    for section in sections:
        report.write_section(section, tmp_path / "out")
    written = sorted((tmp_path / "out" / "figures").glob("*.csv"))
    assert [path.stem for path in written] == ["decode_scaling", "inference_latency_distribution",
                                               "inference_offline_throughput"]
    for path in written:  # a header and at least a row: never a 1-byte file, never a header alone
        assert len(pd.read_csv(path)) > 0, path.name
    # no dot has an interval: the latency figure still has its runs' queries behind it, and no percentile
    latency = pd.read_csv(tmp_path / "out" / "figures" / "inference_latency_distribution.csv")
    assert set(latency["point"]) == {"query"} and len(latency) == 15
    decode = sections[1]
    assert "decode_roofline" not in decode.figures  # no point has an intensity: nothing to place on a roofline
    assert any(text.startswith("No roofline figure: no decode row gives both") for text in decode.notes)


def test_a_section_adds_a_figure_only_where_it_has_data_behind_it():
    from matplotlib.figure import Figure

    section = report.Section("s", "S")
    section.add_figure(report.ReportFigure("empty", Figure(), pd.DataFrame(), "nothing"), "No figure: no data.")
    section.add_figure(None, "No other figure either.")
    section.add_figure(report.ReportFigure("drawn", Figure(), pd.DataFrame({"x": [1.0]}), "one point"), "unused")
    assert list(section.figures) == ["drawn"] and section.notes == ["No figure: no data.", "No other figure either."]
