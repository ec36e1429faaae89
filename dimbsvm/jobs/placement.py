"""Where a job runs when nobody said: in this process, or on an embedded cluster.

Starting an embedded ``LocalCluster`` costs seconds (worker processes that
import dimbsvm), which is most of the wall time of a job on a KEEL-sized
table. A job whose work is small therefore runs in this process (the fold
engine's in-process path: every task called here, in order, with the same
bodies and seeds as on a cluster, so its records are the same); a larger
one starts the embedded cluster. A scheduler address, a scheduler file,
``--workers``, ``DASK_SCHEDULER_ADDRESS`` or a job's ``execution`` settings
that ask for a cluster (``n_workers``, ``require_encryption``) are always
obeyed.

The work is the price of the plan the run would submit
(:func:`~dimbsvm.jobs.plan_price.price_job`: each task's cost, set by the
module that adds it), turned into seconds of this machine's core by the
fitted cost model (:mod:`dimbsvm.jobs.cost`); a job of
:data:`CLUSTER_SECONDS` or more starts the cluster. Nothing here reads an
estimator's parameters.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from .cost import TimeRange, load_cost_model
from .job_spec import JobSpec
from .plan_price import PlanPrice, price_job

logger = logging.getLogger(__name__)

__all__ = ["CLUSTER_SECONDS", "Placement", "cluster_demanded", "cluster_flag", "place_job"]

#: Seconds of one core's work (the fitted cost model's estimate of the job's plan) from which a job starts the
#: embedded cluster: several times the seconds a cluster takes to start, so that its start is paid back by tasks
#: running side by side (the measurements: benchmarks/scaling_notes.md, "Measurements behind constants").
CLUSTER_SECONDS = 15.0


@dataclass(frozen=True)
class Placement:
    """Where a job runs, and the one line that says why.

    Attributes
    ----------
    in_process : bool
        Run in this process (no cluster); ``False``: the cluster the command
        line, the environment or the job names, or an embedded one.
    action : str
        What runs the job, e.g. ``"running in this process"``.
    why : str
        Why, e.g. ``"about 3 s of one core's work in 18 tasks is below the
        15 s cluster threshold; pass --workers N to use a cluster"`` (empty
        where the action says it). :attr:`reason` joins the two into one line.
    price : PlanPrice
        The price of the job's plan.
    seconds : float
        Its seconds of one core on this machine (the cost model's point
        estimate; the plan's own price without a cost model).
    decided : bool
        The price decided where the job runs (``False``: something named a cluster).
    time : TimeRange or None
        The cost model's wall time (None without a cost model).
    cores : int or None
        The cores ``time`` assumes (None: a cluster of unknown size, quoted for one).
    """

    in_process: bool
    action: str
    why: str
    price: PlanPrice
    seconds: float
    decided: bool = True
    time: TimeRange | None = None
    cores: int | None = None

    @property
    def reason(self) -> str:
        """The action and why, as one line: ``"running in this process: ... "``."""
        return f"{self.action}: {self.why}" if self.why else self.action

    def work_line(self) -> str:
        """``"about 3 s of one core's work in 18 tasks"``."""
        return _work_line(self.price, self.seconds)

    def cost_line(self) -> str | None:
        """``"estimated about 3 s to 9 s in this process (18 tasks, about 4 s of one core's work)"``, warning past
        an hour. None without a cost model."""
        if self.time is None:
            return None
        if self.in_process:
            where = "in this process"
        elif self.cores:
            where = f"on {self.cores} cores"
        else:
            where = "on one core, divided by the cluster's workers at best"
        line = f"estimated {self.time.describe()} {where} ({self.work_line()})"
        if self.time.over_an_hour:
            line += ("; this job may run for over an hour: smaller bags (max_samples), linear members "
                     "(estimator: linear_svc; a kernel member scores each row against its support vectors) or "
                     "fewer search candidates cut it")
        return line


def cluster_flag(*, scheduler=None, scheduler_file=None, workers=None, cluster=None) -> str | None:
    """The command-line flag or the environment variable that asks for a cluster, or ``None``."""
    if cluster:
        return "--cluster"
    if scheduler:
        return "--scheduler"
    if scheduler_file:
        return "--scheduler-file"
    if os.environ.get("DASK_SCHEDULER_ADDRESS"):
        return "DASK_SCHEDULER_ADDRESS"
    if workers:
        return "--workers"
    return None


def cluster_factory(job: JobSpec, *, cluster=None, scheduler=None, scheduler_file=None) -> str | None:
    """The cluster factory (``MODULE:CALLABLE``) a job uses: ``--cluster``, else the job's ``execution.cluster``
    unless a flag names the scheduler."""
    if cluster or scheduler or scheduler_file:
        return cluster
    return job.execution.cluster


def cluster_demanded(job: JobSpec, *, scheduler=None, scheduler_file=None, workers=None,
                     cluster=None) -> str | None:
    """What asks for a cluster regardless of the job's size (a flag, the environment, the job), or ``None``."""
    flag = cluster_flag(scheduler=scheduler, scheduler_file=scheduler_file, workers=workers, cluster=cluster)
    if flag is not None:
        return flag
    if job.execution.cluster is not None:
        return "execution.cluster"
    if job.execution.n_workers is not None:
        return "execution.n_workers"
    if job.execution.require_encryption:
        return "execution.require_encryption"
    return None


def place_job(job: JobSpec, data, *, scheduler=None, scheduler_file=None, workers=None, challenger_rows=None,
              cluster=None) -> Placement:
    """Where ``job`` runs: on the cluster something names, else by the price of its plan.

    Parameters
    ----------
    job : JobSpec
    data : JobData
        The job's data as loaded.
    scheduler, scheduler_file, workers, cluster
        The command line's ``--scheduler``, ``--scheduler-file``, ``--workers`` and ``--cluster``.
    challenger_rows : int, default=None
        A retraining's one challenger fit on this many rows
        (:func:`~dimbsvm.jobs.plan_price.price_job`).

    Returns
    -------
    Placement
    """
    demanded = cluster_demanded(job, scheduler=scheduler, scheduler_file=scheduler_file, workers=workers,
                                cluster=cluster)
    price = price_job(job, data, challenger_rows=challenger_rows)
    model = _cost_model()
    seconds = price.work if model is None else model.seconds(price)

    def quote(cores):
        return None if model is None else model.estimate(price, cores=cores)

    if demanded is not None:
        cores = int(workers) if demanded == "--workers" else job.execution.n_workers
        return Placement(False, f"running on a cluster ({demanded})", "", price, seconds, decided=False,
                         time=quote(cores or 1), cores=cores)
    work = _work_line(price, seconds)
    if seconds >= CLUSTER_SECONDS:
        cores = os.cpu_count() or 1
        return Placement(False, "starting an embedded cluster", f"{work} is above the {CLUSTER_SECONDS:.0f} s "
                         "threshold for running in this process", price, seconds, time=quote(cores), cores=cores)
    return Placement(True, "running in this process", f"{work} is below the {CLUSTER_SECONDS:.0f} s cluster "
                     "threshold; pass --workers N to use a cluster", price, seconds, time=quote(1), cores=1)


def _cost_model():
    """The fitted cost model, or None where its file cannot be read (an estimate is a courtesy, not a check)."""
    try:
        return load_cost_model()
    except (OSError, ValueError, KeyError) as exc:
        logger.debug("no cost model (%s): the plan's own price decides", exc)
        return None


def _work_line(price: PlanPrice, seconds: float) -> str:
    tasks = price.n_tasks
    return f"about {_seconds(seconds)} of one core's work in {tasks} task{'s' if tasks != 1 else ''}"


def _seconds(seconds: float) -> str:
    """``"0.4 s"``, ``"12 s"``, ``"3.2e4 s"``: seconds to about two figures.

    Examples
    --------
    >>> _seconds(0.42), _seconds(12.3), _seconds(31_500.0)
    ('0.4 s', '12 s', '3.2e4 s')
    """
    if seconds < 1:
        return f"{seconds:.1f} s"
    if seconds < 1e4:
        return f"{seconds:.0f} s"
    mantissa, exponent = f"{seconds:.1e}".split("e")
    return f"{mantissa.removesuffix('.0')}e{int(exponent)} s"
