"""Stored chunks a fold's sorted rows fall in, and what one chunk's rows say about the scaler.

Plain helpers of the per-chunk task bodies: a task gets a chunk's ``(start,
stop)`` span and finds its rows in the fold's shared rows, so no index array
travels in the task graph.
"""

from __future__ import annotations

import numpy as np

__all__ = ["block_range", "chunk_spans", "rows_within"]


def chunk_spans(rows, block_rows: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` of the stored chunks that hold some of ``rows``.

    A task gets a span and takes its rows from the fold's shared rows
    (:func:`rows_within`), so no index array travels in the task graph.

    Examples
    --------
    >>> chunk_spans(np.array([0, 3, 4, 9, 10]), 5)
    [(0, 5), (5, 10), (10, 15)]
    """
    chunks = np.unique(np.asarray(rows, dtype=np.int64) // int(block_rows))
    return [(int(c) * int(block_rows), (int(c) + 1) * int(block_rows)) for c in chunks]


def rows_within(rows, span):
    """``(first, stop)`` positions of the sorted ``rows`` that lie in ``span = (start, stop)``."""
    return int(np.searchsorted(rows, span[0])), int(np.searchsorted(rows, span[1]))


def block_range(block):
    """Per-feature minimum and maximum of a block (NaN ignored) as float64, and its number of rows.

    (The extremes of float32 values, converted, are the extremes of the converted values.)
    """
    return (np.nanmin(block, axis=0).astype(np.float64, copy=False),
            np.nanmax(block, axis=0).astype(np.float64, copy=False), block.shape[0])
