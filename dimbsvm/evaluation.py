"""Cross-validation folds and the body of one (repeat, fold) evaluation.

Plain functions on arrays, no Dask: ``distributed/`` decides where they run.
A fold is identified by its repeat seed and fold number and rebuilt from them
inside the task (stratified k-fold with shuffling is deterministic given the
seed), so tasks carry seeds, not index arrays, and every method evaluated on
the same (seed, fold) sees exactly the same rows.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import clone
from sklearn.impute import SimpleImputer
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler

from .metrics import a_mean, f_measure, g_mean
from .svm._native_rng import fit_guard

__all__ = [
    "METRICS", "SCALERS", "repeat_seeds", "fold_indices", "evaluate_fold", "fit_pipeline", "score_model", "score_rows", "summarize",
    "positive_label", "build_pipeline", "preprocessing_steps", "positive_scores", "metrics_from_predictions",
]

#: Metrics a job or suite may ask for. ``auc`` needs a score (decision_function
#: or predict_proba); the times are measured around fit and predict.
METRICS = ("g_mean", "f_measure", "auc", "a_mean", "fit_time", "predict_time")
#: Binary-only metrics.
BINARY_METRICS = ("f_measure", "auc")
SCALERS = ("minmax", "standard", "none")
IMPUTERS = ("none", "mean", "median")


def repeat_seeds(n_repeats: int, random_state: int) -> list[int]:
    """The shuffling seed of each CV repeat: ``random_state, random_state + 1, ...``.

    Consecutive seeds make the common protocol "5-fold CV repeated with seeds
    0 and 1" the setting ``n_repeats=2, random_state=0``.

    Examples
    --------
    >>> repeat_seeds(2, 0)
    [0, 1]
    """
    return [int(random_state) + r for r in range(int(n_repeats))]


def fold_indices(y, *, n_splits: int, seed: int, fold: int):
    """Train and test row indices of one fold of a shuffled stratified k-fold.

    Examples
    --------
    >>> y = np.array([0] * 8 + [1] * 4)
    >>> train, test = fold_indices(y, n_splits=4, seed=0, fold=0)
    >>> len(train), len(test), int(y[test].sum())
    (9, 3, 1)
    """
    splitter = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    for i, (train, test) in enumerate(splitter.split(np.zeros(len(y)), y)):
        if i == fold:
            return train, test
    raise ValueError(f"fold {fold} does not exist with n_splits={n_splits}")


def positive_label(y):
    """The minority class of ``y`` (ties: the larger label), the positive class of binary metrics."""
    labels, counts = np.unique(np.asarray(y), return_counts=True)
    order = np.lexsort((-labels, counts)) if np.issubdtype(labels.dtype, np.number) else np.argsort(counts, kind="stable")
    return labels[order[0]].item()


def build_pipeline(estimator, *, scaler: str = "minmax", impute: str = "none", features=()):
    """``[imputer] -> [scaler] -> [feature stages] -> estimator``, each fitted on training rows only."""
    return make_pipeline(*preprocessing_steps(scaler=scaler, impute=impute, features=features), clone(estimator))


def preprocessing_steps(*, scaler: str = "minmax", impute: str = "none", features=()) -> list:
    """The unfitted steps before the estimator: ``[imputer] [scaler] [feature stages]`` (clones)."""
    steps = []
    if impute != "none":
        steps.append(SimpleImputer(strategy=impute))
    if scaler == "minmax":
        steps.append(MinMaxScaler())
    elif scaler == "standard":
        steps.append(StandardScaler())
    elif scaler != "none":
        raise ValueError(f"unknown scaler {scaler!r}; accepted: {', '.join(SCALERS)}")
    steps.extend(clone(stage) for stage in features)
    return steps


def evaluate_fold(X, y, *, estimator, n_splits: int, seed: int, fold: int,
                  metrics=("g_mean", "f_measure"), scaler="minmax", impute="none",
                  pos_label=None, features=()) -> dict:
    """Fit on one fold's training rows, score its test rows.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    estimator : estimator
        Unfitted; cloned, so the caller's object is untouched.
    n_splits, seed, fold : int
        Identify the fold (see :func:`fold_indices`).
    metrics : sequence of str
        Names from :data:`METRICS`.
    scaler, impute : str
        Preprocessing fitted on the training rows only.
    pos_label : int or str, default=None
        Positive class for F-measure and AUC; default the minority of ``y``.
    features : sequence of transformers, default=()
        Feature stages between scaling and the estimator (cloned, fitted on
        the training rows only).

    Returns
    -------
    record : dict
        ``{"seed", "fold", "n_train", "n_test", <metric>: value, ...}``.
    """
    train, test = fold_indices(y, n_splits=n_splits, seed=seed, fold=fold)
    if pos_label is None:
        pos_label = positive_label(y)
    model = build_pipeline(estimator, scaler=scaler, impute=impute, features=features)
    start = time.perf_counter()
    with fit_guard(model):  # threads of one worker share LIBLINEAR's generator
        model.fit(X[train], y[train])
    fit_time = time.perf_counter() - start
    record = {"seed": int(seed), "fold": int(fold), "n_train": int(len(train)), "n_test": int(len(test))}
    record.update(score_model(model, X[test], y[test], metrics=metrics, pos_label=pos_label))
    if "fit_time" in metrics:
        record["fit_time"] = fit_time
    record.update(fitted_thresholds(model[-1]))
    return record


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


def fit_pipeline(X, y, *, estimator, scaler="minmax", impute="none", rows=None, features=()):
    """Task body: the job's pipeline fitted on ``rows`` (default: every row).

    ``X`` may be an array or a :class:`~dimbsvm.store.StoreRows` handle; only
    the rows used are read.
    """
    rows = np.arange(len(y)) if rows is None else np.asarray(rows)
    model = build_pipeline(estimator, scaler=scaler, impute=impute, features=features)
    with fit_guard(model):
        return model.fit(X[rows], y[rows])


def score_rows(X, y, *, model, rows, metrics, pos_label) -> dict:
    """Task body: :func:`score_model` on ``rows`` of ``X`` (read only those rows)."""
    rows = np.asarray(rows)
    return score_model(model, X[rows], y[rows], metrics=metrics, pos_label=pos_label)


def score_model(model, X, y, *, metrics, pos_label) -> dict:
    """Metrics of a fitted model on rows ``X`` with true labels ``y``.

    ``fit_time`` is left to the caller (it is not a property of these rows).
    """
    start = time.perf_counter()
    y_pred = model.predict(X)
    scores = positive_scores(model, X, pos_label) if "auc" in metrics else None
    predict_time = time.perf_counter() - start
    return metrics_from_predictions(y, y_pred, scores, metrics=metrics, pos_label=pos_label,
                                    predict_time=predict_time)


def metrics_from_predictions(y, y_pred, scores, *, metrics, pos_label, predict_time=None) -> dict:
    """The requested metrics from true labels, predictions and positive-class scores.

    ``scores`` is needed only for ``auc``; ``fit_time`` is skipped (the caller's).
    """
    record = {}
    for name in metrics:
        if name == "g_mean":
            record[name] = g_mean(y, y_pred)
        elif name == "f_measure":
            record[name] = f_measure(y, y_pred, pos_label=pos_label)
        elif name == "a_mean":
            record[name] = a_mean(y, y_pred)
        elif name == "auc":
            record[name] = float(roc_auc_score(np.asarray(y) == pos_label, scores))
        elif name == "predict_time":
            record[name] = predict_time
        elif name != "fit_time":
            raise ValueError(f"unknown metric {name!r}; accepted: {', '.join(METRICS)}")
    return record


def positive_scores(model, X, pos_label):
    """Scores that grow with the likelihood of ``pos_label``, for ROC-AUC.

    Uses ``decision_function`` (scikit-learn's convention: positive means
    ``classes_[1]``) or, failing that, ``predict_proba``.
    """
    classes = list(model.classes_)
    if hasattr(model, "decision_function"):
        scores = np.asarray(model.decision_function(X), dtype=float)
        if scores.ndim == 1:
            return scores if classes.index(pos_label) == 1 else -scores
        return scores[:, classes.index(pos_label)]
    return np.asarray(model.predict_proba(X))[:, classes.index(pos_label)]


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
