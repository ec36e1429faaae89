"""What a threshold search maximises: a named metric, a cost matrix, or any function of the confusion counts.

Every candidate shift of a search has its confusion counts (true and false
positives and negatives, integers or weight sums), so any metric of the binary
confusion matrix is evaluated for all candidates at once, exactly:

* a name of :data:`OBJECTIVES` (G-mean, the paper's default; F-measure; their
  geometric mean);
* a cost matrix ``{"fn": c_fn, "fp": c_fp}``: the mean cost per row
  ``(c_fn * FN + c_fp * FP) / n`` is minimised (the costs of correct
  predictions are zero; scale is irrelevant, only the ratio matters), as in
  scikit-learn's cost-sensitive threshold tuning;
* a callable ``objective(tp=..., fp=..., fn=..., tn=...)`` of arrays of counts
  returning one value per candidate, to maximise: balanced accuracy,
  F-beta, Matthews' correlation, a gain matrix, ...;
* a scikit-learn scorer of predicted labels, by name (``"balanced_accuracy"``,
  ``"f1"``, ``"matthews_corrcoef"``, ...) or made by ``make_scorer``, as
  ``TunedThresholdClassifierCV`` takes one. A label metric of two classes is
  a function of the (weighted) confusion matrix, so each candidate is scored
  on four rows (a true positive, a false negative, a false positive and a
  true negative) weighted by its counts: the same value as on the rows
  themselves. The scorer sees the minority class as ``1`` and the other as
  ``0``, and is called once per candidate (a function of the counts scores
  all candidates at once; so do the names of :data:`COUNTED_SCORERS`).

Smoothed counts (``smoothing``) go through the same function.
"""

from __future__ import annotations

import inspect
import warnings
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import get_scorer, get_scorer_names

__all__ = ["COST_KEYS", "COUNTED_SCORERS", "OBJECTIVES", "CostMatrix", "ScorerName", "check_objective", "counted_objective",
           "objective_name"]

#: The named objectives.
OBJECTIVES = ("g_mean", "f_measure", "g_f_mean")
#: The entries of a cost matrix: the cost of a false negative and of a false positive.
COST_KEYS = ("fn", "fp")


class CostMatrix:
    """The parameter constraint of a cost-matrix objective (:mod:`dimbsvm._params`'s protocol).

    Examples
    --------
    >>> CostMatrix().is_satisfied_by({"fn": 5, "fp": 1}), CostMatrix().is_satisfied_by({"fn": -1, "fp": 1})
    (True, False)
    """

    def is_satisfied_by(self, value) -> bool:
        return isinstance(value, dict) and _accepted(value)

    def __str__(self):
        return "a cost matrix {'fn': cost, 'fp': cost} (finite costs >= 0, one of them positive)"


class ScorerName:
    """The parameter constraint of an objective named by a scikit-learn scorer of labels (:mod:`dimbsvm._params`).

    Examples
    --------
    >>> ScorerName().is_satisfied_by("balanced_accuracy"), ScorerName().is_satisfied_by("roc_auc")
    (True, False)
    """

    def is_satisfied_by(self, value) -> bool:
        return isinstance(value, str) and value in get_scorer_names() and _accepted(value)

    def __str__(self):
        return "the name of a scikit-learn scorer of predicted labels (sklearn.metrics.get_scorer_names())"


def _accepted(objective) -> bool:
    try:
        check_objective(objective)
    except ValueError:
        return False
    return True


def check_objective(objective) -> None:
    """Raise ``ValueError`` naming what is wrong with ``objective`` (a name, a cost matrix, a callable, a scorer).

    Examples
    --------
    >>> check_objective({"fn": 5, "fp": 1})
    >>> check_objective({"fn": 5})
    Traceback (most recent call last):
    ...
    ValueError: a cost-matrix objective needs both 'fn' and 'fp' (the costs of a false negative and of a false positive); got {'fn': 5}
    """
    if isinstance(objective, str):
        if objective in OBJECTIVES:
            return
        if objective not in get_scorer_names():
            raise ValueError(f"objective must be one of {OBJECTIVES}, a scikit-learn scorer name, a cost matrix "
                             f"{{'fn': ..., 'fp': ...}} or a callable; got {objective!r}.")
        objective = get_scorer(objective)
    if callable(objective):
        if not _of_counts(objective):
            _scored_counts(objective, np.ones(1), np.ones(1), np.ones(1), np.ones(1))  # a scorer of labels?
        return
    if isinstance(objective, dict):
        if set(objective) != set(COST_KEYS):
            raise ValueError("a cost-matrix objective needs both 'fn' and 'fp' (the costs of a false negative and "
                             f"of a false positive); got {objective!r}")
        costs = [objective[key] for key in COST_KEYS]
        if not all(isinstance(c, Real) and not isinstance(c, bool) and np.isfinite(c) and c >= 0 for c in costs):
            raise ValueError(f"a cost-matrix objective's costs are finite numbers >= 0; got {objective!r}")
        if not any(c > 0 for c in costs):
            raise ValueError(f"a cost-matrix objective needs a positive cost; got {objective!r}")
        return
    raise ValueError(f"objective must be one of {OBJECTIVES}, a cost matrix {{'fn': ..., 'fp': ...}} or a "
                     f"callable; got {type(objective).__name__} {objective!r}.")


def counted_objective(objective, tp, fp, n_pos, n_neg) -> np.ndarray:
    """The value to maximise of each candidate from its (exact or smoothed) counts, for an objective that is
    not a name (names are evaluated by :func:`dimbsvm.svm.threshold.chosen_threshold` itself).

    Examples
    --------
    >>> counted_objective({"fn": 4, "fp": 1}, np.array([3, 2]), np.array([5, 1]), 4, 10).tolist()
    [-0.6428571428571429, -0.6428571428571429]
    """
    tp, fp = np.asarray(tp, dtype=np.float64), np.asarray(fp, dtype=np.float64)
    fn, tn = n_pos - tp, n_neg - fp
    if isinstance(objective, dict):
        return -(objective["fn"] * fn + objective["fp"] * fp) / (n_pos + n_neg)
    if isinstance(objective, str):
        if objective in COUNTED_SCORERS:  # the same values, for every candidate at once
            total = n_pos + n_neg
            return COUNTED_SCORERS[objective](*(_zeroed(count, total) for count in (tp, fp, fn, tn)))
        objective = get_scorer(objective)
    if _of_counts(objective):
        values = np.asarray(objective(tp=tp, fp=fp, fn=fn, tn=tn), dtype=np.float64)
    else:
        values = _scored_counts(objective, tp, fp, fn, tn)
    if values.shape != tp.shape:
        raise ValueError(f"the objective {objective_name(objective)} returned shape {values.shape} for "
                         f"{tp.size} candidates; it takes arrays of counts and returns one value per candidate")
    return np.where(np.isnan(values), -np.inf, values)  # (0/0 in a user's metric: never the best)


def _zeroed(counts, total):
    """``counts`` with those below ``1e-12 * total`` set to 0: weighted counts are differences of sums, so
    "none" can be a rounding error's few ulps (which made a precision of 0/0 read 1.0)."""
    counts = np.asarray(counts, dtype=np.float64)
    return np.where(counts > 1e-12 * total, counts, 0.0)


def _ratio(numerator, denominator):
    """``numerator / denominator``, 0 where the denominator is 0 (scikit-learn's ``zero_division`` default)."""
    return np.divide(numerator, denominator, out=np.zeros(np.shape(numerator)), where=denominator > 0)


def _mcc(tp, fp, fn, tn):
    return _ratio(tp * tn - fp * fn, np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)))


#: Scorer names whose metric is written here as a function of the counts: the values scikit-learn's scorer
#: gives on the rows (tested candidate by candidate), for all candidates at once instead of one call each.
COUNTED_SCORERS = {
    "accuracy": lambda tp, fp, fn, tn: (tp + tn) / (tp + fp + fn + tn),
    "balanced_accuracy": lambda tp, fp, fn, tn: (_ratio(tp, tp + fn) + _ratio(tn, tn + fp)) / 2,
    "f1": lambda tp, fp, fn, tn: _ratio(2 * tp, 2 * tp + fp + fn),
    "precision": lambda tp, fp, fn, tn: _ratio(tp, tp + fp),
    "recall": lambda tp, fp, fn, tn: _ratio(tp, tp + fn),
    "jaccard": lambda tp, fp, fn, tn: _ratio(tp, tp + fp + fn),
    "matthews_corrcoef": _mcc,
}


def objective_name(objective) -> str:
    """How records and messages name an objective."""
    if isinstance(objective, str):
        return objective
    if isinstance(objective, dict):
        return f"cost(fn={objective['fn']:g}, fp={objective['fp']:g})"
    if not _of_counts(objective):  # a scorer: its repr says what it scores (make_scorer(fbeta_score, beta=2))
        return repr(objective)
    return getattr(objective, "__name__", type(objective).__name__)


def _of_counts(objective) -> bool:
    """Whether a callable objective takes the counts (``tp=``, ``fp=``, ``fn=``, ``tn=``), not a scorer's
    ``(estimator, X, y)``."""
    try:
        parameters = inspect.signature(objective).parameters.values()
    except (TypeError, ValueError):  # no signature to read: taken as a function of the counts, as documented
        return True
    names = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return {"tp", "fp", "fn", "tn"} <= names or (any(p.kind == p.VAR_KEYWORD for p in parameters) and not any(
        p.default is p.empty and p.kind == p.POSITIONAL_OR_KEYWORD for p in parameters))


class _FixedLabels(ClassifierMixin, BaseEstimator):
    """A fitted classifier of classes 0 and 1 whose ``predict(X)`` is ``X[:, 0]``: a scorer's view of given labels."""

    def __init__(self):
        self.classes_ = np.array([0, 1])

    def predict(self, X):
        return np.asarray(X)[:, 0]


#: The four rows every candidate is scored on: a true positive, a false negative, a false positive, a true negative.
_TRUE, _PREDICTED = np.array([1, 1, 0, 0]), np.array([1, 0, 1, 0])


def _scored_counts(scorer, tp, fp, fn, tn) -> np.ndarray:
    """``scorer`` on the four rows weighted by each candidate's counts (see the module): one value a candidate."""
    fixed = _FixedLabels()

    def scored(counts):
        weights = np.array(counts, dtype=np.float64)
        kept = _zeroed(weights, weights.sum()) > 0  # a row of weight 0 would still count as a label
        return scorer(fixed, _PREDICTED[kept, None], _TRUE[kept], sample_weight=weights[kept])

    try:
        with warnings.catch_warnings():  # 0/0 (no predicted positive): the metric's zero_division value stands
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            return np.array([scored(counts) for counts in zip(tp, fn, fp, tn)], dtype=np.float64)
    except AttributeError as exc:  # it asked for decision_function or predict_proba
        raise ValueError(f"the objective {objective_name(scorer)} scores decision values or probabilities, which "
                         "moving the threshold does not change; give a scorer of predicted labels (f1, "
                         "balanced_accuracy, matthews_corrcoef, ...)") from exc
    except TypeError as exc:
        raise ValueError(f"the objective {objective_name(scorer)} cannot be scored from confusion counts: its "
                         f"metric must take sample_weight ({exc})") from exc
