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
  F-beta, Matthews' correlation, a gain matrix, ...

Smoothed counts (``smoothing``) go through the same function.
"""

from __future__ import annotations

from numbers import Real

import numpy as np

__all__ = ["COST_KEYS", "OBJECTIVES", "CostMatrix", "check_objective", "counted_objective", "objective_name"]

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
        if not isinstance(value, dict):
            return False
        try:
            check_objective(value)
        except ValueError:
            return False
        return True

    def __str__(self):
        return "a cost matrix {'fn': cost, 'fp': cost} (finite costs >= 0, one of them positive)"


def check_objective(objective) -> None:
    """Raise ``ValueError`` naming what is wrong with ``objective`` (a name, a cost matrix, or a callable).

    Examples
    --------
    >>> check_objective({"fn": 5, "fp": 1})
    >>> check_objective({"fn": 5})
    Traceback (most recent call last):
    ...
    ValueError: a cost-matrix objective needs both 'fn' and 'fp' (the costs of a false negative and of a false positive); got {'fn': 5}
    """
    if isinstance(objective, str):
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, a cost matrix {{'fn': ..., 'fp': ...}} or a "
                             f"callable; got {objective!r}.")
        return
    if callable(objective):
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
    values = np.asarray(objective(tp=tp, fp=fp, fn=fn, tn=tn), dtype=np.float64)
    if values.shape != tp.shape:
        raise ValueError(f"the objective {objective_name(objective)} returned shape {values.shape} for "
                         f"{tp.size} candidates; it takes arrays of counts and returns one value per candidate")
    return np.where(np.isnan(values), -np.inf, values)  # (0/0 in a user's metric: never the best)


def objective_name(objective) -> str:
    """How records and messages name an objective."""
    if isinstance(objective, str):
        return objective
    if isinstance(objective, dict):
        return f"cost(fn={objective['fn']:g}, fp={objective['fp']:g})"
    return getattr(objective, "__name__", type(objective).__name__)
