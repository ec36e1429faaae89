"""Nested cross-validation in the fold engine: a fold whose estimator is chosen by a search on its training rows.

For one outer fold (or the final model) :func:`add_searched_fold` adds, to the
same :class:`~dimbsvm.parallel.TaskPlan` as every other fold,

* per inner fold of the outer training rows: one *prepare* task (preprocessing
  and feature stages fitted once, shared by every candidate that sets the
  same stage parameters), then per
  candidate one task that fits and scores it or, on inner folds of
  :data:`MEMBER_TASKS_FROM_ROWS` rows or more, its part tasks (an ensemble's
  members each a task) and a scoring task;
* one *select* task reading every inner score (:func:`~dimbsvm.model_selection.search.select_candidate`);
* the outer fold's prepare, its parts fitted with the chosen candidate, and
  its finish, which records the choice beside the fold's metrics.

Nothing waits for a phase to end: an outer fold's refit starts as soon as its
own inner folds are scored, while other folds' candidates are still running.
Inner folds' row numbers are computed where the tasks run, from the outer
fold's rows, so they never travel in the graph.

A candidate that raises while it is fitted or scored on an inner fold does not
stop the job unless the search says ``error_score="raise"``: the inner-fold
tasks catch the error and record it with every metric set to the search's
``error_score`` (NaN by default), as :class:`~sklearn.model_selection.GridSearchCV`
does; the selection then prefers candidates that did not fail. Transient
(I/O) errors are still raised, for the engine to retry. The outer fold's refit
of the chosen candidate is not guarded.

Task bodies here are plain functions, as in :mod:`~dimbsvm.model_selection.bodies`.
"""

from __future__ import annotations

import json
import time
import traceback
from dataclasses import dataclass, replace

import numpy as np

from ..fold_data.prepared import FoldRows
from ..parallel import TaskPlan
from ..parallel.policy import is_transient
from .._counts import minority_count
from ..svm.parts import Part, fit_part, parts_of
from ..svm.task_costs import FoldCosts, prepare_seconds
from .bodies import finish_fold, prepare_fold
from .fold_layout import store_fold_rows
from .fold_result import FoldResult
from .scoring import TIME_METRICS
from .search import Search, inner_splits, select_candidate, stage_params

__all__ = ["MEMBER_TASKS_FROM_ROWS", "FailedFit", "add_searched_fold", "fit_and_score", "fit_chosen_part",
           "fit_inner_part", "finish_chosen", "finish_inner", "inner_fold_rows", "prepare_chosen", "prepare_inner",
           "select_from_scored"]

#: Inner training folds of at least this many rows fit an ensemble candidate's members as tasks of
#: their own; smaller ones fit and score each candidate in one task, its members in turn: a member
#: on so few rows is worth far less than a task's own overhead, and a grid over many datasets
#: would otherwise be hundreds of thousands of tasks.
MEMBER_TASKS_FROM_ROWS = 100_000


def add_searched_fold(plan: TaskPlan, spec, setup, *, X, y, labels, in_store=False, assignments=None):
    """Add one outer fold's search, selection and refit to ``plan``; return its watched finish task.

    The inner folds' scoring tasks are watched too, so that progress counts
    the search; their results are the inner records (small), and callers
    read only the finish task's.

    Parameters
    ----------
    plan : TaskPlan
    spec : FoldSpec
        The outer fold (or the final model: no test rows).
    setup : FoldSetup
        As :func:`dimbsvm.model_selection.folds.add_fold` takes it; its
        ``search`` is not ``None`` (the candidates are its estimator with each
        candidate's parameters).
    X, y : TaskRef
        The shared data and labels.
    labels : ndarray
        The labels in memory (inner folds and ensemble members are planned from them).
    in_store : bool, default=False
        The data is a store: the outer fold's rows are computed where the tasks run.
    assignments : dict, default=None
        The repeats' fold assignments already in ``plan``
        (:func:`~dimbsvm.model_selection.fold_layout.store_fold_rows`).
    """
    search, scaler, impute, features, stage = setup.search, setup.scaler, setup.impute, setup.features, setup.stage
    metrics, pos_label, keep_predictions = setup.metrics, setup.pos_label, setup.keep_predictions
    estimators = search.estimators(setup.estimator)
    options = plan_candidates(estimators, labels, spec.train, search)
    # candidates that set the same stage parameters share an inner fold's prepare task
    feature_sets = search.feature_sets(features) or [list(features)] * len(estimators)
    setting = [json.dumps(stage_params(params), sort_keys=True, default=str) for params in search.candidates]
    first_of = {key: setting.index(key) for key in setting}
    if spec.split is not None and in_store:
        outer = store_fold_rows(plan, y, spec.split, assignments)
    else:
        outer = plan.share(FoldRows(np.asarray(spec.train), np.asarray(spec.test)))
    scored, error_score = [], search.error_score
    for i, (inner_train, inner_test) in enumerate(inner_splits(labels[spec.train], search.n_splits)):
        rows = plan.add(inner_fold_rows, dict(y=y, outer=outer, n_splits=search.n_splits, fold=i), name="inner-rows")
        preparing = {key: plan.add(prepare_inner, dict(X=X, y=y, rows=rows, scaler=scaler, impute=impute,
                                                       features=feature_sets[c], stage=stage, error_score=error_score),
                                   name="inner-prepare", cost=prepare_seconds(len(inner_train), len(feature_sets[c])))
                     for key, c in first_of.items()}
        y_inner_train = labels[spec.train][inner_train]
        sizes = dict(n_train=len(inner_train), n_test=len(inner_test), n_minority=minority_count(y_inner_train))
        for c, estimator in enumerate(estimators):
            prepared = preparing[setting[c]]
            if len(inner_train) < MEMBER_TASKS_FROM_ROWS:  # (priced as one fit: its members are not planned here)
                costs = FoldCosts.of(estimator, [Part(0)], **sizes)
                scored.append(plan.add(fit_and_score, dict(X=X, y=y, prepared=prepared, rows=rows, estimator=estimator,
                                                           key=(c, i), metrics=search.metrics, pos_label=pos_label,
                                                           error_score=error_score),
                                       watch=True, name="inner-score",  # watched: progress counts the search
                                       cost=costs.part() + costs.finish()))
                continue
            parts, seeds = parts_of(estimator, y_inner_train)
            costs = FoldCosts.of(estimator, parts, **sizes)
            fitted = [plan.add(fit_inner_part, dict(X=X, y=y, prepared=prepared, rows=rows, estimator=estimator,
                                                    part=part, error_score=error_score),
                               name="inner-fit", cost=costs.part()) for part in parts]
            scored.append(plan.add(finish_inner, dict(X=X, y=y, prepared=prepared, rows=rows, parts=fitted,
                                                      estimator=estimator, seeds=seeds, key=(c, i),
                                                      metrics=search.metrics, pos_label=pos_label,
                                                      error_score=error_score),
                                   watch=True, name="inner-score", cost=costs.finish()))
    # the choice is small and many refit tasks wait for it: run it first
    selection = plan.add(select_from_scored, dict(scored=scored, search=search), name="select", priority=10)
    # the refit's tasks cost what the candidates' would on average: which one is chosen is not known yet
    y_train = labels[spec.train]
    refits = [FoldCosts.of(estimator, parts, n_train=len(spec.train), n_test=len(spec.test),
                           n_minority=minority_count(y_train)) for estimator, parts, _ in options]
    n_stages = float(np.mean([len(stages) for stages in feature_sets]))
    if len(first_of) == 1:
        prepared = plan.add(prepare_fold, dict(X=X, y=y, rows=outer, scaler=scaler, impute=impute,
                                                features=feature_sets[0], stage=stage), name="prepare",
                            cost=prepare_seconds(len(spec.train), n_stages))
    else:  # the stages of the chosen candidate, known once the selection has run
        prepared = plan.add(prepare_chosen, dict(X=X, y=y, rows=outer, selection=selection,
                                                  feature_sets=plan.share(feature_sets), scaler=scaler,
                                                  impute=impute, stage=stage), name="prepare",
                            cost=prepare_seconds(len(spec.train), n_stages))
    n_parts = max(len(parts) for _, parts, _ in options)
    options = plan.share(options)
    fitted = [plan.add(fit_chosen_part, dict(X=X, y=y, prepared=prepared, rows=outer, selection=selection,
                                             options=options, index=j),
                       name="member" if n_parts > 1 else "fit", cost=float(np.mean([c.part() for c in refits])))
              for j in range(n_parts)]
    return plan.add(finish_chosen, dict(X=X, y=y, prepared=prepared, rows=outer, parts=fitted, selection=selection,
                                        options=options, key=spec.key, metrics=tuple(metrics),
                                        pos_label=pos_label, keep_model=spec.keep_model,
                                        keep_predictions=keep_predictions, prediction_sink=setup.prediction_sink),
                    watch=True, name="finish", cost=float(np.mean([c.finish() for c in refits])))


def plan_candidates(estimators, labels, train, search: Search):
    """``[(estimator, parts, seeds), ...]``: each candidate and how it would be fitted on the outer training rows."""
    if len(estimators) != len(search.candidates):
        raise ValueError(f"{len(estimators)} estimators for {len(search.candidates)} candidates")
    return [(estimator, *parts_of(estimator, labels[train])) for estimator in estimators]


def inner_fold_rows(y, *, outer: FoldRows, n_splits: int, fold: int) -> FoldRows:
    """Task body: inner fold ``fold`` of the outer training rows, as row numbers of the data."""
    train = np.asarray(outer.train)
    inner_train, inner_test = inner_splits(np.asarray(y)[train], n_splits)[fold]
    return FoldRows(train[inner_train], train[inner_test])


@dataclass(frozen=True)
class FailedFit:
    """What an inner-fold task returns in place of its result when the candidate raised.

    Attributes
    ----------
    error : str
        ``"ExceptionType: message"``.
    traceback : str
        The formatted traceback (the task's frames), for the run's logs.
    seconds : float
        How long the task ran before it raised.
    """

    error: str
    traceback: str
    seconds: float


def _guarded(error_score, body, *args, **kwargs):
    """``body(*args, **kwargs)``, or a :class:`FailedFit` when it raises and ``error_score`` is not ``"raise"``.

    Transient (I/O) errors are raised, not recorded: the engine retries the
    task (:func:`~dimbsvm.parallel.policy.is_transient`), and a retry that
    succeeds must score the candidate as if nothing had happened.
    """
    if error_score == "raise":
        return body(*args, **kwargs)
    start = time.perf_counter()
    try:
        return body(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - a candidate's failure is recorded (GridSearchCV's error_score)
        if is_transient(exc):
            raise
        return FailedFit(f"{type(exc).__name__}: {exc}", traceback.format_exc(), time.perf_counter() - start)


def _failure_record(key, metrics, error_score, failures) -> FoldResult:
    """An inner fold's record for a candidate that failed: every quality metric ``error_score``, the error kept."""
    record = {"seed": int(key[0]), "fold": int(key[1])}
    record.update({name: float(error_score) for name in metrics if name not in TIME_METRICS})
    record.update(fit_time=float(sum(f.seconds for f in failures)), predict_time=0.0, error=failures[0].error,
                  traceback=failures[0].traceback)
    return FoldResult(record=record)


def prepare_inner(X, y, rows, *, scaler, impute, features, stage=None, error_score="raise"):
    """Task body: :func:`~dimbsvm.model_selection.bodies.prepare_fold` for an inner fold (guarded: see the module)."""
    return _guarded(error_score, prepare_fold, X, y, rows, scaler=scaler, impute=impute, features=features,
                    stage=stage)


def fit_inner_part(X, y, prepared, rows, *, estimator, part, error_score="raise"):
    """Task body: :func:`~dimbsvm.svm.parts.fit_part` for an inner fold (guarded: see the module)."""
    if isinstance(prepared, FailedFit):
        return prepared
    return _guarded(error_score, fit_part, X, y, prepared, rows, estimator=estimator, part=part)


def fit_and_score(X, y, prepared, rows, *, estimator, key, metrics, pos_label, error_score="raise"):
    """Task body: one candidate fitted on an inner fold's training rows (all its parts here) and scored.

    The same parts, in the same order, as the engine's part tasks, so the
    result equals theirs.
    """
    def fit_all():
        parts, seeds = parts_of(estimator, np.asarray(y)[rows.train])
        return [fit_part(X, y, prepared, rows, estimator=estimator, part=part) for part in parts], seeds

    if isinstance(prepared, FailedFit):
        return _failure_record(key, metrics, error_score, [prepared])
    fitted = _guarded(error_score, fit_all)
    if isinstance(fitted, FailedFit):
        return _failure_record(key, metrics, error_score, [fitted])
    return finish_inner(X, y, prepared, rows, fitted[0], estimator=estimator, seeds=fitted[1], key=key,
                        metrics=metrics, pos_label=pos_label, error_score=error_score)


def finish_inner(X, y, prepared, rows, parts, *, estimator, seeds, key, metrics, pos_label, error_score="raise"):
    """Task body: a candidate's inner-fold record, its ``fit_time`` without the shared ``prepare_time``.

    The prepare task is shared by the candidates of a stage setting: its
    seconds are counted once per inner fold in the search's cost, not once
    per candidate. A candidate whose prepare or parts failed, or whose
    finishing raises (guarded: see the module), gets a record with
    ``error`` and ``traceback`` and every quality metric ``error_score``.
    """
    failed = [p for p in [prepared, *parts] if isinstance(p, FailedFit)]
    if failed:
        return _failure_record(key, metrics, error_score, failed)
    out = _guarded(error_score, finish_fold, X, y, prepared, rows, parts, estimator=estimator, seeds=seeds, key=key,
                   metrics=metrics, pos_label=pos_label)
    if isinstance(out, FailedFit):
        return _failure_record(key, metrics, error_score, [out])
    if "fit_time" in out.record:
        out.record["fit_time"] -= prepared.fit_time
        out.record["prepare_time"] = prepared.fit_time
    return out


def select_from_scored(scored, *, search: Search) -> dict:
    """Task body: :func:`select_candidate` over the inner folds' finish results."""
    inner = []
    for result in scored:
        record = dict(result.record)
        candidate, inner_fold = record.pop("seed"), record.pop("fold")
        inner.append({"candidate": candidate, "inner_fold": inner_fold, **record})
    return select_candidate(inner, search=search)


def prepare_chosen(X, y, rows, *, selection, feature_sets, scaler, impute, stage=None):
    """Task body: :func:`~dimbsvm.model_selection.bodies.prepare_fold` with the chosen candidate's feature stages."""
    return prepare_fold(X, y, rows, scaler=scaler, impute=impute, features=feature_sets[selection["index"]],
                        stage=stage)


def fit_chosen_part(X, y, prepared, rows, *, selection, options, index, gathered=None):
    """Task body: part ``index`` of the chosen candidate (``None`` when it has fewer parts)."""
    estimator, parts, _ = options[selection["index"]]
    if index >= len(parts):
        return None
    return fit_part(X, y, prepared, rows, estimator=estimator, part=parts[index], gathered=gathered)


def finish_chosen(X, y, prepared, rows, parts, *, selection, options, key, metrics, pos_label,
                  keep_model=False, keep_predictions=False, prediction_sink=None):
    """Task body: :func:`~dimbsvm.model_selection.bodies.finish_fold` with the chosen candidate.

    The result also has its ``search`` (the selection, with every candidate's
    inner scores); a fold's record has ``params``, the parameters chosen,
    and, when it records ``fit_time``, ``search_time``: the seconds of every
    inner prepare, fit and prediction, which its ``fit_time`` includes (as
    ``GridSearchCV``'s fit includes its search).
    """
    estimator, _, seeds = options[selection["index"]]
    out = finish_fold(X, y, prepared, rows, [part for part in parts if part is not None],
                      estimator=estimator, seeds=seeds, key=key, metrics=metrics, pos_label=pos_label,
                      keep_model=keep_model, keep_predictions=keep_predictions, prediction_sink=prediction_sink)
    if out.record is not None:
        out.record["params"] = dict(selection["params"])
        if "fit_time" in out.record:  # what choosing the model cost is part of fitting it, as in GridSearchCV
            out.record["fit_time"] += selection["search_time"]
            out.record["search_time"] = selection["search_time"]
    return replace(out, search=selection)
