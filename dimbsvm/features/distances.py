"""Distances from rows to a reference set: plain functions, arrays in, arrays out.

These are the numeric kernels behind :class:`~dimbsvm.features.SimilarityFeatures`
and the chunked writers in :mod:`dimbsvm.features.distance_blocks`. They hold no
state, start no Dask work and read no files; they check only what a wrong
answer would otherwise hide (negative "probabilities", NaN padding where a
distance needs equal lengths).

Choices made here, and why:

- euclidean, manhattan, cosine, hamming and Jensen-Shannon use
  :func:`scipy.spatial.distance.cdist`. It computes each difference directly,
  so the distance of a row to itself is exactly 0 and near pairs keep full
  precision; scikit-learn's fast euclidean expands ``|x|^2 - 2 x.s + |s|^2``
  and loses digits when points are far from the origin but close to each other
  (10x the error on a 32-dimensional pair at norm 1000). ``cdist`` is also
  fast for the widths used here and releases the GIL, so threaded Dask workers
  run it in parallel.
- Dynamic time warping comes from ``dtaidistance`` (compiled C with OpenMP).
  Its DTW is ``sqrt`` of the smallest sum of squared point differences along a
  warping path; for multivariate series it is *dependent* DTW (one warping
  path for all channels, squared euclidean between the channel vectors at each
  step). Its C loop holds the GIL, so parallelism comes from its own OpenMP
  threads (``parallel=True``) rather than from Python threads.
"""

from __future__ import annotations

import logging

import numpy as np
from scipy.spatial.distance import cdist

from ..exceptions import DataError

__all__ = ["DISTANCE_METRICS", "pairwise_distances_to", "series_lengths"]

logger = logging.getLogger(__name__)

#: Distances understood by :func:`pairwise_distances_to`.
DISTANCE_METRICS = ("euclidean", "manhattan", "cosine", "jensenshannon", "hamming", "dtw")

# scipy's names for the metrics that map one to one onto cdist.
_CDIST_NAMES = {"euclidean": "euclidean", "manhattan": "cityblock", "cosine": "cosine",
                "hamming": "hamming"}


def pairwise_distances_to(X, S, metric="euclidean", *, window=None, base=None, parallel=True):
    """Distance of every row of ``X`` to every reference row of ``S``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), (n_samples, length) or (n_samples, n_channels, length)
        Rows to measure. Tabular metrics take 2-D rows. ``"dtw"`` takes
        univariate series as 2-D ``(n, length)`` or multivariate series as 3-D
        ``(n, channels, length)``; series may be right-padded with NaN (as
        :func:`dimbsvm.datasets.load_ts` pads unequal lengths) and are then
        compared at their own lengths.
    S : ndarray
        Reference rows, shaped like ``X`` apart from the first axis.
    metric : {"euclidean", "manhattan", "cosine", "jensenshannon", "hamming", "dtw"}, default="euclidean"
        ``"cosine"`` is ``1 - x.s / (|x| |s|)`` and needs non-zero rows.
        ``"jensenshannon"`` is the square root of the Jensen-Shannon divergence
        (as :func:`scipy.spatial.distance.jensenshannon`) between the rows
        normalised to sum 1; rows must be non-negative and not all zero.
        ``"hamming"`` is the fraction of positions that differ (meant for
        one-hot encoded nominal columns). ``"dtw"`` is dynamic time warping
        (dependent DTW for several channels), see the module notes.
    window : int, default=None
        DTW only: Sakoe-Chiba band, the largest shift allowed between matched
        points; ``None`` allows any warping.
    base : float, default=None
        Jensen-Shannon only: logarithm base, ``None`` for the natural
        logarithm (scipy's default); base 2 bounds the distance by 1.
    parallel : bool, default=True
        DTW only: use dtaidistance's OpenMP threads.

    Returns
    -------
    D : ndarray of shape (n_samples, n_references), float64

    Raises
    ------
    DataError
        NaN or inf where the metric needs finite values (NaN-padded series
        with a metric that needs equal lengths), negative values or all-zero
        rows for Jensen-Shannon, all-zero rows for cosine, NaN inside a series
        (not only at its end), shapes of ``X`` and ``S`` that disagree.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 0.0], [3.0, 4.0]])
    >>> pairwise_distances_to(X, X[:1], "euclidean").tolist()
    [[0.0], [5.0]]
    >>> pairwise_distances_to(X, X[:1], "manhattan").tolist()
    [[0.0], [7.0]]
    >>> a = np.array([[0.0, 1.0, 2.0]])
    >>> b = np.array([[0.0, 1.0, 1.0, 2.0]])  # the same shape, held one step longer
    >>> float(pairwise_distances_to(a, b, "dtw")[0, 0])
    0.0
    """
    if metric not in DISTANCE_METRICS:
        raise DataError(f"unknown distance {metric!r}; choose one of {', '.join(DISTANCE_METRICS)}")
    X = np.asarray(X, dtype=np.float64)
    S = np.asarray(S, dtype=np.float64)
    if metric == "dtw":
        return _dtw(X, S, window=window, parallel=parallel)
    _check_tabular(X, S, metric)
    if metric == "jensenshannon":
        return _jensenshannon(X, S, base)
    if metric == "cosine":
        for name, rows in (("X", X), ("S", S)):
            zero = np.flatnonzero(~rows.any(axis=1))
            if zero.size:
                raise DataError(f"cosine distance is undefined for an all-zero row; row {zero[0]} "
                                f"of {name} is all zeros ({zero.size} such rows)")
    return cdist(X, S, metric=_CDIST_NAMES[metric])


def series_lengths(X):
    """Length of each series once its right NaN padding is removed.

    Parameters
    ----------
    X : ndarray of shape (n_samples, length) or (n_samples, n_channels, length)

    Returns
    -------
    lengths : ndarray of shape (n_samples,), int

    Raises
    ------
    DataError
        If a series has NaN before its last value (a missing value inside
        the series, which DTW cannot skip), is all NaN, or if the channels of
        one multivariate series have different lengths (dependent DTW warps
        all channels along one path).

    Examples
    --------
    >>> import numpy as np
    >>> series_lengths(np.array([[1.0, 2.0, np.nan], [1.0, 2.0, 3.0]])).tolist()
    [2, 3]
    """
    X = np.asarray(X, dtype=np.float64)
    cube = X[:, None, :] if X.ndim == 2 else X
    present = ~np.isnan(cube)
    # Length = one past the last present value; anything missing before it is a gap.
    last = cube.shape[2] - np.argmax(present[:, :, ::-1], axis=2)
    last[~present.any(axis=2)] = 0
    gaps = present.sum(axis=2) != last
    if gaps.any():
        row, channel = np.argwhere(gaps)[0]
        raise DataError(f"series {row} (channel {channel}) has a missing value before its end; "
                        "DTW handles NaN only as right padding of shorter series")
    empty = np.flatnonzero((last == 0).any(axis=1))
    if empty.size:
        raise DataError(f"series {empty[0]} is empty (all values NaN)")
    ragged = np.flatnonzero((last != last[:, :1]).any(axis=1))
    if ragged.size:
        row = ragged[0]
        raise DataError(f"series {row} has channels of different lengths {sorted(set(last[row].tolist()))}; "
                        "dependent multivariate DTW needs one length per series")
    return last[:, 0].astype(np.int64)


def _check_tabular(X, S, metric):
    if X.ndim != 2 or S.ndim != 2:
        raise DataError(f"distance {metric!r} takes 2-D rows (n, n_features); got X with shape "
                        f"{X.shape} and S with shape {S.shape} (for series, use 'dtw' or one channel)")
    if X.shape[1] != S.shape[1]:
        raise DataError(f"X has {X.shape[1]} features but the references have {S.shape[1]}")
    for name, rows in (("X", X), ("S", S)):
        if not np.isfinite(rows).all():
            bad = np.argwhere(~np.isfinite(rows))[0]
            kind = "NaN" if np.isnan(rows[tuple(bad)]) else "inf"
            raise DataError(
                f"distance {metric!r} needs finite values of equal length, but row {bad[0]} of {name} "
                f"holds {kind} at position {bad[1]}; NaN-padded series of unequal length work only "
                "with 'dtw' (or trim/resample them to one length first)")


def _jensenshannon(X, S, base):
    rows = []
    for name, P in (("X", X), ("S", S)):
        negative = np.argwhere(P < 0)
        if negative.size:
            r, c = negative[0]
            raise DataError(f"Jensen-Shannon distance needs non-negative rows; row {r} of {name} "
                            f"has {P[r, c]!r} in column {c}")
        totals = P.sum(axis=1)
        zero = np.flatnonzero(totals == 0)
        if zero.size:
            raise DataError(f"Jensen-Shannon distance needs rows with a positive sum (they are "
                            f"normalised to sum 1); row {zero[0]} of {name} is all zeros")
        rows.append(P / totals[:, None])
    D = cdist(rows[0], rows[1], metric="jensenshannon")
    if base is not None:
        # scipy's cdist has no base argument: divergence scales by 1/ln(base), the distance by its root.
        D /= np.sqrt(np.log(base))
    return D


def _dtw(X, S, *, window, parallel):
    from dtaidistance import dtw, dtw_ndim

    if X.ndim not in (2, 3) or S.ndim != X.ndim:
        raise DataError(f"'dtw' takes series as (n, length) or (n, channels, length) arrays of the same "
                        f"number of dimensions; got X with shape {X.shape} and S with shape {S.shape}")
    if X.ndim == 3 and X.shape[1] != S.shape[1]:
        raise DataError(f"X has {X.shape[1]} channels but the references have {S.shape[1]}")
    if np.isinf(X).any() or np.isinf(S).any():
        raise DataError("'dtw' needs finite values; the series hold inf")
    n, m = X.shape[0], S.shape[0]
    if n == 0 or m == 0:
        return np.zeros((n, m))
    lengths = np.concatenate([series_lengths(X), series_lengths(S)])
    if X.ndim == 3:  # dtaidistance wants each series as (length, channels)
        X, S = X.transpose(0, 2, 1), S.transpose(0, 2, 1)
    if X.shape[1] == S.shape[1] and (lengths == X.shape[1]).all():
        series = np.ascontiguousarray(np.concatenate([X, S]))  # dtaidistance's fastest input
    else:
        series = [np.ascontiguousarray(row[:length])
                  for row, length in zip([*X, *S], lengths.tolist())]
    # Only the X-by-S block of the (n + m) x (n + m) matrix, returned flat (row-major).
    options = dict(block=((0, n), (n, n + m)), compact=True, parallel=parallel, window=window)
    if X.ndim == 3:
        flat = dtw_ndim.distance_matrix_fast(series, ndim=X.shape[2], **options)
    else:
        flat = dtw.distance_matrix_fast(series, **options)
    return np.asarray(flat, dtype=np.float64).reshape(n, m)
