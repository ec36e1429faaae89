"""The fold engine: every fold of a job, and its final model, as one plan of tasks.

For each fold (and for the final model, a "fold" whose training rows are all
rows and which has no test rows) the engine adds to one
:class:`~dimbsvm.parallel.TaskPlan`

* the fold's rows, sent once (:meth:`TaskPlan.share`), never inside each task;
* a *prepare* task (:func:`~dimbsvm.model_selection.bodies.prepare_fold`, or
  over a store the scaler merged from one task per stored chunk);
* the fit: one task for a plain estimator (:func:`~dimbsvm.svm.parts.fit_part`),
  or the tasks an estimator that plans its own fit adds through the hook of
  :mod:`~dimbsvm.fold_data.context` (the ensemble's bags, members, pooled
  out-of-bag margins and threshold search, :mod:`~dimbsvm.svm.ensemble_fold`);
* a *finish* task (:func:`~dimbsvm.model_selection.bodies.finish_fold`), or
  over a store the test rows scored a chunk per task
  (:mod:`~dimbsvm.model_selection.chunk_scoring`) and the record made from
  their counts.

The whole plan is submitted at once, so the tasks of every fold and of the
final model run side by side; without a client it runs in this process, in
order. Finished parts an estimator's tasks mark can be saved as they arrive
and found again on resume. ``dimbsvm run``, ``dimbsvm retrain`` and the
benchmark harness all go through here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from typing import Protocol

import numpy as np

from .._counts import minority_count, unique_counts
from ..fold_data.context import FoldContext, FoldFit, PartStore, PlansFoldFit, RunSpill
from ..fold_data.prepared import FoldRows
from ..fold_data.spans import chunk_index, chunk_spans
from ..parallel import TaskPlan, run_plan
from ..rows import block_rows_of, is_in_memory
from ..svm.parts import Part, fit_part
from ..svm.task_costs import FoldCosts, prepare_seconds, read_seconds
from .bodies import finish_fold, fold_rows, prepare_fold
from .chunk_bodies import MERGED_SCALERS, assemble_fold, minmax_block_range, model_of, prepare_from_ranges
from .chunk_scoring import fold_positives, rank_chunk, record_from_tallies, score_chunk, tally_chunk
from .fold_layout import FoldLayout, layouts_of, store_chunk_folds, store_fold_rows
from .scoring import needs_scores
from .search import Search
from .searched_folds import add_searched_fold

__all__ = ["FoldLayout", "FoldPlan", "FoldSetup", "FoldSpec", "PartStore", "PredictionSink", "RunSpill", "add_fold",
           "plan_folds", "run_folds"]

logger = logging.getLogger(__name__)

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
        and members all tasks of the one plan); each result then has its
        ``search`` (the choice and every candidate's inner scores).
    keep_predictions : bool, default=False
        Return each fold's test-row predictions and positive-class scores
        too (the result's ``predictions``), for out-of-fold predictions.
    part_store : PartStore, default=None
        Save the parts of multi-part estimators as they finish, and reuse
        those found there instead of refitting them (not a search's parts).
    prediction_sink : PredictionSink, default=None
        With ``keep_predictions``: the task that scores a fold hands its
        predictions to this where it runs, and where the sink takes them the
        result has no ``predictions``.
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
    estimator, scaler, impute, features, stage = setup.estimator, setup.scaler, setup.impute, setup.features, setup.stage
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
    merged_ranges = len(train_chunks) > 1 and scaler in MERGED_SCALERS and impute == "none" and not features
    n_stages = len(features or ())

    prepared_once = []

    def prepare(ranges=None):  # the fold's one prepare task (an estimator's reads may carry the scaler's ranges)
        if not prepared_once:
            prepared_once.append(add_prepare(ranges))
        return prepared_once[0]

    def add_prepare(ranges):
        if merged_ranges:  # the scaler's statistics as one task per stored chunk, merged exactly
            ranges = ranges or [plan.add(minmax_block_range, dict(X=X, **at(span)), name="range",
                                         cost=read_seconds(train_chunk_rows), affinity=chunk_index(span))
                                for span in train_chunks]
            return plan.add(prepare_from_ranges, dict(ranges=ranges, scaler=scaler, stage=stage,
                                                      rows=None if stage is None else rows()), name="prepare")
        return plan.add(prepare_fold, dict(X=X, y=y, rows=rows(), scaler=scaler, impute=impute, features=features,
                                           stage=stage), name="prepare", cost=prepare_seconds(n_train, n_stages))

    if isinstance(estimator, PlansFoldFit):  # the estimator adds its own fit tasks
        context = FoldContext(plan=plan, key=spec.key, X=X, y=y, rows=rows, at=at, prepare=prepare,
                              rows_from_labels=partial(fold_rows, **spec.split) if spec.train is None else None,
                              train_labels=y_train, train_chunks=train_chunks, n_train=n_train, n_test=n_test,
                              in_store=bool(block_rows), merged_ranges=merged_ranges, n_feature_stages=n_stages,
                              stage=stage, part_store=setup.part_store, run_spill=setup.run_spill)
        fit = estimator.plan_fold_fit(context)
    else:  # one fit task
        costs = FoldCosts.of(estimator, [Part(0)], n_train=n_train, n_test=n_test,
                             n_minority=minority_count(y_train), n_feature_stages=n_stages)
        prepared = prepare()
        fitted = plan.add(fit_part, dict(X=X, y=y, prepared=prepared, rows=rows(), estimator=estimator, part=Part(0)),
                          name="fit", cost=costs.part())
        fit = FoldFit(prepared, fitted, by_chunk=False, costs=costs)
    metrics, pos_label, keep_predictions = tuple(setup.metrics), setup.pos_label, setup.keep_predictions
    prepared, costs = fit.prepared, fit.costs
    if len(test_chunks) <= 1 and not fit.by_chunk:
        finish = plan.add(finish_fold, dict(X=X, y=y, prepared=prepared, rows=rows(), parts=[fit.fitted],
                                            estimator=estimator, seeds=None, key=spec.key, metrics=metrics,
                                            pos_label=pos_label, keep_model=spec.keep_model,
                                            keep_predictions=keep_predictions,
                                            prediction_sink=setup.prediction_sink),
                          watch=True, name="finish", cost=costs.scored(n_test))
        return finish, fit.saved_parts, fit.reused
    # the test rows of a store scored as one task per stored chunk, after the model is assembled
    assembled = plan.add(assemble_fold, dict(prepared=prepared, fitted=fit.fitted), name="model")
    if not n_test:
        return plan.add(model_of, dict(assembled=assembled), watch=True, name="finish"), fit.saved_parts, fit.reused
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
                                                metrics=metrics, pos_label=pos_label,
                                                keep_model=spec.keep_model, keep_predictions=keep_predictions,
                                                prediction_sink=sink, **ranked),
                      watch=True, name="finish")
    return finish, fit.saved_parts, fit.reused


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
    (:func:`~dimbsvm.fold_data.spans.chunk_rows`): no per-chunk task
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


@dataclass(frozen=True)
class FoldPlan:
    """Every fold's tasks in one plan, before anything runs (:func:`plan_folds`).

    Attributes
    ----------
    plan : TaskPlan
    finishes : dict
        ``{task id: FoldSpec}`` of each fold's watched finish task.
    saved_parts : dict
        ``{task id: (spec key, part index)}`` of the part tasks whose results
        are saved in the setup's part store.
    reused : int
        Parts found in the part store instead of planned.
    """

    plan: TaskPlan
    finishes: dict
    saved_parts: dict
    reused: int


def plan_folds(setup: FoldSetup, X, y, specs, *, layouts, task_labels=None) -> FoldPlan:
    """Every spec's tasks added to one plan; nothing is run but what ``layouts`` runs.

    Parameters
    ----------
    setup, X, y, specs, task_labels
        As :func:`run_folds` takes them.
    layouts : callable
        ``layouts(specs, labels, block_rows=...)``: ``specs`` with the
        layout of each store fold planned from counts
        (:func:`~dimbsvm.model_selection.fold_layout.layouts_of` runs tasks
        for them; a price of the plan may lay them out from class totals,
        :func:`~dimbsvm.model_selection.fold_layout.expected_layouts`).

    Returns
    -------
    FoldPlan
    """
    # the labels in this process only where a fold is given by its rows (a fold planned from counts needs none)
    labels = np.asarray(y) if any(spec.train is not None for spec in specs) else None
    task_labels = (y if labels is None else labels) if task_labels is None else task_labels
    block_rows = None if is_in_memory(X) else block_rows_of(X)
    specs = layouts(specs, task_labels, block_rows=block_rows)
    plan = TaskPlan()
    X_ref, y_ref = plan.share(X), plan.share(task_labels)
    finishes, saved_parts, reused, assignments = {}, {}, 0, {}
    for spec in specs:
        finish, saved, n_reused = add_fold(plan, spec, setup, X=X_ref, y=y_ref, labels=labels, block_rows=block_rows,
                                           assignments=assignments)
        finishes[finish.id] = spec
        saved_parts.update(saved)
        reused += n_reused
    return FoldPlan(plan, finishes, saved_parts, reused)


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
    results : list of FoldResult
        :class:`~dimbsvm.model_selection.fold_result.FoldResult` in the order
        of ``specs`` (see :func:`~dimbsvm.model_selection.bodies.finish_fold`).
    reused_parts : int
        Parts loaded from ``part_store`` rather than refitted.
    """
    folds = plan_folds(setup, X, y, specs, task_labels=task_labels,
                       layouts=partial(layouts_of, client=client, retries=retries))
    plan, finishes, saved_parts, reused = folds.plan, folds.finishes, folds.saved_parts, folds.reused
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
