"""Result records: schema, atomic writes, round trip through load_results."""

from __future__ import annotations

import json

import numpy as np
import pytest

from colabkit.errors import RecordError
from colabkit.io import write_json_atomic
from colabkit.records.loading import load_results
from colabkit.records.record import REQUIRED_FIELDS, SCHEMA_VERSION, make_record, read_record
from colabkit.run import start_run


def test_run_writes_a_complete_record_that_reads_back(tmp_path):
    run = start_run("matmul_tflops", params={"device": "cpu", "n": 256}, results_path=tmp_path / "r.json")
    path = run.record(device={"kind": "cpu", "name": "test cpu"}, metrics={"tflops_warm": np.float64(0.5)},
                      timings={"matmul": {"median_s": 0.1}}, data={"source": "synthetic"})
    record = read_record(path)
    assert set(REQUIRED_FIELDS) <= set(record)
    assert record["schema_version"] == SCHEMA_VERSION and record["status"] == "ok"
    assert record["params"] == {"device": "cpu", "n": 256}
    assert record["metrics"]["tflops_warm"] == 0.5 and isinstance(record["metrics"]["tflops_warm"], float)
    assert record["started_at"] <= record["finished_at"]
    assert record["software"]["python"] and record["host"]["cpu_cores"] >= 1
    assert "error" not in record


def test_default_path_is_under_outputs_notebook_device(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = start_run("cnn_mnist", params={"device": "cpu:2"}, results_path="")
    assert run.path.parts[:3] == ("outputs", "cnn_mnist", "cpu-2") and run.path.name.startswith("manual-")


def test_non_finite_numbers_become_null_not_invalid_json(tmp_path):
    path = write_json_atomic(tmp_path / "x.json", {"a": float("nan"), "b": [np.float32("inf"), 1]})
    assert json.loads(path.read_text()) == {"a": None, "b": [None, 1]}


def test_atomic_write_leaves_no_temporary_files_and_keeps_old_content_on_error(tmp_path):
    target = tmp_path / "r.json"
    write_json_atomic(target, {"v": 1})
    with pytest.raises(TypeError):
        write_json_atomic(target, {"v": object()})
    assert json.loads(target.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_failed_and_skipped_records_must_say_why():
    with pytest.raises(RecordError, match="needs an `error`"):
        make_record("nb", "failed", {"device": "cpu"})
    with pytest.raises(RecordError, match="status must be one of"):
        make_record("nb", "done", {"device": "cpu"})
    record = make_record("nb", "skipped", {"device": "tpu"}, error={"type": "DeviceNotAvailable", "message": "no tpu"})
    assert record["error"]["type"] == "DeviceNotAvailable"


def test_load_results_is_tidy_and_reports_unreadable_records(tmp_path):
    for n in (256, 512):
        write_json_atomic(tmp_path / "a" / f"n{n}.json",
                          make_record("matmul_tflops", "ok", {"device": "cpu", "n": n}, metrics={"tflops_warm": n / 1000}))
    write_json_atomic(tmp_path / "b" / "future.json", {**make_record("matmul_tflops", "ok", {"device": "gpu"}),
                                                      "schema_version": 99})
    write_json_atomic(tmp_path / "b" / "other.json", {"not": "a record"})
    with pytest.warns(UserWarning, match="2 record file"):
        frame = load_results(tmp_path / "a", tmp_path / "b")
    assert sorted(frame["params.n"]) == [256, 512]
    assert list(frame.sort_values("params.n")["metrics.tflops_warm"]) == [0.256, 0.512]
    assert {"path", "notebook", "status", "params.device", "metrics.tflops_warm", "host.cpu_model"} <= set(frame.columns)
    # every file that is not a readable record is named, also JSON that is no record at all
    (future, reason), (other, why) = frame.attrs["rejected"]
    assert future.endswith("future.json") and "schema_version 99" in reason
    assert other.endswith("other.json") and why == "not a record (a JSON object with no schema_version)"


def test_load_results_of_nothing_is_an_empty_frame(tmp_path):
    frame = load_results(tmp_path)
    assert frame.empty and "status" in frame.columns


def test_run_artifacts_are_named_after_the_final_record_even_while_running(tmp_path):
    running = start_run("nb", params={"device": "cpu"}, results_path=tmp_path / ".n-1.running.json")
    assert running.artifact(".weights.h5") == tmp_path / "n-1.weights.h5"
    done = start_run("nb", params={"device": "cpu"}, results_path=tmp_path / "n-1.json")
    assert done.artifact(".weights.h5") == tmp_path / "n-1.weights.h5"


def test_records_are_readable_by_others_sharing_the_folder(tmp_path):
    path = write_json_atomic(tmp_path / "r.json", {"v": 1})
    assert path.stat().st_mode & 0o777 == 0o644
