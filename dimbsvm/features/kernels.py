"""Kernel blocks K(X, S) and the Nystroem map: plain functions, arrays in, arrays out.

A kernel method on n rows needs the n x n Gram matrix; against a set of |S|
landmarks it needs only the n x |S| block K(X, S). The Nystroem features
``K(X, S) K(S, S)^{-1/2}`` have inner products that approximate the full
kernel, so a linear SVM on them stands in for a kernel SVM at any n. The
chunked writers in :mod:`dimbsvm.features.kernel_blocks` call these on one
chunk at a time.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy.spatial.distance import cdist

from ..exceptions import DataError

__all__ = ["KERNELS", "kernel_block", "nystroem_normalization", "resolve_gamma"]

#: Kernels understood by :func:`kernel_block`.
KERNELS = ("rbf", "linear", "laplacian")


def resolve_gamma(gamma, n_features):
    """``gamma``, or scikit-learn's default ``1 / n_features`` when it is ``None``."""
    if gamma is None:
        return 1.0 / n_features
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not gamma > 0:
        raise DataError(f"gamma must be a positive number or None, got {gamma!r}")
    return float(gamma)


def kernel_block(X, S, kernel="rbf", *, gamma=None):
    """The kernel between every row of ``X`` and every landmark in ``S``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    S : ndarray of shape (n_landmarks, n_features)
    kernel : {"rbf", "linear", "laplacian"}, default="rbf"
        ``rbf``: ``exp(-gamma |x - s|^2)``; ``laplacian``:
        ``exp(-gamma |x - s|_1)``; ``linear``: ``x . s``.
    gamma : float, default=None
        Width for ``rbf`` and ``laplacian``; ``None`` means
        ``1 / n_features`` (scikit-learn's default). Ignored by ``linear``.

    Returns
    -------
    K : ndarray of shape (n_samples, n_landmarks), float64

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 0.0], [1.0, 1.0]])
    >>> kernel_block(X, X[:1], "rbf", gamma=0.5).round(4).tolist()
    [[1.0], [0.3679]]
    >>> kernel_block(X, X, "linear").tolist()
    [[0.0, 0.0], [0.0, 2.0]]
    """
    if kernel not in KERNELS:
        raise DataError(f"unknown kernel {kernel!r}; choose one of {', '.join(KERNELS)}")
    X = np.asarray(X, dtype=np.float64)
    S = np.asarray(S, dtype=np.float64)
    if X.ndim != 2 or S.ndim != 2 or X.shape[1] != S.shape[1]:
        raise DataError(f"kernel blocks need 2-D rows with the same number of features; got X with "
                        f"shape {X.shape} and landmarks with shape {S.shape}")
    if not (np.isfinite(X).all() and np.isfinite(S).all()):
        raise DataError("kernel blocks need finite values; the rows hold NaN or inf")
    if kernel == "linear":
        return X @ S.T
    gamma = resolve_gamma(gamma, X.shape[1])
    # Squared distances by direct differences (cdist), not the |x|^2 - 2x.s + |s|^2 expansion:
    # the kernel near its peak is what the expansion gets least right.
    metric = "sqeuclidean" if kernel == "rbf" else "cityblock"
    K = cdist(X, S, metric=metric)
    K *= -gamma
    return np.exp(K, out=K)


def nystroem_normalization(K_SS, *, clip=1e-12):
    """``K(S, S)^{-1/2}``, the matrix that turns kernel blocks into Nystroem features.

    Nystroem features of rows X are ``K(X, S) @ N`` with ``N`` returned here,
    so that their inner products are ``K(X, S) K(S, S)^{-1} K(S, X)``.

    Parameters
    ----------
    K_SS : ndarray of shape (n_landmarks, n_landmarks)
        Kernel among the landmarks (symmetric positive semi-definite).
    clip : float, default=1e-12
        Eigenvalues below this are raised to it before the inverse square
        root, as scikit-learn's ``Nystroem`` does with singular values, so
        duplicate or nearly dependent landmarks do not blow up.

    Returns
    -------
    N : ndarray of shape (n_landmarks, n_landmarks), symmetric

    Examples
    --------
    >>> import numpy as np
    >>> N = nystroem_normalization(np.array([[4.0, 0.0], [0.0, 1.0]]))
    >>> N.tolist()
    [[0.5, 0.0], [0.0, 1.0]]
    """
    K_SS = np.asarray(K_SS, dtype=np.float64)
    if K_SS.ndim != 2 or K_SS.shape[0] != K_SS.shape[1]:
        raise DataError(f"K(S, S) must be square, got shape {K_SS.shape}")
    # eigh on the symmetrised matrix: K_SS is symmetric in exact arithmetic, not in floating point.
    eigenvalues, vectors = np.linalg.eigh((K_SS + K_SS.T) / 2)
    eigenvalues = np.maximum(eigenvalues, clip)
    return (vectors / np.sqrt(eigenvalues)) @ vectors.T
