"""The plain task bodies of a fold: its rows, its preparation, its finish.

No Dask here (:mod:`dimbsvm.model_selection.folds` builds the tasks,
:mod:`dimbsvm.distributed` runs them). Every body receives the data (an
array or a row handle on a store), the labels and the fold's rows, and reads
only the rows it needs.

1. :func:`prepare_fold` fits the preprocessing and feature stages on the
   fold's training rows, once, for every task that fits;
2. the estimator is fitted between them (:func:`~dimbsvm.svm.parts.fit_part`,
   or an estimator's own tasks, :mod:`~dimbsvm.fold_data.context`);
3. :func:`finish_fold` makes the model and, when the fold has test rows,
   predicts and scores them in one pass over those rows.

Over a store, the same steps are cut into one task per stored chunk
(:mod:`~dimbsvm.model_selection.chunk_bodies`).
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import clone
from sklearn.pipeline import make_pipeline

from ..fold_data.prepared import FoldRows, PreparedFold, row_view, training_data
from ..rows import RowSubset, block_rows_of, row_blocks, take_rows
from ..svm.parts import fitted_parts
from .fold_result import FoldPredictions, FoldResult
from .pipeline import preprocessing_steps
from .scoring import fitted_thresholds, metrics_from_predictions, needs_scores, predict_and_score_rows

__all__ = ["AssignedRows", "assigned_rows", "every_row", "finish_fold", "fold_assignment", "fold_rows",
           "handed_predictions", "prepare_fold"]


def fold_rows(y, *, n_splits=None, seed=None, fold=None, test_from=None) -> FoldRows:
    """Task body: the rows of CV fold ``(seed, fold)`` (``fold=None``: every row, for training).

    ``test_from``: a holdout instead, rows before it for training, the rest for testing.

    Computed where the tasks run, from the labels (a store's labels handle
    reads them there), so a fold's index arrays never travel in the task
    graph; the split is deterministic, the same as the client's.
    """
    from .splits import fold_indices

    if test_from is not None:
        return FoldRows(np.arange(int(test_from)), np.arange(int(test_from), len(y)))
    if fold is None:
        return FoldRows(np.arange(len(y)), np.empty(0, dtype=np.int64))
    # this fold's rows only (the split is one pass; the other folds' index arrays are not built)
    return FoldRows(*fold_indices(np.asarray(y), n_splits=n_splits, seed=seed, fold=fold))


class AssignedRows:
    """A store fold's rows as its repeat's fold assignment and the fold's number; index arrays built where used.

    What a task graph carries for a fold: one byte a row for the repeat (the
    fold each row is tested in, :func:`fold_assignment`), not the fold's two
    index arrays of eight bytes a row. A process builds ``train`` and
    ``test`` the first time one of its tasks asks for them and keeps them on
    this object, which a worker hands to each of its tasks (they are not
    pickled with it). ``assignment=None``: every row is a training row (a
    final model).

    Parameters
    ----------
    assignment : ndarray of int or None
    fold : int or None
    n_rows : int
    """

    def __init__(self, assignment, fold, n_rows):
        self.assignment, self.fold, self.n_rows = assignment, fold, int(n_rows)

    @property
    def train(self) -> np.ndarray:
        if "_train" not in self.__dict__:
            self._train = (np.arange(self.n_rows) if self.assignment is None
                           else np.flatnonzero(self.assignment != self.fold))
        return self._train

    @property
    def test(self) -> np.ndarray:
        if "_test" not in self.__dict__:
            self._test = (np.empty(0, dtype=np.int64) if self.assignment is None
                          else np.flatnonzero(self.assignment == self.fold))
        return self._test

    def __getstate__(self):
        return {"assignment": self.assignment, "fold": self.fold, "n_rows": self.n_rows}


def fold_assignment(y, *, n_splits, seed) -> np.ndarray:
    """Task body: the fold each row is tested in, for one repeat (:func:`~dimbsvm.model_selection.splits.fold_of_rows`)."""
    from .splits import fold_of_rows

    return fold_of_rows(np.asarray(y), n_splits=n_splits, seed=seed)


def assigned_rows(assignment, *, fold) -> AssignedRows:
    """Task body: fold ``fold``'s rows from its repeat's assignment (:func:`fold_assignment`)."""
    return AssignedRows(assignment, fold, len(assignment))


def every_row(y) -> AssignedRows:
    """Task body: every row a training row (a final model's fold), the index array built where used."""
    return AssignedRows(None, None, len(y))


#: An in-memory fold's training rows are preprocessed once, in the prepare task, when they take at most this
#: many bytes: its parts then slice them, where each ensemble member would preprocess its bag and every
#: out-of-bag row again. Above it (and over a store) the rows are preprocessed as they are read, so that no
#: copy of the fold is held (on a cluster it would also travel to every worker with a part of the fold).
PREPROCESSED_ONCE_BYTES = 64 * 2**20


def prepare_fold(X, y, rows: FoldRows, *, scaler, impute, features, stage=None) -> PreparedFold:
    """Task body: fit the fold's preprocessing and feature stages on its training rows.

    Without imputation and feature stages the scaler is fitted with
    ``partial_fit`` a block of rows at a time (exact for min-max scaling; one
    block, i.e. ``fit``, for in-memory data that fits in one), so a store
    larger than memory is never held whole. Otherwise the training rows are
    read at once.
    """
    start = time.perf_counter()
    steps = preprocessing_steps(scaler=scaler, impute=impute, features=features)
    train_features = None
    if not features and impute == "none":
        for step in steps:  # at most one scaler
            for block in row_blocks(rows.train, block_rows_of(X)):
                step.partial_fit(take_rows(X, block))
        if (steps and stage is None and isinstance(X, np.ndarray) and X.ndim == 2
                and rows.train.size * X.shape[1] * 8 <= PREPROCESSED_ONCE_BYTES):
            # the same values the parts' row view would give (the steps act row by row), computed once
            train_features = make_pipeline(*steps).transform(X[rows.train])
    else:
        Xt = take_rows(X, rows.train)
        for step in steps:
            Xt = step.fit_transform(Xt, y[rows.train])
        train_features = Xt if features else None
    if stage is not None:
        stage = stage.for_fold(rows.train)  # e.g. the moments of a stored similarity stage over these rows
    return PreparedFold(steps=steps, train_features=train_features, fit_time=time.perf_counter() - start,
                        stage=stage)


def fold_pipeline(prepared: PreparedFold, final):
    """The fold's fitted pipeline; with a stored stage, its standalone steps for new rows, or ``None``."""
    if prepared.stage is None:
        return make_pipeline(*prepared.steps, final)
    steps = prepared.stage.model_steps()
    return make_pipeline(*steps, final) if steps is not None else None


def scoring_inputs(X, prepared: PreparedFold, rows: FoldRows, final, model):
    """``(predictor, data)`` that scores rows of the data: the fitted pipeline on raw rows, or, with a
    stored stage (which looks rows up by number), the final estimator on the fold's row view."""
    if prepared.stage is not None:
        return final, row_view(X, prepared, rows)
    return model, X


def finish_fold(X, y, prepared: PreparedFold, rows: FoldRows, parts, *, estimator, seeds, key, metrics,
                pos_label, keep_model=False, keep_predictions=False, prediction_sink=None):
    """Task body: the fold's model from its parts, then its test rows predicted and scored in one pass.

    Parameters
    ----------
    parts : list of (fitted part, seconds)
        In part order; a batch of members as one list
        (:func:`~dimbsvm.svm.parts.fit_parts`): the fitted estimator alone,
        or the members of an ensemble a nested search fitted as tasks.
    seeds : ndarray or None
        Member seeds of such an ensemble (:func:`~dimbsvm.svm.parts.parts_of`).
    key : tuple
        ``(seed, fold)`` of a CV fold, written into the record.
    keep_model : bool, default=False
        Also return the fitted model.
    keep_predictions : bool, default=False
        Also return the test rows' predictions, positive-class scores and
        (for a model with ``predict_proba``) probabilities: out-of-fold
        predictions, in test-row order.
    prediction_sink : PredictionSink, default=None
        Where the task writes those predictions itself, if it can where it
        runs: they are then left out of the result.

    Returns
    -------
    FoldResult
        Its ``record`` for a fold with test rows (``seed``, ``fold``,
        ``n_train``, ``n_test``, the metrics, ``fit_time`` if asked, the
        chosen thresholds), its ``model`` (the fitted pipeline) when
        ``keep_model`` or the fold has no test rows, and its ``predictions``
        when ``keep_predictions`` and the sink did not take them.
    """
    start = time.perf_counter()
    parts = fitted_parts(parts)
    fitted = [part for part, _ in parts]
    if seeds is not None:
        X_train, y_train, train = training_data(X, y, prepared, rows)
        if train is not None:  # raw rows: the ensemble sees the training rows in fold order
            X_train, y_train = RowSubset(X_train, train), np.asarray(y_train)[train]
        final = clone(estimator).fit_from_members(X_train, y_train, fitted, seeds)
    else:
        [final] = fitted
    model = fold_pipeline(prepared, final)
    fit_time = prepared.fit_time + sum(seconds for _, seconds in parts) + time.perf_counter() - start
    kept_model = model if keep_model or not len(rows.test) else None
    if not len(rows.test):
        return FoldResult(model=kept_model)
    start = time.perf_counter()
    predictor, data = scoring_inputs(X, prepared, rows, final, model)
    y_pred, scores, proba = predict_and_score_rows(predictor, data, rows.test, pos_label=pos_label,
                                                   scores=needs_scores(metrics) or keep_predictions,
                                                   probabilities=keep_predictions,
                                                   block_rows=getattr(X, "block_rows", None))
    predict_time = time.perf_counter() - start
    record = {"seed": int(key[0]), "fold": int(key[1]), "n_train": int(len(rows.train)),
              "n_test": int(len(rows.test))}
    record.update(metrics_from_predictions(np.asarray(y)[rows.test], y_pred, scores, metrics=metrics,
                                           pos_label=pos_label, predict_time=predict_time))
    if "fit_time" in metrics:
        record["fit_time"] = fit_time
    record.update(fitted_thresholds(final))
    kept = None
    if keep_predictions:
        kept = handed_predictions(prediction_sink, key, rows.test, np.asarray(y)[rows.test], y_pred, scores, proba)
    return FoldResult(record=record, model=kept_model, predictions=kept)


def handed_predictions(sink, key, test, y_true, y_pred, score, proba, summaries=None) -> FoldPredictions | None:
    """A fold's out-of-fold predictions for its result: ``None`` where ``sink`` wrote them where the task runs.

    The driver then receives the fold's record alone, not an array of its
    test rows (:class:`~dimbsvm.model_selection.folds.PredictionSink`).
    ``summaries``: the sink's summaries of the fold's chunks, if it made them.
    """
    if sink is not None and sink(key, test, y_true, y_pred, score, proba, summaries=summaries):
        return None
    return FoldPredictions(test, y_pred, score, proba)
