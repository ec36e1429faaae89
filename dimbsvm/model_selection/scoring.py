"""Scoring a fitted model: metrics from predictions and scores, and their summary over folds.

Plain functions on arrays, no Dask.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.pipeline import Pipeline

from ..rows import block_rows_of, cache_blocks, is_in_memory, row_blocks, take_rows
from .metric_names import BINARY_METRICS, METRICS, QUALITY_METRICS, SCORE_METRICS, TIME_METRICS

__all__ = [
    "BINARY_METRICS", "METRICS", "QUALITY_METRICS", "SCORE_METRICS", "TIME_METRICS", "fitted_thresholds",
    "metrics_from_predictions", "needs_scores", "positive_scores", "predictions_and_scores", "predict_and_score_rows", "score_model", "score_rows", "summarize",
]

def fitted_thresholds(estimator) -> dict:
    """The decision-threshold shifts a fitted estimator chose, for the run record.

    OTHR/THR estimators expose ``threshold_``; ensembles also the per-member
    shifts ``thresholds_`` (after perturbation) and ``optimal_thresholds_``.
    """
    out = {}
    for attr, key in (("threshold_", "threshold"), ("thresholds_", "member_thresholds"),
                      ("optimal_thresholds_", "member_optimal_thresholds")):
        value = getattr(estimator, attr, None)
        if value is not None:
            out[key] = np.asarray(value, dtype=float).tolist() if np.ndim(value) else float(value)
    return out


def predict_and_score_rows(model, X, rows, *, pos_label, scores=True, probabilities=False, block_rows=None):
    """Predictions, positive-class scores and probabilities of ``X[rows]``, all from one read of each block.

    For in-memory ``X`` (and ``block_rows=None``) it is one block; for a row
    handle (a store) only one block of rows is held at a time.

    Returns
    -------
    y_pred : ndarray of shape (n_rows,)
    scores : ndarray of shape (n_rows,) or None
        :func:`positive_scores`, when ``scores``.
    proba : ndarray of shape (n_rows,) or None
        The positive class's probability, when ``probabilities`` and the
        model has ``predict_proba``.
    """
    rows = np.asarray(rows, dtype=np.int64)
    if block_rows is None and is_in_memory(X):
        blocks = [rows]
    else:
        blocks = row_blocks(rows, block_rows or block_rows_of(X))
    with_proba = probabilities and hasattr(model, "predict_proba")
    predictions, values, proba = [], [], []
    for block in blocks or [rows]:
        X_block = take_rows(X, block)
        for lo, hi in cache_blocks(X_block):  # an ensemble's members each pass over a piece still in cache
            piece = X_block[lo:hi]
            if scores:
                y_pred, positive = predictions_and_scores(model, piece, pos_label)
                values.append(positive)
            else:
                y_pred = model.predict(piece)
            predictions.append(y_pred)
            if with_proba:
                proba.append(np.asarray(model.predict_proba(piece))[:, list(model.classes_).index(pos_label)])
    y_pred = np.concatenate(predictions)
    return (y_pred, np.concatenate(values) if scores else None,
            np.concatenate(proba).astype(np.float64) if with_proba else None)


def score_rows(X, y, *, model, rows, metrics, pos_label) -> dict:
    """Task body: :func:`score_model` on ``rows`` of ``X`` (read only those rows)."""
    rows = np.asarray(rows)
    return score_model(model, X[rows], y[rows], metrics=metrics, pos_label=pos_label)


def score_model(model, X, y, *, metrics, pos_label) -> dict:
    """Metrics of a fitted model on rows ``X`` with true labels ``y``.

    ``fit_time`` is left to the caller (it is not a property of these rows).
    """
    start = time.perf_counter()
    if needs_scores(metrics):
        y_pred, scores = predictions_and_scores(model, X, pos_label)
    else:
        y_pred, scores = model.predict(X), None
    predict_time = time.perf_counter() - start
    return metrics_from_predictions(y, y_pred, scores, metrics=metrics, pos_label=pos_label,
                                    predict_time=predict_time)


def needs_scores(metrics) -> bool:
    """Whether any of ``metrics`` is computed from scores (:data:`SCORE_METRICS`)."""
    return any(name in SCORE_METRICS for name in metrics)


def metrics_from_predictions(y, y_pred, scores, *, metrics, pos_label, predict_time=None) -> dict:
    """The requested metrics from true labels, predictions and positive-class scores.

    ``scores`` is needed only for ``auc`` and ``average_precision``;
    ``fit_time`` is skipped (the caller's). The rows are counted as one chunk
    (:mod:`~dimbsvm.model_selection.counted_metrics`): the same computation
    as a store fold's, whose counts are made a chunk at a time.
    """
    from .counted_metrics import confusion_counts, metrics_from_counts, rank_counts, sorted_positive_scores

    y, y_pred = np.asarray(y), np.asarray(y_pred)
    classes = np.unique(np.concatenate([np.unique(y), np.unique(y_pred)]))
    positives = ranks = None
    if needs_scores(metrics):
        positives = sorted_positive_scores(y, scores, pos_label)
        ranks = rank_counts(np.asarray(scores, dtype=np.float64)[y != pos_label], positives,
                            precision_curve="average_precision" in metrics)
    return metrics_from_counts(confusion_counts(y, y_pred, classes), classes, metrics=metrics, pos_label=pos_label,
                               positives=positives, ranks=ranks, predict_time=predict_time)


def predictions_and_scores(model, X, pos_label):
    """``(model.predict(X), positive_scores(model, X, pos_label))``, each row passed through the model once.

    A pipeline's steps transform ``X`` once; a final estimator with
    ``predict_and_decision`` (dimbsvm's classifiers) gives both from one
    decision function, an ensemble from one pass of its members. Any other
    model is asked twice.
    """
    final, data = model, X
    if isinstance(model, Pipeline) and hasattr(model[-1], "predict_and_decision"):
        final = model[-1]
        data = model[:-1].transform(X) if len(model) > 1 else X
    if not hasattr(final, "predict_and_decision"):
        return model.predict(X), positive_scores(model, X, pos_label)
    y_pred, decision = final.predict_and_decision(data)
    return y_pred, _oriented_to(final, np.asarray(decision, dtype=float), pos_label)


def positive_scores(model, X, pos_label):
    """Scores that grow with the likelihood of ``pos_label``, for ROC-AUC.

    Uses ``decision_function`` (scikit-learn's convention: positive means
    ``classes_[1]``) or, failing that, ``predict_proba``.
    """
    if hasattr(model, "decision_function"):
        return _oriented_to(model, np.asarray(model.decision_function(X), dtype=float), pos_label)
    return np.asarray(model.predict_proba(X))[:, list(model.classes_).index(pos_label)]


def _oriented_to(model, decision, pos_label):
    """A decision function's values as scores of ``pos_label`` (scikit-learn's: positive means ``classes_[1]``)."""
    classes = list(model.classes_)
    if decision.ndim == 1:
        return decision if classes.index(pos_label) == 1 else -decision
    return decision[:, classes.index(pos_label)]


def summarize(records, metrics) -> dict:
    """Mean, standard deviation, min and max of each metric over fold records.

    Examples
    --------
    >>> summarize([{"g_mean": 0.5}, {"g_mean": 0.7}], ["g_mean"])["g_mean"]["mean"]
    0.6
    """
    summary = {}
    for name in metrics:
        values = np.array([r[name] for r in records], dtype=float)
        summary[name] = {
            "mean": round(float(values.mean()), 12),
            "std": float(values.std(ddof=1)) if len(values) > 1 else 0.0,
            "min": float(values.min()),
            "max": float(values.max()),
            "n": int(len(values)),
        }
    return summary
