"""Run a validated job: load data, check it, fit and score every fold and the final model, write the run directory.

The folds and the final model are one plan of the fold engine
(:mod:`dimbsvm.model_selection.folds`): (repeat, fold) prepare / part / finish
tasks, an ensemble's members as parts of their own, all submitted together.

The run directory is assembled under a hidden ``.<name>.partial`` directory
and renamed into place only when everything is written, so a failed run never
leaves a directory that looks complete. Each fold's record is saved there as
soon as it arrives; running the same job again with the same ``--out``
resumes, reusing the folds already finished. One process at a time writes a
run directory: it is claimed (a lock beside it) until the final rename.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._version import __version__
from ..distributed import worker_versions
from ..environment import package_versions, peak_rss_bytes
from ..estimators import make_estimator, make_feature
from ..model_selection.folds import FoldSpec, run_folds
from .part_store import PartDirectory
from ..model_selection.scoring import TIME_METRICS, summarize
from ..model_selection.splits import repeat_seeds, repeat_splits
from ..model_selection.stages import build_stored_stage, stored_stage_of
from ..predict.encoding import prediction_meta
from ..report import write_run_report
from ..store import StoreRows, content_fingerprint
from ..artifacts import save_model
from .data import JobData, check_job_data, code_labels, load_job_data
from .oof import OOF_DIR, fold_predictions_path, load_oof, save_fold_predictions
from .run_dir import (claim_run_dir, job_fingerprint, open_partial, partial_dir, plan_run_dir, release_run_dir,
                      save_fold, summary_markdown, write_json)
from .search_results import (load_fold_search, save_fold_search, search_overview, warn_failed_fits,
                             write_search_tables)
from .spec import SEARCH_DEFAULTS, job_search

__all__ = ["JobData", "RunResult", "run_job", "load_job_data", "check_job_data", "pipeline_kwargs"]

logger = logging.getLogger(__name__)

#: Distributions whose versions a run records.
RUN_PACKAGES = ("dimbsvm", "numpy", "scipy", "scikit-learn", "dask", "distributed", "zarr", "pynndescent", "skops")

#: The key of the final model's "fold" (all rows, no test rows) in a run's plan.
FINAL_MODEL = ("final",)


@dataclass
class RunResult:
    """What a finished run produced."""

    run_dir: Path
    summary: dict
    folds: list
    reused: int = 0
    reused_members: int = 0
    search: dict | None = None


def pipeline_kwargs(job: dict) -> dict:
    """The estimator, feature stages (fitted per fold; not stored ones) and preprocessing of a job's tasks."""
    return {
        "estimator": make_estimator(job["estimator"]["name"], job["estimator"]["params"]),
        "features": [make_feature(stage["name"], stage["params"]) for stage in job["features"]
                     if not stage.get("stored")],
        "scaler": job["preprocessing"]["scaler"],
        "impute": job["preprocessing"]["impute"],
    }


def peak_memory_bytes(dask_worker=None) -> int:
    """Peak resident memory of this process so far, in bytes (:func:`dimbsvm.environment.peak_rss_bytes`)."""
    return peak_rss_bytes()


def run_job(job: dict, client, *, out=None, progress=True, job_text: str | None = None,
            data: JobData | None = None) -> RunResult:
    """Run a validated job on ``client`` and write its run directory.

    Parameters
    ----------
    job : dict
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
        The job's data if already opened (the CLI opens it before starting a
        cluster, so a missing file fails first); else read from the job.

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
        data = load_job_data(job["data"]["source"], nominal=job["data"].get("nominal", ()))
    check_job_data(data, job)
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
        return _run_claimed(job, client, run_dir, data, data_fingerprint, progress=progress, job_text=job_text,
                            started=started, tic=tic)
    finally:
        release_run_dir(run_dir)


def _run_claimed(job, client, run_dir, data, data_fingerprint, *, progress, job_text, started, tic) -> RunResult:
    """:func:`run_job` in the run directory this process has claimed."""
    partial = partial_dir(run_dir)
    fingerprint = job_fingerprint(job)
    finished = open_partial(partial, fingerprint, data_fingerprint, job_text, job)
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

    cv = job["cv"]
    data, pos_label = code_labels(data, positive=job["data"].get("positive"))  # the job's positive class
    steps = pipeline_kwargs(job)
    specs = []
    for seed in repeat_seeds(cv["n_repeats"], cv["random_state"]):
        # the labels are split once per repeat, here, not in every task
        for fold, (train, test) in enumerate(repeat_splits(data.y, n_splits=cv["n_splits"], seed=seed)):
            specs.append(FoldSpec((seed, fold), train, test,
                                  split={"n_splits": cv["n_splits"], "seed": seed, "fold": fold}))
    keys = [spec.key for spec in specs]
    todo = [spec for spec in specs if spec.key not in finished]
    want_model = job["output"]["model"] and not (partial / "model").exists()
    if job["output"]["model"] and not want_model:  # saved whole by the interrupted run, same job and data
        logger.info("reusing the final model saved by the interrupted run in %s", partial)
    if want_model:  # fitted beside the folds, in the same plan
        todo.append(FoldSpec(FINAL_MODEL, np.arange(len(data.y)), np.empty(0, dtype=np.int64),
                             split={"n_splits": cv["n_splits"], "seed": None, "fold": None}))
    if finished:
        logger.info("resuming %s: reusing %d finished fold(s), %d to run", partial, len(finished),
                    len(keys) - len(finished))
    logger.info("job %s: %s on %s (%d rows), %d fold(s)%s%s", job["name"], job["estimator"]["name"],
                data.name, len(data.y), len(keys) - len(finished), " and the final model" if want_model else "",
                f", each choosing among {len(search.candidates)} candidates on {search.n_splits} inner folds"
                if search is not None else "")

    # The report's ROC and precision-recall curves need only the folds: drawn in a thread of their own
    # once every fold is saved, they overlap the final model's fit instead of following it (7 s at 10^7
    # out-of-fold scores, on the client, after the cluster's work).
    curves_ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dimbsvm-report") if want_model else None
    unsaved = {spec.key for spec in todo} - {FINAL_MODEL}
    oof_curves = None

    def draw_curves_once_folds_are_saved():
        nonlocal oof_curves
        if curves_ahead is not None and not unsaved and oof_curves is None:
            oof_curves = curves_ahead.submit(_oof_curves, partial, len(np.unique(data.y)), pos_label)

    draw_curves_once_folds_are_saved()  # a resumed run whose folds were all saved before

    def save(spec, result):
        if search is not None:  # before the fold's record: a fold recorded as finished has its search saved
            selection = result.pop("search")
            save_fold_search(partial, spec.key, selection)
            warn_failed_fits(spec.key, selection, search.error_score)
        if spec.key != FINAL_MODEL:
            # predictions first: a fold recorded as finished has its out-of-fold predictions saved
            predictions = result.pop("predictions")
            save_fold_predictions(partial / OOF_DIR, spec.key, spec.test, data.y[spec.test],
                                  predictions["y_pred"], predictions["score"])
            save_fold(partial, spec.key, result["record"], data_fingerprint)
            unsaved.discard(spec.key)
            draw_curves_once_folds_are_saved()

    phases = {}
    stage = stored_stage_of(job)
    if stage is not None:  # built once into the store, or found there by fingerprint
        phase = time.perf_counter()
        stage = build_stored_stage(stage, data, client=client)
        phases["stored stage"] = time.perf_counter() - phase
    phase = time.perf_counter()
    try:
        results, reused_members = run_folds(
            steps["estimator"], data.X, data.y, todo, client=client, scaler=steps["scaler"], impute=steps["impute"],
            features=steps["features"], metrics=job["metrics"], pos_label=pos_label,
            retries=job["execution"]["retries"], part_store=PartDirectory(partial / "members"), on_result=save,
            progress=progress, label="tasks", task_labels=data.X.labels() if isinstance(data.X, StoreRows) else None,
            stage=stage, keep_predictions=True, search=search)
    finally:
        if curves_ahead is not None:
            curves_ahead.shutdown(wait=False)  # a figure being drawn finishes; the report waits for it
    phases["folds and final model" if want_model else "folds"] = time.perf_counter() - phase
    by_key = dict(finished)
    for spec, result in zip(todo, results):
        if spec.key == FINAL_MODEL:
            _save_final_model(result["model"], job, data, pos_label, partial)
        else:
            by_key[spec.key] = result["record"]
    final_model = next((result["model"] for spec, result in zip(todo, results) if spec.key == FINAL_MODEL), None)
    all_records = [by_key[key] for key in keys]
    summary = summarize(all_records, [m for m in job["metrics"] if m not in TIME_METRICS])
    timings = summarize(all_records, [m for m in job["metrics"] if m in TIME_METRICS])

    memory = _worker_memory(client)
    resources = {
        "peak_worker_memory_bytes": memory,
        "peak_worker_memory_max_bytes": max(memory.values()) if memory else None,
        "phase_seconds": phases,
        "note": "peak resident memory (VmHWM) of each worker process since it started, by worker name",
    }
    write_json(partial / "resources.json", resources)
    finished_at = _dt.datetime.now(_dt.UTC)
    payload = {
        "job": job["name"],
        "estimator": job["estimator"],
        "dataset": {k: v for k, v in data.meta.items() if k != "feature_names"},
        "data_source": job["data"]["source"],  # as the job gives it (the dataset's path is resolved)
        "positive_label": pos_label,
        "cv": cv,
        "summary": summary,
        "timings": timings,
        "folds": all_records,
        "reused_folds": len(finished),
        "reused_members": reused_members,
        "dimbsvm_version": __version__,
        "versions": {"python": platform.python_version(), **package_versions(RUN_PACKAGES)},
        "worker_versions": worker_versions(client),  # what the tasks ran with ({} in this process)
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": finished_at.isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - tic, 3),
    }
    if search is not None:
        selections = {key: load_fold_search(partial, key) for key in keys}
        if job["output"]["model"]:
            selections[FINAL_MODEL] = load_fold_search(partial, FINAL_MODEL)
        write_search_tables(partial, selections, scoring=search.scoring)
        payload["search"] = search_overview(selections, search={**SEARCH_DEFAULTS, **job["search"]},
                                            scoring=search.scoring)
    write_json(partial / "metrics.json", payload)
    (partial / "summary.md").write_text(summary_markdown(job, data, summary, all_records))
    write_run_report(partial, job=job, data=data, metrics=payload, resources=resources, oof=load_oof(partial),
                     final_estimator=_last_step(final_model), oof_curves=oof_curves)
    os.replace(partial, run_dir)  # the run directory appears only once complete
    return RunResult(run_dir=run_dir, summary=summary, folds=all_records, reused=len(finished),
                     reused_members=reused_members, search=payload.get("search"))


def _oof_curves(partial, n_classes, pos_label):
    """:func:`~dimbsvm.report.run_report.oof_curves_png` of the out-of-fold predictions saved in ``partial``."""
    from ..report.run_report import oof_curves_png

    return oof_curves_png(load_oof(partial), n_classes, pos_label)


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


def _save_final_model(model, job, data, pos_label, partial):
    save_model(model, partial / "model", meta={
        "job": job["name"], "estimator": job["estimator"], "preprocessing": job["preprocessing"],
        "n_features": int(data.X.shape[1]), "input_shape": list(data.X.shape[1:]),
        "class_map": data.meta.get("class_map", {}), "data_fingerprint": content_fingerprint(data.meta) or None,
        "positive_label": pos_label, "feature_names": data.meta.get("feature_names"),
        # what scoring raw rows needs: input columns, training categories, class names (dimbsvm.predict)
        **prediction_meta(data.meta, pos_label=pos_label, model=model,
                          unknown_categories=job["data"].get("unknown_categories", "error")),
    })
