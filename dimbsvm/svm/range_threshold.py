"""The shared threshold search of pooled margins held as sorted runs, cut into value ranges: exact, no sort of all.

The ensemble's pooled out-of-bag margins arrive as one sorted run per stored
chunk. :func:`~dimbsvm.svm.threshold.othr_threshold` (``candidates="midpoints"``)
on all of them needs, besides a few numbers, only

* the positive margins in stable order (1 % of the rows: gathered whole; the
  bandwidth comes from them);
* the distinct margins with their first rows, at the ranks the thinning keeps;
* per kept candidate, how many negative margins lie at or below its cut;
* the negative margins' binned weights on the smoothing grid.

The margins are therefore cut into value ranges (:func:`plan_ranges`); one
call of :func:`range_block` per range merges that range's slice of every run
(the slices of a value range, merged stably, are exactly that range's part of
the global stable order), :func:`range_summary` reduces it to integers and grid
sums, :func:`pick_ranks` reads off the ranks the thinning keeps, and
:func:`searched_shift` scores them. Why the result is the serial search's, bit
for bit:

* ranges end on grid points when smoothing: a grid point's two binning sums
  come from margins of one range, in the same order (``grid_bins``);
* counts, distinct values and ranks are integers and order statistics,
  combined exactly;
* midpoints of consecutive distinct margins increase with the cut, so the
  stable order of the candidates is known from how many are negative, and the
  thinning's ranks map to distinct-value ranks without sorting candidates;
* the scoring is the serial code (:func:`~dimbsvm.svm.threshold.chosen_threshold`,
  ``smoothed_count``, ``count_from_grid``).

Inputs the argument does not cover (a NaN or infinite margin, a class absent,
positive margins without spread, too few negatives for the binned counts)
are returned whole by the ranges (``gather``), so that the caller runs the
serial search on exactly the arrays it would have had. No Dask and no I/O
here: :mod:`dimbsvm.svm.threshold_tasks` wires the tasks.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from dimbsvm.parallel.sized import SizedResult
from dimbsvm.svm import smoothing as _smoothing
from dimbsvm.svm import threshold as _threshold
from dimbsvm.svm.objectives import check_objective

__all__ = ["RangeBlock", "RangePlan", "RangeSummary", "RunDigest", "SortedRun", "pick_ranks", "plan_ranges",
           "range_block", "range_summary", "run_digest", "searched_shift", "sorted_run", "whole_margins"]

#: Evenly spaced values of each run that :func:`plan_ranges` places the range bounds among.
_SAMPLES_PER_RUN = 64


@dataclass(frozen=True)
class SortedRun(SizedResult):
    """One chunk's scored rows in stable margin order.

    Attributes
    ----------
    values : ndarray of float64
        Margins, sorted (NaN last).
    rows : ndarray of int64
        Their training rows (positions in the fold's training rows).
    positive : ndarray of bool
        Whether each is of the positive (minority) class.
    """

    values: np.ndarray
    rows: np.ndarray
    positive: np.ndarray


def sorted_run(first, margins, counts, order, positive) -> SortedRun:
    """The scored rows of one chunk as a :class:`SortedRun`.

    Parameters
    ----------
    first : int
        Training row of the chunk's first row.
    margins, counts : ndarray
        Pooled margins and out-of-bag counts of the chunk's rows (rows with
        count 0 are not searched).
    order : ndarray of int
        ``np.argsort(margins, kind="stable")``.
    positive : ndarray of bool
        The chunk's rows' classes.

    Returns
    -------
    SortedRun
    """
    order = np.asarray(order)
    kept = order[np.asarray(counts)[order] > 0]
    return SortedRun(np.asarray(margins, dtype=np.float64)[kept], first + kept.astype(np.int64),
                     np.asarray(positive, dtype=bool)[kept])


@dataclass(frozen=True)
class RunDigest:
    """What :func:`plan_ranges` needs of one run: its positive margins and a few numbers."""

    finite: bool
    positive_values: np.ndarray
    n_negative: int
    negative_low: float
    negative_high: float
    samples: np.ndarray


def run_digest(run: SortedRun) -> RunDigest:
    """The :class:`RunDigest` of one sorted run (its positive margins stay in stable order)."""
    values, positive = run.values, run.positive
    negative = values[~positive]
    step = max(1, values.size // _SAMPLES_PER_RUN)
    return RunDigest(
        finite=bool(np.isfinite(values).all()),
        positive_values=values[positive],
        n_negative=int(negative.size),
        # the first negative in stable order: the serial grid starts at its value (sign of zero included)
        negative_low=float(negative[0]) if negative.size else np.nan,
        negative_high=float(negative[-1]) if negative.size else np.nan,
        samples=values[::step].copy(),
    )


@dataclass(frozen=True)
class RangePlan:
    """Where the value ranges are cut, and what every range task shares.

    Attributes
    ----------
    gather : bool
        The input is one the ranges do not cover (see the module): each range
        returns its margins whole, and the serial search runs on them.
    cuts : ndarray of float64
        Increasing bounds: range ``r`` holds the margins ``m`` with
        ``cuts[r - 1] <= m < cuts[r]`` (unbounded at both ends).
    positive_values : ndarray of float64
        Every positive margin, in stable order.
    n_positive, n_negative : int
    bandwidth : float
        The smoothing bandwidth (0: exact counts).
    low, delta : float
        The negative margins' grid ``low + k * delta`` (smoothing only).
    n_grid : int
    """

    gather: bool
    cuts: np.ndarray
    positive_values: np.ndarray
    n_positive: int
    n_negative: int
    bandwidth: float = 0.0
    low: float = 0.0
    delta: float = 0.0
    n_grid: int = 0

    @property
    def n_ranges(self) -> int:
        return self.cuts.size + 1


def plan_ranges(digests, *, smoothing, n_ranges) -> RangePlan:
    """Cut the margins of the runs into at most ``n_ranges`` value ranges.

    Parameters
    ----------
    digests : list of RunDigest
        In row order of the runs.
    smoothing : {"silverman"}, float or None
        As :func:`~dimbsvm.svm.threshold.best_threshold` takes it.
    n_ranges : int

    Returns
    -------
    RangePlan
        With smoothing, the bounds are the first margins of grid points, so
        no grid point's margins are split; the ranges hold about equal
        numbers of margins (bounds among evenly spaced samples of the runs).
    """
    # the positives in stable order: a stable sort of runs in row order keeps equal margins in row order
    positive_values = np.sort(np.concatenate([d.positive_values for d in digests] or [np.empty(0)]), kind="stable")
    n_positive = int(positive_values.size)
    n_negative = int(sum(d.n_negative for d in digests))
    gathered = RangePlan(True, np.empty(0), positive_values, n_positive, n_negative)
    if not all(d.finite for d in digests) or n_positive == 0 or n_negative == 0:
        return gathered
    try:
        # without a spread of the positives the serial rule falls back to all margins: not gathered here
        bandwidth = _smoothing.resolve_bandwidth(smoothing, positive_values, None)
    except ValueError:
        return gathered  # the serial search raises it
    if smoothing is not None and not bandwidth > 0:
        return gathered
    samples = np.sort(np.concatenate([d.samples for d in digests]))
    quantiles = samples[np.linspace(0, samples.size - 1, max(int(n_ranges), 1) + 1).round().astype(np.int64)[1:-1]]
    if not bandwidth > 0:
        return RangePlan(False, np.unique(quantiles), positive_values, n_positive, n_negative)
    # the grid of the binned counts: from the first negative in stable order, a point every bandwidth / 64
    low = next(d.negative_low for d in digests if d.n_negative and d.negative_low == min(
        e.negative_low for e in digests if e.n_negative))
    high = max(d.negative_high for d in digests if d.n_negative)
    delta = bandwidth / _smoothing.BINS_PER_BANDWIDTH
    last = int(np.floor((high - low) / delta))
    points = np.unique(np.clip(np.floor((quantiles - low) / delta), 1, max(last, 1)).astype(np.int64))
    cuts = np.unique([_grid_cut(low, delta, int(k), high) for k in points if 1 <= k <= last])
    return RangePlan(False, np.asarray(cuts, dtype=np.float64), positive_values, n_positive, n_negative,
                     bandwidth=bandwidth, low=low, delta=delta, n_grid=last + 2)


def _key(value):
    """An integer that orders floats as their values do (``-0.0`` just below ``0.0``)."""
    bits = struct.unpack("<q", struct.pack("<d", value))[0]
    return bits if bits >= 0 else ~(bits & 0x7FFFFFFFFFFFFFFF)


def _float(key):
    bits = key if key >= 0 else (~key) - (1 << 63)
    return struct.unpack("<d", struct.pack("<q", bits))[0]


def _grid_cut(low, delta, k, high):
    """The smallest float ``m`` whose grid point ``floor((m - low) / delta)`` is ``k`` or more.

    The grid point is a non-decreasing function of ``m`` (each rounded step
    is), so every margin at or above the cut has a grid point of at least
    ``k`` and every one below it less. Needs ``1 <= k`` and ``high``'s point
    at least ``k``.
    """
    below, above = _key(low), _key(high)  # point 0 < k; point of high >= k
    while above - below > 1:
        middle = (below + above) // 2
        if np.floor((_float(middle) - low) / delta) >= k:
            above = middle
        else:
            below = middle
    return _float(above)


@dataclass(frozen=True)
class RangeBlock(SizedResult):
    """One value range's margins of every run, merged in stable order (:func:`range_block`)."""

    values: np.ndarray
    rows: np.ndarray
    positive: np.ndarray
    starts: np.ndarray | None = None  # where each distinct margin starts (None: gathered)


def range_block(runs, plan: RangePlan, index) -> RangeBlock:
    """Range ``index``'s slice of every run, merged: that range's part of the global stable order.

    Parameters
    ----------
    runs : list of SortedRun
        In row order.
    plan : RangePlan
    index : int

    Returns
    -------
    RangeBlock
    """
    if index >= plan.n_ranges:  # fewer ranges than tasks (bounds that coincide, or gathered whole)
        runs = [SortedRun(r.values[:0], r.rows[:0], r.positive[:0]) for r in runs]
    low = plan.cuts[index - 1] if 0 < index < plan.n_ranges else None
    high = plan.cuts[index] if index < plan.cuts.size else None
    pieces = []
    for run in runs:
        start = np.searchsorted(run.values, low, side="left") if low is not None else 0
        stop = np.searchsorted(run.values, high, side="left") if high is not None else run.values.size
        pieces.append((run.values[start:stop], run.rows[start:stop], run.positive[start:stop]))
    values = np.concatenate([p[0] for p in pieces] or [np.empty(0)])
    rows = np.concatenate([p[1] for p in pieces] or [np.empty(0, dtype=np.int64)])
    positive = np.concatenate([p[2] for p in pieces] or [np.empty(0, dtype=bool)])
    merged = np.argsort(values, kind="stable")  # the runs' slices in row order: a stable merge
    values, rows, positive = values[merged], rows[merged], positive[merged]
    if plan.gather:
        return RangeBlock(values, rows, positive)
    starts = np.flatnonzero(np.concatenate([[True], values[1:] != values[:-1]])) if values.size else np.empty(
        0, dtype=np.int64)
    return RangeBlock(values, rows, positive, starts)


@dataclass(frozen=True)
class RangeSummary:
    """The integers and grid sums of one range (:func:`range_summary`).

    Attributes
    ----------
    n_distinct, n_negative, n_negative_at_or_below_zero, n_negative_midpoints : int
        Distinct margins; negative margins; those ``<= 0``; midpoints between
        consecutive distinct margins of the range whose shift is negative.
    lowest, highest : float
        The range's lowest and highest distinct margins (NaN: empty range).
    bins : tuple or None
        ``grid_bins`` of the range's negative margins (smoothing only).
    """

    n_distinct: int
    n_negative: int
    n_negative_at_or_below_zero: int
    n_negative_midpoints: int
    lowest: float
    highest: float
    bins: tuple | None


def range_summary(block: RangeBlock, plan: RangePlan) -> RangeSummary:
    """The :class:`RangeSummary` of a merged range (all zero for a gathered one)."""
    if block.starts is None:
        return RangeSummary(0, 0, 0, 0, np.nan, np.nan, None)
    distinct = block.values[block.starts]
    negative = block.values[~block.positive]
    bins = None
    if plan.bandwidth > 0 and negative.size:
        bins = _smoothing.grid_bins(negative, plan.low, plan.delta)
    return RangeSummary(
        n_distinct=int(distinct.size),
        n_negative=int(negative.size),
        n_negative_at_or_below_zero=int(np.searchsorted(negative, -0.0, side="right")),
        n_negative_midpoints=int(np.count_nonzero(_midpoints(distinct[:-1], distinct[1:]) < 0)),
        lowest=float(distinct[0]) if distinct.size else np.nan,
        highest=float(distinct[-1]) if distinct.size else np.nan,
        bins=bins,
    )


def _midpoints(lower, upper):
    """The shifts of :func:`~dimbsvm.svm.candidates.midpoint_candidates` between distinct margins, as it computes them."""
    return -(lower + upper) / 2


@dataclass(frozen=True)
class _Kept:
    """Which candidates the thinning keeps, as ascending ranks of distinct margins (:func:`_kept_ranks`)."""

    n_candidates: int
    positions: np.ndarray  # kept candidate positions j (0: theta = 0), increasing
    lower: np.ndarray  # for j >= 1: rank of the lower distinct margin of candidate j
    offsets: np.ndarray  # first distinct rank of each range
    negative_offsets: np.ndarray  # negative margins below each range
    needs_negatives: bool  # the smoothed counts of the negatives are margin by margin: gather them


def _kept_ranks(summaries, plan: RangePlan, max_candidates) -> _Kept:
    """The candidates :func:`~dimbsvm.svm.candidates.thin_candidates` keeps, without the candidates.

    ``midpoint_candidates`` lists ``theta = 0`` and then the midpoints from the
    highest distinct margins down; those increase (each rounded step of
    ``-(lower + upper) / 2`` is monotone), so their stable order puts the
    ``z`` negative ones first, then ``theta = 0``, then the rest: the order
    the thinning's evenly spaced ranks are taken in.
    """
    counts = np.array([s.n_distinct for s in summaries], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
    negative_offsets = np.concatenate([[0], np.cumsum([s.n_negative for s in summaries])[:-1]]).astype(np.int64)
    n_distinct = int(counts.sum())
    z = sum(s.n_negative_midpoints for s in summaries)
    filled = [s for s in summaries if s.n_distinct]
    for below, above in zip(filled[:-1], filled[1:]):  # the midpoints between consecutive ranges
        z += int(_midpoints(np.float64(below.highest), np.float64(above.lowest)) < 0)
    n_candidates = n_distinct  # theta = 0 and one midpoint per pair of consecutive distinct margins
    if max_candidates is None or n_candidates <= max_candidates:
        positions = np.arange(n_candidates)
    else:
        n_spaced = max(int(max_candidates) - 1, 1)  # theta = 0 (position 0) is kept besides them
        ranks = np.linspace(0, n_candidates - 1, n_spaced).round().astype(np.int64)
        if not np.all(ranks[1:] > ranks[:-1]):  # (spaced by more than 1 they are already np.unique's)
            ranks = np.unique(ranks)
        order = np.where(ranks < z, ranks + 1, np.where(ranks == z, 0, ranks))  # the stable order at those ranks
        # order without its 0 increases (1..z below rank z, z+1.. above): [0, rest] is np.unique([0, *order])
        positions = np.concatenate([[0], order[order != 0]])
    lower = n_distinct - 1 - positions[1:]
    # thinned to at most MAX_SMOOTHED_CANDIDATES - 1 (or all of fewer): the margin-by-margin path needs
    # every negative margin, the binned one only the grid
    n_scored = min(positions.size, _smoothing.MAX_SMOOTHED_CANDIDATES - 1)
    needs = plan.bandwidth > 0 and plan.n_negative * n_scored <= _smoothing.MAX_EXACT_SMOOTHING
    return _Kept(n_candidates, positions, lower, offsets, negative_offsets, needs)


@dataclass(frozen=True)
class RangePicks:
    """The kept distinct margins of one range (:func:`pick_ranks`)."""

    ranks: np.ndarray
    values: np.ndarray
    first_rows: np.ndarray
    negative_at_or_below: np.ndarray
    negatives: np.ndarray | None = None  # every negative margin (margin-by-margin smoothing)
    whole: RangeBlock | None = None  # the gathered range


def pick_ranks(block: RangeBlock, summaries, plan: RangePlan, index, *, max_candidates) -> RangePicks:
    """The distinct margins of range ``index`` at the ranks the thinning keeps (the lower and upper margin of each).

    Returns
    -------
    RangePicks
        Per rank: the margin, its first row, and how many negative margins
        of every range lie at or below it.
    """
    empty = np.empty(0, dtype=np.int64)
    if plan.gather:
        return RangePicks(empty, np.empty(0), empty, empty, whole=block)
    kept = _kept_ranks(summaries, plan, max_candidates)
    if index >= len(summaries) or block.starts.size == 0:
        return RangePicks(empty, np.empty(0), empty, empty, block.values[:0] if kept.needs_negatives else None)
    start, stop = kept.offsets[index], kept.offsets[index] + block.starts.size
    lower = kept.lower[::-1]  # increasing; a candidate needs its lower rank and the one above it
    lower = lower[np.searchsorted(lower, start - 1):np.searchsorted(lower, stop)]
    ranks = np.union1d(lower, lower + 1)
    ranks = ranks[(ranks >= start) & (ranks < stop)]
    local = ranks - start
    starts = block.starts[local]
    ends = np.append(block.starts[1:], block.values.size)[local]
    negative_before = np.concatenate([[0], np.cumsum(~block.positive)])
    negatives = block.values[~block.positive] if kept.needs_negatives else None
    return RangePicks(ranks, block.values[starts], block.rows[starts],
                      kept.negative_offsets[index] + negative_before[ends], negatives)


def whole_margins(picks, n_rows):
    """The pooled margins of gathered ranges as the serial search takes them: ``(margins, counts[, order])``.

    Rows not in any range (no member scored them) have a NaN margin and a
    count of 0; the others a count of 1 (the search reads only ``counts > 0``).
    ``order``, the stable order of the scored rows, is left out where a
    scored margin is NaN, as :func:`~dimbsvm.model_selection.chunk_bodies.assemble_fold`
    leaves it out.
    """
    rows = np.concatenate([p.whole.rows for p in picks] or [np.empty(0, dtype=np.int64)])
    values = np.concatenate([p.whole.values for p in picks] or [np.empty(0)])
    margins, counts = np.full(n_rows, np.nan), np.zeros(n_rows, dtype=np.int64)
    margins[rows], counts[rows] = values, 1
    if np.isnan(values).any():
        return margins, counts
    return margins, counts, rows  # the ranges in value order, each merged stably: the stable order


def searched_shift(summaries, picks, plan: RangePlan, *, objective, tolerance, min_precision, max_candidates):
    """The shared shift and its candidate table from the ranges, as the serial search finds them.

    Parameters
    ----------
    summaries : list of RangeSummary
    picks : list of RangePicks
    plan : RangePlan
        Not gathered (the caller searches gathered ranges serially).
    objective, tolerance, min_precision, max_candidates
        As :func:`~dimbsvm.svm.threshold.othr_threshold` takes them.

    Returns
    -------
    theta : float
    table : dict of ndarray
        ``othr_threshold``'s table with ``candidates="midpoints"``; ``sample``
        and ``neighbour`` are training rows.
    """
    check_objective(objective)
    if not 0.0 <= tolerance < 1.0:
        raise ValueError(f"tolerance must be in [0, 1); got {tolerance!r}.")
    kept = _kept_ranks(summaries, plan, max_candidates)
    ranks = np.concatenate([p.ranks for p in picks])
    values = np.concatenate([p.values for p in picks])
    first_rows = np.concatenate([p.first_rows for p in picks])
    at_or_below = np.concatenate([p.negative_at_or_below for p in picks])
    lower = np.searchsorted(ranks, kept.lower)  # (ranges in order: the picked ranks increase)
    upper = np.searchsorted(ranks, kept.lower + 1)
    minus_one = np.array([-1], dtype=np.int64)
    theta = np.concatenate([[0.0], _midpoints(values[lower], values[upper])])
    sample = np.concatenate([minus_one, first_rows[upper]])  # the first row at the upper margin becomes positive
    neighbour = np.concatenate([minus_one, first_rows[lower]])
    cut = -theta
    # a midpoint lies between its two margins (each rounded step is monotone): the negatives at or below it
    # are those at or below the lower margin, and the upper one's too where the midpoint rounded onto it
    n_negative = plan.n_negative
    tn_pairs = np.where(cut[1:] >= values[upper], at_or_below[upper], at_or_below[lower])
    tn_pairs = np.where(cut[1:] == np.inf, n_negative, np.where(cut[1:] == -np.inf, 0, tn_pairs))
    tn = np.concatenate([[sum(s.n_negative_at_or_below_zero for s in summaries)], tn_pairs]).astype(np.int64)
    positive_values = plan.positive_values
    tp = plan.n_positive - np.searchsorted(positive_values, cut, side="right").astype(np.int64)
    smoothed = None
    if plan.bandwidth > 0:
        scored = _smoothing.thinned_indices(theta, _smoothing.MAX_SMOOTHED_CANDIDATES)
        at = theta[scored]
        s_tp = _smoothing.smoothed_count(positive_values, at, plan.bandwidth, None)
        if n_negative * at.size > _smoothing.MAX_EXACT_SMOOTHING:
            weights = _smoothing.added_bins([s.bins for s in summaries if s.bins is not None], plan.n_grid)
            s_fp = _smoothing.count_from_grid(weights, plan.low, plan.delta, at, plan.bandwidth)
        else:
            negatives = np.concatenate([p.negatives for p in picks])
            s_fp = _smoothing.smoothed_count(negatives, at, plan.bandwidth, None)
        smoothed = (scored, s_tp, s_fp)
    chosen, scores = _threshold.chosen_threshold(theta, tp, tn, plan.n_positive, n_negative, smoothed,
                                                 objective=objective, tolerance=tolerance,
                                                 min_precision=min_precision)
    table = {"theta": scores.pop("theta"), "sample": sample, "neighbour": neighbour, **scores}
    return chosen, table
