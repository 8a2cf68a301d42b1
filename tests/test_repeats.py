"""Repeated experiments: seeds, the seed-000 summary (mean +/- population std), medians of timing
figures over repeats, the pooled confusion matrix, and the mean-with-band training curves."""

from __future__ import annotations

import time

import numpy as np
import pytest

from colabkit.errors import ColabkitError, ExperimentError
from colabkit.scores import headline_scores, scores_from_confusion
from colabkit.timing.repeats import RepeatedTraining, RepeatResult, mean_std, run_repeats

CLASSES = ["A", "B"]
# Three repeats' confusion matrices (true rows, predicted columns) on the same 10 test samples.
CONFUSIONS = [[[5, 1], [1, 3]], [[6, 0], [2, 2]], [[4, 2], [0, 4]]]
ACCURACIES = [0.8, 0.8, 0.8]


def timer_metrics(first: float, steady: float | None, step_ms: float | None) -> dict:
    """The shape of TrainingTimer.metrics() (only the fields these tests look at, plus settings)."""
    return {"epochs_run": 3, "epoch_time_first_s": first, "epoch_time_steady_s": steady,
            "epoch_time_steady_std_s": 0.0, "step_time_steady_ms": step_ms, "samples_per_s": 1000.0 / first,
            "train_time_s": first + 2 * (steady or 0.0), "global_batch_size": 64, "target_accuracy": None}


def fake_repeat(repeat: int, seed: int, calls: list, sleep_s: float = 0.0) -> RepeatResult:
    calls.append((repeat, seed))
    time.sleep(sleep_s)
    counts = np.array(CONFUSIONS[repeat])
    evaluation = {**scores_from_confusion(counts, CLASSES), "confusion_matrix": counts.tolist(),
                  "class_names": CLASSES, "loss": 0.5 + repeat / 10}
    steady = [1.0, 3.0, 2.0][repeat]
    epochs = [{"epoch": e, "epoch_s": s} for e, s in enumerate([9.0, steady, steady + 0.5])]
    return RepeatResult(scores=headline_scores(evaluation), timing=timer_metrics(10.0 + repeat, steady, 10 * steady),
                        timings={"epochs": epochs}, history={"loss": [1.0 + repeat, 0.5 + repeat], "accuracy": [0.5, 0.6]},
                        evaluation=evaluation)


def test_every_repeat_gets_seed_plus_repeat_and_the_clock_spans_them_all():
    calls, echoed = [], []
    experiment = run_repeats(lambda r, s: fake_repeat(r, s, calls, sleep_s=0.05), 3, seed=7,
                             score="test_accuracy", echo=echoed.append)
    assert calls == [(0, 7), (1, 8), (2, 9)]
    assert [(result.repeat, result.seed) for result in experiment.results] == [(0, 7), (1, 8), (2, 9)]
    assert experiment.experiment_time_s >= 0.15  # the perf_counter wraps every repeat
    # each repeat announced, the paper's per-repeat line in percent, then its summary line and the elapsed time
    assert echoed[:6] == ["model 1 of 3 (seed 7)", ">#1: 80.000", "model 2 of 3 (seed 8)", ">#2: 80.000",
                          "model 3 of 3 (seed 9)", ">#3: 80.000"]
    assert echoed[6] == experiment.score_line("test_accuracy", "Accuracy") == "Accuracy: 80.000% (+/-0.000)"
    assert echoed[7] == f"Elapsed {experiment.experiment_time_s:.3f} seconds." and len(echoed) == 8


def test_scores_are_mean_and_population_std_over_repeats_with_every_value_kept():
    experiment = run_repeats(lambda r, s: fake_repeat(r, s, []), 3, echo=None)
    metrics = experiment.metrics()
    # F1 of B per repeat: r0 P 3/4 R 3/4 -> 0.75; r1 P 1 R 1/2 -> 2/3; r2 P 4/6 R 1 -> 0.8.
    # F1 of A per repeat: r0 P 5/6 R 5/6 -> 5/6; r1 P 6/8 R 1 -> 6/7; r2 P 1 R 4/6 -> 0.8.
    f1_macro = [(5 / 6 + 0.75) / 2, (6 / 7 + 2 / 3) / 2, (0.8 + 0.8) / 2]
    assert metrics["f1_macro_per_repeat"] == pytest.approx(f1_macro)
    assert metrics["f1_macro"] == pytest.approx(sum(f1_macro) / 3)
    mean = sum(f1_macro) / 3
    assert metrics["f1_macro_std"] == pytest.approx((sum((v - mean) ** 2 for v in f1_macro) / 3) ** 0.5)  # ddof=0
    assert metrics["test_accuracy"] == pytest.approx(0.8) and metrics["test_accuracy_std"] == pytest.approx(0.0)
    assert metrics["test_loss_per_repeat"] == pytest.approx([0.5, 0.6, 0.7])
    assert metrics["repeats"] == 3 and metrics["experiment_time_s"] == experiment.experiment_time_s


def test_published_summary_line_matches_numpy_mean_and_std_in_percent():
    experiment = run_repeats(lambda r, s: fake_repeat(r, s, []), 3, echo=None)
    values = experiment.per_repeat("f1_macro")
    assert experiment.score_line("f1_macro", "F1") == f"F1: {100 * np.mean(values):.3f}% (+/-{100 * np.std(values):.3f})"
    assert mean_std([0.9, 0.8, 0.85, 0.95]) == pytest.approx((0.875, np.std([0.9, 0.8, 0.85, 0.95])))


def test_timing_figures_are_medians_over_repeats_and_settings_are_copied():
    experiment = run_repeats(lambda r, s: fake_repeat(r, s, []), 3, echo=None)
    metrics = experiment.metrics()
    assert metrics["epoch_time_steady_s_per_repeat"] == [1.0, 3.0, 2.0]
    assert metrics["epoch_time_steady_s"] == 2.0  # the median, not the mean of a skewed set
    assert metrics["step_time_steady_ms"] == pytest.approx(20.0)
    assert metrics["epoch_time_first_s"] == 11.0 and metrics["epoch_time_first_s_per_repeat"] == [10.0, 11.0, 12.0]
    assert metrics["epochs_run"] == 3 and metrics["global_batch_size"] == 64
    assert "global_batch_size_per_repeat" not in metrics
    # the spread is that of every repeat's steady epochs (epochs 2 and 3 of each) pooled
    pooled = [1.0, 1.5, 3.0, 3.5, 2.0, 2.5]
    assert metrics["epoch_time_steady_std_s"] == pytest.approx(np.std(pooled, ddof=1))
    timings = experiment.timings()
    assert timings["epoch_s_steady_all_repeats"]["n"] == 6
    assert [entry["seed"] for entry in timings["repeats"]] == [0, 1, 2]


def test_one_epoch_fits_give_none_timing_figures_not_numbers():
    def one_epoch(repeat, seed):
        result = fake_repeat(repeat, seed, [])
        result.timing = timer_metrics(10.0, None, None)
        return result

    metrics = run_repeats(one_epoch, 2, echo=None).metrics()
    assert metrics["epoch_time_steady_s"] is None and metrics["step_time_steady_ms"] is None
    assert metrics["epoch_time_first_s"] == 10.0


def test_pooled_evaluation_sums_the_confusion_matrices():
    experiment = run_repeats(lambda r, s: fake_repeat(r, s, []), 3, echo=None)
    pooled = experiment.pooled_evaluation()
    assert pooled["confusion_matrix"] == [[15, 3], [3, 9]]
    assert pooled["accuracy"] == pytest.approx(24 / 30) and pooled["pooled_over_repeats"] == 3
    assert pooled["per_class"]["B"]["support"] == 12 and pooled["class_names"] == CLASSES


def test_mean_history_is_the_per_epoch_mean():
    experiment = run_repeats(lambda r, s: fake_repeat(r, s, []), 3, echo=None)
    assert experiment.mean_history() == {"loss": pytest.approx([2.0, 1.5]), "accuracy": pytest.approx([0.5, 0.6])}


@pytest.mark.parametrize("repeats", [0, -1, 1.5, True, "3"])
def test_repeats_must_be_a_positive_whole_number(repeats):
    with pytest.raises(ExperimentError, match="repeats must be"):
        run_repeats(lambda r, s: fake_repeat(r, s, []), repeats)
    assert issubclass(ExperimentError, ColabkitError) and issubclass(ExperimentError, ValueError)


def test_a_repeat_that_returns_something_else_or_other_scores_is_an_error():
    with pytest.raises(ExperimentError, match="RepeatResult"):
        run_repeats(lambda r, s: {"accuracy": 1.0}, 1, echo=None)
    first = fake_repeat(0, 0, [])
    other = fake_repeat(1, 1, [])
    other.scores = {"accuracy": 1.0}
    with pytest.raises(ExperimentError, match="different scores"):
        RepeatedTraining([first, other], 1.0)
    with pytest.raises(ExperimentError):
        RepeatedTraining([], 1.0)
