"""A fold's metrics from counts that add up over its chunks: a confusion matrix and the ranks of its scores.

Every metric a job reports is a function of two things that sum over any
cut of the test rows: the confusion matrix over the data's classes, and, for
the score metrics, how each row's score ranks against the positive class's
scores (:func:`rank_counts`). So a store fold's metrics are computed from a
few numbers per stored chunk (and the positive rows' scores), never from
every row in one place, and an in-memory fold's are the same computation on
one chunk: one definition for every size. The values are scikit-learn's
(``recall_score``, ``f1_score``, ``matthews_corrcoef``, ``roc_auc_score``,
``average_precision_score``, ...) up to the rounding of a different order of
operations, which the tests bound. No Dask and no I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .metric_names import METRICS

__all__ = ["RankCounts", "confusion_counts", "metrics_from_counts", "rank_counts", "sorted_positive_scores"]


def confusion_counts(y_true, y_pred, classes) -> np.ndarray:
    """``counts[i, j]``: rows of true class ``classes[i]`` predicted ``classes[j]``, of int64.

    ``classes`` must hold every label of ``y_true`` and ``y_pred``.

    Examples
    --------
    >>> confusion_counts([0, 0, 1, 1], [0, 1, 1, 1], [0, 1]).tolist()
    [[1, 1], [0, 2]]
    """
    classes = np.asarray(classes)
    true, pred = np.searchsorted(classes, np.asarray(y_true)), np.searchsorted(classes, np.asarray(y_pred))
    k = classes.size
    if true.size and (true.max() >= k or pred.max() >= k or not np.array_equal(classes[true], np.asarray(y_true))
                      or not np.array_equal(classes[pred], np.asarray(y_pred))):
        raise ValueError(f"labels outside the classes {classes.tolist()} cannot be counted")
    return np.bincount(true * k + pred, minlength=k * k).reshape(k, k).astype(np.int64)


def sorted_positive_scores(y_true, scores, pos_label) -> np.ndarray:
    """The positive rows' scores, increasing (what :func:`rank_counts` ranks the other rows against)."""
    scores = np.asarray(scores, dtype=np.float64)
    if np.isnan(scores).any():
        raise ValueError("Input contains NaN.")  # scikit-learn's refusal of a NaN score
    return np.sort(scores[np.asarray(y_true) == pos_label])


@dataclass(frozen=True)
class RankCounts:
    """How a run of negative rows' scores rank against every positive score; adds up over runs.

    Attributes
    ----------
    above, tied : int
        Pairs (positive, negative) whose positive scores higher, equally.
    at_or_above : ndarray of int64 or None
        ``at_or_above[j]``: negatives scoring at least the ``j``-th distinct
        positive score (increasing); only where average precision is asked for.
    """

    above: int
    tied: int
    at_or_above: np.ndarray | None = None

    def __add__(self, other: "RankCounts") -> "RankCounts":
        both = None if self.at_or_above is None or other.at_or_above is None else self.at_or_above + \
            other.at_or_above
        return RankCounts(self.above + other.above, self.tied + other.tied, both)


def rank_counts(negative_scores, positives, *, precision_curve: bool = False) -> RankCounts:
    """The :class:`RankCounts` of ``negative_scores`` against ``positives`` (:func:`sorted_positive_scores`).

    Examples
    --------
    >>> rank_counts(np.array([0.1, 0.5]), np.array([0.2, 0.5, 0.9]), precision_curve=True)
    RankCounts(above=4, tied=1, at_or_above=array([1, 1, 0]))
    """
    negative = np.asarray(negative_scores, dtype=np.float64)
    if np.isnan(negative).any():
        raise ValueError("Input contains NaN.")
    below_or_at = np.searchsorted(positives, negative, side="right")
    below = np.searchsorted(positives, negative, side="left")
    above = int(positives.size * negative.size - below_or_at.sum())
    tied = int((below_or_at - below).sum())
    at_or_above = None
    if precision_curve:
        distinct = np.unique(positives)
        # negatives at least each distinct positive score: those whose score is not below it
        at_or_above = np.searchsorted(np.sort(negative), distinct, side="left")
        at_or_above = negative.size - at_or_above.astype(np.int64)
    return RankCounts(above, tied, at_or_above)


def metrics_from_counts(confusion, classes, *, metrics, pos_label, positives=None, ranks=None,
                        predict_time=None) -> dict:
    """The requested metrics from a fold's confusion matrix and, for ``auc`` and ``average_precision``,
    its positive rows' scores (:func:`sorted_positive_scores`) and the negatives' :class:`RankCounts`.

    Parameters
    ----------
    confusion : ndarray of shape (n_classes, n_classes)
        :func:`confusion_counts` of the fold's test rows.
    classes : array-like
        The classes ``confusion`` counts, increasing.
    metrics : sequence of str
    pos_label
        The positive class (binary metrics).
    positives, ranks : optional
        For the score metrics.
    predict_time : float, optional

    Examples
    --------
    >>> y, pred, score = np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1]), np.array([0.1, 0.6, 0.4, 0.9])
    >>> positives = sorted_positive_scores(y, score, 1)
    >>> record = metrics_from_counts(confusion_counts(y, pred, [0, 1]), [0, 1], metrics=("g_mean", "auc"),
    ...                              pos_label=1, positives=positives, ranks=rank_counts(score[y == 0], positives))
    >>> round(record["g_mean"], 4), record["auc"]
    (0.7071, 0.75)
    """
    confusion = np.asarray(confusion, dtype=np.int64)
    classes = np.asarray(classes)
    true_rows = confusion.sum(axis=1)
    present = true_rows > 0  # classes of the true labels: the per-class means run over these
    recalls = np.diag(confusion)[present] / true_rows[present]
    p = int(np.flatnonzero(classes == pos_label)[0]) if np.any(classes == pos_label) else None
    tp = int(confusion[p, p]) if p is not None else 0
    fn = int(true_rows[p]) - tp if p is not None else 0
    fp = int(confusion[:, p].sum()) - tp if p is not None else 0
    tn = int(confusion.sum()) - tp - fn - fp
    record = {}
    for name in metrics:
        if name == "g_mean":
            record[name] = 0.0 if np.any(recalls == 0) else float(np.exp(np.mean(np.log(recalls))))
        elif name in ("a_mean", "balanced_accuracy"):
            record[name] = float(np.mean(recalls))
        elif name == "f_measure":
            record[name] = _ratio(2 * tp, 2 * tp + fp + fn)
        elif name == "precision":
            record[name] = _ratio(tp, tp + fp)
        elif name == "recall":
            record[name] = _ratio(tp, tp + fn)
        elif name == "specificity":
            record[name] = _ratio(tn, tn + fp)
        elif name == "mcc":
            record[name] = _mcc(confusion)
        elif name == "auc":
            record[name] = _auc(positives, ranks, fp + tn)
        elif name == "average_precision":
            record[name] = _average_precision(positives, ranks)
        elif name == "predict_time":
            record[name] = predict_time
        elif name != "fit_time":
            raise ValueError(f"unknown metric {name!r}; accepted: {', '.join(METRICS)}")
    return record


def _ratio(numerator: int, denominator: int) -> float:
    """``numerator / denominator``, 0.0 where the denominator is 0 (scikit-learn's ``zero_division=0``)."""
    return float(numerator / denominator) if denominator else 0.0


def _mcc(confusion: np.ndarray) -> float:
    """Matthews' correlation coefficient of a confusion matrix, as scikit-learn computes it."""
    true_sum = confusion.sum(axis=1, dtype=np.float64)
    pred_sum = confusion.sum(axis=0, dtype=np.float64)
    correct = np.trace(confusion, dtype=np.float64)
    n = confusion.sum(dtype=np.float64)
    cov_true_pred = correct * n - np.dot(true_sum, pred_sum)
    cov_pred = n ** 2 - np.dot(pred_sum, pred_sum)
    cov_true = n ** 2 - np.dot(true_sum, true_sum)
    if cov_pred * cov_true == 0:
        return 0.0
    return float(cov_true_pred / np.sqrt(cov_true * cov_pred))


def _auc(positives, ranks: RankCounts, n_negative: int) -> float:
    """ROC-AUC as the Mann-Whitney statistic: the share of (positive, negative) pairs ranked right, ties half."""
    if positives is None or ranks is None:
        raise ValueError("auc needs the positive rows' scores and the negatives' rank counts")
    if positives.size == 0 or n_negative == 0:
        raise ValueError("Only one class is present in y_true. ROC AUC score is not defined in that case.")
    return float((2 * ranks.above + ranks.tied) / (2 * positives.size * n_negative))


def _average_precision(positives, ranks: RankCounts) -> float:
    """Average precision: the precision at each distinct positive score, weighted by the recall it adds."""
    if positives is None or ranks is None or ranks.at_or_above is None:
        raise ValueError("average_precision needs the positive rows' scores and the negatives' precision counts")
    if positives.size == 0:
        return 0.0
    distinct, first = np.unique(positives, return_index=True)
    true_at_or_above = positives.size - first  # positives scoring at least each distinct score
    precision = true_at_or_above / (true_at_or_above + ranks.at_or_above)
    recall = true_at_or_above / positives.size
    gained = recall - np.append(recall[1:], 0.0)  # from the highest score down: the recall each score adds
    return float(np.sum(gained * precision))
