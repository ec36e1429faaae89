"""Candidate threshold shifts of SVM-THR and SVM-OTHR, as plain functions on arrays.

Margins are *signed* so that the positive (minority) class lies on the positive
side: a sample is predicted positive when ``margin + theta > 0``
(the paper's eqs. 17 and 24, ``h'(x) = h(x) + theta``).

* :func:`thr_shift` -- Lin & Chen's SVM-THR shift (eq. 16).
* :func:`farther_majority_neighbours` -- for each misclassified minority
  sample x_i, its nearest majority neighbour nx_i among the majority samples
  farther on the majority side, ``h(nx_i) < h(x_i)`` (DESIGN.md, "OTHR candidates").
* :func:`othr_candidates` -- the candidate shifts, eq. 23, plus ``theta = 0``.
* :func:`midpoint_candidates` -- every cut between two distinct margins, plus
  ``theta = 0`` (a refinement: the paper's candidates are a subset of these cuts).
* :func:`thin_candidates` -- at most a given number of them, evenly spaced.

Scoring the candidates and choosing one is :mod:`dimbsvm.svm.threshold`'s.
No Dask, no I/O and no estimators here: callers validate their input.
"""

from __future__ import annotations

import logging

import numpy as np

from dimbsvm.graph.knn import KNNIndex, nearest_neighbors
from dimbsvm.svm.margin_order import resolved_sorted

__all__ = [
    "CANDIDATES",
    "farther_majority_neighbours",
    "midpoint_candidates",
    "othr_candidates",
    "thin_candidates",
    "thr_shift",
]

logger = logging.getLogger(__name__)

#: Where candidate shifts come from: the paper's eq. 23 midpoints, or every cut
#: between two distinct margins.
CANDIDATES = ("othr", "midpoints")


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
    One :class:`~dimbsvm.graph.knn.KNNIndex` is built over the majority rows;
    the search asks it for ``n_neighbors`` neighbours, keeps the nearest that
    satisfies the constraint, and doubles ``k`` only for the rows still
    without one (or whose answer may tie with rows beyond the k-th), up to
    all majority rows. Each widening round queries the same index.

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
        Of the index, as in :func:`~dimbsvm.graph.knn.nearest_neighbors`
        (an NN-descent index is built ``max(n_neighbors, 15)`` wide and
        searched with ``epsilon=0.1``). The last round, over all majority
        rows, is always exact.

    Notes
    -----
    With ``method="pynndescent"`` (or ``"auto"`` above
    :data:`~dimbsvm.graph.knn.EXACT_MAX_ROWS` majority rows) the rounds before
    the last query one NN-descent graph of the first round's width with a
    growing ``k``, where dimbsvm 0.1.0 built a wider graph in every round; an
    approximate answer can therefore differ slightly from 0.1.0's. An exact
    search gives the same answers as before, at the cost of one index.

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
    search = _MajoritySearch(X_majority, k, metric=metric, method=method, random_state=random_state)
    while todo.size:
        indices, distances = search.query(X_minority[todo], k)
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


class _MajoritySearch:
    """The majority rows' neighbour index, built once per search and queried with any ``k``.

    The widening rounds of :func:`farther_majority_neighbours` query one index
    (built on first use, as :func:`~dimbsvm.graph.knn.nearest_neighbors` builds
    its index for ``first_k``); the round over all majority rows queries an
    exact one, the same index when it is exact.
    """

    def __init__(self, X, first_k, *, metric, method, random_state):
        self.X, self.first_k = X, first_k
        self.metric, self.method, self.random_state = metric, method, random_state
        self.index = self.exact = None

    def query(self, X_query, k):
        n = self.X.shape[0]
        if n == 1:  # no index of one row: nearest_neighbors answers it
            return nearest_neighbors(self.X, X_query, 1, metric=self.metric, method="exact")
        if k < n:
            if self.index is None:
                self.index = self._build(self.method)
            return self.index.query(X_query, k)
        # the round over all majority rows is exact: the index itself when it is exact
        if self.index is not None and self.index.method_ == "exact":
            return self.index.query(X_query, k)
        if self.exact is None:
            self.exact = self._build("exact")
        return self.exact.query(X_query, k)

    def _build(self, method):
        n, k = self.X.shape[0], self.first_k
        return KNNIndex(k, method=method, metric=self.metric, random_state=self.random_state,
                        build_neighbors=max(2, min(max(k, 15), n - 1)),
                        query_epsilon=0.1).fit(self.X)


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


def midpoint_candidates(margins, order=None):
    """Every cut between two distinct margins, and ``theta = 0``.

    A shift between two consecutive distinct margins ``s_k < s_(k+1)`` puts the
    rows at ``s_(k+1)`` and above on the positive side and the others on the
    negative side; the midpoint ``theta = -(s_k + s_(k+1)) / 2`` is the cut
    with the widest gap on both sides, as eq. 23 chooses for its pairs. Every
    classification that a shift can make of these rows is one of the cuts
    (or ``theta = 0``, all rows on one side excepted).

    Parameters
    ----------
    margins : array-like of shape (n_samples,)
    order : ndarray or StableOrder, default=None
        ``np.argsort(margins, kind="stable")`` when the caller has it
        (:mod:`dimbsvm.svm.margin_order`; checked), so that the margins are
        not sorted again.

    Returns
    -------
    theta : ndarray of shape (n_candidates,)
        ``0`` first, then the cuts from the highest margins down (increasing ``theta``).
    upper_row, lower_row : ndarray of shape (n_candidates,), dtype int64
        For each cut, the first row at ``s_(k+1)`` (it becomes positive) and
        the first row at ``s_k`` (it stays negative); -1 for ``theta = 0``.

    Examples
    --------
    >>> import numpy as np
    >>> midpoint_candidates(np.array([0.5, -1.0, 0.5, 0.0]))[0]
    array([ 0.  , -0.25,  0.5 ])
    """
    margins = np.asarray(margins, dtype=np.float64)
    values, first = _distinct_with_first_rows(margins, *resolved_sorted(margins, order))
    values, first = values[::-1], first[::-1]  # highest margin first: increasing theta
    theta = -(values[1:] + values[:-1]) / 2
    minus_one = np.array([-1], dtype=np.int64)
    return (
        np.concatenate([[0.0], theta]),
        np.concatenate([minus_one, first[:-1].astype(np.int64)]),
        np.concatenate([minus_one, first[1:].astype(np.int64)]),
    )


def _distinct_with_first_rows(margins, order=None, ordered=None):
    """``np.unique(margins, return_index=True)`` without its stable sort (a third faster on millions of margins).

    One argsort groups equal margins (``order``, when the caller has a
    checked one, else an unstable argsort); the first row of each group is
    the smallest row number in it, which is what the stable sort finds.
    ``ordered``: ``margins[order]``, when the caller has it.
    """
    if margins.size == 0 or (order is None and not np.isfinite(margins).all()):  # (NaN as np.unique groups it)
        return np.unique(margins, return_index=True)
    stable = order is not None
    if not stable:
        order, ordered = np.argsort(margins), None
    if ordered is None:
        ordered = margins[order]
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    if starts.size == order.size:  # all distinct: each group is one row
        return ordered, order
    first = np.minimum.reduceat(order, starts)
    # in the stable order a group's first row comes first (-0.0 and 0.0 are one group: the value of that row)
    return (ordered[starts] if stable else margins[first]), first


def thin_candidates(theta, max_candidates):
    """Which candidates to score when there are too many: ``theta = 0`` and evenly spaced ranks.

    Parameters
    ----------
    theta : ndarray of shape (n_candidates,)
    max_candidates : int or None
        ``None`` (or at least ``n_candidates``) keeps all.

    Returns
    -------
    keep : slice or ndarray of int
        Positions into ``theta``, in their original order.

    Examples
    --------
    >>> theta = np.array([0.0, -0.4, 0.3, -0.1, 0.1, 0.2, -0.3])
    >>> theta[thin_candidates(theta, 4)].tolist()
    [0.0, -0.4, 0.3]
    """
    theta = np.asarray(theta)
    if max_candidates is None or theta.size <= max_candidates:
        return slice(None)
    zero = np.flatnonzero(theta == 0.0)[:1]
    order = np.argsort(theta, kind="stable")
    n_spaced = max(int(max_candidates) - zero.size, 1)
    ranks = np.linspace(0, theta.size - 1, n_spaced).round().astype(np.int64)
    # the kept positions, distinct and increasing, from a mask: np.unique would sort them again
    keep = np.zeros(theta.size, dtype=bool)
    keep[order[ranks]] = True
    keep[zero] = True
    return np.flatnonzero(keep)
