"""Metrics imbalanced learning is judged by.

All functions follow scikit-learn's ``metric(y_true, y_pred)`` convention and
agree with scikit-learn's definitions (the tests check them against it).
Recalls are counted directly with numpy rather than through
``recall_score``: threshold tuning calls G-mean hundreds of times per fit, and
the counting is ~30x faster.

Definitions (OTHR paper, eqs. 18-22):

* ``g_mean``: binary ``sqrt(TPR * TNR)``; multi-class, the geometric mean of
  the per-class recalls.
* ``f_measure``: F1 of the positive (minority) class.
* ``a_mean``: the arithmetic mean of the per-class recalls (balanced accuracy).
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import f1_score
from sklearn.utils.multiclass import unique_labels

__all__ = ["g_mean", "f_measure", "a_mean", "per_class_recall", "imbalance_report"]


def per_class_recall(y_true, y_pred, *, labels=None, sample_weight=None):
    """Recall of every class.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        True and predicted labels.
    labels : array-like, default=None
        Classes to report, in order; by default the sorted union of both.
    sample_weight : array-like of shape (n_samples,), default=None
        Row weights: a class's recall is the weight of its rows predicted as
        it over the weight of its rows (as ``recall_score(sample_weight=...)``).

    Returns
    -------
    recalls : dict
        ``{label: recall}``; a class absent from ``y_true`` (or of weight 0) has recall 0.

    Examples
    --------
    >>> per_class_recall([0, 0, 1, 1], [0, 1, 1, 1])
    {0: 0.5, 1: 1.0}
    """
    if labels is None:
        labels = unique_labels(y_true, y_pred)
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true and y_pred have different shapes: {y_true.shape} and {y_pred.shape}")
    recalls = {}
    for label in labels:
        actual = y_true == label
        if sample_weight is None:
            n_actual = int(actual.sum())
            recalls[_plain(label)] = float(np.count_nonzero(y_pred[actual] == label) / n_actual) if n_actual else 0.0
        else:
            weights = np.asarray(sample_weight, dtype=np.float64)[actual]
            total = float(weights.sum())
            recalls[_plain(label)] = float(weights[y_pred[actual] == label].sum() / total) if total > 0 else 0.0
    return recalls


def g_mean(y_true, y_pred, *, labels=None, sample_weight=None):
    """Geometric mean of the per-class recalls.

    For two classes this is ``sqrt(TPR * TNR)``.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        True and predicted labels.
    labels : array-like, default=None
        Classes over which the mean is taken; by default those in ``y_true``
        (a class that was predicted but never occurs has no recall).
    sample_weight : array-like of shape (n_samples,), default=None
        Row weights of the recalls (:func:`per_class_recall`).

    Returns
    -------
    score : float
        In [0, 1]; zero as soon as one class is never recognised.

    Examples
    --------
    >>> round(g_mean([0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 0]), 4)
    0.6124
    """
    if labels is None:
        labels = np.unique(np.asarray(y_true))
    recalls = np.array(list(per_class_recall(y_true, y_pred, labels=labels, sample_weight=sample_weight).values()))
    if np.any(recalls == 0):
        return 0.0
    return float(np.exp(np.mean(np.log(recalls))))


def f_measure(y_true, y_pred, *, pos_label=1):
    """F1 score of the positive (minority) class.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        True and predicted labels.
    pos_label : int or str, default=1
        The positive class; dimbsvm's readers map the minority class to 1.

    Returns
    -------
    score : float

    Examples
    --------
    >>> round(f_measure([0, 0, 1, 1], [0, 1, 1, 1]), 4)
    0.8
    """
    return float(f1_score(y_true, y_pred, pos_label=pos_label, average="binary", zero_division=0))


def a_mean(y_true, y_pred, *, labels=None):
    """Arithmetic mean of the per-class recalls (balanced accuracy).

    Examples
    --------
    >>> a_mean([0, 0, 1, 1], [0, 1, 1, 1])
    0.75
    """
    if labels is None:
        labels = np.unique(np.asarray(y_true))
    return float(np.mean(list(per_class_recall(y_true, y_pred, labels=labels).values())))


def imbalance_report(y_true, y_pred):
    """Per-class support and recall with the summary metrics.

    Returns
    -------
    report : dict
        ``{"classes": {label: {"support": int, "recall": float}}, "g_mean": ...,
        "a_mean": ...}``; ``f_measure`` is added for two classes, with the
        minority class of ``y_true`` as positive.

    Examples
    --------
    >>> imbalance_report([0, 0, 0, 1], [0, 0, 1, 1])["classes"][1]
    {'support': 1, 'recall': 1.0}
    """
    y_true = np.asarray(y_true)
    labels, counts = np.unique(y_true, return_counts=True)
    recalls = per_class_recall(y_true, y_pred, labels=labels)
    report = {
        "classes": {
            _plain(label): {"support": int(count), "recall": recalls[_plain(label)]}
            for label, count in zip(labels, counts)
        },
        "g_mean": g_mean(y_true, y_pred, labels=labels),
        "a_mean": a_mean(y_true, y_pred, labels=labels),
    }
    if len(labels) == 2:
        minority = labels[np.argmin(counts)]
        report["f_measure"] = f_measure(y_true, y_pred, pos_label=minority)
    return report


def _plain(label):
    """A numpy scalar label as the Python object (so reports serialise to JSON)."""
    return label.item() if isinstance(label, np.generic) else label
