"""A fold's steps cut into one task per stored chunk, for data in a store (row handles).

A fold of a large store is then not two long single tasks around its
members: the scaler's statistics (:func:`minmax_block_range`, merged exactly
by :func:`prepare_from_ranges`), the members' pooled out-of-bag margins
(:func:`pooled_oob_block`) and the scoring of the test rows
(:mod:`~dimbsvm.model_selection.chunk_scoring`) run as one task per chunk,
around :func:`assemble_fold`. No Dask here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone

from ..rows import RowSubset, cache_blocks, take_rows
from .bodies import FoldRows, PreparedFold, fold_pipeline, fold_rows, row_view, training_data
from .scoring import fitted_thresholds
from .spans import ChunkPlace, block_range, chunk_rows
from ..svm.members import pooled_mean
from ..svm.shared_threshold import ranged_shift

__all__ = ["PooledChunk", "assemble_fold", "minmax_block_range", "model_of", "pooled_oob_block",
           "prepare_from_ranges"]


def minmax_block_range(X, *, rows, span, place: ChunkPlace | None = None):
    """Task body: per-feature minimum and maximum of the fold's training rows in one chunk (NaN ignored).

    ``rows``, ``place``: as :func:`~dimbsvm.model_selection.spans.chunk_rows` takes them.
    """
    return block_range(take_rows(X, chunk_rows(rows, span, place).train))

def prepare_from_ranges(ranges, *, scaler, rows: FoldRows = None, stage=None) -> PreparedFold:
    """Task body: the fold's ``MinMaxScaler`` from per-chunk ranges (exactly as fitted on all rows).

    The minimum and maximum of the union are the minimum of the minima and the
    maximum of the maxima, and a min-max scaler is a function of them alone.
    """
    from sklearn.preprocessing import MinMaxScaler

    if scaler != "minmax":
        raise ValueError(f"only a min-max scaler is merged from chunk ranges, not {scaler!r}")
    start = time.perf_counter()
    ranges = [getattr(r, "range", r) for r in ranges]  # (a ChunkPass carries its chunk's range)
    low = np.min(np.stack([r[0] for r in ranges]), axis=0)
    high = np.max(np.stack([r[1] for r in ranges]), axis=0)
    fitted = MinMaxScaler().partial_fit(np.stack([low, high]))
    fitted.n_samples_seen_ = int(sum(r[2] for r in ranges))
    if stage is not None:
        stage = stage.for_fold(rows.train)
    return PreparedFold(steps=[fitted], train_features=None, fit_time=time.perf_counter() - start, stage=stage)


@dataclass(frozen=True)
class PooledChunk:
    """The pooled out-of-bag margins of one chunk's training rows (:func:`pooled_oob_block`).

    Attributes
    ----------
    first : int
        Position in ``rows.train`` of the chunk's first training row; the
        arrays cover the positions ``first, first + 1, ...``.
    margins : ndarray of float64
        Each row's mean margin over the members it is out of bag for (NaN: none).
    counts : ndarray of int64
        How many members each row is out of bag for.
    order : ndarray of int64
        ``np.argsort(margins, kind="stable")``: the chunk's sorted run, merged
        with the others' into the fold's order for the threshold search.
    """

    first: int
    margins: np.ndarray
    counts: np.ndarray
    order: np.ndarray


def pooled_oob_block(X, prepared: PreparedFold, rows, parts, *, span, place: ChunkPlace | None = None) -> PooledChunk:
    """Task body: the pooled out-of-bag margins of one chunk's training rows over an ensemble's members.

    The members were fitted with ``keep_oob="bag"`` and carry their bag's
    rows (``in_bag``, numbered within the fold's training rows); each row of
    the chunk adds the margin of every member whose bag does not hold it, in
    member order, as :func:`~dimbsvm.svm.members.pooled_oob_margins` does,
    and the sum is divided by their number there too. The chunk is read once
    for all members, and its margins are sorted here, in parallel with the
    other chunks, so that the threshold search only merges sorted runs.

    Parameters
    ----------
    span : (int, int)
        The chunk's rows ``start:stop``.
    place : ChunkPlace, default=None
        With ``rows`` the chunk's folds, as :func:`~dimbsvm.model_selection.spans.chunk_rows`
        takes them (a fold without a stored stage).

    Returns
    -------
    PooledChunk
    """
    from sklearn import config_context

    from ..svm._base import signed_margins

    here = chunk_rows(rows, span, place)
    first, stop = here.train_first, here.train_first + here.train.size
    block = row_view(X, prepared, rows)[here.train]
    total = np.zeros(stop - first)
    counts = np.zeros(stop - first, dtype=np.int64)
    # every member would check the same block for NaN and infinity: checked once here (a block that
    # fails is left to each member, which raises or, e.g. behind an imputer, handles it as before)
    # (a member saved by an interrupted run before members kept their bags lists its out-of-bag rows)
    outs = [_outside(member.in_bag, first, stop) if member.in_bag is not None
            else ~_outside(member.oob_rows, first, stop) for member, _ in parts]
    with config_context(assume_finite=_all_finite(block)):
        for lo, hi in cache_blocks(block):  # every member's pass over one cache-sized piece at a time
            piece = block[lo:hi]
            for (member, _), out in zip(parts, outs):
                out = out[lo:hi]
                if out.any():  # (margins are row by row: computed on the whole piece, kept where out of bag)
                    total[lo:hi][out] += signed_margins(member.estimator, piece, member.margin_sign)[out]
                    counts[lo:hi][out] += 1
    margins = pooled_mean(total, counts)
    return PooledChunk(int(first), margins, counts, np.argsort(margins, kind="stable"))


def _all_finite(block):
    """Whether a dense block holds no NaN or infinity (sparse and other blocks: not known, ``False``)."""
    return isinstance(block, np.ndarray) and block.dtype.kind == "f" and bool(np.isfinite(block).all())


def _outside(sorted_positions, first, stop):
    """Mask over positions ``first:stop``: True where the position is not in ``sorted_positions``."""
    lo, hi = np.searchsorted(sorted_positions, [first, stop])
    outside = np.ones(stop - first, dtype=bool)
    outside[np.asarray(sorted_positions[lo:hi], dtype=np.int64) - first] = False
    return outside


def assemble_fold(X, y, prepared: PreparedFold, rows: FoldRows, parts, *, estimator, seeds, pooled=None,
                  range_plan=None, range_summaries=None, range_picks=None, range_search=None, train_counts=None,
                  split=None):
    """Task body: the fold's fitted model from its parts (:func:`finish_fold` without the scoring).

    ``pooled`` are the :func:`pooled_oob_block` results of every chunk of the
    training rows, for an ensemble whose members kept only their bags. The
    ``range_*`` arguments instead carry the shared threshold searched by
    range tasks (:func:`~dimbsvm.model_selection.threshold_tasks.add_ranged_search`).
    ``rows=None``: a store fold known by its ``train_counts`` (a
    :class:`~dimbsvm._counts.ClassCounts`), assembled from them where the
    range tasks searched the threshold; where the search falls back to every
    training row's margin, the fold's rows are computed here from ``split``
    and the labels (:func:`~dimbsvm.model_selection.bodies.fold_rows`).

    Returns
    -------
    dict
        ``{"model", "final", "prepared", "fit_time", "thresholds"}``.
    """
    start = time.perf_counter()
    fitted = [part for part, _ in parts]
    if seeds is not None and rows is None and range_plan is not None and not range_plan.gather:
        n_train = int(np.sum(train_counts.counts))
        _, shared_shift = ranged_shift(range_plan, range_summaries, range_picks, range_search, n_train)
        final = clone(estimator).fit_from_members(row_view(X, prepared, None), train_counts, fitted, seeds,
                                                  shared_shift=shared_shift)
    elif seeds is not None:
        if rows is None:
            rows = fold_rows(y, **split)
        X_train, y_train, train = training_data(X, y, prepared, rows)
        if train is not None:
            X_train, y_train = RowSubset(X_train, train), np.asarray(y_train)[train]
        pooled_margins = shared_shift = None
        if pooled is not None:
            pooled_margins = _pooled_margins(pooled, len(rows.train))
        elif range_plan is not None:
            pooled_margins, shared_shift = ranged_shift(range_plan, range_summaries, range_picks, range_search,
                                                        len(rows.train))
        final = clone(estimator).fit_from_members(X_train, y_train, fitted, seeds, pooled_margins=pooled_margins,
                                                  shared_shift=shared_shift)
    else:
        [final] = fitted
    fit_time = prepared.fit_time + sum(seconds for _, seconds in parts) + time.perf_counter() - start
    return {"model": fold_pipeline(prepared, final), "final": final, "prepared": prepared, "fit_time": fit_time,
            "thresholds": fitted_thresholds(final)}


def _pooled_margins(chunks, n_rows):
    """``(margins, counts, order)`` of a fold's training rows from its :class:`PooledChunk` results.

    ``order`` is the stable sort order of all margins, merged from the
    chunks' sorted runs (chunks in row order, so equal margins stay in row
    order); it is left out when a row the members scored has a NaN margin.
    """
    from ..svm.margin_order import merged_stable_order

    margins, counts = np.full(n_rows, np.nan), np.zeros(n_rows, dtype=np.int64)
    for chunk in chunks:
        margins[chunk.first:chunk.first + chunk.margins.size] = chunk.margins
        counts[chunk.first:chunk.first + chunk.counts.size] = chunk.counts
    if np.isnan(margins[counts > 0]).any():
        return margins, counts
    chunks = sorted(chunks, key=lambda chunk: chunk.first)
    return margins, counts, merged_stable_order([(chunk.first + chunk.order, chunk.margins[chunk.order])
                                                 for chunk in chunks])


def model_of(assembled):
    """Task body: the result of a fold without test rows (a final model): ``{"model": ...}``."""
    return {"model": assembled["model"]}
