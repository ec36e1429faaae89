"""The kNN hypergraph of HPC-SVM: hyperedges, weights, incidence and the signed Laplacian.

Following the HPC-SVM paper (``hpc-svm-hypergraph-pairwise-constraints``,
section "Hypergraph learning" and eqs. (7)-(19)), every training sample
``x_e`` spans one hyperedge ``e = {x_e} U N_k(x_e)``: the sample itself (the
paper's "centroid vertex") and its ``k`` nearest neighbours, so
``delta(e) = |e| = k + 1`` (eq. 9). Its weight is

    w(e) = sum_{x_j in e} exp(-|x_e - x_j|^2 / (gamma * sigma^2))        (eqs. 10, 17)

where ``sigma^2 = sum_i |x_i - xbar|^2 / (l - 1)`` (eq. 18) is the *total*
sample variance of the training rows: the sum over features of the per-feature
variances with ``ddof=1``, one scalar for the whole data set. The centroid's
own term is ``exp(0) = 1``, so ``1 <= w(e) <= k + 1``.

From these, the paper's matrices (all sparse here, never a dense n x n):

- incidence ``Phi`` (n_vertices x n_edges), ``Phi(v, e) = 1`` if ``v in e`` (eq. 7);
- vertex degrees ``d(v) = sum_e w(e) Phi(v, e)`` (eq. 8);
- adjacency ``P = Phi W D_e^-1 Phi^T``;
- signed Laplacian ``L' = L + (U - Z) o P`` with ``L = D - P`` and ``Z = y y^T``
  (eq. 19), i.e. ``L' = D - P_same + P_diff`` where ``P_same`` keeps the
  entries of ``P`` between samples of one class and ``P_diff`` the rest.
  ``D = diag(sum_j p_ij) = diag(d(v))`` because every column of ``Phi W
  D_e^-1`` sums to ``w(e)`` over the ``delta(e)`` members.

``f^T L' f = 1/2 sum_ij p_ij (f_i - z_ij f_j)^2`` is the HPC regulariser of
eq. (19); :mod:`dimbsvm.svm.hpc` accumulates its quadratic form ``J^T L' J``
from hyperedge sums without forming ``L'`` at all.

Arrays in, arrays out: no Dask and no I/O here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dimbsvm.exceptions import DataError
from dimbsvm.graph.knn import nearest_neighbors

__all__ = [
    "Hypergraph",
    "build_hypergraph",
    "hyperedge_weights",
    "neighbors_excluding_self",
    "total_variance",
    "validate_neighbors",
]

logger = logging.getLogger(__name__)


def total_variance(X):
    """``sigma^2`` of eq. (18): ``sum_i |x_i - xbar|^2 / (l - 1)``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        At least two rows.

    Returns
    -------
    sigma2 : float
        The sum of the per-feature sample variances (``ddof=1``).

    Examples
    --------
    >>> import numpy as np
    >>> total_variance(np.array([[0.0, 0.0], [2.0, 2.0]]))
    4.0
    """
    X = np.asarray(X, dtype=np.float64)
    if X.shape[0] < 2:
        raise DataError(f"sigma^2 of eq. (18) needs at least 2 rows; got {X.shape[0]}")
    centred = X - X.mean(axis=0)
    return float(np.einsum("ij,ij->", centred, centred) / (X.shape[0] - 1))  # eq. (18)


def hyperedge_weights(centres, neighbours, *, sigma2, gamma=1.0):
    """Hyperedge weights ``w(e)`` of eqs. (10) and (17).

    Parameters
    ----------
    centres : ndarray of shape (n_edges, n_features)
        The centroid vertex ``x_e`` of each hyperedge.
    neighbours : ndarray of shape (n_edges, k, n_features)
        The other members of each hyperedge (its ``k`` nearest neighbours).
    sigma2 : float
        ``sigma^2`` of eq. (18) (:func:`total_variance` of the training rows).
    gamma : float, default=1.0
        The paper's ``gamma``, the width of the weights relative to ``sigma^2``.

    Returns
    -------
    weights : ndarray of shape (n_edges,)
        ``1 + sum_j exp(-|x_e - x_j|^2 / (gamma sigma^2))``, in ``[1, k + 1]``.
        When ``sigma2`` is 0 (all rows equal) every distance is 0 and every
        weight is ``k + 1``.

    Examples
    --------
    >>> import numpy as np
    >>> centres = np.array([[0.0], [1.0]])
    >>> neighbours = np.array([[[1.0]], [[0.0]]])
    >>> hyperedge_weights(centres, neighbours, sigma2=1.0).round(4).tolist()
    [1.3679, 1.3679]
    """
    centres = np.asarray(centres, dtype=np.float64)
    neighbours = np.asarray(neighbours, dtype=np.float64)
    diff = neighbours - centres[:, None, :]
    sq = np.einsum("ekf,ekf->ek", diff, diff)  # direct differences: exact near 0
    if sigma2 <= 0:
        return np.full(centres.shape[0], 1.0 + neighbours.shape[1])
    return 1.0 + np.exp(-sq / (gamma * sigma2)).sum(axis=1)  # eq. (17); the centre adds exp(0)


def neighbors_excluding_self(indices, rows=None):
    """Drop each query row from its own neighbour list.

    A kNN query of the training rows against themselves for ``k + 1``
    neighbours returns each row first (distance 0) -- unless duplicate rows
    tie with it. This removes the row wherever it appears, and the last
    neighbour where it does not, leaving ``k`` other rows.

    Parameters
    ----------
    indices : ndarray of shape (n_rows, k + 1)
        Neighbour indices from ``nearest_neighbors(X, X[rows], k + 1)``.
    rows : ndarray of shape (n_rows,), default=None
        The index of each query row; ``None`` means ``0 .. n_rows - 1``.

    Returns
    -------
    neighbors : ndarray of shape (n_rows, k), int64

    Examples
    --------
    >>> import numpy as np
    >>> neighbors_excluding_self(np.array([[0, 2, 1], [0, 1, 2], [1, 0, 3]])).tolist()
    [[2, 1], [0, 2], [1, 0]]
    """
    indices = np.asarray(indices, dtype=np.int64)
    rows = np.arange(indices.shape[0]) if rows is None else np.asarray(rows, dtype=np.int64)
    is_self = indices == rows[:, None]
    has_self = is_self.any(axis=1)
    drop = np.where(has_self, np.argmax(is_self, axis=1), indices.shape[1] - 1)
    keep = np.ones(indices.shape, dtype=bool)
    keep[np.arange(indices.shape[0]), drop] = False
    return indices[keep].reshape(indices.shape[0], indices.shape[1] - 1)


def validate_neighbors(neighbors, n_vertices, *, rows=None, n_neighbors=None):
    """Check a precomputed neighbour array and return its first ``n_neighbors`` columns.

    Parameters
    ----------
    neighbors : array-like of shape (n_rows, k)
        Indices in ``[0, n_vertices)`` of each row's nearest neighbours, nearest
        first, excluding the row itself.
    n_vertices : int
        Number of rows the indices refer to.
    rows : ndarray of shape (n_rows,), default=None
        Index of each row; ``None`` means ``0 .. n_rows - 1``.
    n_neighbors : int, default=None
        Columns to keep; ``None`` keeps all.

    Returns
    -------
    neighbors : ndarray of shape (n_rows, n_neighbors), int64

    Raises
    ------
    DataError
        Not 2-D integers, too few columns, indices out of range, a row listed
        among its own neighbours, or a neighbour listed twice.
    """
    neighbors = np.asarray(neighbors)
    if neighbors.ndim != 2 or not np.issubdtype(neighbors.dtype, np.integer):
        raise DataError(f"neighbors must be a 2-D integer array (n_samples, k); got dtype "
                        f"{neighbors.dtype} and shape {neighbors.shape}")
    if n_neighbors is not None:
        if neighbors.shape[1] < n_neighbors:
            raise DataError(f"neighbors has {neighbors.shape[1]} columns but n_neighbors="
                            f"{n_neighbors} neighbours per sample are needed")
        neighbors = neighbors[:, :n_neighbors]
    neighbors = neighbors.astype(np.int64, copy=False)
    rows = np.arange(neighbors.shape[0]) if rows is None else np.asarray(rows, dtype=np.int64)
    if neighbors.size and (neighbors.min() < 0 or neighbors.max() >= n_vertices):
        raise DataError(f"neighbors holds indices outside [0, {n_vertices}) (the training rows)")
    if (neighbors == rows[:, None]).any():
        raise DataError("neighbors lists a sample among its own neighbours; pass the k nearest "
                        "*other* samples (see neighbors_excluding_self)")
    ordered = np.sort(neighbors, axis=1)
    if (ordered[:, 1:] == ordered[:, :-1]).any():
        raise DataError("neighbors lists the same neighbour twice in one row")
    return neighbors


@dataclass
class Hypergraph:
    """One hyperedge per sample: the sample and its ``k`` nearest neighbours.

    Attributes
    ----------
    members : ndarray of shape (n_edges, k + 1), int64
        Vertices of each hyperedge, its centroid vertex first.
    weights : ndarray of shape (n_edges,)
        ``w(e)`` (eqs. 10, 17).
    n_vertices : int
    """

    members: np.ndarray
    weights: np.ndarray
    n_vertices: int

    @property
    def edge_degrees(self):
        """``delta(e) = |e|`` (eq. 9), ``k + 1`` for every hyperedge."""
        return np.full(self.members.shape[0], float(self.members.shape[1]))

    def incidence(self):
        """``Phi`` of eq. (7) as a CSC matrix (n_vertices x n_edges) of ones."""
        n_edges, size = self.members.shape
        data = np.ones(n_edges * size)
        indptr = np.arange(0, n_edges * size + 1, size)
        return sp.csc_matrix((data, self.members.ravel(), indptr),
                             shape=(self.n_vertices, n_edges))

    def vertex_degrees(self):
        """``d(v) = sum_e w(e) Phi(v, e)`` (eq. 8)."""
        return np.bincount(self.members.ravel(), weights=np.repeat(self.weights, self.members.shape[1]),
                           minlength=self.n_vertices)

    def adjacency(self):
        """``P = Phi W D_e^-1 Phi^T`` as a CSR matrix (n_vertices x n_vertices)."""
        Phi = self.incidence()
        return (Phi @ sp.diags(self.weights / self.edge_degrees) @ Phi.T).tocsr()

    def split_adjacency(self, y):
        """``P`` split into its same-class and different-class entries.

        Parameters
        ----------
        y : array-like of shape (n_vertices,)
            Class labels (any two values).

        Returns
        -------
        P_same, P_diff : sparse matrices, CSR
            ``P = P_same + P_diff``.
        """
        P = self.adjacency().tocoo()
        y = np.asarray(y)
        same = y[P.row] == y[P.col]
        shape = P.shape
        P_same = sp.csr_matrix((P.data[same], (P.row[same], P.col[same])), shape=shape)
        P_diff = sp.csr_matrix((P.data[~same], (P.row[~same], P.col[~same])), shape=shape)
        return P_same, P_diff

    def signed_laplacian(self, y):
        """``L' = D - P_same + P_diff`` (eq. 19: ``L + (U - Z) o P`` with ``L = D - P``).

        Parameters
        ----------
        y : array-like of shape (n_vertices,)

        Returns
        -------
        L : sparse matrix, CSR, symmetric positive semi-definite
        """
        P_same, P_diff = self.split_adjacency(y)
        return (sp.diags(self.vertex_degrees()) - P_same + P_diff).tocsr()


def build_hypergraph(X, n_neighbors=5, *, gamma=1.0, neighbors=None, knn_method="auto",
                     random_state=None):
    """The HPC hypergraph of the rows of ``X``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    n_neighbors : int, default=5
        ``k``: each hyperedge is a sample and its ``k`` nearest other samples;
        ``k < n_samples``.
    gamma : float, default=1.0
        Width of the weights relative to ``sigma^2`` (eq. 17).
    neighbors : array-like of shape (n_samples, >= k), default=None
        Precomputed neighbour indices (excluding each sample itself, nearest
        first); ``None`` searches with :func:`dimbsvm.graph.knn.nearest_neighbors`.
    knn_method : {"auto", "exact", "pynndescent"}, default="auto"
    random_state : int, RandomState instance or None, default=None
        Seeds an approximate neighbour search.

    Returns
    -------
    Hypergraph

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [0.1], [1.0], [1.1]])
    >>> graph = build_hypergraph(X, n_neighbors=1)
    >>> graph.members.tolist()
    [[0, 1], [1, 0], [2, 3], [3, 2]]
    >>> graph.weights.round(3).tolist()
    [1.971, 1.971, 1.971, 1.971]

    A pair of one class is pulled together (``-p_ij``), a pair of two classes
    pushed to opposite values (``+p_ij``):

    >>> graph.signed_laplacian([0, 1, 1, 1]).toarray().round(3)
    array([[ 1.971,  1.971,  0.   ,  0.   ],
           [ 1.971,  1.971,  0.   ,  0.   ],
           [ 0.   ,  0.   ,  1.971, -1.971],
           [ 0.   ,  0.   , -1.971,  1.971]])
    """
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    check_n_neighbors(n_neighbors, n)
    if neighbors is None:
        found, _ = nearest_neighbors(X, X, n_neighbors + 1, method=knn_method,
                                     random_state=random_state)
        neighbors = neighbors_excluding_self(found)
    else:
        neighbors = validate_neighbors(neighbors, n, n_neighbors=n_neighbors)
        if neighbors.shape[0] != n:
            raise DataError(f"neighbors has {neighbors.shape[0]} rows for {n} samples")
    weights = hyperedge_weights(X, X[neighbors], sigma2=total_variance(X), gamma=gamma)
    members = np.column_stack([np.arange(n), neighbors])
    logger.debug("hypergraph: %d hyperedges of %d vertices", n, n_neighbors + 1)
    return Hypergraph(members=members, weights=weights, n_vertices=n)


def check_n_neighbors(n_neighbors, n_samples):
    """Raise ``DataError`` unless ``1 <= n_neighbors < n_samples``."""
    if not 1 <= n_neighbors < n_samples:
        raise DataError(f"n_neighbors={n_neighbors} must be below the number of training samples "
                        f"({n_samples}): each hyperedge is a sample and its n_neighbors nearest "
                        f"other samples")
