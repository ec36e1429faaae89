"""k-nearest-neighbour search in memory: exact (scikit-learn) or approximate (pynndescent).

- :class:`KNNIndex` - a fitted index over training rows: ``query(X_new, k)``
  for new rows, ``neighbor_graph(k)`` for the training rows themselves (each
  row's own entry removed).
- :func:`nearest_neighbors` - one-shot search of query rows against index rows
  (nothing excluded); the OTHR threshold search and the hypergraphs use it.
- :func:`sample_recall` - recall of a graph against exact neighbours on a sample.
- :func:`warm_up` - pay pynndescent's numba compilation once per process.

Arrays in, arrays out: no Dask and no I/O here (graphs of whole datasets
built as tasks into a store: :mod:`dimbsvm.model_selection.graph_build`).

NN-descent finds the k nearest neighbours reliably only when it builds a
graph wider than k. On clustered 32-d data with k = 10
(``benchmarks/knn_scale.py``), widths 11 / 20 / 25 / 30 (the row itself
included) reached recalls of 0.89 / 0.987 / 0.995 / 0.998 at n = 10^5 and
0.67 / 0.91 / 0.958 / 0.979 at n = 10^6. ``build_neighbors`` is that width;
its default is :func:`default_build_neighbors`.
"""

from __future__ import annotations

import logging
import threading
import time
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.neighbors import VALID_METRICS, NearestNeighbors
from sklearn.utils import check_array, check_random_state

from .._model_file import is_writing_model_file

__all__ = [
    "EXACT_MAX_ROWS", "KNN_METHODS", "KNNIndex", "default_build_neighbors", "drop_self",
    "nearest_neighbors", "pynndescent_metrics", "sample_recall", "warm_up",
]

logger = logging.getLogger(__name__)

#: ``method="auto"`` searches exactly while the index has fewer rows than this.
EXACT_MAX_ROWS = 20_000

#: The accepted values of ``method``.
KNN_METHODS = ("auto", "exact", "pynndescent")

_GRAPH_BLOCK = 65_536  # rows per block when the NN-descent graph is cut down to k columns

_warm_lock = threading.Lock()
_warm_keys: set = set()


def default_build_neighbors(n_neighbors):
    """The NN-descent graph width used for ``n_neighbors`` when none is given.

    ``max(n_neighbors + 1, 2 * n_neighbors + 5)``: 25 for k = 10, which
    reached a recall of 0.995 at n = 10^5 and 0.958 at n = 10^6 on clustered
    32-d data (``benchmarks/knn_scale.py``), where width 11 (k real
    neighbours plus the row itself) reached 0.89 and 0.67. Recall falls as n
    grows: pass a wider ``build_neighbors`` (30: 0.979 at 10^6, 1.4x the time)
    beyond a few million rows.

    Examples
    --------
    >>> default_build_neighbors(10)
    25
    """
    return max(int(n_neighbors) + 1, 2 * int(n_neighbors) + 5)


def pynndescent_metrics(sparse=False):
    """Metric names pynndescent knows (for sparse input: its sparse metrics).

    Imports pynndescent (about 1.5 s the first time).

    Examples
    --------
    >>> "euclidean" in pynndescent_metrics() and "cosine" in pynndescent_metrics(sparse=True)
    True
    """
    if sparse:
        from pynndescent.sparse import sparse_named_distances as named
    else:
        from pynndescent.distances import named_distances as named
    return tuple(sorted(named))


def _check_metric(metric, method, sparse):
    """Raise a ValueError naming the accepted metrics when ``metric`` cannot be used."""
    if callable(metric):
        if method == "pynndescent":
            return  # pynndescent takes numba-compiled callables; it checks them itself
        raise ValueError("a callable metric needs method='pynndescent' (a numba-compiled function)")
    if method == "exact" and metric in VALID_METRICS["brute"]:
        return  # checked without importing pynndescent, so small exact searches stay light
    known = pynndescent_metrics(sparse)
    if metric not in known:
        raise ValueError(f"unknown metric {metric!r}; pynndescent knows: {', '.join(known)}")
    if method == "exact":
        raise ValueError(f"metric {metric!r} is known to pynndescent but not to scikit-learn's exact "
                         "search; use method='pynndescent'")


def _check_k(k, n_rows, what):
    if isinstance(k, bool) or not isinstance(k, Integral) or not 1 <= k <= n_rows:
        raise ValueError(f"n_neighbors must be an integer in [1, {n_rows}] ({what}); got {k!r}.")
    return int(k)


def _resolve_method(method, n_rows):
    if method not in KNN_METHODS:
        raise ValueError(f"method must be one of {KNN_METHODS}; got {method!r}.")
    if method == "auto":
        return "exact" if n_rows < EXACT_MAX_ROWS else "pynndescent"
    return method


def drop_self(indices, distances, row_ids):
    """Remove each row's own entry from its ``k + 1`` neighbours, leaving ``k``.

    Where a row's own index is missing (duplicates of the row filled its
    list, or an approximate search missed it), the farthest entry goes.

    Examples
    --------
    >>> ind = np.array([[0, 2, 1], [2, 0, 1]])
    >>> drop_self(ind, np.zeros((2, 3)), np.array([0, 1]))[0]
    array([[2, 1],
           [2, 0]])
    """
    keep = indices != np.asarray(row_ids)[:, None]
    no_self = keep.all(axis=1)
    keep[no_self, -1] = False
    n, width = indices.shape
    return indices[keep].reshape(n, width - 1), distances[keep].reshape(n, width - 1)


class KNNIndex:
    """A nearest-neighbour index over training rows, exact or approximate.

    Parameters
    ----------
    n_neighbors : int, default=10
        The k of :meth:`query` and :meth:`neighbor_graph` when not given there;
        the default ``build_neighbors`` derives from it.
    method : {"auto", "exact", "pynndescent"}, default="auto"
        ``"exact"``: scikit-learn's ``NearestNeighbors``; ``"pynndescent"``:
        an NN-descent graph; ``"auto"``: exact below :data:`EXACT_MAX_ROWS`
        training rows.
    metric : str, default="euclidean"
        A metric pynndescent knows (:func:`pynndescent_metrics`); the exact
        search also needs scikit-learn to know it.
    build_neighbors : int, default=None
        Width of the NN-descent graph, including the row itself; ``None``
        means :func:`default_build_neighbors` of ``n_neighbors``. Wider is
        slower and finds more of the true neighbours.
    max_candidates : int, default=None
        NN-descent's candidates per row and iteration (its sample size, rho
        K in Dong et al.); ``None`` means pynndescent's default,
        ``min(60, build_neighbors)``. More candidates converge to a more
        accurate graph: on one 32-d Gaussian blob of 100,000 rows, width 25
        found 0.89 of the true 10 neighbours with 25 candidates and 0.96
        with 60, in 1.4x the CPU (width 32 with 32 candidates: 0.95 in
        1.3x; ``benchmarks/nndescent_candidates.py``).
    random_state : int, RandomState instance or None, default=None
        Seeds NN-descent.
    n_jobs : int, default=None
        Threads of pynndescent's numba code (``None``: numba's default).
    query_epsilon : float, default=0.3
        How far beyond the current k-th distance pynndescent's :meth:`query`
        keeps searching. pynndescent's own default, 0.1, found only 0.81 of
        the true 10 nearest neighbours of new rows in a 250,000-row index of
        clustered 32-d data; 0.3 found 0.98 at 1.5x the query time.

    Attributes
    ----------
    method_ : str
        The search used (``"exact"`` or ``"pynndescent"``).
    build_neighbors_ : int or None
        The NN-descent width used (``None`` for an exact index).
    max_candidates_ : int or None
        NN-descent's candidates per row and iteration used (``None`` for an
        exact index).
    n_samples_fit_, n_features_in_ : int
    build_time_ : float
        Seconds spent building (numba compilation included on the first build
        in a process; see :func:`warm_up`).

    Notes
    -----
    Memory of an NN-descent index: the rows once, in float32 (pynndescent
    computes in float32, so float64 rows are converted and not kept twice);
    the graph in pynndescent's own int32/float32 arrays (:meth:`neighbor_graph`
    converts only the ``k`` columns it returns, block by block); and, from
    the first :meth:`query` on, pynndescent's search graph and a copy of the
    rows reordered for searching.

    Examples
    --------
    >>> X = np.array([[0.0], [1.0], [3.0], [7.0]])
    >>> index = KNNIndex(n_neighbors=2).fit(X)
    >>> index.neighbor_graph()[0]          # training rows, self excluded
    array([[1, 2],
           [0, 2],
           [1, 0],
           [2, 1]])
    >>> index.query(np.array([[2.9]]), 1)[0]
    array([[2]])
    """

    def __init__(self, n_neighbors=10, *, method="auto", metric="euclidean", build_neighbors=None,
                 max_candidates=None, random_state=None, n_jobs=None, query_epsilon=0.3):
        self.n_neighbors = n_neighbors
        self.method = method
        self.metric = metric
        self.build_neighbors = build_neighbors
        self.max_candidates = max_candidates
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.query_epsilon = query_epsilon

    def __repr__(self):
        return (f"KNNIndex(n_neighbors={self.n_neighbors!r}, method={self.method!r}, "
                f"metric={self.metric!r}, build_neighbors={self.build_neighbors!r})")

    def fit(self, X):
        """Build the index over the rows of ``X``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            At least two rows, all finite.

        Returns
        -------
        self : KNNIndex
        """
        X = check_array(X, accept_sparse="csr", dtype=[np.float64, np.float32], input_name="X")
        n = X.shape[0]
        if n < 2:
            raise ValueError(f"a kNN index needs at least 2 rows; got n_samples = {n}")
        self.method_ = _resolve_method(self.method, n)
        if self.max_candidates is not None and (isinstance(self.max_candidates, bool) or not isinstance(
                self.max_candidates, Integral) or self.max_candidates < 1):
            raise ValueError(f"max_candidates must be an integer >= 1 or None; got {self.max_candidates!r}")
        _check_metric(self.metric, self.method_, sp.issparse(X))
        self._X = X
        self.n_samples_fit_, self.n_features_in_ = n, X.shape[1]
        self.build_neighbors_ = self.max_candidates_ = self._nnd_seed = None
        start = time.perf_counter()
        if self.method_ == "pynndescent":
            width = self.build_neighbors or default_build_neighbors(self.n_neighbors)
            if isinstance(width, bool) or not isinstance(width, Integral) or width < 2:
                raise ValueError(f"build_neighbors must be an integer >= 2; got {self.build_neighbors!r}")
            if n <= width + 1:  # NN-descent needs more rows than its graph width
                logger.debug("%d rows are too few for an NN-descent graph of width %d; searching exactly",
                             n, width)
                self.method_ = "exact"
            else:
                self.build_neighbors_ = int(width)
                # pynndescent's own default when not given, resolved here so that it is known after the fit
                self.max_candidates_ = min(60, self.build_neighbors_) if self.max_candidates is None else int(
                    self.max_candidates)
                # pynndescent computes in float32 and would keep a float32 copy beside float64 rows:
                # keep one copy, the one it searches.
                self._X = X.astype(np.float32, copy=False)
                self._build_nndescent()
        if self.method_ == "exact":
            self._nn = NearestNeighbors(metric=self.metric).fit(X)
        self.build_time_ = time.perf_counter() - start
        return self

    def _build_nndescent(self):
        from pynndescent import NNDescent  # imported late: loading it (numba) takes seconds

        if getattr(self, "_nnd_seed", None) is None:  # drawn once: a loaded index is built again with it
            self._nnd_seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        self._nnd = NNDescent(self._X, metric=self.metric, n_neighbors=self.build_neighbors_,
                              max_candidates=self.max_candidates_, random_state=self._nnd_seed, n_jobs=self.n_jobs)
        # The NN-descent graph stays in pynndescent's own int32/float32 arrays; neighbor_graph()
        # converts the k columns it returns (an int64/float64 copy of the whole width would
        # double the index's memory).

    def __getstate__(self):
        # An exact index is saved without scikit-learn's tree: a model file then asks only for types dimbsvm
        # trusts (a KDTree is not one), and the tree is built again from the same rows when loaded, the same tree.
        # A model file leaves pynndescent's NNDescent out too (skops cannot write its generators); it is built
        # again when loaded, the same graph from the seed the first build drew (pynndescent's build is
        # deterministic for a seed; tested by a save and load). A pickle (a Dask transfer) keeps it.
        state = dict(self.__dict__)
        if state.get("method_") == "exact":
            state.pop("_nn", None)
        elif is_writing_model_file():
            state.pop("_nnd", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if state.get("method_") == "exact" and "_nn" not in state:
            self._nn = NearestNeighbors(metric=self.metric).fit(self._X)
        elif state.get("method_") == "pynndescent" and "_nnd" not in state:
            self._build_nndescent()

    def _check_fitted(self):
        if not hasattr(self, "method_"):
            raise ValueError("this KNNIndex is not fitted yet; call fit(X) first")

    def query(self, X, k=None):
        """The ``k`` nearest training rows of every row of ``X`` (nothing excluded).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features)
        k : int, default=None
            At most ``n_samples_fit_``; ``None`` means ``n_neighbors``.

        Returns
        -------
        indices : ndarray of shape (n_queries, k), int64
            Training row numbers, nearest first.
        distances : ndarray of shape (n_queries, k), float64
        """
        self._check_fitted()
        k = _check_k(self.n_neighbors if k is None else k, self.n_samples_fit_, "the number of indexed rows")
        X = check_array(X, accept_sparse="csr", dtype=[np.float64, np.float32], input_name="X",
                        ensure_min_samples=0)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but the index was fitted on "
                             f"{self.n_features_in_} features")
        if X.shape[0] == 0:
            return np.empty((0, k), dtype=np.int64), np.empty((0, k))
        if self.method_ == "exact":
            distances, indices = self._nn.kneighbors(X, k)
            return indices.astype(np.int64, copy=False), distances.astype(np.float64, copy=False)
        indices, distances = self._nnd.query(X, k=k, epsilon=self.query_epsilon)
        indices = np.asarray(indices, dtype=np.int64)
        distances = np.asarray(distances, dtype=np.float64)
        unfilled = np.flatnonzero((indices < 0).any(axis=1))
        if unfilled.size:  # NN-descent could not fill these rows: answer them exactly
            logger.debug("pynndescent left %d query rows unfilled; searching exactly", unfilled.size)
            exact = NearestNeighbors(metric=self.metric).fit(self._X)
            distances[unfilled], indices[unfilled] = exact.kneighbors(X[unfilled], k)
        return indices, distances

    def neighbor_graph(self, k=None):
        """The ``k`` nearest other training rows of every training row.

        Parameters
        ----------
        k : int, default=None
            At most ``n_samples_fit_ - 1``; ``None`` means ``n_neighbors``.

        Returns
        -------
        indices : ndarray of shape (``n_samples_fit_``, k), int64
            Each row's own index is excluded.
        distances : ndarray of shape (``n_samples_fit_``, k), float64
        """
        self._check_fitted()
        n = self.n_samples_fit_
        k = _check_k(self.n_neighbors if k is None else k, n - 1, "the number of other training rows")
        if self.method_ == "exact":
            distances, indices = self._nn.kneighbors(None, k)  # scikit-learn leaves each row out
            return indices.astype(np.int64, copy=False), distances.astype(np.float64, copy=False)
        graph = getattr(self, "_graph", None)  # indexes pickled by earlier versions kept a wide copy
        graph_indices, graph_distances = graph if graph is not None else self._nnd.neighbor_graph
        if graph_indices.shape[1] <= k:  # narrower than k others plus self: search every row again
            logger.info("the NN-descent graph (width %d) is too narrow for k=%d; querying the training rows",
                        self.build_neighbors_, k)
            return drop_self(*self.query(self._X, k + 1), np.arange(n))
        indices = np.empty((n, k), dtype=np.int64)
        distances = np.empty((n, k), dtype=np.float64)
        short = []
        for start in range(0, n, _GRAPH_BLOCK):  # blocks bound the selection's temporaries
            stop = min(start + _GRAPH_BLOCK, n)
            block = graph_indices[start:stop]
            valid = (block != np.arange(start, stop)[:, None]) & (block >= 0)
            # The first k valid entries of each row, in the graph's (nearest-first) order.
            order = np.argsort(~valid, axis=1, kind="stable")[:, :k]
            indices[start:stop] = np.take_along_axis(block, order, axis=1)
            distances[start:stop] = np.take_along_axis(graph_distances[start:stop], order, axis=1)
            short.append(start + np.flatnonzero(valid.sum(axis=1) < k))
        del graph_indices, graph_distances
        short = np.concatenate(short)
        if short.size:  # NN-descent left these rows with fewer than k others: search them again
            logger.debug("%d rows of the NN-descent graph have fewer than k=%d neighbours; querying them",
                         short.size, k)
            found = self.query(self._X[short], k + 1)
            indices[short], distances[short] = drop_self(*found, short)
        return indices, distances


def nearest_neighbors(X_index, X_query, n_neighbors, *, metric="euclidean", method="auto", random_state=None):
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
    answered exactly. The NN-descent graph is built ``max(n_neighbors, 15)``
    wide and searched with pynndescent's default ``epsilon=0.1`` (use
    :class:`KNNIndex` for wider builds and searches).

    Examples
    --------
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
    n_neighbors = _check_k(n_neighbors, n_index, "the number of index rows")
    if X_query.shape[1] != X_index.shape[1]:
        raise ValueError(f"X_query has {X_query.shape[1]} features but X_index has {X_index.shape[1]}.")
    if X_query.shape[0] == 0:
        return np.empty((0, n_neighbors), dtype=np.int64), np.empty((0, n_neighbors))
    if n_index == 1:
        return np.zeros((X_query.shape[0], 1), dtype=np.int64), _exact_one(X_index, X_query, metric)
    index = KNNIndex(n_neighbors, method=method, metric=metric, random_state=random_state,
                     build_neighbors=max(2, min(max(n_neighbors, 15), n_index - 1)), query_epsilon=0.1)
    return index.fit(X_index).query(X_query, n_neighbors)


def _exact_one(X_index, X_query, metric):
    search = NearestNeighbors(n_neighbors=1, metric=metric).fit(X_index)
    return search.kneighbors(X_query)[0].astype(np.float64)


def sample_recall(X, indices, *, metric="euclidean", sample_size=2000, random_state=0):
    """Recall of a self-excluded kNN graph against exact neighbours, on a sample of rows.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
    indices : ndarray of shape (n_samples, k)
        The graph to check (row ``i``'s neighbours, ``i`` excluded).
    metric : str, default="euclidean"
    sample_size : int, default=2000
        Rows checked (all when there are fewer).
    random_state : int, default=0

    Returns
    -------
    recall : float
        Mean over the sampled rows of ``|found & exact| / k``.
    rows : ndarray of int
        The rows checked.

    Examples
    --------
    >>> X = np.random.RandomState(0).rand(50, 3)
    >>> ind = KNNIndex(3, method="exact").fit(X).neighbor_graph()[0]
    >>> sample_recall(X, ind, sample_size=10)[0]
    1.0
    """
    n, k = indices.shape
    rows = np.sort(check_random_state(random_state).choice(n, size=min(sample_size, n), replace=False))
    exact = NearestNeighbors(metric=metric).fit(X).kneighbors(X[rows], k + 1)[1]
    exact = drop_self(exact, exact.astype(float), rows)[0]
    return recall_of(indices[rows], exact), rows


def recall_of(found, exact):
    """Mean per-row fraction of ``exact`` neighbours present in ``found`` (same shape)."""
    k = exact.shape[1]
    hits = (found[:, :, None] == exact[:, None, :]).any(axis=1).sum(axis=1)
    return float(np.mean(hits / k)) if len(exact) else 1.0


def warm_up(metric="euclidean", sparse=False):
    """Compile pynndescent's numba code for ``metric`` in this process, once.

    The first NN-descent build in a fresh process spends 25 s (idle 2-core
    machine) to 110 s (the same machine under load) compiling: numba caches
    only part of pynndescent on disk, and its parallel kernels and per-index
    closures are compiled anew in every process. With an empty or unwritable
    numba cache (e.g. a read-only site-packages in a container; set
    ``NUMBA_CACHE_DIR`` to a writable directory) it is about 4.5 minutes.
    Calling this once per process - e.g. on every Dask worker before a
    kNN build (``warm_up_workers`` of the distributed layer) - pays
    that cost in parallel and up front; later calls return at once. The
    NN-descent kernels are not cacheable (pynndescent declares them
    ``cache=False``); worker processes forked from one compiled process
    skip it (``prewarm_forkserver``, same place).

    Returns
    -------
    seconds : float
        Time spent here (near 0 when already warm).
    """
    key = (metric, bool(sparse))
    start = time.perf_counter()
    with _warm_lock:
        if key in _warm_keys:
            return 0.0
        X = np.random.RandomState(0).rand(2000, 8).astype(np.float32)
        if sparse:
            X = sp.csr_matrix(X)
        index = KNNIndex(10, method="pynndescent", metric=metric, random_state=0).fit(X)
        index.query(X[:50], 10)
        _warm_keys.add(key)
    seconds = time.perf_counter() - start
    logger.info("pynndescent warm-up (numba compilation) for metric %r took %.1f s", metric, seconds)
    return seconds
