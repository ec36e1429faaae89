"""Classes and their counts of millions of labels, without sorting them."""

from __future__ import annotations

import numpy as np

__all__ = ["unique_counts"]

#: Integer labels up to this value are counted by ``bincount`` (its array is at most 8 MiB).
MAX_COUNTED_LABEL = 2**20


def unique_counts(y):
    """``np.unique(y, return_counts=True)``: for 1-d non-negative integer labels by one ``bincount``.

    A job's client counts its labels' classes several times (checks, coding,
    the members' plan); ``np.unique`` with counts sorts them each time, a
    bincount is one pass. Other labels go to ``np.unique`` as they are.

    Examples
    --------
    >>> classes, counts = unique_counts(np.array([3, 1, 3, 3]))
    >>> classes.tolist(), counts.tolist()
    ([1, 3], [1, 3])
    """
    y = np.asarray(y)
    if (y.ndim != 1 or y.size == 0 or y.dtype.kind not in "iu" or y.min() < 0
            or y.max() >= MAX_COUNTED_LABEL):
        return np.unique(y, return_counts=True)
    by_value = np.bincount(y)
    classes = np.flatnonzero(by_value)
    return classes.astype(y.dtype), by_value[classes]
