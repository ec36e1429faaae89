"""EnSVM-OTHR's shared shift: one threshold searched on the members' pooled out-of-bag margins.

:func:`search_shared_shift` chooses the rows and margins to search (each
row's mean margin over the members it is out of bag for; the mean margins of
all training rows when the out-of-bag rows miss a class) and runs
:func:`~dimbsvm.svm.threshold.othr_threshold` on them; :func:`with_shared_shift`
sets the chosen shift in every member. Arrays and fitted members in, no
estimator state: :class:`~dimbsvm.svm.ensemble.EnsembleOTHRClassifier` keeps
the result as its fitted attributes.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from dimbsvm.rows import map_row_blocks, take_rows
from dimbsvm.svm._base import signed_margins
from dimbsvm.svm import range_threshold
from dimbsvm.svm.members import pooled_oob_margins
from dimbsvm.svm.threshold import othr_threshold

__all__ = ["SharedShift", "ranged_shift", "search_shared_shift", "with_shared_shift"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class SharedShift:
    """The shared shift and what it was searched on.

    Attributes
    ----------
    theta : float
        The chosen shift.
    table : dict of ndarray
        :func:`~dimbsvm.svm.threshold.othr_threshold`'s candidate table, with
        ``sample`` and ``neighbour`` as training row numbers.
    margins_used : {"oob", "train"}
        Pooled out-of-bag margins, or (when those miss a class) the mean
        margins of all training rows.
    rows : ndarray of int or None
        The training rows searched (``None`` when searched from value
        ranges, :mod:`dimbsvm.svm.range_threshold`: no task holds them all).
    margins : ndarray of float or None
        Their margins, in the order of ``rows`` (``None`` likewise).
    """

    theta: float
    table: dict
    margins_used: str
    rows: np.ndarray
    margins: np.ndarray


def search_shared_shift(X, positive, members, search, *, pooled_margins=None, n_neighbors=10, knn_method="auto",
                        random_state=None, max_candidates=None, sample_weight=None) -> SharedShift:
    """Search one shift on the members' pooled out-of-bag margins.

    Parameters
    ----------
    X : ndarray or row handle
        The training rows; read for ``candidates="othr"`` and for the
        fall-back to all training rows.
    positive : ndarray of bool
        Whether each training row is of the positive class.
    members : list of OTHRMember
    search : dict
        ``objective``, ``candidates``, ``smoothing``, ``tolerance``,
        ``min_precision`` of :func:`~dimbsvm.svm.threshold.othr_threshold`.
    pooled_margins : tuple, default=None
        ``(margins, counts)`` or ``(margins, counts, order)`` computed by the
        caller (see :meth:`~dimbsvm.svm.ensemble.EnsembleOTHRClassifier.fit_from_members`);
        by default pooled from the members' ``oob_margins``.
    n_neighbors, knn_method, random_state, max_candidates
        As :func:`~dimbsvm.svm.threshold.othr_threshold` takes them.
    sample_weight : ndarray of shape (n_samples,), default=None
        One weight per training row: the objective counts the weights of the
        rows the shift is searched on.

    Returns
    -------
    SharedShift
    """
    margins, counts, *known_order = pooled_margins if pooled_margins is not None else pooled_oob_margins(
        members, positive.size)
    rows = np.flatnonzero(counts > 0)
    n_positive = int(positive[rows].sum())
    order = None
    if 0 < n_positive < rows.size:
        used = "oob"
        if known_order and rows.size == counts.size:  # every row scored: the order as given
            order = np.asarray(known_order[0])
        elif known_order:  # the rows' part of the stable order (their margins sort before the NaN of the rest)
            order = (np.cumsum(counts > 0) - 1)[known_order[0][:rows.size]]
    else:
        logger.warning(
            "the out-of-bag rows of %d members hold %d of %d minority rows and %d of %d "
            "majority rows; the shared threshold is searched on the mean margins of all "
            "training rows instead",
            len(members),
            n_positive,
            int(positive.sum()),
            rows.size - n_positive,
            int((~positive).sum()),
        )
        used = "train"
        rows = np.arange(positive.size)
        margins = np.mean(
            [
                map_row_blocks(lambda b, m=m: signed_margins(m.estimator, b, m.margin_sign), X, rows)
                for m in members
            ],
            axis=0,
        )
    theta, table = othr_threshold(
        take_rows(X, rows) if search["candidates"] == "othr" else None,
        positive[rows],
        margins[rows],
        n_neighbors=n_neighbors,
        method=knn_method,
        random_state=random_state,
        max_candidates=max_candidates,
        order=order,
        sample_weight=None if sample_weight is None else np.asarray(sample_weight)[rows],
        **search,
    )
    for column in ("sample", "neighbour"):
        table[column] = np.where(table[column] >= 0, rows[table[column]], -1)
    logger.debug("shared threshold %.6g chosen among %d candidates on %s margins of %d rows",
                 theta, table["theta"].size, used, rows.size)
    return SharedShift(float(theta), table, used, rows, margins[rows])


def with_shared_shift(members, theta, label):
    """The members with the shared shift ``theta`` set and their out-of-bag data dropped."""
    return [
        dataclasses.replace(member, threshold=theta, optimal_threshold=theta, margins=label, oob_rows=None,
                            oob_margins=None, in_bag=None)
        for member in members
    ]


def ranged_shift(planned, summaries, picks, search, n_rows):
    """``(pooled_margins, shared_shift)`` for ``fit_from_members`` from the range tasks' results.

    A gathered plan (an input the ranges do not cover) gives the pooled
    margins whole, for the serial search; otherwise the searched shift.
    """
    if planned.gather:
        logger.debug("shared threshold: gathered %d ranges for the serial search", len(picks))
        return range_threshold.whole_margins(picks, n_rows), None
    theta, table = range_threshold.searched_shift(summaries, picks, planned, objective=search["objective"],
                                         tolerance=search["tolerance"], min_precision=search["min_precision"],
                                         max_candidates=search["max_candidates"])
    logger.debug("shared threshold %.6g chosen among %d candidates from %d value ranges", theta,
                 table["theta"].size, len(picks))
    return None, SharedShift(float(theta), table, "oob", None, None)
