"""Numeric kernels of HPC-SVM: hyperedge sums, the Cholesky reduction, plain arrays.

With ``J = [F 1]`` (one row ``[f_i; 1]`` per sample, ``F`` the input rows for
the linear case), the HPC primal (eq. 21, with the ``eps I`` of eq. 33) is

    min_{w, b}  1/2 [w; b]^T A [w; b] + C sum_i max(0, 1 - y_i [f_i; 1] . [w; b]),
    A = H + c1 J^T L' J + eps I,

whose Wolfe dual is eq. (34) with ``Q = (y o J) A^-1 (y o J)^T`` and the box
``0 <= alpha_i <= C``. With ``A = R^T R`` (Cholesky, ``R`` upper triangular)
and ``v = R [w; b]``, the primal becomes ``1/2 |v|^2 + C sum_i max(0, 1 - y_i
v . u_i)`` with ``u_i = R^-T [f_i; 1]``: a bias-free L1-loss (hinge) linear SVM,
which is LIBLINEAR's problem with the same ``C`` (its dual is eq. (34) term for
term, ``Q_ij = y_i y_j u_i . u_j``). So ``[w; b] = R^-1 v`` (eq. 33 after
substituting ``(y o J)^T alpha = R^T v``).

``J^T L' J`` needs no ``L'``: since ``L' = D - (Z o P)`` (see
:mod:`dimbsvm.graph.hypergraph`) and ``P = sum_e w(e)/delta(e) 1_e 1_e^T``,

    J^T L' J = sum_e w(e) [ sum_{j in e} J_j J_j^T - g_e g_e^T / delta(e) ],
    g_e = sum_{j in e} y_j J_j,

i.e. ``w(e) delta(e)`` times the (biased) scatter of the signed rows ``y_j J_j``
of the hyperedge: one ``(p x p)`` sum per chunk of hyperedges, positive
semi-definite by construction. :func:`accumulate_jlj` computes it for the
hyperedges centred on a block of rows.

Arrays in, arrays out: no Dask, no I/O, no validation beyond shapes.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError, cholesky, solve_triangular

from dimbsvm.exceptions import DataError
from dimbsvm.graph.hypergraph import Hypergraph, hyperedge_weights

__all__ = [
    "accumulate_jlj",
    "augment",
    "cholesky_factor",
    "class_weight_values",
    "gather_piece_jlj",
    "group_by_chunk",
    "hinge_sums",
    "hpc_matrix",
    "hyperedge_members",
    "kernel_jlj",
    "kernel_width",
    "piece_jlj",
    "placed_piece_jlj",
    "primal_objective",
    "recover_weights",
    "signed_class_weight",
    "rows_of_chunk",
    "transform_rows",
]

#: Bytes of gathered hyperedge rows :func:`accumulate_jlj` holds at a time.
BLOCK_BYTES = 64 * 2**20


def augment(F):
    """``J = [F 1]``: the rows with a column of ones appended (the paper's ``[M s]``).

    Examples
    --------
    >>> augment(np.array([[2.0], [3.0]])).tolist()
    [[2.0, 1.0], [3.0, 1.0]]
    """
    F = np.asarray(F, dtype=np.float64)
    return np.column_stack([F, np.ones(F.shape[0])])


def accumulate_jlj(X_rows, neighbors, X_lookup, y_rows, y_lookup, *, sigma2, gamma=1.0,
                   F_rows=None, F_lookup=None):
    """``J^T L' J`` restricted to the hyperedges centred on a block of rows.

    Summing the result over blocks that partition the training rows gives
    ``J^T L' J`` of the whole hypergraph, so each chunk of a Dask array can
    compute its own ``(p x p)`` term and a tree reduction adds them.

    Parameters
    ----------
    X_rows : ndarray of shape (m, n_features)
        Input rows of the hyperedge centres (one hyperedge per row).
    neighbors : ndarray of shape (m, k)
        Indices into ``X_lookup`` of each centre's ``k`` nearest other samples.
    X_lookup : ndarray of shape (n_lookup, n_features)
        Input rows the indices refer to (the training rows, or the subset a
        chunk gathered, with the indices remapped).
    y_rows : ndarray of shape (m,)
        Labels of the centres in {-1, +1}.
    y_lookup : ndarray of shape (n_lookup,)
        Labels of the lookup rows in {-1, +1}.
    sigma2 : float
        ``sigma^2`` of eq. (18) over all training rows.
    gamma : float, default=1.0
        Weight width of eq. (17).
    F_rows, F_lookup : ndarray of shape (m, n_outputs) and (n_lookup, n_outputs), default=None
        Rows entering ``J = [F 1]`` when they differ from the input rows
        (Nystroem features, kernel rows); the weights always come from the
        input rows. ``None`` means ``X_rows`` and ``X_lookup``.

    Returns
    -------
    jlj : ndarray of shape (p, p), ``p = n_outputs + 1``

    Examples
    --------
    Two points of different classes, each the other's neighbour:

    >>> X = np.array([[0.0], [1.0]])
    >>> y = np.array([-1.0, 1.0])
    >>> nbrs = np.array([[1], [0]])
    >>> accumulate_jlj(X, nbrs, X, y, y, sigma2=1e300).round(12).tolist()
    [[2.0, 4.0], [4.0, 8.0]]
    """
    same = F_rows is None
    if same:
        F_rows, F_lookup = X_rows, X_lookup
    m, k = neighbors.shape
    p = F_rows.shape[1] + 1
    jlj = np.zeros((p, p))
    block = max(1, BLOCK_BYTES // (8 * (k + 1) * (p + X_rows.shape[1])))
    for start in range(0, m, block):
        stop = min(start + block, m)
        nbrs = neighbors[start:stop]
        signed = np.empty((stop - start, k + 1, p))  # row j of hyperedge e: J_j, then y_j J_j
        signed[:, 0, :-1] = F_rows[start:stop]
        signed[:, 1:, :-1] = F_lookup[nbrs]
        signed[..., -1] = 1.0
        if same:
            weights = hyperedge_weights(signed[:, 0, :-1], signed[:, 1:, :-1], sigma2=sigma2,
                                        gamma=gamma)                           # eqs. (10), (17)
        else:
            weights = hyperedge_weights(X_rows[start:stop], X_lookup[nbrs], sigma2=sigma2,
                                        gamma=gamma)
        signed[:, 0] *= y_rows[start:stop, None]
        signed[:, 1:] *= y_lookup[nbrs][..., None]                            # y_j J_j
        signed -= signed.mean(axis=1, keepdims=True)                          # minus g_e / delta(e)
        signed *= np.sqrt(weights)[:, None, None]
        flat = signed.reshape(-1, p)
        jlj += flat.T @ flat
    return jlj


def kernel_jlj(J, X, neighbors, signs, *, sigma2, gamma=1.0):
    """``J^T L' J`` through the sparse ``L'``, for wide ``J`` held in memory.

    Equal to :func:`accumulate_jlj`, but for the exact kernel case, where
    ``J = [K 1]`` has ``p = n + 1`` columns, the sparse product costs about
    ``n p^2`` against ``(k + 1) n p^2`` for the hyperedge sums.

    Parameters
    ----------
    J : ndarray of shape (n, p)
    X : ndarray of shape (n, n_features)
        Input rows (for the hyperedge weights).
    neighbors : ndarray of shape (n, k)
    signs : ndarray of shape (n,)
        Labels in {-1, +1}.
    sigma2, gamma : float
        As in :func:`accumulate_jlj`.

    Returns
    -------
    jlj : ndarray of shape (p, p)
    """
    weights = hyperedge_weights(X, X[neighbors], sigma2=sigma2, gamma=gamma)  # eqs. (10), (17)
    graph = Hypergraph(np.column_stack([np.arange(X.shape[0]), neighbors]), weights, X.shape[0])
    return J.T @ (graph.signed_laplacian(signs) @ J)                          # eq. (19)


def kernel_width(kernel, kernel_gamma, n_features, variance):
    """The kernel's ``gamma``: a number, ``"scale"`` or ``"auto"`` as in ``SVC``; ``None`` if linear.

    Examples
    --------
    >>> kernel_width("rbf", "scale", 4, 0.5), kernel_width("rbf", "auto", 4, 0.5)
    (0.5, 0.25)
    """
    if kernel == "linear":
        return None
    if kernel_gamma == "scale":
        return 1.0 / (n_features * variance) if variance > 0 else 1.0
    if kernel_gamma == "auto":
        return 1.0 / n_features
    return float(kernel_gamma)


def signed_class_weight(class_weight, classes):
    """``class_weight`` keyed by the {-1, +1} labels the reduced SVM sees.

    Examples
    --------
    >>> signed_class_weight({"yes": 5.0}, np.array(["no", "yes"]))
    {-1.0: 1.0, 1.0: 5.0}
    """
    if not isinstance(class_weight, dict):
        return class_weight  # None or "balanced": the counts do not depend on the labels' names
    unknown = set(class_weight) - set(classes.tolist())
    if unknown:
        raise ValueError(f"class_weight has labels {sorted(unknown, key=str)} that are not "
                         f"training classes {classes.tolist()}")
    return {sign: float(class_weight.get(label, 1.0))
            for sign, label in zip((-1.0, 1.0), classes.tolist())}


def class_weight_values(class_weight, classes, counts):
    """The multipliers of ``C`` for ``classes_[0]`` and ``classes_[1]``, as numbers.

    Parameters
    ----------
    class_weight : dict, "balanced" or None
    classes : ndarray of shape (2,)
    counts : array-like of shape (2,)
        Training rows of each class; ``"balanced"`` gives ``n / (2 n_c)`` as
        :func:`sklearn.utils.class_weight.compute_class_weight` does.

    Returns
    -------
    weights : ndarray of shape (2,)

    Examples
    --------
    >>> class_weight_values("balanced", np.array([0, 1]), [90, 10]).tolist()
    [0.5555555555555556, 5.0]
    >>> class_weight_values({1: 3.0}, np.array([0, 1]), [90, 10]).tolist()
    [1.0, 3.0]
    """
    counts = np.asarray(counts, dtype=np.float64)
    if class_weight is None:
        return np.ones(2)
    if isinstance(class_weight, str):  # "balanced"
        return counts.sum() / (2.0 * counts)
    signed = signed_class_weight(class_weight, classes)
    return np.array([signed[-1.0], signed[1.0]])


def hinge_sums(J, signs, wb, sample_weight=None):
    """``sum_i s_i max(0, 1 - y_i J_i . [w; b])`` over each class's rows of a block (``s_i``: row weights, or 1).

    Parameters
    ----------
    J : ndarray of shape (m, p)
        Rows ``[f_i; 1]``.
    signs : ndarray of shape (m,)
        Labels in {-1, +1}.
    wb : ndarray of shape (p,)
    sample_weight : ndarray of shape (m,), default=None

    Returns
    -------
    sums : ndarray of shape (2,)
        The (weighted) hinge losses of the ``-1`` rows, then of the ``+1`` rows.

    Examples
    --------
    >>> hinge_sums(np.array([[1.0, 1.0], [2.0, 1.0]]), np.array([-1, 1]), np.array([1.0, 0.0])).tolist()
    [2.0, 0.0]
    """
    J = np.asarray(J, dtype=np.float64)
    positive = np.asarray(signs) > 0
    loss = np.maximum(0.0, 1.0 - np.where(positive, 1.0, -1.0) * (J @ wb))
    if sample_weight is not None:
        loss = loss * sample_weight
    return np.array([loss[~positive].sum(), loss[positive].sum()])


def primal_objective(R, wb, hinge, *, C, weights):
    """The HPC primal (eq. 21/33) ``1/2 [w; b]^T A [w; b] + C sum_i c_i max(0, 1 - y_i f_i)``.

    ``c_i`` is row ``i``'s class weight; row weights are already in ``hinge``.

    Parameters
    ----------
    R : ndarray of shape (p, p)
        ``A = R^T R``.
    wb : ndarray of shape (p,)
    hinge : ndarray of shape (2,)
        :func:`hinge_sums` over all training rows.
    C : float
    weights : ndarray of shape (2,)
        :func:`class_weight_values`.

    Returns
    -------
    objective : float

    Examples
    --------
    >>> primal_objective(np.eye(2), np.array([1.0, 0.0]), np.array([2.0, 0.0]), C=1.0,
    ...                  weights=np.ones(2))
    2.5
    """
    v = R @ wb
    return float(0.5 * v @ v + C * np.dot(weights, hinge))


def hpc_matrix(jlj, *, c1, eps, H=None):
    """``A = H + c1 J^T L' J + eps I`` (eqs. 31 and 33).

    Parameters
    ----------
    jlj : ndarray of shape (p, p)
    c1 : float
    eps : float
    H : ndarray of shape (p - 1, p - 1), default=None
        The upper-left block of ``H`` (the bias row and column are 0):
        ``None`` means the identity (linear case, eq. 30); the kernel case
        passes ``K`` (``H_Phi`` of eq. 40).

    Returns
    -------
    A : ndarray of shape (p, p)

    Examples
    --------
    >>> hpc_matrix(np.zeros((2, 2)), c1=1.0, eps=0.5).tolist()
    [[1.5, 0.0], [0.0, 0.5]]
    """
    p = jlj.shape[0]
    A = c1 * jlj
    if H is None:
        A[np.arange(p - 1), np.arange(p - 1)] += 1.0
    else:
        A[:-1, :-1] += H
    A[np.diag_indices(p)] += eps
    return (A + A.T) / 2  # exactly symmetric for the factorisation


def cholesky_factor(A):
    """Upper-triangular ``R`` with ``A = R^T R``, or a ``DataError`` naming ``eps``.

    Examples
    --------
    >>> cholesky_factor(np.array([[4.0, 2.0], [2.0, 2.0]])).tolist()
    [[2.0, 1.0], [0.0, 1.0]]
    """
    try:
        return cholesky(A, lower=False, check_finite=True)
    except (LinAlgError, ValueError) as exc:
        raise DataError(f"H + c1 J^T L' J + eps I is not positive definite ({exc}); increase eps "
                        "or scale the features") from exc


def transform_rows(J, R):
    """``u_i = R^-T J_i`` for every row: the inputs of the bias-free hinge SVM.

    Parameters
    ----------
    J : ndarray of shape (n, p)
    R : ndarray of shape (p, p), upper triangular

    Returns
    -------
    U : ndarray of shape (n, p)

    Examples
    --------
    >>> transform_rows(np.array([[2.0, 1.0]]), np.array([[2.0, 1.0], [0.0, 1.0]])).tolist()
    [[1.0, 0.0]]
    """
    return solve_triangular(R, np.asarray(J, dtype=np.float64).T, trans="T", lower=False).T


def recover_weights(R, v):
    """``[w; b] = R^-1 v`` (eq. 33 with ``(y o J)^T alpha = R^T v``).

    Examples
    --------
    >>> recover_weights(np.array([[2.0, 1.0], [0.0, 1.0]]), np.array([1.0, 0.0])).tolist()
    [0.5, 0.0]
    """
    return solve_triangular(R, np.asarray(v, dtype=np.float64), lower=False)


def rows_of_chunk(block, rows):
    """The given rows of each array of a chunk's ``(X, signs, F or None)``."""
    return tuple(None if part is None else part[rows] for part in block)


def piece_jlj(own, lo, hi, local_neighbors, parts, *, sigma2, gamma):
    """``accumulate_jlj`` of the hyperedges centred on rows ``lo:hi`` of a chunk.

    ``own`` is the chunk's ``(X, signs, F or None)``; ``parts`` are the
    :func:`rows_of_chunk` of the rows the hyperedges touch, in the order that
    ``local_neighbors`` indexes.
    """
    X, signs, F = own
    X_touched, signs_touched, F_touched = (
        None if parts[0][i] is None else np.concatenate([p[i] for p in parts]) for i in range(3))
    return accumulate_jlj(X[lo:hi], local_neighbors, X_touched, signs[lo:hi], signs_touched,
                          sigma2=sigma2, gamma=gamma, F_rows=None if F is None else F[lo:hi],
                          F_lookup=F_touched)


def gather_piece_jlj(own, lo, hi, local_neighbors, chunks, touched, starts, *, sigma2, gamma):
    """:func:`piece_jlj` that cuts the touched rows itself from the whole chunks.

    For schedulers whose tasks share memory, where handing a task every chunk
    costs nothing: ``chunks`` is the list of every chunk's ``(X, signs, F or
    None)``, ``touched`` the sorted global indices of the rows the hyperedges
    touch (what ``local_neighbors`` indexes) and ``starts`` the first global
    row of each chunk, then the row count.
    """
    cuts = np.searchsorted(touched, starts)  # touched is sorted: one slice per chunk
    parts = [rows_of_chunk(chunks[b], touched[cuts[b]:cuts[b + 1]] - starts[b])
             for b in np.flatnonzero(np.diff(cuts))]
    return piece_jlj(own, lo, hi, local_neighbors, parts, sigma2=sigma2, gamma=gamma)


def hyperedge_members(first_row, neighbors):
    """Global indices of each hyperedge's vertices: its centre, then its neighbours.

    Parameters
    ----------
    first_row : int
        Global index of the first centre; the centres are consecutive rows.
    neighbors : ndarray of shape (m, k)
        Global indices of each centre's ``k`` nearest other rows.

    Returns
    -------
    members : ndarray of shape (m, k + 1), int64

    Examples
    --------
    >>> hyperedge_members(10, np.array([[3, 4], [10, 2]])).tolist()
    [[10, 3, 4], [11, 10, 2]]
    """
    m = neighbors.shape[0]
    return np.column_stack([np.arange(first_row, first_row + m), neighbors]).astype(np.int64)


def group_by_chunk(indices, starts):
    """A stable order of ``indices`` grouped by the chunk holding each, and the group sizes.

    Parameters
    ----------
    indices : ndarray of shape (r,)
        Global row indices.
    starts : ndarray of shape (n_chunks + 1,)
        First global row of each chunk, then the row count.

    Returns
    -------
    order : ndarray of shape (r,)
        ``indices[order]`` lists chunk 0's rows first, then chunk 1's, ...,
        each group in the order the rows appear in ``indices``.
    counts : ndarray of shape (n_chunks,)
        Rows of ``indices`` in each chunk.

    Examples
    --------
    >>> order, counts = group_by_chunk(np.array([5, 0, 7, 1]), np.array([0, 4, 8]))
    >>> order.tolist(), counts.tolist()
    ([1, 3, 0, 2], [2, 2])
    """
    chunk = np.searchsorted(starts, indices, side="right") - 1
    return np.argsort(chunk, kind="stable"), np.bincount(chunk, minlength=len(starts) - 1)


def placed_piece_jlj(gathered, order, m, k, n_features, *, sigma2, gamma):
    """``accumulate_jlj`` of ``m`` hyperedges whose vertex rows arrive grouped by chunk.

    Parameters
    ----------
    gathered : ndarray of shape (m * (k + 1), n_columns)
        The vertex rows in the order :func:`group_by_chunk` gave for the
        flattened :func:`hyperedge_members`; columns are the input row
        (``n_features``), the sign in {-1, +1}, then the features entering
        ``J`` if they differ from the input (Nystroem), else nothing.
    order : ndarray of shape (m * (k + 1),)
        That order.
    m, k, n_features : int

    Returns
    -------
    jlj : ndarray of shape (p, p)
    """
    placed = np.empty_like(gathered)
    placed[order] = gathered                       # back to (centre, neighbours) per hyperedge
    placed = placed.reshape(m, k + 1, -1)
    d = n_features
    centres, others = placed[:, 0], placed[:, 1:].reshape(m * k, -1)
    lookup = np.arange(m * k).reshape(m, k)
    other_features = placed.shape[2] > d + 1
    return accumulate_jlj(centres[:, :d], lookup, others[:, :d], centres[:, d], others[:, d],
                          sigma2=sigma2, gamma=gamma,
                          F_rows=centres[:, d + 1:] if other_features else None,
                          F_lookup=others[:, d + 1:] if other_features else None)
