"""HPC-SVM: the hypergraph against a dense construction, the Cholesky reduction against a
direct solve of the paper's duals (34) and (40), chunked against in-memory accumulation,
scikit-learn compatibility and clear errors."""

import warnings

import dask.array as da
import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.datasets import make_classification
from sklearn.svm import LinearSVC
from dimbsvm._params import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from dimbsvm.exceptions import DataError
from dimbsvm.graph.hypergraph import (
    build_hypergraph,
    neighbors_excluding_self,
    total_variance,
    validate_neighbors,
)
from dimbsvm.svm import _hpc_chunked as chunked_module
from dimbsvm.svm import hpc as hpc_module
from dimbsvm.svm._hpc_kernels import (
    accumulate_jlj,
    augment,
    cholesky_factor,
    class_weight_values,
    hpc_matrix,
    transform_rows,
)
from dimbsvm.svm.hpc import HPCClassifier

# --- independent dense constructions, written from the paper ---------------------------


def _problem(seed, n=40, d=3, minority=0.3, shift=1.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(rng.random(n) < minority, 1.0, -1.0)
    y[:2] = [1.0, -1.0]  # both classes, always
    X[y > 0] += shift
    return X, y


def _brute_neighbors(X, k):
    """k nearest other samples by a full distance matrix (ties are improbable on random data)."""
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(sq, np.inf)
    return np.argsort(sq, axis=1, kind="stable")[:, :k]


def _dense_hypergraph(X, y, k, gamma):
    """Phi, w, P and L' = L + (U - Z) o P exactly as eqs. (7)-(19) define them, densely."""
    n = X.shape[0]
    xbar = X.mean(axis=0)
    sigma2 = sum(np.sum((x - xbar) ** 2) for x in X) / (n - 1)  # eq. (18)
    nbrs = _brute_neighbors(X, k)
    Phi = np.zeros((n, n))
    w = np.zeros(n)
    for e in range(n):
        members = [e, *nbrs[e]]
        Phi[members, e] = 1.0                                               # eq. (7)
        w[e] = sum(np.exp(-np.sum((X[e] - X[j]) ** 2) / (gamma * sigma2))   # eqs. (10), (17)
                   for j in members)
    d_v = Phi @ w                                                           # eq. (8)
    delta = Phi.sum(axis=0)                                                 # eq. (9)
    P = Phi @ np.diag(w) @ np.diag(1.0 / delta) @ Phi.T
    Z = np.outer(y, y)
    L = np.diag(P.sum(axis=1)) - P
    L_signed = L + (np.ones((n, n)) - Z) * P                                # eq. (19)
    return {"nbrs": nbrs, "Phi": Phi, "w": w, "d_v": d_v, "P": P, "L_signed": L_signed, "sigma2": sigma2, "Z": Z}


def _solve_box_qp(Q, C):
    """max 1^T a - a^T Q a / 2 on 0 <= a <= C (a number or one bound a row): L-BFGS-B finds the active bounds,
    then the KKT equations are solved.

    L-BFGS-B alone stops within ~1e-5 of the optimum on the ill-conditioned Q of
    a small eps, and where it stops depends on the BLAS's summation order (one
    thread or several); with the bounds it found held, the free multipliers
    solve ``Q_FF a_F = 1 - Q_FB a_B`` exactly, checked against the KKT conditions.
    """
    n = Q.shape[0]
    C = np.broadcast_to(np.asarray(C, dtype=np.float64), (n,))
    result = minimize(lambda a: (0.5 * a @ Q @ a - a.sum(), Q @ a - 1.0), np.zeros(n), jac=True,
                      method="L-BFGS-B", bounds=list(zip(np.zeros(n), C)),
                      options={"ftol": 1e-16, "gtol": 1e-13, "maxiter": 50_000, "maxcor": 50})
    a = result.x
    upper = a >= C * (1 - 1e-7)
    free = ~upper & (a > C * 1e-7)
    exact = np.where(upper, C, 0.0)
    exact[free] = np.linalg.solve(Q[np.ix_(free, free)], 1.0 - Q[np.ix_(free, ~free)] @ exact[~free])
    gradient = Q @ exact - 1.0
    assert np.all((exact >= 0) & (exact <= C * (1 + 1e-12))), "the active set L-BFGS-B found is not the optimum's"
    assert np.all(gradient[~free & ~upper] >= -1e-8) and np.all(gradient[upper] <= 1e-8), "KKT conditions fail"
    return exact


def _dual_decision(X, y, k, gamma, C, c1, eps, X_test, sample_weight=None):
    """Eq. (34) solved directly, [w; b] from eq. (33), f(x) of eq. (35); row weights scale the box."""
    dense = _dense_hypergraph(X, y, k, gamma)
    J = np.column_stack([X, np.ones(len(X))])
    H = np.eye(J.shape[1])
    H[-1, -1] = 0.0
    A = H + c1 * J.T @ dense["L_signed"] @ J + eps * np.eye(J.shape[1])
    yJ = y[:, None] * J
    Q = yJ @ np.linalg.solve(A, yJ.T)                                       # eq. (34)
    alpha = _solve_box_qp(Q, C if sample_weight is None else C * sample_weight)
    wb = np.linalg.solve(A, yJ.T @ alpha)                                   # eq. (33)
    return X_test @ wb[:-1] + wb[-1]


def _linear_hpc_matrix(X, y, k, c1, eps):
    """``J = [X 1]`` and eq. 33's ``A = H + c1 J^T L' J + eps I`` (``H``: the identity but on the bias)."""
    dense = _dense_hypergraph(X, y, k, 1.0)
    J = augment(X)
    H = np.eye(J.shape[1])
    H[-1, -1] = 0.0
    return J, H + c1 * J.T @ dense["L_signed"] @ J + eps * np.eye(J.shape[1])


def _rbf(A, B, g):
    return np.exp(-g * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))


TIGHT = {"tol": 1e-10, "max_iter": 1_000_000, "random_state": 0}

# --- the hypergraph --------------------------------------------------------------------


@pytest.mark.parametrize("seed, k, gamma", [(0, 3, 1.0), (1, 5, 0.3), (2, 1, 4.0)])
def test_hypergraph_equals_dense_construction(seed, k, gamma):
    X, y = _problem(seed, n=25)
    dense = _dense_hypergraph(X, y, k, gamma)
    graph = build_hypergraph(X, n_neighbors=k, gamma=gamma, knn_method="exact")
    assert total_variance(X) == pytest.approx(dense["sigma2"], rel=1e-13)
    np.testing.assert_array_equal(graph.members[:, 1:], dense["nbrs"])
    np.testing.assert_allclose(graph.weights, dense["w"], rtol=1e-13)
    np.testing.assert_array_equal(graph.incidence().toarray(), dense["Phi"])
    np.testing.assert_allclose(graph.vertex_degrees(), dense["d_v"], rtol=1e-13)
    np.testing.assert_allclose(graph.edge_degrees, k + 1)
    np.testing.assert_allclose(graph.adjacency().toarray(), dense["P"], rtol=1e-13, atol=1e-15)
    P_same, P_diff = graph.split_adjacency(y)
    np.testing.assert_allclose(P_same.toarray(), dense["P"] * (dense["Z"] > 0), atol=1e-15)
    np.testing.assert_allclose(P_diff.toarray(), dense["P"] * (dense["Z"] < 0), atol=1e-15)
    L = graph.signed_laplacian(y)
    np.testing.assert_allclose(L.toarray(), dense["L_signed"], rtol=1e-12, atol=1e-13)
    # eq. (19): f^T L' f is the pairwise-constraint sum 1/2 sum_ij p_ij (f_i - z_ij f_j)^2
    f = np.random.default_rng(seed).normal(size=len(y))
    pairs = 0.5 * np.sum(dense["P"] * (f[:, None] - dense["Z"] * f[None, :]) ** 2)
    assert f @ (L @ f) == pytest.approx(pairs, rel=1e-12)


def test_neighbour_helpers():
    assert neighbors_excluding_self(np.array([[1, 0, 2], [0, 2, 1]])).tolist() == [[1, 2], [0, 2]]
    with pytest.raises(DataError, match="its own neighbours"):
        validate_neighbors(np.array([[0], [0]]), 2)
    with pytest.raises(DataError, match="outside"):
        validate_neighbors(np.array([[1], [2]]), 2)
    with pytest.raises(DataError, match="twice"):
        validate_neighbors(np.array([[1, 1], [0, 2], [0, 1]]), 3)
    with pytest.raises(DataError, match="columns"):
        validate_neighbors(np.array([[1], [0]]), 2, n_neighbors=2)


def test_duplicate_rows_keep_k_distinct_neighbours():
    X = np.array([[0.0], [0.0], [0.0], [1.0], [2.0]])
    graph = build_hypergraph(X, n_neighbors=2, knn_method="exact")
    for e, members in enumerate(graph.members):
        assert members[0] == e and len(set(members)) == 3


# --- J^T L' J from hyperedge sums -----------------------------------------------------


def test_jlj_equals_dense_and_chunks_add_up():
    X, y = _problem(3, n=37, d=4)
    k, gamma = 4, 0.7
    dense = _dense_hypergraph(X, y, k, gamma)
    J = augment(X)
    whole = accumulate_jlj(X, dense["nbrs"], X, y, y, sigma2=dense["sigma2"], gamma=gamma)
    np.testing.assert_allclose(whole, J.T @ dense["L_signed"] @ J, rtol=1e-11, atol=1e-11)
    # chunked as a Dask task sees it: centre rows of one chunk, only the rows it touches
    parts = np.zeros_like(whole)
    for rows in np.array_split(np.arange(len(X)), 5):
        touched, local = np.unique(dense["nbrs"][rows], return_inverse=True)
        parts += accumulate_jlj(X[rows], local.reshape(len(rows), k), X[touched], y[rows],
                                y[touched], sigma2=dense["sigma2"], gamma=gamma)
    np.testing.assert_allclose(parts, whole, rtol=1e-12, atol=1e-12)


def test_jlj_of_other_features_uses_input_weights():
    X, y = _problem(4, n=30)
    F = np.random.default_rng(4).normal(size=(30, 6))  # e.g. Nystroem features
    dense = _dense_hypergraph(X, y, 3, 1.0)
    jlj = accumulate_jlj(X, dense["nbrs"], X, y, y, sigma2=dense["sigma2"], F_rows=F, F_lookup=F)
    J = augment(F)
    np.testing.assert_allclose(jlj, J.T @ dense["L_signed"] @ J, rtol=1e-11, atol=1e-11)


# --- the Cholesky reduction against the paper's dual (34) ------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_q_of_eq_34_is_gram_of_transformed_rows(seed):
    X, y = _problem(seed, n=30)
    dense = _dense_hypergraph(X, y, 3, 1.0)
    J = augment(X)
    A = hpc_matrix(J.T @ dense["L_signed"] @ J, c1=0.5, eps=1e-6)
    Q = (y[:, None] * J) @ np.linalg.solve(A, (y[:, None] * J).T)
    U = y[:, None] * transform_rows(J, cholesky_factor(A))
    np.testing.assert_allclose(U @ U.T, Q, rtol=1e-12, atol=1e-12 * np.abs(Q).max())


@pytest.mark.parametrize("seed, C, c1, k, gamma", [
    (0, 1.0, 1.0, 3, 1.0), (1, 10.0, 0.1, 5, 1.0), (2, 0.1, 2.0, 4, 0.5), (3, 1.0, 0.0, 3, 1.0),
])
def test_linear_reduction_equals_direct_dual_solve(seed, C, c1, k, gamma):
    X, y = _problem(seed, n=45, d=3, shift=0.7)
    X_test = np.random.default_rng(100 + seed).normal(size=(20, 3))
    eps = 1e-3 if c1 == 0 else 1e-6  # c1 = 0: only eps penalises the bias
    expected = _dual_decision(X, y, k, gamma, C, c1, eps, np.vstack([X, X_test]))
    clf = HPCClassifier(C=C, c1=c1, n_neighbors=k, gamma=gamma, eps=eps, knn_method="exact",
                        **TIGHT).fit(X, y)
    got = clf.decision_function(np.vstack([X, X_test]))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6 * np.abs(expected).max())


@pytest.mark.parametrize("solver_kernel", ["linear", "rbf"])
def test_weighted_rows_equal_the_direct_dual_with_a_weighted_box(solver_kernel):
    """Row weights s_i make the box 0 <= alpha_i <= C s_i (scikit-learn's SVMs' meaning of sample_weight)."""
    X, y = _problem(7, n=45, d=3, shift=0.7)
    weights = np.random.default_rng(7).uniform(0.0, 3.0, size=len(X))
    weights[:4] = 0.0  # rows of weight 0 take no part in the hinge
    X_test = np.random.default_rng(107).normal(size=(20, 3))
    k, gamma, C, c1, eps = 4, 1.0, 1.0, 0.5, 1e-6
    if solver_kernel == "linear":
        expected = _dual_decision(X, y, k, gamma, C, c1, eps, np.vstack([X, X_test]), sample_weight=weights)
    else:
        g = 0.5
        dense = _dense_hypergraph(X, y, k, gamma)
        K = _rbf(X, X, g)
        J = np.column_stack([K, np.ones(len(X))])
        H = np.zeros((len(X) + 1,) * 2)
        H[:-1, :-1] = K
        A = H + c1 * J.T @ dense["L_signed"] @ J + eps * np.eye(len(X) + 1)
        yJ = y[:, None] * J
        ub = np.linalg.solve(A, yJ.T @ _solve_box_qp(yJ @ np.linalg.solve(A, yJ.T), C * weights))
        expected = _rbf(np.vstack([X, X_test]), X, g) @ ub[:-1] + ub[-1]
    params = dict(kernel="rbf", kernel_gamma=0.5) if solver_kernel == "rbf" else {}
    clf = HPCClassifier(C=C, c1=c1, n_neighbors=k, gamma=gamma, eps=eps, knn_method="exact", **params,
                        **TIGHT).fit(X, y, sample_weight=weights)
    got = clf.decision_function(np.vstack([X, X_test]))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6 * np.abs(expected).max())
    unweighted = HPCClassifier(C=C, c1=c1, n_neighbors=k, gamma=gamma, eps=eps, knn_method="exact", **params,
                               **TIGHT).fit(X, y)
    assert not np.allclose(unweighted.decision_function(X_test), got[len(X):], atol=1e-3)


def test_weighted_objective_and_sgd_and_refusals():
    X, y = _problem(6, n=60, d=3, minority=0.2, shift=0.8)
    weights = np.random.default_rng(6).uniform(0.2, 3.0, size=len(X))
    k, C, c1, eps = 4, 2.0, 0.5, 1e-6
    clf = HPCClassifier(C=C, c1=c1, n_neighbors=k, eps=eps, class_weight="balanced", knn_method="exact",
                        **TIGHT).fit(X, y, sample_weight=weights)
    J, A = _linear_hpc_matrix(X, y, k, c1, eps)
    wb = np.r_[clf.coef_[0], clf.intercept_]
    n_pos = np.sum(y > 0)
    c = np.where(y > 0, 60 / (2 * n_pos), 60 / (2 * (60 - n_pos))) * weights
    expected = 0.5 * wb @ A @ wb + C * np.sum(c * np.maximum(0, 1 - y * (J @ wb)))
    assert clf.objective_ == pytest.approx(expected, rel=1e-10)
    worse = wb + 1e-3 * np.random.default_rng(0).normal(size=wb.shape)
    assert 0.5 * worse @ A @ worse + C * np.sum(c * np.maximum(0, 1 - y * (J @ worse))) > expected
    # SGD minimises the same weighted objective: near the exact one, above it
    sgd = HPCClassifier(C=C, c1=c1, n_neighbors=k, eps=eps, class_weight="balanced", knn_method="exact",
                        solver="sgd", n_epochs=30, random_state=0).fit(X, y, sample_weight=weights)
    assert clf.objective_ <= sgd.objective_ < clf.objective_ * 1.05
    with pytest.raises(ValueError, match="sample_weight is taken with arrays in memory only"):
        HPCClassifier().fit(da.from_array(X, chunks=20), y, neighbors=_brute_neighbors(X, 5), sample_weight=weights)
    with pytest.raises(ValueError, match="[Nn]egative"):
        HPCClassifier().fit(X, y, sample_weight=-weights)


def test_c1_zero_is_a_hinge_svm_with_penalised_bias():
    # A = diag(1, ..., 1, eps): LIBLINEAR's intercept feature s gives the bias penalty b^2 / (2 s^2).
    X, y = make_classification(n_samples=120, n_features=4, random_state=0)
    eps = 1e-2
    clf = HPCClassifier(C=0.5, c1=0.0, eps=eps, **TIGHT).fit(X, y)
    svm = LinearSVC(loss="hinge", C=0.5, intercept_scaling=1 / np.sqrt(eps), **TIGHT).fit(X, y)
    np.testing.assert_allclose(clf.coef_, svm.coef_, atol=1e-6)
    np.testing.assert_allclose(clf.intercept_, svm.intercept_, atol=1e-6)


# --- the kernel case, eqs. (38)-(42) ---------------------------------------------------


@pytest.mark.parametrize("seed, C, c1", [(0, 1.0, 1.0), (1, 10.0, 0.1)])
def test_exact_rbf_equals_direct_solve_of_eq_40(seed, C, c1):
    X, y = _problem(seed, n=35, d=2, shift=0.5)
    k, gamma, g, eps = 4, 1.0, 0.5, 1e-6
    X_test = np.random.default_rng(seed).normal(size=(15, 2))
    dense = _dense_hypergraph(X, y, k, gamma)
    K = _rbf(X, X, g)
    J = np.column_stack([K, np.ones(len(X))])                               # J_Phi
    H = np.zeros((len(X) + 1,) * 2)
    H[:-1, :-1] = K                                                         # H_Phi
    A = H + c1 * J.T @ dense["L_signed"] @ J + eps * np.eye(len(X) + 1)
    yJ = y[:, None] * J
    alpha = _solve_box_qp(yJ @ np.linalg.solve(A, yJ.T), C)                 # eq. (40)
    ub = np.linalg.solve(A, yJ.T @ alpha)                                   # eq. (41)
    expected = _rbf(X_test, X, g) @ ub[:-1] + ub[-1]                        # eq. (42)
    clf = HPCClassifier(C=C, c1=c1, n_neighbors=k, gamma=gamma, kernel="rbf", kernel_gamma=g,
                        eps=eps, knn_method="exact", **TIGHT).fit(X, y)
    np.testing.assert_allclose(clf.decision_function(X_test), expected, rtol=0,
                               atol=1e-6 * np.abs(expected).max())


def test_nystroem_with_every_row_a_landmark_approaches_exact():
    X, y = _problem(5, n=40, d=2, shift=0.8)
    params = dict(kernel="rbf", kernel_gamma=0.5, c1=0.5, eps=1e-8, **TIGHT)
    exact = HPCClassifier(**params).fit(X, y)
    approx = HPCClassifier(n_components=40, **params).fit(X, y)
    X_test = np.random.default_rng(0).normal(size=(30, 2))
    a, b = exact.decision_function(X_test), approx.decision_function(X_test)
    np.testing.assert_allclose(a, b, atol=1e-3 * np.abs(a).max())
    assert approx.coef_.shape == (1, 40) and approx.landmarks_.shape == (40, 2)


# --- Dask input -------------------------------------------------------------------------


@pytest.mark.parametrize("shared_memory", [True, False])
@pytest.mark.parametrize("kernel, n_components", [("linear", None), ("rbf", 15)])
def test_dask_fit_equals_in_memory(kernel, n_components, shared_memory, monkeypatch):
    # both ways of cutting the hyperedges' rows: in the piece (threads) or by small tasks
    monkeypatch.setattr(chunked_module, "_shares_memory", lambda client: shared_memory)
    X, y = make_classification(n_samples=300, n_features=5, weights=[0.8], random_state=1)
    nbrs = _brute_neighbors(X, 5)
    params = dict(kernel=kernel, n_components=n_components, **TIGHT)
    memory = HPCClassifier(**params).fit(X, y, neighbors=nbrs)
    chunked = HPCClassifier(**params).fit(da.from_array(X, chunks=70), da.from_array(y, chunks=70),
                                          neighbors=nbrs)
    np.testing.assert_allclose(chunked.jlj_, memory.jlj_, rtol=1e-11, atol=1e-9)
    np.testing.assert_allclose(chunked.coef_, memory.coef_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(chunked.intercept_, memory.intercept_, rtol=1e-7, atol=1e-9)
    lazy = chunked.decision_function(da.from_array(X, chunks=70))
    np.testing.assert_allclose(lazy.compute(), memory.decision_function(X), rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(chunked.predict(da.from_array(X, chunks=70)), chunked.predict(X))


def test_dask_fit_on_a_distributed_client(client):
    X, y = make_classification(n_samples=200, n_features=4, random_state=2)
    nbrs = _brute_neighbors(X, 5)
    memory = HPCClassifier(**TIGHT).fit(X, y, neighbors=nbrs)
    chunked = HPCClassifier(**TIGHT).fit(da.from_array(X, chunks=64), y, neighbors=nbrs)
    np.testing.assert_allclose(chunked.jlj_, memory.jlj_, rtol=1e-11, atol=1e-9)


@pytest.mark.parametrize("exchange", [False, True])
def test_the_given_client_is_resolved_once_and_runs_every_pass(client, exchange, monkeypatch,
                                                               tmp_path):
    X, y = make_classification(n_samples=300, n_features=4, random_state=3)
    nbrs = _brute_neighbors(X, 5)
    resolved, seen = [], []
    resolve, compute = chunked_module.current_client, chunked_module.compute

    def counted(given=None):
        resolved.append(given)
        return resolve(given)

    def recording(*collections, client=None):
        seen.append(client)
        return compute(*collections, client=client)

    monkeypatch.setattr(hpc_module, "current_client", counted)  # fit resolves here, predict in chunked_module
    monkeypatch.setattr(chunked_module, "current_client", counted)
    monkeypatch.setattr(chunked_module, "compute", recording)
    clf = HPCClassifier(solver="sgd", n_epochs=2, kernel="rbf", n_components=10, random_state=0,
                        exchange_dir=tmp_path if exchange else None, client=client)
    clf.fit(da.from_array(X, chunks=100), da.from_array(y, chunks=100),
            neighbors=da.from_array(nbrs, chunks=100))
    assert resolved == [client]
    assert len(seen) > 5 and all(c is client for c in seen)
    labels = clf.predict(da.from_array(X, chunks=100))  # the lazy scores computed on the client too
    assert seen[-1] is client and resolved == [client, client]
    np.testing.assert_array_equal(labels, clf.predict(X))
    memory = HPCClassifier(kernel="rbf", n_components=10, random_state=0).fit(X, y, neighbors=nbrs)
    np.testing.assert_allclose(clf.jlj_, memory.jlj_, rtol=1e-11, atol=1e-9)


def test_client_is_dropped_by_pickle_and_shared_by_clone():
    import pickle
    import threading

    from sklearn.base import clone

    unpicklable = threading.Lock()  # stands for a client: sockets and an event loop
    clf = HPCClassifier(c1=0.5, client=unpicklable)
    assert clone(clf).client is unpicklable and clone(clf).c1 == 0.5
    again = pickle.loads(pickle.dumps(clf))
    assert again.client is None and again.c1 == 0.5


@pytest.mark.parametrize("rows_order", ["random", "sorted"])
@pytest.mark.parametrize("chunks", [70, (40, 110, 150), 300])
@pytest.mark.parametrize("kernel, n_components", [("linear", None), ("rbf", 15)])
def test_disk_exchange_equals_in_memory(kernel, n_components, chunks, rows_order, tmp_path):
    """The exchange through files gives the in-memory J^T L' J, for any chunking, and leaves nothing."""
    X, y = make_classification(n_samples=300, n_features=5, weights=[0.8], random_state=1)
    if rows_order == "sorted":  # local hyperedges: chunks ask little of each other
        order = np.argsort(X[:, 0], kind="stable")
        X, y = X[order], y[order]
    nbrs = _brute_neighbors(X, 5)
    params = dict(kernel=kernel, n_components=n_components, **TIGHT)
    memory = HPCClassifier(**params).fit(X, y, neighbors=nbrs)
    for neighbors in (nbrs, da.from_array(nbrs, chunks=(90, 5))):  # NumPy, or Dask chunked otherwise
        chunked = HPCClassifier(exchange_dir=tmp_path, **params).fit(
            da.from_array(X, chunks=(chunks, 5)), da.from_array(y, chunks=(chunks,)),
            neighbors=neighbors)
        np.testing.assert_allclose(chunked.jlj_, memory.jlj_, rtol=1e-12, atol=1e-10)
        np.testing.assert_allclose(chunked.coef_, memory.coef_, rtol=1e-7, atol=1e-9)
        assert list(tmp_path.iterdir()) == []  # the scratch files are gone


def test_disk_exchange_on_a_distributed_client(client, tmp_path):
    X, y = make_classification(n_samples=400, n_features=4, random_state=2)
    nbrs = _brute_neighbors(X, 6)
    memory = HPCClassifier(n_neighbors=6, **TIGHT).fit(X, y, neighbors=nbrs)
    chunked = HPCClassifier(n_neighbors=6, exchange_dir=str(tmp_path), **TIGHT).fit(
        da.from_array(X, chunks=64), y, neighbors=da.from_array(nbrs, chunks=100))
    np.testing.assert_allclose(chunked.jlj_, memory.jlj_, rtol=1e-12, atol=1e-10)
    assert list(tmp_path.iterdir()) == []


def test_disk_exchange_failing_leaves_no_files(tmp_path):
    X, y = make_classification(n_samples=200, n_features=4, random_state=3)
    nbrs = _brute_neighbors(X, 5)
    nbrs[150, 2] = 150  # a row among its own neighbours, in the third chunk
    with pytest.raises(DataError, match="its own neighbours"):
        HPCClassifier(exchange_dir=tmp_path).fit(da.from_array(X, chunks=60), y,
                                                neighbors=da.from_array(nbrs, chunks=60))
    assert list(tmp_path.iterdir()) == []


# --- the objective and the chunk-bounded solver ------------------------------------------


@pytest.mark.parametrize("class_weight", [None, "balanced", {1: 3.0}])
def test_objective_is_the_primal_of_eq_33(class_weight):
    X, y = _problem(6, n=60, d=3, minority=0.2, shift=0.8)
    k, C, c1, eps = 4, 2.0, 0.5, 1e-6
    clf = HPCClassifier(C=C, c1=c1, n_neighbors=k, eps=eps, class_weight=class_weight,
                        knn_method="exact", **TIGHT).fit(X, y)
    J, A = _linear_hpc_matrix(X, y, k, c1, eps)
    wb = np.r_[clf.coef_[0], clf.intercept_]
    n_pos = np.sum(y > 0)
    if class_weight == "balanced":
        c = np.where(y > 0, 60 / (2 * n_pos), 60 / (2 * (60 - n_pos)))
    else:
        c = np.where(y > 0, 3.0 if class_weight else 1.0, 1.0)
    expected = 0.5 * wb @ A @ wb + C * np.sum(c * np.maximum(0, 1 - y * (J @ wb)))
    assert clf.objective_ == pytest.approx(expected, rel=1e-10)
    # LIBLINEAR to tight tolerances is the minimum: a perturbed [w; b] is worse
    worse = wb + 1e-3 * np.random.default_rng(0).normal(size=wb.shape)
    assert 0.5 * worse @ A @ worse + C * np.sum(c * np.maximum(0, 1 - y * (J @ worse))) > expected


def test_class_weight_values_match_scikit_learn():
    from sklearn.utils.class_weight import compute_class_weight

    y = np.array([0] * 90 + [1] * 10)
    np.testing.assert_allclose(class_weight_values("balanced", np.array([0, 1]), [90, 10]),
                               compute_class_weight("balanced", classes=np.array([0, 1]), y=y))
    np.testing.assert_array_equal(class_weight_values(None, np.array([0, 1]), [90, 10]), [1, 1])


@pytest.mark.parametrize("class_weight", [None, "balanced"])
def test_sgd_solver_reaches_the_exact_objective(class_weight):
    # The exact solver (LIBLINEAR to tol 1e-10) is the truth; SGD with 5 epochs on 2,000
    # rows comes within 1e-3 of its objective (measured: ~1e-4) and predicts the same labels
    # on at least 99 % of the rows.
    X, y = make_classification(n_samples=2000, n_features=6, weights=[0.9], flip_y=0.05,
                               random_state=0)
    exact = HPCClassifier(class_weight=class_weight, **TIGHT).fit(X, y)
    sgd = HPCClassifier(class_weight=class_weight, solver="sgd", n_epochs=5,
                        random_state=0).fit(X, y)
    gap = (sgd.objective_ - exact.objective_) / exact.objective_
    assert -1e-9 < gap < 1e-3
    assert np.mean(sgd.predict(X) == exact.predict(X)) >= 0.99
    assert sgd.n_iter_ == 5
    np.testing.assert_allclose(sgd.jlj_, exact.jlj_)
    again = HPCClassifier(class_weight=class_weight, solver="sgd", n_epochs=5,
                          random_state=0).fit(X, y)
    np.testing.assert_array_equal(again.coef_, sgd.coef_)  # seeded: reproducible


class _ChunkLog:
    """Rows every chunk load, client result, J^T L' J task and SGD step held.

    Module-level, as are the functions that write to it, so that tasks which
    a distributed scheduler serialises still write here (its workers in these
    tests are threads of this process).
    """

    def __init__(self):
        self.clear()

    def clear(self):
        self.loads, self.client_rows, self.piece_rows, self.sgd_rows = [], [], [], []
        self.neighbor_loads, self.sent_rows = [], []


_LOG = _ChunkLog()
_PIECE_JLJ, _COMPUTE = chunked_module.piece_jlj, chunked_module.compute
_PARTIAL_FIT = hpc_module.SGDClassifier.partial_fit
_PLACED, _SEND = chunked_module.placed_piece_jlj, chunked_module._send


def _logged_placed(gathered, *args, **kwargs):
    _LOG.piece_rows.append(len(gathered))
    return _PLACED(gathered, *args, **kwargs)


def _logged_send(block, *args, **kwargs):
    _LOG.sent_rows.append(len(block[0]))
    return _SEND(block, *args, **kwargs)


def _load_neighbors(source, block_info=None):
    (lo, hi), _ = block_info[None]["array-location"]
    _LOG.neighbor_loads.append(hi - lo)
    return source[lo:hi].copy()


def _load_rows(source, block_info=None):
    (lo, hi), _ = block_info[None]["array-location"]
    _LOG.loads.append(hi - lo)
    return source[lo:hi].copy()


def _logged_piece(own, lo, hi, local_neighbors, parts, **kwargs):
    _LOG.piece_rows.append(len(own[0]) + sum(len(p[0]) for p in parts))
    return _PIECE_JLJ(own, lo, hi, local_neighbors, parts, **kwargs)


def _logged_compute(*collections, **kwargs):
    results = _COMPUTE(*collections, **kwargs)
    _LOG.client_rows.extend(np.shape(r)[0] for r in results if np.ndim(r) >= 1)
    return results


def _logged_partial_fit(self, X, y, **kwargs):
    _LOG.sgd_rows.append(len(X))
    return _PARTIAL_FIT(self, X, y, **kwargs)


def _lazy_input(X, y, chunk):
    """Dask arrays whose chunks are produced only when a task asks for them, logged."""
    rows = tuple(np.diff(np.r_[np.arange(0, len(X), chunk), len(X)]))
    X_dask = da.map_blocks(_load_rows, chunks=(rows, (X.shape[1],)), dtype=np.float64,
                           meta=np.empty((0, 0)), source=X)
    return X_dask, da.from_array(y, chunks=(rows,))


@pytest.fixture
def chunk_log(monkeypatch, client):
    """The log, with the fit's steps instrumented, on a distributed client."""
    _LOG.clear()
    monkeypatch.setattr(chunked_module, "compute", _logged_compute)
    monkeypatch.setattr(chunked_module, "piece_jlj", _logged_piece)
    monkeypatch.setattr(hpc_module.SGDClassifier, "partial_fit", _logged_partial_fit)
    monkeypatch.setattr(chunked_module, "placed_piece_jlj", _logged_placed)
    monkeypatch.setattr(chunked_module, "_send", _logged_send)
    return _LOG


def test_sgd_on_dask_holds_one_chunk_of_rows(chunk_log, monkeypatch):
    """With solver="sgd" no step of a Dask fit holds more than one chunk (two for J^T L' J).

    Runs on a distributed client: "this process" is the client, the tasks run on its workers.
    """
    n, chunk, k, epochs = 3000, 400, 5, 3
    X, y = make_classification(n_samples=n, n_features=6, weights=[0.85], flip_y=0.05,
                               random_state=4)
    nbrs = _brute_neighbors(X, k)
    exact = HPCClassifier(class_weight="balanced", **TIGHT).fit(X, y, neighbors=nbrs)

    class NoLinearSVC:  # the exact solver, which needs every row, must not run
        def __init__(self, *args, **kwargs):
            raise AssertionError("LinearSVC was used")

    monkeypatch.setattr(hpc_module, "LinearSVC", NoLinearSVC)
    X_dask, y_dask = _lazy_input(X, y, chunk)
    n_chunks = X_dask.numblocks[0]
    clf = HPCClassifier(class_weight="balanced", solver="sgd", n_epochs=epochs,
                        random_state=0).fit(X_dask, y_dask, neighbors=nbrs)
    # every chunk is produced at most once per pass: moments, J^T L' J, each epoch, the objective (Dask 2024.8
    # may keep one between passes); every row is read in every epoch (the SGD rows below)
    assert n_chunks * (2 + epochs) < len(chunk_log.loads) <= n_chunks * (3 + epochs)
    assert max(chunk_log.loads) == chunk
    assert max(chunk_log.client_rows) <= chunk          # nothing bigger reaches this process
    assert max(chunk_log.sgd_rows) <= chunk and sum(chunk_log.sgd_rows) == epochs * n
    assert max(chunk_log.piece_rows) <= 2 * chunk       # own rows + the rows their edges touch
    # the same model: J^T L' J exactly, the objective within SGD's accuracy
    np.testing.assert_allclose(clf.jlj_, exact.jlj_, rtol=1e-11, atol=1e-9)
    assert 0 <= (clf.objective_ - exact.objective_) / exact.objective_ < 2e-3
    assert np.mean(clf.predict(X) == exact.predict(X)) >= 0.99


def test_sgd_with_disk_exchange_holds_one_chunk_of_rows(chunk_log, monkeypatch, tmp_path):
    """With exchange_dir and solver="sgd" no process holds more than about one chunk of rows.

    The rows and the neighbour array are both produced lazily, a chunk at a time, and logged.
    """
    n, chunk, k, epochs = 3000, 400, 5, 2
    X, y = make_classification(n_samples=n, n_features=6, weights=[0.85], flip_y=0.05,
                               random_state=4)
    nbrs = _brute_neighbors(X, k)
    exact = HPCClassifier(class_weight="balanced", **TIGHT).fit(X, y, neighbors=nbrs)
    X_dask, y_dask = _lazy_input(X, y, chunk)
    nbrs_dask = da.map_blocks(_load_neighbors, chunks=(X_dask.chunks[0], (k,)), dtype=nbrs.dtype,
                              meta=np.empty((0, 0), dtype=nbrs.dtype), source=nbrs)
    n_chunks = X_dask.numblocks[0]
    clf = HPCClassifier(class_weight="balanced", solver="sgd", n_epochs=epochs,
                        exchange_dir=tmp_path, random_state=0).fit(X_dask, y_dask,
                                                                   neighbors=nbrs_dask)
    # rows: one pass each for the moments, the exchange's send, each epoch and the objective
    # (at most once per pass; Dask 2024.8 may keep one chunk between passes)
    assert n_chunks * (2 + epochs) < len(chunk_log.loads) <= n_chunks * (3 + epochs)
    assert max(chunk_log.loads) == chunk
    assert sorted(chunk_log.sent_rows) == sorted(X_dask.chunks[0])  # each chunk sent once
    # neighbours: read by the plan and receive tasks, a chunk at a time, never by this process
    assert len(chunk_log.neighbor_loads) == 2 * n_chunks and max(chunk_log.neighbor_loads) == chunk
    assert max(chunk_log.client_rows) <= chunk
    # a piece gathers its centres and their k neighbours: (chunk // k) (k + 1) rows
    assert max(chunk_log.piece_rows) == (chunk // k) * (k + 1)
    assert sum(chunk_log.piece_rows) == n * (k + 1)
    np.testing.assert_allclose(clf.jlj_, exact.jlj_, rtol=1e-11, atol=1e-9)
    assert 0 <= (clf.objective_ - exact.objective_) / exact.objective_ < 2e-3


def test_liblinear_on_dask_gathers_every_row(chunk_log):
    """The exact solver's documented cost, seen by the same instrumentation."""
    X, y = make_classification(n_samples=1000, n_features=4, random_state=5)
    X_dask, y_dask = _lazy_input(X, y, 250)
    HPCClassifier(random_state=0).fit(X_dask, y_dask, neighbors=_brute_neighbors(X, 5))
    assert max(chunk_log.client_rows) == 1000 and not chunk_log.sgd_rows


def test_sgd_on_a_distributed_client(client):
    X, y = make_classification(n_samples=1500, n_features=4, random_state=2)
    nbrs = _brute_neighbors(X, 5)
    memory = HPCClassifier(solver="sgd", random_state=0).fit(X, y, neighbors=nbrs)
    chunked = HPCClassifier(solver="sgd", random_state=0).fit(
        da.from_array(X, chunks=500), y, neighbors=nbrs)
    exact = HPCClassifier(**TIGHT).fit(X, y, neighbors=nbrs)
    for fitted in (memory, chunked):
        assert 0 <= (fitted.objective_ - exact.objective_) / exact.objective_ < 1e-3


# --- estimator behaviour ----------------------------------------------------------------


@pytest.mark.parametrize("labels", [np.array(["no", "yes"]), np.array([3, 7]), np.array([True, False])])
def test_labels_of_any_dtype_and_sign_convention(labels):
    X, y01 = make_classification(n_samples=80, n_features=3, n_redundant=0, random_state=0)
    y = labels[y01]
    clf = HPCClassifier(random_state=0).fit(X, y)
    assert set(clf.classes_) == set(labels)
    scores = clf.decision_function(X)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[(scores > 0).astype(int)])
    assert np.mean(clf.predict(X) == y) > 0.8


def test_class_weight_keys_are_the_training_labels():
    X, y01 = make_classification(n_samples=90, n_features=3, n_redundant=0, weights=[0.8],
                                 random_state=1)
    named = HPCClassifier(class_weight={"yes": 4.0}, **TIGHT).fit(X, np.array(["no", "yes"])[y01])
    numbered = HPCClassifier(class_weight={1: 4.0}, **TIGHT).fit(X, y01)
    np.testing.assert_allclose(named.coef_, numbered.coef_, rtol=1e-9)
    with pytest.raises(ValueError, match="not training classes"):
        HPCClassifier(class_weight={"maybe": 2.0}).fit(X, np.array(["no", "yes"])[y01])


@pytest.mark.parametrize("seed", [0, 1])
def test_registry_default_finds_a_one_percent_minority(seed):
    # The registry's "hpc" is what a job and benchmarks/default_scale run. The paper's plain hinge
    # loss (class_weight=None) puts every row of a 1 % minority on the majority side here (G-mean 0,
    # as LinearSVC(loss="hinge") unweighted does); the truth is the independent scikit-learn
    # reference LinearSVC(loss="hinge", class_weight="balanced"). Measured on 6 seeds at 3,000 and
    # 5,000 rows: HPC's held-back G-mean 0.80-0.85, at most 0.04 below the reference's (0.75-0.86).
    from dimbsvm.datasets import make_imbalanced
    from dimbsvm.estimators import make_estimator
    from dimbsvm.metrics import g_mean

    def rows(n, random_state):
        X, y = make_imbalanced(n, n_features=8, minority_fraction=0.01, random_state=random_state)
        return np.asarray(X.compute(), dtype=np.float64), np.asarray(y.compute())

    X, y = rows(3_000, seed)
    X_test, y_test = rows(20_000, 100)
    hpc = make_estimator("hpc").set_params(random_state=0).fit(X, y)
    reference = LinearSVC(loss="hinge", class_weight="balanced", random_state=0).fit(X, y)
    got = g_mean(y_test, hpc.predict(X_test))
    expected = g_mean(y_test, reference.predict(X_test))
    assert expected > 0.7  # the reference finds the minority: the data are what the test says
    assert got >= expected - 0.05, (got, expected)


def test_float32_dask_input_matches_float64():
    X, y = make_classification(n_samples=240, n_features=4, random_state=5)
    X = X.astype(np.float32)
    nbrs = _brute_neighbors(X.astype(np.float64), 5)
    memory = HPCClassifier(**TIGHT).fit(X.astype(np.float64), y, neighbors=nbrs)
    chunked = HPCClassifier(**TIGHT).fit(da.from_array(X, chunks=50), y, neighbors=nbrs)
    np.testing.assert_allclose(chunked.coef_, memory.coef_, rtol=1e-6, atol=1e-9)


def test_composes_with_othr():
    from dimbsvm.svm.othr import OTHRClassifier

    X, y = make_classification(n_samples=200, n_features=4, weights=[0.9], flip_y=0.05,
                               random_state=0)
    clf = OTHRClassifier(HPCClassifier(random_state=0)).fit(X, y)
    assert isinstance(clf.estimator_, HPCClassifier) and np.isfinite(clf.threshold_)
    assert clf.predict(X).shape == (200,)


def test_precomputed_neighbours_give_the_same_model():
    X, y = make_classification(n_samples=100, n_features=3, n_redundant=0, random_state=3)
    searched = HPCClassifier(knn_method="exact", **TIGHT).fit(X, y)
    given = HPCClassifier(**TIGHT).fit(X, y, neighbors=_brute_neighbors(X, 8))  # extra columns cut
    np.testing.assert_allclose(given.coef_, searched.coef_, rtol=1e-9, atol=1e-12)


def test_errors_are_clear():
    X, y = make_classification(n_samples=30, n_features=3, n_redundant=0, random_state=0)
    with pytest.raises(ValueError, match="1 class"):
        HPCClassifier().fit(X, np.zeros(30))
    X_nan = X.copy()
    X_nan[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        HPCClassifier().fit(X_nan, y)
    with pytest.raises(DataError, match="n_neighbors=30 must be below"):
        HPCClassifier(n_neighbors=30).fit(X, y)
    with pytest.raises(InvalidParameterError, match="'c1' parameter"):
        HPCClassifier(c1=-1.0).fit(X, y)
    with pytest.raises(InvalidParameterError, match="'solver' parameter"):
        HPCClassifier(solver="lbfgs").fit(X, y)
    with pytest.raises(InvalidParameterError, match="'n_epochs' parameter"):
        HPCClassifier(solver="sgd", n_epochs=0).fit(X, y)
    with pytest.raises(DataError, match="max_kernel_size=20; set n_components"):
        HPCClassifier(kernel="rbf", max_kernel_size=20).fit(X, y)
    with pytest.raises(DataError, match="only 30 training rows"):
        HPCClassifier(kernel="rbf", n_components=31).fit(X, y)
    with pytest.raises(DataError, match="Dask input needs neighbors"):
        HPCClassifier().fit(da.from_array(X, chunks=10), y)
    with pytest.raises(DataError, match="its own neighbours"):
        HPCClassifier(n_neighbors=1).fit(X, y, neighbors=np.arange(30)[:, None])
    with pytest.raises(DataError, match="exchange_dir='/no/such/dir' is not an existing directory"):
        HPCClassifier(exchange_dir="/no/such/dir").fit(da.from_array(X, chunks=10), y,
                                                        neighbors=_brute_neighbors(X, 5))
    with pytest.raises(DataError, match="NaN or inf"):
        HPCClassifier().fit(da.from_array(X_nan, chunks=10), y, neighbors=_brute_neighbors(X, 5))
    with pytest.raises(ValueError, match="features"):
        HPCClassifier().fit(X, y).decision_function(X[:, :2])


# --- scikit-learn's estimator checks -----------------------------------------------------


def _expected_failed_checks(estimator):
    failures = {"check_sample_weight_equivalence_on_dense_data": (
        "a repeated row is a new vertex of the kNN hypergraph (its copies are each other's neighbours), so "
        "repeating a row changes the pairwise term while weighting it does not; weights are tested against the "
        "dual solved with a weighted box (test_weighted_rows_equal_the_direct_dual_with_a_weighted_box)")}
    if estimator.kernel_gamma == "auto":
        failures["check_class_weight_classifiers"] = (
            "on this check's unscaled blobs (spread 20) kernel_gamma=1/n_features makes "
            "K(test, train) ~ 0, so a test prediction is the sign of b alone, and the pairwise "
            "term c1 (f_i + f_j)^2 over the many mixed-class hyperedges shrinks b to ~0 whatever "
            "the class weights; c1=0 or kernel_gamma='scale' passes")
    return failures


@parametrize_with_checks(
    [HPCClassifier(), HPCClassifier(kernel="rbf"), HPCClassifier(kernel="rbf", kernel_gamma="auto"),
     HPCClassifier(kernel="laplacian", n_components=5), HPCClassifier(solver="sgd")],
    expected_failed_checks=_expected_failed_checks,
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        check(estimator)
