"""The kernel-smoothed threshold objective's counts, and the rules that size them, as plain functions on arrays.

A smoothed count replaces each margin's step ``[m + theta > 0]`` by the
normal CDF ``Phi((m + theta) / bandwidth)``: the G-mean of few minority rows
becomes a smooth function of the shift. Counted margin by margin up to
:data:`MAX_EXACT_SMOOTHING` kernel evaluations, above it from margins binned
on a grid of ``bandwidth / 64`` (linear binning; :func:`binned_smoothed_count`).
The grid's per-range sums (:func:`grid_bins`) add up to the same bits as one
binning, which the value-range search over a store relies on
(:mod:`dimbsvm.svm.range_threshold`). Used by :mod:`dimbsvm.svm.threshold`.
No Dask, no I/O.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "BINS_PER_BANDWIDTH", "KERNEL_REACH", "MAX_EXACT_SMOOTHING", "MAX_SMOOTHED_CANDIDATES", "SMOOTHINGS",
    "added_bins", "binned_smoothed_count", "count_from_grid", "grid_bins", "grid_weights", "resolve_bandwidth",
    "smoothed_count", "smoothed_count_evaluations", "smoothing_bandwidth", "thinned_indices",
]

#: Named bandwidth rules of the smoothed objective (a positive float is a bandwidth).
SMOOTHINGS = ("silverman",)

# Smoothed counts are evaluated in blocks of at most this many (candidate, sample) pairs.
_BLOCK = 1 << 21

#: A smoothed objective is evaluated on at most this many candidates (evenly spaced in
#: their sorted order, ``theta = 0`` always kept); the others score ``-inf``. It bounds
#: the ``O(n c)`` cost of smoothing: the smoothed objective varies on the scale of the
#: bandwidth, far coarser than the gaps between thousands of candidates.
MAX_SMOOTHED_CANDIDATES = 8192

#: Above this many kernel evaluations (margins x scored candidates) the smoothed counts are
#: computed from the margins binned on a grid of 1/64 bandwidth (:func:`binned_smoothed_count`)
#: instead of margin by margin, whose cost grows with margins x candidates (minutes at a few
#: hundred thousand margins, ``benchmarks/RESULTS.md``). Below it (every KEEL set: at most
#: 5,472 x 4,913) nothing changes; above it the binned count is within 7.4e-6 per margin.
MAX_EXACT_SMOOTHING = 1 << 25

#: Bins per bandwidth of the binned smoothed counts.
BINS_PER_BANDWIDTH = 64
#: Beyond this many bandwidths from the shift a margin counts 0 or 1 (Phi(-9) = 1e-19).
KERNEL_REACH = 9.0


def smoothing_bandwidth(margins_positive, margins=None):
    """Silverman's rule-of-thumb bandwidth of the positive (minority) margins.

    ``0.9 * min(sd, IQR / 1.34) * n ** (-1/5)`` over the positive margins: the
    kernel width at which their distribution is estimated with the least
    error for a near-normal shape. The minority class sets it because the
    counts of its few rows are what make the training objective a coarse,
    noisy staircase; the majority's many rows are smoothed with the same
    width, which changes their counts little.

    Parameters
    ----------
    margins_positive : array-like of shape (n_positive,)
    margins : array-like, default=None
        All margins, used instead when the positive ones have no spread
        (e.g. a single positive row).

    Returns
    -------
    bandwidth : float
        ``0.0`` when neither has any spread (no smoothing possible).

    Examples
    --------
    >>> round(smoothing_bandwidth([-1.0, -0.5, 0.0, 0.5, 1.0]), 4)
    0.4868
    """
    for values in (margins_positive, margins):
        if values is None:
            continue
        values = np.asarray(values, dtype=np.float64)
        if values.size < 2:
            continue
        sd = float(np.std(values, ddof=1))
        q75, q25 = np.percentile(values, [75, 25])
        spread = min(sd, (q75 - q25) / 1.34) if q75 > q25 else sd
        if spread > 0:
            return float(0.9 * spread * values.size ** -0.2)
    return 0.0



def smoothed_count_evaluations(n_margins: int, n_candidates: int | None = None) -> int:
    """Kernel evaluations of one smoothed count over ``n_margins`` margins: what a smoothed search's time grows with.

    ``n_candidates``: the candidates before the cap of
    :data:`MAX_SMOOTHED_CANDIDATES` (default one per margin).

    Examples
    --------
    >>> smoothed_count_evaluations(1000), smoothed_count_evaluations(10**6)
    (1000000, 9437184)
    """
    scored = min(n_margins if n_candidates is None else n_candidates, MAX_SMOOTHED_CANDIDATES)
    if n_margins * scored > MAX_EXACT_SMOOTHING:
        return scored * int(2 * KERNEL_REACH * BINS_PER_BANDWIDTH)
    return n_margins * scored

def smoothed_count(sorted_margins, theta, bandwidth, weights=None):
    """``sum_i w_i Phi((m_i + theta) / bandwidth)`` per theta: a smoothed count of ``m + theta > 0``.

    Margin by margin up to :data:`MAX_EXACT_SMOOTHING` kernel evaluations;
    above, from binned margins (:func:`binned_smoothed_count`).
    """
    from scipy.special import ndtr

    if sorted_margins.size * theta.size > MAX_EXACT_SMOOTHING:
        return binned_smoothed_count(sorted_margins, theta, bandwidth, weights)
    weights = np.ones(sorted_margins.size) if weights is None else weights
    total = np.empty(theta.size)
    step = max(1, _BLOCK // max(1, sorted_margins.size))
    for start in range(0, theta.size, step):
        block = theta[start : start + step]
        total[start : start + step] = ndtr(
            (sorted_margins[None, :] + block[:, None]) / bandwidth
        ) @ weights
    return total


def binned_smoothed_count(sorted_margins, theta, bandwidth, sample_weight=None):
    """:func:`smoothed_count` from margins binned on a grid of ``bandwidth / 64``.

    Each margin is split between its two neighbouring grid points in
    proportion to its distance from them (linear binning), so the count is
    exact for a kernel linear across a bin; Phi's curvature leaves at most
    ``Phi'' * delta^2 / 8 <= 7.4e-6`` per margin (``delta = bandwidth / 64``),
    and far less where margins are not at the steepest bend. Grid points more
    than 9 bandwidths below ``-theta`` count 0 and above it count 1 (a suffix
    sum), so the work per candidate is ~1,150 kernel evaluations, whatever the
    number of margins.
    """
    delta = bandwidth / BINS_PER_BANDWIDTH
    low = sorted_margins[0]
    n_grid = int(np.floor((sorted_margins[-1:] - low) / delta).astype(np.int64)[0]) + 2
    weights = grid_weights(sorted_margins, low, delta, n_grid, sample_weight)
    return count_from_grid(weights, low, delta, theta, bandwidth)


def grid_bins(sorted_margins, low, delta, sample_weight=None):
    """The linear binning's two sums per grid point: ``(left, at_left, at_right)``.

    ``at_left[k - left[0]]`` sums ``mass * (1 - frac)`` of the margins whose left grid
    point is ``k``, ``at_right[k - left[0]]`` sums ``mass * frac`` of the same margins
    (the weight of point ``k + 1``), each in the margins' order. Margins cut into value ranges
    whose bounds are grid points give every point's sums from one range, in the same
    order: the same bits as binning them all at once (:mod:`dimbsvm.svm.range_threshold`).
    """
    position = (sorted_margins - low) / delta
    left = np.floor(position).astype(np.int64)
    frac = position - left
    mass = np.ones(sorted_margins.size) if sample_weight is None else sample_weight
    first = int(left[0]) if left.size else 0
    return (first, np.bincount(left - first, weights=mass * (1.0 - frac)),
            np.bincount(left - first, weights=mass * frac))


def grid_weights(sorted_margins, low, delta, n_grid, sample_weight=None):
    """Every grid point's weight: its two binning sums (:func:`grid_bins`), added."""
    first, at_left, at_right = grid_bins(sorted_margins, low, delta, sample_weight)
    return added_bins([(first, at_left, at_right)], n_grid)


def added_bins(bins, n_grid):
    """The grid weights from :func:`grid_bins` of disjoint runs of grid points (a point's sums from one run)."""
    at_left, at_right = np.zeros(n_grid), np.zeros(n_grid)
    for first, left_sums, right_sums in bins:
        at_left[first:first + left_sums.size] = left_sums
        at_right[first + 1:first + 1 + right_sums.size] = right_sums
    return at_left + at_right


def count_from_grid(weights, low, delta, theta, bandwidth):
    """The binned smoothed counts per theta from the grid weights (``low + k * delta``)."""
    from scipy.special import ndtr

    n_grid = weights.size
    grid = low + delta * np.arange(n_grid)
    at_or_above = np.append(np.cumsum(weights[::-1])[::-1], 0.0)  # at_or_above[k] = sum of weights[k:]
    reach = KERNEL_REACH * bandwidth
    first = np.clip(np.ceil((-theta - reach - low) / delta), 0, n_grid).astype(np.int64)
    stop = np.clip(np.floor((-theta + reach - low) / delta) + 1, 0, n_grid).astype(np.int64)
    total = at_or_above[stop].copy()  # grid points past the kernel's reach: Phi = 1
    for i, (a, b) in enumerate(zip(first, stop)):
        if b > a:
            total[i] += weights[a:b] @ ndtr((grid[a:b] + theta[i]) / bandwidth)
    return total


def thinned_indices(theta, limit):
    """Indices of at most ``limit`` candidates, evenly spaced in sorted order, 0 kept."""
    if theta.size <= limit:
        return np.arange(theta.size)
    order = np.argsort(theta, kind="stable")
    keep = order[np.unique(np.linspace(0, theta.size - 1, limit - 1).round().astype(np.int64))]
    return np.union1d(keep, np.flatnonzero(theta == 0.0))


def resolve_bandwidth(smoothing, pos_sorted, margins):
    if smoothing is None:
        return 0.0
    if isinstance(smoothing, str):
        if smoothing not in SMOOTHINGS:
            raise ValueError(
                f"smoothing must be one of {SMOOTHINGS}, a positive float or None; "
                f"got {smoothing!r}."
            )
        return smoothing_bandwidth(pos_sorted, margins)
    if not smoothing > 0:
        raise ValueError(f"a smoothing bandwidth must be positive; got {smoothing!r}.")
    return float(smoothing)
