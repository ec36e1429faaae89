"""Run a validated job: load data, check it, fit and score every fold and the final model, write the run directory.

A run is three steps: :func:`plan_run` (the partial directory opened, the
labels coded and split, the folds still to run decided; nothing submitted),
:func:`execute_run` (the folds and the final model as one plan of the fold
engine, :mod:`dimbsvm.model_selection.folds`: (repeat, fold) prepare / part /
finish tasks, an ensemble's members as parts of their own, all submitted
together) and :func:`write_run` (records, summary, report, the final rename).
The job's :class:`~dimbsvm.model_selection.folds.FoldSetup` and folds
(:mod:`dimbsvm.jobs.job_folds`) and their submission (:func:`execute_folds`)
are shared with :mod:`dimbsvm.jobs.retrain`.

The run directory is assembled under a hidden ``.<name>.partial`` directory
and renamed into place only when everything is written, so a failed run never
leaves a directory that looks complete. Each fold's record is saved there as
soon as it arrives; running the same job again with the same ``--out``
resumes, reusing the folds already finished. One process at a time writes a
run directory: it is claimed (a lock beside it) until the final rename.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Mapping


from .._counts import unique_counts
from .._version import __version__
from ..distributed import worker_versions
from ..environment import package_versions, peak_rss_bytes
from ..model_selection.folds import FoldSetup, run_folds
from .part_store import PartDirectory
from ..model_selection.scoring import TIME_METRICS, summarize
from ..model_selection.search import Search
from ..model_selection.stages import build_stored_stage
from ..parallel.policy import in_order_threads
from ..predict.encoding import prediction_meta
from ..report.run_report import DataSummary, ThresholdSearch, class_names_by_code
from ..store import StoreRows, content_fingerprint
from ..store.finite import META_KEY as NONFINITE_KEY
from ..artifacts import load_artifact, save_model
from .checks import CheckedJob
from .data import JobData, check_job_data, code_labels, load_job_data
from .job_folds import FINAL_MODEL, final_model_spec, fold_setup, run_specs, task_labels_of
from .job_spec import JobSpec
from .oof import OOF_DIR, FoldPredictionWriter, fold_predictions_path, save_fold_predictions
from .threshold_runs import RUNS_DIR, ThresholdRunDirectory
from .report_drawing import draw_ahead, prepare_drawing, report_process, write_report
from .run_dir import (claim_run_dir, job_fingerprint, open_partial, partial_dir, plan_run_dir, release_run_dir,
                      save_fold, write_json)
from .search_results import (load_fold_search, save_fold_search, search_overview, warn_failed_fits,
                             write_search_tables)
from .spec import job_search

__all__ = ["ExecutedRun", "JobData", "RunPlan", "RunResult", "check_job_data", "execute_folds", "execute_run",
           "fold_setup", "load_job_data", "plan_run", "run_checked", "run_job", "write_run"]

logger = logging.getLogger(__name__)

#: Distributions whose versions a run records.
RUN_PACKAGES = ("dimbsvm", "numpy", "scipy", "scikit-learn", "dask", "distributed", "zarr", "pynndescent", "skops")

@dataclass
class RunResult:
    """What a finished run produced."""

    run_dir: Path
    summary: dict
    folds: list
    reused: int = 0
    reused_members: int = 0
    search: dict | None = None
    #: Each time metric of the job (``fit_time``, ``predict_time``) over the folds: mean, std, min, max, n.
    timings: dict = field(default_factory=dict)
    #: The run's wall time by phase, in order (``resources.json``'s ``phase_seconds``).
    phases: dict = field(default_factory=dict)


def execute_folds(job: JobSpec, setup: FoldSetup, data: JobData, specs, *, client, label: str, on_result=None,
                  progress: bool = False, store_labels: bool = False):
    """Fit (and score) ``specs`` of ``data`` as one plan of the fold engine, with the job's retries.

    ``store_labels``: tasks over a store read its labels where they run
    instead of receiving them. Returns what
    :func:`~dimbsvm.model_selection.folds.run_folds` returns.
    """
    return run_folds(setup, data.X, data.y, specs, client=client, retries=job.execution.retries,
                     on_result=on_result, progress=progress, label=label,
                     task_labels=task_labels_of(data, store_labels=store_labels))


def peak_memory_bytes(dask_worker=None) -> int:
    """Peak resident memory of this process so far, in bytes (:func:`dimbsvm.environment.peak_rss_bytes`)."""
    return peak_rss_bytes()


def run_job(job: JobSpec, client, *, out=None, progress=True, job_text: str | None = None,
            data: JobData | None = None) -> RunResult:
    """Check ``job``'s data, run the job on ``client`` and write its run directory.

    A job that passed :func:`~dimbsvm.jobs.checks.check_job` is run by
    :func:`run_checked` instead, without checking its data again.

    Parameters
    ----------
    job : JobSpec
        As returned by :func:`dimbsvm.jobs.validate_job`.
    client : distributed.Client or None
        Where the tasks run; ``None`` runs them in this process.
    out : path, default=None
        The run directory; default ``runs/<name>-<UTC timestamp>`` (with a
        suffix ``-2``, ``-3``... where that name is taken). It must not exist
        yet; if an interrupted run of the same job left its partial directory,
        the run resumes from it. It is claimed for this process from here to
        its final rename: another process writing it is refused.
    progress : bool, default=True
        Show task progress on stderr.
    job_text : str, default=None
        The job file as written, copied into the run directory verbatim.
    data : JobData, default=None
        The job's data if already opened; else read from the job. It is
        checked here (:func:`~dimbsvm.jobs.data.check_job_data`).

    Returns
    -------
    RunResult

    Raises
    ------
    LockHeld
        Another process is writing the run directory (:func:`~dimbsvm.jobs.run_dir.claim_run_dir`).
    FileExistsError
        The run directory exists (a finished run).
    """
    started, tic = _dt.datetime.now(_dt.UTC), time.perf_counter()
    if out and Path(out).exists():
        raise FileExistsError(f"run directory {out} already exists and is complete; choose another --out")
    if data is None:
        data = load_job_data(job.data.source, nominal=job.data.nominal)
    check_job_data(data, job)
    return _run(job, client, data, out=out, progress=progress, job_text=job_text, started=started, tic=tic)


def run_checked(checked: CheckedJob, client, *, progress=True, phases_before=None) -> RunResult:
    """Run a job that passed :func:`~dimbsvm.jobs.checks.check_job`, in the run directory it planned.

    Its data is not checked again: the checks opened and checked it.
    ``phases_before``: the seconds of what the caller did first (``{"start-up": s, "checks": s, ...}``), which
    lead the run's phase split.
    """
    started, tic = _dt.datetime.now(_dt.UTC), time.perf_counter()
    out = checked.run.run_dir if checked.run is not None else None
    if out and Path(out).exists():
        raise FileExistsError(f"run directory {out} already exists and is complete; choose another --out")
    return _run(checked.job, client, checked.data, out=out, progress=progress, job_text=checked.job_text,
                started=started, tic=tic, phases_before=phases_before)


def _run(job: JobSpec, client, data: JobData, *, out, progress, job_text, started, tic,
         phases_before=None) -> RunResult:
    """Claim the run directory, then plan, execute and write the run (``data`` checked for ``job``)."""
    data_fingerprint = content_fingerprint(data.meta)
    # this process alone writes the run directory until it is renamed into place (the CLI claimed it when it
    # planned the run; claiming again is then a no-op)
    if out:
        run_dir = Path(out)
        claim_run_dir(run_dir)
    else:  # a new timestamped name, claimed: two runs started in the same second get two directories
        run_dir = plan_run_dir(job, data_fingerprint, fresh=True).run_dir
    try:
        if run_dir.exists():  # finished by another process before this one claimed it
            raise FileExistsError(f"run directory {run_dir} already exists and is complete; choose another --out")
        phase = time.perf_counter()
        plan = plan_run(job, data, run_dir, data_fingerprint=data_fingerprint, job_text=job_text)
        planned = {**(phases_before or {}), "plan": time.perf_counter() - phase}
        executed = execute_run(plan, client, progress=progress)
        executed = replace(executed, phases=MappingProxyType({**planned, **executed.phases}))
        result = write_run(plan, executed, client, started=started, tic=tic)
    finally:
        release_run_dir(run_dir)
        if isinstance(data.X, StoreRows):
            from ..store.chunk_cache import release_store

            release_store(data.X.path, data.X.fingerprint)  # the chunks this process cached for the job
    if isinstance(data.X, StoreRows) and client is not None:
        # only after a run that ended well: a failed one may have lost its scheduler, and asking it would wait
        _release_workers_chunks(data.X, client)
    return result


def _release_workers_chunks(rows: StoreRows, client) -> None:
    """Drop the store's chunks the cluster's workers cached for the job (best effort)."""
    from ..store.chunk_cache import release_store

    try:
        client.run(release_store, rows.path, rows.fingerprint, on_error="ignore")
    except Exception as exc:  # noqa: BLE001 - best effort: the workers' caches stay bounded by their share
        logger.debug("could not release the workers' cached chunks: %s", exc)


@dataclass(frozen=True)
class RunPlan:
    """What a run will do, decided before any task: the plan step of :func:`run_job`.

    Attributes
    ----------
    job : JobSpec
    data : JobData
        The job's data, its labels coded (:func:`~dimbsvm.jobs.data.code_labels`).
    pos_label : object
        The positive class's code.
    data_fingerprint : str
    run_dir, partial : Path
        The run directory and the partial directory it is assembled in.
    keys : tuple
        Every CV fold's key, in order.
    finished : Mapping
        ``{key: record}`` of the folds an interrupted run saved.
    todo : tuple of FoldSpec
        The folds to run, then the final model's "fold" if it is to be fitted.
    want_model : bool
        The final model is fitted in this run (not reused from the partial directory).
    search : Search or None
    """

    job: JobSpec
    data: JobData
    pos_label: object
    data_fingerprint: str
    run_dir: Path
    partial: Path
    keys: tuple
    finished: Mapping
    todo: tuple
    want_model: bool
    search: Search | None


def plan_run(job: JobSpec, data: JobData, run_dir: Path, *, data_fingerprint: str,
             job_text: str | None = None) -> RunPlan:
    """Open (or reopen) the run's partial directory and decide which folds run: nothing is submitted."""
    partial = partial_dir(run_dir)
    finished = open_partial(partial, job_fingerprint(job), data_fingerprint, job_text, job)
    # a fold recorded without its out-of-fold predictions (a partial run of an earlier dimbsvm) runs
    # again: the report's curves must cover every fold
    for key in [key for key in finished if not fold_predictions_path(partial / OOF_DIR, key).exists()]:
        logger.info("fold %s of %s has no saved predictions; running it again", key, partial)
        del finished[key]
    search = job_search(job)
    if search is not None:  # likewise a fold without its saved search
        for key in [key for key in finished if load_fold_search(partial, key) is None]:
            logger.info("fold %s of %s has no saved search; running it again", key, partial)
            del finished[key]

    data, pos_label = code_labels(data, positive=job.data.positive)  # the job's positive class
    specs = run_specs(job, data, search=search)
    keys = tuple(spec.key for spec in specs)
    todo = [spec for spec in specs if spec.key not in finished]
    want_model = job.output.model and not (partial / "model").exists()
    if job.output.model and not want_model:  # saved whole by the interrupted run, same job and data
        logger.info("reusing the final model saved by the interrupted run in %s", partial)
    if want_model:  # fitted beside the folds, in the same plan
        todo.append(final_model_spec(job, data, search=search))
    if finished:
        logger.info("resuming %s: reusing %d finished fold(s), %d to run", partial, len(finished),
                    len(keys) - len(finished))
    logger.info("job %s: %s on %s (%d rows), %d fold(s)%s%s", job.name, job.estimator.name,
                data.name, len(data.y), len(keys) - len(finished), " and the final model" if want_model else "",
                f", each choosing among {len(search.candidates)} candidates on {search.n_splits} inner folds"
                if search is not None else "")
    return RunPlan(job=job, data=data, pos_label=pos_label, data_fingerprint=data_fingerprint, run_dir=run_dir,
                   partial=partial, keys=keys, finished=MappingProxyType(finished), todo=tuple(todo),
                   want_model=want_model, search=search)


@dataclass(frozen=True)
class ExecutedRun:
    """What the execute step of a run produced: the records of every fold, the final model, the timings."""

    records: tuple
    final_model: object
    reused_members: int
    phases: Mapping
    drawn_ahead: object


def execute_run(plan: RunPlan, client, *, progress=True) -> ExecutedRun:
    """Run the plan's folds and final model as one plan of tasks, saving each fold as it arrives."""
    job, data, partial, search = plan.job, plan.data, plan.partial, plan.search
    # The report's out-of-fold sections (curves, thresholds, calibration) and the figures of the folds' records
    # need only the folds: drawn once every fold is saved, in the report's side process or else in a thread of
    # their own, they overlap the final model's fit instead of following it (at millions of out-of-fold scores
    # they are seconds of work).
    drawing = report_process()
    threads = None
    if drawing is None and plan.want_model:
        drawing = threads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dimbsvm-report")
        if client is not None:
            # while the cluster works this process waits: the report's libraries are imported meanwhile (in a
            # job run in this process the imports would hold the interpreter against the folds)
            threads.submit(prepare_drawing)
    unsaved = {spec.key for spec in plan.todo} - {FINAL_MODEL}
    records = dict(plan.finished)  # every fold's record, as the run's metrics will list them
    drawn_ahead = None

    def draw_ahead_once_folds_are_saved():
        nonlocal drawn_ahead
        if drawing is not None and not unsaved and drawn_ahead is None:
            folds = [records[key] for key in plan.keys]
            # (split over two processes in the side process only: a thread of this process must not fork it)
            drawn_ahead = drawing.submit(draw_ahead, partial, class_names_by_code(data), plan.pos_label,
                                         job.cv.n_repeats, folds, _summary_metrics(job), threads is None)

    draw_ahead_once_folds_are_saved()  # a resumed run whose folds were all saved before

    def save(spec, result):
        if search is not None:  # before the fold's record: a fold recorded as finished has its search saved
            selection = result.search
            save_fold_search(partial, spec.key, selection)
            warn_failed_fits(spec.key, selection, search.error_score)
        if spec.key != FINAL_MODEL:
            # predictions first: a fold recorded as finished has its out-of-fold predictions saved
            predictions = result.take_predictions()  # None: the fold's task wrote them (FoldPredictionWriter)
            if predictions is not None:
                test = predictions.rows
                save_fold_predictions(partial / OOF_DIR, spec.key, test, data.y[test], predictions.y_pred,
                                      predictions.score, predictions.proba, plan.pos_label)
            save_fold(partial, spec.key, result.record, plan.data_fingerprint)
            records[spec.key] = result.record
            unsaved.discard(spec.key)
            draw_ahead_once_folds_are_saved()

    phases = {}
    [stage] = job.stored_features or [None]
    if stage is not None:  # built once into the store, or found there by fingerprint
        phase = time.perf_counter()
        stage = build_stored_stage(stage, data, client=client)
        phases["stored stage"] = time.perf_counter() - phase
    parts = PartDirectory(partial / "members", background=True)  # members saved while the next one fits
    # the folds' tasks write their predictions there, each with its summary for the report
    writer = FoldPredictionWriter.open(partial / OOF_DIR, plan.pos_label)
    # the shared threshold's sorted runs kept on disk, so that no range task receives every training row
    spill = ThresholdRunDirectory.open(partial / RUNS_DIR)
    setup = replace(fold_setup(job, plan.pos_label, stage=stage, search=search, keep_predictions=True,
                               part_store=parts, prediction_sink=writer, class_map=data.meta.get("class_map")),
                    run_spill=spill)
    phase = time.perf_counter()
    try:
        # a job run in this process runs its tasks in order, as a one-thread worker would: one BLAS thread
        with in_order_threads() if client is None else contextlib.nullcontext():
            results, reused_members = execute_folds(job, setup, data, plan.todo, client=client, label="tasks",
                                                    on_result=save, progress=progress, store_labels=True)
    finally:
        parts.close()
        writer.close()
        spill.close()
        if threads is not None:
            threads.shutdown(wait=False)  # sections being drawn finish; the report waits for them
    phases["folds and final model" if plan.want_model else "folds"] = time.perf_counter() - phase
    final_model = None
    for spec, result in zip(plan.todo, results):  # (every fold's record is in records: saved as it arrived)
        if spec.key == FINAL_MODEL:
            final_model = result.model
            _save_final_model(final_model, job, data, plan.pos_label, partial)
    if final_model is None and job.output.model:
        # saved by the interrupted run this one resumes: the report's threshold sections read it
        final_model, _ = load_artifact(partial / "model")
    return ExecutedRun(records=tuple(records[key] for key in plan.keys), final_model=final_model,
                       reused_members=reused_members, phases=MappingProxyType(phases), drawn_ahead=drawn_ahead)


def write_run(plan: RunPlan, executed: ExecutedRun, client, *, started, tic) -> RunResult:
    """Write the run's records, summary and report into the partial directory, then rename it into place."""
    job, data, partial, search = plan.job, plan.data, plan.partial, plan.search
    phase = time.perf_counter()
    all_records = list(executed.records)
    summary = summarize(all_records, _summary_metrics(job))
    timings = summarize(all_records, [m for m in job.metrics if m in TIME_METRICS])

    memory = _worker_memory(client)
    resources = {
        "peak_worker_memory_bytes": memory,
        "peak_worker_memory_max_bytes": max(memory.values()) if memory else None,
        "phase_seconds": dict(executed.phases),
        "note": "peak resident memory (VmHWM) of each worker process since it started, by worker name; "
                "phase_seconds: the run's wall time by phase, the report's own last",
    }
    finished_at = _dt.datetime.now(_dt.UTC)
    payload = {
        "job": job.name,
        "estimator": job.estimator.to_dict(),
        # (a store's record of its NaN/inf rows is bookkeeping for the data check, not a fact of the run)
        "dataset": {k: v for k, v in data.meta.items() if k not in ("feature_names", NONFINITE_KEY)},
        "data_source": job.data.source,  # as the job gives it (the dataset's path is resolved)
        "positive_label": plan.pos_label,
        "cv": job.cv.to_dict(),
        "summary": summary,
        "timings": timings,
        "folds": all_records,
        "reused_folds": len(plan.finished),
        "reused_members": executed.reused_members,
        "dimbsvm_version": __version__,
        "versions": {"python": platform.python_version(), **package_versions(RUN_PACKAGES)},
        "worker_versions": worker_versions(client),  # what the tasks ran with ({} in this process)
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": finished_at.isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - tic, 3),
    }
    if search is not None:
        selections = {key: load_fold_search(partial, key) for key in plan.keys}
        if job.output.model:
            selections[FINAL_MODEL] = load_fold_search(partial, FINAL_MODEL)
        write_search_tables(partial, selections, scoring=search.scoring)
        payload["search"] = search_overview(selections, search=job.search.with_defaults(), scoring=search.scoring)
    write_json(partial / "metrics.json", payload)
    (partial / "summary.md").write_text(_summary_markdown(job, data, summary, all_records))
    resources["phase_seconds"]["records"] = time.perf_counter() - phase
    phase = time.perf_counter()
    write_report(partial, ahead=executed.drawn_ahead, job=job, data=DataSummary.of(data), metrics=payload,
                 resources=resources, final_estimator=ThresholdSearch.of(_last_step(executed.final_model)))
    resources["phase_seconds"]["report"] = time.perf_counter() - phase
    write_json(partial / "resources.json", resources)  # (written last: it holds the report's own time)
    os.replace(partial, plan.run_dir)  # the run directory appears only once complete
    return RunResult(run_dir=plan.run_dir, summary=summary, folds=all_records, reused=len(plan.finished),
                     reused_members=executed.reused_members, search=payload.get("search"), timings=timings,
                     phases=dict(resources["phase_seconds"]))


def _summary_metrics(job) -> list:
    """The metrics a run summarises (mean, spread) over its folds: the job's, but the times."""
    return [m for m in job.metrics if m not in TIME_METRICS]


def _worker_memory(client) -> dict:
    """Peak resident memory of every worker (by name: addresses change from run to run), or of this process."""
    if client is None:
        return {"this process": peak_memory_bytes()}
    by_address = client.run(peak_memory_bytes)
    names = {address: str(info.get("name", address))
             for address, info in client.scheduler_info(n_workers=-1)["workers"].items()}
    return {names.get(address, address): value for address, value in by_address.items()}


def _last_step(model):
    """The estimator at the end of a fitted pipeline (or the model itself); ``None`` stays ``None``."""
    steps = getattr(model, "steps", None)
    return steps[-1][1] if steps else model


def model_meta(model, job: JobSpec, data, pos_label) -> dict:
    """What a saved model records (``meta.json``): its job and data, and what scoring raw rows needs.

    The same for a run's final model and a retrained version, so that
    ``dimbsvm predict`` and :func:`dimbsvm.load_model` read either alike.
    """
    return {
        "job": job.name, "estimator": job.estimator.to_dict(), "preprocessing": job.preprocessing.to_dict(),
        "n_features": int(data.X.shape[1]), "input_shape": list(data.X.shape[1:]),
        "class_map": data.meta.get("class_map", {}), "data_fingerprint": content_fingerprint(data.meta) or None,
        "positive_label": pos_label, "feature_names": data.meta.get("feature_names"),
        # whether those names came with the data (prediction matches them) or a reader made them up (by position)
        **({"named_columns": data.meta["named_columns"]} if "named_columns" in data.meta else {}),
        # input columns, training categories, class names (dimbsvm.predict)
        **prediction_meta(data.meta, pos_label=pos_label, model=model,
                          unknown_categories=job.data.unknown_categories or "error"),
    }


def _save_final_model(model, job: JobSpec, data, pos_label, partial):
    save_model(model, partial / "model", meta=model_meta(model, job, data, pos_label))


def _summary_markdown(job: JobSpec, data, summary, records) -> str:
    """``summary.md``: the job, the data's class counts and each metric's spread over the folds."""
    from .data import class_names

    labels, counts = unique_counts(data.y)
    names = {code: name for name, code in class_names(data).items()}  # the data's names, not the codes
    lines = [
        f"# {job.name}",
        "",
        f"- data: `{job.data.source}` ({len(data.y)} rows, {data.X.shape[1]} features, "
        f"class counts {', '.join(f'{names.get(int(c), c)}: {int(n)}' for c, n in zip(labels, counts))})",
        f"- estimator: `{job.estimator.name}` {job.estimator.plain_params() or ''}",
        f"- protocol: stratified {job.cv.n_splits}-fold CV x {job.cv.n_repeats} repeat(s), "
        f"seeds from {job.cv.random_state}; {job.preprocessing.scaler} scaling fitted per training fold",
        "",
        "| metric | mean | std | min | max |",
        "|---|---|---|---|---|",
    ]
    for name, s in summary.items():
        lines.append(f"| {name} | {s['mean']:.4f} | {s['std']:.4f} | {s['min']:.4f} | {s['max']:.4f} |")
    lines += ["", f"{len(records)} folds; per-fold values in `metrics.json`.", ""]
    return "\n".join(lines)
