"""The report on bad inputs: records that cannot be measurements or are no records at all (named in
red, `colabkit report` exits 1), numbers that are infinite or NaN wherever a record may hold them,
and device labels ordered and coloured by what they name, never by their text."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import report_fixtures as fx

from colabkit import report
from colabkit.cli import main
from colabkit.report.figures import label_colors, series_colors
from colabkit.report.records import label_kind, sort_labels
from colabkit.report.writers import format_number, latex_table, markdown_table


def test_numbers_are_formatted_whatever_they_are():
    assert format_number(float("inf")) == "inf" and format_number(float("-inf")) == "-inf"
    assert format_number(float("nan")) == "" and format_number(None) == ""
    assert format_number(1711.4) == "1711" and format_number(0.153781) == "0.1538"
    import numpy as np
    import pandas as pd

    table = pd.DataFrame({"x": [np.float32("inf"), 1.5, np.nan]})
    assert "inf" in latex_table(table) and "| inf |" in markdown_table(table)


def build_everything(data: report.ReportData) -> None:
    report.overview_section(data)
    report.summary_section(data)
    report.experiment_sections(data)
    report.provenance_section(data)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # an infinity drawn on an axis: matplotlib's warning
def test_infinite_and_nan_values_a_record_may_hold_do_not_stop_the_report(tmp_path):
    """Values no plausibility check covers (a score, a spread) can still be inf or NaN in a record copied in from
    elsewhere: every section is built, and prints them. A parameter of inf is one no declaration offers: that record
    is set aside, with why."""
    for device in ("cpu", "gpu"):
        record = fx.cnn(device, 256)
        record["metrics"].update(test_accuracy=float("inf"), epoch_time_steady_std_s=float("nan"),
                                 test_loss=None, replicas=float("inf"))
        (tmp_path / "cnn_mnist" / device).mkdir(parents=True)
        (tmp_path / "cnn_mnist" / device / "x.json").write_text(json.dumps(record))
        dblstm = fx.dblstm(device, 2, 64)
        dblstm["metrics"]["f1_macro"] = float("-inf")
        (tmp_path / "dblstm_har" / device).mkdir(parents=True)
        (tmp_path / "dblstm_har" / device / "x.json").write_text(json.dumps(dblstm))
    odd = fx.dblstm("cpu", 2, 128)
    odd["params"]["head_units"] = float("inf")
    (tmp_path / "dblstm_har" / "cpu" / "odd.json").write_text(json.dumps(odd))
    data = report.load_report_data([tmp_path])
    assert [(Path(path).name, why.split(" (")[0]) for path, why in data.rejected] == [
        ("odd.json", "a run today's dblstm_har does not offer")]
    assert "head_units = inf" in data.rejected[0][1] and len(data.ok()) == 4
    build_everything(data)
    table = report.cnn_section(data).table("cnn_mnist")
    assert math.isinf(table["test accuracy"].iloc[0])


@pytest.mark.parametrize("value", [-5, 0, float("inf"), float("nan")])
def test_a_matmul_or_paradnn_record_that_cannot_be_a_measurement_is_never_tabled(tmp_path, value):
    fx.write(tmp_path, fx.matmul("cpu", 256, 0.5), "n-256")
    bad = fx.matmul("gpu", 256, 5.0)
    bad["metrics"]["tflops_warm"] = value
    (tmp_path / "matmul_tflops" / "gpu").mkdir(parents=True)
    (tmp_path / "matmul_tflops" / "gpu" / "n-256.json").write_text(json.dumps(bad))
    data = report.load_report_data([tmp_path])
    assert [reason.split(" (")[0] for _, reason in data.rejected] == [f"not a measurement: tflops_warm = {value}"]
    table = report.matmul_table(data)
    assert table["device"].tolist() == ["CPU: AMD EPYC"]  # no GPU row: no "speedup" over a -5 TFLOPS run
    build_everything(data)


def test_device_labels_sort_and_colour_by_their_structure():
    records = [
        {"device": {"kind": "tpu", "replicas": 8, "name": "TPU v2-8"}},
        {"device": {"kind": "gpu", "replicas": 4, "workers": 2, "name": "Tesla T4"}},
        {"device": {"kind": "gpu", "replicas": 4, "name": "Tesla T4"}},
        {"device": {"kind": "gpu", "replicas": 1, "name": "A100"}},
        {"device": {"kind": "cpu", "replicas": 2, "name": "Xeon"}},
        # a model name that reads like a label changes nothing: the label's text is never taken apart
        {"device": {"kind": "cpu", "replicas": 1, "name": "GPU x16: fake"}},
        {"device": {"requested": "gpu", "request": {"kind": "gpu", "count": None}}},
    ]
    labels = [report.device_label(record) for record in records]
    assert sort_labels([*labels, "Sarkar 2018: K80 GPU"]) == [
        "CPU: GPU x16: fake", "CPU x2: Xeon", "GPU (requested)", "GPU: A100", "GPU x4: Tesla T4",
        "GPU x4 over 2 workers: Tesla T4", "TPU x8: TPU v2-8", "Sarkar 2018: K80 GPU"]
    assert label_kind("CPU: GPU x16: fake") == "cpu" and label_kind("Sarkar 2018: K80 GPU") == ""
    colors = label_colors(labels)
    assert colors["CPU: GPU x16: fake"] == "#4C72B0" and colors["GPU (requested)"] == "#55A868"
    import pandas as pd

    series = series_colors(pd.DataFrame({"series": ["GPU: A100, units=32", "GPU: A100, units=64"],
                                         "device": ["GPU: A100", "GPU: A100"]}))
    assert series["GPU: A100, units=32"] == "#55A868" and series["GPU: A100, units=64"] != "#55A868"


def test_the_report_names_what_it_set_aside_and_exits_1(tmp_path, capsys):
    results = fx.cpu_only_results(tmp_path / "results")
    bad = fx.write(results, fx.matmul("cpu", 1024, 0.2), "n-1024")
    record = json.loads(bad.read_text())
    record["metrics"]["tflops_warm"] = -5
    bad.write_text(json.dumps(record))
    listed = results / "matmul_tflops" / "cpu" / "list.json"
    listed.write_text("[]")
    out = tmp_path / "report"
    assert main(["report", str(results), "--out", str(out)]) == 1
    printed = capsys.readouterr()
    assert "found 8 record(s) below" in printed.out and "report.html" in printed.out
    assert f"rejected {bad}: not a measurement: tflops_warm = -5 (must be a finite number > 0)" in printed.err
    assert f"rejected {listed}: a record is a JSON object, got list" in printed.err
    html = (out / "report.html").read_text()
    assert "colabkit-warning" in html and "list.json" in html and "tflops_warm = -5" in html
    assert "-5.0" not in (out / "figures" / "matmul_tflops_headline.csv").read_text()


def test_the_command_names_a_set_aside_file_as_the_user_named_its_folder(tmp_path, monkeypatch, capsys):
    fx.write(tmp_path / "outputs", fx.matmul("cpu", 256, 0.5), "n-256")
    (tmp_path / "outputs" / "matmul_tflops" / "cpu" / "x.json").write_text("[1]")
    monkeypatch.chdir(tmp_path)
    assert main(["report", "outputs/", "--out", "report"]) == 1
    printed = capsys.readouterr()
    assert printed.out.startswith("found 1 record(s) below outputs/: 1 ok, 0 failed, 0 skipped\n")
    assert printed.err.startswith("rejected outputs/matmul_tflops/cpu/x.json: a record is a JSON object, got list\n")


def test_a_figures_error_bars_state_the_level_their_runs_reach_in_the_figure_itself():
    import matplotlib
    import pandas as pd

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from colabkit.report.figures import grouped_bars, plot_lines

    table = pd.DataFrame({"series": ["a", "a"], "device": ["CPU: x", "CPU: x"], "n": [256, 512], "v": [1.0, 2.0],
                          "v_low": [0.9, 1.8], "v_high": [1.1, 2.2], "v_level": ["75 %, n = 3", "75 %, n = 3"]})
    figure, (lines, bars) = plt.subplots(1, 2)
    plot_lines(lines, table, "n", "v", low="v_low", high="v_high")
    plot_lines(lines, table, "n", "v", low="v_low", high="v_high")  # a second series: the level once
    grouped_bars(bars, table.assign(v_level=["96.9 %, n = 6"] * 2), "n", "v", low="v_low", high="v_high")
    assert [text.get_text() for text in lines.texts] == ["error bars: 75 %, n = 3"]
    assert [text.get_text() for text in bars.texts] == ["error bars: 96.9 %, n = 6"]
    plain = plt.figure().add_subplot()
    plot_lines(plain, table.drop(columns="v_level"), "n", "v", low="v_low", high="v_high")
    assert len(plain.texts) == 0  # no level known: nothing claimed
    plt.close("all")


def test_exclude_busy_over_runs_that_were_all_busy_is_refused_and_touches_no_earlier_report(tmp_path, capsys):
    """Every ok run made on a busy host: --exclude-busy would leave a report with no figure. One line, exit 2
    (nothing to report, as for a folder with no record); an earlier report in --out is left as it was."""
    results = tmp_path / "busy"
    for repeat, n in enumerate([256, 256, 512]):
        record = fx.matmul("cpu", n, 0.2)
        record["host_quiet"] = False
        fx.write(results, record, f"n-{n}" + (f"_repeat-{repeat + 1}" if repeat == 1 else ""))
    failed = fx.matmul("cpu", 1024, status="failed")
    fx.write(results, failed, "n-1024")
    earlier = tmp_path / "report" / "figures" / "earlier.png"
    earlier.parent.mkdir(parents=True)
    earlier.write_bytes(b"png")
    assert main(["report", str(results), "--out", str(tmp_path / "report"), "--exclude-busy"]) == 2
    assert capsys.readouterr().err == (
        f"error: --exclude-busy leaves nothing to report: all 3 ok run(s) below {results} were made on a busy host "
        "(host_quiet false); report without --exclude-busy (the report marks them), or rerun with --wait-quiet "
        "SECONDS\n")
    assert sorted(path.name for path in (tmp_path / "report").rglob("*")) == ["earlier.png", "figures"]
    data = report.load_report_data([results], exclude_busy=True)
    assert report.build.every_ok_run_busy(data) == 3
    assert report.build.every_ok_run_busy(report.load_report_data([results])) == 0  # counted without the flag


def test_the_report_notebooks_summary_says_when_exclude_busy_left_nothing_to_draw(tmp_path):
    from colabkit.report.summary import summary_section

    record = fx.matmul("cpu", 256, 0.2)
    record["host_quiet"] = False
    fx.write(tmp_path, record, "n-256")
    (warning,) = [text for text in summary_section(report.load_report_data([tmp_path], exclude_busy=True)).warnings
                  if "busy host" in text]
    assert warning.startswith("All 1 ok run(s) were made on a busy host and are left out (--exclude-busy, the report "
                              "notebook's exclude_busy_runs), so nothing is left to draw: build the report without it")
    summary = summary_section(report.load_report_data([tmp_path]))  # counted: one line of text, no red box
    (kept,) = [text for text in summary.text if "busy host" in text]
    assert not summary.warnings and ": they count in the figures and intervals (--exclude-busy leaves them out)" in kept
