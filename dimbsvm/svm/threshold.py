"""Scoring threshold shifts of SVM-OTHR and choosing one, as plain functions on arrays.

Margins are *signed* so that the positive (minority) class lies on the positive
side: a sample is predicted positive when ``margin + theta > 0``
(the paper's eqs. 17 and 24, ``h'(x) = h(x) + theta``). The candidate shifts
come from :mod:`dimbsvm.svm.candidates` (whose names are re-exported here).

* :func:`best_threshold` -- TPR, TNR, precision, G-mean and F-measure of every
  candidate in one sort, and the best one (ties go to the smallest ``|theta|``).
  Refinements, all off by default there: another objective, a kernel-smoothed
  objective (:func:`smoothing_bandwidth`), a precision floor, and a tolerance
  (the smallest ``|theta|`` whose objective is within a fraction of the best).
* :func:`othr_threshold` -- candidates plus :func:`best_threshold`: with its
  defaults, SVM-OTHR's search (Fig. 3).

No Dask, no I/O and no estimators here: callers validate their input.
"""

from __future__ import annotations

import numpy as np

from dimbsvm.svm.candidates import (
    CANDIDATES,
    farther_majority_neighbours,
    midpoint_candidates,
    othr_candidates,
    thin_candidates,
    thr_shift,
)
from dimbsvm.svm.margin_order import resolved_sorted, stable_order
from dimbsvm.svm.objectives import OBJECTIVES, check_objective, counted_objective
from dimbsvm.svm.smoothing import (
    MAX_SMOOTHED_CANDIDATES,
    SMOOTHINGS,
    resolve_bandwidth,
    smoothed_count,
    smoothed_count_evaluations,
    smoothing_bandwidth,
    thinned_indices,
)

__all__ = [
    "CANDIDATES",
    "MAX_SMOOTHED_CANDIDATES",
    "OBJECTIVES",
    "SMOOTHINGS",
    "best_threshold",
    "chosen_threshold",
    "farther_majority_neighbours",
    "midpoint_candidates",
    "othr_candidates",
    "othr_threshold",
    "smoothed_count_evaluations",
    "smoothing_bandwidth",
    "thin_candidates",
    "thr_shift",
]

#: The training criteria a threshold can maximise: G-mean (the paper), the
#: F-measure of the positive class, or their geometric mean ``sqrt(G * F)``.

def best_threshold(
    y,
    margins,
    candidates,
    *,
    objective="g_mean",
    smoothing=None,
    tolerance=0.0,
    min_precision=0.0,
    sample_weight=None,
    order=None,
):
    """Score every candidate shift on labelled margins and pick the best.

    All candidates are scored in ``O((n + c) log n)``: positive and negative
    margins are sorted once and each candidate's confusion matrix is read off
    with a binary search. A smoothed objective costs
    ``O(n * min(c, MAX_SMOOTHED_CANDIDATES))`` more.

    With the defaults this is the paper's choice: the highest training
    G-mean, ties going to the smallest ``|theta|``.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Truthy for the positive (minority) class.
    margins : array-like of shape (n_samples,)
        Signed margins; a sample is predicted positive when ``margin + theta > 0``.
    candidates : array-like of shape (n_candidates,)
        Shifts to score.
    objective : {"g_mean", "f_measure", "g_f_mean"}, dict or callable, default="g_mean"
        What "best" means: ``sqrt(TPR * TNR)`` (the paper), the F1 score of
        the positive class, or ``sqrt(G-mean * F-measure)``, a compromise; or
        a cost matrix or a function of the counts (:mod:`dimbsvm.svm.objectives`).
        Without smoothing and tolerance, ties are exact: the G-mean is
        compared through ``TP * TN``, the F-measure through one division.
    smoothing : {"silverman"}, float or None, default=None
        ``None``: the objective of the exact counts (a staircase in
        ``theta``). Otherwise every count is smoothed with a Gaussian kernel,
        a sample counting ``Phi((margin + theta) / bandwidth)`` as positive,
        and the objective of the smoothed counts is maximised: an estimate of
        the objective on new data rather than on these few samples. A float
        is the bandwidth (margin units); ``"silverman"`` is
        :func:`smoothing_bandwidth` of the positive margins. Beyond
        :data:`MAX_SMOOTHED_CANDIDATES` candidates, only that many, evenly
        spaced in sorted order, are scored (the others score ``-inf``).
    tolerance : float, default=0.0
        Relative slack: every candidate whose objective is at least
        ``(1 - tolerance) * best`` counts as best, and the smallest ``|theta|``
        among them wins (then the first). A small tolerance keeps the shift
        from moving far for a negligible gain on the training samples, which
        protects precision on new data.
    min_precision : float, default=0.0
        Precision floor (exact counts): candidates whose positive predictions
        are less precise are left out. If none reaches the floor, the most
        precise candidates are the ones considered.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights: every count of the confusion matrix (exact or
        smoothed) is a sum of weights, so an integer weight acts as that many
        copies of the sample. The smoothing bandwidth is computed from the
        unweighted margins.
    order : ndarray or StableOrder, default=None
        ``np.argsort(margins, kind="stable")`` when the caller has it
        (:mod:`dimbsvm.svm.margin_order`; checked): each class's margins are
        then read off it instead of sorted.

    Returns
    -------
    theta : float
        The best candidate.
    table : dict of ndarray
        Equal-length arrays, one entry per candidate in the given order:
        ``theta``, ``tpr``, ``tnr``, ``precision``, ``g_mean``, ``f_measure``
        (exact counts), and ``score``, the maximised objective (smoothed when
        ``smoothing`` is set; ``-inf`` for candidates below the precision
        floor). ``pandas.DataFrame(table)`` shows it. Precision and
        F-measure are 0 when nothing is predicted positive.

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
    check_objective(objective)
    if not 0.0 <= tolerance < 1.0:
        raise ValueError(f"tolerance must be in [0, 1); got {tolerance!r}.")
    positive = np.asarray(y).astype(bool)
    margins = np.asarray(margins, dtype=np.float64)
    theta = np.asarray(candidates, dtype=np.float64).reshape(-1)
    if theta.size == 0:
        raise ValueError("best_threshold needs at least one candidate.")
    weights = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    order, ordered = resolved_sorted(margins, order)
    (pos_sorted, pos_weights), (neg_sorted, neg_weights) = (
        _sorted_with_weights(margins, weights, positive, order, ordered),
        _sorted_with_weights(margins, weights, ~positive, order, ordered))
    n_pos, n_neg = _total(pos_sorted, pos_weights), _total(neg_sorted, neg_weights)
    if n_pos == 0 or n_neg == 0:
        raise ValueError(
            f"best_threshold needs both classes; got {n_pos} positive and {n_neg} negative "
            "samples" + (" (weighted)." if weights is not None else ".")
        )
    # margin + theta > 0  <=>  margin > -theta  (exact in IEEE arithmetic)
    tp = n_pos - _at_or_below(pos_sorted, pos_weights, -theta)
    tn = _at_or_below(neg_sorted, neg_weights, -theta)
    if weights is not None:  # a cumulative sum and a total of the same weights can differ in the last bits
        tp, tn = np.clip(tp, 0.0, n_pos), np.clip(tn, 0.0, n_neg)
    bandwidth = resolve_bandwidth(smoothing, pos_sorted, margins)
    smoothed = None
    if bandwidth > 0:
        scored = thinned_indices(theta, MAX_SMOOTHED_CANDIDATES)
        smoothed = (scored, smoothed_count(pos_sorted, theta[scored], bandwidth, pos_weights),
                    smoothed_count(neg_sorted, theta[scored], bandwidth, neg_weights))
    return chosen_threshold(theta, tp, tn, n_pos, n_neg, smoothed, objective=objective, tolerance=tolerance,
                            min_precision=min_precision)


def chosen_threshold(theta, tp, tn, n_pos, n_neg, smoothed=None, *, objective="g_mean", tolerance=0.0,
                     min_precision=0.0):
    """The candidate table and the best shift from the counts of every candidate (:func:`best_threshold`'s end).

    Parameters
    ----------
    theta : ndarray of shape (n_candidates,)
    tp, tn : ndarray of shape (n_candidates,)
        True positives and true negatives per candidate: integers (exact
        G-mean ties) or weight sums.
    n_pos, n_neg : int or float
        The class totals.
    smoothed : tuple or None, default=None
        ``(scored, s_tp, s_fp)``: the positions of the scored candidates and
        their smoothed true and false positives; ``None``: exact counts.
    objective, tolerance, min_precision
        As :func:`best_threshold` takes them (checked there).

    Returns
    -------
    theta : float
    table : dict of ndarray
        As :func:`best_threshold` returns them.
    """
    fp = n_neg - tn
    tpr, tnr = tp / n_pos, tn / n_neg
    predicted = tp + fp
    precision = np.divide(tp, predicted, out=np.zeros(theta.size), where=predicted > 0)
    g_mean = np.sqrt((tp * tn) / (n_pos * n_neg))  # eq. 19
    # 2 TP / (2 TP + FP + FN), eq. 18; n_pos + predicted > 0 always
    f_measure = (2 * tp) / (n_pos + predicted)

    if not isinstance(objective, str) or objective not in OBJECTIVES:  # a cost matrix, function or scorer
        score = np.full(theta.size, -np.inf)
        if smoothed is not None:
            scored, s_tp, s_fp = smoothed
            score[scored] = counted_objective(objective, s_tp, s_fp, n_pos, n_neg)
        else:
            score = counted_objective(objective, tp, fp, n_pos, n_neg)
        exact_key = None
    elif smoothed is not None:
        scored, s_tp, s_fp = smoothed
        s_g = np.sqrt(np.clip((s_tp / n_pos) * (1.0 - s_fp / n_neg), 0.0, None))
        s_f = (2 * s_tp) / (n_pos + s_tp + s_fp)
        score = np.full(theta.size, -np.inf)
        score[scored] = {"g_mean": s_g, "f_measure": s_f, "g_f_mean": np.sqrt(s_g * s_f)}[
            objective
        ]
        exact_key = None
    else:
        score = {
            "g_mean": g_mean,
            "f_measure": f_measure,
            "g_f_mean": np.sqrt(g_mean * f_measure),
        }[objective]
        # integer products make G-mean ties exact
        exact_key = tp * tn if objective == "g_mean" else score
    allowed = precision >= min_precision
    if not allowed.any():
        allowed = precision == precision.max()
    score = np.where(allowed, score, -np.inf)
    if tolerance > 0:
        best_score = score.max()
        tied = score >= best_score - tolerance * abs(best_score)
    else:
        key = np.where(allowed, exact_key, -1) if exact_key is not None else score
        tied = key == key.max()
    index = np.flatnonzero(tied)
    best = index[np.lexsort((index, np.abs(theta[index])))[0]]
    table = {
        "theta": theta,
        "tpr": tpr,
        "tnr": tnr,
        "precision": precision,
        "g_mean": g_mean,
        "f_measure": f_measure,
        "score": score,
    }
    return float(theta[best]), table


def _sorted_with_weights(margins, weights, rows, order=None, ordered=None):
    """The margins of ``rows`` (a mask) sorted, and their weights in the same order (None: unweighted).

    With the margins' stable ``order``, the rows' part of it is their stable
    order; ``ordered`` (``margins[order]``) gives their margins without a
    gather.
    """
    if order is not None:
        in_rows = rows[order]
        sorted_margins = ordered[in_rows] if ordered is not None else margins[order[in_rows]]
        return sorted_margins, None if weights is None else weights[order[in_rows]]
    if weights is None:
        return np.sort(margins[rows]), None
    order = np.argsort(margins[rows], kind="stable")
    return margins[rows][order], weights[rows][order]


def _total(sorted_margins, weights):
    return sorted_margins.size if weights is None else float(weights.sum())


def _at_or_below(sorted_margins, weights, cut):
    """How many (or how much weight of) ``sorted_margins`` are ``<= cut``, per cut."""
    below = np.searchsorted(sorted_margins, cut, side="right")
    if weights is None:
        return below.astype(np.int64)  # integer counts keep G-mean ties exact
    return np.concatenate([[0.0], np.cumsum(weights)])[below]


def othr_threshold(
    X,
    y,
    margins,
    *,
    objective="g_mean",
    candidates="othr",
    smoothing=None,
    tolerance=0.0,
    min_precision=0.0,
    n_neighbors=10,
    metric="euclidean",
    method="auto",
    random_state=None,
    max_candidates=None,
    sample_weight=None,
    order=None,
):
    """SVM-OTHR's threshold search (paper Fig. 3) on labelled samples.

    Candidates come from :func:`farther_majority_neighbours` and
    :func:`othr_candidates` (or :func:`midpoint_candidates`);
    :func:`best_threshold` scores them on the same samples. The defaults are
    the paper's search.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        Where neighbours are measured (input space); unused with
        ``candidates="midpoints"``.
    y : array-like of shape (n_samples,)
        Truthy for the positive (minority) class.
    margins : array-like of shape (n_samples,)
        Signed margins of the samples.
    objective : {"g_mean", "f_measure", "g_f_mean"}, dict or callable, default="g_mean"
    candidates : {"othr", "midpoints"}, default="othr"
        The paper's eq. 23 candidates, or every cut between two distinct margins.
    smoothing, tolerance, min_precision
        See :func:`best_threshold`.
    n_neighbors, metric, method, random_state
        See :func:`farther_majority_neighbours`.
    max_candidates : int or None, default=None
        Score at most this many candidates (:func:`thin_candidates`): on
        millions of samples the table of every cut costs more memory than
        the precision it buys. ``None`` scores all.
    sample_weight : array-like of shape (n_samples,), default=None
        Weights of the samples in the scoring (:func:`best_threshold`); the
        candidates themselves come from the unweighted samples.
    order : ndarray, default=None
        ``np.argsort(margins, kind="stable")`` when the caller has it (e.g.
        merged from sorted chunks, :func:`~dimbsvm.svm.margin_order.merged_stable_order`):
        checked once, then used instead of sorting the margins.

    Returns
    -------
    theta : float
        The chosen shift (``0.0`` when no candidate does better).
    table : dict of ndarray
        :func:`best_threshold`'s table plus ``sample`` and ``neighbour``, the
        row numbers in ``X`` of x_i and nx_i (-1 for ``theta = 0``); for
        midpoints, the first rows just above and just below the cut.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0], [4.0]])
    >>> y = np.array([1, 1, 0, 0, 0])
    >>> theta, table = othr_threshold(X, y, np.array([0.5, -0.25, -0.75, -1.0, -1.5]))
    >>> theta, table["sample"].tolist(), table["neighbour"].tolist()
    (0.5, [-1, 1], [-1, 2])
    """
    if candidates not in CANDIDATES:
        raise ValueError(f"candidates must be one of {CANDIDATES}; got {candidates!r}.")
    positive = np.asarray(y).astype(bool)
    margins = np.asarray(margins, dtype=np.float64)
    order = None if order is None else stable_order(margins, order)
    if candidates == "midpoints":
        theta_candidates, sample, neighbour = midpoint_candidates(margins, order)
    else:
        minority_rows = np.flatnonzero(positive)
        majority_rows = np.flatnonzero(~positive)
        nearest = farther_majority_neighbours(
            X[minority_rows],
            margins[minority_rows],
            X[majority_rows],
            margins[majority_rows],
            n_neighbors=n_neighbors,
            metric=metric,
            method=method,
            random_state=random_state,
        )
        theta_candidates, from_minority, from_majority = othr_candidates(
            margins[minority_rows], margins[majority_rows], nearest
        )
        sample = np.where(from_minority >= 0, minority_rows[from_minority], -1)
        neighbour = np.where(from_majority >= 0, majority_rows[from_majority], -1)
    keep = thin_candidates(theta_candidates, max_candidates)
    theta_candidates, sample, neighbour = theta_candidates[keep], sample[keep], neighbour[keep]
    theta, scores = best_threshold(
        positive,
        margins,
        theta_candidates,
        objective=objective,
        smoothing=smoothing,
        tolerance=tolerance,
        min_precision=min_precision,
        sample_weight=sample_weight,
        order=order,
    )
    table = {
        "theta": scores.pop("theta"),
        "sample": sample,
        "neighbour": neighbour,
        **scores,
    }
    return theta, table
