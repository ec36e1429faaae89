"""Stored chunks a fold's sorted rows fall in, and what one chunk's rows say about the scaler.

Plain helpers of the per-chunk task bodies: a task gets a chunk's ``(start,
stop)`` span and finds its rows in the fold's shared rows, so no index array
travels in the task graph.
"""

from __future__ import annotations

import numpy as np

__all__ = ["block_range", "chunk_index", "chunk_spans", "rows_within"]


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


def block_range(block):
    """Per-feature minimum and maximum of a block (NaN ignored) as float64, and its number of rows.

    (The extremes of float32 values, converted, are the extremes of the converted values.)
    """
    return (np.nanmin(block, axis=0).astype(np.float64, copy=False),
            np.nanmax(block, axis=0).astype(np.float64, copy=False), block.shape[0])
