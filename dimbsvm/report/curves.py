"""scikit-learn's ROC and precision-recall curves, from scores already sorted once.

``roc_curve`` and ``precision_recall_curve`` validate their labels (two
``np.unique`` passes), sort the scores and count positives above each
distinct score. A report that has sorted each repeat's rows by score already
(:func:`.figures.rows_by_score`) needs only the counts: integers, so the
curves below are scikit-learn's bit for bit (``tests/test_report_curves.py``
compares them on ties, signed zeros and random scores). Inputs with a single
class go to scikit-learn itself, for its warnings and conventions.

A curve is drawn from at most :data:`MAX_POINTS` of its vertices
(:func:`spaced_vertices`), on the page and in the PNGs.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MAX_POINTS", "precision_recall_from_counts", "precision_recall_from_sorted", "roc_from_counts",
           "roc_from_sorted", "run_starts", "spaced_vertices", "threshold_counts"]


def run_starts(values):
    """Positions where each run of equal values of an increasing array starts (its distinct values' first rows).

    Examples
    --------
    >>> run_starts(np.array([0.1, 0.1, 0.4, 0.8, 0.8])).tolist()
    [0, 2, 3]
    """
    return np.flatnonzero(np.concatenate([[True], values[1:] != values[:-1]]))


def threshold_counts(score, positive):
    """False and true positives at each distinct score, as scikit-learn's ``confusion_matrix_at_thresholds``.

    Parameters
    ----------
    score : ndarray of float
        Scores in increasing order (a stable sort: equal scores keep their
        rows' order).
    positive : ndarray of bool
        Whether each of those rows is of the positive class.

    Returns
    -------
    fps, tps : ndarray of float64
        Rows predicted positive at each threshold (score at least it), by
        decreasing threshold.
    thresholds : ndarray
        The distinct scores, decreasing; of equal scores (``-0.0`` and
        ``0.0``) the one of the last row, as scikit-learn's stable
        descending sort leaves it.

    Examples
    --------
    >>> fps, tps, thresholds = threshold_counts(np.array([0.1, 0.35, 0.4, 0.8]), np.array([0, 1, 0, 1], bool))
    >>> fps.tolist(), tps.tolist(), thresholds.tolist()
    ([0.0, 1.0, 1.0, 2.0], [1.0, 1.0, 2.0, 2.0], [0.8, 0.4, 0.35, 0.1])
    """
    score, positive = np.asarray(score), np.asarray(positive, dtype=bool)
    n = score.size
    starts = run_starts(score)
    ends = np.append(starts[1:], n)
    positives_below = np.concatenate([[0], np.cumsum(positive, dtype=np.int64)])
    at_least = (n - starts)[::-1]
    tps = (positives_below[n] - positives_below[starts])[::-1]
    return (at_least - tps).astype(np.float64), tps.astype(np.float64), score[ends - 1][::-1]


def roc_from_sorted(score, positive):
    """``sklearn.metrics.roc_curve(positive, score)`` (``drop_intermediate=True``) of increasing scores.

    Returns ``(fpr, tpr, thresholds)``, as scikit-learn does.
    """
    positive = np.asarray(positive, dtype=bool)
    if positive.all() or not positive.any():
        from sklearn.metrics import roc_curve

        return roc_curve(positive, score)
    return roc_from_counts(*threshold_counts(score, positive))


def roc_from_counts(fps, tps, thresholds):
    """``roc_curve``'s ``(fpr, tpr, thresholds)`` from :func:`threshold_counts`' (both classes counted).

    Rates of a class with no row are NaN, as scikit-learn gives them (with its warning, here none).
    """
    fps, tps = np.asarray(fps, dtype=np.float64), np.asarray(tps, dtype=np.float64)
    if fps.size > 2:  # the collinear points between corners, as scikit-learn drops them
        kept = np.flatnonzero(np.concatenate([[True], np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), [True]]))
        fps, tps, thresholds = fps[kept], tps[kept], thresholds[kept]
    tps, fps = np.concatenate([[0.0], tps]), np.concatenate([[0.0], fps])
    thresholds = np.concatenate([[np.inf], np.asarray(thresholds, dtype=np.float64)])
    with np.errstate(invalid="ignore", divide="ignore"):
        return fps / fps[-1], tps / tps[-1], thresholds


def precision_recall_from_sorted(score, positive):
    """``sklearn.metrics.precision_recall_curve(positive, score)`` of increasing scores.

    Returns ``(precision, recall, thresholds)``, as scikit-learn does.
    """
    positive = np.asarray(positive, dtype=bool)
    if not positive.any():
        from sklearn.metrics import precision_recall_curve

        return precision_recall_curve(positive, score)
    return precision_recall_from_counts(*threshold_counts(score, positive))


def precision_recall_from_counts(fps, tps, thresholds):
    """``precision_recall_curve``'s ``(precision, recall, thresholds)`` from :func:`threshold_counts`' output."""
    fps, tps = np.asarray(fps, dtype=np.float64), np.asarray(tps, dtype=np.float64)
    predicted = tps + fps  # at least one row: every threshold is a score
    precision = tps / predicted
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = tps / tps[-1]
    return np.concatenate([precision[::-1], [1.0]]), np.concatenate([recall[::-1], [0.0]]), thresholds[::-1]


#: The most vertices a drawn curve keeps (on the page and in the PNGs): a plot is ~400 pixels
#: across, so two per pixel already draw the curve as it is (a dropped vertex is within ~1/1000 of the path),
#: and each vertex costs the page ~50 bytes (four float64 columns and the repeat, base64): ~75 kB per repeat and
#: curve at most.
MAX_POINTS = 1000


def spaced_vertices(x, y, max_points=MAX_POINTS):
    """Positions of at most ``max_points`` vertices of a path, evenly spaced along its length; both ends kept.

    The length is measured with each axis scaled to its range (L1), so a
    curve keeps detail where it moves, on either axis; a dropped vertex lies
    within about ``1/max_points`` of the path through the kept ones.

    Examples
    --------
    >>> spaced_vertices(np.linspace(0, 1, 11), np.zeros(11), max_points=3).tolist()
    [0, 5, 10]
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size <= max_points:
        return np.arange(x.size)
    steps = sum(np.abs(np.diff(v)) / (np.ptp(v) or 1.0) for v in (x, y))
    along = np.concatenate([[0.0], np.cumsum(steps)])
    # the first vertex at or past each of max_points evenly spaced marks (the marks include both ends)
    picks = np.searchsorted(along, np.linspace(0.0, along[-1], max_points), side="left")
    return np.unique(np.concatenate([[0], np.minimum(picks, x.size - 1), [x.size - 1]]))
