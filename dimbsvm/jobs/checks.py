"""Everything a job is checked for before a cluster starts or a task is submitted.

:func:`check_job` is the one preflight: ``dimbsvm run``, ``retrain`` and
``validate`` all call it, so ``dimbsvm validate JOB.yaml`` runs exactly the
checks a run would, and a run that passes them fails later only for reasons
that cannot be known in advance (a worker lost for good, a disk that fills).

In order, cheapest first:

1. the job file: YAML, schema, estimator and feature-stage parameters; the
   mlflow package when the job asks for tracking;
2. where it runs: scheduler address syntax, scheduler file, TLS files and the
   ``cryptography`` package, encryption required over ``tcp://``
   (nothing is contacted);
3. where it writes: ``--out`` (not a file, a finished run, an empty or a
   foreign directory; writable), ``--registry`` (a directory, writable);
4. the data: readable, finite, labels that are classes, two where the
   estimator or a metric needs two, every fold feasible
   (:func:`~dimbsvm.jobs.data.check_job_data`), at most
   :data:`MAX_CLASSES` classes;
5. the retraining settings against the data (:func:`check_retrain`): gates
   on metrics the classes allow, a separate holdout readable, finite and of
   the training data's columns, and (for ``retrain``) a holdout fraction
   that leaves a row of every class on both sides;
6. the run directory: a new one, or the interrupted run to resume (same job
   and data), see :func:`~dimbsvm.jobs.run_dir.plan_run_dir`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path


from .._counts import unique_counts
from ..distributed.client import TLSSettings, check_cluster_options
from ..exceptions import DataError, DimbsvmError
from ..model_selection.scoring import BINARY_METRICS
from ..store import content_fingerprint
from .class_weights import coded_class_weights
from .data import JobData, _check_finite, check_job_data, class_names, load_job_data
from .job_spec import JobSpec
from .placement import cluster_factory
from .run_dir import RUNS_ROOT, RunDirPlan, check_out_path, check_writable, plan_run_dir
from .spec import job_search, load_job_file
from .tracking import require_mlflow

__all__ = ["MAX_CLASSES", "CheckedJob", "check_class_count", "check_job", "check_registry", "check_retrain",
           "describe", "format_class_counts"]

#: Most classes a job's data may have. Far above any class-imbalance study (tens of classes); a target of
#: thousands of classes of a few rows each is an identifier or a continuous column, and every one-vs-one
#: or per-class step would then run for hours.
MAX_CLASSES = 1000

#: Classes listed in a message or in ``validate``'s summary; the rest are counted ("and N more").
SHOWN_CLASSES = 10


@dataclass(frozen=True)
class CheckedJob:
    """A job that passed every check, with what the checks opened.

    :func:`~dimbsvm.jobs.runner.run_checked` and
    :func:`~dimbsvm.jobs.retrain.retrain_checked` run it without checking
    its data again.

    Attributes
    ----------
    job : JobSpec
        The validated job (defaults filled in).
    job_text : str
        The job file as written.
    data : JobData
        The job's data, opened and checked.
    where : str
        Where it would run (address, scheduler file or the embedded cluster).
    run : RunDirPlan or None
        The run directory and whether it resumes (``None`` when no run
        directory is planned, e.g. for ``retrain``).
    """

    job: JobSpec
    job_text: str
    data: JobData
    where: str
    run: RunDirPlan | None = None


def check_job(job_path, *, run_dir: bool = True, out=None, resume: bool = False, fresh: bool = False,
              registry=None, scheduler: str | None = None, scheduler_file: str | None = None,
              tls: TLSSettings | None = None, runs_root=RUNS_ROOT, claim: bool = True,
              cluster: str | None = None) -> CheckedJob:
    """Run every check of a job before anything starts (see the module docstring).

    Parameters
    ----------
    job_path : str or path
        The YAML job file.
    run_dir : bool, default=True
        Plan the run directory (``dimbsvm run``); ``out``, ``resume`` and
        ``fresh`` are as in :func:`~dimbsvm.jobs.run_dir.plan_run_dir`.
    out, resume, fresh
        See :func:`~dimbsvm.jobs.run_dir.plan_run_dir`.
    registry : path, default=None
        A model registry directory the run will write (``retrain``,
        ``schedule``); with it, the holdout split is checked too.
    scheduler, scheduler_file, tls, cluster
        As given to :func:`~dimbsvm.distributed.cluster_client`; ``cluster``
        defaults to the job's ``execution.cluster``.
    runs_root : path, default="runs"
        Where runs go without ``out``.
    claim : bool, default=True
        Claim the planned run directory for this process (a run); ``False``
        only looks (``validate``: it writes nothing).

    Returns
    -------
    CheckedJob

    Raises
    ------
    DimbsvmError
        The first problem found, as one sentence naming it and the remedy
        (``JobSpecError``, ``DataError``, ``StoreError``,
        ``ClusterConnectionError`` or ``DimbsvmError`` for paths).
    """
    job, job_text = load_job_file(job_path)
    if job.tracking is not None:
        require_mlflow(job.tracking.mlflow)  # the optional extra, before the data is read
    where = check_cluster_options(scheduler, scheduler_file=scheduler_file, tls=tls,
                                  require_encryption=job.execution.require_encryption,
                                  cluster=cluster_factory(job, cluster=cluster, scheduler=scheduler,
                                                          scheduler_file=scheduler_file))
    if run_dir and out is not None:
        check_out_path(out)  # a path that cannot be used fails before the data is read
    if registry is not None:
        check_registry(registry)
    data = load_job_data(job.data.source, nominal=job.data.nominal)
    check_job_data(data, job)
    check_class_count(data, job.data.source)
    check_class_weights(job, data)
    check_retrain(job, data, split=registry is not None)
    plan = None
    if run_dir:
        plan = plan_run_dir(job, content_fingerprint(data.meta), out=out, resume=resume, fresh=fresh,
                            runs_root=runs_root, claim=claim)
    return CheckedJob(job=job, job_text=job_text, data=data, where=where, run=plan)


def check_class_weights(job: JobSpec, data: JobData) -> None:
    """Refuse a ``class_weight`` (the estimator's, a search candidate's) naming a class the data does not have.

    Raises
    ------
    JobSpecError
    """
    class_map = data.meta.get("class_map")
    coded_class_weights(job.estimator.plain_params(), class_map)
    search = job_search(job, check=False)
    for params in search.candidates if search is not None else ():
        coded_class_weights(params, class_map, where="search.params")


def check_class_count(data: JobData, name: str) -> None:
    """Refuse data of more than :data:`MAX_CLASSES` classes, listing only the first few.

    Raises
    ------
    DataError

    Examples
    --------
    >>> import numpy as np
    >>> data = JobData(X=np.zeros((4000, 1)), y=np.repeat(np.arange(2000), 2), meta={})
    >>> check_class_count(data, "ids.csv")
    Traceback (most recent call last):
    ...
    dimbsvm.exceptions.DataError: ids.csv: 2000 classes (rows per class: 0: 2, 1: 2, 2: 2, 3: 2, 4: 2, 5: 2, \
6: 2, 7: 2, 8: 2, 9: 2 and 1990 more); a job may have at most 1000: is the target column a class label?
    """
    labels, counts = unique_counts(data.y)
    if len(labels) > MAX_CLASSES:
        raise DataError(f"{name}: {len(labels)} classes (rows per class: {format_class_counts(labels, counts)}); "
                        f"a job may have at most {MAX_CLASSES}: is the target column a class label?")


def format_class_counts(labels, counts, shown: int = SHOWN_CLASSES) -> str:
    """``"0: 40, 1: 9"``: the first ``shown`` classes and their rows, then ``"and N more"``.

    Examples
    --------
    >>> format_class_counts([0, 1, 2], [5, 3, 1], shown=2)
    '0: 5, 1: 3 and 1 more'
    """
    labels, counts = list(labels), list(counts)
    text = ", ".join(f"{label}: {int(count)}" for label, count in zip(labels[:shown], counts[:shown]))
    return text + (f" and {len(labels) - shown} more" if len(labels) > shown else "")


def check_retrain(job: JobSpec, data: JobData, *, split: bool = False) -> None:
    """Check the job's ``retrain`` section against its data, as :func:`~dimbsvm.jobs.retrain.retrain` needs it.

    Every job has the section (its defaults gate on G-mean with a 25 %
    holdout), so ``validate`` and ``run`` refuse a job whose retraining could
    never work, and ``retrain`` fails here rather than after its cluster
    started:

    * a gate on a two-class metric (``f_measure``, ``auc``) with data of more
      classes;
    * a separate ``holdout.source`` that cannot be read, holds NaN (without
      imputation) or infinity, or whose columns are not the training data's;
    * with ``split=True`` (a retraining without a separate holdout): a
      stratified ``holdout.fraction`` that leaves fewer rows than classes on
      either side.

    Raises
    ------
    DataError
    """
    name = job.data.source
    settings = job.retrain
    n_classes = len(unique_counts(data.y)[0])
    binary = sorted(set(settings.gates) & set(BINARY_METRICS))
    if binary and n_classes > 2:
        raise DataError(f"{name}: {n_classes} classes, but retrain.gates {', '.join(binary)} need two; gate on "
                        "g_mean or a_mean")
    source = settings.holdout.source
    if source:
        _check_holdout_source(job, data, source)
    elif split:
        _check_holdout_split(settings.holdout.fraction, len(data.y), n_classes, name)


def _check_holdout_source(job: JobSpec, data: JobData, source: str) -> None:
    try:
        holdout = load_job_data(source, nominal=job.data.nominal)
    except DataError as exc:
        raise DataError(f"retrain.holdout.source: {exc}") from None
    if tuple(holdout.X.shape[1:]) != tuple(data.X.shape[1:]):
        raise DataError(f"retrain.holdout.source {source} has {_features(holdout.X.shape)} per row, the training "
                        f"data {job.data.source} {_features(data.X.shape)}")
    ours, theirs = data.meta.get("feature_names"), holdout.meta.get("feature_names")
    if ours and theirs and list(ours) != list(theirs):
        j = next(j for j, (a, b) in enumerate(zip(ours, theirs)) if a != b)
        raise DataError(f"retrain.holdout.source {source}: column {j} is {theirs[j]!r}, in the training data "
                        f"{job.data.source} it is {ours[j]!r}; the holdout needs the training data's columns")
    _check_finite(holdout, impute=job.preprocessing.impute != "none", name=f"retrain.holdout.source {source}")


def _check_holdout_split(fraction: float, n_rows: int, n_classes: int, name: str) -> None:
    # as scikit-learn's train_test_split counts them: the test side is rounded up
    n_test = math.ceil(fraction * n_rows)
    n_train = n_rows - n_test
    if min(n_test, n_train) < n_classes:
        side, rows = ("holds out", n_test) if n_test < n_classes else ("leaves for training", n_train)
        raise DataError(f"{name}: retrain.holdout.fraction {fraction:g} of {n_rows} rows {side} {rows}, fewer than "
                        f"its {n_classes} classes (a stratified holdout needs a row of each on both sides); "
                        "change the fraction or add data")


def check_registry(registry) -> None:
    """Refuse a ``--registry`` that is a file or cannot be written (it is created on first use).

    Raises
    ------
    DimbsvmError
    """
    path = Path(registry)
    if path.exists() and not path.is_dir():
        raise DimbsvmError(f"--registry {path} is an existing file, not a registry directory")
    check_writable(path, "--registry")


def describe(checked: CheckedJob, *, placement=None) -> list[str]:
    """Lines saying what a checked job would do (``dimbsvm validate``).

    ``placement``: where it would run (:func:`~dimbsvm.jobs.placement.place_job`);
    without it, :attr:`CheckedJob.where`.
    """
    job, data = checked.job, checked.data
    counts = _named_class_counts(data)
    cv = job.cv
    lines = [
        f"data: {job.data.source} ({len(data.y)} rows, {_features(data.X.shape)}, "
        f"class counts {{{format_class_counts(list(counts), list(counts.values()))}}})",
        f"estimator: {job.estimator.name} {job.estimator.plain_params() or ''}".rstrip(),
        f"protocol: {cv.n_splits}-fold CV x {cv.n_repeats} = {cv.n_folds} fold tasks; "
        f"metrics {', '.join(job.metrics)}",
        f"runs on: {_runs_on(checked, placement)}",
    ]
    cost = placement.cost_line() if placement is not None else None
    if cost is not None:
        lines.append(f"cost: {cost}")
    search = job_search(job)
    if search is not None:
        folds = cv.n_folds + bool(job.output.model)
        lines.insert(3, f"search: {len(search.candidates)} candidates x {search.n_splits} inner folds in each of "
                        f"{folds} training fold(s) = {len(search.candidates) * search.n_splits * folds} inner fits, "
                        f"chosen by {search.scoring}" + (f" with floor(s) {search.floor}" if search.floor else ""))
    if checked.run is not None:
        run = checked.run
        if run.resuming:
            lines.append(f"run directory: {run.run_dir} (resumes the interrupted run in {run.partial}, "
                         f"{run.saved_folds} fold(s) saved)")
        else:
            lines.append(f"run directory: {run.run_dir} (new)")
    return lines


def described(checked: CheckedJob, *, placement=None) -> dict:
    """What :func:`describe` says, as fields (``dimbsvm validate --json``; see :mod:`dimbsvm.cli_json`)."""
    job, data = checked.job, checked.data
    estimate = None
    if placement is not None and placement.time is not None:
        estimate = {"seconds_low": float(placement.time.low), "seconds_high": float(placement.time.high),
                    "in_process": bool(placement.in_process), "tasks": int(placement.price.n_tasks),
                    "work_seconds": float(placement.seconds)}
    run = checked.run
    return {"job": job.name, "estimator": job.estimator.name, "data": str(job.data.source), "rows": len(data.y),
            "features": math.prod(data.X.shape[1:]),
            "class_counts": {str(name): count for name, count in _named_class_counts(data).items()},
            "folds": job.cv.n_folds, "metrics": list(job.metrics), "runs_on": _runs_on(checked, placement),
            "estimate": estimate, "run_directory": None if run is None else str(run.run_dir),
            "resumes": bool(run is not None and run.resuming)}


def _named_class_counts(data) -> dict:
    """``{class: rows}`` in the order of the codes, each class by the data's name for it (its code without one)."""
    labels, counts = unique_counts(data.y)
    names = {code: name for name, code in class_names(data).items()}  # the data's names, not the codes
    return {names.get(code, code): int(n) for code, n in zip(labels.tolist(), counts.tolist(), strict=True)}


def _runs_on(checked: CheckedJob, placement) -> str:
    if placement is None or not placement.decided:
        return checked.where
    if placement.in_process:
        return f"this process ({placement.work_line()}, below the cluster threshold; --workers N starts a cluster)"
    return f"{checked.where} ({placement.why or placement.action})"


def _features(shape) -> str:
    return f"{shape[1]} features" if len(shape) == 2 else f"rows shaped {tuple(shape[1:])}"
