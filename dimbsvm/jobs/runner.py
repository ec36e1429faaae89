"""Run a validated job: load data, check it, fan out (repeat, fold) tasks, write the run directory.

Ensembles fan out further, as (repeat, fold, member) tasks
(:mod:`dimbsvm.jobs.ensemble_folds`).

The run directory is assembled under a hidden ``.<name>.partial`` directory
and renamed into place only when everything is written, so a failed run never
leaves a directory that looks complete. Each fold's record is saved there as
soon as it arrives; running the same job again with the same ``--out``
resumes, reusing the folds already finished.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..distributed import run_tasks
from ..estimators import make_estimator, make_feature
from ..evaluation import evaluate_fold, fit_pipeline, positive_label, repeat_seeds, summarize
from .artifacts import save_model
from .data import JobData, check_job_data, load_job_data
from .ensemble_folds import is_member_fanout, run_ensemble_folds
from .run_dir import job_fingerprint, open_partial, save_fold, summary_markdown, write_json

__all__ = ["JobData", "RunResult", "run_job", "load_job_data", "check_job_data", "pipeline_kwargs"]

logger = logging.getLogger(__name__)


@dataclass
class RunResult:
    """What a finished run produced."""

    run_dir: Path
    summary: dict
    folds: list
    reused: int = 0
    reused_members: int = 0


def pipeline_kwargs(job: dict) -> dict:
    """The estimator, feature stages and preprocessing a job's tasks build their pipeline from."""
    return {
        "estimator": make_estimator(job["estimator"]["name"], job["estimator"]["params"]),
        "features": [make_feature(stage["name"], stage["params"]) for stage in job["features"]],
        "scaler": job["preprocessing"]["scaler"],
        "impute": job["preprocessing"]["impute"],
    }


def peak_memory_bytes(dask_worker=None) -> int:
    """Peak resident memory of this process so far (``ru_maxrss``), in bytes."""
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def run_job(job: dict, client, *, out=None, progress=True, job_text: str | None = None,
            data: JobData | None = None) -> RunResult:
    """Run a validated job on ``client`` and write its run directory.

    Parameters
    ----------
    job : dict
        As returned by :func:`dimbsvm.jobs.validate_job`.
    client : distributed.Client
    out : path, default=None
        The run directory; default ``runs/<name>-<UTC timestamp>``. It must
        not exist yet; if an interrupted run of the same job left its partial
        directory, the run resumes from it.
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
    """
    run_dir = Path(out) if out else Path("runs") / f"{job['name']}-{_dt.datetime.now(_dt.UTC):%Y%m%d-%H%M%S}"
    if run_dir.exists():
        raise FileExistsError(f"run directory {run_dir} already exists and is complete; choose another --out")
    if data is None:
        data = load_job_data(job["data"]["source"], nominal=job["data"].get("nominal", ()))
    check_job_data(data, job)

    partial = run_dir.with_name(f".{run_dir.name}.partial")
    fingerprint = job_fingerprint(job)
    data_fingerprint = data.meta.get("fingerprint") or ""
    finished = open_partial(partial, fingerprint, data_fingerprint, job_text, job)

    cv = job["cv"]
    pos_label = positive_label(data.y)
    common = dict(pipeline_kwargs(job), n_splits=cv["n_splits"], metrics=tuple(job["metrics"]),
                  pos_label=pos_label)
    keys = [(seed, fold) for seed in repeat_seeds(cv["n_repeats"], cv["random_state"])
            for fold in range(cv["n_splits"])]
    todo = [key for key in keys if key not in finished]
    if finished:
        logger.info("resuming %s: reusing %d finished fold(s), %d to run", partial, len(keys) - len(todo), len(todo))
    logger.info("job %s: %s on %s (%d rows), %d fold tasks", job["name"], job["estimator"]["name"],
                data.name, len(data.y), len(todo))

    reused_members = 0
    if is_member_fanout(common["estimator"]):
        # (repeat, fold, member) tasks: members of every fold run side by side
        records, reused_members = run_ensemble_folds(
            client, keys=todo, data=data, member_dir=partial / "members",
            on_record=lambda key, record: save_fold(partial, key, record, data_fingerprint),
            progress=progress, label="fold/member tasks", **_fanout_kwargs(job, common),
        )
    else:
        def save(i, record):
            save_fold(partial, todo[i], record, data_fingerprint)

        records = run_tasks(
            client, evaluate_fold, [{"seed": s, "fold": f, **common} for s, f in todo],
            shared={"X": data.X, "y": data.y}, retries=job["execution"]["retries"],
            progress=progress, label="folds", on_result=save,
        )
    by_key = dict(finished) | {key: record for key, record in zip(todo, records)}
    all_records = [by_key[key] for key in keys]
    summary = summarize(all_records, job["metrics"])

    if job["output"]["model"]:
        if (partial / "model").exists():  # saved whole (atomically) by the interrupted run, same job and data
            logger.info("reusing the final model saved by the interrupted run in %s", partial)
        else:
            _save_final_model(client, job, data, common, partial)
    memory = client.run(peak_memory_bytes)
    write_json(partial / "resources.json", {
        "peak_worker_memory_bytes": memory,
        "peak_worker_memory_max_bytes": max(memory.values()) if memory else None,
        "note": "ru_maxrss of each worker process since it started",
    })
    write_json(partial / "metrics.json", {
        "job": job["name"],
        "estimator": job["estimator"],
        "dataset": {k: v for k, v in data.meta.items() if k != "feature_names"},
        "positive_label": pos_label,
        "cv": cv,
        "summary": summary,
        "folds": all_records,
        "reused_folds": len(keys) - len(todo),
        "reused_members": reused_members,
        "dimbsvm_version": __version__,
        "finished_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    })
    (partial / "summary.md").write_text(summary_markdown(job, data, summary, all_records))
    os.replace(partial, run_dir)  # the run directory appears only once complete
    return RunResult(run_dir=run_dir, summary=summary, folds=all_records, reused=len(keys) - len(todo),
                     reused_members=reused_members)


def _fanout_kwargs(job, common) -> dict:
    return dict(estimator=common["estimator"], n_splits=job["cv"]["n_splits"], scaler=common["scaler"],
                impute=common["impute"], features=common["features"], metrics=common["metrics"],
                pos_label=common["pos_label"], retries=job["execution"]["retries"])


def _save_final_model(client, job, data, common, partial):
    if is_member_fanout(common["estimator"]):
        [model], _ = run_ensemble_folds(client, keys=[(0, None)], data=data, member_dir=partial / "members",
                                        progress=False, **_fanout_kwargs(job, common))
    else:
        fit_kwargs = {k: common[k] for k in ("estimator", "features", "scaler", "impute")}
        [model] = run_tasks(client, fit_pipeline, [fit_kwargs], shared={"X": data.X, "y": data.y},
                            retries=job["execution"]["retries"], progress=False, label="final model")
    save_model(model, partial / "model", meta={
        "job": job["name"], "estimator": job["estimator"], "preprocessing": job["preprocessing"],
        "n_features": int(data.X.shape[1]), "input_shape": list(data.X.shape[1:]), "class_map": data.meta.get("class_map", {}),
        "data_fingerprint": data.meta.get("fingerprint"), "positive_label": common["pos_label"],
    })



