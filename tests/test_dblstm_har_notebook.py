"""The dBLSTM-HAR notebook through papermill: smoke size on the synthetic data, two logical CPU
replicas under MirroredStrategy, and the paper's model end to end on the real UCI HAR layout."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from data_fixtures import har_arrays, har_nested_zip
from helpers import execute_notebook

from colabkit.experiments import get
from colabkit.records.record import read_record

pytestmark = pytest.mark.notebook

ACTIVITIES = ["WALKING", "WALKING_UPSTAIRS", "WALKING_DOWNSTAIRS", "SITTING", "STANDING", "LAYING"]


def lstm_params(inputs: int, units: int) -> int:
    """An LSTM's weights: 4 gates, each with input and recurrent kernels and one bias."""
    return 4 * units * (inputs + units + 1)


# Hand-derived parameter count of Kimm, Paik & Kimm 2021's printed model (bilstm_layers=2, units=128, head_units=64,
# 9 input signals, 6 activities). A Keras LSTM of u units on i inputs has 4 gates, each with an
# (i x u) kernel, a (u x u) recurrent kernel and u biases: 4u(i + u + 1). A Bidirectional layer
# holds two of them and concatenates their outputs (2u features).
#   Bidirectional(LSTM(128)) on 9 inputs:    2 * 4*128*(9 + 128 + 1)   = 2 * 70,656  = 141,312
#   Bidirectional(LSTM(128)) on 256 inputs:  2 * 4*128*(256 + 128 + 1) = 2 * 197,120 = 394,240
#   LSTM(64) on 256 inputs:                  4*64*(256 + 64 + 1)                     =  82,176
#   Dense(6) on 64 inputs:                   64*6 + 6                                =     390
KIMM_2021_DBLSTM_PARAMS = 141_312 + 394_240 + 82_176 + 390  # 618,118


def test_hand_count_agrees_with_the_formula():
    assert KIMM_2021_DBLSTM_PARAMS == 618_118
    assert KIMM_2021_DBLSTM_PARAMS == (2 * lstm_params(9, 128) + 2 * lstm_params(256, 128)
                                      + lstm_params(256, 64) + 64 * 6 + 6)


def check_repeated_training_record(record, *, repeats: int, epochs: int, global_batch: int, train: int, test: int):
    """What every run's record must hold, whatever the device and data."""
    metrics, timings = record["metrics"], record["timings"]
    assert record["status"] == "ok" and metrics["repeats"] == repeats
    for name in ("test_accuracy", "precision", "recall", "f1_macro", "f1_weighted"):
        values = metrics[f"{name}_per_repeat"]
        assert len(values) == repeats and all(0.0 <= value <= 1.0 for value in values), name
        assert metrics[name] == pytest.approx(statistics.fmean(values))
        assert metrics[f"{name}_std"] == pytest.approx(statistics.pstdev(values))  # numpy.std, as the paper
    steps = -(-train // global_batch)
    assert len(timings["repeats"]) == repeats
    for repeat, (entry, evaluation) in enumerate(zip(timings["repeats"], record["evaluations"])):
        assert entry["seed"] == record["params"]["seed"] + repeat
        assert len(entry["epochs"]) == epochs and all(epoch["steps"] == steps for epoch in entry["epochs"])
        assert all(epoch["validation_s"] == 0.0 for epoch in entry["epochs"])  # no validation during fit
        # each repeat's steady epoch time: the median of its epochs after the first
        steady = statistics.median(epoch["epoch_s"] for epoch in entry["epochs"][1:])
        assert metrics["epoch_time_steady_s_per_repeat"][repeat] == pytest.approx(steady)
        assert metrics["epoch_time_first_s_per_repeat"][repeat] == entry["epochs"][0]["epoch_s"]
        assert sum(map(sum, evaluation["confusion_matrix"])) == test  # every test window scored once
        assert metrics["test_accuracy_per_repeat"][repeat] == pytest.approx(evaluation["accuracy"])
    for name in ("epoch_time_first_s", "epoch_time_steady_s", "step_time_steady_ms", "samples_per_s", "train_time_s"):
        assert metrics[name] == pytest.approx(statistics.median(metrics[f"{name}_per_repeat"])) and metrics[name] > 0
    assert metrics["step_time_steady_ms"] == pytest.approx(
        1e3 * metrics["epoch_time_steady_s"] / steps, rel=0.5)  # median of ratios vs ratio of medians
    # the paper's perf_counter spans every repeat's fit and more (build, predict, score)
    assert metrics["experiment_time_s"] >= sum(metrics["train_time_s_per_repeat"])
    assert timings["experiment_time_s"] == metrics["experiment_time_s"]
    assert record["evaluation"]["pooled_over_repeats"] == repeats
    assert sum(map(sum, record["evaluation"]["confusion_matrix"])) == repeats * test
    assert record["evaluation"]["class_names"] == ACTIVITIES
    assert set(record["history"]) == {"loss", "accuracy", "precision", "recall"}  # the paper's curves
    assert len(record["histories"]) == repeats and all(len(h["loss"]) == epochs for h in record["histories"])


def test_smoke_run_on_the_synthetic_data_repeats_and_summarises(tmp_path, warm_kernels):
    executed, record_path = execute_notebook(
        "dblstm_har", tmp_path, warm_kernels, device="cpu", batch_size=64, units=8, bilstm_layers=1, head_units=8,
        epochs=2, models_per_run=2, train_samples=192, test_samples=96, data_source="offline", seed=5)
    record = read_record(record_path)
    assert record["data"]["source"] == "synthetic" and record["data"]["sizes"] == {"train": 7352, "test": 2947}
    check_repeated_training_record(record, repeats=2, epochs=2, global_batch=64, train=192, test=96)
    metrics = record["metrics"]
    assert set(get("dblstm_har").metrics) <= set(metrics)  # every metric its declaration promises
    # 1 x Bidirectional(LSTM(8)) on 9 inputs, LSTM(8) on 16, Dense(6) on 8
    assert metrics["params"] == 2 * (4 * 8 * (9 + 8 + 1)) + 4 * 8 * (16 + 8 + 1) + 8 * 6 + 6
    assert metrics["global_batch_size"] == 64 and metrics["replicas"] == 1 and metrics["epochs_run"] == 2
    assert record["device"]["kind"] == "cpu" and record["params"]["units"] == 8
    outputs = str([o for cell in executed.cells for o in cell.get("outputs", [])])
    images = [o for cell in executed.cells for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 2  # the evaluation-metric curves and the confusion matrix
    assert "SYNTHETIC SUBSTITUTE" in outputs and "not comparable" in outputs  # said loudly
    assert ">#1: " in outputs and ">#2: " in outputs and "Accuracy: " in outputs  # the paper's printout


def test_two_logical_cpu_replicas_split_the_global_batch(tmp_path, warm_kernels):
    _, record_path = execute_notebook(
        "dblstm_har", tmp_path, warm_kernels, device="cpu:2", batch_size=32, units=4, bilstm_layers=1, head_units=4,
        epochs=2, models_per_run=1, train_samples=96, test_samples=40, data_source="offline")
    record = read_record(record_path)
    assert record["device"]["strategy"] == "MirroredStrategy" and record["metrics"]["replicas"] == 2
    assert record["metrics"]["batch_size_per_replica"] == 16 and record["metrics"]["global_batch_size"] == 32
    check_repeated_training_record(record, repeats=1, epochs=2, global_batch=32, train=96, test=40)


def test_paper_model_trains_end_to_end_on_the_real_uci_har_layout(tmp_path, monkeypatch, warm_kernels):
    """The datasets' miniature UCI HAR archive (UCI's nested-zip layout) reaches the kernel through
    COLABKIT_MIRROR_UCI_HAR; data_source='real' refuses anything but that archive."""
    archive = tmp_path / "uci_har_fixture.zip"
    archive.write_bytes(har_nested_zip())
    monkeypatch.setenv("COLABKIT_DATA", str(tmp_path / "cache"))
    monkeypatch.setenv("COLABKIT_MIRROR_UCI_HAR", archive.as_uri())
    _, record_path = execute_notebook(
        "dblstm_har", tmp_path, warm_kernels, device="cpu", batch_size=4, bilstm_layers=2, units=128, head_units=64,
        epochs=2, models_per_run=1, data_source="real")
    record = read_record(record_path)
    data = record["data"]
    assert data["source"] == "real" and data["url"] == archive.as_uri() and data["sizes"] == {"train": 12, "test": 6}
    assert data["class_names"] == ACTIVITIES and data["subjects"] == {"train": [1, 3], "test": [2]}
    assert record["metrics"]["params"] == KIMM_2021_DBLSTM_PARAMS  # the printed model, parameter for parameter
    assert record["architecture"] == "2 x BiLSTM(128) + LSTM(64)"
    check_repeated_training_record(record, repeats=1, epochs=2, global_batch=4, train=12, test=6)
    expected_labels = np.asarray(har_arrays()["y_test"]) - 1  # the archive's 1-6, shifted
    support = np.bincount(expected_labels, minlength=6).tolist()
    assert [row for row in map(sum, record["evaluation"]["confusion_matrix"])] == support


def test_no_head_and_auto_sizes_on_a_cpu(tmp_path, warm_kernels):
    """head_units=0: a single BiLSTM returns its last state straight into the softmax (the paper
    preset's one-layer model). epochs, models_per_run and train_samples left at "auto" take the CPU's sizes,
    printed and recorded, and the first steps give an estimate of the run's length."""
    executed, record_path = execute_notebook(
        "dblstm_har", tmp_path, warm_kernels, device="cpu", batch_size=64, units=4, bilstm_layers=1, head_units=0,
        test_samples=64, data_source="offline")
    record = read_record(record_path)
    # 1 x Bidirectional(LSTM(4)) on 9 inputs (8 features out), Dense(6) on 8; no LSTM head
    assert record["metrics"]["params"] == 2 * lstm_params(9, 4) + 8 * 6 + 6
    assert record["architecture"] == "1 x BiLSTM(4)"
    sizes = record["sizes"]
    assert sizes["device_kind"] == "cpu" and sorted(sizes["auto"]) == ["epochs", "models_per_run", "train_samples"]
    assert sizes["used"] == {"epochs": 3, "models_per_run": 1, "train_samples": 1024}
    assert record["params"]["epochs"] == "auto"  # what was asked stays in params
    check_repeated_training_record(record, repeats=1, epochs=3, global_batch=64, train=1024, test=64)
    estimate = record["estimate"]
    assert estimate["total_steps"] == 3 * 16 and estimate["remaining_s"] > 0
    outputs = str([o for cell in executed.cells for o in cell.get("outputs", [])])
    assert "sizes chosen for a CPU runtime" in outputs and "estimate after" in outputs


def test_a_negative_head_is_refused(tmp_path):
    import papermill

    with pytest.raises(papermill.PapermillExecutionError, match="head_units = -1"):
        execute_notebook("dblstm_har", tmp_path, device="cpu", batch_size=8, units=2, bilstm_layers=1, head_units=-1,
                         epochs=2, models_per_run=1, train_samples=16, test_samples=8, data_source="offline")
