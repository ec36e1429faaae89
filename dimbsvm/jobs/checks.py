"""Everything a job is checked for before a cluster starts or a task is submitted.

:func:`check_job` is the one preflight: ``dimbsvm run``, ``retrain`` and
``validate`` all call it, so ``dimbsvm validate JOB.yaml`` runs exactly the
checks a run would, and a run that passes them fails later only for reasons
that cannot be known in advance (a worker lost for good, a disk that fills).

In order, cheapest first:

1. the job file: YAML, schema, estimator and feature-stage parameters;
2. where it runs: scheduler address syntax, scheduler file, TLS files and the
   ``cryptography`` package, encryption required over ``tcp://``
   (nothing is contacted);
3. where it writes: ``--out`` (not a file, a finished run, an empty or a
   foreign directory; writable), ``--registry`` (a directory, writable);
4. the data: readable, finite, labels that are classes, two where the
   estimator or a metric needs two, every fold feasible
   (:func:`~dimbsvm.jobs.data.check_job_data`);
5. the run directory: a new one, or the interrupted run to resume (same job
   and data), see :func:`~dimbsvm.jobs.run_dir.plan_run_dir`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..distributed.client import TLSSettings, check_cluster_options
from ..exceptions import DimbsvmError, JobSpecError
from ..store import content_fingerprint
from .data import JobData, check_job_data, load_job_data
from .run_dir import RUNS_ROOT, RunDirPlan, check_out_path, check_writable, plan_run_dir
from .spec import job_search, load_job

__all__ = ["CheckedJob", "check_job", "check_registry", "describe"]


@dataclass
class CheckedJob:
    """A job that passed every check, with what the checks opened.

    Attributes
    ----------
    job : dict
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

    job: dict
    job_text: str
    data: JobData
    where: str
    run: RunDirPlan | None = None


def check_job(job_path, *, run_dir: bool = True, out=None, resume: bool = False, fresh: bool = False,
              registry=None, scheduler: str | None = None, scheduler_file: str | None = None,
              tls: TLSSettings | None = None, runs_root=RUNS_ROOT) -> CheckedJob:
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
        A model registry directory the run will write (``retrain``).
    scheduler, scheduler_file, tls
        As given to :func:`~dimbsvm.distributed.cluster_client`.
    runs_root : path, default="runs"
        Where runs go without ``out``.

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
    job = load_job(job_path)
    try:
        job_text = Path(job_path).read_text()
    except OSError as exc:  # pragma: no cover - load_job just read it
        raise JobSpecError(f"cannot read job file {job_path}: {exc.strerror or exc}") from exc
    where = check_cluster_options(scheduler, scheduler_file=scheduler_file, tls=tls,
                                  require_encryption=job["execution"]["require_encryption"])
    if run_dir and out is not None:
        check_out_path(out)  # a path that cannot be used fails before the data is read
    if registry is not None:
        check_registry(registry)
    data = load_job_data(job["data"]["source"], nominal=job["data"].get("nominal", ()))
    check_job_data(data, job)
    plan = None
    if run_dir:
        plan = plan_run_dir(job, content_fingerprint(data.meta), out=out, resume=resume, fresh=fresh,
                            runs_root=runs_root)
    return CheckedJob(job=job, job_text=job_text, data=data, where=where, run=plan)


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


def describe(checked: CheckedJob) -> list[str]:
    """Lines saying what a checked job would do (``dimbsvm validate``)."""
    import numpy as np

    job, data = checked.job, checked.data
    labels, counts = np.unique(data.y, return_counts=True)
    cv = job["cv"]
    lines = [
        f"data: {job['data']['source']} ({len(data.y)} rows, {_features(data.X.shape)}, "
        f"class counts {dict(zip(labels.tolist(), counts.tolist()))})",
        f"estimator: {job['estimator']['name']} {job['estimator']['params'] or ''}".rstrip(),
        f"protocol: {cv['n_splits']}-fold CV x {cv['n_repeats']} = {cv['n_splits'] * cv['n_repeats']} fold tasks; "
        f"metrics {', '.join(job['metrics'])}",
        f"runs on: {checked.where}",
    ]
    search = job_search(job)
    if search is not None:
        folds = cv["n_splits"] * cv["n_repeats"] + bool(job["output"]["model"])
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


def _features(shape) -> str:
    return f"{shape[1]} features" if len(shape) == 2 else f"rows shaped {tuple(shape[1:])}"
