"""A screening ensemble's members as tasks of a fold: two rounds, the second chosen by the first.

An :class:`~dimbsvm.svm.EnsembleOTHRClassifier` with ``screen_members``
cannot list its members before it is fitted (:meth:`plans_members_up_front`
is ``False``): which settings get all their members depends on the first
round's out-of-bag margins. It still fits as tasks of the one plan:

* round one: one task per screening member (or per batch of them, on a small
  fold), :func:`~dimbsvm.svm.parts.fit_part`;
* :func:`screen_block`: the survivors (a :class:`~dimbsvm.svm.grid_members.Screen`),
  from round one's members;
* round two: one task per added member (:func:`fit_added`), each reading its
  setting from the survivors when it runs, so the plan is fixed up front;
* :func:`assemble_screened`: the fitted ensemble, handed on as the fold's one
  part, ``(estimator, seconds of every member and of the assembly)``.

Plain task bodies, no Dask here (:func:`add_screened_fit` adds them to a
:class:`~dimbsvm.parallel.TaskPlan`).
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import clone

from ..rows import RowSubset
from ..fold_data.prepared import training_data
from .grid_members import screen_survivors
from .parts import Part, fit_part, fit_parts, fitted_parts
from .task_costs import FoldCosts

__all__ = ["add_screened_fit", "assemble_screened", "fit_added", "screen_block"]

# the screening task is on the fold's critical path: ahead of queued members of other folds
_PRIORITY = 5


def screen_block(y, rows, screened, *, plan, sample_weight=None):
    """Task body: the :class:`~dimbsvm.svm.grid_members.Screen` of round one's members.

    ``sample_weight``: one weight per row of the data (arrays in memory), the training rows' counted in the
    ranking.
    """
    members = [member for member, _ in fitted_parts(screened)]
    positive = np.asarray(y)[rows.train] == plan.specs[0].pos_label
    return screen_survivors(plan.settings, members, positive, plan.n_survivors,
                            None if sample_weight is None else np.asarray(sample_weight)[rows.train])


def fit_added(X, y, prepared, rows, screen, *, estimator, plan, positions, sample_weight=None, fit_params=None):
    """Task body: the second round's members at ``positions`` (of ``plan.second_round(screen.survivors)``)."""
    added = plan.second_round(screen.survivors)
    return [fit_part(X, y, prepared, rows, estimator=estimator, part=Part(i, *added[i]), sample_weight=sample_weight,
                     fit_params=fit_params)
            for i in positions]


def assemble_screened(X, y, prepared, rows, screened, added, screen, *, estimator, plan, sample_weight=None,
                      fit_params=None):
    """Task body: ``(fitted ensemble, seconds)`` from both rounds, as a whole estimator's part."""
    start = time.perf_counter()
    screened, added = fitted_parts(screened), fitted_parts(added)
    X_train, y_train, train = training_data(X, y, prepared, rows)
    if train is not None:  # raw rows: the ensemble sees the training rows in fold order
        X_train, y_train = RowSubset(X_train, train), np.asarray(y_train)[train]
    if sample_weight is not None:
        sample_weight = np.asarray(sample_weight)[rows.train]
    final = clone(estimator).fit_from_screened(X_train, y_train, plan, [m for m, _ in screened],
                                               [m for m, _ in added], screen, sample_weight=sample_weight)
    member_seconds = sum(seconds for _, seconds in screened + added)
    return final, member_seconds + time.perf_counter() - start


def add_screened_fit(plan, *, X, y, prepared, rows, estimator, screening, batch: int, sizes: dict,
                     sample_weight=None, fit_params=None):
    """Add a screening ensemble's tasks for one fold; return the ref of :func:`assemble_screened`.

    Parameters
    ----------
    plan : TaskPlan
    X, y, prepared, rows : TaskRef
        The fold's data, labels, prepared steps and rows.
    estimator : EnsembleOTHRClassifier
        Unfitted, with ``screen_members``.
    screening : ScreeningPlan
        ``clone(estimator).plan_screening(labels[train])``.
    batch : int
        Members per task (1: a task per member).
    sizes : dict
        The fold's ``n_train``, ``n_test`` and ``n_minority``, which its tasks' costs are priced from.
    sample_weight, fit_params : TaskRef, default=None
        One weight per row of the data, and the members' routed fit arguments (arrays in memory).
    """
    first = [Part(i, seed, spec) for i, (seed, spec) in enumerate(screening.first_round())]
    common = dict(X=X, y=y, prepared=prepared, rows=rows, estimator=estimator)
    weighted = {} if sample_weight is None else {"sample_weight": sample_weight}
    common.update(weighted, **({} if fit_params is None else {"fit_params": fit_params}))
    costs = FoldCosts.of(estimator, first, **sizes)
    if batch > 1:
        screened = [plan.add(fit_parts, dict(common, parts=first[i:i + batch]), name="members",
                             cost=costs.part() * len(first[i:i + batch]))
                    for i in range(0, len(first), batch)]
    else:
        screened = [plan.add(fit_part, dict(common, part=part), name="member", cost=costs.part()) for part in first]
    screen = plan.add(screen_block, dict(y=y, rows=rows, screened=screened, plan=screening, **weighted),
                      name="screen", priority=_PRIORITY, gathers=True, cost=costs.assemble())
    n_added = screening.n_added
    added = [plan.add(fit_added, dict(common, screen=screen, plan=screening,
                                      positions=tuple(range(i, min(i + batch, n_added)))),
                      name="members" if batch > 1 else "member", cost=costs.part() * (min(i + batch, n_added) - i))
             for i in range(0, n_added, max(1, batch))]
    return plan.add(assemble_screened, dict(common, screened=screened, added=added, screen=screen,
                                            plan=screening), name="ensemble", priority=_PRIORITY, gathers=True,
                    cost=costs.assemble())
