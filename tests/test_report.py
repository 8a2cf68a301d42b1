"""The report: loading and merging records, every section's tables and figures, the writers, the
plain-language reading; `python -m colabkit report` end to end; the notebook under plain papermill."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import report_fixtures as fx
from helpers import NOTEBOOKS, REPO
from report_fixtures import bar_heights, line_data

from colabkit import report
from colabkit.cli import main
from colabkit.errors import ReportError
from colabkit.experiments import all_experiments
from colabkit.report.writers import format_number, latex_table, markdown_table


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> list[Path]:
    return fx.multi_device_results(tmp_path_factory.mktemp("results"))


@pytest.fixture(scope="module")
def data(folders) -> report.ReportData:
    report.report_style()
    return report.load_report_data(folders)


# --- records --------------------------------------------------------------------------------------

def test_the_same_combination_in_several_folders_counts_every_ok_run_and_says_which(data, folders):
    merges = data.merges.set_index("combination")
    row = merges.loc["device=gpu, n=256"]
    assert row["named by"] == "gpu/matmul_tflops/gpu/n-256.json"  # from its results folder's name down
    assert row["why"] == "ok preferred over skipped" and row["runs counted"] == 1
    assert "cpu/matmul_tflops/gpu/n-256.json (skipped)" in row["not counted"]
    # two ok records of one combination from two folders: two runs of it, both counted
    twice = merges.loc["device=cpu, n=256"]
    assert twice["named by"] == "gpu/matmul_tflops/cpu/n-256.json"  # the most recent
    assert twice["why"] == "2 ok runs, each counted" and twice["runs counted"] == 2
    used = data.used("matmul_tflops")
    assert len(used) == 7  # cpu n=256 twice, cpu n=512, gpu x2, tpu n=512, the tpu n=256 that no runtime could run
    assert sorted(used["status"]) == ["ok"] * 6 + ["skipped"]
    collapsed = data.ok("matmul_tflops").set_index("combination")
    assert collapsed.loc["device=cpu, n=256", "runs"] == 2 and collapsed.loc["device=gpu, n=256", "runs"] == 1
    assert collapsed.loc["device=cpu, n=256", "samples.tflops_warm"] == [0.5, 0.5]


def test_a_copy_of_a_run_counts_once_and_is_named(tmp_path):
    record = fx.matmul("cpu", 256, 0.5)
    fx.write(tmp_path / "a", record, "n-256")
    fx.write(tmp_path / "copy", record, "n-256")
    data = report.load_report_data([tmp_path / "a", tmp_path / "copy"])
    (row,) = data.merges.to_dict("records")
    assert row["runs counted"] == 1 and "1 copy of a counted run left out" in row["why"]
    assert "(a copy of a run already counted)" in row["not counted"]
    assert data.ok("matmul_tflops")["runs"].tolist() == [1]


def test_a_record_of_an_unknown_schema_version_is_reported_not_dropped(data):
    assert [Path(path).name for path, _ in data.rejected] == ["from-the-future.json"]
    assert "schema_version 99" in data.rejected[0][1]
    overview = report.overview_section(data)
    assert any("set aside" in warning for warning in overview.warnings)
    assert overview.table("records_rejected")["file"].str.endswith("from-the-future.json").all()


def test_failed_and_skipped_runs_are_listed_never_plotted(data):
    dblstm = report.dblstm_section(data)
    listed = dblstm.table("dblstm_runs_not_plotted")
    assert list(listed["status"]) == ["failed"] and not dblstm.tables["dblstm_runs_not_plotted"].body  # the appendix
    assert "ResourceExhaustedError" in listed["why"].iloc[0]
    assert 128 not in set(report.dblstm_table(data)["units"])  # the failed 3 x 128 run is in no table of results
    for name in ("dblstm_har_headline", "dblstm_har_accuracy"):
        assert 128 not in set(dblstm.figure(name).data["units"])
    matmul = report.matmul_section(data)
    assert list(matmul.table("matmul_runs_not_plotted")["combination"]) == ["device=tpu, n=256"]


def test_device_labels_name_kind_replicas_and_model():
    assert report.device_label({"device": fx.CPU}) == "CPU: AMD EPYC"
    assert report.device_label({"device": fx.CPU2}) == "CPU x2: AMD EPYC"
    assert report.device_label({"device": fx.TPU}) == "TPU x8: TPU v2-8"
    assert report.device_label({"device": {"kind": "cpu", "replicas": 1, "name": "Intel(R) Xeon(R) CPU @ 2.20GHz"}}) \
        == "CPU: Intel Xeon @ 2.20GHz"
    # a run that never found its device: named by its request, read from the typed field
    assert report.device_label({"device": {"requested": "gpu:4", "request": {"kind": "gpu", "count": 4}},
                                "params": {}}) == "GPU x4 (requested)"
    two_workers = {**fx.CPU, "requested": "multiworker:2", "replicas": 2, "workers": 2,
                   "strategy": "MultiWorkerMirroredStrategy"}
    assert report.device_label({"device": two_workers}) == "CPU x2 over 2 workers: AMD EPYC"
    # the tests' CPU standing in for a T4 (COLABKIT_TEST_STAND_IN) is never labelled as a T4 alone
    stand_in = {"kind": "gpu", "replicas": 1, "name": "Tesla T4", "stand_in": "cpu"}
    assert report.device_label({"device": stand_in}) == "GPU: Tesla T4 (a CPU standing in)"


def test_a_missing_folder_is_said_loudly_and_the_command_refuses_it(tmp_path, capsys):
    data = report.load_report_data([tmp_path / "nowhere"])
    assert data.missing_dirs == [str(tmp_path / "nowhere")]
    assert any("does not exist" in warning for warning in report.overview_section(data).warnings)
    with pytest.raises(ReportError, match="not found"):
        report.build_report([tmp_path / "nowhere"], tmp_path / "out")
    assert main(["report", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")]) == 2
    assert "results folder(s) not found" in capsys.readouterr().err


# --- sections -------------------------------------------------------------------------------------

def body(section: report.Section) -> list[str]:
    """The names of the items a section shows in the report's body, in order."""
    return [item.name for item in section.items if item.body]


def test_matmul_draws_sarkar_2018s_bars_of_tflops_per_device_beside_ours(data):
    section = report.matmul_section(data)
    assert body(section) == ["matmul_tflops_headline", "matmul_tflops_headline"]  # its figure, then its table
    ax = section.figure("matmul_tflops_headline").figure.axes[0]
    bars = bar_heights(ax)
    assert bars["CPU: AMD EPYC"] == [0.5, 0.5] and bars["GPU: Tesla T4"] == [5.0, 10.0]
    assert bars["TPU x8: TPU v2-8"] == [50.0]
    assert bars["Sarkar 2018: K80"] == [15.70] and bars["Sarkar 2018: TPU v2-8"] == [158.91]  # warm, at n = 4096
    assert [t.get_text() for t in ax.get_xticklabels()] == ["256", "512", "4096"]
    assert ax.get_xlabel() == "n" and ax.get_ylabel() == "warm matmul TFLOPS (TFLOPS)" and ax.get_yscale() == "log"
    published = [c for c in ax.containers if c.get_label().startswith("Sarkar")]
    assert all(patch.get_hatch() for container in published for patch in container.patches)
    table = section.table("matmul_tflops_headline").set_index(["device", "n"])
    assert len(table.columns) + 2 <= 8 and table.loc[("GPU: Tesla T4", 512), "speedup over the CPU"] == pytest.approx(20)
    assert table.loc[("CPU: AMD EPYC", 256), "verdict"] == "baseline"
    assert table.loc[("GPU: Tesla T4", 256), "level"] == "no interval, n = 1"  # one run: no interval, said

    speedup = line_data(section.figure("matmul_tflops_speedup").figure.axes[0])
    assert speedup["GPU: Tesla T4"][1] == pytest.approx([10.0, 20.0])
    assert speedup["TPU x8: TPU v2-8"][1] == pytest.approx([100.0])
    assert "CPU: AMD EPYC" not in speedup  # the baseline is the dotted line at 1, not a series
    peak = line_data(section.figure("matmul_tflops_fraction_of_peak").figure.axes[0])
    assert peak["GPU: Tesla T4"][1] == pytest.approx([100 * 5 / 8.1, 100 * 10 / 8.1])
    assert line_data(section.figure("matmul_tflops_speedup").figure.axes[0])["Sarkar 2018: TPU v2-8"] == ([4096], [338])


def test_a_line_joins_two_points_or_none_a_single_one_is_a_marker(data):
    """A series at one x (the TPU's speedup at n = 512 alone) is drawn as its marker: no line joins one point."""
    ax = report.matmul_section(data).figure("matmul_tflops_speedup").figure.axes[0]
    styles = {line.get_label(): line.get_linestyle() for line in ax.get_lines() if not line.get_label().startswith("_")}
    assert styles["TPU x8: TPU v2-8"] == "None" and styles["GPU: Tesla T4"] == "-"


def test_cnn_draws_epoch_time_per_batch_and_device_and_warns_about_offline_data(data):
    section = report.cnn_section(data)
    figure = section.figure("cnn_mnist_headline")
    bars = bar_heights(figure.figure.axes[0])
    assert bars["CPU: AMD EPYC"] == [10.0, 10.0] and bars["TPU x8: TPU v2-8"] == [0.5]
    # their epochs covered 60,000 samples, these runs' others: their epoch times are not drawn, and the caption says so
    assert not any(name.startswith("Alyafeai") for name in bars)
    assert "Alyafeai 2018 (60,000 samples per epoch): other work, not drawn." in figure.caption
    sample_table = section.table("cnn_sample_time_vs_published")  # per-sample times compare: beside each other
    assert list(sample_table.columns) == ["global batch", "CPU: AMD EPYC", "GPU: Tesla T4", "TPU x8: TPU v2-8",
                                          "Alyafeai 2018: K80 GPU", "Alyafeai 2018: TPU v2-8"]
    assert sample_table.set_index("global batch").loc[1024, "Alyafeai 2018: TPU v2-8"] == 37
    # the CPU runs used the offline MNIST subset: the section, the table and the figures say so
    assert any("NOT the real dataset" in w and "mnist: OFFLINE" in w for w in section.warnings)
    assert set(section.table("cnn_mnist").query("device == 'CPU: AMD EPYC'")["data"]) == {"OFFLINE"}
    for name in ("cnn_mnist_headline", "cnn_mnist_accuracy"):
        assert "WARNING" in section.figure(name).figure._suptitle.get_text()


def test_the_epoch_times_alyafeai_2018_published_stand_beside_runs_that_did_the_same_work(tmp_path):
    for device, batch in (("gpu", 256), ("gpu", 512)):
        record = fx.cnn(device, batch)
        record["metrics"]["samples_per_epoch"] = 60_000
        fx.write(tmp_path, record, f"batch_size-{batch}")
    figure = report.cnn_section(report.load_report_data([tmp_path])).figure("cnn_mnist_headline")
    bars = bar_heights(figure.figure.axes[0])
    assert bars["Alyafeai 2018: K80"] == [6, 5, 4] and bars["Alyafeai 2018: TPU v2-8"] == [6, 3, 2]
    assert figure.caption.endswith("Hatched: Alyafeai 2018.")


def test_dblstm_draws_training_time_against_units_per_runtime_then_its_metrics_and_ratios(data):
    section = report.dblstm_section(data)
    lines = line_data(section.figure("dblstm_har_headline").figure.axes[0])
    assert lines["GPU: Tesla T4, bilstm_layers=1"] == ([32, 64], [1.0, 2.0])
    assert lines["TPU x8: TPU v2-8, bilstm_layers=1"] == ([32, 64], [0.5, 1.0])
    assert "TPU x8: TPU v2-8, bilstm_layers=2" not in lines  # the TPU trained one layer only
    table = report.dblstm_table(data)
    row = table[(table["device"] == "CPU: AMD EPYC") & (table["units"] == 64) & (table["bilstm_layers"] == 2)].iloc[0]
    assert row["recurrent_layers"] == 3 and row["model"] == "2 x BiLSTM + LSTM(64)"
    assert row["train_time_std_s"] == pytest.approx(np.std([36, 40, 44], ddof=1))  # the spread over one run's models
    assert row["test_accuracy_std"] == pytest.approx(0.01)
    assert row["runs"] == 1 and row["train_time_s_level"] == "no interval, n = 1"  # one run: no interval, said
    printed = section.table("dblstm_har")
    assert {"runs", "level", "std over models (s)"} <= set(printed.columns)
    assert "medians over runs" in section.tables["dblstm_har"].caption

    speedups = report.configuration_speedups(data, "dblstm_har").groupby("device")["speedup"].agg(["min", "max", "count"])
    assert speedups.loc["GPU: Tesla T4"].tolist() == pytest.approx([10, 10, 4])  # CPU time over GPU time
    assert speedups.loc["TPU x8: TPU v2-8"].tolist() == pytest.approx([20, 20, 2])
    figure = section.figure("dblstm_har_speedup")  # beside Kimm, Paik & Kimm 2021's claims, as stars
    lines = line_data(figure.figure.axes[0])
    assert lines["Kimm, Paik & Kimm 2021: CPU / GPU or TPU"] == ([128, 256], [25.0, 55.0])
    assert lines["GPU: Tesla T4, bilstm_layers=2"] == ([32, 64], [10.0, 10.0])
    assert figure.caption.endswith("Stars: Kimm, Paik & Kimm 2021.")

    assert {"precision", "recall", "F1 (macro)"} <= set(printed.columns)  # every test score, in its table


def test_timeseries_epoch_times_loss_curves_and_predictions(data):
    section = report.timeseries_section(data)
    steady_ax = section.figure("timeseries_rnn_headline").figure.axes[0]
    assert bar_heights(steady_ax) == {"CPU: AMD EPYC": [10.0, 10.0], "GPU: Tesla T4": [1.0, 1.0]}
    assert section.table("timeseries_rnn")["first epoch (s)"].tolist() == [30.0, 30.0, 3.0, 3.0]  # the appendix's
    curves = line_data(section.figure("timeseries_loss_curves").figure.axes[0])
    assert len(curves) == 8  # 4 runs x (validation, training)
    # each line names the run (record) it draws: the combination's most recent
    assert curves["GPU: Tesla T4, batch 128, batch_size-128.json (validation)"][1] == [0.015, 0.008, 0.005, 0.004]
    predictions = section.figure("timeseries_predictions").figure
    assert [ax.get_ylabel() for ax in predictions.axes] == ["Temp (degC)", "WindSpeed (m/s)", "Pressure (hPa)"]
    temperature = line_data(predictions.axes[0])
    assert set(temperature) == {"truth", "persistence forecast", "CPU: AMD EPYC, batch_size-128.json: predicted",
                                "GPU: Tesla T4, batch_size-128.json: predicted"}
    assert temperature["truth"][1] == [float(h) for h in range(12)]
    assert temperature["GPU: Tesla T4, batch_size-128.json: predicted"][1] == [h + 0.5 for h in range(12)]
    assert temperature["persistence forecast"][1] == [h - 1.0 for h in range(12)]
    skill = section.table("timeseries_mae_vs_persistence").set_index(["series", "batch", "target"])["skill"]
    assert skill.loc[("GPU: Tesla T4", 128, "pressure_hpa")] == pytest.approx(0.5)
    assert section.table("timeseries_rnn")["early stop at"].tolist() == [3, 3, 3, 3]


@pytest.mark.parametrize("layout", [
    {"timestamps": [1, 2], "true": {"T": [1.0, 2.0]}, "predicted": {"T": [1.5, 2.5]}},
    {"time": [1, 2], "targets": ["T"], "y_true": [1.0, 2.0], "y_pred": [1.5, 2.5]},
    {"timestamps": [1, 2], "T": {"true": [1.0, 2.0], "predicted": [1.5, 2.5]}},
])
def test_predictions_are_read_from_the_layouts_a_notebook_may_write(layout):
    frame = report.prediction_frame({"predictions": layout})
    assert frame[["target", "true", "predicted"]].values.tolist() == [["T", 1.0, 1.5], ["T", 2.0, 2.5]]


def test_predictions_in_an_unknown_layout_are_said_not_to_be_readable(tmp_path):
    fx.write(tmp_path, fx.timeseries("gpu", 256, predictions={"something": 3}, history=False), "batch_size-256")
    section = report.timeseries_section(report.load_report_data([tmp_path]))
    assert "timeseries_predictions" not in section.figures and "timeseries_loss_curves" not in section.figures
    assert any("layout this report does not read" in text for text in section.notes)  # said in the appendix
    assert any("no loss curves" in text for text in section.notes)


def test_summary_gives_speedups_over_the_cpu_per_notebook(data):
    table = report.speedup_table(data).set_index(["notebook", "device"])
    assert table.loc[("matmul_tflops", "GPU: Tesla T4"), ["speedup", "min", "max", "configurations"]].tolist() \
        == pytest.approx([15, 10, 20, 2])
    assert table.loc[("cnn_mnist", "TPU x8: TPU v2-8"), "speedup"] == pytest.approx(20)
    assert table.loc[("timeseries_rnn", "GPU: Tesla T4"), "speedup"] == pytest.approx(10)
    summary = report.summary_section(data)
    text = summary.text[0]
    # one run a side: the ratios are printed, but no verdict is claimed from them
    assert "GPU: Tesla T4 was not resolved against CPU: AMD EPYC: too few runs in all 10 configurations (measured " \
           "10x to 20x)." in text
    assert "1 run(s) failed" in text and "no accelerator comparison" not in text
    short = summary.table("summary").set_index(["experiment", "device"])  # the body's table: 7 columns
    assert list(short.columns) == ["configurations", "median speedup", "range", "verdicts", "levels"]
    assert short.loc[("Matmul TFLOPS", "GPU: Tesla T4"), "range"] == "10x-20x"
    assert body(summary) == ["summary"] and not summary.figures


def test_with_only_cpu_runs_the_reading_says_no_accelerator_comparison_is_possible(tmp_path):
    data = report.load_report_data([fx.cpu_only_results(tmp_path)])
    summary = report.summary_section(data)
    text = summary.text[0]
    assert "no accelerator comparison is possible" in text
    assert "share one CPU's cores" in text  # the 2-replica CPU is not extra hardware
    assert "CPU x2: AMD EPYC was not resolved against CPU: AMD EPYC: too few runs" in text
    assert "GPU" not in report.speedup_table(data)["device"].str.cat()


def test_every_section_without_data_says_why_in_one_line_and_writes_nothing(tmp_path):
    data = report.load_report_data([tmp_path])
    sections = report.report_sections(data)
    absent = next(section for section in sections if section.key == "absent")
    for build in (*report.SECTIONS.values(), report.backends_section, report.inference_section,
                  report.decode_section, report.cost_section, report.methods_section):
        section = build(data)
        assert section.empty and report.section_outputs(section, "body") == []  # not in the body ...
        assert f"**{section.title}**: {section.empty}" in absent.text[0]  # ... but one line of the list
    assert "No result records were found" in sections[0].text[0]
    for section in sections:
        assert report.write_section(section, tmp_path / "out") == []


def test_a_notebook_with_only_failed_runs_lists_them_in_its_appendix(tmp_path):
    fx.write(tmp_path, fx.dblstm("tpu", 1, 32, status="failed"), "x")
    section = report.dblstm_section(report.load_report_data([tmp_path]))
    assert not section.figures and section.empty == "no successful run: 1 failed or skipped (listed in the appendix)."
    assert list(section.table("dblstm_runs_not_plotted")["status"]) == ["failed"]
    assert report.section_outputs(section, "body") == []
    shown = report.section_outputs(section, "appendix")
    assert shown[0][0]["text/markdown"] == "## Appendix: dBLSTM on UCI HAR" and "failed" in shown[-1][0]["text/plain"]


def test_a_partial_record_missing_optional_metrics_still_reports(tmp_path):
    record = fx.cnn("gpu", 256)
    for name in ("epoch_time_steady_s", "epoch_time_steady_std_s", "sample_time_steady_us", "test_loss"):
        del record["metrics"][name]
    record["timings"] = {}
    fx.write(tmp_path, record, "batch_size-256")
    section = report.cnn_section(report.load_report_data([tmp_path]))
    assert section.text == ["No run recorded its steady epoch time: nothing to draw."]
    assert "steady epoch (s)" not in section.table("cnn_mnist").columns
    assert "cnn_mnist_headline" not in section.figures  # nothing of ours to draw beside the published ones
    assert section.table("cnn_mnist")["test accuracy"].tolist() == pytest.approx([0.97744])


def test_provenance_names_devices_software_commits_and_stand_in_data(data):
    section = report.provenance_section(data)
    devices = section.table("provenance_devices").set_index("device")
    assert devices.loc["GPU: Tesla T4", "compute capability"] == "7.5"
    assert devices.loc["TPU x8: TPU v2-8", "replicas"] == "8"
    assert section.table("provenance_software")["TensorFlow"].notna().all()
    assert section.table("provenance_runs")["git commits"].ne("").all()
    sources = section.table("provenance_data").set_index(["notebook", "source"])["runs"]
    assert sources.loc[("cnn_mnist", "OFFLINE (stand-in)")] == 2
    assert sources.loc[("matmul_tflops", "generated (the workload itself)")] == 6  # runs (one kernel each), not combinations; random matrices: no warning
    assert any("uci_har: SYNTHETIC" in warning for warning in section.warnings)


# --- writers --------------------------------------------------------------------------------------

def test_numbers_print_with_four_significant_digits_and_no_exponent():
    assert [format_number(v) for v in (1711.4, 0.153781, 256.0, 12345, 0.0, float("nan"), None, True)] == \
        ["1711", "0.1538", "256", "12345", "0", "", "", "yes"]


def _assert_well_formed_tabular(tex: str, columns: int, rows: int) -> None:
    body = [line for line in tex.splitlines() if not line.startswith("%")]
    assert body[0].startswith("\\begin{tabular}{") and body[-1] == "\\end{tabular}"
    spec = re.match(r"\\begin\{tabular\}\{([lrc]+)\}", body[0]).group(1)
    assert len(spec) == columns
    assert [body[1], body[3], body[-2]] == ["\\toprule", "\\midrule", "\\bottomrule"]
    cells = [body[2], *body[4:-2]]
    assert len(cells) == rows + 1
    for line in cells:
        assert line.endswith("\\\\")
        assert len(re.findall(r"(?<!\\)&", line)) == columns - 1
        unescaped = re.sub(r"\\[&%_#$]", "", line[:-2])
        assert not re.search(r"[%_#$]", unescaped), line
    assert tex.count("{") == tex.count("}")


def test_latex_tables_are_booktabs_tabulars_with_special_characters_escaped():
    table = pd.DataFrame({"device": ["CPU_x & 100%", "GPU #1"], "epoch time (s)": [1.23456, np.nan], "n": [256, 512]})
    tex = latex_table(table, caption="timing")
    _assert_well_formed_tabular(tex, columns=3, rows=2)
    assert "CPU\\_x \\& 100\\%" in tex and "GPU \\#1" in tex and " -- " in tex and "1.235" in tex
    assert tex.startswith("% timing\n")
    assert "\\begin{tabular}{lrr}" in tex
    markdown = markdown_table(table, caption="timing")
    assert markdown.splitlines()[:2] == ["| device | epoch time (s) | n |", "| :--- | ---: | ---: |"]
    assert markdown.splitlines()[2] == "| CPU_x & 100% | 1.235 | 256 |"
    assert markdown.rstrip().endswith("Table: timing")


def test_a_table_wider_than_10_columns_comes_in_latex_parts_each_led_by_the_names_of_its_rows():
    table = pd.DataFrame({"notebook": ["a", "b"], "device": ["CPU", "GPU"], **{f"m{i}": [i, i + 0.5] for i in range(22)}})
    tex = latex_table(table, "wide")
    specs = re.findall(r"\\begin\{tabular\}\{([lrc]+)\}", tex)
    assert [len(spec) for spec in specs] == [10, 10, 8] and all(spec.startswith("ll") for spec in specs)
    assert all(f"m{i} " in tex or f"m{i}\\\\" in tex or f"m{i} &" in tex for i in range(22))
    assert tex.count("notebook & device") == 3 and tex.startswith("% wide\n")


def test_every_table_of_a_full_report_is_well_formed_latex(data, tmp_path):
    for build in (report.overview_section, report.summary_section, *report.SECTIONS.values(), report.provenance_section):
        section = build(data)
        for name, item in section.tables.items():
            tex = latex_table(item.table, item.caption)
            parts = [(part + "\\end{tabular}").strip() for part in tex.split("\\end{tabular}")[:-1]]
            widths = [len(re.search(r"\\begin\{tabular\}\{([lrc]+)\}", part).group(1)) for part in parts]
            assert max(widths) <= 10, (name, widths)  # a paper's column; a wider table comes in parts
            assert len(parts) == 1 or "every column in one table: the CSV" in tex
            for part, width in zip(parts, widths):
                _assert_well_formed_tabular(part, columns=width, rows=len(item.table))


def test_figures_are_written_as_png_at_300_dpi_pdf_and_svg_with_their_data(data, tmp_path):
    from PIL import Image

    item = report.matmul_section(data).figure("matmul_tflops_headline")
    paths = report.write_figure(item.figure, item.name, tmp_path, item.data)
    assert sorted(p.name for p in paths) == [f"matmul_tflops_headline.{ext}" for ext in ("csv", "pdf", "png", "svg")]
    with Image.open(tmp_path / "matmul_tflops_headline.png") as png:
        assert png.info["dpi"] == pytest.approx((300, 300), abs=0.5)
    assert (tmp_path / "matmul_tflops_headline.pdf").read_bytes().startswith(b"%PDF")
    assert "<svg" in (tmp_path / "matmul_tflops_headline.svg").read_text()
    behind = pd.read_csv(tmp_path / "matmul_tflops_headline.csv")
    assert 158.91 in set(behind["value"]) and "Sarkar 2018: K80" in set(behind["series"])


def test_a_headline_figure_is_drawn_again_for_one_and_two_columns_of_a_paper(data, tmp_path):
    """3.5 and 7 inches wide, no text under 8 points, each device in the colour it has in every figure."""
    from matplotlib.text import Text

    from colabkit.report.writers import PAPER_STYLE, write_paper_figure

    item = report.dblstm_section(data).figure("dblstm_har_headline")
    paths = write_paper_figure(item.paper, item.name, tmp_path)
    assert [path.name for path in paths] == ["dblstm_har_headline-1col.pdf", "dblstm_har_headline-2col.pdf"]
    import matplotlib

    for width in (3.5, 7.0):
        with matplotlib.rc_context(PAPER_STYLE):
            figure = item.paper(width)
        assert figure.get_figwidth() == width
        sizes = [text.get_fontsize() for text in figure.findobj(Text) if text.get_text().strip()]
        assert sizes and min(sizes) >= 8
    palette = data.palette
    for name in ("dblstm_har_headline", "dblstm_har_accuracy"):
        colours = {line.get_label().split(",")[0]: matplotlib.colors.to_hex(line.get_color())
                   for line in report.dblstm_section(data).figure(name).figure.axes[0].get_lines()
                   if line.get_label().endswith("bilstm_layers=1")}
        assert colours == {device: palette[device].lower() for device in colours} and len(colours) == 3


def test_the_records_csv_has_one_row_per_record_with_lists_as_json(data, tmp_path):
    path = report.write_records_csv(data.frame, tmp_path / "records.csv")
    frame = pd.read_csv(path)
    assert len(frame) == len(data.frame) == 32  # every record read, used or not (17 + 11 + 4); not the rejected file
    assert {"used", "device_label", "combination", "results_dir", "data_used"} <= set(frame.columns)
    repeats = frame["metrics.test_accuracy_per_repeat"].dropna().iloc[0]
    assert isinstance(json.loads(repeats), list)


# --- the command and the notebook -----------------------------------------------------------------

@pytest.mark.long("builds the whole report of three devices: every figure as PNG, PDF and SVG, the HTML twice")
def test_the_report_command_writes_every_promised_file(folders, data, tmp_path, capsys, monkeypatch):
    import jupyter_client
    import papermill
    from test_report_limits import body_counts, one_point_lines, over_limits

    def no_kernel(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the report is built in this process: no kernel, no papermill")

    monkeypatch.setattr(papermill, "execute_notebook", no_kernel)
    monkeypatch.setattr(jupyter_client.KernelManager, "start_kernel", no_kernel)
    out = tmp_path / "report"
    (out / "figures").mkdir(parents=True)
    (out / "figures" / "stale_figure.png").write_bytes(b"from an earlier report")
    # 1, not 0: the report is built, but one file (from-the-future.json) could not be read as a record.
    assert main(["report", *map(str, folders), "--out", str(out)]) == 1
    printed = capsys.readouterr()
    assert "report.html" in printed.out and "found 32 record(s) below" in printed.out
    assert "from-the-future.json: " in printed.err and "written by a newer colabkit" in printed.err
    sections = report.report_sections(data)
    figures = {name: item for section in sections for name, item in section.figures.items()}
    tables = {name for section in sections for name in section.tables}
    assert len(figures) >= 20 and {"cnn_mnist_headline", "paradnn_roofline"} - set(figures) == {"paradnn_roofline"}
    for name, item in figures.items():
        for extension in ("png", "pdf", "svg", "csv"):
            assert (out / "figures" / f"{name}.{extension}").stat().st_size > 0, (name, extension)
        for suffix in ("1col", "2col"):  # each headline figure, sized for a paper
            assert (out / "figures" / f"{name}-{suffix}.pdf").exists() == (item.paper is not None)
    assert sum(item.paper is not None for item in figures.values()) == 4  # the 4 experiments that have runs here
    assert {name: one_point_lines(item.figure) for name, item in figures.items() if item.body} == \
        {name: [] for name, item in figures.items() if item.body}  # no line through a single point in the body
    for name in tables:
        for extension in ("csv", "tex", "md"):
            assert (out / "tables" / f"{name}.{extension}").stat().st_size > 0, (name, extension)
    assert not (out / "figures" / "stale_figure.png").exists()
    assert len(pd.read_csv(out / "records.csv")) == len(data.frame)

    html = (out / "report.html").read_text()
    counts = body_counts(html)  # the body of a report of three devices keeps its limits too
    assert over_limits(counts) == [] and counts.headings[1:4] == ["Summary", "Not in this report, and why",
                                                                  "Along one parameter"], counts
    assert html.count("src=\"data:image/png;base64,") == len(figures)  # every figure embedded, none fetched
    assert 'alt="matmul_tflops_headline: Warm matmul TFLOPS against n' in html
    assert html.index("Appendix: Summary") > html.index("Methods") > html.index("dBLSTM on UCI HAR")
    assert not re.search(r"<script[^>]+src=|src=\"https?://", html)  # nothing fetched: opens offline
    assert "load_report_data" not in html  # code hidden
    assert "colabkit-warning" in html and "NOT the real dataset" in html
    for title in ("Matrix multiplication throughput", "CNN on MNIST", "dBLSTM on UCI HAR", "Appendix: Provenance"):
        assert title in html
    kept = (out / "report.ipynb").read_text()
    executed = json.loads(kept)
    assert not [output for cell in executed["cells"] for output in cell.get("outputs", [])
                if output.get("name") == "stderr" or output.get("output_type") == "error"]  # no warning leaks in
    with_code = (out / "report-with-code.html").read_text()
    assert "publish_report" in with_code and with_code.count("src=\"data:image/png;base64,") == len(figures)
    for text in (html, with_code, kept):  # no library warning, no path of this machine
        assert not re.search(r"[A-Za-z]*Warning\b", text)
        assert str(tmp_path) not in text and str(folders[0].parent) not in text and "/tmp/" not in text
    assert "results_dirs = ['../../results0/cpu', '../../results0/gpu', '../../results0/tpu']" in kept \
        or "results_dirs = ['../../" in kept  # relative to the report folder, for a reader to re-run it there


@pytest.mark.notebook
@pytest.mark.long("runs the report notebook twice in a kernel")
def test_the_report_notebook_runs_by_itself_under_plain_papermill(tmp_path):
    import papermill

    results = fx.cpu_only_results(tmp_path / "results")
    out = tmp_path / "out"
    executed = papermill.execute_notebook(
        str(NOTEBOOKS / "report.ipynb"), str(tmp_path / "report.ipynb"), progress_bar=False, cwd=str(REPO),
        parameters={"results_dirs": [str(results)], "output_dir": str(out)})
    text = json.dumps(executed.cells)
    assert "no accelerator comparison is possible" in text
    assert (out / "figures" / "matmul_tflops_headline.png").exists() and (out / "tables" / "cnn_mnist.tex").exists()
    assert (out / "records.csv").exists() and (out / "report.log").exists()

    # and with its defaults, in a folder with no outputs/ at all: every section says in one line why it is absent
    empty = tmp_path / "fresh-clone"
    empty.mkdir()
    executed = papermill.execute_notebook(str(NOTEBOOKS / "report.ipynb"), str(tmp_path / "default.ipynb"),
                                          progress_bar=False, cwd=str(empty))
    shown = ["".join(output.get("data", {}).get("text/plain", "")) for cell in executed.cells
             for output in cell.get("outputs", [])]
    assert any("WARNING: results folder outputs does not exist" in text for text in shown)
    absent = next(text for text in shown if text.startswith("- **"))  # one line per declared experiment
    assert sum(f"**{experiment.title}" in absent for experiment in all_experiments()) <= len(all_experiments())
    assert absent.count("no record in these results.") == len(all_experiments())
    assert not any(output.get("output_type") == "error" for cell in executed.cells for output in cell.get("outputs", []))


def test_the_report_notebook_shows_the_report_in_the_one_cell_the_command_fills_by_its_tag():
    """notebooks/report.ipynb and `colabkit report` show the same report: one code cell, tagged REPORT_CELL, calls
    publish_report (whose outputs the command keeps under it, whatever its text), one tagged FILES_CELL lists the
    files; the command finds both by their tags, so editing their code drops no output."""
    from colabkit.report.build import FILES_CELL, REPORT_CELL, REPORT_NOTEBOOK, report_notebook

    cells = [cell for cell in json.loads((NOTEBOOKS / "report.ipynb").read_text())["cells"] if cell["cell_type"] == "code"]
    tagged = {tag: "".join(cell["source"]) for cell in cells for tag in cell["metadata"].get("tags", [])}
    assert "report.publish_report(data, output_dir)" in tagged[REPORT_CELL]
    assert "files_written" in tagged[FILES_CELL]
    kept = report_notebook(REPORT_NOTEBOOK, {"results_dirs": ["x"]}, {REPORT_CELL: ["shown"], FILES_CELL: ["listed"]})
    outputs = {tag: cell.outputs for cell in kept.cells for tag in cell.metadata.get("tags", [])}
    assert outputs[REPORT_CELL] == ["shown"] and outputs[FILES_CELL] == ["listed"]
    assert all(name in report.SECTIONS for name in ("matmul_tflops", "cnn_mnist", "dblstm_har", "timeseries_rnn",
                                                    "paradnn"))


@pytest.mark.notebook
@pytest.mark.long("builds a report, then runs its notebook in a kernel")
def test_the_kept_notebook_reruns_where_it_lies_and_rebuilds_the_same_figures_and_tables(tmp_path):
    """The notebook `colabkit report` keeps is a view of what it built: re-run by papermill in the
    report folder, it calls the same section functions and writes the same files, byte for byte."""
    import papermill

    out = tmp_path / "report"
    report.build_report([fx.cpu_only_results(tmp_path / "results")], out)
    def written() -> dict[str, bytes]:
        return {f"{path.parent.name}/{path.name}": path.read_bytes() for folder in ("figures", "tables")
                for path in sorted((out / folder).glob("*.csv"))}

    built = written()
    kept = json.loads((out / "report.ipynb").read_text())
    shown = sum(len(cell.get("outputs", [])) for cell in kept["cells"])
    rerun = papermill.execute_notebook(str(out / "report.ipynb"), str(tmp_path / "rerun.ipynb"), progress_bar=False,
                                       cwd=str(out))
    assert written() == built and len(built) > 20
    assert sum(len(cell.get("outputs", [])) for cell in rerun.cells) == shown


def test_records_of_a_notebook_without_a_section_are_counted_and_their_failures_listed(tmp_path):
    record = fx.matmul("cpu", 256, status="failed")
    fx.write(tmp_path, {**record, "notebook": "resnet_cifar"}, "x")
    overview = report.overview_section(report.load_report_data([tmp_path]))
    assert overview.table("records_overview")["notebook"].tolist() == ["resnet_cifar"]
    assert any("resnet_cifar have no section" in text for text in overview.notes)
    assert overview.table("resnet_cifar_runs_not_plotted")["status"].tolist() == ["failed"]


def test_only_figures_drawn_from_stand_in_data_carry_the_warning(data):
    def warning(section, name):
        title = section.figure(name).figure._suptitle
        return title.get_text() if title else ""

    assert warning(report.matmul_section(data), "matmul_tflops_headline") == ""  # random matrices are the workload
    assert "mnist OFFLINE" in warning(report.cnn_section(data), "cnn_mnist_headline")
    assert warning(report.timeseries_section(data), "timeseries_loss_curves") == ""  # real weather data


def test_records_with_nothing_but_the_required_fields_still_give_every_section(tmp_path):
    from colabkit.records.record import make_record

    for notebook in ("matmul_tflops", "cnn_mnist", "dblstm_har", "timeseries_rnn"):
        for device in ("cpu", "gpu"):
            fx.write(tmp_path, make_record(notebook, "ok", {"device": device}, device=fx.DEVICES[device]), "bare")
    data = report.load_report_data([tmp_path])
    for build in (report.overview_section, report.summary_section, *report.SECTIONS.values(), report.provenance_section):
        section = build(data)
        assert not section.figures or build is report.summary_section  # no numbers: no figure to draw
        assert all(text for text in section.text)
        report.write_section(section, tmp_path / "out")
    assert report.speedup_table(data).empty


def write_runs(root: Path, make: Any, values: list[float], slug: str) -> None:
    """One record per value, as the repeats of a sweep (repeat 1 keeps the slug)."""
    for repeat, value in enumerate(values, start=1):
        fx.write(root, make(value), slug if repeat == 1 else f"{slug}_repeat-{repeat}")


def test_the_reading_calls_a_device_faster_only_where_every_configuration_agrees(tmp_path):
    write_runs(tmp_path, lambda v: fx.matmul("cpu", 256, v), [1.0, 1.02, 0.98], "a")
    write_runs(tmp_path, lambda v: fx.matmul("cpu", 512, v), [1.0, 1.02, 0.98], "b")
    write_runs(tmp_path, lambda v: fx.matmul("gpu", 256, v), [0.5, 0.51, 0.49], "a")  # slower at 256 ...
    write_runs(tmp_path, lambda v: fx.matmul("gpu", 512, v), [4.0, 4.1, 3.9], "b")  # ... faster at 512
    data = report.load_report_data([tmp_path])
    text = report.summary_section(data).text[0]
    assert "GPU: Tesla T4 was faster than CPU: AMD EPYC in some configurations and not in others" in text
    assert "(faster in 1, slower in 1 of 2 configurations at 75 %, n = 3; measured 0.500x to 4x)" in text
    per = report.summary_section(data).table("summary_speedup_per_configuration").set_index("combination")
    assert per.loc["device=gpu, n=512", "speedup_verdict"].startswith("faster (")
    assert per.loc["device=gpu, n=256", "speedup_verdict"].startswith("slower (")
    low, high = per.loc["device=gpu, n=512", ["speedup_low", "speedup_high"]]
    assert 3.9 / 1.02 <= low < 4.0 < high <= 4.1 / 0.98  # the interval of the ratio of medians, both sides resampled


def test_every_configuration_resolved_faster_makes_the_device_faster(tmp_path):
    for n in (256, 512):
        write_runs(tmp_path, lambda v: fx.matmul("cpu", n, v), [1.0, 1.05, 0.95], f"n-{n}")
        write_runs(tmp_path, lambda v: fx.matmul("gpu", n, v), [10.0, 10.5, 9.5], f"n-{n}")
    text = report.summary_section(report.load_report_data([tmp_path])).text[0]
    assert "GPU: Tesla T4 was faster than CPU: AMD EPYC (faster in 2 of 2 configurations at 75 %, n = 3; measured " \
           "10x)." in text


def test_runs_on_several_keras_backends_are_kept_apart_from_the_published_unknown_model(tmp_path):
    for backend in ("tensorflow", "jax", "torch"):
        fx.write(tmp_path, fx.cnn("cpu", 256, backend=backend), f"backend-{backend}")
    section = report.cnn_section(report.load_report_data([tmp_path]))
    frameworks = section.table("cnn_frameworks").set_index("framework")
    assert frameworks.loc["jax", "training time (s)"] == 50.0
    assert not any("1286.5" in str(value) for value in frameworks.to_numpy().ravel())  # no published figure beside ours
    assert not [name for name in frameworks.columns if "Ragab" in name or "seed" in name]
    published = section.table("cnn_frameworks_published")
    assert set(published["model"]) == {"published, model unknown"}
    tf_cpu = published[(published["framework"] == "tensorflow") & (published["device"] == "CPU")].iloc[0]
    assert tf_cpu["training time (s)"] == 1286.5 and tf_cpu["test accuracy"] == 0.9275
    assert not ((published["framework"] == "jax") & (published["device"] == "CPU")).any()  # never run: absent
    caption = section.tables["cnn_frameworks_published"].caption
    assert caption.startswith("Published, model unknown") and "not as a like-for-like comparison" in caption
    assert set(line_data(section.figure("cnn_mnist_accuracy").figure.axes[0])) == {
        "CPU: AMD EPYC, backend=jax", "CPU: AMD EPYC, backend=tensorflow", "CPU: AMD EPYC, backend=torch"}


def test_two_ok_records_are_one_combination_only_with_equal_parameters(tmp_path):
    old = fx.cnn("cpu", 256)  # written before the notebook had a `backend` parameter (TensorFlow, then)
    new = fx.cnn("cpu", 256, backend="jax")
    fx.write(tmp_path / "old", old, "batch_size-256")
    fx.write(tmp_path / "new", new, "batch_size-256_backend-jax")
    data = report.load_report_data([tmp_path / "old", tmp_path / "new"])
    assert data.merges.empty and len(data.ok("cnn_mnist")) == 2


def test_the_sweeps_own_parameters_name_the_combination_when_it_recorded_them(tmp_path):
    skipped = fx.cnn("gpu", 256, status="skipped")
    ran = fx.cnn("gpu", 256)
    ran["params"]["test_samples"] = 99  # a notebook may record a value of its own; the sweep's says which run it was
    for record in (skipped, ran):
        record["fingerprint"] = {"params": {"device": "gpu", "batch_size": 256}}
    fx.write(tmp_path / "cpu-runtime", skipped, "batch_size-256")
    fx.write(tmp_path / "gpu-runtime", ran, "batch_size-256")
    data = report.load_report_data([tmp_path / "cpu-runtime", tmp_path / "gpu-runtime"])
    assert data.merges["why"].tolist() == ["ok preferred over skipped"]


def test_a_recorded_std_over_repeats_is_used_as_the_record_gives_it(tmp_path):
    record = fx.dblstm("gpu", 1, 32)
    record["metrics"]["test_accuracy_std"] = 0.5  # e.g. a population std, as Kimm, Paik & Kimm 2021 printed it
    fx.write(tmp_path, record, "x")
    table = report.dblstm_table(report.load_report_data([tmp_path]))
    assert table["test_accuracy_std"].tolist() == [0.5]
    assert table["train_time_std_s"].tolist() == pytest.approx([np.std([0.9, 1.0, 1.1], ddof=1)])
    assert table["repeats"].tolist() == [3]


def test_runs_match_by_global_batch_not_by_the_batch_size_parameter(tmp_path):
    """256 per replica on 8 TPU cores is a global batch of 2,048: it matches the CPU at 2,048, never
    the CPU at 256 (which did 8x less work per step)."""
    cpu_small, cpu_large, tpu = fx.cnn("cpu", 256), fx.cnn("cpu", 2048), fx.cnn("tpu", 256)
    tpu["metrics"].update(global_batch_size=2048, epoch_time_steady_s=0.5)  # 256 per replica x 8
    fx.write(tmp_path, cpu_small, "batch_size-256")
    fx.write(tmp_path, cpu_large, "batch_size-2048")
    fx.write(tmp_path, tpu, "batch_size-256")
    data = report.load_report_data([tmp_path])
    table = report.speedup_table(data).set_index(["notebook", "device"])
    row = table.loc[("cnn_mnist", "TPU x8: TPU v2-8")]
    assert row["configurations"] == 1 and row["speedup"] == pytest.approx(10.0 / 0.5)  # vs the CPU at 2,048
    cnn = report.cnn_table(data)
    assert sorted(cnn["batch"]) == [256, 2048, 2048]
    assert cnn.loc[cnn["device"] == "TPU x8: TPU v2-8", "config"].item() == \
        cnn.loc[(cnn["device"] == "CPU: AMD EPYC") & (cnn["batch"] == 2048), "config"].item()


def test_unequal_work_per_epoch_is_compared_by_throughput_and_said(tmp_path):
    cpu, gpu = fx.cnn("cpu", 256), fx.cnn("gpu", 256)
    cpu["metrics"].update(samples_per_epoch=10_000, samples_per_s=1_000.0, epoch_time_steady_s=10.0)
    gpu["metrics"].update(samples_per_epoch=60_000, samples_per_s=30_000.0, epoch_time_steady_s=2.0)
    fx.write(tmp_path, cpu, "batch_size-256")
    fx.write(tmp_path, gpu, "batch_size-256")
    data = report.load_report_data([tmp_path])
    row = report.speedup_table(data).set_index(["notebook", "device"]).loc[("cnn_mnist", "GPU: Tesla T4")]
    assert row["speedup"] == pytest.approx(30.0)  # samples/s ratio, not the epoch-time ratio 5
    assert "work per epoch differed" in row["measure"]
    caption = report.cnn_section(data).tables["cnn_mnist_headline"].caption
    assert "Where the work per epoch differed, the speedup is of samples/s." in caption
    # equal work: the epoch-time ratio, and no such note
    gpu["metrics"].update(samples_per_epoch=10_000)
    fx.write(tmp_path, gpu, "batch_size-256")
    row = report.speedup_table(report.load_report_data([tmp_path])).set_index(["notebook", "device"]) \
        .loc[("cnn_mnist", "GPU: Tesla T4")]
    assert row["speedup"] == pytest.approx(5.0) and "differed" not in row["measure"]


def test_dblstm_speedups_use_throughput_where_work_differs_and_old_records_read_layers(tmp_path):
    cpu = fx.dblstm("cpu", 2, 64)
    gpu = fx.dblstm("gpu", 2, 64)
    cpu["metrics"].update(samples_per_epoch=1024, samples_per_s=100.0)
    gpu["metrics"].update(samples_per_epoch=7352, samples_per_s=5000.0)
    fx.write(tmp_path, cpu, "a")
    fx.write(tmp_path, gpu, "a")
    (speedup,) = report.configuration_speedups(report.load_report_data([tmp_path]), "dblstm_har").to_dict("records")
    assert speedup["speedup"] == pytest.approx(50.0) and "work per epoch differed" in speedup["measure"]
    fx.write(tmp_path, fx.dblstm("cpu", 2, 64, old_names=True), "a")  # written before the rename: `layers`
    table = report.dblstm_table(report.load_report_data([tmp_path]))
    assert set(table["model"]) == {"2 x BiLSTM + LSTM(64)"} and set(table["recurrent_layers"]) == {3}


def test_hand_runs_left_at_auto_match_by_the_sizes_they_used(tmp_path):
    """Two runs that asked units="auto" but were sized for different devices did different work:
    they must not be compared as one configuration."""
    cpu, gpu, gpu_small = fx.timeseries("cpu", 64), fx.timeseries("gpu", 64), fx.timeseries("gpu", 64)
    for record, units in ((cpu, 32), (gpu, 128), (gpu_small, 32)):
        record["params"]["units"] = "auto"
        record["sizes"] = {"device_kind": record["device"]["kind"], "auto": ["units"], "asked": {"units": "auto"},
                           "used": {"units": units}}
    fx.write(tmp_path, cpu, "manual-a")
    fx.write(tmp_path, gpu, "manual-b")
    table = report.speedup_table(report.load_report_data([tmp_path])).set_index(["notebook", "device"])
    assert table.loc[("timeseries_rnn", "GPU: Tesla T4"), "configurations"] == 0
    fx.write(tmp_path, gpu_small, "manual-b")  # now the GPU run used the CPU's sizes: the same work
    table = report.speedup_table(report.load_report_data([tmp_path])).set_index(["notebook", "device"])
    assert table.loc[("timeseries_rnn", "GPU: Tesla T4"), "configurations"] == 1


def test_training_sections_show_utilisation_and_the_fraction_of_peak(tmp_path):
    peaks = {"cpu": 0.3, "gpu": 65.0}
    for device in ("cpu", "gpu"):
        for batch in (256, 1024):
            record = fx.cnn(device, batch)
            metrics = record["metrics"]
            samples_per_s = metrics["samples_per_s"]
            metrics.update(model_flops_forward_per_sample=4_477_322.0, model_flops_train_per_sample=13_431_966.0,
                           model_tflops=13_431_966.0 * samples_per_s / 1e12, peak_tflops=peaks[device],
                           peak_precision="float32", arithmetic_intensity=40.0, mfu_reason=None,
                           mfu=13_431_966.0 * samples_per_s / 1e12 / peaks[device])
            fx.write(tmp_path, record, f"{device}-{batch}")
    fx.write(tmp_path, fx.cnn("cpu", 512), "cpu-512-old-record")  # written before FLOPs were counted: left out
    section = report.cnn_section(report.load_report_data([tmp_path]))
    table = section.table("cnn_utilisation")
    assert len(table) == 4 and set(table["global batch"]) == {256, 1024}
    gpu = table[table["device"].str.startswith("GPU")].iloc[0]
    assert gpu["fraction of peak (MFU)"] == pytest.approx(gpu["achieved GFLOPS"] / 1e3 / 65.0)
    figure = section.figure("cnn_mnist_fraction_of_peak")
    assert set(figure.data["global batch"]) == {256, 1024} and (figure.data["mfu"] > 0).all()


def test_the_methods_paragraph_names_hardware_software_runs_intervals_and_data(data):
    section = report.methods_section(data)
    text = " ".join(section.text)  # in paragraphs: hardware and software, runs, statistics, data, cost
    runs = data.runs()
    versions = runs["software.tensorflow"].dropna().iloc[0], runs["software.keras"].dropna().iloc[0]
    assert f"TensorFlow {versions[0]}" in text and f"Keras {versions[1]}" in text
    if "software.jax" in runs and runs["software.jax"].notna().any():
        assert f"JAX {runs['software.jax'].dropna().iloc[0]}" in text
    assert f"{len(runs)} successful runs of {runs['combination_id'].nunique()} combinations" in text
    assert "Hardware: host CPU" in text and str(runs["host.cpu_model"].dropna().iloc[0]) in text
    assert "75 % at 3" in text and "Zou & Donner 2008" in text and "first epoch" in text
    assert "stand-in, not the real data" in text  # the fixtures' offline MNIST and synthetic HAR are named


def test_the_methods_paragraph_says_fresh_processes_only_when_every_run_had_one(data):
    runs = data.runs()
    modes = set(runs["kernel.mode"].dropna()) if "kernel.mode" in runs else set()
    text = " ".join(report.methods_section(data).text)
    if modes <= {"fresh"}:
        assert "each run a fresh process" in text and "warm kernel" not in text
    else:  # warm kernels ran some: never called fresh processes
        assert "each run a fresh process" not in text and "warm kernel cleared between runs" in text



def test_runs_in_warm_kernels_are_not_called_fresh_processes_in_the_methods(tmp_path):
    for repeat, mode in enumerate(["reuse", "reuse", "fresh"], start=1):
        record = fx.cnn("cpu", 256)
        record["kernel"] = {"mode": mode, "runs_before": 0}
        fx.write(tmp_path, record, f"cpu-256-repeat-{repeat}")
    text = " ".join(report.methods_section(report.load_report_data([tmp_path])).text)
    assert "each run a fresh process" not in text and "warm kernel cleared between runs" in text
