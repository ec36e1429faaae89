"""Stored chunks a fold's sorted rows fall in, one chunk's rows of a fold, and what they say about the scaler.

Plain helpers of the per-chunk task bodies: a task gets a chunk's ``(start,
stop)`` span and finds its rows (:func:`chunk_rows`) either in the fold's
shared rows or, for a store's fold planned from its counts, in the chunk's
own folds and its :class:`ChunkPlace`, so that no task builds or receives an
array of every row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = ["ChunkPlace", "ChunkRows", "block_range", "chunk_index", "chunk_rows", "chunk_spans", "rows_within",
           "span_labels"]


def chunk_spans(rows, block_rows: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` of the stored chunks that hold some of the increasing ``rows``.

    A task gets a span and takes its rows from the fold's shared rows
    (:func:`rows_within`), so no index array travels in the task graph.
    Two binary searches per chunk, not a pass over the rows: a fold's rows
    are millions, its chunks hundreds.

    Examples
    --------
    >>> chunk_spans(np.array([0, 3, 4, 9, 10]), 5)
    [(0, 5), (5, 10), (10, 15)]
    >>> chunk_spans(np.array([12, 13]), 5)
    [(10, 15)]
    """
    rows, block_rows = np.asarray(rows, dtype=np.int64), int(block_rows)
    if rows.size == 0:
        return []
    starts = np.arange(int(rows[0]) // block_rows, int(rows[-1]) // block_rows + 1, dtype=np.int64) * block_rows
    held = np.searchsorted(rows, starts + block_rows) > np.searchsorted(rows, starts)
    return [(int(start), int(start) + block_rows) for start in starts[held]]


def chunk_index(span) -> int:
    """The stored chunk a :func:`chunk_spans` span is: the tasks of one chunk share it as their affinity.

    >>> chunk_index((10, 15))
    2
    """
    return int(span[0]) // max(int(span[1]) - int(span[0]), 1)


def rows_within(rows, span):
    """``(first, stop)`` positions of the sorted ``rows`` that lie in ``span = (start, stop)``."""
    return int(np.searchsorted(rows, span[0])), int(np.searchsorted(rows, span[1]))


@dataclass(frozen=True)
class ChunkPlace:
    """Where one stored chunk's rows stand in a store fold planned from its counts (the driver's numbers).

    Attributes
    ----------
    fold : int or None
        The fold whose test rows these are; ``None``: every row trains (a final model).
    train_first, test_first : int
        The fold's training (test) rows before this chunk: the position of
        the chunk's first training (test) row among the fold's.
    n_train, n_test : int
        The chunk's training and test rows, as the fold's layout counted them.
    class_first : tuple of int
        The fold's training rows of each class (the layout's classes, in
        order) before this chunk: the rank among its class's of the chunk's
        first training row of each class.
    """

    fold: int | None
    train_first: int
    test_first: int
    n_train: int
    n_test: int
    class_first: tuple = ()


@dataclass(frozen=True)
class ChunkRows:
    """A fold's rows in one stored chunk (dataset row numbers, increasing) and their positions among the fold's.

    ``train[i]`` is the fold's training row at position ``train_first + i``
    (likewise ``test``).
    """

    train: np.ndarray
    test: np.ndarray
    train_first: int
    test_first: int


def chunk_rows(rows, span, place: ChunkPlace | None = None) -> ChunkRows:
    """The fold's rows in the chunk ``span = (start, stop)``.

    ``place=None``: ``rows`` holds the fold's rows (``rows.train``,
    ``rows.test``, increasing), searched for the span. Otherwise ``rows`` is
    the chunk's rows' folds (:func:`~dimbsvm.model_selection.span_folds.span_folds`;
    ``None`` when every row trains), so the task touches this chunk alone;
    the counts must agree with ``place``'s (the labels read where the fold
    was counted).

    Examples
    --------
    >>> here = chunk_rows(np.array([0, 1, 0, 2]), (8, 12), ChunkPlace(0, 5, 3, 2, 2))
    >>> here.train.tolist(), here.test.tolist(), here.train_first, here.test_first
    ([9, 11], [8, 10], 5, 3)
    """
    start = int(span[0])
    if place is None:
        train_first, train_stop = rows_within(rows.train, span)
        test_first, test_stop = rows_within(rows.test, span)
        return ChunkRows(rows.train[train_first:train_stop], rows.test[test_first:test_stop], train_first, test_first)
    if place.fold is None:
        train, test = start + np.arange(place.n_train, dtype=np.int64), np.empty(0, dtype=np.int64)
    else:
        folds = np.asarray(rows)
        tested = folds == place.fold
        train, test = start + np.flatnonzero(~tested), start + np.flatnonzero(tested)
        if (train.size, test.size) != (place.n_train, place.n_test):
            raise ValueError(f"the chunk at row {start} holds {train.size} training and {test.size} test rows of "
                             f"fold {place.fold}, not the {place.n_train} and {place.n_test} counted: the labels "
                             "changed while they were read")
    return ChunkRows(train, test, int(place.train_first), int(place.test_first))


def block_range(block):
    """Per-feature minimum and maximum of a block (NaN ignored) as float64, and its number of rows.

    (The extremes of float32 values, converted, are the extremes of the converted values.) Of a sparse
    block, the extremes are ``1 x n_features`` CSR rows (implicit zeros counted): a chunk of text touches
    a sliver of 10^6 columns, and dense ranges of every chunk would be gigabytes to merge.
    """
    if sp.issparse(block):
        block = sp.csr_matrix(block, dtype=np.float64)
        return sp.csr_matrix(block.min(axis=0)), sp.csr_matrix(block.max(axis=0)), block.shape[0]
    return (np.nanmin(block, axis=0).astype(np.float64, copy=False),
            np.nanmax(block, axis=0).astype(np.float64, copy=False), block.shape[0])


def span_labels(y, start: int, stop: int) -> np.ndarray:
    """Labels ``start`` up to ``stop``: a store's labels handle reads only the chunks holding them."""
    span = getattr(y, "span", None)
    return np.asarray(span(start, stop) if span is not None else y[start:stop])
