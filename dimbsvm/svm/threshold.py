"""Threshold shifts of SVM-THR and SVM-OTHR as plain functions on arrays.

Margins are *signed* so that the positive (minority) class lies on the positive
side: a sample is predicted positive when ``margin + theta > 0``
(the paper's eqs. 17 and 24, ``h'(x) = h(x) + theta``).

* :func:`thr_shift` -- Lin & Chen's SVM-THR shift (eq. 16).
* :func:`farther_majority_neighbours` -- for each misclassified minority
  sample x_i, its nearest majority neighbour nx_i among the majority samples
  farther on the majority side, ``h(nx_i) < h(x_i)`` (DESIGN.md, "OTHR candidates").
* :func:`othr_candidates` -- the candidate shifts, eq. 23, plus ``theta = 0``.
* :func:`best_threshold` -- TPR, TNR, precision, G-mean and F-measure of every
  candidate in one sort, and the best one (ties go to the smallest ``|theta|``).
* :func:`othr_threshold` -- the three steps above: SVM-OTHR's search (Fig. 3).

No Dask, no I/O and no estimators here: callers validate their input.
"""

from __future__ import annotations

import logging

import numpy as np

from dimbsvm.graph.knn import nearest_neighbors

__all__ = [
    "OBJECTIVES",
    "best_threshold",
    "farther_majority_neighbours",
    "othr_candidates",
    "othr_threshold",
    "thr_shift",
]

logger = logging.getLogger(__name__)

#: The training criteria a threshold can maximise.
OBJECTIVES = ("g_mean", "f_measure")


def thr_shift(n_pos, n_neg):
    """SVM-THR's threshold shift of Lin & Chen, eq. 16.

    Parameters
    ----------
    n_pos : int
        Number of positive (minority) training samples, N+.
    n_neg : int
        Number of negative (majority) training samples, N-.

    Returns
    -------
    theta : float
        ``(N- - N+) / (N+ + N- + 2)``, added to the margin (eq. 17).

    Examples
    --------
    >>> thr_shift(10, 90)
    0.7843137254901961
    """
    return (n_neg - n_pos) / (n_pos + n_neg + 2)  # eq. 16


def farther_majority_neighbours(
    X_minority,
    margins_minority,
    X_majority,
    margins_majority,
    *,
    n_neighbors=10,
    metric="euclidean",
    method="auto",
    random_state=None,
):
    """Nearest majority neighbour farther on the majority side, per minority row.

    For every minority row with a negative margin (misclassified), the nearest
    majority row (in input space) among those with a *smaller* margin;
    among equally near rows (equal computed distances), the lowest row number.
    The search asks :func:`~dimbsvm.graph.knn.nearest_neighbors` for
    ``n_neighbors`` majority neighbours, keeps the nearest that satisfies the
    constraint, and doubles ``k`` only for the rows still without one (or
    whose answer may tie with rows beyond the k-th), up to all majority rows.

    Parameters
    ----------
    X_minority : {ndarray, sparse matrix} of shape (n_minority, n_features)
    margins_minority : ndarray of shape (n_minority,)
        Signed margins (positive = minority side).
    X_majority : {ndarray, sparse matrix} of shape (n_majority, n_features)
    margins_majority : ndarray of shape (n_majority,)
    n_neighbors : int, default=10
        Neighbours asked for in the first round; clipped to ``n_majority``.
        It changes the work done, not the answer (for an exact search).
    metric, method, random_state
        Passed to :func:`~dimbsvm.graph.knn.nearest_neighbors`. The last round,
        over all majority rows, is always exact.

    Returns
    -------
    neighbour : ndarray of shape (n_minority,), dtype int64
        Row number in ``X_majority`` of nx_i, or -1 where there is none: the
        row is correctly classified (margin >= 0) or no majority row has a
        smaller margin than it.

    Examples
    --------
    >>> import numpy as np
    >>> X_min, h_min = np.array([[0.0], [5.0]]), np.array([-0.5, 1.0])
    >>> X_maj, h_maj = np.array([[0.1], [0.3], [2.0]]), np.array([0.2, -1.0, -2.0])
    >>> farther_majority_neighbours(X_min, h_min, X_maj, h_maj)
    array([ 1, -1])
    """
    margins_minority = np.asarray(margins_minority, dtype=np.float64)
    margins_majority = np.asarray(margins_majority, dtype=np.float64)
    n_majority = margins_majority.shape[0]
    neighbour = np.full(margins_minority.shape[0], -1, dtype=np.int64)
    if n_majority == 0:
        return neighbour
    # A row at or below the lowest majority margin has no candidate anywhere:
    # drop it before searching, so that no row forces a search over all rows in vain.
    todo = np.flatnonzero((margins_minority < 0) & (margins_minority > margins_majority.min()))
    k = min(int(n_neighbors), n_majority)
    while todo.size:
        indices, distances = nearest_neighbors(
            X_majority,
            X_minority[todo],
            k,
            metric=metric,
            method="exact" if k == n_majority else method,
            random_state=random_state,
        )
        farther = margins_majority[indices] < margins_minority[todo, None]
        nearest = np.where(farther, distances, np.inf).min(axis=1)
        # Equally near majority rows: the lowest row number wins, so the answer does
        # not depend on how the search orders ties. A tie at the k-th neighbour may
        # continue beyond it: such rows are searched again with a larger k.
        tied = farther & (distances == nearest[:, None])
        choice = np.where(tied, indices, n_majority).min(axis=1)
        resolved = np.isfinite(nearest) & ((distances[:, -1] > nearest) | (k == n_majority))
        neighbour[todo[resolved]] = choice[resolved]
        todo = todo[~resolved]
        if k == n_majority:  # unreachable: the pre-filter guarantees a hit
            break
        logger.debug("%d minority rows without a farther neighbour in %d; widening", todo.size, k)
        k = min(2 * k, n_majority)
    return neighbour


def othr_candidates(margins_minority, margins_majority, neighbour):
    """Candidate threshold shifts of SVM-OTHR: ``theta = 0`` and eq. 23.

    Parameters
    ----------
    margins_minority : ndarray of shape (n_minority,)
    margins_majority : ndarray of shape (n_majority,)
    neighbour : ndarray of shape (n_minority,)
        From :func:`farther_majority_neighbours` (-1: no candidate).

    Returns
    -------
    theta : ndarray of shape (n_candidates,)
        ``0`` first, then ``-(h(x_i) + h(nx_i)) / 2`` for every minority row
        with a neighbour, in row order. Each moves x_i to the midpoint between
        x_i and nx_i on the margin scale, so x_i becomes positive and nx_i stays negative.
    minority_row, majority_row : ndarray of shape (n_candidates,), dtype int64
        The rows x_i and nx_i a candidate comes from (-1 for ``theta = 0``).

    Examples
    --------
    >>> import numpy as np
    >>> othr_candidates(np.array([-0.5, 1.0]), np.array([0.2, -1.0]), np.array([1, -1]))[0]
    array([0.  , 0.75])
    """
    margins_minority = np.asarray(margins_minority, dtype=np.float64)
    margins_majority = np.asarray(margins_majority, dtype=np.float64)
    rows = np.flatnonzero(np.asarray(neighbour) >= 0)
    partners = np.asarray(neighbour)[rows]
    theta = -(margins_minority[rows] + margins_majority[partners]) / 2  # eq. 23
    minus_one = np.array([-1], dtype=np.int64)
    return (
        np.concatenate([[0.0], theta]),
        np.concatenate([minus_one, rows.astype(np.int64)]),
        np.concatenate([minus_one, partners.astype(np.int64)]),
    )


def best_threshold(y, margins, candidates, *, objective="g_mean"):
    """Score every candidate shift on labelled margins and pick the best.

    All candidates are scored in ``O((n + c) log n)``: positive and negative
    margins are sorted once and each candidate's confusion matrix is read off
    with a binary search.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Truthy for the positive (minority) class.
    margins : array-like of shape (n_samples,)
        Signed margins; a sample is predicted positive when ``margin + theta > 0``.
    candidates : array-like of shape (n_candidates,)
        Shifts to score.
    objective : {"g_mean", "f_measure"}, default="g_mean"
        What "best" means: ``sqrt(TPR * TNR)`` (the paper) or the F1 score of
        the positive class. Ties go to the candidate with the smallest
        ``|theta|``, then to the first one. Ties are exact: the G-mean is
        compared through ``TP * TN``, the F-measure through one division.

    Returns
    -------
    theta : float
        The best candidate.
    table : dict of ndarray
        Equal-length arrays, one entry per candidate in the given order:
        ``theta``, ``tpr``, ``tnr``, ``precision``, ``g_mean``, ``f_measure``
        (``pandas.DataFrame(table)`` shows it). Precision and F-measure are 0
        when nothing is predicted positive.

    Raises
    ------
    ValueError
        If ``objective`` is unknown, there are no candidates, or one class is absent.

    Examples
    --------
    >>> theta, table = best_threshold([1, 1, 0, 0], [-0.6, 0.4, -0.8, -1.0], [0.0, 0.7])
    >>> theta
    0.7
    >>> table["g_mean"].round(3)
    array([0.707, 1.   ])
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}; got {objective!r}.")
    positive = np.asarray(y).astype(bool)
    margins = np.asarray(margins, dtype=np.float64)
    theta = np.asarray(candidates, dtype=np.float64).reshape(-1)
    if theta.size == 0:
        raise ValueError("best_threshold needs at least one candidate.")
    pos_sorted = np.sort(margins[positive])
    neg_sorted = np.sort(margins[~positive])
    n_pos, n_neg = pos_sorted.size, neg_sorted.size
    if n_pos == 0 or n_neg == 0:
        raise ValueError(
            f"best_threshold needs both classes; got {n_pos} positive and {n_neg} negative "
            "samples."
        )
    # margin + theta > 0  <=>  margin > -theta  (exact in IEEE arithmetic)
    tp = n_pos - np.searchsorted(pos_sorted, -theta, side="right").astype(np.int64)
    tn = np.searchsorted(neg_sorted, -theta, side="right").astype(np.int64)
    fp = n_neg - tn
    tpr, tnr = tp / n_pos, tn / n_neg
    predicted = tp + fp
    precision = np.divide(tp, predicted, out=np.zeros(theta.size), where=predicted > 0)
    g_mean = np.sqrt((tp * tn) / (n_pos * n_neg))  # eq. 19
    # 2 TP / (2 TP + FP + FN), eq. 18; n_pos + predicted > 0 always
    f_measure = (2 * tp) / (n_pos + predicted)
    key = tp * tn if objective == "g_mean" else f_measure
    best = np.lexsort((np.arange(theta.size), np.abs(theta), -key))[0]
    table = {
        "theta": theta,
        "tpr": tpr,
        "tnr": tnr,
        "precision": precision,
        "g_mean": g_mean,
        "f_measure": f_measure,
    }
    return float(theta[best]), table


def othr_threshold(
    X,
    y,
    margins,
    *,
    objective="g_mean",
    n_neighbors=10,
    metric="euclidean",
    method="auto",
    random_state=None,
):
    """SVM-OTHR's threshold search (paper Fig. 3) on labelled samples.

    Candidates come from :func:`farther_majority_neighbours` and
    :func:`othr_candidates`; :func:`best_threshold` scores them on the same
    samples.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        Where neighbours are measured (input space).
    y : array-like of shape (n_samples,)
        Truthy for the positive (minority) class.
    margins : array-like of shape (n_samples,)
        Signed margins of the samples.
    objective : {"g_mean", "f_measure"}, default="g_mean"
    n_neighbors, metric, method, random_state
        See :func:`farther_majority_neighbours`.

    Returns
    -------
    theta : float
        The chosen shift (``0.0`` when no candidate does better).
    table : dict of ndarray
        :func:`best_threshold`'s table plus ``sample`` and ``neighbour``, the
        row numbers in ``X`` of x_i and nx_i (-1 for ``theta = 0``).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0], [4.0]])
    >>> y = np.array([1, 1, 0, 0, 0])
    >>> theta, table = othr_threshold(X, y, np.array([0.5, -0.25, -0.75, -1.0, -1.5]))
    >>> theta, table["sample"].tolist(), table["neighbour"].tolist()
    (0.5, [-1, 1], [-1, 2])
    """
    positive = np.asarray(y).astype(bool)
    margins = np.asarray(margins, dtype=np.float64)
    minority_rows = np.flatnonzero(positive)
    majority_rows = np.flatnonzero(~positive)
    neighbour = farther_majority_neighbours(
        X[minority_rows],
        margins[minority_rows],
        X[majority_rows],
        margins[majority_rows],
        n_neighbors=n_neighbors,
        metric=metric,
        method=method,
        random_state=random_state,
    )
    candidates, from_minority, from_majority = othr_candidates(
        margins[minority_rows], margins[majority_rows], neighbour
    )
    theta, scores = best_threshold(positive, margins, candidates, objective=objective)
    table = {
        "theta": scores.pop("theta"),
        "sample": np.where(from_minority >= 0, minority_rows[from_minority], -1),
        "neighbour": np.where(from_majority >= 0, majority_rows[from_majority], -1),
        **scores,
    }
    return theta, table
