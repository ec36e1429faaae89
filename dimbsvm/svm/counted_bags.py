"""An ensemble's bags drawn from a store fold's class counts and found by rank in the chunks that hold them.

A stratified or balanced bag picks rows of each class by their rank among
the fold's training rows of that class: the draw needs the two class sizes,
not the labels. :func:`counted_bags` draws every member's bag of ranks from
the fold's counts (no pass over the fold's labels, so the reads do not wait
for one), and :func:`gather_counted_block`, one task a stored chunk, turns
the ranks that fall in its chunk into rows, from the chunk's own labels and
folds: their positions among the fold's training rows, their features and
labels. A member then fits on what the chunks gathered
(:func:`member_inputs`) exactly as on the bag drawn over the labels: the
draws, positions and rows are the same. No Dask here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..parallel.sized import SizedResult
from ..rows import no_rows, stack_rows, take_rows
from ..fold_data.spans import ChunkPlace, block_range, chunk_rows, span_labels
from .bag_bodies import ChunkPass, GatheredRows, kept_range, rows_as_stored, where_held
from .bagging import DrawnBag, RankRange

__all__ = ["CountedBags", "counted_bags", "draws_from_counts", "gather_counted_block", "member_inputs"]


def draws_from_counts(member) -> bool:
    """Whether a member's bag is drawn from class sizes alone (stratified or balanced) and it reads no row
    outside its bag (its bag kept for pooled out-of-bag margins computed elsewhere)."""
    return member.bootstrap in ("stratified", "balanced") and member.keep_oob == "bag" and member.margins != "oob"


@dataclass(frozen=True)
class CountedBags(SizedResult):
    """Every member's bag of one fold as class ranks: the minority's ``0 .. n_minority - 1``, the others'
    ``n_minority ...`` (the order of :func:`~dimbsvm.svm.bagging.draw_bag`'s ``classes``).

    Attributes
    ----------
    drawn : list of DrawnBag
        Per member, in part order; ``bag`` holds ranks.
    ranks : list of ndarray
        Per member, its distinct ranks, increasing.
    pos_label : object
    minority, majority : int
        The positions of the minority class and of the other among the layout's classes.
    n_minority, n_rows : int
        The fold's minority training rows, and all its training rows.
    """

    drawn: list
    ranks: list
    pos_label: object
    minority: int
    majority: int
    n_minority: int
    n_rows: int


def counted_bags(*, parts, classes, counts) -> CountedBags:
    """Task body: every member's bag of one fold drawn from its training rows' class counts.

    Parameters
    ----------
    parts : list of Part
        The members (:func:`draws_from_counts` true for each).
    classes : ndarray
        The fold's two classes, increasing.
    counts : ndarray of int
        The fold's training rows of each class.
    """
    pos_label = parts[0].member.pos_label
    classes = np.asarray(classes)
    if classes.size != 2:
        raise ValueError(f"an ensemble's bags are drawn over two classes, not {classes.tolist()}")
    minority = int(np.flatnonzero(classes == pos_label)[0])
    majority = 1 - minority
    n_minority, n_majority = int(counts[minority]), int(counts[majority])
    ranges = (RankRange(0, n_minority), RankRange(n_minority, n_majority))
    drawn = [part.member.draw_bag(None, part.seed, classes=ranges) for part in parts]
    return CountedBags(drawn, [np.unique(bag.bag) for bag in drawn], pos_label, minority, majority, n_minority,
                       n_minority + n_majority)


@dataclass(frozen=True)
class CountedPiece(SizedResult):
    """A member's bag rows in one chunk: their ranks (increasing within each class), positions among the
    fold's training rows, features as stored, and labels."""

    ranks: np.ndarray
    positions: np.ndarray
    rows: np.ndarray
    labels: np.ndarray


def gather_counted_block(X, y, bags: CountedBags, *, rows, span, place: ChunkPlace, with_range: bool, spill=None,
                         key=None):
    """Task body: every member's bag rows that lie in one chunk, found by rank from the chunk's labels and folds.

    ``rows``, ``place``: the chunk's folds and place
    (:func:`~dimbsvm.fold_data.spans.chunk_rows`); ``place`` also
    gives the fold's training rows of each class before the chunk. With
    ``with_range`` every training row of the chunk is read and the result is
    a :class:`~dimbsvm.svm.bag_bodies.ChunkPass` (the scaler's
    statistics from the same read); otherwise only the bag rows are read and
    the result is the list of :class:`CountedPiece`. With ``spill`` (a
    :class:`~dimbsvm.fold_data.context.RunSpill`) the list is kept there
    where this process can, and what stands for it is returned: a worker
    running a member then receives that member's rows only, not every
    member's.
    """
    here = chunk_rows(rows, span, place)
    labels = span_labels(y, span[0], span[1])[here.train - span[0]]
    positive = labels == bags.pos_label
    by_class = {bags.minority: np.flatnonzero(positive), bags.majority: np.flatnonzero(~positive)}
    offsets = {bags.minority: 0, bags.majority: bags.n_minority}
    wanted = []  # per member, positions within the chunk's training rows of its ranks here, and the ranks
    for ranks in bags.ranks:
        where, found = [], []
        for k in (bags.minority, bags.majority):
            first = offsets[k] + int(place.class_first[k])
            lo, hi = np.searchsorted(ranks, [first, first + by_class[k].size])
            where.append(by_class[k][ranks[lo:hi] - first])
            found.append(ranks[lo:hi])
        wanted.append((np.concatenate(where), np.concatenate(found)))
    if with_range:
        block = rows_as_stored(X, here.train)
        pieces = [CountedPiece(found, here.train_first + where, block[where], labels[where]) for where, found in wanted]
        return ChunkPass(kept_range(block_range(block), spill, key, here.train_first),
                         _kept(pieces, spill, key, here.train_first))
    every = np.unique(np.concatenate([where for where, _ in wanted])) if wanted else np.empty(0, np.int64)
    read = take_rows(X, here.train[every]) if every.size else no_rows(X)
    pieces = [CountedPiece(found, here.train_first + where, read[np.searchsorted(every, where)], labels[where])
              for where, found in wanted]
    return _kept(pieces, spill, key, here.train_first)


def _kept(pieces, spill, key, first):
    kept = None if spill is None else spill.write_pieces(key, first, pieces)
    return pieces if kept is None else kept


def member_inputs(pieces, bags: CountedBags, index: int, transformer):
    """``(X, y, drawn)`` a member fits on: its gathered rows and labels keyed by their positions among the fold's
    training rows, and its bag as positions (the draw :func:`counted_bags` made, mapped through the chunks)."""
    pieces = [getattr(chunk, "pieces", chunk)[index] for chunk in pieces]
    ranks = np.concatenate([piece.ranks for piece in pieces])
    positions = np.concatenate([piece.positions for piece in pieces])
    expected = bags.ranks[index]
    order = np.argsort(ranks, kind="stable")
    if not np.array_equal(ranks[order], expected):
        raise ValueError(f"the chunks found {ranks.size} of member {index}'s {expected.size} bag rows: the labels "
                         "changed while they were read")
    drawn, n_train = bags.drawn[index], bags.n_rows
    bag = positions[order][np.searchsorted(expected, drawn.bag)]
    by_position = np.argsort(positions, kind="stable")
    X = GatheredRows([(positions[by_position], stack_rows([piece.rows for piece in pieces])[by_position])],
                     transformer, n_train)
    y = _GatheredLabels(positions[by_position], np.concatenate([piece.labels for piece in pieces])[by_position],
                        n_train)
    return X, y, DrawnBag(drawn.seed, int(n_train), bag, drawn.n_draws, drawn.random_state)


class _GatheredLabels:
    """A fold's training labels where only the bag's are known: ``y[positions]`` for bag positions."""

    def __init__(self, positions, labels, n_rows):
        self.positions, self.labels, self.n_rows = positions, labels, int(n_rows)

    def __len__(self):
        return self.n_rows

    def __getitem__(self, positions):
        return self.labels[where_held(self.positions, positions, "label")]
