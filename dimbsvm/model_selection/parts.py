"""What the fold engine fits: an estimator in parts, and the contract of one that fits in members.

An estimator that satisfies :class:`FitsInMembers` (the ensemble,
:class:`~dimbsvm.svm.EnsembleOTHRClassifier`) is fitted member by member, one
task per member, then assembled, when its members are known before it is
fitted (a screening ensemble's two rounds of members are tasks of their own,
:mod:`~dimbsvm.model_selection.screened_fold`, and the assembled ensemble is
its one part); any other estimator is one part, itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from sklearn.base import clone

from ..svm.members import MemberPlan, MemberSpec

__all__ = ["FitsInMembers", "Part", "parts_of"]


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

    def fit_from_members(self, X, y, members, seeds, *, pooled_margins=None, shared_shift=None):
        """The fitted estimator from its fitted members (in plan order)."""

    def pools_out_of_bag(self) -> bool:
        """Whether the members' out-of-bag margins may be computed outside them, pooled over all members."""

    def plans_members_up_front(self) -> bool:
        """Whether every member is known from the labels alone; if not, its members come in two rounds
        (:mod:`~dimbsvm.model_selection.screened_fold`) and it is the fold's one part."""


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
