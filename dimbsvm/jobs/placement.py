"""Where a job runs when nobody said: in this process, or on an embedded cluster.

Starting an embedded ``LocalCluster`` costs seconds (worker processes that
import dimbsvm), which is most of the wall time of a job on a KEEL-sized
table. A job whose estimated work is small therefore runs in this process
(the fold engine's in-process path: every task called here, in order, with
the same bodies and seeds as on a cluster, so its records are the same); a
larger one starts the embedded cluster. A scheduler address, a scheduler
file, ``--workers``, ``DASK_SCHEDULER_ADDRESS`` or a job's ``execution``
settings that ask for a cluster (``n_workers``, ``require_encryption``) are
always obeyed.

The estimate (:func:`estimate_work`) is deliberately crude: *row-fits*,
the rows each estimator fit trains on, summed over every fit the job makes
(each CV fold, the final model, an ensemble's members, a search's inner
fits). A kernel method's fit of ``n`` rows counts ``n * n / KERNEL_ROWS``
row-fits once ``n`` exceeds :data:`KERNEL_ROWS` (LIBSVM's time grows about
as the square of the rows), and rows wider than :data:`FEATURE_UNIT`
features count in proportion to their width. Row-fits leave out scoring:
a job of few row-fits that the fitted cost model (:mod:`dimbsvm.jobs.cost`)
prices at :data:`CLUSTER_SECONDS` or more of one core's work, scoring
included (an ensemble on capped bags scoring millions of out-of-bag rows),
starts the cluster too. A row scored by a kernel member counts once per row
of the member's bag (``kernel_scoring``: its support vectors grow with the
bag), a row scored by a linear member once (``scoring``). Each fit is priced as the
estimator will configure itself for its rows (:mod:`dimbsvm.svm.scaled_defaults`:
above 20,000 rows a linear base or capped bags). It reads only
the typed job and the data's shape, and returns a :class:`WorkEstimate`, so
a fitted cost model can replace it without touching its callers.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

import numpy as np

from .._counts import minority_count
from ..estimators import make_estimator
from ..svm.fit_cost import KERNEL_ROWS, fit_row_cost, margin_fits, member_fits, uses_linear_solver
from ..svm.scaled_defaults import with_scaled_defaults
from .cost import TimeRange, load_cost_model
from .job_spec import JobSpec
from .spec import job_search

logger = logging.getLogger(__name__)

__all__ = ["CLUSTER_SECONDS", "CLUSTER_THRESHOLD", "FEATURE_UNIT", "KERNEL_ROWS", "Placement", "WorkEstimate", "cluster_demanded", "cluster_flag", "estimate_work",
           "place_job"]

#: Row-fits (see the module docstring) above which a job starts the embedded cluster: several times the
#: seconds a cluster takes to start, so that its start is paid back by fits running side by side; below it
#: the job runs in this process (the measurements: benchmarks/scaling_notes.md, "Measurements behind
#: constants").
CLUSTER_THRESHOLD = 1e7

#: Seconds of one core's work, as the fitted cost model (:mod:`dimbsvm.jobs.cost`) estimates a job, above which
#: it starts the embedded cluster even when its row-fits are few: about what CLUSTER_THRESHOLD row-fits take.
#: Row-fits count only training rows; an ensemble on capped bags scores every out-of-bag row, which at millions
#: of rows is most of its work (benchmarks/RESULTS.md, "A 10^7-row ensemble job, in this process and on two
#: workers, ...").
CLUSTER_SECONDS = 15.0

#: Features a row-fit stands for: wider rows count ``n_features / FEATURE_UNIT`` row-fits each (a fit's time
#: grows about linearly with the columns); narrower ones count one.
FEATURE_UNIT = 32


@dataclass(frozen=True)
class WorkEstimate:
    """How much fitting a job does, before it runs.

    Attributes
    ----------
    n_fits : int
        Estimator fits: CV folds, the final model, a search's inner fits, an
        ensemble's members each counted once.
    row_fits : float
        Training rows summed over every fit, kernel fits weighted (see the
        module docstring).
    by_kind : tuple of (str, float)
        ``row_fits`` split by kind of fit, and the rows an ensemble's members
        score (:meth:`kind_row_fits`): what the cost model
        (:mod:`dimbsvm.jobs.cost`) prices.
    """

    n_fits: int
    row_fits: float
    by_kind: tuple = field(default=(), repr=False, compare=False)

    def kind_row_fits(self) -> dict:
        """Row-fits by kind of work: ``"linear"`` (LIBLINEAR fits), ``"kernel"`` (LIBSVM and the rest,
        weighted), ``"features"`` (kNN graphs, distances to references), ``"scoring"`` (an ensemble's linear
        members scoring the rows out of their bags), ``"kernel_scoring"`` (its kernel members doing so: each
        row times the member's bag rows)."""
        return dict(self.by_kind)

    def describe(self) -> str:
        """``"~1.3e5 row-fits over 11 fits"``."""
        return f"~{_sci(self.row_fits)} row-fits over {self.n_fits} fit{'s' if self.n_fits != 1 else ''}"


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
        Why, e.g. ``"~1.3e5 row-fits over 11 fits is below the 1e7 cluster
        threshold; pass --workers N to use a cluster"`` (empty where the
        action says it). :attr:`reason` joins the two into one line.
    work : WorkEstimate or None
        The estimate, when it decided.
    time : TimeRange or None
        The cost model's wall time (None without a cost model).
    cores : int or None
        The cores ``time`` assumes (None: a cluster of unknown size, quoted for one).
    estimated : WorkEstimate or None
        The estimate, also when something else decided.
    """

    in_process: bool
    action: str
    why: str
    work: WorkEstimate | None = None
    time: TimeRange | None = None
    cores: int | None = None
    estimated: WorkEstimate | None = None

    @property
    def reason(self) -> str:
        """The action and why, as one line: ``"running in this process: ... "``."""
        return f"{self.action}: {self.why}" if self.why else self.action

    def cost_line(self) -> str | None:
        """``"estimated about 3 s to 9 s in this process (11 fits, 9e3 row-fits)"``, warning past an hour.

        None without a cost model.
        """
        work = self.work or self.estimated
        if work is None or self.time is None:
            return None
        if self.in_process:
            where = "in this process"
        elif self.cores:
            where = f"on {self.cores} cores"
        else:
            where = "on one core, divided by the cluster's workers at best"
        fits = f"{work.n_fits} fit{'s' if work.n_fits != 1 else ''}"
        line = f"estimated {self.time.describe()} {where} ({fits}, {_sci(work.row_fits)} row-fits)"
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


def estimate_work(job: JobSpec, y, *, n_features: int = 1, training_rows=None) -> WorkEstimate:
    """The row-fits of ``job`` on data with labels ``y`` (see the module docstring).

    Parameters
    ----------
    job : JobSpec
    y : array-like of shape (n_samples,)
        The data's labels (their count and the minority's size decide bag sizes).
    n_features : int, default=1
        Features per row; above :data:`FEATURE_UNIT` every row-fit counts more.
    training_rows : sequence of int, default=None
        The rows of each outer fit; default the job's run: every CV fold's
        training rows, then all rows for the final model (``output.model``).
        A retraining passes its one challenger fit.

    Returns
    -------
    WorkEstimate

    Examples
    --------
    >>> from dimbsvm.jobs import validate_job
    >>> job = validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "linear_svc"},
    ...                     "cv": {"n_splits": 5, "n_repeats": 2}})
    >>> estimate_work(job, np.r_[np.zeros(900), np.ones(100)])
    WorkEstimate(n_fits=11, row_fits=9000.0)
    """
    y = y if hasattr(y, "counted_classes") else np.asarray(y)  # a store's labels handle: its counts, not its rows
    n_rows = len(y)
    n_minority = minority_count(y)
    if training_rows is None:
        k = job.cv.n_splits
        training_rows = [n_rows * (k - 1) / k] * job.cv.n_folds + ([n_rows] if job.output.model else [])
        test_rows = [n_rows / k] * job.cv.n_folds + ([0.0] if job.output.model else [])
    else:  # a retraining's challenger: its holdout is scored apart
        test_rows = [0.0] * len(training_rows)
    estimator = make_estimator(job.estimator.name, job.estimator.plain_params())
    search = job_search(job)
    n_fits, by_kind = 0, {"linear": 0.0, "kernel": 0.0, "features": 0.0, "scoring": 0.0, "kernel_scoring": 0.0}
    for rows, tested in zip(training_rows, test_rows):
        fits = [(rows, 1)]
        if search is not None:  # each candidate on each inner fold, then the chosen one's refit
            s = search.n_splits
            fits.append((rows * (s - 1) / s, len(search.candidates) * s))
        for fit_rows, times in fits:
            fit_minority = fit_rows * n_minority / max(n_rows, 1)
            # the configuration fit will use on this many rows (dimbsvm.svm.scaled_defaults)
            fitted = with_scaled_defaults(estimator, fit_rows, fit_minority)
            member_kind = "linear" if uses_linear_solver(fitted) else "kernel"
            members, member_rows = member_fits(fitted, fit_rows, fit_minority)
            for inner, inner_rows in margin_fits(fitted, member_rows):
                n_fits += members * times * inner
                by_kind[member_kind] += members * times * inner * fit_row_cost(inner_rows, fitted)
            if members > 1 or member_rows < fit_rows:  # members score the rows out of their bags, and the test rows
                scored = members * times * (fit_rows + (tested if times == 1 else 0.0))
                if member_kind == "kernel":  # a kernel member's support vectors grow with its bag
                    by_kind["kernel_scoring"] += scored * member_rows
                else:
                    by_kind["scoring"] += scored
            # a feature stage fitted per fold (kNN graphs, distances to references): a kernel-like pass
            by_kind["features"] += len(job.fitted_features) * times * fit_row_cost(fit_rows, None)
    by_kind["features"] += len(job.stored_features) * fit_row_cost(n_rows, None)  # built once over every row
    width = max(1.0, n_features / FEATURE_UNIT)
    by_kind = {kind: value * width for kind, value in by_kind.items()}
    fitting = sum(value for kind, value in by_kind.items() if not kind.endswith("scoring"))
    return WorkEstimate(n_fits=int(n_fits), row_fits=float(fitting),
                        by_kind=tuple((kind, value) for kind, value in by_kind.items() if value))


def _sci(value: float) -> str:
    """``1.3e5``, ``1e7``: a count in short scientific notation.

    Examples
    --------
    >>> _sci(81234.0), _sci(1e7), _sci(12.0)
    ('8.1e4', '1e7', '1.2e1')
    """
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa.removesuffix('.0')}e{int(exponent)}"


def place_job(job: JobSpec, y, *, n_features: int = 1, scheduler=None, scheduler_file=None, workers=None,
              training_rows=None, cluster=None) -> Placement:
    """Where ``job`` runs: on the cluster something names, else by its :func:`estimate_work`.

    Parameters
    ----------
    job : JobSpec
    y : array-like
        The job's labels.
    scheduler, scheduler_file, workers, cluster
        The command line's ``--scheduler``, ``--scheduler-file``, ``--workers`` and ``--cluster``.
    n_features, training_rows
        As :func:`estimate_work`.

    Returns
    -------
    Placement
    """
    demanded = cluster_demanded(job, scheduler=scheduler, scheduler_file=scheduler_file, workers=workers,
                                cluster=cluster)
    work = estimate_work(job, y, n_features=n_features, training_rows=training_rows)
    model = _cost_model()
    if demanded is not None:
        cores = int(workers) if demanded == "--workers" else job.execution.n_workers
        return Placement(False, f"running on a cluster ({demanded})", "", None, _quote(model, work, cores or 1),
                         cores, estimated=work)
    cores = os.cpu_count() or 1
    if work.row_fits >= CLUSTER_THRESHOLD:
        return Placement(False, "starting an embedded cluster", f"{work.describe()} is above the "
                                f"{_sci(CLUSTER_THRESHOLD)} threshold for running in this process", work,
                         _quote(model, work, cores), cores)
    seconds = None if model is None else model.seconds(work)
    if seconds is not None and seconds >= CLUSTER_SECONDS:
        return Placement(False, "starting an embedded cluster", f"{work.describe()}, but about {seconds:.0f} s of one "
                                f"core's work with its scoring, above the {CLUSTER_SECONDS:.0f} s threshold for "
                                "running in this process", work, _quote(model, work, cores), cores)
    return Placement(True, "running in this process", f"{work.describe()} is below the {_sci(CLUSTER_THRESHOLD)} "
                           "cluster threshold; pass --workers N to use a cluster", work, _quote(model, work, 1), 1)


def _cost_model():
    """The fitted cost model, or None where its file cannot be read (an estimate is a courtesy, not a check)."""
    try:
        return load_cost_model()
    except (OSError, ValueError, KeyError) as exc:
        logger.debug("no cost model (%s): no time estimate", exc)
        return None


def _quote(model, work: WorkEstimate, cores: int) -> TimeRange | None:
    return None if model is None else model.estimate(work, cores=cores)
