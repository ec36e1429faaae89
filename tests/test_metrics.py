"""Metrics against closed forms written from the confusion matrix, and scikit-learn."""

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score, confusion_matrix

from dimbsvm.metrics import a_mean, f_measure, g_mean, imbalance_report, per_class_recall


def _random_labels(seed, n_classes, n=200):
    rng = np.random.default_rng(seed)
    y_true = rng.choice(n_classes, size=n, p=np.linspace(1, 3, n_classes) / np.linspace(1, 3, n_classes).sum())
    y_pred = np.where(rng.random(n) < 0.7, y_true, rng.integers(0, n_classes, size=n))
    return y_true, y_pred


@pytest.mark.parametrize("seed", range(5))
def test_binary_metrics_match_confusion_matrix(seed):
    y_true, y_pred = _random_labels(seed, 2)
    tn, fp, fn, tp = confusion_matrix(y_true, y_pred, labels=[0, 1]).ravel()
    tpr, tnr = tp / (tp + fn), tn / (tn + fp)
    precision = tp / (tp + fp)
    assert g_mean(y_true, y_pred) == pytest.approx(np.sqrt(tpr * tnr), rel=1e-12)
    assert f_measure(y_true, y_pred) == pytest.approx(2 * precision * tpr / (precision + tpr), rel=1e-12)
    assert a_mean(y_true, y_pred) == pytest.approx((tpr + tnr) / 2, rel=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_multiclass_metrics_match_recalls(seed):
    y_true, y_pred = _random_labels(seed, 4)
    cm = confusion_matrix(y_true, y_pred)
    recalls = np.diag(cm) / cm.sum(axis=1)
    assert g_mean(y_true, y_pred) == pytest.approx(np.prod(recalls) ** (1 / len(recalls)), rel=1e-12)
    assert a_mean(y_true, y_pred) == pytest.approx(balanced_accuracy_score(y_true, y_pred), rel=1e-12)
    assert list(per_class_recall(y_true, y_pred).values()) == pytest.approx(recalls)


@pytest.mark.parametrize("seed", range(3))
def test_weighted_recalls_are_the_weighted_confusion_matrix(seed):
    y_true, y_pred = _random_labels(seed, 3)
    weights = np.random.default_rng(seed).uniform(0, 2, size=y_true.size)
    cm = confusion_matrix(y_true, y_pred, sample_weight=weights)
    recalls = np.diag(cm) / cm.sum(axis=1)
    assert list(per_class_recall(y_true, y_pred, sample_weight=weights).values()) == pytest.approx(recalls, rel=1e-12)
    assert g_mean(y_true, y_pred, sample_weight=weights) == pytest.approx(np.prod(recalls) ** (1 / 3), rel=1e-12)
    assert g_mean(y_true, y_pred, sample_weight=np.ones(y_true.size)) == g_mean(y_true, y_pred)


def test_g_mean_is_zero_when_a_class_is_never_recognised():
    assert g_mean([0, 0, 1, 1], [0, 0, 0, 0]) == 0.0


def test_f_measure_with_string_labels_and_pos_label():
    y_true = ["a", "a", "b", "b", "b"]
    y_pred = ["a", "b", "b", "b", "a"]
    # for "a": tp=1, fp=1, fn=1 -> precision = recall = 0.5
    assert f_measure(y_true, y_pred, pos_label="a") == pytest.approx(0.5)


def test_imbalance_report_uses_minority_as_positive():
    y_true = [0] * 6 + [1] * 2
    y_pred = [0] * 5 + [1] + [1, 0]
    report = imbalance_report(y_true, y_pred)
    assert report["classes"] == {0: {"support": 6, "recall": 5 / 6}, 1: {"support": 2, "recall": 0.5}}
    assert report["f_measure"] == pytest.approx(0.5)  # tp=1, fp=1, fn=1
    assert report["g_mean"] == pytest.approx(np.sqrt(5 / 6 * 0.5))
