"""Metrics from counts that add up over chunks, against scikit-learn's metrics on the rows themselves."""

import numpy as np
import pytest
from sklearn.metrics import (average_precision_score, balanced_accuracy_score, f1_score, matthews_corrcoef,
                             precision_score, recall_score, roc_auc_score)

from dimbsvm.metrics import a_mean, g_mean
from dimbsvm.model_selection.counted_metrics import (RankCounts, confusion_counts, metrics_from_counts, rank_counts,
                                                     sorted_positive_scores)

ALL = ("g_mean", "f_measure", "a_mean", "auc", "average_precision", "precision", "recall", "specificity", "mcc",
       "balanced_accuracy")


def _by_scikit_learn(y, pred, score, pos):
    positive = y == pos
    return {"g_mean": g_mean(y, pred), "a_mean": a_mean(y, pred), "balanced_accuracy": balanced_accuracy_score(y, pred),
            "f_measure": f1_score(positive, pred == pos, zero_division=0),
            "precision": precision_score(positive, pred == pos, zero_division=0),
            "recall": recall_score(positive, pred == pos, zero_division=0),
            "specificity": recall_score(~positive, pred != pos, zero_division=0), "mcc": matthews_corrcoef(y, pred),
            "auc": roc_auc_score(positive, score), "average_precision": average_precision_score(positive, score)}


def _in_chunks(y, pred, score, pos, classes, cuts):
    """Counts made a chunk at a time and added, as a store fold's tasks make them."""
    positives = sorted_positive_scores(y, score, pos)
    confusion, ranks = 0, RankCounts(0, 0, np.zeros(np.unique(positives).size, dtype=np.int64))
    for rows in np.split(np.arange(y.size), cuts):
        confusion = confusion + confusion_counts(y[rows], pred[rows], classes)
        ranks = ranks + rank_counts(score[rows][y[rows] != pos], positives, precision_curve=True)
    return metrics_from_counts(confusion, classes, metrics=ALL, pos_label=pos, positives=positives, ranks=ranks)


@pytest.mark.parametrize("seed", range(8))
def test_metrics_from_chunk_counts_are_scikit_learns(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 3000))
    y = (rng.random(n) < rng.uniform(0.02, 0.6)).astype(np.int64)
    y[:2] = [0, 1]
    pred = np.where(rng.random(n) < 0.7, y, 1 - y)
    score = np.round(rng.normal(size=n) + y, int(rng.integers(0, 3)))  # rounded: many ties
    cuts = np.sort(rng.choice(np.arange(1, n), size=int(rng.integers(0, 12)), replace=False))
    got = _in_chunks(y, pred, score, 1, [0, 1], cuts)
    expected = _by_scikit_learn(y, pred, score, 1)
    for name in ALL:
        assert got[name] == pytest.approx(expected[name], rel=1e-12, abs=1e-14), name


def test_multiclass_label_metrics_and_a_positive_class_that_is_not_the_last():
    rng = np.random.default_rng(4)
    y = rng.choice([3, 5, 9], size=700, p=[0.7, 0.2, 0.1])
    pred = np.where(rng.random(700) < 0.6, y, rng.choice([3, 5, 9], size=700))
    record = metrics_from_counts(confusion_counts(y, pred, [3, 5, 9]), [3, 5, 9],
                                 metrics=("g_mean", "a_mean", "mcc", "balanced_accuracy"), pos_label=9)
    assert record["g_mean"] == pytest.approx(g_mean(y, pred), rel=1e-12)
    assert record["a_mean"] == pytest.approx(a_mean(y, pred), rel=1e-12)
    assert record["mcc"] == pytest.approx(matthews_corrcoef(y, pred), rel=1e-12)
    assert record["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(y, pred), rel=1e-12)
    y2 = np.array([0, 0, 1, 1, 1, 1])  # the minority is class 0
    pred2, score2 = np.array([0, 1, 1, 1, 0, 1]), np.array([0.9, 0.2, 0.1, 0.3, 0.8, 0.4])
    got = _in_chunks(y2, pred2, score2, 0, [0, 1], [3])
    expected = _by_scikit_learn(y2, pred2, score2, 0)
    for name in ALL:
        assert got[name] == pytest.approx(expected[name], rel=1e-12, abs=1e-14), name


def test_degenerate_folds_as_scikit_learn_treats_them():
    y, pred, score = np.zeros(5, dtype=int), np.zeros(5, dtype=int), np.arange(5.0)
    positives = sorted_positive_scores(y, score, 1)
    ranks = rank_counts(score, positives)
    record = metrics_from_counts(confusion_counts(y, pred, [0, 1]), [0, 1], metrics=("g_mean", "f_measure", "mcc"),
                                 pos_label=1)
    assert record == {"g_mean": 1.0, "f_measure": 0.0, "mcc": 0.0}
    with pytest.raises(ValueError, match="Only one class is present"):
        metrics_from_counts(confusion_counts(y, pred, [0, 1]), [0, 1], metrics=("auc",), pos_label=1,
                            positives=positives, ranks=ranks)
    with pytest.raises(ValueError, match="Input contains NaN"):
        sorted_positive_scores(np.array([0, 1]), np.array([0.1, np.nan]), 1)
    with pytest.raises(ValueError, match="outside the classes"):
        confusion_counts([0, 2], [0, 1], [0, 1])
