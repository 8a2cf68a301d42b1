"""Reading records back (colabkit.records.loading): each file read once, every file that is not a
readable, plausible record named with the reason, the device request derived once, the records of a
combination merged; `status` and the report read through it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import report_fixtures as fx

from colabkit import report
from colabkit.records.loading import first_record, load_records
from colabkit.records.plausibility import METRIC_CHECKS, measurement_problems
from colabkit.sweep.console import format_status
from colabkit.sweep.folder import collect_status


def matmul_record(**metrics: float) -> dict:
    record = fx.matmul("cpu", 256, 0.5)
    record["metrics"].update(metrics)
    return record


def count_parses(monkeypatch) -> list[str]:
    """Every record file parsed from now on (by read_record's json.load), by name."""
    parsed: list[str] = []
    original = json.load

    def counting(stream, *args, **kwargs):
        parsed.append(Path(stream.name).name)
        return original(stream, *args, **kwargs)

    monkeypatch.setattr(json, "load", counting)  # what colabkit.records.record.read_record calls
    return parsed


def test_the_report_reads_each_record_file_once(tmp_path, monkeypatch):
    folders = fx.multi_device_results(tmp_path)
    parsed = count_parses(monkeypatch)
    data = report.load_report_data(folders)
    files = [path.name for folder in folders for path in sorted(folder.rglob("*.json"))]
    assert len(data.frame) == 32 and len(files) == 33  # 32 records and the file of a newer schema
    assert sorted(parsed) == sorted(files)  # each parsed once, the rejected one too


def test_the_command_looks_at_one_file_before_the_notebook_reads_them_all(tmp_path, monkeypatch):
    folder = fx.cpu_only_results(tmp_path)
    parsed = count_parses(monkeypatch)
    first, rejected = first_record([folder])
    assert first is not None and rejected == [] and len(parsed) == 1
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "list.json").write_text("[1, 2]")
    assert first_record([tmp_path / "empty"]) == (None, [(str(tmp_path / "empty" / "list.json"),
                                                          "a record is a JSON object, got list")])


@pytest.mark.parametrize(("metrics", "reason"), [
    ({"tflops_warm": -5}, "not a measurement: tflops_warm = -5 (must be a finite number > 0)"),
    ({"tflops_warm": float("nan")}, "not a measurement: tflops_warm = nan (must be a finite number > 0)"),
    ({"tflops_warm": float("inf")}, "not a measurement: tflops_warm = inf (must be a finite number > 0)"),
    ({"samples_per_s": -5, "model_tflops": 0}, "not a measurement: samples_per_s = -5, model_tflops = 0 "
                                               "(must be a finite number > 0)"),
])
def test_an_ok_record_that_cannot_be_a_measurement_is_set_aside_by_name(tmp_path, metrics, reason):
    path = fx.write(tmp_path, matmul_record(), "fine")
    bad = tmp_path / "matmul_tflops" / "cpu" / "bad.json"
    bad.write_text(json.dumps(matmul_record(**metrics)))  # json writes NaN and Infinity as JavaScript does
    loaded = load_records(tmp_path)
    assert list(loaded.records) == [str(path)]
    assert loaded.rejected == [(str(bad), reason)]
    data = report.report_data(loaded)
    overview = report.overview_section(data)
    # named from its results folder's name down, never by the machine's path
    assert overview.table("records_rejected").values.tolist() == [[f"{tmp_path.name}/matmul_tflops/cpu/bad.json", reason]]
    assert any("set aside" in warning for warning in overview.warnings)
    assert "-5" not in report.matmul_table(data)["tflops_warm"].astype(str).tolist()


def test_the_notebook_side_and_the_load_side_check_the_same_table():
    paradnn = {"samples_per_s": -5.0, "model_tflops": 0.2, "mfu": float("nan"), "arithmetic_intensity": 3.0}
    assert measurement_problems(paradnn) == ["samples_per_s = -5.0, mfu = nan (must be a finite number > 0)"]
    for name in ("samples_per_s", "model_tflops", "mfu", "arithmetic_intensity", "tflops_warm", "roofline_tflops"):
        assert name in METRIC_CHECKS
    assert measurement_problems({"mfu": None, "peak_tflops": None}) == []  # unknown is not wrong


def test_failed_and_skipped_records_are_not_checked_for_plausibility(tmp_path):
    record = fx.matmul("cpu", 256, status="failed")
    record["metrics"] = {"tflops_warm": -5}  # whatever a failed run left behind
    fx.write(tmp_path, record, "failed")
    assert len(load_records(tmp_path)) == 1


def test_files_that_are_not_records_are_named_with_the_reason(tmp_path):
    folder = tmp_path / "matmul_tflops" / "cpu"
    folder.mkdir(parents=True)
    (folder / "list.json").write_text("[]")
    (folder / "not-utf8.json").write_bytes(b'{"a": "\xff"}')
    (folder / "broken.json").write_text("{")
    damaged = matmul_record()
    damaged["device"] = ["cpu"]
    (folder / "device-list.json").write_text(json.dumps(damaged))
    (folder / ".n-1.running.json").write_text("{")  # a sweep's temporary: not looked at
    rejected = dict(load_records(tmp_path).rejected)
    assert rejected[str(folder / "list.json")] == "a record is a JSON object, got list"
    assert rejected[str(folder / "not-utf8.json")].startswith("not UTF-8 text")
    assert rejected[str(folder / "broken.json")].startswith("not valid JSON")
    assert rejected[str(folder / "device-list.json")] == "device is list, expected a JSON object"
    assert len(rejected) == 4


@pytest.mark.parametrize("notebook", ["../../../evil", "/etc/evil", "a/b", "..", ""])
def test_a_record_whose_notebook_is_a_path_is_set_aside(tmp_path, notebook):
    """A record's notebook names the report's files and folders (its figures, its section): a path there is a
    damaged or hostile record, set aside with why, never followed."""
    record = matmul_record()
    record["notebook"] = notebook
    path = tmp_path / "x.json"
    path.write_text(json.dumps(record))
    assert load_records(tmp_path).rejected == [
        (str(path), f"notebook {notebook!r} is not a notebook's name (a name, never a path)")]


def test_the_device_request_is_derived_once_for_records_written_before_it(tmp_path):
    old = fx.matmul("gpu", 256, status="skipped")
    old["device"] = {"requested": "gpu:2"}  # no `request`: an older colabkit wrote it
    fx.write(tmp_path, old, "old")
    from_params = fx.matmul("cpu", 512, 0.5)
    from_params["device"].pop("requested")
    from_params["params"]["device"] = "cpu:2"
    fx.write(tmp_path, from_params, "from-params")
    unknown = fx.matmul("cpu", 1024, 0.5)
    unknown["device"]["requested"], unknown["params"]["device"] = "potato", "potato"
    fx.write(tmp_path, unknown, "unknown")
    loaded = load_records(tmp_path)
    requests = {Path(path).stem: record["device"]["request"] for path, record in loaded.records.items()}
    assert requests == {"old": {"kind": "gpu", "count": 2}, "from-params": {"kind": "cpu", "count": 2},
                        "unknown": None}
    assert report.device_label(loaded.records[str(tmp_path / "matmul_tflops" / "gpu" / "old.json")]) \
        == "GPU x2 (requested)"


def test_a_device_request_that_is_no_request_is_set_aside(tmp_path):
    record = matmul_record()
    record["device"]["request"] = {"kind": "quantum", "count": 1}
    path = fx.write(tmp_path, record, "x")
    (item,) = load_records(tmp_path).rejected
    assert item[0] == str(path) and item[1].startswith("device.request: not a device request")


def test_folders_are_read_in_order_each_file_once_and_missing_ones_named(tmp_path):
    folders = fx.multi_device_results(tmp_path / "results")
    loaded = load_records([folders[0], tmp_path / "results", tmp_path / "nowhere"])
    assert loaded.missing_dirs == [str(tmp_path / "nowhere")]
    assert len(loaded) == 32  # the cpu folder's records once, though the parent folder holds them too
    assert all(loaded.folders[path] == str(folders[0]) for path in loaded.records if path.startswith(str(folders[0])))
    assert loaded.statuses() == {"ok": 25, "failed": 1, "skipped": 6}
    summary = loaded.summary()
    assert summary["records"] == 32 and summary["statuses"]["failed"] == 1 and len(summary["rejected"]) == 1
    assert json.loads(json.dumps(summary)) == summary  # plain JSON, as the report notebook writes it


def test_combinations_group_the_records_of_several_folders(tmp_path):
    loaded = load_records(fx.multi_device_results(tmp_path))
    groups = {(group.notebook, group.description): group for group in loaded.combinations()}
    twice = groups[("matmul_tflops", "device=cpu, n=256")]
    assert len(twice.paths) == 2 and twice.used.endswith("gpu/matmul_tflops/cpu/n-256.json")
    assert twice.why == "2 ok runs, each counted" and sorted(twice.repeats) == sorted(twice.paths)
    assert sum(len(group.paths) for group in groups.values()) == len(loaded)


def test_status_reads_through_the_loader_and_names_what_it_sets_aside(tmp_path):
    fx.write(tmp_path, matmul_record(), "fine")
    bad = fx.write(tmp_path, matmul_record(tflops_warm=-5), "bad")
    listed = tmp_path / "matmul_tflops" / "cpu" / "list.json"
    listed.write_text("[1]")
    status = collect_status(tmp_path)
    assert status.total("ok") == 1
    text = format_status(status)
    assert f"unreadable {bad}: not a measurement: tflops_warm = -5 (must be a finite number > 0)" in text
    assert f"unreadable {listed}: a record is a JSON object, got list" in text


def test_a_run_its_experiment_no_longer_offers_is_set_aside_by_the_report_with_why(tmp_path):
    kept, old = fx.cnn_folder_with_a_decode_record(tmp_path / "results")
    loaded = load_records(tmp_path / "results")
    assert list(loaded.records) == [str(kept)]
    assert loaded.rejected == [(str(old), fx.NO_LONGER_OFFERED)]
    data = report.report_data(loaded)
    overview = report.overview_section(data)
    assert overview.table("records_rejected").values.tolist() == [["results/cnn_mnist/cpu/mode-decode.json",
                                                                    fx.NO_LONGER_OFFERED]]
    assert any("runs their experiment no longer offers" in warning for warning in overview.warnings)
    counts = overview.table("records_overview").set_index("notebook").loc["cnn_mnist"]
    assert (counts["ok"], counts["records read"]) == (1, 1)  # counted nowhere as ok
    assert "1 file(s) were set aside, with why (appendix: Records)." in report.summary_section(data).text[0]


def test_a_run_of_a_value_the_declaration_still_offers_is_kept(tmp_path):
    kept, old = fx.cnn_folder_with_a_decode_record(tmp_path)
    record = json.loads(old.read_text())
    record["params"]["mode"] = record["fingerprint"]["params"]["mode"] = "inference"
    old.write_text(json.dumps(record))
    loaded = load_records(tmp_path)
    assert (sorted(loaded.records), loaded.rejected) == (sorted([str(kept), str(old)]), [])
