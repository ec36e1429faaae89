"""Task bodies: a store's folds computed a stored chunk at a time, where its labels are read.

A row's fold (:func:`~dimbsvm.model_selection.splits.class_folds`) needs its
class, its rank among its class's rows, and the class's size. The driver
learns each chunk's class counts (:func:`span_class_counts`, one task a
chunk), sums them into each chunk's first ranks, and the tasks of each chunk
then compute its rows' folds (:func:`span_folds`) or only their counts
(:func:`span_fold_counts`) alone: no task reads every label, and the folds
are the same as those of the labels in memory, whatever the chunking.
No Dask here.
"""

from __future__ import annotations

import numpy as np

from ..fold_data.spans import span_labels
from .splits import class_codes, fold_class_counts, folds_of_codes

__all__ = ["joined_folds", "span_class_counts", "span_fold_counts", "span_folds"]


def _span_codes(y, classes, start, stop) -> np.ndarray:
    """The span's labels as positions in ``classes``; a label ``classes`` does not hold is an error."""
    values = span_labels(y, start, stop)
    classes = np.asarray(classes)
    codes = class_codes(values, classes)
    if values.size and not np.array_equal(classes[codes], values):
        strange = np.setdiff1d(np.unique(values), classes)[:3].tolist()
        raise ValueError(f"labels {start}..{stop} hold classes {strange} that the data's class counts do not "
                         f"record (its classes: {classes.tolist()})")
    return codes


def span_class_counts(y, *, classes, start: int, stop: int) -> np.ndarray:
    """Task body: rows of each of ``classes`` among labels ``start`` up to ``stop``, of int64.

    Examples
    --------
    >>> span_class_counts(np.array([0, 1, 1, 0, 1]), classes=np.array([0, 1]), start=1, stop=5).tolist()
    [1, 3]
    """
    return np.bincount(_span_codes(y, classes, start, stop), minlength=len(classes)).astype(np.int64)


def span_folds(y, *, classes, start: int, stop: int, first_ranks, totals, n_splits: int, seed: int) -> np.ndarray:
    """Task body: the fold of each row ``start`` up to ``stop`` (see :func:`~dimbsvm.model_selection.splits.folds_of_codes`).

    ``first_ranks``: the rows of each class before ``start``; ``totals``:
    each class's rows in all the data.

    Examples
    --------
    >>> from dimbsvm.model_selection.splits import fold_of_rows
    >>> y = np.array([0, 1, 1, 0, 1, 0, 0, 1])
    >>> tail = span_folds(y, classes=[0, 1], start=3, stop=8, first_ranks=[1, 2], totals=[4, 4], n_splits=2, seed=0)
    >>> np.array_equal(tail, fold_of_rows(y, n_splits=2, seed=0)[3:])
    True
    """
    codes = _span_codes(y, classes, start, stop)
    return folds_of_codes(codes, first_ranks, totals, n_splits=n_splits, seed=seed)


def span_fold_counts(y, *, classes, start: int, stop: int, first_ranks, totals, n_splits: int,
                     seed: int) -> np.ndarray:
    """Task body: ``counts[f, k]``, rows of class ``classes[k]`` in fold ``f`` among rows ``start`` up to ``stop``."""
    codes = _span_codes(y, classes, start, stop)
    folds = folds_of_codes(codes, first_ranks, totals, n_splits=n_splits, seed=seed)
    return fold_class_counts(folds, codes, n_splits, len(classes))


def joined_folds(parts) -> np.ndarray:
    """Task body: the folds of consecutive spans as one assignment of every row (one byte a row)."""
    return np.concatenate(parts)
