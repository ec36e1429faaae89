"""Classes and their counts of millions of labels, without sorting them."""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

import numpy as np

__all__ = ["ClassCounts", "minority_count", "unique_counts"]

#: Integer labels up to this value are counted by ``bincount`` (its array is at most 8 MiB).
MAX_COUNTED_LABEL = 2**20

#: ``id(labels) -> (weak reference, (classes, counts))`` of read-only label arrays already counted.
_counted: dict = {}
_counted_lock = threading.Lock()


def unique_counts(y):
    """``np.unique(y, return_counts=True)``: for 1-d non-negative integer labels by one ``bincount``.

    A job's client counts its labels' classes several times (checks, coding,
    the members' plan); ``np.unique`` with counts sorts them each time, a
    bincount is one pass. Other labels go to ``np.unique`` as they are.
    The counts of a read-only array that owns its data (a store's labels as
    a job loads them: nothing can change them) are kept while the array
    lives, so counting the same labels again is free (the counts returned
    for such an array are read-only). Labels that know their counts (a
    ``counted_classes()`` method, e.g. a store's labels handle) are not read.

    Examples
    --------
    >>> classes, counts = unique_counts(np.array([3, 1, 3, 3]))
    >>> classes.tolist(), counts.tolist()
    ([1, 3], [1, 3])
    """
    known = getattr(y, "counted_classes", lambda: None)()
    if known is not None:  # labels known by their counts (a store's, read only where tasks run)
        return known
    y = np.asarray(y)
    immutable = not y.flags.writeable and y.flags.owndata
    if immutable:
        with _counted_lock:
            ref, counted = _counted.get(id(y), (None, None))
        if ref is not None and ref() is y:
            return counted
    counted = _count(y)
    if immutable:
        for array in counted:
            array.setflags(write=False)  # shared by every caller of the cached counts
        key = id(y)

        def forget(_, key=key):
            with _counted_lock:
                _counted.pop(key, None)

        with _counted_lock:
            _counted[key] = (weakref.ref(y, forget), counted)
    return counted


@dataclass(frozen=True)
class ClassCounts:
    """Labels known by their classes' counts alone: what a driver plans an ensemble's members from.

    A store's fold is planned without its labels in the driver; an
    estimator that plans its members from the labels
    (``plan_members``, ``plan_screening``) accepts this in their place.

    Attributes
    ----------
    classes : ndarray
        The classes, increasing.
    counts : ndarray of int64
        Rows of each class (classes with no rows are left out).

    Examples
    --------
    >>> ClassCounts.of([0, 1], [5, 0]).classes.tolist()
    [0]
    """

    classes: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, classes, counts) -> "ClassCounts":
        """The counts of ``classes`` (as given, increasing), those with no row dropped."""
        classes, counts = np.asarray(classes), np.asarray(counts, dtype=np.int64)
        held = counts > 0
        return cls(classes[held], counts[held])

    @property
    def size(self) -> int:
        """Rows counted."""
        return int(self.counts.sum())

    def counted_classes(self):
        """``(classes, counts)``, as :func:`unique_counts` gives them for labels."""
        return self.classes, self.counts


def minority_count(y) -> int:
    """Rows of the smallest class of the labels ``y`` (0 for no labels).

    Examples
    --------
    >>> import numpy as np
    >>> minority_count(np.array([0, 1, 1, 0, 0])), minority_count(np.array([], dtype=int))
    (2, 0)
    """
    counts = unique_counts(y)[1]
    return int(counts.min()) if len(counts) else 0


def _count(y):
    if (y.ndim != 1 or y.size == 0 or y.dtype.kind not in "iu" or y.min() < 0
            or y.max() >= MAX_COUNTED_LABEL):
        return np.unique(y, return_counts=True)
    by_value = np.bincount(y)
    classes = np.flatnonzero(by_value)
    return classes.astype(y.dtype), by_value[classes]
