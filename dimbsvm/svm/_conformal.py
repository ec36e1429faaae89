"""Numeric kernels of the (adaptive) conformal transformation: arrays in, arrays out.

The conformal transformation (ACT paper, Section 4.2) replaces a kernel ``K``
by ``K~(x, x') = D(x) D(x') K(x, x')`` (eq. 10) with a positive function
``D(x) = sum_k exp(-||x - x_k||^n / tau~_k^2)`` centred on support vectors
``x_k`` (eq. 13, Fig. 6 step 15): feature-space distances from a kernel
(eq. 15), ACT's ``tau_k^2`` (eq. 14) and its class scaling (eqs. 16-17), Wu &
Amari's non-adaptive ``tau_k^2`` (CT_I), ``D`` and ``K~``. No validation, Dask
or I/O: :class:`dimbsvm.svm.act.ACTClassifier` validates and keeps the state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.distance import cdist

from dimbsvm.exceptions import DataError

__all__ = ["CONFORMAL_NORMS", "ConformalTransform", "adaptive_tau2", "check_positive_kernel",
           "conformal_factor", "conformal_kernel", "eta_scaling", "feature_space_sq_distances",
           "input_space_distances", "nearest_neighbour_tau2", "neighbourhood_radius",
           "support_vector_transform"]

#: ``n`` of ``||x - x_k||_n^n`` in ``D(x)``: 1 (L1, the paper's choice) or 2.
CONFORMAL_NORMS = (1, 2)

#: A ``tau^2`` is never smaller than this fraction of the mean positive squared
#: distance among the centres (duplicate rows of opposite classes give 0).
TAU2_FLOOR = 1e-6


def feature_space_sq_distances(K, diag_rows=None, diag_cols=None):
    """Squared feature-space distances ``||phi(x_i) - phi(y_j)||^2`` from a kernel.

    ``||phi(x) - phi(y)||^2 = K(x, x) + K(y, y) - 2 K(x, y)`` (eq. 15); the
    feature map ``phi`` itself is never needed. Rounding can make the
    expansion slightly negative; it is clipped at 0.

    Parameters
    ----------
    K : ndarray of shape (n_rows, n_cols)
        Kernel values ``K(x_i, y_j)``.
    diag_rows : ndarray of shape (n_rows,), default=None
        ``K(x_i, x_i)``; taken from the diagonal of ``K`` when it is square and
        this is None.
    diag_cols : ndarray of shape (n_cols,), default=None
        ``K(y_j, y_j)``; likewise.

    Returns
    -------
    sq_dist : ndarray of shape (n_rows, n_cols)

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 0.0], [3.0, 4.0]])
    >>> feature_space_sq_distances(X @ X.T).tolist()   # linear kernel: phi(x) = x
    [[0.0, 25.0], [25.0, 0.0]]
    """
    K = np.asarray(K, dtype=np.float64)
    if diag_rows is None or diag_cols is None:
        if K.shape[0] != K.shape[1]:
            raise ValueError("a rectangular kernel block needs diag_rows and diag_cols")
        diag = np.diagonal(K)
        diag_rows = diag if diag_rows is None else diag_rows
        diag_cols = diag if diag_cols is None else diag_cols
    sq_dist = np.asarray(diag_rows, dtype=np.float64)[:, None] + np.asarray(diag_cols, dtype=np.float64)[None, :]
    sq_dist -= 2.0 * K  # eq. 15
    return np.maximum(sq_dist, 0.0, out=sq_dist)


def input_space_distances(A, B, norm=1):
    """``||a_i - b_j||_n^n`` between rows: L1 distance (n=1) or squared Euclidean (n=2).

    This is the distance in the exponent of ``D(x)`` (eq. 13 and Fig. 6 step 15
    write it in input space).

    Parameters
    ----------
    A : ndarray of shape (n_a, n_features)
    B : ndarray of shape (n_b, n_features)
    norm : {1, 2}, default=1

    Returns
    -------
    dist : ndarray of shape (n_a, n_b)

    Examples
    --------
    >>> import numpy as np
    >>> input_space_distances(np.array([[0.0, 0.0]]), np.array([[1.0, 2.0]]), norm=1).tolist()
    [[3.0]]
    >>> input_space_distances(np.array([[0.0, 0.0]]), np.array([[1.0, 2.0]]), norm=2).tolist()
    [[5.0]]
    """
    if norm not in CONFORMAL_NORMS:
        raise ValueError(f"norm must be one of {CONFORMAL_NORMS}; got {norm!r}")
    return cdist(A, B, metric="cityblock" if norm == 1 else "sqeuclidean")


def neighbourhood_radius(dist):
    """``M_k``: the mean of the nearest and the farthest other centre's distance.

    Section 4.2.2: "M is the average distance of the nearest and the farthest
    support vector from phi(x_k)". The centre itself is excluded.

    Parameters
    ----------
    dist : ndarray of shape (n_centres, n_centres)
        Distances (not squared) among the centres.

    Returns
    -------
    radius : ndarray of shape (n_centres,)
        0 for a single centre.

    Examples
    --------
    >>> import numpy as np
    >>> neighbourhood_radius(np.array([[0.0, 1.0, 3.0], [1.0, 0.0, 2.0], [3.0, 2.0, 0.0]])).tolist()
    [2.0, 1.5, 2.5]
    """
    dist = np.asarray(dist, dtype=np.float64)
    n = dist.shape[0]
    if n < 2:
        return np.zeros(n)
    others = ~np.eye(n, dtype=bool)
    nearest = np.where(others, dist, np.inf).min(axis=1)
    farthest = np.where(others, dist, -np.inf).max(axis=1)
    return (nearest + farthest) / 2.0


def adaptive_tau2(sq_dist, minority):
    """ACT's ``tau_k^2`` (eq. 14): mean squared distance to opposite-class centres within ``M_k``.

    For each centre ``k``, the neighbourhood is every centre ``i`` with
    ``||phi(x_i) - phi(x_k)|| < M_k`` (:func:`neighbourhood_radius`; the
    paper writes the squared distance against ``M``, but calls ``M`` a radius
    and a distance, so distances are compared with distances), and
    ``tau_k^2`` is the mean of ``||phi(x_i) - phi(x_k)||^2`` over those with
    ``y_i != y_k``.

    Fallback (the paper is silent): a centre with no opposite-class centre
    inside its radius takes the squared distance to its nearest
    opposite-class centre. ``tau_k^2`` is floored at ``TAU2_FLOOR`` times the
    mean positive squared distance, so a duplicate row of the other class
    cannot make it 0.

    Parameters
    ----------
    sq_dist : ndarray of shape (n_centres, n_centres)
        Squared distances among the centres: feature space (eq. 15) for ACT,
        input space for ACT_I.
    minority : ndarray of bool of shape (n_centres,)
        True for minority (positive) centres.

    Returns
    -------
    tau2 : ndarray of shape (n_centres,)
    n_fallback : int
        Centres that used the fallback.

    Raises
    ------
    ValueError
        If a class has no centre (nothing to adapt to).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([0.0, 1.0, 2.0, 10.0])
    >>> sq = (x[:, None] - x[None, :]) ** 2
    >>> tau2, n_fallback = adaptive_tau2(sq, np.array([True, False, False, False]))
    >>> tau2.tolist(), n_fallback
    ([2.5, 1.0, 4.0, 100.0], 1)
    """
    sq_dist = np.asarray(sq_dist, dtype=np.float64)
    minority = np.asarray(minority, dtype=bool)
    if minority.all() or not minority.any():
        raise ValueError(
            "too few support vectors to adapt the kernel: the conformal transformation needs "
            f"support vectors of both classes; got {int(minority.sum())} minority and "
            f"{int((~minority).sum())} majority."
        )
    radius = neighbourhood_radius(np.sqrt(sq_dist))
    opposite = minority[:, None] != minority[None, :]
    inside = opposite & (sq_dist < radius[:, None] ** 2)  # eq. 14, the set averaged over
    n_inside = inside.sum(axis=1)
    tau2 = np.where(inside, sq_dist, 0.0).sum(axis=1) / np.maximum(n_inside, 1)  # eq. 14
    fallback = n_inside == 0
    if fallback.any():
        nearest_opposite = np.where(opposite, sq_dist, np.inf).min(axis=1)
        tau2[fallback] = nearest_opposite[fallback]
    return _floored(tau2, sq_dist), int(fallback.sum())


def nearest_neighbour_tau2(sq_dist, n_neighbors=3):
    """Wu & Amari's ``tau_k^2``: mean squared distance to the ``n_neighbors`` nearest centres.

    The non-adaptive choice of the traditional conformal transformation
    (CT_I, ACT paper Section 4.3): class labels and the imbalance play no part.

    Parameters
    ----------
    sq_dist : ndarray of shape (n_centres, n_centres)
        Squared input-space distances among the centres.
    n_neighbors : int, default=3
        Neighbours averaged over (fewer if there are fewer other centres).

    Returns
    -------
    tau2 : ndarray of shape (n_centres,)

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([0.0, 1.0, 3.0])
    >>> nearest_neighbour_tau2((x[:, None] - x[None, :]) ** 2, n_neighbors=1).tolist()
    [1.0, 1.0, 4.0]
    """
    sq_dist = np.asarray(sq_dist, dtype=np.float64)
    n = sq_dist.shape[0]
    if n < 2:
        raise ValueError("too few support vectors to adapt the kernel: need at least 2 centres.")
    k = min(int(n_neighbors), n - 1)
    others = np.where(np.eye(n, dtype=bool), np.inf, sq_dist)
    nearest = np.partition(others, k - 1, axis=1)[:, :k]
    return _floored(nearest.mean(axis=1), sq_dist)


def eta_scaling(tau2, minority):
    """``tau~_k^2`` for imbalanced classes (eqs. 16-17, Fig. 6 steps 7 and 11-14).

    ``tau~_k^2 = eta_p tau_k^2`` for a minority centre and ``eta_n tau_k^2``
    for a majority centre, with ``eta_p = |SV-| / |SV+|`` and
    ``eta_n = |SV+| / |SV-|`` (``|SV+|``: minority centres). With fewer
    minority centres, ``eta_p > 1`` widens ``D(x)`` around minority support
    vectors (magnifying the area "not very close" to them) and ``eta_n < 1``
    narrows it around majority ones.

    Parameters
    ----------
    tau2 : ndarray of shape (n_centres,)
    minority : ndarray of bool of shape (n_centres,)

    Returns
    -------
    scaled : ndarray of shape (n_centres,)
    eta_p, eta_n : float

    Examples
    --------
    >>> import numpy as np
    >>> scaled, eta_p, eta_n = eta_scaling(np.ones(4), np.array([True, False, False, False]))
    >>> scaled.tolist(), eta_p, eta_n
    ([3.0, 0.3333333333333333, 0.3333333333333333, 0.3333333333333333], 3.0, 0.3333333333333333)
    """
    minority = np.asarray(minority, dtype=bool)
    n_pos = int(minority.sum())
    n_neg = minority.size - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError("eta scaling needs centres of both classes")
    eta_p, eta_n = n_neg / n_pos, n_pos / n_neg  # Fig. 6 step 7
    scaled = np.where(minority, eta_p, eta_n) * np.asarray(tau2, dtype=np.float64)  # eqs. 16-17
    return scaled, float(eta_p), float(eta_n)


def conformal_factor(dist, tau2):
    """``D(x) = sum_k exp(-||x - x_k||_n^n / tau~_k^2)`` (eq. 13).

    Parameters
    ----------
    dist : ndarray of shape (n_samples, n_centres)
        ``||x - x_k||_n^n`` (:func:`input_space_distances`).
    tau2 : ndarray of shape (n_centres,)
        ``tau~_k^2``, positive.

    Returns
    -------
    D : ndarray of shape (n_samples,)
        Positive unless every term underflows (``x`` very far from every centre).

    Examples
    --------
    >>> import numpy as np
    >>> conformal_factor(np.array([[0.0, 2.0]]), np.array([1.0, 2.0])).round(4).tolist()
    [1.3679]
    """
    exponent = np.asarray(dist, dtype=np.float64) / np.asarray(tau2, dtype=np.float64)[None, :]
    return np.exp(-exponent).sum(axis=1)  # eq. 13


def conformal_kernel(K, D_rows, D_cols=None):
    """``K~(x_i, y_j) = D(x_i) D(y_j) K(x_i, y_j)`` (eq. 10).

    Parameters
    ----------
    K : ndarray of shape (n_rows, n_cols)
    D_rows : ndarray of shape (n_rows,)
    D_cols : ndarray of shape (n_cols,), default=None
        ``D_rows`` when None (a square Gram matrix).

    Returns
    -------
    K_tilde : ndarray of shape (n_rows, n_cols)
        A new array. If ``K`` is positive semi-definite and ``D`` real, so is
        ``K~`` (it is ``diag(D) K diag(D)``).

    Examples
    --------
    >>> import numpy as np
    >>> conformal_kernel(np.ones((2, 2)), np.array([1.0, 2.0])).tolist()
    [[1.0, 2.0], [2.0, 4.0]]
    """
    D_rows = np.asarray(D_rows, dtype=np.float64)
    D_cols = D_rows if D_cols is None else np.asarray(D_cols, dtype=np.float64)
    return D_rows[:, None] * np.asarray(K, dtype=np.float64) * D_cols[None, :]  # eq. 10


@dataclass(frozen=True)
class ConformalTransform:
    """One round's conformal function ``s * D(x)``, enough to evaluate it on new rows.

    Attributes
    ----------
    centers : ndarray of shape (n_centres, n_features)
        The support vectors ``x_k`` (input space) the round was built on.
    tau2 : ndarray of shape (n_centres,)
        Their ``tau~_k^2``.
    norm : {1, 2}
        ``n`` of ``||x - x_k||^n``.
    scale : float, default=1.0
        A constant factor (1 for eq. 13 as published).
    center_factor, center_diag : ndarray of shape (n_centres,) or None, default=None
        None: ``||x - x_k||`` is the input-space distance (eq. 13, Fig. 6
        step 15). Otherwise it is the distance in the feature space of the
        kernel ``c(x) c(x') K(x, x')`` the round started from, with ``c`` at
        the centres ``center_factor`` and ``K(x_k, x_k)`` ``center_diag``.

    Examples
    --------
    >>> import numpy as np
    >>> t = ConformalTransform(np.array([[0.0], [2.0]]), np.array([1.0, 2.0]), norm=1)
    >>> t.factor(np.array([[0.0]])).round(4).tolist()
    [1.3679]
    """

    centers: np.ndarray
    tau2: np.ndarray
    norm: int
    scale: float = 1.0
    center_factor: np.ndarray | None = None
    center_diag: np.ndarray | None = None

    def factor(self, X, prev_factor=None, K_xc=None, diag_x=None):
        """``scale * D(x)`` for every row of ``X`` (eq. 13).

        The feature-space form also needs, for the rows of ``X``, the previous
        kernel's factor ``prev_factor``, the base kernel ``K_xc`` to the centres
        and the base ``diag_x = K(x, x)``.
        """
        if self.center_factor is None:
            dist = input_space_distances(X, self.centers, self.norm)
        else:
            c = self.center_factor
            sq = feature_space_sq_distances(prev_factor[:, None] * K_xc * c[None, :],
                                            prev_factor**2 * diag_x, c**2 * self.center_diag)  # eq. 15
            dist = sq if self.norm == 2 else np.sqrt(sq)
        return self.scale * conformal_factor(dist, self.tau2)


def support_vector_transform(X_sv, minority, wrong_side, *, variant="act", K_sv=None, norm=2,
                             n_neighbors=3, mean=False, sv_factor=None, sv_diag=None):
    """One round's conformal function from the support vectors (Fig. 6 steps 6-15).

    Parameters
    ----------
    X_sv : ndarray of shape (n_sv, n_features)
        The support vectors in input space.
    minority : ndarray of bool of shape (n_sv,)
    wrong_side : ndarray of bool of shape (n_sv,)
        Support vectors on the wrong side of the boundary: outliers, left out
        by ACT (footnote 3). A class that would be left with none keeps all of
        its support vectors. CT uses every support vector.
    variant : {"act", "act_input", "ct"}, default="act"
        ``tau^2`` from feature-space distances (ACT_F; eqs. 14-15), from
        squared input-space distances (ACT_I; eq. 14), or Wu & Amari's
        :func:`nearest_neighbour_tau2` (CT_I, no class scaling).
    K_sv : ndarray of shape (n_sv, n_sv), default=None
        The current kernel among the support vectors; needed by ``"act"``.
    norm : {1, 2}, default=2
        ``n`` of ``D(x)``.
    n_neighbors : int, default=3
        Neighbours of ``"ct"``.
    mean : bool, default=False
        Divide ``D`` by the number of centres.
    sv_factor, sv_diag : ndarray of shape (n_sv,), default=None
        Given: ``D`` uses feature-space distances (see
        :class:`ConformalTransform`), the current kernel being
        ``sv_factor sv_factor' K`` with ``K(x_k, x_k) = sv_diag``.

    Returns
    -------
    transform : ConformalTransform
    info : dict
        ``n_outliers``, ``n_tau_fallback``, ``eta_p``, ``eta_n``, ``tau2_min``,
        ``tau2_median``, ``tau2_max``.

    Examples
    --------
    >>> import numpy as np
    >>> X_sv = np.array([[0.0], [1.0], [2.0], [10.0]])
    >>> minority = np.array([True, False, False, False])
    >>> t, info = support_vector_transform(X_sv, minority, np.zeros(4, bool), variant="act_input")
    >>> t.tau2.tolist(), info["eta_p"]
    ([7.5, 0.3333333333333333, 1.3333333333333333, 33.33333333333333], 3.0)
    """
    keep = np.ones(minority.size, dtype=bool) if variant == "ct" else ~wrong_side
    for cls in (True, False):  # a class left with no support vector keeps all of its own
        if not (keep & (minority == cls)).any():
            keep |= minority == cls
    centres, is_min = X_sv[keep], minority[keep]
    info = {"n_outliers": int(np.sum(wrong_side)), "n_tau_fallback": 0, "eta_p": 1.0, "eta_n": 1.0}
    if variant == "act":
        sq = feature_space_sq_distances(K_sv[np.ix_(keep, keep)])  # eq. 15
    else:
        sq = input_space_distances(centres, centres, 2)
    if variant == "ct":
        tau2 = nearest_neighbour_tau2(sq, n_neighbors)
    else:
        tau2, info["n_tau_fallback"] = adaptive_tau2(sq, is_min)  # eq. 14
        tau2, info["eta_p"], info["eta_n"] = eta_scaling(tau2, is_min)  # eqs. 16-17
    info.update(tau2_min=float(tau2.min()), tau2_median=float(np.median(tau2)), tau2_max=float(tau2.max()))
    feature = {} if sv_factor is None else {"center_factor": sv_factor[keep], "center_diag": sv_diag[keep]}
    return ConformalTransform(centres, tau2, norm, 1.0 / centres.size if mean else 1.0, **feature), info


def check_positive_kernel(K, *, max_eigen_rows=1000):
    """Raise unless ``K`` looks like a positive semi-definite Gram matrix.

    Checks finiteness, symmetry, ``K(x, x) >= 0`` and the Cauchy-Schwarz bound
    ``|K(x, y)| <= sqrt(K(x, x) K(y, y))`` (all O(n^2)); up to
    ``max_eigen_rows`` rows also the smallest eigenvalue (O(n^3)).

    Parameters
    ----------
    K : ndarray of shape (n, n)
    max_eigen_rows : int, default=1000

    Raises
    ------
    DataError
        Naming the condition that failed.

    Examples
    --------
    >>> import numpy as np
    >>> check_positive_kernel(np.eye(2))
    >>> check_positive_kernel(np.array([[1.0, 2.0], [2.0, 1.0]]))
    Traceback (most recent call last):
    ...
    dimbsvm.exceptions.DataError: the kernel is not positive semi-definite: |K(x, y)| > sqrt(K(x, x) K(y, y))
    """
    K = np.asarray(K, dtype=np.float64)
    if not np.isfinite(K).all():
        raise DataError("the kernel is not positive: its Gram matrix holds NaN or inf")
    size = max(float(np.abs(K).max(initial=0.0)), 1e-300)
    if not np.allclose(K, K.T, rtol=1e-8, atol=1e-10 * size):
        raise DataError("the kernel is not positive: its Gram matrix is not symmetric")
    diag = np.diagonal(K)
    if (diag < -1e-10 * size).any():
        raise DataError("the kernel is not positive: K(x, x) < 0 for some rows")
    root = np.sqrt(np.maximum(diag, 0.0))
    if (np.abs(K) > np.outer(root, root) * (1 + 1e-8) + 1e-10 * size).any():
        raise DataError("the kernel is not positive semi-definite: |K(x, y)| > sqrt(K(x, x) K(y, y))")
    if K.shape[0] <= max_eigen_rows:
        smallest = float(np.linalg.eigvalsh((K + K.T) / 2)[0])
        if smallest < -1e-8 * size * K.shape[0]:
            raise DataError(f"the kernel is not positive semi-definite: smallest eigenvalue {smallest:.3g}")


def _floored(tau2, sq_dist):
    positive = sq_dist[sq_dist > 0]
    floor = TAU2_FLOOR * (positive.mean() if positive.size else 1.0)
    return np.maximum(tau2, floor)
