"""Classification scores against a confusion matrix checked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from colabkit.scores import (
    classification_report,
    confusion_matrix,
    headline_scores,
    scores_from_confusion,
)


def test_confusion_matrix_counts_true_rows_predicted_columns():
    counts = confusion_matrix([0, 0, 1, 2, 2, 2], [0, 1, 1, 2, 2, 0], 3)
    assert counts.tolist() == [[1, 1, 0], [0, 1, 0], [1, 0, 2]]


def test_scores_match_a_hand_computed_example():
    # true\pred   A  B  C      support: A 10, B 5, C 5 (20 samples)
    counts = np.array([[8, 2, 0],
                       [1, 3, 1],
                       [0, 0, 5]])
    # precision: A 8/9, B 3/5, C 5/6; recall: A 8/10, B 3/5, C 5/5
    # F1: A 2*(8/9)(0.8)/((8/9)+0.8) = 16/19; B 0.6; C 2*(5/6)(1)/((5/6)+1) = 10/11
    scores = scores_from_confusion(counts, ["A", "B", "C"])
    assert scores["accuracy"] == pytest.approx(16 / 20)
    f1 = np.array([16 / 19, 0.6, 10 / 11])
    assert scores["f1_macro"] == pytest.approx(f1.mean())
    assert scores["f1_weighted"] == pytest.approx((f1 * [10, 5, 5]).sum() / 20)
    assert scores["precision_macro"] == pytest.approx(np.mean([8 / 9, 3 / 5, 5 / 6]))
    assert scores["recall_weighted"] == pytest.approx(16 / 20)  # weighted recall is accuracy
    assert scores["per_class"]["B"] == {"precision": pytest.approx(0.6), "recall": pytest.approx(0.6),
                                        "f1": pytest.approx(0.6), "support": 5}


def test_never_predicted_class_scores_zero_not_nan():
    scores = scores_from_confusion(np.array([[2, 0], [1, 0]]))
    assert scores["per_class"]["1"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert np.isfinite(scores["f1_macro"])


def test_report_from_probabilities_has_cross_entropy_loss():
    probabilities = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    report = classification_report([0, 1, 1], probabilities, ["no", "yes"])
    assert report["accuracy"] == pytest.approx(2 / 3)
    assert report["loss"] == pytest.approx(-np.mean(np.log([0.9, 0.8, 0.4])))
    assert report["confusion_matrix"] == [[1, 0], [1, 1]]


def test_headline_scores_are_the_reports_accuracy_macro_precision_recall_and_both_f1s():
    # true\pred  A  B      precision A 3/4, B 1/2; recall A 3/5, B 2/3
    #   A        3  2      F1 A 2/3, B 4/7; macro F1 (2/3 + 4/7) / 2; weighted (5 * 2/3 + 3 * 4/7) / 8
    #   B        1  2
    probabilities = np.array([[0.9, 0.1]] * 3 + [[0.2, 0.8]] * 2 + [[0.7, 0.3]] + [[0.4, 0.6]] * 2)
    report = classification_report([0, 0, 0, 0, 0, 1, 1, 1], probabilities, ["A", "B"])
    assert report["confusion_matrix"] == [[3, 2], [1, 2]]
    scores = headline_scores(report)
    assert scores == {
        "test_accuracy": pytest.approx(5 / 8),
        "precision": pytest.approx((3 / 4 + 1 / 2) / 2),
        "recall": pytest.approx((3 / 5 + 2 / 3) / 2),
        "f1_macro": pytest.approx((2 / 3 + 4 / 7) / 2),
        "f1_weighted": pytest.approx((5 * 2 / 3 + 3 * 4 / 7) / 8),
        "test_loss": pytest.approx(report["loss"]),
    }
