"""k-nearest-neighbour search: exact (scikit-learn) or approximate (pynndescent).

This is the first, in-memory version of dimbsvm's kNN machinery: one function,
:func:`nearest_neighbors`, that finds the ``n_neighbors`` rows of an index set
closest to every row of a query set.  The OTHR threshold search uses it to find
each misclassified minority sample's nearest majority neighbour; sharded graphs
for data beyond one worker will be built on top of it.

Arrays in, arrays out: no Dask and no I/O here.
"""

from __future__ import annotations

import logging
from numbers import Integral

import numpy as np
from sklearn.neighbors import NearestNeighbors

__all__ = ["EXACT_MAX_ROWS", "KNN_METHODS", "nearest_neighbors"]

logger = logging.getLogger(__name__)

#: ``method="auto"`` searches exactly while the index has fewer rows than this.
EXACT_MAX_ROWS = 20_000

#: The accepted values of ``method``.
KNN_METHODS = ("auto", "exact", "pynndescent")


def nearest_neighbors(
    X_index,
    X_query,
    n_neighbors,
    *,
    metric="euclidean",
    method="auto",
    random_state=None,
):
    """Find the nearest index rows of every query row.

    Parameters
    ----------
    X_index : {array-like, sparse matrix} of shape (n_index, n_features)
        The rows searched.
    X_query : {array-like, sparse matrix} of shape (n_query, n_features)
        The rows whose neighbours are wanted. A query row that also occurs in
        ``X_index`` is its own nearest neighbour (distance 0): nothing is
        excluded.
    n_neighbors : int
        Neighbours per query row, at most ``n_index``.
    metric : str, default="euclidean"
        Any metric name both scikit-learn's ``NearestNeighbors`` and
        pynndescent understand (``"euclidean"``, ``"manhattan"``, ``"cosine"``, ...).
    method : {"auto", "exact", "pynndescent"}, default="auto"
        ``"exact"`` uses :class:`sklearn.neighbors.NearestNeighbors` (tree or
        brute force, chosen by scikit-learn); ``"pynndescent"`` builds an
        approximate NN-descent index; ``"auto"`` is exact while the index has
        fewer than :data:`EXACT_MAX_ROWS` rows and approximate above.
    random_state : int, RandomState instance or None, default=None
        Seeds pynndescent's index construction; unused by the exact search.

    Returns
    -------
    indices : ndarray of shape (n_query, n_neighbors), dtype int64
        Row numbers in ``X_index``, nearest first.
    distances : ndarray of shape (n_query, n_neighbors), dtype float64
        The matching distances, non-decreasing along each row.

    Raises
    ------
    ValueError
        If ``n_neighbors`` is not in ``[1, n_index]``, ``method`` is unknown or
        the two arrays have different numbers of features.

    Notes
    -----
    The approximate search may miss true neighbours (its recall is typically
    above 0.9) and, unlike the exact search, its answer can depend on
    ``random_state``. Rows pynndescent cannot fill (it reports ``-1``) are
    answered exactly.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [1.0], [3.0]])
    >>> indices, distances = nearest_neighbors(X, np.array([[0.9]]), 2)
    >>> indices
    array([[1, 0]])
    >>> distances.round(2)
    array([[0.1, 0.9]])
    """
    if method not in KNN_METHODS:
        raise ValueError(f"method must be one of {KNN_METHODS}; got {method!r}.")
    n_index = X_index.shape[0]
    if (
        not isinstance(n_neighbors, Integral)
        or isinstance(n_neighbors, bool)
        or not 1 <= n_neighbors <= n_index
    ):
        raise ValueError(
            f"n_neighbors must be an integer in [1, {n_index}] (the number of index "
            f"rows); got {n_neighbors!r}."
        )
    if X_query.shape[1] != X_index.shape[1]:
        raise ValueError(
            f"X_query has {X_query.shape[1]} features but X_index has {X_index.shape[1]}."
        )
    n_neighbors = int(n_neighbors)
    if X_query.shape[0] == 0:
        return np.empty((0, n_neighbors), dtype=np.int64), np.empty((0, n_neighbors))
    if method == "auto":
        method = "exact" if n_index < EXACT_MAX_ROWS else "pynndescent"
    if method == "exact":
        return _exact(X_index, X_query, n_neighbors, metric)
    return _pynndescent(X_index, X_query, n_neighbors, metric, random_state)


def _exact(X_index, X_query, n_neighbors, metric):
    search = NearestNeighbors(n_neighbors=n_neighbors, metric=metric).fit(X_index)
    distances, indices = search.kneighbors(X_query)
    return indices.astype(np.int64, copy=False), distances.astype(np.float64, copy=False)


def _pynndescent(X_index, X_query, n_neighbors, metric, random_state):
    # Imported here: pynndescent compiles numba code on first use (tens of seconds).
    from pynndescent import NNDescent

    n_index = X_index.shape[0]
    # NN-descent needs a graph degree below the number of rows; the query may ask
    # for more neighbours than the graph degree (the search widens as needed).
    graph_degree = max(2, min(max(n_neighbors, 15), n_index - 1))
    if n_index <= graph_degree + 1:
        logger.debug("index of %d rows is too small for NN-descent; searching exactly", n_index)
        return _exact(X_index, X_query, n_neighbors, metric)
    index = NNDescent(
        X_index, metric=metric, n_neighbors=graph_degree, random_state=random_state
    )
    indices, distances = index.query(X_query, k=n_neighbors)
    indices = np.asarray(indices, dtype=np.int64)
    distances = np.asarray(distances, dtype=np.float64)
    unfilled = np.flatnonzero((indices < 0).any(axis=1))
    if unfilled.size:
        logger.debug("pynndescent left %d query rows unfilled; searching exactly", unfilled.size)
        indices[unfilled], distances[unfilled] = _exact(
            X_index, X_query[unfilled], n_neighbors, metric
        )
    return indices, distances
