"""An estimator's own fit run as one fold of its fold plan: the plan a job runs, for ``fit`` on arrays.

An estimator that plans its fit tasks for the fold engine
(:class:`~dimbsvm.fold_data.context.PlansFoldFit`) fits arrays by the same
plan: :func:`fit_as_one_fold` makes one fold of every row, with no
preprocessing and no test rows, and runs the estimator's tasks on a client,
on ``n_jobs`` processes or here. One driver for a method, whether a job or a
user calls ``fit``.
"""

from __future__ import annotations

import numpy as np

from ..parallel import TaskPlan, run_plan
from .context import FoldContext
from .prepared import FoldRows, PreparedFold

__all__ = ["fit_as_one_fold"]


def fit_as_one_fold(estimator, X, y, *, client=None, n_jobs=None, label="fit tasks", sample_weight=None,
                    fit_params=None):
    """``estimator`` fitted on every row of ``(X, y)`` by its own fold plan (``estimator.plan_fold_fit``).

    Parameters
    ----------
    estimator : PlansFoldFit
        Unfitted; its tasks clone it.
    X, y : array-like
        The rows and labels, validated by the caller.
    client : distributed.Client, default=None
        Where the tasks run; else on ``n_jobs`` processes, else here, in order
        (:func:`~dimbsvm.parallel.run_plan`).
    n_jobs : int, default=None
    label : str, default="fit tasks"
        The progress line's name.
    sample_weight : ndarray of shape (n_samples,), default=None
        Row weights, validated by the caller, handed to the estimator's tasks
        (:attr:`FoldContext.sample_weight <dimbsvm.fold_data.context.FoldContext>`).
    fit_params : dict, default=None
        The base estimator's routed ``fit`` arguments (:attr:`FoldContext.fit_params
        <dimbsvm.fold_data.context.FoldContext>`).

    Returns
    -------
    estimator
        ``estimator``, with the fitted state of the estimator the plan
        assembled (its fitted attributes; those of an earlier fit that this
        one does not set are dropped, the input's validated feature count and
        names kept).
    """
    plan = TaskPlan()
    X_ref, y_ref = plan.share(X), plan.share(y)
    every = plan.share(FoldRows(np.arange(len(y)), np.empty(0, dtype=np.int64)))
    prepared = plan.share(PreparedFold(steps=[], train_features=None, fit_time=0.0))

    def no_chunks(span):  # (a fold in memory has no stored chunks)
        raise AssertionError(f"a fold in memory has no chunk {span}")

    context = FoldContext(plan=plan, key=("fit",), X=X_ref, y=y_ref, rows=lambda: every, rows_from_labels=None,
                          at=no_chunks, prepare=lambda ranges=None: prepared, train_labels=np.asarray(y),
                          train_chunks=[], n_train=len(y), n_test=0, in_store=False, merged_ranges=False,
                          sample_weight=None if sample_weight is None else plan.share(sample_weight),
                          fit_params=None if fit_params is None else plan.share(fit_params))
    fit = estimator.plan_fold_fit(context)
    result = plan.add(_fitted_estimator, dict(fitted=fit.fitted), watch=True, name="fitted", gathers=True)
    return _take_fitted_state(estimator, run_plan(plan, client=client, n_jobs=n_jobs, label=label)[result.id])


def _take_fitted_state(estimator, fitted):
    """``estimator`` with ``fitted``'s fitted and private attributes (its parameters are the same)."""
    state = {key: value for key, value in vars(fitted).items() if key.endswith("_") or key.startswith("_")}
    for key in [key for key in vars(estimator) if key.endswith("_") and key not in state]:
        if key not in ("n_features_in_", "feature_names_in_"):
            del estimator.__dict__[key]
    vars(estimator).update(state)
    return estimator


def _fitted_estimator(fitted):
    """Task body: the fitted estimator of ``(fitted estimator, seconds)``."""
    return fitted[0]
