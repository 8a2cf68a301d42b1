"""`python -m colabkit compare`: two folders of the same code on the same host give no difference; a
copy made 30 % better in every record is resolved in the right direction; --fail-above fails on the
regression side; --by compares across a parameter; folders it cannot use are one-line errors."""

from __future__ import annotations

import copy
import csv
from pathlib import Path

import pytest
import report_fixtures as fx

from colabkit.cli import main
from colabkit.errors import ColabkitError
from colabkit.io import write_json_atomic
from colabkit.records.record import read_record
from colabkit.statistics import Verdict

SPREAD = [1.0, 1.03, 0.97, 1.01, 0.99]  # five runs per combination, a few % apart as on a quiet host


def matmul_runs(root: Path, scale: float = 1.0, shift: int = 0, device: str = "cpu") -> Path:
    """Five runs of each of two matmul combinations, as a sweep with --repeats 5 writes them."""
    for n, tflops in ((256, 0.1), (512, 0.2)):
        for repeat in range(5):
            value = tflops * scale * SPREAD[(repeat + shift) % 5]
            slug = f"n-{n}" if repeat == 0 else f"n-{n}_repeat-{repeat + 1}"
            fx.write(root, fx.matmul(device, n, value), slug)
    return root


def better_copy(source: Path, target: Path, factor: float) -> Path:
    """A copy of every record of `source` with the headline (warm TFLOPS) multiplied by `factor`."""
    for path in source.rglob("*.json"):
        record = copy.deepcopy(read_record(path))
        record["metrics"]["tflops_warm"] *= factor
        write_json_atomic(target / path.relative_to(source), record)
    return target


def test_two_folders_of_the_same_code_and_host_give_no_difference_for_every_combination(tmp_path, capsys):
    before = matmul_runs(tmp_path / "before")
    after = matmul_runs(tmp_path / "after", shift=2)  # other runs of the same: the same spread, another order
    rows = fx.compare_folders(before, after)
    assert len(rows) == 2 and {row.comparison.verdict for row in rows} == {Verdict.NO_DIFFERENCE}
    assert main(["compare", str(before), str(after), "--fail-above", "5%"]) == 0
    printed = capsys.readouterr().out
    assert "2 combination(s) in common: 2 no difference resolved" in printed


def test_a_copy_made_30_percent_better_is_resolved_faster_and_the_other_way_fails_above_5_percent(tmp_path, capsys):
    before = matmul_runs(tmp_path / "before")
    better = better_copy(before, tmp_path / "better", 1.3)
    rows = fx.compare_folders(before, better)
    assert {row.comparison.verdict for row in rows} == {Verdict.FASTER}
    assert all(row.comparison.ratio.estimate == pytest.approx(1.3) and row.comparison.ratio.low > 1.2
               for row in rows)
    markdown, table = tmp_path / "c.md", tmp_path / "c.csv"
    assert main(["compare", str(before), str(better), "--fail-above", "5%", "--markdown", str(markdown),
                 "--csv", str(table)]) == 0  # faster is no regression
    text = markdown.read_text()
    assert "| faster (93.7 %, n = 5) |" in text and "candidate / baseline" in text  # 5 runs a side: 93.75 %
    assert "end to end" in text and "whatever their spreads" in text  # how the ratio's interval is made
    with open(table, newline="") as stream:
        parsed = list(csv.DictReader(stream))
    assert [row["verdict"] for row in parsed] == ["faster", "faster"] and float(parsed[0]["ratio"]) == pytest.approx(1.3)
    capsys.readouterr()
    assert main(["compare", str(better), str(before), "--fail-above", "5%"]) == 1  # the regression side
    printed = capsys.readouterr().out
    assert printed.count("regression: matmul_tflops") == 2 and "30.0 % slower (beyond 5 %)" in printed  # 1.3x the time per product
    assert main(["compare", str(better), str(before), "--fail-above", "40%"]) == 0  # slower, but not by 40 %


def test_runs_on_a_busy_host_can_be_left_out_and_are_counted(tmp_path, capsys):
    before = matmul_runs(tmp_path / "before")
    after = matmul_runs(tmp_path / "after")
    slow = fx.matmul("cpu", 256, 0.05)
    slow["host_quiet"] = False  # a run beside other work, half as fast
    fx.write(tmp_path / "after", slow, "n-256_repeat-6")
    assert main(["compare", str(before), str(after), "--exclude-busy"]) == 0
    printed = capsys.readouterr().out
    assert "left out, made on a busy host: 0 run(s) of" in printed and f"1 of {tmp_path / 'after'}" in printed
    kept = {row.description: row.comparison.candidate.n for row in fx.compare_folders(before, after)}
    left = {row.description: row.comparison.candidate.n for row in fx.compare_folders(before, after, exclude_busy=True)}
    assert kept["device=cpu, n=256"] == 6 and left["device=cpu, n=256"] == 5


def test_by_compares_across_a_parameter_and_times_read_the_other_way(tmp_path):
    cpu = matmul_runs(tmp_path / "cpu")
    gpu = better_copy(matmul_runs(tmp_path / "gpu-src", device="gpu"), tmp_path / "gpu", 10.0)
    with pytest.raises(Exception, match="no combination in common; --by device"):
        fx.compare_folders(cpu, gpu)
    rows = fx.compare_folders(cpu, gpu, by=["device"])
    assert len(rows) == 2 and all(row.comparison.verdict == Verdict.FASTER for row in rows)
    assert "device: cpu -> gpu" in rows[0].description
    for repeat, seconds in enumerate([10.0, 10.3, 9.7]):  # a time: more seconds is slower
        fx.write(tmp_path / "slow", fx.cnn("cpu", 256), "b" if repeat == 0 else f"b_repeat-{repeat + 1}")
        record = fx.cnn("cpu", 256)
        record["metrics"]["epoch_time_steady_s"] = seconds * 1.5
        fx.write(tmp_path / "slower", record, "b" if repeat == 0 else f"b_repeat-{repeat + 1}")
    (row,) = fx.compare_folders(tmp_path / "slow", tmp_path / "slower")
    assert row.comparison.verdict == Verdict.SLOWER and row.slowdown == pytest.approx(0.5)


def test_unreadable_or_unrelated_folders_are_one_line_errors(tmp_path, capsys):
    before = matmul_runs(tmp_path / "before")
    assert main(["compare", str(before), str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip() == f"error: compare: results folder {tmp_path / 'nowhere'} does not exist"
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "junk.json").write_text("not json")
    assert main(["compare", str(before), str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: compare: no readable ok record") and "\n" not in err
    fx.write(tmp_path / "cnn", fx.cnn("cpu", 256), "b")
    assert main(["compare", str(before), str(tmp_path / "cnn")]) == 2
    assert "have no combination in common" in capsys.readouterr().err


def test_the_markdown_page_names_the_tolerance_the_verdicts_used(tmp_path):
    before = matmul_runs(tmp_path / "before")
    better = better_copy(before, tmp_path / "better", 1.3)
    markdown = tmp_path / "c.md"
    assert main(["compare", str(before), str(better), "--markdown", str(markdown), "--tolerance", "5%"]) == 0
    assert "+/- 5 %" in markdown.read_text() and "+/- 2 %" not in markdown.read_text()


@pytest.mark.parametrize("option", ["--markdown", "--csv"])
def test_a_destination_that_cannot_be_written_is_a_one_line_error_before_anything_is_compared(tmp_path, capsys,
                                                                                               option):
    before = matmul_runs(tmp_path / "before")
    missing = tmp_path / "nodir" / "x.out"
    assert main(["compare", str(before), str(before), option, str(missing)]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == f"error: compare: cannot write {missing}: no such folder"
    assert captured.out == ""  # refused before the table was printed
    assert main(["compare", str(before), str(before), option, str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"error: compare: cannot write {tmp_path}: is a folder"


@pytest.mark.parametrize("zero", ["0", "0%", "0.0", "0.0%", "00", " 0.00 "])
def test_a_tolerance_of_zero_is_accepted_however_it_is_written(tmp_path, zero):
    before = matmul_runs(tmp_path / "before")
    better = better_copy(before, tmp_path / "better", 1.3)
    markdown = tmp_path / "c.md"
    assert main(["compare", str(before), str(better), "--markdown", str(markdown), "--tolerance", zero]) == 0
    assert "+/- 0 %" in markdown.read_text()


@pytest.mark.parametrize("bad", ["-1%", "100%", "x"])
def test_a_tolerance_outside_0_to_100_percent_is_refused(tmp_path, capsys, bad):
    with pytest.raises(SystemExit):
        main(["compare", str(tmp_path), str(tmp_path), "--tolerance", bad])
    assert "--tolerance" in capsys.readouterr().err


def _cnn_runs(root: Path, device: str, batch: int, global_batch: int | None, runs: int = 3) -> None:
    """`runs` runs of the CNN on `device` at `batch` per replica; `global_batch` as the run recorded it
    (None: a record from before the field, whose global batch is batch x replicas)."""
    for repeat in range(runs):
        record = fx.cnn(device, batch)
        if global_batch is None:
            record["metrics"].pop("global_batch_size")
        else:
            record["metrics"]["global_batch_size"] = global_batch
        fx.write(root, record, f"batch_size-{batch}" + (f"_repeat-{repeat + 1}" if repeat else ""))


@pytest.mark.parametrize("recorded", [True, False])
def test_by_device_pairs_runs_by_their_global_batch_as_the_report_does(tmp_path, capsys, recorded):
    """A CPU run at a global batch of 256 pairs with 128 per replica on 2 replicas (the same work), and
    never with 256 per replica on 2 (a global batch of 512), which is named as found on one side only."""
    _cnn_runs(tmp_path / "cpu", "cpu", 256, 256 if recorded else None)
    _cnn_runs(tmp_path / "cpu2", "cpu:2", 128, 256 if recorded else None)
    _cnn_runs(tmp_path / "cpu2", "cpu:2", 256, 512 if recorded else None)
    (row,) = fx.compare_folders(tmp_path / "cpu", tmp_path / "cpu2", by=["device"])
    assert row.description == "device=cpu (device: cpu -> cpu:2, batch_size: 256 -> 128)"
    assert main(["compare", str(tmp_path / "cpu"), str(tmp_path / "cpu2"), "--by", "device"]) == 0
    out = capsys.readouterr().out
    assert "1 combination(s) in common" in out
    assert f"only in {tmp_path / 'cpu2'}, compared with nothing: cnn_mnist device=cpu:2, batch_size=256" in out
    # the 256-per-replica runs alone: nothing pairs, and compare refuses to compare
    for path in (tmp_path / "cpu2").rglob("batch_size-128*.json"):
        path.unlink()
    with pytest.raises(ColabkitError, match="have no combination in common"):
        fx.compare_folders(tmp_path / "cpu", tmp_path / "cpu2", by=["device"])
    # without --by device, a CPU run and a 2-replica CPU run are other devices: nothing pairs either
    with pytest.raises(ColabkitError, match="have no combination in common; --by device"):
        fx.compare_folders(tmp_path / "cpu", tmp_path / "cpu2")


def test_compare_names_what_it_sets_aside_what_is_on_one_side_only_and_the_device_models(tmp_path, capsys):
    before = matmul_runs(tmp_path / "before")
    after = better_copy(before, tmp_path / "after", 1.0)
    for path in after.rglob("*.json"):  # the same runs, measured on another CPU model
        record = read_record(path)
        record["device"]["name"] = record["device"]["model"] = "Intel Xeon"
        write_json_atomic(path, record)
    fx.write(after, fx.matmul("cpu", 1024, 0.3), "n-1024")
    broken = after / "matmul_tflops" / "cpu" / "broken.json"
    broken.write_text("{not json")
    markdown, table = tmp_path / "c.md", tmp_path / "c.csv"
    assert main(["compare", str(before), str(after), "--markdown", str(markdown), "--csv", str(table)]) == 0
    out = capsys.readouterr().out
    models = "AMD EPYC -> Intel Xeon"
    assert f"measured on different device models (each ratio compares the models too): {models} (2 combination(s))" \
        in out
    assert f"only in {after}, compared with nothing: matmul_tflops device=cpu, n=1024" in out
    assert f"set aside: {broken}: not valid JSON" in out
    assert out.count(models) == 3  # the two rows and the note
    page = markdown.read_text()
    assert models in page and "n=1024" in page and "broken.json" in page
    rows = list(csv.DictReader(table.open()))
    assert {(row["baseline_device_model"], row["candidate_device_model"]) for row in rows} == {("AMD EPYC", "Intel Xeon")}


def test_a_folder_with_a_run_no_longer_offered_compared_with_itself_names_it_set_aside(tmp_path, capsys):
    """The case of issue 58: a CNN record of `mode: decode` (a mode the CNN no longer offers) beside an ok one."""
    folder = tmp_path / "results"
    _, old = fx.cnn_folder_with_a_decode_record(folder)
    assert main(["compare", str(folder), str(folder)]) == 0
    out = capsys.readouterr().out
    assert "1 combination(s) in common" in out and "no combination in common" not in out
    assert out.count(f"set aside: {old}: {fx.NO_LONGER_OFFERED}") == 1  # one file, named once
    (folder / "cnn_mnist" / "cpu" / "mode-train_batch_size-256.json").unlink()  # the old run alone
    assert main(["compare", str(folder), str(folder)]) == 2
    assert capsys.readouterr().err.strip() == (f"error: compare: no readable ok record of a declared experiment below "
                                               f"{folder}; 1 file(s) set aside, the first {old}: {fx.NO_LONGER_OFFERED}")


def test_folders_that_share_combinations_but_no_figure_never_say_they_share_nothing(tmp_path, capsys):
    before = matmul_runs(tmp_path / "before")
    after = better_copy(before, tmp_path / "after", 1.0)
    for side in (before, after):
        for path in side.rglob("*.json"):  # a figure measured on neither side (as an older record might lack)
            record = read_record(path)
            del record["metrics"]["tflops_warm"]
            write_json_atomic(path, record)
    assert main(["compare", str(before), str(after)]) == 2
    err = capsys.readouterr().err
    assert "combination(s) in common, but none with a figure measured on both sides" in err
    assert "no combination in common" not in err
