"""Mean and spread of distances to each reference, and the normalisation of eq. (10).

The Fisher vector of the similarity kernel (paper eq. (10)) divides the
centred distance ``mu_i - dist(x, s_i)`` by ``sigma_i``, the square root of
the mean squared deviation (a population standard deviation, ``ddof=0``).
Both come from the training rows. Chunked data gives per-chunk partial
moments ``(count, mean, M2)``, merged with the pairwise update of Chan, Golub
and LeVeque: unlike a running sum and sum of squares it does not cancel
catastrophically when the mean is large against the spread.
"""

from __future__ import annotations

import numpy as np

from ..exceptions import DataError

__all__ = ["block_moments", "combine_moments", "merge_moments", "mean_and_spread", "fisher_vectors",
           "check_spread"]

# A spread this small against the mean is a constant up to rounding.
_RELATIVE_ZERO = 1e-12


def block_moments(D, mask=None, *, overwrite=False):
    """Partial moments of each column of one block: rows ``[count, mean, M2]``.

    Two passes over the block (mean, then squared deviations), so a block is
    exact to rounding whatever its offset.

    Parameters
    ----------
    D : ndarray of shape (n_rows, n_columns)
    mask : ndarray of bool, shape (n_rows,) or (n_rows, 1), default=None
        Rows to include.
    overwrite : bool, default=False
        Centre ``D`` in place (saves a block-sized temporary when the caller
        has no further use for it).

    Returns
    -------
    ndarray of shape (3, n_columns), float64
    """
    D = np.asarray(D, dtype=np.float64)
    if mask is not None:
        D = D[np.asarray(mask, dtype=bool).ravel()]
        overwrite = True  # the fancy index made a copy
    out = np.zeros((3, D.shape[1]))
    if D.shape[0]:
        mean = D.mean(axis=0)
        centred = np.subtract(D, mean, out=D if overwrite else None)
        out[0] = D.shape[0]
        out[1] = mean
        out[2] = np.einsum("ij,ij->j", centred, centred)  # no squared temporary
    return out


def combine_moments(a, b):
    """Merge two ``[count, mean, M2]`` partial moments (Chan et al.'s pairwise update).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[1.0], [2.0], [4.0], [8.0]])
    >>> merged = combine_moments(block_moments(x[:1]), block_moments(x[1:]))
    >>> bool(np.allclose(merged, block_moments(x)))
    True
    """
    n_a, n_b = a[0], b[0]
    n = n_a + n_b
    with np.errstate(invalid="ignore", divide="ignore"):  # empty parts give 0/0, replaced below
        delta = b[1] - a[1]
        mean = np.where(n > 0, a[1] + delta * (n_b / n), 0.0)
        m2 = np.where(n > 0, a[2] + b[2] + delta**2 * (n_a * n_b / n), 0.0)
    return np.stack([n, mean, m2])


def merge_moments(parts):
    """Merge a sequence of partial moments as a balanced binary tree.

    The tree keeps rounding growth logarithmic in the number of chunks and
    the order fixed, so the result does not depend on which worker finished
    first.
    """
    parts = list(parts)
    if not parts:
        raise DataError("no rows to estimate the distance moments from")
    while len(parts) > 1:
        parts = [combine_moments(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    return parts[0]


def mean_and_spread(moments):
    """``(mu, sigma)`` from merged moments: mean and population standard deviation."""
    count, mean, m2 = moments
    if not np.all(count > 0):
        raise DataError("no rows to estimate the distance moments from")
    return mean.copy(), np.sqrt(np.maximum(m2, 0.0) / count)


def check_spread(mu, sigma, modalities, reference_rows=None):
    """Raise if any reference has no spread of distances (eq. (10) would divide by 0).

    Parameters
    ----------
    mu, sigma : ndarray of shape (n_modalities, n_references)
    modalities : list of dict
        Parsed modalities (for the message).
    reference_rows : ndarray of int, default=None
        Training row of each reference, when they are training rows.

    Raises
    ------
    DataError
        Naming the first reference and modality with ``sigma = 0``.
    """
    flat = sigma <= _RELATIVE_ZERO * np.abs(mu)
    if not flat.any():
        return
    k, i = np.argwhere(flat)[0]
    where = f" (training row {int(reference_rows[i])})" if reference_rows is not None else ""
    modality = modalities[k]
    raise DataError(
        f"reference {i}{where} has sigma = 0 for modality {k} ({modality['name']!r}, "
        f"metric {modality['metric']!r}): every training row lies at the same distance "
        f"{mu[k, i]:.6g} from it, so eq. (10) would divide by zero ({int(flat.sum())} such "
        "reference/modality pairs). Drop constant columns, give that modality more varied "
        "columns, or choose other references.")


def fisher_vectors(D, mu, sigma):
    """Normalised Fisher scores of eq. (10): ``(mu_i - dist(x, s_i)) / sigma_i``.

    Parameters
    ----------
    D : ndarray of shape (n_samples, n_modalities * n_references)
        Distance blocks side by side (modality-major).
    mu, sigma : ndarray of shape (n_modalities, n_references)

    Returns
    -------
    ndarray of shape (n_samples, n_modalities * n_references)
    """
    return (np.ravel(mu) - D) / np.ravel(sigma)  # eq. (10), eq. (8) in the numerator
