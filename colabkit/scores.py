"""Classification scores computed on the host from predictions: exact on any device.

Scores come from the full prediction array, so padding, replica splits or partial batches on
the device cannot change them. Definitions follow scikit-learn's: precision/recall/F1 per class,
macro = unweighted mean over classes, weighted = mean weighted by each class's support; a class
never predicted has precision 0 (and a class absent from the labels has recall 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def confusion_matrix(y_true: Any, y_pred: Any, num_classes: int) -> np.ndarray:
    """counts[i, j] = samples of true class i predicted as class j."""
    y_true, y_pred = np.asarray(y_true, int), np.asarray(y_pred, int)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true and y_pred differ in shape: {y_true.shape} vs {y_pred.shape}")
    counts = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(counts, (y_true, y_pred), 1)
    return counts


def _safe_divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    return np.divide(numerator, denominator, out=np.zeros_like(numerator, dtype=float), where=denominator > 0)


def scores_from_confusion(counts: np.ndarray, class_names: list[str] | None = None) -> dict[str, Any]:
    """Accuracy, per-class precision/recall/F1/support, and their macro and weighted means."""
    counts = np.asarray(counts, dtype=float)
    true_positive = np.diag(counts)
    support = counts.sum(axis=1)
    predicted = counts.sum(axis=0)
    precision = _safe_divide(true_positive, predicted)
    recall = _safe_divide(true_positive, support)
    f1 = _safe_divide(2 * precision * recall, precision + recall)
    total = support.sum()
    names = class_names or [str(index) for index in range(len(counts))]
    return {
        "accuracy": float(true_positive.sum() / total) if total else 0.0,
        "precision_macro": float(precision.mean()),
        "recall_macro": float(recall.mean()),
        "f1_macro": float(f1.mean()),
        "precision_weighted": float((precision * support).sum() / total) if total else 0.0,
        "recall_weighted": float((recall * support).sum() / total) if total else 0.0,
        "f1_weighted": float((f1 * support).sum() / total) if total else 0.0,
        "per_class": {name: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
                      for name, p, r, f, s in zip(names, precision, recall, f1, support)},
    }


def classification_report(y_true: Any, probabilities: Any, class_names: list[str]) -> dict[str, Any]:
    """Scores of predicted class probabilities against integer labels, plus the mean
    cross-entropy (the `loss` of a softmax classifier) and the confusion matrix."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    y_true = np.asarray(y_true, dtype=int)
    counts = confusion_matrix(y_true, probabilities.argmax(axis=1), len(class_names))
    picked = np.clip(probabilities[np.arange(len(y_true)), y_true], 1e-12, 1.0)
    report = scores_from_confusion(counts, class_names)
    report["loss"] = float(-np.log(picked).mean())
    report["confusion_matrix"] = counts.tolist()
    report["class_names"] = list(class_names)
    return report


def headline_scores(report: dict[str, Any]) -> dict[str, float]:
    """The test scores a training record leads with, from a classification_report: test_accuracy,
    precision and recall (macro means over classes, as f1_macro), f1_macro, f1_weighted, test_loss."""
    return {"test_accuracy": report["accuracy"], "precision": report["precision_macro"],
            "recall": report["recall_macro"], "f1_macro": report["f1_macro"],
            "f1_weighted": report["f1_weighted"], "test_loss": report["loss"]}
