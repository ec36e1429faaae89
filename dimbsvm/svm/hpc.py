"""HPC-SVM: an SVM regularised by hypergraph-based pairwise constraints.

:class:`HPCClassifier` fits the model of the HPC-SVM paper
(``hpc-svm-hypergraph-pairwise-constraints``): hinge loss, ``1/2 |w|^2`` and
``c1/2 sum_ij p_ij (f(x_i) - y_i y_j f(x_j))^2`` with ``p_ij`` from the kNN
hypergraph of :mod:`dimbsvm.graph.hypergraph` (eq. 20). Every path solves the
dual (34)/(40) through the Cholesky reduction of
:mod:`dimbsvm.svm._hpc_kernels`: ``A = R^T R``, a bias-free hinge-loss
``LinearSVC`` on ``u_i = R^-T [f_i; 1]`` (or, with ``solver="sgd"``, a
stochastic-gradient solve of the same problem that streams the rows chunk by
chunk), then ``[w; b] = R^-1 v``. Dask input takes the path of
:mod:`dimbsvm.svm._hpc_chunked`, which hands its work to the engine.

- ``kernel="linear"``: ``f_i = x_i``; ``A`` is ``(d+1) x (d+1)`` and ``J^T L' J``
  one pass of hyperedge sums (chunk by chunk for Dask input).
- ``kernel="rbf"`` / ``"laplacian"``, ``n_components=None``: the exact kernel
  case (38)-(42), ``f_i = K(x_i, X)``, ``H = K (+) 0``; ``A`` is
  ``(n+1) x (n+1)``, refused above ``max_kernel_size`` training rows.
- ``n_components=m``: Nystroem features ``K(x, S) K(S, S)^-1/2`` of ``m``
  landmarks ``S`` (:mod:`dimbsvm.features.kernels`), then the linear path.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from numbers import Integral, Real

import dask.array as da
import numpy as np
from sklearn.linear_model import SGDClassifier
from sklearn.svm import LinearSVC
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from dimbsvm._params import Interval, StrOptions, check_sample_weight, fit_context
from dimbsvm._validation import refuse_sparse
from dimbsvm.parallel import ClientParamMixin, current_client
from dimbsvm.exceptions import DataError
from dimbsvm.features.kernels import kernel_block, nystroem_normalization
from dimbsvm.features.references import choose_rows
from dimbsvm.graph.hypergraph import (
    check_n_neighbors,
    neighbors_excluding_self,
    total_variance,
    validate_neighbors,
)
from dimbsvm.graph.knn import KNN_METHODS, nearest_neighbors
from dimbsvm.svm import _hpc_chunked as chunked
from dimbsvm.svm._base import _SignedScoreClassifier, binary_classes
from dimbsvm.svm._hpc_kernels import (
    accumulate_jlj,
    augment,
    cholesky_factor,
    class_weight_values,
    hinge_sums,
    hpc_matrix,
    kernel_jlj,
    kernel_width,
    primal_objective,
    recover_weights,
    signed_class_weight,
    transform_rows,
)

__all__ = ["HPCClassifier"]

logger = logging.getLogger(__name__)

#: Rows per ``partial_fit`` call of ``solver="sgd"`` on in-memory input.
SGD_BATCH = 65_536


class HPCClassifier(ClientParamMixin, _SignedScoreClassifier):
    """SVM with hypergraph-based pairwise constraints (HPC-SVM), binary.

    Solves ``min 1/2 [w; b]^T (H + c1 J^T L' J + eps I) [w; b] + C sum_i
    max(0, 1 - y_i f(x_i))`` (eqs. 21/33, 39/41), where ``L'`` is the signed
    Laplacian of the hypergraph whose hyperedges are each sample and its
    ``n_neighbors`` nearest neighbours. ``c1 = 0`` is a hinge-loss SVM whose
    bias is penalised by ``eps / 2 b^2``.

    Parameters
    ----------
    C : float, default=1.0
        Box bound of the dual (34): ``0 <= alpha_i <= C``; the same ``C`` as
        ``LinearSVC``'s (hinge loss).
    c1 : float, default=1.0
        Weight of the hypergraph pairwise-constraint term, ``>= 0``.
    n_neighbors : int, default=5
        ``k``: neighbours per hyperedge, below the number of training samples.
    gamma : float, default=1.0
        The hyperedge weights' width relative to ``sigma^2`` (eqs. 17-18).
    kernel : {"linear", "rbf", "laplacian"}, default="linear"
    kernel_gamma : float, "scale" or "auto", default="scale"
        Width ``g`` of the ``rbf`` (``exp(-g |x - x'|^2)``) and ``laplacian``
        (``exp(-g |x - x'|_1)``) kernels; as in ``SVC``, ``"scale"`` is
        ``1 / (n_features * X.var())`` and ``"auto"`` ``1 / n_features``.
    eps : float, default=1e-6
        The ``eps I`` of eqs. (33)/(41), which makes ``A`` invertible; it is
        also the only penalty on the bias when no hyperedge mixes classes.
    n_components : int, default=None
        Kernel case only: ``None`` solves the exact problem (40); an integer
        uses that many Nystroem landmarks (training rows) instead.
    max_kernel_size : int, default=5000
        Largest number of training rows the exact kernel path accepts (it
        factors an ``(n+1) x (n+1)`` matrix).
    class_weight : dict, "balanced" or None, default=None
        Per-class multipliers of ``C`` (not in the paper; ``None`` is the paper).
        The paper's plain hinge loss has no imbalance handling: on a rare,
        overlapping minority (1 % of the rows) ``None`` predicts the majority
        everywhere, as an unweighted ``LinearSVC`` does. ``"balanced"``
        (``n / (2 n_c)``, summing to ``n``, so ``C`` and ``c1`` keep their
        scale) is what the registry's ``hpc`` (:mod:`dimbsvm.estimators`) uses.
    knn_method : {"auto", "exact", "pynndescent"}, default="auto"
        Neighbour search of :func:`dimbsvm.graph.knn.nearest_neighbors`.
    solver : {"liblinear", "sgd"}, default="liblinear"
        Solver of the reduced problem (the hinge SVM on the rows ``u_i``).
        ``"liblinear"``: ``LinearSVC``'s exact dual coordinate descent, which
        needs all ``n`` transformed rows in one process (``n x p`` float64,
        and LIBLINEAR copies them); for Dask input they are gathered there.
        ``"sgd"``: ``SGDClassifier(loss="hinge", alpha=1 / (C n))``, the same
        objective divided by ``C n``, fed one chunk at a time by
        ``partial_fit`` for ``n_epochs`` passes, so no process holds more
        than one chunk of transformed rows; approximate (see ``objective_``).
    n_epochs : int, default=5
        Passes over the rows of ``solver="sgd"`` (ignored by ``"liblinear"``).
    exchange_dir : str, path-like or None, default=None
        Dask input only: how the ``J^T L' J`` pass brings each hyperedge's rows
        together. ``None``: between tasks in memory (fast; the rows in flight
        reach up to ``k`` times the data over the workers). A directory: through
        scratch files written there and deleted after the pass
        (:mod:`dimbsvm.svm._hpc_chunked`), so no task holds more than about one
        chunk of rows and the neighbour array is read one chunk at a time; it
        writes and reads ``(k + 1) n`` rows, and must be on a file system every
        worker sees.
    tol : float, default=1e-4
        Stopping tolerance of LIBLINEAR.
    max_iter : int, default=1000
        Iteration limit of LIBLINEAR.
    random_state : int, RandomState instance or None, default=None
        Seeds LIBLINEAR's coordinate order, the row order of ``solver="sgd"``,
        the landmarks and an approximate neighbour search.
    client : distributed.Client or None, default=None
        Dask input only: the client the passes over the chunks run on;
        ``None`` uses the active client if any, else Dask's threads in this
        process. Resolved once at the start of ``fit``; dropped when the model
        is pickled.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
    coef_ : ndarray of shape (1, n_features) or (1, n_components)
        ``w`` on the inputs (linear) or on the Nystroem features; absent in
        the exact kernel case.
    intercept_ : ndarray of shape (1,)
        ``b``.
    expansion_coef_ : ndarray of shape (n_samples,)
        Exact kernel case: ``u`` of eq. (37), ``f(x) = K(x, X_fit_) u + b``.
    X_fit_ : ndarray of shape (n_samples, n_features)
        Exact kernel case: the training rows.
    landmarks_ : ndarray of shape (n_components, n_features)
        Nystroem case: the landmark rows.
    normalization_ : ndarray of shape (n_components, n_components)
        Nystroem case: ``K(S, S)^-1/2``.
    kernel_gamma_ : float or None
        The kernel width used (``None`` for the linear kernel).
    sigma2_ : float
        ``sigma^2`` of eq. (18).
    jlj_ : ndarray of shape (p, p)
        ``J^T L' J``.
    n_iter_ : int
        LIBLINEAR's iterations, or the epochs of ``solver="sgd"``.
    objective_ : float
        The primal objective (eqs. 21/33) at the fitted ``[w; b]``:
        ``1/2 [w; b]^T A [w; b] + C sum_i c_i max(0, 1 - y_i f(x_i))``, with
        ``c_i`` the class weight; compare solvers by it.
    timings_ : dict
        Seconds per stage of the last fit.
    n_features_in_ : int

    Notes
    -----
    ``fit`` accepts ``neighbors=``, an ``(n_samples, >= n_neighbors)`` array of
    each sample's nearest *other* samples (nearest first), to reuse a graph.
    Dask input needs it (a graph of data larger than memory is built by
    :mod:`dimbsvm.graph`).

    Dask input takes these passes over the chunks:

    1. moments (``sigma^2``, class counts, finiteness), reduced to scalars;
    2. ``J^T L' J``: each source chunk is computed once; one task per
       ``chunk / k`` hyperedges holds its own chunk and the at most ``chunk``
       rows its hyperedges touch, cut from the other chunks by small tasks;
       the ``(d+1) x (d+1)`` terms are summed as a tree;
    3. the solve. ``solver="liblinear"`` gathers all transformed rows ``u_i``
       into the calling process (``n x (d+1)`` float64: 2.6 GB for
       ``10^7 x 33``, and LIBLINEAR's copy on top). ``solver="sgd"`` computes
       one chunk of ``u_i`` at a time, ``n_epochs`` times, and never holds
       more than one chunk of them;
    4. ``objective_``, reduced to two scalars.

    With the default ``exchange_dir=None`` pass 2 is not bounded by one
    chunk: the neighbour array (``n x k`` integers) is read by the calling
    process to build the task graph, which carries each piece's indices
    (int32, about ``2 n k``); and the pass is an all-to-all exchange -- on data
    in random order every piece touches every chunk. On a ``distributed``
    client, small tasks cut the touched rows from each chunk so only those
    travel; no task holds more than about two chunks of rows, but the chunks
    and the cut rows in flight add up to between the data's size and ``k``
    times it over the workers (which spill to disk above their memory limits).
    Without a client (Dask's threaded scheduler, one process), each piece cuts
    its rows from the shared chunks instead, so the process holds the input
    rows once, not ``k`` times.

    With ``exchange_dir`` set, the rows go through scratch files on disk in
    three passes of one task per chunk (plan, send, receive; see
    :mod:`dimbsvm.svm._hpc_chunked`); the neighbour array may then be a Dask
    array (e.g. of the Zarr store :mod:`dimbsvm.graph` wrote), read a chunk at
    a time by the tasks, and only a ``pieces x chunks`` table of counts
    reaches the calling process. With ``solver="sgd"`` as well, no process
    holds more than about one chunk of rows at any step of the fit.

    ``decision_function`` is positive towards ``classes_[1]``, so
    ``OTHRClassifier(HPCClassifier())`` moves its threshold.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> X, y = make_classification(n_samples=100, n_features=4, random_state=0)
    >>> clf = HPCClassifier(C=1.0, c1=0.1, n_neighbors=5, random_state=0).fit(X, y)
    >>> clf.coef_.shape, clf.intercept_.shape
    ((1, 4), (1,))
    >>> float(clf.score(X, y)) > 0.9
    True
    """

    _parameter_constraints: dict = {
        "C": [Interval(Real, 0, None, closed="neither")],
        "c1": [Interval(Real, 0, None, closed="left")],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "gamma": [Interval(Real, 0, None, closed="neither")],
        "kernel": [StrOptions({"linear", "rbf", "laplacian"})],
        "kernel_gamma": [Interval(Real, 0, None, closed="neither"), StrOptions({"scale", "auto"})],
        "eps": [Interval(Real, 0, None, closed="neither")],
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "max_kernel_size": [Interval(Integral, 1, None, closed="left")],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "knn_method": [StrOptions(set(KNN_METHODS))],
        "solver": [StrOptions({"liblinear", "sgd"})],
        "n_epochs": [Interval(Integral, 1, None, closed="left")],
        "exchange_dir": [str, os.PathLike, None],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "client": "no_validation",
    }

    def __init__(self, C=1.0, c1=1.0, n_neighbors=5, gamma=1.0, kernel="linear", *,
                 kernel_gamma="scale", eps=1e-6, n_components=None, max_kernel_size=5000,
                 class_weight=None, knn_method="auto", solver="liblinear", n_epochs=5,
                 exchange_dir=None, tol=1e-4, max_iter=1000, random_state=None, client=None):
        self.C = C
        self.c1 = c1
        self.n_neighbors = n_neighbors
        self.gamma = gamma
        self.kernel = kernel
        self.kernel_gamma = kernel_gamma
        self.eps = eps
        self.n_components = n_components
        self.max_kernel_size = max_kernel_size
        self.class_weight = class_weight
        self.knn_method = knn_method
        self.solver = solver
        self.n_epochs = n_epochs
        self.exchange_dir = exchange_dir
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.client = client

    def _uses_liblinear(self) -> bool:
        """Whether fitting trains with LIBLINEAR (its process-wide generator: :mod:`dimbsvm.svm._native_rng`)."""
        return self.solver == "liblinear"

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, neighbors=None, sample_weight=None):
        """Build the hypergraph, reduce the dual and solve it.

        Parameters
        ----------
        X : array-like or dask.array.Array of shape (n_samples, n_features)
        y : array-like or dask.array.Array of shape (n_samples,)
            Two classes, of any label type.
        neighbors : array-like of shape (n_samples, >= n_neighbors), default=None
            Precomputed indices of each sample's nearest other samples; needed
            for Dask input, searched with ``nearest_neighbors`` otherwise.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative row weights: row ``i``'s hinge loss counts
            ``C c_i s_i`` (``c_i`` its class weight), the dual's box
            ``0 <= alpha_i <= C c_i s_i``. The hypergraph's pairwise term is
            the rows' structure and stays unweighted. Arrays in memory only (a
            Dask ``X`` is refused with it).

        Returns
        -------
        self : HPCClassifier
        """
        self.timings_ = {}
        random_state = check_random_state(self.random_state)
        self._seed = int(random_state.randint(np.iinfo(np.int32).max))
        if isinstance(X, da.Array):  # the client is resolved here, once, and passed down
            if sample_weight is not None:
                raise ValueError("HPCClassifier: sample_weight is taken with arrays in memory only, not with a "
                                 "Dask array X; compute X (and sample_weight) first")
            return chunked.fit_chunked(self, X, y, neighbors,
                                       client=current_client(self.client))
        refuse_sparse(self, X)
        X, y = validate_data(self, X, y, dtype=np.float64)
        if sample_weight is not None:
            sample_weight = check_sample_weight(sample_weight, X, ensure_non_negative=True)
        self.classes_, self._class_counts = binary_classes(y, type(self).__name__)
        signs = np.where(y == self.classes_[1], 1.0, -1.0)
        n = X.shape[0]
        check_n_neighbors(self.n_neighbors, n)
        exact_kernel = self.kernel != "linear" and self.n_components is None
        if exact_kernel and n > self.max_kernel_size:
            raise DataError(
                f"the exact kernel HPC-SVM factors an (n+1) x (n+1) matrix and n_samples={n} is "
                f"above max_kernel_size={self.max_kernel_size}; set n_components (Nystroem "
                f"landmarks, e.g. 500) for large data or raise max_kernel_size")
        with self._timed("neighbors"):
            neighbors = self._neighbors(X, neighbors)
        self.sigma2_ = total_variance(X)  # eq. (18)
        self.kernel_gamma_ = kernel_width(self.kernel, self.kernel_gamma, X.shape[1], X.var())
        if exact_kernel:
            return self._fit_exact_kernel(X, signs, neighbors, sample_weight)
        with self._timed("features"):
            F = X if self.kernel == "linear" else self._nystroem_fit(X, n)
        with self._timed("jlj"):
            other = F is not X  # Nystroem features: J from F, the weights from X
            jlj = accumulate_jlj(X, neighbors, X, signs, signs, sigma2=self.sigma2_,
                                 gamma=self.gamma, F_rows=F if other else None,
                                 F_lookup=F if other else None)
        return self._solve_linear(jlj, augment(F), signs, sample_weight=sample_weight)

    def _fit_exact_kernel(self, X, signs, neighbors, sample_weight=None):
        """Eqs. (38)-(42): ``J = [K 1]``, ``H = K (+) 0``, ``(n+1) x (n+1)``."""
        with self._timed("kernel"):
            K = kernel_block(X, X, self.kernel, gamma=self.kernel_gamma_)
        with self._timed("jlj"):
            J = augment(K)
            self.jlj_ = kernel_jlj(J, X, neighbors, signs, sigma2=self.sigma2_, gamma=self.gamma)
        ub = self._reduce_and_solve(self.jlj_, J, signs, H=K, sample_weight=sample_weight)  # eq. (41)
        self.X_fit_, self.expansion_coef_, self.intercept_ = X, ub[:-1], ub[-1:]
        return self

    def _solve_linear(self, jlj, J, signs, *, client=None, sample_weight=None):
        self.jlj_ = jlj
        wb = self._reduce_and_solve(jlj, J, signs, H=None, client=client, sample_weight=sample_weight)  # eq. (33)
        self.coef_, self.intercept_ = wb[None, :-1], wb[-1:]
        return self

    def _reduce_and_solve(self, jlj, J, signs, *, H, client=None, sample_weight=None):
        """Factor ``A``, solve the hinge SVM on ``u_i = R^-T J_i``, return ``[w; b] = R^-1 v``.

        ``J`` and ``signs`` may be Dask arrays (then ``client`` is where their
        chunks are computed, see :mod:`dimbsvm.svm._hpc_chunked`; no
        ``sample_weight`` then).
        """
        with self._timed("factor"):
            R = cholesky_factor(hpc_matrix(jlj, c1=self.c1, eps=self.eps, H=H))  # A = R^T R
        weights = class_weight_values(self.class_weight, self.classes_, self._class_counts)
        lazy = isinstance(J, da.Array)
        if self.solver == "sgd":
            v = self._solve_sgd(J, signs, R, weights, client=client, sample_weight=sample_weight)
            wb = recover_weights(R, v)
            with self._timed("objective"):
                hinge = (chunked.hinge_sums(J, signs, wb, client=client) if lazy
                         else hinge_sums(J, signs, wb, sample_weight))
        else:
            with self._timed("transform"):
                if lazy:  # all n transformed rows come to this process
                    U, signs = chunked.transformed_rows(J, signs, R, client=client)
                else:
                    U = transform_rows(J, R)                                   # u_i = R^-T J_i
            with self._timed("solve"):
                svm = LinearSVC(loss="hinge", fit_intercept=False, dual=True, C=self.C,
                                class_weight=signed_class_weight(self.class_weight, self.classes_),
                                tol=self.tol, max_iter=self.max_iter, random_state=self._seed)
                svm.fit(U, signs, sample_weight=sample_weight)                 # dual (34) / (40)
            self.n_iter_ = int(svm.n_iter_)
            v = svm.coef_.ravel()
            wb = recover_weights(R, v)
            with self._timed("objective"):
                hinge = hinge_sums(U, signs, v, sample_weight)                 # u_i . v = f(x_i)
        self.objective_ = primal_objective(R, wb, hinge, C=self.C, weights=weights)
        logger.debug("HPC-SVM (%s, %s) on %d rows: objective %.6g, stages %s", self.kernel,
                     self.solver, int(np.sum(self._class_counts)), self.objective_,
                     {k: round(t, 3) for k, t in self.timings_.items()})
        return wb

    def _solve_sgd(self, J, signs, R, weights, *, client=None, sample_weight=None):
        """``v`` of the hinge SVM on ``u_i``, by SGD over one chunk of ``u_i`` at a time.

        ``SGDClassifier`` minimises ``alpha/2 |v|^2 + 1/n sum_i c_i hinge_i``,
        which with ``alpha = 1 / (C n)`` is LIBLINEAR's ``1/2 |v|^2 + C sum_i
        c_i hinge_i`` divided by ``C n``. Each epoch visits the chunks (Dask,
        :func:`dimbsvm.svm._hpc_chunked.epoch_chunks`) or batches of
        ``SGD_BATCH`` rows in a seeded random order, and the rows of each in a
        seeded random order.
        """
        n = int(np.sum(self._class_counts))
        svm = SGDClassifier(loss="hinge", penalty="l2", alpha=1.0 / (self.C * n),
                            fit_intercept=False, learning_rate="optimal", shuffle=False,
                            class_weight={-1.0: float(weights[0]), 1.0: float(weights[1])},
                            random_state=self._seed)
        if isinstance(J, da.Array):
            U = J.map_blocks(transform_rows, R=R, dtype=np.float64)

            def batches(rng):
                return chunked.epoch_chunks(U, signs, rng, client=client)
        else:
            with self._timed("transform"):
                U = transform_rows(J, R)

            def batches(rng):
                return _epoch_batches(U, signs, rng, sample_weight)
        for epoch in range(self.n_epochs):
            rng = np.random.default_rng([self._seed, epoch])
            epoch_batches = batches(rng)
            while True:
                with self._timed("transform"):
                    batch = next(epoch_batches, None)
                if batch is None:
                    break
                U_b, s_b, *w_b = batch
                with self._timed("solve"):
                    order = rng.permutation(U_b.shape[0])
                    svm.partial_fit(U_b[order], np.asarray(s_b, dtype=np.float64)[order],
                                    classes=np.array([-1.0, 1.0]),
                                    sample_weight=w_b[0][order] if w_b else None)
        self.n_iter_ = self.n_epochs
        return svm.coef_.ravel().astype(np.float64)

    def _neighbors(self, X, neighbors):
        if neighbors is not None:
            neighbors = validate_neighbors(neighbors, X.shape[0], n_neighbors=self.n_neighbors)
            if neighbors.shape[0] != X.shape[0]:
                raise DataError(f"neighbors has {neighbors.shape[0]} rows for {X.shape[0]} samples")
            return neighbors
        found, _ = nearest_neighbors(X, X, self.n_neighbors + 1, method=self.knn_method,
                                     random_state=self._seed)
        return neighbors_excluding_self(found)

    def _nystroem_fit(self, X, n):
        """Nystroem features of in-memory rows, ``n_components`` landmarks drawn from them."""
        self._check_components(n)
        self._set_landmarks(X[choose_rows(n, self.n_components, seed=self._seed)])
        return self._feature_block(X)

    def _check_components(self, n):
        if self.n_components > n:
            raise DataError(f"n_components={self.n_components} landmarks asked for but there are "
                            f"only {n} training rows")

    def _set_landmarks(self, S):
        """Keep the landmarks ``S`` and ``K(S, S)^-1/2``."""
        self.landmarks_ = np.asarray(S, dtype=np.float64)
        self.normalization_ = nystroem_normalization(
            kernel_block(S, S, self.kernel, gamma=self.kernel_gamma_))

    def _feature_block(self, X):
        return kernel_block(X, self.landmarks_, self.kernel, gamma=self.kernel_gamma_) \
            @ self.normalization_

    # -- prediction ------------------------------------------------------------------------

    def decision_function(self, X):
        """Signed distance to the HPC hyperplane, ``f(x)`` of eqs. (35)/(42).

        Parameters
        ----------
        X : array-like or dask.array.Array of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray or dask.array.Array of shape (n_samples,)
            Positive values mean ``classes_[1]``.
        """
        check_is_fitted(self)
        if isinstance(X, da.Array):
            if X.ndim != 2 or X.shape[1] != self.n_features_in_:
                raise DataError(f"X has shape {X.shape}; expected {self.n_features_in_} features")
            return X.rechunk({1: -1}).map_blocks(self._decision_block, drop_axis=1,
                                                 dtype=np.float64)
        refuse_sparse(self, X)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self._decision_block(X)

    def _decision_block(self, X):
        X = np.asarray(X, dtype=np.float64)
        if hasattr(self, "expansion_coef_"):
            K = kernel_block(X, self.X_fit_, self.kernel, gamma=self.kernel_gamma_)
            return K @ self.expansion_coef_ + self.intercept_[0]
        F = X if self.kernel == "linear" else self._feature_block(X)
        return F @ self.coef_[0] + self.intercept_[0]

    def _compute_scores(self, scores):
        return chunked.compute_scores(scores, client=self.client)

    @contextlib.contextmanager
    def _timed(self, stage):
        start = time.perf_counter()
        yield
        self.timings_[stage] = self.timings_.get(stage, 0.0) + time.perf_counter() - start


def _epoch_batches(U, signs, rng, sample_weight=None):
    """One epoch of in-memory rows: batches of ``SGD_BATCH`` seeded-random rows, in a seeded order.

    Each batch is ``(rows, signs)``, and the rows' weights after them where ``sample_weight`` is given.
    """
    n = U.shape[0]
    rows = rng.permutation(n)
    for b in rng.permutation(-(-n // SGD_BATCH)):
        batch = rows[b * SGD_BATCH:(b + 1) * SGD_BATCH]
        yield (U[batch], signs[batch]) if sample_weight is None else (U[batch], signs[batch], sample_weight[batch])
