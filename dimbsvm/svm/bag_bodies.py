"""An ensemble's bags gathered in one pass over a store's chunks.

A bag of a few thousand rows drawn from a large store touches every chunk, so
a member reading its own bag would decompress the whole store, once per
member (memory bandwidth, not the SVMs, then bounds the member stage).
Instead the bags are drawn ahead of the members (:func:`member_bags`) and one
task per chunk slices every member's rows out of that chunk, read once
(:func:`gather_block`, or :func:`range_and_gather_block` when the same read
also gives the scaler's statistics); the member reads them as
:class:`GatheredRows`. No Dask here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..parallel.sized import SizedResult
from ..rows import no_rows, stack_rows, take_rows
from ..store.rows import StoreRows
from ..fold_data.spans import ChunkPlace, block_range, chunk_rows, rows_within

__all__ = ["ChunkPass", "GatheredRows", "MemberBag", "gather_block", "kept_range", "member_bags",
           "range_and_gather_block", "rows_as_stored", "where_held"]


@dataclass(frozen=True)
class MemberBag(SizedResult):
    """A member's bag drawn ahead of it: the draw (handed to the member) and its distinct dataset rows."""

    drawn: object  # DrawnBag
    rows: np.ndarray


def member_bags(y, rows, *, parts) -> list:
    """Task body: every member's bag of one fold, drawn as the member draws it, from one pass over the labels.

    :func:`~dimbsvm.svm.members.fit_member` draws its bag first from
    ``RandomState(seed)`` over the positive labels of the fold's training
    rows; this draws the same bags (a :class:`MemberBag` per part, in part
    order: the draw and its distinct dataset rows, sorted), the gather tasks
    cut their rows out of the chunks and each member task fits on its bag
    without drawing again. The draws need the positions of each class among
    the training rows, the same for every member: found once here, each bag
    then costs the time of its own draw. ``rows``: the fold's
    :class:`~dimbsvm.fold_data.prepared.FoldRows`.
    """
    train = rows.train
    positive = np.asarray(y)[train] == parts[0].member.pos_label
    classes = (np.flatnonzero(positive), np.flatnonzero(~positive))
    bags = []
    for part in parts:
        drawn = part.member.draw_bag(None, part.seed, positive=positive, classes=classes)
        bags.append(MemberBag(drawn, train[np.unique(drawn.bag)]))
    return bags


def gather_block(X, bags, *, span):
    """Task body: every member's bag rows that lie in one chunk, read once: ``[(ids, rows), ...]`` per member."""
    in_chunk = _bag_rows_in(bags, span)
    wanted = np.unique(np.concatenate(in_chunk)) if in_chunk else np.empty(0, dtype=np.int64)
    if wanted.size == 0:
        return [(ids, no_rows(X)) for ids in in_chunk]
    block = take_rows(X, wanted)
    return [(ids, block[np.searchsorted(wanted, ids)]) for ids in in_chunk]


def _bag_rows_in(bags, span):
    """Each :class:`MemberBag`'s rows (dataset row numbers, sorted) that lie in the chunk ``span``."""
    return [bag.rows[slice(*rows_within(bag.rows, span))] for bag in bags]


@dataclass(frozen=True)
class ChunkPass(SizedResult):
    """One read of a training chunk: its rows' min-max range and every member's bag rows in it."""

    range: object  # as minmax_block_range returns it, or a RunSpill's stand-in for it (its read() gives it)
    pieces: list  # as gather_block returns them


def range_and_gather_block(X, bags, *, rows, span, place: ChunkPlace | None = None, spill=None,
                           key=None) -> ChunkPass:
    """Task body: :func:`minmax_block_range` and :func:`gather_block` of one chunk from a single read.

    The bags are cheap to draw, so waiting for them costs less than reading
    every chunk a second time (a read is most of either task). ``rows``,
    ``place``: as :func:`~dimbsvm.fold_data.spans.chunk_rows` takes them.
    ``spill``, ``key``: where a large range is kept (:func:`kept_range`).
    """
    train_rows = chunk_rows(rows, span, place).train
    block = rows_as_stored(X, train_rows)
    pieces = []
    for ids in _bag_rows_in(bags, span):
        where = np.searchsorted(train_rows, ids)
        if ids.size and (where[-1] >= train_rows.size or np.any(train_rows[where] != ids)):
            raise ValueError(f"bag rows {ids[:5].tolist()}... are not training rows of this fold's chunk {span}")
        pieces.append((ids, block[where]))
    return ChunkPass(kept_range(block_range(block), spill, key, train_rows[0] if train_rows.size else span[0]),
                     pieces)


def kept_range(chunk_range, spill, key, first):
    """A chunk's range, or what stands for it where ``spill`` keeps it on disk (a large range is otherwise held
    as long as the read that carries it; :class:`~dimbsvm.fold_data.context.RunSpill`)."""
    kept = None if spill is None else spill.write_range(key, first, chunk_range)
    return chunk_range if kept is None else kept


def rows_as_stored(X, rows):
    """``X[rows]`` in the store's own dtype (float32 stores: half the bytes read, converted and sent); the
    members convert the rows they fit on."""
    return X.take(rows, dtype=None) if isinstance(X, StoreRows) else take_rows(X, rows)


def where_held(held, ids, what: str) -> np.ndarray:
    """Positions in the increasing ``held`` of ``ids``; an id ``held`` lacks is an ``IndexError`` naming ``what``.

    Examples
    --------
    >>> where_held(np.array([3, 7, 9]), np.array([9, 3]), "row").tolist()
    [2, 0]
    """
    ids = np.asarray(ids, dtype=np.int64)
    where = np.searchsorted(held, ids)
    if ids.size and (where.max() >= held.size or np.any(held[where] != ids)):
        raise IndexError(f"a {what} outside the member's bag was asked for")
    return where


class GatheredRows:
    """A member's bag rows gathered from the chunks, read as a row handle (only these rows exist).

    ``rows[ids]`` returns the rows with those dataset row numbers, passed
    through the fold's fitted steps, as ``TransformedRows(store_rows, steps)``
    would, without reading the store.
    """

    def __init__(self, pieces, transformer, n_rows):
        ids = [p[0] for p in pieces if len(p[0])]
        data = [p[1] for p in pieces if len(p[0])]
        self.ids = np.concatenate(ids) if ids else np.empty(0, dtype=np.int64)
        self.data = stack_rows(data).astype(np.float64) if data else np.empty((0, 0))
        self.transformer = transformer
        self.shape = (int(n_rows), *self.data.shape[1:])

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, ids):
        block = self.data[where_held(self.ids, ids, "row")]
        return block if self.transformer is None else self.transformer.transform(block)
