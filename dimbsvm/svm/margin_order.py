"""The stable sort order of a fold's margins, when it is known before the threshold search.

Sorting millions of pooled out-of-bag margins is most of the ensemble's
shared-threshold search, and it is the one serial step left after the
members: the chunks that compute the margins can each sort theirs, and one
stable merge of those sorted runs is about three times faster than sorting
all margins at once. :func:`stable_order` checks such an order once (a wrong
one would silently move the threshold); the searches then use it instead of
sorting (:func:`~dimbsvm.svm.candidates.midpoint_candidates`,
:func:`~dimbsvm.svm.threshold.best_threshold`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["StableOrder", "merged_stable_order", "resolved_sorted", "stable_order"]


@dataclass(frozen=True, eq=False)
class StableOrder:
    """``np.argsort(margins, kind="stable")`` of one array of margins, checked.

    ``ordered`` is ``margins[order]``, which the check computes: the searches
    read the sorted margins from it instead of gathering them again (a
    gather of millions of margins in random order costs about as much as
    the check).
    """

    margins: np.ndarray
    order: np.ndarray
    ordered: np.ndarray | None = None


def stable_order(margins, order) -> StableOrder:
    """Check that ``order`` is exactly ``np.argsort(margins, kind="stable")`` and keep it with ``margins``.

    The pairs ``(margins[order[i]], order[i])`` must increase strictly: that
    makes ``order`` a permutation (no row twice) that sorts the margins and
    lists equal margins by row, i.e. the one stable order.

    Raises
    ------
    ValueError
        If it is not (NaN margins included: they have no order to check).

    Examples
    --------
    >>> margins = np.array([0.5, -1.0, 0.5])
    >>> stable_order(margins, np.array([1, 0, 2])).order.tolist()
    [1, 0, 2]
    """
    margins = np.asarray(margins)
    order = np.asarray(order)
    if order.dtype.kind in "iu" and order.shape == margins.shape and (
            order.size == 0 or (order.min() >= 0 and order.max() < margins.size)):
        ordered = margins[order]
        low, high = ordered[:-1], ordered[1:]
        if np.all((high > low) | ((high == low) & (order[1:] > order[:-1]))):
            return StableOrder(margins, order, ordered)
    raise ValueError("the given order is not the stable sort order of these margins "
                     f"({order.shape} positions for {margins.shape} margins)")


def resolved_sorted(margins, order):
    """``(order, margins[order])`` for a given order, checked once; ``(None, None)`` without one.

    A :class:`StableOrder` of the same array is not checked again, and its
    sorted margins are used as they are (``ordered`` is ``margins[order]``).
    """
    if order is None:
        return None, None
    if not (isinstance(order, StableOrder) and order.margins is margins):
        order = stable_order(margins, getattr(order, "order", order))
    return order.order, order.ordered if order.ordered is not None else margins[order.order]


def merged_stable_order(runs):
    """The stable order of the concatenation of margins given as sorted runs.

    Parameters
    ----------
    runs : sequence of (rows, sorted_margins)
        Row numbers (of the whole array) in sorted-margin order, run by run;
        the runs cover consecutive, increasing row ranges and each run is
        stably sorted, so ties across runs already stand in row order.

    Returns
    -------
    order : ndarray of int64
        ``np.argsort(margins, kind="stable")`` of the whole array (a stable
        merge of the runs: numpy's stable sort finds them).
    """
    if not runs:
        return np.empty(0, dtype=np.int64)
    rows = np.concatenate([np.asarray(r, dtype=np.int64) for r, _ in runs])
    merged = np.argsort(np.concatenate([m for _, m in runs]), kind="stable")
    return rows[merged]
