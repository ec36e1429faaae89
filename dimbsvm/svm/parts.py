"""An estimator in parts, the contract of one that fits in members, and the task bodies that fit a part.

An estimator that satisfies :class:`FitsInMembers` (the ensemble,
:class:`~dimbsvm.svm.EnsembleOTHRClassifier`) is fitted member by member, one
task per member, then assembled, when its members are known before it is
fitted (a screening ensemble's two rounds of members are tasks of their own,
:mod:`~dimbsvm.svm.screened_fold`, and the assembled ensemble is its one
part); any other estimator is one part, itself. :func:`fit_part` fits one
part of a fold (the fold engine's one fit task of a plain estimator, a member
task of the ensemble's own fold plan, :mod:`~dimbsvm.svm.ensemble_fold`).
No Dask here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from sklearn.base import clone

from ..fold_data.prepared import FoldRows, PreparedFold, training_data
from ..rows import take_rows
from .routing import rows_of
from ._native_rng import fit_guard
from .bag_bodies import GatheredRows
from .counted_bags import CountedBags, member_inputs
from .members import MemberPlan, MemberSpec

__all__ = ["FitsInMembers", "Part", "fit_part", "fit_parts", "fitted_parts", "parts_of"]


@runtime_checkable
class FitsInMembers(Protocol):
    """An estimator whose fit is independent members, planned from the labels, then assembled.

    ``plan.members[i].fit(X, y, plan.seeds[i], rows=train)`` for every
    member of ``plan = estimator.plan_members(y[train])``, then
    ``fit_from_members(X[train], y[train], members, plan.seeds)`` must give
    the estimator ``fit(X[train], y[train])`` gives.
    """

    def plan_members(self, y) -> MemberPlan:
        """Every member's seed and :class:`~dimbsvm.svm.members.MemberSpec`, from the training labels."""

    def fit_from_members(self, X, y, members, seeds, *, pooled_margins=None, shared_shift=None, sample_weight=None):
        """The fitted estimator from its fitted members (in plan order)."""

    def pools_out_of_bag(self) -> bool:
        """Whether the members' out-of-bag margins may be computed outside them, pooled over all members."""

    def plans_members_up_front(self) -> bool:
        """Whether every member is known from the labels alone; if not, its members come in two rounds
        (:mod:`~dimbsvm.svm.screened_fold`) and it is the fold's one part."""


@dataclass(frozen=True)
class Part:
    """One unit of fitting: member ``index`` with its ``seed`` and ``member`` spec, or the whole estimator.

    Attributes
    ----------
    index : int
        Position in the fold's parts (the order the estimator assembles them in).
    seed : int or None
        The member's seed; ``None`` for a whole estimator.
    member : MemberSpec or None
        How the member is fitted; ``None`` for a whole estimator.
    """

    index: int
    seed: int | None = None
    member: MemberSpec | None = None


def parts_of(estimator, y_train):
    """The parts an estimator is fitted in, and the member seeds (``None`` for a one-part estimator).

    Parameters
    ----------
    estimator : estimator
        Unfitted; a :class:`FitsInMembers` one is planned on a clone.
    y_train : ndarray
        The training labels the members are planned from.

    Returns
    -------
    parts : list of Part
    seeds : ndarray of int or None
    """
    if not isinstance(estimator, FitsInMembers) or not estimator.plans_members_up_front():
        return [Part(0)], None
    plan = clone(estimator).plan_members(y_train)
    parts = [Part(i, int(seed), member) for i, (seed, member) in enumerate(zip(plan.seeds, plan.members))]
    return parts, np.asarray(plan.seeds)


def fit_part(X, y, prepared: PreparedFold, rows: FoldRows, *, estimator, part: Part, gathered=None, bags=None,
             sample_weight=None, fit_params=None):
    """Task body: fit one part of the fold's estimator; return ``(fitted part, seconds)``.

    An ensemble member (:func:`~dimbsvm.svm.ensemble.fit_member`) reads only
    its bag (and its out-of-bag rows a block at a time); a whole estimator
    reads the fold's training rows. ``gathered``: the member's bag rows, one
    piece per chunk (:func:`~dimbsvm.svm.bag_bodies.gather_block`), so that it reads no store;
    ``bags``: every member's bag (:func:`~dimbsvm.svm.bag_bodies.member_bags`), so that it does not
    draw its own again. ``sample_weight``: one weight per row of ``X`` (arrays in memory), the fit's rows'
    weights passed on; ``fit_params``: a member's base estimator's routed ``fit`` arguments, the same way.
    """
    start = time.perf_counter()
    if isinstance(bags, CountedBags):  # a bag of class ranks, found in the chunks: no index array of the fold
        X_bag, y_bag, drawn = member_inputs(gathered, bags, part.index, prepared.transformer())
        return part.member.fit(X_bag, y_bag, part.seed, drawn=drawn), time.perf_counter() - start
    bag = None if bags is None else bags[part.index]
    X_train, y_train, train = training_data(X, y, prepared, rows)
    if train is None:  # the stages' output: the training rows only
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight)[rows.train]
        if fit_params is not None:
            fit_params = rows_of(fit_params, rows.train, X.shape[0])
    if gathered is not None:
        X_train = GatheredRows([getattr(pieces, "pieces", pieces)[part.index] for pieces in gathered],
                               prepared.transformer(), X.shape[0])
    if part.member is not None:
        fitted = part.member.fit(X_train, y_train, part.seed, rows=train, drawn=None if bag is None else bag.drawn,
                                 sample_weight=sample_weight, fit_params=fit_params)
    else:
        if sample_weight is not None or fit_params is not None:  # (only an ensemble's fit on arrays has them)
            raise ValueError("row weights and routed fit arguments reach an ensemble's members, not a whole part")
        if train is not None:
            X_train, y_train = take_rows(X_train, train), np.asarray(y_train)[train]
        fitted = clone(estimator)
        with fit_guard(fitted):  # threads of one process share LIBLINEAR's generator
            fitted.fit(X_train, y_train)
    return fitted, time.perf_counter() - start


def fit_parts(X, y, prepared: PreparedFold, rows: FoldRows, *, estimator, parts, sample_weight=None,
              fit_params=None):
    """Task body: :func:`fit_part` of each of ``parts`` in turn; the list of its ``(fitted part, seconds)``.

    Members of a small fold take milliseconds each, less than a task's
    scheduling: a batch of them is one task.
    """
    return [fit_part(X, y, prepared, rows, estimator=estimator, part=part, sample_weight=sample_weight,
                     fit_params=fit_params)
            for part in parts]


def fitted_parts(parts):
    """``parts`` with each batch (a list from :func:`fit_parts`) spread into its ``(fitted part, seconds)``.

    Examples
    --------
    >>> fitted_parts([("a", 1.0), [("b", 2.0), ("c", 3.0)]])
    [('a', 1.0), ('b', 2.0), ('c', 3.0)]
    """
    return [item for entry in parts for item in (entry if isinstance(entry, list) else [entry])]
