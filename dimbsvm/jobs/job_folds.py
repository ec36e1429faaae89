"""A job in the fold engine's terms: its setup, its estimator seeded, the folds a run fits, the labels tasks read.

Shared by the run (:mod:`dimbsvm.jobs.runner`), the retraining
(:mod:`dimbsvm.jobs.retrain`) and the price of a run's plan
(:mod:`dimbsvm.jobs.plan_price`), so that all three plan the same folds.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..estimators import make_estimator, make_feature
from ..model_selection.folds import FoldSetup, FoldSpec
from ..model_selection.search import Search
from ..model_selection.splits import repeat_seeds, repeat_splits
from ..store import StoreRows
from ..store.rows import StoreLabels
from .class_weights import coded_class_weights
from .data import JobData
from .job_spec import JobSpec

__all__ = ["FINAL_MODEL", "challenger_spec", "final_model_spec", "fold_setup", "job_estimator", "run_specs",
           "task_labels_of"]

#: The key of the final model's "fold" (all rows, no test rows) in a run's plan.
FINAL_MODEL = ("final",)


def fold_setup(job: JobSpec, pos_label, *, metrics=None, stage=None, search: Search | None = None,
               keep_predictions: bool = False, part_store=None, prediction_sink=None,
               class_map: dict | None = None) -> FoldSetup:
    """The fold engine's setup of a job: its estimator, preprocessing, feature stages fitted per fold and metrics.

    Parameters
    ----------
    job : JobSpec
    pos_label : object
        The positive class as the labels are coded (:func:`~dimbsvm.jobs.data.code_labels`).
    metrics : sequence of str, default=None
        Scored on the test rows; default the job's.
    stage, search, keep_predictions, part_store, prediction_sink
        As :class:`~dimbsvm.model_selection.folds.FoldSetup` takes them.
    class_map : dict, default=None
        Class name -> code of the coded labels: a ``class_weight`` keyed by
        class name (the estimator's, a search candidate's) is keyed by code
        (:func:`~dimbsvm.jobs.class_weights.coded_class_weights`).
    """
    if search is not None:
        search = replace(search, candidates=[coded_class_weights(params, class_map, where="search.params")
                                             for params in search.candidates])
    return FoldSetup(
        estimator=job_estimator(job, class_map), pos_label=pos_label,
        scaler=job.preprocessing.scaler, impute=job.preprocessing.impute,
        features=tuple(make_feature(stage.name, stage.plain_params()) for stage in job.fitted_features),
        metrics=job.metrics if metrics is None else tuple(metrics), stage=stage, search=search,
        keep_predictions=keep_predictions, part_store=part_store, prediction_sink=prediction_sink)


def job_estimator(job: JobSpec, class_map: dict | None = None):
    """The job's estimator, seeded: a ``random_state`` the job leaves unset is the CV's ``random_state``.

    ``class_map``: as :func:`fold_setup` takes it.

    A job is reproducible: the same job on the same data gives the same
    records, also with a randomised estimator (bagging, sampling) whose
    seed the job does not name.

    Examples
    --------
    >>> from dimbsvm.jobs import validate_job
    >>> job = validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "ensemble_othr"},
    ...                     "cv": {"random_state": 7}})
    >>> job_estimator(job).random_state
    7
    """
    params = coded_class_weights(job.estimator.plain_params(), class_map)
    estimator = make_estimator(job.estimator.name, params)
    if "random_state" not in params and getattr(estimator, "random_state", 0) is None:
        estimator.set_params(random_state=job.cv.random_state)
    return estimator


def run_specs(job: JobSpec, data: JobData, *, search: Search | None) -> list[FoldSpec]:
    """The CV folds of a run, in order: each repeat's folds by their rows, or a store's by their split alone.

    A store's folds are planned from per-chunk counts that tasks compute
    where the labels are: this process holds none of their index arrays (a
    search's inner folds still split the outer fold's labels here).
    """
    cv = job.cv
    by_counts = isinstance(data.X, StoreRows) and search is None
    specs = []
    for seed in repeat_seeds(cv.n_repeats, cv.random_state):
        splits = [(None, None)] * cv.n_splits if by_counts \
            else repeat_splits(data.y, n_splits=cv.n_splits, seed=seed)  # split once per repeat, not per task
        for fold, (train, test) in enumerate(splits):
            specs.append(FoldSpec((seed, fold), train, test,
                                  split={"n_splits": cv.n_splits, "seed": seed, "fold": fold}))
    return specs


def final_model_spec(job: JobSpec, data: JobData, *, search: Search | None) -> FoldSpec:
    """The final model's spec: every row for training, no test row."""
    by_counts = isinstance(data.X, StoreRows) and search is None
    return FoldSpec(FINAL_MODEL, None if by_counts else np.arange(len(data.y)),
                    None if by_counts else np.empty(0, dtype=np.int64),
                    split={"n_splits": job.cv.n_splits, "seed": None, "fold": None})


def challenger_spec(train_rows) -> FoldSpec:
    """A retraining's challenger: one fit on ``train_rows`` (the rows its holdout leaves), no test row."""
    return FoldSpec(("challenger",), np.asarray(train_rows), np.empty(0, dtype=np.int64))


def task_labels_of(data: JobData, *, store_labels: bool):
    """The labels as the fold engine's tasks read them: a store's handle (a path in the graph), or ``None``
    (the labels in memory). ``store_labels``: a store's labels in the job's codes, read where tasks run."""
    if isinstance(data.y, StoreLabels):  # the driver holds no label: every task reads them from the store
        return data.y
    if store_labels and isinstance(data.X, StoreRows):
        return data.X.labels(class_map=data.meta.get("class_map"))
    return None
