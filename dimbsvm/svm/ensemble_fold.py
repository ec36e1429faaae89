"""The ensemble's fit tasks of one fold: what :class:`~dimbsvm.svm.EnsembleOTHRClassifier` adds to the engine's plan.

The fold engine hands the ensemble a :class:`~dimbsvm.fold_data.context.FoldContext`
(:meth:`~dimbsvm.svm.ensemble_plan.MemberPlanning.plan_fold_fit`) and this
module adds, beside the estimator:

* the members, planned from the fold's training labels (or only their class
  counts): one task per member, or a few tasks of many members on a small
  fold in memory, each finished member saved in the part store;
* over a store, members that keep only their bags: every member's bag drawn
  once (from the class counts where it can be, :mod:`~dimbsvm.svm.counted_bags`,
  else from one pass over the labels, :mod:`~dimbsvm.svm.bag_bodies`) and cut
  out of each chunk by one read, which also gives the scaler's statistics;
  the out-of-bag margins pooled a chunk at a time (:mod:`~dimbsvm.svm.pooled_oob`)
  and the shared threshold searched by value-range tasks
  (:mod:`~dimbsvm.svm.threshold_tasks`);
* with ``screen_members``, the two rounds of members (:mod:`~dimbsvm.svm.screened_fold`);
* :func:`assemble_members`: the fitted ensemble from its members, the fold's
  ``(estimator, seconds)`` the engine scores.

No Dask here: tasks go into a :class:`~dimbsvm.parallel.TaskPlan`.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
from sklearn.base import clone

from .._counts import minority_count
from ..fold_data.context import FoldContext, FoldFit
from ..fold_data.prepared import PreparedFold, row_view, training_data
from ..fold_data.spans import chunk_index
from ..rows import RowSubset
from .bag_bodies import gather_block, member_bags, range_and_gather_block
from .counted_bags import counted_bags, draws_from_counts, gather_counted_block
from .parts import fit_part, fit_parts, fitted_parts, parts_of
from .pooled_oob import pooled_margins, pooled_oob_block
from .screened_fold import add_screened_fit
from .shared_threshold import ranged_shift
from .task_costs import FoldCosts
from .threshold_tasks import add_ranged_search, range_search_params

__all__ = ["MEMBER_TASK_ROWS", "RANGED_THRESHOLD", "assemble_members", "members_per_task", "plan_ensemble_fold"]

#: Search an ensemble's shared threshold over a store with value-range tasks
#: (:mod:`dimbsvm.svm.threshold_tasks`; the same result, bit for bit),
#: instead of in the one assemble task per fold.
RANGED_THRESHOLD = True

#: An in-memory fold's ensemble members are fitted in batches of about this many training rows
#: (one task per batch): on small folds a member takes less time than a task's scheduling.
MEMBER_TASK_ROWS = 20_000


def members_per_task(n_train: int) -> int:
    """Members one task fits on a fold of ``n_train`` in-memory training rows (at least one).

    Examples
    --------
    >>> members_per_task(300), members_per_task(5_000), members_per_task(20_001)
    (66, 4, 1)
    """
    return max(1, MEMBER_TASK_ROWS // max(int(n_train), 1))


def plan_ensemble_fold(estimator, context: FoldContext) -> FoldFit:
    """Add an ensemble's fit tasks of one fold to ``context.plan``.

    Parameters
    ----------
    estimator : EnsembleOTHRClassifier
        Unfitted (cloned in every task).
    context : FoldContext

    Returns
    -------
    FoldFit
    """
    plan, ctx = context.plan, context
    X, y = ctx.X, ctx.y
    parts, seeds = parts_of(estimator, ctx.train_labels)
    # Members pooling out-of-bag margins over a store keep only their bags, and the margins of every
    # training row are computed one chunk at a time for all members at once (instead of each member
    # scoring every other row and sending those margins to one task).
    by_chunk = (seeds is not None and len(ctx.train_chunks) > 1 and not ctx.n_feature_stages
                and estimator.pools_out_of_bag())
    if by_chunk:
        parts = [replace(part, member=part.member.keeping_bag_only()) for part in parts]
    costs = FoldCosts.of(estimator, parts, n_train=ctx.n_train, n_test=ctx.n_test,
                         n_minority=minority_count(ctx.train_labels), n_feature_stages=ctx.n_feature_stages)
    chunk_rows = ctx.n_train / max(len(ctx.train_chunks), 1)  # rows of a chunk's share, on average
    # The members' bags cut out of each chunk in one pass (not a full read per member), in the same read as
    # the chunk's scaler statistics when those are merged from chunks. Every member's bag drawn in one task:
    # from the fold's class counts where the bags are drawn by class rank (found in the chunks by their
    # reads, so no task holds the fold's rows), else from one pass over the fold's training labels.
    gathered, bags = None, None
    counted = (by_chunk and ctx.stage is None and ctx.rows_from_labels is not None
               and all(draws_from_counts(part.member) for part in parts))
    if counted:
        counts = ctx.train_labels
        bags = plan.add(counted_bags, dict(parts=parts, classes=counts.classes, counts=counts.counts),
                        name="bag", priority=10)
        gathered = [plan.add(gather_counted_block, dict(X=X, y=y, bags=bags, with_range=ctx.merged_ranges,
                                                        spill=ctx.run_spill, key=ctx.key, **ctx.at(span)),
                             name="read" if ctx.merged_ranges else "gather", cost=costs.read(chunk_rows),
                             affinity=chunk_index(span))
                    for span in ctx.train_chunks]
    elif by_chunk and ctx.stage is None:
        bags = plan.add(member_bags, dict(y=y, rows=ctx.rows(), parts=parts), name="bag", priority=10,
                        cost=costs.bag() * len(parts))
        gathered = [plan.add(range_and_gather_block, dict(X=X, bags=bags, spill=ctx.run_spill, key=ctx.key,
                                                          **ctx.at(span)), name="read",
                             cost=costs.read(chunk_rows), affinity=chunk_index(span))
                    if ctx.merged_ranges else plan.add(gather_block, dict(X=X, bags=bags, span=span), name="gather",
                                                       cost=costs.read(chunk_rows), affinity=chunk_index(span))
                    for span in ctx.train_chunks]
    prepared = ctx.prepare(gathered if ctx.merged_ranges else None)
    common = dict(X=X, y=y, prepared=prepared, estimator=estimator)
    # row weights and routed fit arguments: arrays in memory only (every store path below is a job's, without them)
    for name in ("sample_weight", "fit_params"):
        if getattr(ctx, name) is not None:
            if by_chunk:
                raise ValueError(f"{name} reaches an ensemble fitted on arrays in memory only")
            common[name] = getattr(ctx, name)
    saving = ctx.part_store is not None and len(parts) > 1
    screens = not estimator.plans_members_up_front()
    batch = members_per_task(ctx.n_train) if not saving and not ctx.in_store else 1
    if screens:  # two rounds of member tasks, the second chosen by the first; the ensemble is the fold's one part
        fitted = add_screened_fit(plan, rows=ctx.rows(), batch=batch,
                                  screening=clone(estimator).plan_screening(ctx.train_labels),
                                  sizes=dict(n_train=ctx.n_train, n_test=ctx.n_test,
                                             n_minority=minority_count(ctx.train_labels)), **common)
        return FoldFit(prepared, fitted, by_chunk=False, costs=costs)
    members, saved_parts, reused = [], {}, 0
    if batch > 1:  # members of a small in-memory fold: a few tasks of many members each
        members = [plan.add(fit_parts, dict(common, rows=ctx.rows(), parts=parts[i:i + batch]), name="members",
                            cost=costs.part() * len(parts[i:i + batch]))
                   for i in range(0, len(parts), batch)]
    else:
        for part in parts:
            found = ctx.part_store.load(ctx.key, part.index) if saving else None
            if found is not None:
                members.append(found)
                reused += 1
                continue
            ref = plan.add(fit_part, dict(common, rows=None if counted else ctx.rows(), part=part,
                                          gathered=gathered, bags=bags),
                           watch=saving, name="member", cost=costs.part())
            if saving:
                saved_parts[ref.id] = (ctx.key, part.index)
            members.append(ref)
    pooled, ranged = None, {}
    search = range_search_params(estimator) if by_chunk and RANGED_THRESHOLD else None
    if search is not None:
        # the shared threshold searched by value-range tasks, not inside the one assemble task
        ranged = add_ranged_search(plan, X=X, y=y, prepared=prepared, parts=members, at=ctx.at,
                                   train_chunks=ctx.train_chunks, n_train=ctx.n_train,
                                   pos_label=parts[0].member.pos_label, search=search,
                                   oob_cost=costs.scored(chunk_rows), spill=ctx.run_spill, key=ctx.key)
    elif by_chunk:
        pooled = [plan.add(pooled_oob_block, dict(X=X, prepared=prepared, parts=members, **ctx.at(span)),
                           name="oob", cost=costs.scored(chunk_rows), affinity=chunk_index(span))
                  for span in ctx.train_chunks]
    # a fold whose members fitted on bags found by rank is assembled from its class counts (the labels and rows
    # of every training row read there only where the shared threshold falls back to the serial search)
    rows = (dict(rows=None, rows_from_labels=ctx.rows_from_labels, train_counts=ctx.train_labels) if counted
            else dict(rows=ctx.rows()))
    fitted = plan.add(assemble_members, dict(common, members=members, seeds=seeds, pooled=pooled, **ranged, **rows),
                      name="assemble", cost=costs.assemble(), gathers=True)
    return FoldFit(prepared, fitted, by_chunk=by_chunk, costs=costs, saved_parts=saved_parts, reused=reused)


def assemble_members(X, y, prepared: PreparedFold, rows, members, *, estimator, seeds, pooled=None,
                     range_plan=None, range_summaries=None, range_picks=None, range_search=None,
                     train_counts=None, rows_from_labels=None, sample_weight=None, fit_params=None):
    """Task body: ``(fitted ensemble, seconds of its members and of this assembly)`` from its members.

    ``pooled`` are the :func:`~dimbsvm.svm.pooled_oob.pooled_oob_block` results of every chunk of the
    training rows, for an ensemble whose members kept only their bags. The
    ``range_*`` arguments instead carry the shared threshold searched by
    range tasks (:func:`~dimbsvm.svm.threshold_tasks.add_ranged_search`).
    ``rows=None``: a store fold known by its ``train_counts`` (a
    :class:`~dimbsvm._counts.ClassCounts`), assembled from them where the
    range tasks searched the threshold; where the search falls back to every training row's margin,
    the fold's rows are computed here by ``rows_from_labels``. ``sample_weight``: one weight per row of
    ``X``, the training rows' counted by the shared search (``fit_params``, the members' own, are not read).
    """
    start = time.perf_counter()
    members = fitted_parts(members)
    fitted = [member for member, _ in members]
    if rows is None and range_plan is not None and not range_plan.gather:
        _, shared_shift = ranged_shift(range_plan, range_summaries, range_picks, range_search,
                                       int(np.sum(train_counts.counts)))
        final = clone(estimator).fit_from_members(row_view(X, prepared, None), train_counts, fitted, seeds,
                                                  shared_shift=shared_shift)
    else:
        if rows is None:
            rows = rows_from_labels(y)
        X_train, y_train, train = training_data(X, y, prepared, rows)
        if train is not None:  # raw rows: the ensemble sees the training rows in fold order
            X_train, y_train = RowSubset(X_train, train), np.asarray(y_train)[train]
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight)[rows.train]
        pooled_margins_ = shared_shift = None
        if pooled is not None:
            pooled_margins_ = pooled_margins(pooled, len(rows.train))
        elif range_plan is not None:
            pooled_margins_, shared_shift = ranged_shift(range_plan, range_summaries, range_picks, range_search,
                                                         len(rows.train))
        final = clone(estimator).fit_from_members(X_train, y_train, fitted, seeds, pooled_margins=pooled_margins_,
                                                  shared_shift=shared_shift, sample_weight=sample_weight)
    return final, sum(seconds for _, seconds in members) + time.perf_counter() - start
