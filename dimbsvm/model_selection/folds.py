"""The fold engine: every fold of a job, and its final model, as one plan of tasks.

For each fold (and for the final model, a "fold" whose training rows are all
rows and which has no test rows) the engine adds to one
:class:`~dimbsvm.parallel.TaskPlan`

* the fold's rows, sent once (:meth:`TaskPlan.share`), never inside each task;
* a *prepare* task (:func:`~dimbsvm.model_selection.bodies.prepare_fold`);
* one *part* task per ensemble member, or one for a plain estimator
  (:func:`~dimbsvm.model_selection.bodies.fit_part`);
* a *finish* task (:func:`~dimbsvm.model_selection.bodies.finish_fold`).

The whole plan is submitted at once, so members of every fold and of the
final model run side by side; without a client it runs in this process, in
order. Finished parts can be saved as they arrive and found again on resume.
A plain estimator is the one-part case of an ensemble: ``dimbsvm run``,
``dimbsvm retrain`` and the benchmark harness all go through here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np
from sklearn.base import clone

from .._counts import minority_count, unique_counts
from ..parallel import TaskPlan, run_plan
from ..rows import block_rows_of, is_in_memory
from .bag_bodies import gather_block, member_bags, range_and_gather_block
from .counted_bags import counted_bags, draws_from_counts, gather_counted_block
from .bodies import FoldRows, finish_fold, fit_part, fit_parts, prepare_fold
from .chunk_bodies import assemble_fold, minmax_block_range, model_of, pooled_oob_block, prepare_from_ranges
from .chunk_scoring import fold_positives, rank_chunk, record_from_tallies, score_chunk, tally_chunk
from .parts import FitsInMembers, parts_of
from .scoring import needs_scores
from .spans import chunk_index, chunk_spans
from .fold_layout import FoldLayout, layouts_of, store_chunk_folds, store_fold_rows
from .task_costs import FoldCosts
from .search import Search
from .screened_fold import add_screened_fit
from .searched_folds import add_searched_fold
from .threshold_tasks import add_ranged_search, range_search_params

__all__ = ["MEMBER_TASK_ROWS", "RANGED_THRESHOLD", "FoldLayout", "FoldSetup", "FoldSpec", "PartStore",
           "PredictionSink", "add_fold", "members_per_task", "run_folds"]

logger = logging.getLogger(__name__)

#: Search an ensemble's shared threshold over a store with value-range tasks
#: (:mod:`dimbsvm.model_selection.threshold_tasks`; the same result, bit for bit),
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


@dataclass(frozen=True)
class FoldSpec:
    """What to fit and score.

    Attributes
    ----------
    key : tuple
        ``(seed, fold)`` of a CV fold, or any hashable name (``("final",)``)
        for a model fitted on ``train`` without test rows.
    train, test : ndarray of int or None
        Row numbers; ``test`` empty for a model. ``None`` for a CV fold of
        a store that is planned from its counts (``split`` given and no
        search): :func:`run_folds` computes its :attr:`layout` by a task, and
        the tasks compute the rows where they run.
    keep_model : bool
        Return the fitted model of a fold with test rows too.
    split : dict or None
        ``{"n_splits", "seed", "fold"}`` when the rows are a CV fold (``fold``
        None: every row), or ``{"test_from": i}`` for a holdout of the rows
        from ``i`` on, so that tasks over a store can compute them from the
        labels where they run (:func:`~dimbsvm.model_selection.bodies.fold_rows`)
        instead of receiving the index arrays.
    layout : FoldLayout or None
        The fold's counts per chunk, for a fold without ``train`` and ``test``.
    """

    key: tuple
    train: np.ndarray | None
    test: np.ndarray | None
    keep_model: bool = False
    split: dict | None = None
    layout: FoldLayout | None = None

    @property
    def n_train(self) -> int:
        return self.layout.n_train if self.train is None else len(self.train)

    @property
    def n_test(self) -> int:
        return self.layout.n_test if self.test is None else len(self.test)


@dataclass(frozen=True)
class FoldSetup:
    """How every fold of a plan is fitted and scored: the one value the fold engine takes besides the rows.

    Attributes
    ----------
    estimator : estimator
        Unfitted template (cloned in every task).
    pos_label : object
        The positive (minority) class of the metrics.
    scaler, impute : str
        The preprocessing fitted per fold on its training rows
        (:data:`~dimbsvm.model_selection.pipeline.SCALERS`, ``IMPUTERS``).
    features : tuple of transformer
        Feature stages fitted per fold, after the scaler.
    metrics : tuple of str
        Scored on each fold's test rows.
    stage : StoredStructural or StoredSimilarity, default=None
        A stored feature stage read by row number
        (:mod:`dimbsvm.model_selection.stages`), after ``features``.
    search : Search, default=None
        Nested CV: each fold's estimator parameters are chosen among
        ``search.candidates`` on its training rows (inner folds, candidates
        and members all tasks of the one plan); each result then has
        ``"search"`` (the choice and every candidate's inner scores).
    keep_predictions : bool, default=False
        Return each fold's test-row predictions and positive-class scores
        too (``result["predictions"]``), for out-of-fold predictions.
    part_store : PartStore, default=None
        Save the parts of multi-part estimators as they finish, and reuse
        those found there instead of refitting them (not a search's parts).
    prediction_sink : PredictionSink, default=None
        With ``keep_predictions``: the task that scores a fold hands its
        predictions to this where it runs, and where the sink takes them the
        result has no ``"predictions"``.
    run_spill : RunSpill, default=None
        Where the tasks of an ensemble's shared threshold keep each chunk's
        sorted out-of-bag margins, so that a range task reads only its
        slices, and the chunks' reads keep every member's bag rows, so that
        a member reads only its own (kept in memory where the spill cannot
        take them).
    """

    estimator: object
    pos_label: object
    scaler: str = "minmax"
    impute: str = "none"
    features: tuple = ()
    metrics: tuple = ()
    stage: object = None
    search: Search | None = None
    keep_predictions: bool = False
    part_store: PartStore | None = None
    prediction_sink: PredictionSink | None = None
    run_spill: RunSpill | None = None

    def __post_init__(self):
        object.__setattr__(self, "features", tuple(self.features))
        object.__setattr__(self, "metrics", tuple(self.metrics))


class PredictionSink(Protocol):
    """Where a fold's tasks write its out-of-fold predictions themselves, so that they never reach the driver.

    The job layer gives one (:class:`dimbsvm.jobs.oof.FoldPredictionWriter`);
    it is pickled into the tasks, so it must be small and picklable. Each
    method returns whether it wrote (False: this process does not reach the
    place, and the predictions go back to the driver).
    """

    def __call__(self, key, rows, y_true, y_pred, score, proba, summaries=None) -> bool:
        """Write fold ``key``'s predictions, all its test rows at once (a fold scored in one task).

        ``summaries``: what :meth:`summarise` made of each of a store fold's
        chunks, in the tasks that scored them (None for a fold in memory).
        """

    def write_part(self, key, first, rows, y_true, y_pred, score, proba) -> bool:
        """Write one chunk's test rows of fold ``key``, ``first`` the position of its first test row."""

    def finish_parts(self, key, firsts, lengths, summaries) -> bool:
        """Write fold ``key``'s entry over the parts it is made of, with its chunks' summaries."""

    def summarise(self, y_true, y_pred, score, proba):
        """Something small of one chunk's test rows, made where they are scored, for the fold's entry."""


class RunSpill(Protocol):
    """Where a fold's chunk tasks keep what other tasks read a slice of: sorted out-of-bag margin runs, read back
    a range at a time, and an ensemble's bag rows, read back a member at a time.

    The job layer gives one (:class:`dimbsvm.jobs.threshold_runs.ThresholdRunDirectory`);
    it is pickled into the tasks, so it must be small and picklable.
    """

    def write(self, key, first, run):
        """Keep fold ``key``'s run whose first training row is ``first``; what stands for it (with the run's
        ``values``, ``rows`` and ``positive``), or ``None`` where this process cannot (the run is kept)."""

    def write_pieces(self, key, first, pieces):
        """Keep fold ``key``'s bag rows of a chunk (a list of ``CountedPiece``, one a member), ``first`` the
        chunk's first training row; what stands for the list (``[i]`` gives member ``i``'s piece), or ``None``
        where this process cannot (the pieces are kept)."""

    def forget(self, key) -> None:
        """Drop fold ``key``'s runs and bag rows once the fold has finished."""


class PartStore(Protocol):
    """Where finished parts of multi-part folds are kept, and found again on resume.

    The job layer gives one (:class:`dimbsvm.jobs.part_store.PartDirectory`:
    a directory of skops files in the partial run directory); the engine
    only calls these three methods, so it does no I/O of its own.
    """

    def load(self, key, index):
        """The saved part ``index`` of fold ``key``, or ``None``."""

    def save(self, key, index, part) -> None:
        """Keep a finished part."""

    def forget(self, key) -> None:
        """Drop a fold's parts once the fold's result is saved."""

    def flush(self) -> None:
        """Wait until every save and forget asked for is done (a store may do them in the background)."""


def add_fold(plan: TaskPlan, spec: FoldSpec, setup: FoldSetup, *, X, y, labels, block_rows: int | None = None,
             assignments: dict | None = None):
    """Add one fold's prepare / part / finish tasks to ``plan``.

    Parameters
    ----------
    plan : TaskPlan
    spec : FoldSpec
    setup : FoldSetup
        How the fold is fitted and scored. With a ``search``, the
        estimator's parameters are chosen among ``search.candidates`` on the
        fold's training rows first (nested CV,
        :func:`~dimbsvm.model_selection.searched_folds.add_searched_fold`);
        its parts are not saved in ``part_store``.
    X, y : TaskRef
        The data and labels, shared once in ``plan`` (:meth:`TaskPlan.share`).
    labels : ndarray
        The labels in memory: an ensemble's members are planned from them here.
    block_rows : int, default=None
        Rows per stored chunk when the data is a row handle on a store: the
        min-max scaler's statistics and the scoring of the test rows then run
        as one task per chunk. ``None`` (in-memory data): one task each.
    assignments : dict, default=None
        ``{(n_splits, seed): task}`` of the repeats' fold assignments already
        in ``plan``, shared by the folds of a store's repeat (added to here).

    Returns
    -------
    finish : TaskRef
        The fold's watched finish task.
    saved_parts : dict
        ``{task id: (spec key, part index)}`` of the watched part tasks whose
        results are to be saved in ``part_store``.
    reused : int
        Parts loaded from ``part_store``.
    """
    if setup.search is not None:
        finish = add_searched_fold(plan, spec, setup, X=X, y=y, labels=labels, in_store=bool(block_rows),
                                   assignments=assignments)
        return finish, {}, 0
    estimator, scaler, impute, features = setup.estimator, setup.scaler, setup.impute, setup.features
    metrics, pos_label, stage, part_store = setup.metrics, setup.pos_label, setup.stage, setup.part_store
    keep_predictions = setup.keep_predictions
    layout = spec.layout
    if spec.train is None and (layout is None or spec.split is None or not block_rows):
        raise ValueError(f"fold {spec.key} has no rows: only a store's CV fold with its layout is planned from counts")
    # the task of the fold's whole rows, added where a task needs them (a store fold's per-chunk tasks and
    # members of bags drawn from counts do not)
    if spec.split is not None and block_rows:
        # a store's fold: its rows are computed where the tasks run, not sent in the graph
        rows = _added_once(lambda: store_fold_rows(plan, y, spec.split, assignments, layout))
    else:
        rows = _added_once(lambda: plan.share(FoldRows(np.asarray(spec.train), np.asarray(spec.test))))
    # a fold planned from its layout is known by counts: the driver holds none of its rows or labels
    y_train = layout.train_counts() if spec.train is None else labels[spec.train]
    parts, seeds = parts_of(estimator, y_train)
    # one task per stored chunk needs the rows in order (a fold's are; a shuffled holdout's are not)
    in_order = spec.train is None or all(np.all(np.diff(r) > 0) for r in (spec.train, spec.test))
    if spec.train is None:
        train_chunks, test_chunks = layout.spans("train"), layout.spans("test")
    else:
        train_chunks = chunk_spans(spec.train, block_rows) if block_rows and in_order else []
        test_chunks = chunk_spans(spec.test, block_rows) if block_rows and in_order else []
    n_train, n_test = spec.n_train, spec.n_test
    at = _chunk_rows_args(plan, spec, y=y, rows=rows, stage=stage, assignments=assignments)
    train_chunk_rows = n_train / max(len(train_chunks), 1)  # rows of a chunk's share, on average
    # An ensemble pooling out-of-bag margins over a store: members keep only their bags, and the
    # margins of every training row are computed one chunk at a time for all members at once
    # (instead of each member scoring every other row and sending those margins to one task).
    pool_by_chunk = (seeds is not None and len(train_chunks) > 1 and not features
                     and isinstance(estimator, FitsInMembers) and estimator.pools_out_of_bag())
    if pool_by_chunk:
        parts = [replace(part, member=part.member.keeping_bag_only()) for part in parts]
    costs = FoldCosts.of(estimator, parts, n_train=n_train, n_test=n_test,
                         n_minority=minority_count(y_train), n_feature_stages=len(features or ()))
    merged_ranges = len(train_chunks) > 1 and scaler == "minmax" and impute == "none" and not features
    # The members' bags cut out of each chunk in one pass (not a full read per member), in the same read as
    # the chunk's scaler statistics when those are merged from chunks. Every member's bag drawn in one task:
    # from the fold's class counts where the bags are drawn by class rank (found in the chunks by their
    # reads, so no task holds the fold's rows), else from one pass over the fold's training labels.
    gathered, bags = None, None
    counted = (pool_by_chunk and stage is None and spec.train is None
               and all(draws_from_counts(part.member) for part in parts))
    if counted:
        bags = plan.add(counted_bags, dict(parts=parts, classes=layout.classes, counts=layout.train.sum(axis=0)),
                        name="bag", priority=10)
        gathered = [plan.add(gather_counted_block, dict(X=X, y=y, bags=bags, with_range=merged_ranges,
                                                        spill=setup.run_spill, key=spec.key, **at(span)),
                             name="read" if merged_ranges else "gather", cost=costs.read(train_chunk_rows),
                             affinity=chunk_index(span))
                    for span in train_chunks]
    elif pool_by_chunk and stage is None:
        bags = plan.add(member_bags, dict(y=y, rows=rows(), parts=parts), name="bag", priority=10,
                        cost=costs.bag() * len(parts))
        gathered = [plan.add(range_and_gather_block, dict(X=X, bags=bags, **at(span)), name="read",
                             cost=costs.read(train_chunk_rows), affinity=chunk_index(span))
                    if merged_ranges else plan.add(gather_block, dict(X=X, bags=bags, span=span), name="gather",
                                                   cost=costs.read(train_chunk_rows), affinity=chunk_index(span))
                    for span in train_chunks]
    if merged_ranges:
        # the scaler's statistics as one task per stored chunk, merged exactly
        ranges = gathered or [plan.add(minmax_block_range, dict(X=X, **at(span)), name="range",
                                       cost=costs.read(train_chunk_rows), affinity=chunk_index(span))
                              for span in train_chunks]
        prepared = plan.add(prepare_from_ranges, dict(ranges=ranges, scaler=scaler, stage=stage,
                                                      rows=None if stage is None else rows()),
                            name="prepare")
    else:
        prepared = plan.add(prepare_fold, dict(X=X, y=y, rows=rows(), scaler=scaler, impute=impute,
                                                features=features, stage=stage), name="prepare", cost=costs.prepare())
    fitted, saved_parts, reused = [], {}, 0
    saving = part_store is not None and len(parts) > 1
    screens = isinstance(estimator, FitsInMembers) and not estimator.plans_members_up_front()
    batch = members_per_task(n_train) if (seeds is not None or screens) and not saving and not block_rows \
        else 1
    if screens:  # two rounds of member tasks, the second chosen by the first; the ensemble is the fold's one part
        fitted = [add_screened_fit(plan, X=X, y=y, prepared=prepared, rows=rows(), estimator=estimator, batch=batch,
                                   screening=clone(estimator).plan_screening(y_train))]
    elif batch > 1:  # members of a small in-memory fold: a few tasks of many members each
        fitted = [plan.add(fit_parts, dict(X=X, y=y, prepared=prepared, rows=rows(), estimator=estimator,
                                           parts=parts[i:i + batch]), name="members",
                           cost=costs.part() * len(parts[i:i + batch]))
                  for i in range(0, len(parts), batch)]
    else:
        for part in parts:
            found = part_store.load(spec.key, part.index) if saving else None
            if found is not None:
                fitted.append(found)
                reused += 1
                continue
            ref = plan.add(fit_part, dict(X=X, y=y, prepared=prepared, rows=None if counted else rows(),
                                          estimator=estimator, part=part, gathered=gathered, bags=bags), watch=saving,
                           name="member" if seeds is not None else "fit", cost=costs.part())
            if saving:
                saved_parts[ref.id] = (spec.key, part.index)
            fitted.append(ref)
    pooled, ranged = None, {}
    search = range_search_params(estimator) if pool_by_chunk and RANGED_THRESHOLD else None
    if search is not None:
        # the shared threshold searched by value-range tasks, not inside the one assemble task
        ranged = add_ranged_search(plan, X=X, y=y, prepared=prepared, parts=fitted, at=at,
                                   train_chunks=train_chunks, n_train=n_train,
                                   pos_label=parts[0].member.pos_label, search=search,
                                   oob_cost=costs.scored(train_chunk_rows), spill=setup.run_spill, key=spec.key)
        pooled = []
    elif pool_by_chunk:
        pooled = [plan.add(pooled_oob_block, dict(X=X, prepared=prepared, parts=fitted, **at(span)),
                           name="oob", cost=costs.scored(train_chunk_rows), affinity=chunk_index(span))
                  for span in train_chunks]
    if len(test_chunks) <= 1 and pooled is None:
        finish = plan.add(finish_fold, dict(X=X, y=y, prepared=prepared, rows=rows(), parts=fitted,
                                            estimator=estimator, seeds=seeds, key=spec.key, metrics=tuple(metrics),
                                            pos_label=pos_label, keep_model=spec.keep_model,
                                            keep_predictions=keep_predictions,
                                            prediction_sink=setup.prediction_sink),
                          watch=True, name="finish", cost=costs.finish())
        return finish, saved_parts, reused
    # the test rows of a store scored as one task per stored chunk, after the model is assembled
    # a fold whose members fitted on bags found by rank is assembled from its class counts (the labels and rows
    # of every training row read there only where the shared threshold falls back to the serial search)
    by_counts = dict(rows=None, split=spec.split, train_counts=layout.train_counts()) if counted else dict(rows=rows())
    assembled = plan.add(assemble_fold, dict(X=X, y=y, prepared=prepared, parts=fitted, estimator=estimator,
                                             seeds=seeds, pooled=pooled or None, **ranged, **by_counts),
                         name="assemble", cost=costs.assemble())
    if not n_test:
        return plan.add(model_of, dict(assembled=assembled), watch=True, name="finish"), saved_parts, reused
    # each chunk's test rows scored where it is read and kept there (written as a part of the fold's file
    # where the sink reaches the run directory); the fold's record is made from their counts
    sink = setup.prediction_sink if keep_predictions else None
    score_metrics = needs_scores(metrics)
    classes = layout.classes if spec.train is None else unique_counts(labels)[0]
    scored = [plan.add(score_chunk, dict(X=X, assembled=assembled, y=y, pos_label=pos_label, **at(span),
                                         scores=score_metrics or keep_predictions, probabilities=keep_predictions,
                                         key=spec.key, prediction_sink=sink), name="score",
                       cost=costs.scored(n_test / max(len(test_chunks), 1)), affinity=chunk_index(span))
              for span in test_chunks]
    tallies = [plan.add(tally_chunk, dict(scored=chunk, classes=classes, pos_label=pos_label,
                                          score_metrics=score_metrics, keep_predictions=keep_predictions),
                        name="tally") for chunk in scored]
    ranked = {}
    if score_metrics:
        positives = plan.add(fold_positives, dict(tallies=tallies), name="positives")
        ranks = [plan.add(rank_chunk, dict(scored=chunk, positives=positives, pos_label=pos_label,
                                           precision_curve="average_precision" in metrics), name="rank")
                 for chunk in scored]
        ranked = dict(ranks=ranks, positives=positives)
    finish = plan.add(record_from_tallies, dict(assembled=assembled, tallies=tallies, key=spec.key,
                                                n_train=n_train, n_test=n_test, classes=classes,
                                                metrics=tuple(metrics), pos_label=pos_label,
                                                keep_model=spec.keep_model, keep_predictions=keep_predictions,
                                                prediction_sink=sink, **ranked),
                      watch=True, name="finish")
    return finish, saved_parts, reused


def _added_once(add):
    """``add`` called the first time the result is asked for, then its result again: a task added where needed."""
    added = []

    def once():
        if not added:
            added.append(add())
        return added[0]

    return once


def _chunk_rows_args(plan, spec: FoldSpec, *, y, rows, stage, assignments):
    """``at(span)``: the keyword arguments by which a per-chunk task finds the fold's rows in its chunk.

    A store fold planned from its counts (without a stored stage, which looks
    rows up in the fold's whole training rows) hands each chunk's task that
    chunk's folds and its place among the fold's rows
    (:func:`~dimbsvm.model_selection.spans.chunk_rows`): no per-chunk task
    then builds the fold's index arrays or reads every label. Otherwise each
    task searches the fold's shared ``rows``.
    """
    if spec.train is not None or stage is not None:
        return lambda span: dict(rows=rows(), span=span)
    chunk_folds = store_chunk_folds(plan, y, spec.split, assignments, spec.layout)
    places = spec.layout.places(spec.split.get("fold"))

    def at(span):
        chunk = chunk_index(span)
        return dict(rows=None if chunk_folds is None else chunk_folds[chunk], span=span, place=places[chunk])

    return at


def run_folds(setup: FoldSetup, X, y, specs, *, client, retries=2, on_result=None, progress=False, label="folds",
              task_labels=None):
    """Fit (and score) every spec as prepare / part / finish tasks in one plan.

    Parameters
    ----------
    setup : FoldSetup
        How every fold is fitted and scored (estimator, preprocessing,
        feature stages, metrics, positive label, search, part store).
    X : ndarray or row handle
        The data (a :class:`~dimbsvm.store.StoreRows` reads only the rows asked for).
    y : ndarray or labels handle
        All labels: read into this process only where a spec is given by its
        rows (a store's folds planned from counts need none of them here).
    specs : list of FoldSpec
    client : distributed.Client or None, keyword-only
        ``None`` runs every task here.
    retries : int, default=2
        Retries of transient (I/O) task errors.
    on_result : callable, default=None
        ``on_result(spec, result)`` as each spec finishes.
    progress : bool, default=False
    label : str
    task_labels : array-like, default=None
        The labels as tasks read them, e.g. a
        :class:`~dimbsvm.store.StoreLabels` handle, so that the task graph
        carries a path rather than the labels; default ``y``.

    Returns
    -------
    results : list of dict
        In the order of ``specs``: ``{"record": ...}`` and/or ``{"model": ...}``
        (see :func:`~dimbsvm.model_selection.bodies.finish_fold`).
    reused_parts : int
        Parts loaded from ``part_store`` rather than refitted.
    """
    # the labels in this process only where a fold is given by its rows (a fold planned from counts needs none)
    labels = np.asarray(y) if any(spec.train is not None for spec in specs) else None
    task_labels = (y if labels is None else labels) if task_labels is None else task_labels
    block_rows = None if is_in_memory(X) else block_rows_of(X)
    specs = layouts_of(specs, task_labels, block_rows=block_rows, client=client, retries=retries)
    plan = TaskPlan()
    X_ref, y_ref = plan.share(X), plan.share(task_labels)
    finishes, saved_parts, reused, assignments = {}, {}, 0, {}
    for spec in specs:
        finish, saved, n_reused = add_fold(plan, spec, setup, X=X_ref, y=y_ref, labels=labels, block_rows=block_rows,
                                           assignments=assignments)
        finishes[finish.id] = spec
        saved_parts.update(saved)
        reused += n_reused
    part_store = setup.part_store
    if reused:
        logger.info("reusing %d finished part(s) from %s", reused, part_store)

    def collect(ref, result):
        if ref.id in saved_parts:
            part_store.save(*saved_parts[ref.id], result)
            return
        if ref.id not in finishes:  # a search's inner score, watched for progress only
            return
        spec = finishes[ref.id]
        if on_result is not None:
            on_result(spec, result)
        if part_store is not None:
            part_store.forget(spec.key)
        if setup.run_spill is not None:  # the fold's threshold is searched: its runs are read no more
            setup.run_spill.forget(spec.key)

    try:
        results = run_plan(plan, client=client, retries=retries, progress=progress, label=label, on_result=collect)
    except BaseException:
        if part_store is not None:  # the parts finished before the error are kept for a resume
            try:
                part_store.flush()
            except Exception as exc:  # the run's own error is the one raised
                logger.warning("finished parts could not all be saved in %s: %s", part_store, exc)
        raise
    if part_store is not None:
        part_store.flush()
    logger.info("%d fold(s) finished (%d watched tasks)", len(specs), plan.n_watched)
    return [results[i] for i in finishes], reused
