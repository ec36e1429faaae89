"""A job's ensemble as (repeat, fold, member) tasks.

For :class:`~dimbsvm.svm.EnsembleOTHRClassifier` a job does not fit each
fold's ensemble inside one task. Every fold becomes

1. a *prepare* task: the preprocessing (and feature stages) fitted on the
   fold's training rows, once, shared by the fold's members;
2. one *member* task per ensemble member: draws its bag from the labels,
   reads only the bag's rows (and the out-of-bag rows a block at a time, for
   the pooled threshold), fits one member;
3. a *finish* task: the shared threshold from the members' out-of-bag
   margins, then the test rows scored a block at a time.

All folds' tasks are submitted together, so members of different folds run
side by side. Each task rebuilds its rows from (seed, fold) and reads them
itself, so with a Zarr store and no feature stages no task holds more than a
bag or a block of rows. Results equal those of fitting the pipeline in one
process (:func:`dimbsvm.evaluation.evaluate_fold`): the same seeds, the same
bags, the same rows. Finished members are saved as they arrive, so an
interrupted run resumes without refitting them.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from distributed import as_completed
from sklearn.base import clone
from sklearn.pipeline import make_pipeline

from ..evaluation import fitted_thresholds, fold_indices, metrics_from_predictions, positive_scores, preprocessing_steps
from ..distributed.fanout import share, show_progress
from ..rows import RowSubset, TransformedRows, block_rows_of, map_row_blocks, row_blocks, take_rows
from ..svm.ensemble import EnsembleOTHRClassifier, fit_member
from .artifacts import load_object, save_object

__all__ = ["PreparedFold", "is_member_fanout", "fold_rows", "prepare_fold", "fit_fold_member", "finish_fold",
           "run_ensemble_folds"]

logger = logging.getLogger(__name__)


def is_member_fanout(estimator) -> bool:
    """True when a job fans this estimator out as (repeat, fold, member) tasks."""
    return isinstance(estimator, EnsembleOTHRClassifier)


@dataclass
class PreparedFold:
    """The fitted steps before the ensemble, for one fold.

    Attributes
    ----------
    steps : list of transformers
        Imputer, scaler and feature stages, fitted on the training rows.
    train_features : array or None
        With feature stages: the training rows as the stages output them at
        fit time (``fit_transform``; e.g. structural features leave each
        training row out of its own neighbourhood). ``None`` without feature
        stages: members read raw rows and apply ``steps`` themselves.
    fit_time : float
        Seconds spent fitting the steps.
    """

    steps: list
    train_features: object
    fit_time: float

    def transformer(self):
        return make_pipeline(*self.steps) if self.steps else None


def fold_rows(y, *, seed, fold, n_splits):
    """Training and test rows of (seed, fold); ``fold=None`` means every row for training."""
    if fold is None:
        return np.arange(len(y)), np.empty(0, dtype=np.int64)
    return fold_indices(y, n_splits=n_splits, seed=seed, fold=fold)


def prepare_fold(X, y, *, seed, fold, n_splits, scaler, impute, features) -> PreparedFold:
    """Task body: fit the fold's preprocessing and feature stages on its training rows.

    Without imputation and feature stages the scaler is fitted with
    ``partial_fit`` a block of rows at a time (exact for min-max scaling), so
    a store larger than memory is never held whole. Otherwise the training
    rows are read at once.
    """
    start = time.perf_counter()
    train, _ = fold_rows(y, seed=seed, fold=fold, n_splits=n_splits)
    steps = preprocessing_steps(scaler=scaler, impute=impute, features=features)
    train_features = None
    if not features and impute == "none":
        for step in steps:  # at most one scaler
            for block in row_blocks(train, block_rows_of(X)):
                step.partial_fit(take_rows(X, block))
    else:
        Xt = take_rows(X, train)
        for step in steps:
            Xt = step.fit_transform(Xt, y[train])
        train_features = Xt if features else None
    return PreparedFold(steps=steps, train_features=train_features, fit_time=time.perf_counter() - start)


def _member_data(X, y, prepared: PreparedFold, train):
    """The (X, y, rows) a member draws from: stage outputs, or raw rows transformed on read."""
    if prepared.train_features is not None:
        return prepared.train_features, np.asarray(y)[train], None
    return TransformedRows(X, prepared.transformer()), y, train


def fit_fold_member(X, y, prepared: PreparedFold, *, seed, fold, n_splits, member_seed, params):
    """Task body: one ensemble member on one fold (:func:`~dimbsvm.svm.ensemble.fit_member`)."""
    start = time.perf_counter()
    train, _ = fold_rows(y, seed=seed, fold=fold, n_splits=n_splits)
    X_member, y_member, rows = _member_data(X, y, prepared, train)
    member = fit_member(X_member, y_member, int(member_seed), rows=rows, **params)
    return member, time.perf_counter() - start


def finish_fold(X, y, prepared: PreparedFold, members, *, seed, fold, n_splits, estimator, seeds,
                metrics, pos_label):
    """Task body: assemble the fold's ensemble and score its test rows (or return the model).

    Returns
    -------
    record : dict or Pipeline
        The fold's record, as :func:`dimbsvm.evaluation.evaluate_fold` returns
        it; for ``fold=None`` the fitted pipeline itself.
    """
    start = time.perf_counter()
    train, test = fold_rows(y, seed=seed, fold=fold, n_splits=n_splits)
    fitted = [member for member, _ in members]
    X_member, _, rows = _member_data(X, y, prepared, train)
    if rows is not None:  # raw rows: the ensemble sees the training rows in fold order
        X_member = RowSubset(X_member, rows)
    ensemble = clone(estimator).fit_from_members(X_member, np.asarray(y)[train], fitted, seeds)
    model = make_pipeline(*prepared.steps, ensemble)
    fit_time = prepared.fit_time + sum(t for _, t in members) + time.perf_counter() - start
    if fold is None:
        return model
    start = time.perf_counter()
    y_pred = map_row_blocks(model.predict, X, test, block_rows=_block_rows(X))
    scores = (map_row_blocks(lambda block: positive_scores(model, block, pos_label), X, test,
                             block_rows=_block_rows(X)) if "auc" in metrics else None)
    predict_time = time.perf_counter() - start
    record = {"seed": int(seed), "fold": int(fold), "n_train": int(len(train)), "n_test": int(len(test))}
    record.update(metrics_from_predictions(np.asarray(y)[test], y_pred, scores, metrics=metrics,
                                           pos_label=pos_label, predict_time=predict_time))
    if "fit_time" in metrics:
        record["fit_time"] = fit_time
    record.update(fitted_thresholds(ensemble))
    return record


def _block_rows(X):
    return getattr(X, "block_rows", None)


def run_ensemble_folds(client, *, estimator, keys, data, n_splits, scaler, impute, features, metrics, pos_label,
                       retries, member_dir: Path | None, on_record=None, progress=True, label="tasks"):
    """Fit and score ``keys`` = [(seed, fold), ...] as (prepare, member..., finish) tasks.

    Parameters
    ----------
    client : distributed.Client
    estimator : EnsembleOTHRClassifier
        Unfitted template.
    keys : list of (int, int or None)
        The folds; ``fold=None`` fits on every row and yields the model.
    data : JobData
    member_dir : path or None
        Where finished members are saved (and found on resume), one skops
        file per (seed, fold, member); a fold's files are removed once its
        record is saved. ``None`` keeps nothing.
    on_record : callable, default=None
        ``on_record(key, result)`` as each fold finishes.

    Returns
    -------
    results : list
        Records (or models, for ``fold=None``) in the order of ``keys``.
    reused_members : int
        Members loaded from ``member_dir`` rather than refitted.
    """
    X_ref, y_ref = share(client, data.X), share(client, data.y)
    common = dict(n_splits=n_splits)
    finishes, member_futures, reused = {}, {}, 0
    for seed, fold in keys:
        train, _ = fold_rows(data.y, seed=seed, fold=fold, n_splits=n_splits)
        planner = clone(estimator)
        seeds, params = planner.plan_members(data.y[train])
        prepared = client.submit(prepare_fold, X_ref, y_ref, seed=seed, fold=fold, scaler=scaler, impute=impute,
                                 features=features, pure=False, retries=retries, **common)
        members = []
        for m, member_seed in enumerate(seeds):
            path = _member_path(member_dir, seed, fold, m)
            if path is not None and path.exists():
                members.append(load_object(path))
                reused += 1
                continue
            future = client.submit(fit_fold_member, X_ref, y_ref, prepared, seed=seed, fold=fold,
                                   member_seed=int(member_seed), params=params, pure=False, retries=retries,
                                   **common)
            member_futures[future.key] = (future, path)
            members.append(future)
        finishes[(seed, fold)] = client.submit(
            finish_fold, X_ref, y_ref, prepared, members, seed=seed, fold=fold, estimator=estimator, seeds=seeds,
            metrics=tuple(metrics), pos_label=pos_label, pure=False, retries=retries, **common)
    if reused:
        logger.info("reusing %d finished ensemble member(s) from %s", reused, member_dir)

    by_finish = {future.key: key for key, future in finishes.items()}
    results = {}
    watched = [future for future, _ in member_futures.values()] + list(finishes.values())
    total = len(watched) + len(keys)  # + the prepare tasks, counted with their fold
    done = 0
    try:
        for future in as_completed(watched):
            result = future.result()  # re-raises the task's own error
            done += 1
            if future.key in member_futures:
                _, path = member_futures.pop(future.key)
                if path is not None:
                    save_object(result, path)
            else:
                key = by_finish[future.key]
                results[key] = result
                done += 1
                if on_record is not None:
                    on_record(key, result)
                _remove_members(member_dir, *key)
            if progress:
                show_progress(done, total, label)
    finally:
        if progress and watched:
            sys.stderr.write("\n")
        for future in watched:
            future.cancel()
    logger.info("%d fold(s) as %d tasks finished", len(keys), total)
    return [results[key] for key in keys], reused


def _member_path(member_dir, seed, fold, m):
    if member_dir is None:
        return None
    return Path(member_dir) / f"seed{seed}-fold{'all' if fold is None else fold}-member{m}.skops"


def _remove_members(member_dir, seed, fold):
    if member_dir is None:
        return
    for path in Path(member_dir).glob(f"seed{seed}-fold{'all' if fold is None else fold}-member*.skops"):
        path.unlink(missing_ok=True)
