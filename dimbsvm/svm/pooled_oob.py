"""An ensemble's out-of-bag margins pooled one stored chunk at a time, for every member at once.

Over a store, members that kept only their bags (``keep_oob="bag"``) are
scored here, a chunk per task (:func:`pooled_oob_block`), instead of each
member scoring every other row; :func:`pooled_margins` joins the chunks'
results for the ensemble's shared threshold. No Dask here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..parallel.sized import SizedResult
from ..fold_data.prepared import PreparedFold, row_view
from ..fold_data.spans import ChunkPlace, chunk_rows
from ..rows import cache_blocks
from .members import pooled_mean

__all__ = ["PooledChunk", "pooled_margins", "pooled_oob_block"]


@dataclass(frozen=True)
class PooledChunk(SizedResult):
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
        With ``rows`` the chunk's folds, as :func:`~dimbsvm.fold_data.spans.chunk_rows`
        takes them (a fold without a stored stage).

    Returns
    -------
    PooledChunk
    """
    from sklearn import config_context

    from ._base import signed_margins

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


def pooled_margins(chunks, n_rows):
    """``(margins, counts, order)`` of a fold's training rows from its :class:`PooledChunk` results.

    ``order`` is the stable sort order of all margins, merged from the
    chunks' sorted runs (chunks in row order, so equal margins stay in row
    order); it is left out when a row the members scored has a NaN margin.
    """
    from .margin_order import merged_stable_order

    margins, counts = np.full(n_rows, np.nan), np.zeros(n_rows, dtype=np.int64)
    for chunk in chunks:
        margins[chunk.first:chunk.first + chunk.margins.size] = chunk.margins
        counts[chunk.first:chunk.first + chunk.counts.size] = chunk.counts
    if np.isnan(margins[counts > 0]).any():
        return margins, counts
    chunks = sorted(chunks, key=lambda chunk: chunk.first)
    return margins, counts, merged_stable_order([(chunk.first + chunk.order, chunk.margins[chunk.order])
                                                 for chunk in chunks])
