"""What a job costs before it runs: the plan of tasks its run would submit, priced task by task.

:func:`price_job` builds the fold engine's plan exactly as ``dimbsvm run``
would (the same folds, estimator, preprocessing, search and ensemble tasks;
:func:`~dimbsvm.model_selection.folds.plan_folds`) and submits nothing: a
store's folds are laid out from its recorded class totals instead of the
per-chunk counts a run's tasks compute
(:func:`~dimbsvm.model_selection.fold_layout.expected_layouts`), and no
stored feature stage is built (its build is priced on its own). Each task
carries its cost in seconds of one core (:mod:`dimbsvm.svm.task_costs`),
set where the task is added, by the module that knows what the task does;
the price is their sum (the *work*) and the longest chain of dependent
tasks (the *span*). Nothing here reads an estimator's parameters: the plan
does. The fitted cost model (:mod:`dimbsvm.jobs.cost`) turns a price into a
wall-time range.

The costs were measured with 20 to 64 features; wider rows scale every
task's work beyond its fixed per-task seconds by ``n_features /``
:data:`FEATURE_UNIT`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model_selection.fold_layout import expected_layouts
from ..model_selection.folds import plan_folds
from ..svm.task_costs import TASK_SECONDS, stored_stage_seconds
from .data import JobData, code_labels, values_per_row
from .job_folds import challenger_spec, final_model_spec, fold_setup, run_specs, task_labels_of
from .job_spec import JobSpec
from .spec import job_search

__all__ = ["FEATURE_UNIT", "PlanPrice", "price_job"]

#: Features a task's cost stands for: wider rows cost ``n_features / FEATURE_UNIT`` times the work (a fit's and a
#: scoring's time grow about linearly with the columns); narrower ones as many.
FEATURE_UNIT = 32


@dataclass(frozen=True)
class PlanPrice:
    """The price of a job's plan of tasks, before it runs.

    Attributes
    ----------
    n_tasks : int
        Tasks the run would submit.
    work : float
        Seconds of one core, summed over every task.
    span : float
        Seconds of its longest chain of dependent tasks: no number of
        workers finishes sooner.
    """

    n_tasks: int
    work: float
    span: float

    def wall_seconds(self, cores: int) -> float:
        """The least wall time on ``cores`` single-threaded workers: ``max(span, work / cores)``."""
        return max(self.span, self.work / max(int(cores), 1))


class _NoSavedParts:
    """The part store of a run that has saved none yet: parts are planned as a run saves them, none is found."""

    def load(self, key, index):
        return None


def price_job(job: JobSpec, data: JobData, *, challenger_rows: int | None = None) -> PlanPrice:
    """The price of the plan ``dimbsvm run`` (or a retraining) would submit for ``job`` on ``data``.

    Parameters
    ----------
    job : JobSpec
    data : JobData
        The job's data as loaded (rows in memory, or a store's row handle:
        only its labels' class totals are read).
    challenger_rows : int, default=None
        Price a retraining's one challenger fit on this many rows instead
        of the run's folds and final model.

    Returns
    -------
    PlanPrice

    Examples
    --------
    >>> import numpy as np
    >>> from dimbsvm.jobs import validate_job
    >>> from dimbsvm.jobs.data import JobData
    >>> job = validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "linear_svc"},
    ...                     "cv": {"n_splits": 5}})
    >>> X, y = np.zeros((1000, 8)), np.r_[np.zeros(900), np.ones(100)]
    >>> price = price_job(job, JobData(X, y, {"name": "example"}))
    >>> price.n_tasks  # a prepare, a fit and a finish task for each of 5 folds and the final model
    18
    """
    coded, pos_label = code_labels(data, positive=job.data.positive)
    search = job_search(job)
    if challenger_rows is not None:
        specs = [challenger_spec(np.arange(int(challenger_rows)))]  # (its count prices it, not which rows)
    else:
        specs = run_specs(job, coded, search=search)
        if job.output.model:
            specs.append(final_model_spec(job, coded, search=search))
    setup = fold_setup(job, pos_label, search=search, keep_predictions=True, part_store=_NoSavedParts(),
                       class_map=coded.meta.get("class_map"))
    planned = plan_folds(setup, coded.X, coded.y, specs, layouts=expected_layouts,
                         task_labels=task_labels_of(coded, store_labels=True))
    width = max(1.0, values_per_row(coded) / FEATURE_UNIT)

    def widened(cost):  # a task's fixed seconds stay; its work grows with the columns
        return TASK_SECONDS + max(cost - TASK_SECONDS, 0.0) * width

    work, span = planned.plan.work_and_span(TASK_SECONDS, scale=widened)
    n_tasks = sum(not task.shared for task in planned.plan.tasks)
    stage = len(job.stored_features) * stored_stage_seconds(len(coded.y)) * width  # built once, before the folds
    return PlanPrice(n_tasks=n_tasks, work=work + stage, span=span + stage)

