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
import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import dask.array as da
import numpy as np
import yaml

from .. import __version__
from ..datasets import load
from ..distributed import run_tasks
from ..estimators import make_estimator, make_feature
from ..evaluation import BINARY_METRICS, evaluate_fold, fit_pipeline, positive_label, repeat_seeds, summarize
from ..exceptions import DataError, JobSpecError
from ..store import StoreRows, dataset_fingerprint, open_store
from .artifacts import save_model
from .ensemble_folds import is_member_fanout, run_ensemble_folds

__all__ = ["JobData", "RunResult", "run_job", "load_job_data", "check_job_data"]

logger = logging.getLogger(__name__)


@dataclass
class JobData:
    """A job's data as tasks see it.

    ``X`` is an in-memory array for files, or a :class:`~dimbsvm.store.StoreRows`
    handle for a Zarr store, so that workers read the rows they need and the
    client never holds the features. ``y`` is always in memory: folds are
    built from it.
    """

    X: object
    y: np.ndarray
    meta: dict
    lazy_X: da.Array | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.meta.get("name") or self.meta.get("source", "data")


@dataclass
class RunResult:
    """What a finished run produced."""

    run_dir: Path
    summary: dict
    folds: list
    reused: int = 0
    reused_members: int = 0


def load_job_data(source: str, *, nominal=()) -> JobData:
    """The job's data: a dimbsvm Zarr store directory, a data file or a bundled name.

    ``nominal`` names CSV columns to one-hot encode although they hold numbers
    (the job's ``data.nominal``); other sources reject it.
    """
    path = Path(source)
    if nominal and path.suffix.lower() != ".csv":
        raise DataError(f"data.nominal applies to CSV files; {source} is not one (its reader knows its "
                        "column types)")
    if path.suffix == ".zarr" and not path.exists():
        raise DataError(f"data source {source} does not exist")
    if path.is_dir() and (path / "zarr.json").exists():
        stored = open_store(path)
        y = np.asarray(stored.y.compute())
        return JobData(X=StoreRows(stored.path, stored.X.shape), y=y, meta=dict(stored.meta, source=str(path)),
                       lazy_X=stored.X)
    if not path.exists() and (os.sep in source or path.suffix):
        raise DataError(f"data source {source} does not exist")
    dataset = load(source, nominal=list(nominal)) if nominal else load(source)
    return JobData(X=dataset.X, y=dataset.y, meta=dict(dataset.meta(), fingerprint=dataset_fingerprint(dataset)))


def check_job_data(data: JobData, job: dict) -> None:
    """Reject data the job cannot use, before any task starts.

    For a store, the NaN/inf scan is a chunked Dask reduction (it runs on the
    current client's workers when there is one).

    Raises
    ------
    DataError
        NaN/inf without imputation, fewer than two classes, binary-only
        metrics on multi-class labels, or a class smaller than the number of
        folds.
    """
    X, y, name = data.X, data.y, data.name
    shape = tuple(X.shape)
    if len(shape) == 3 and job["features"] and job["preprocessing"]["scaler"] == "none":
        pass  # time series: the first feature stage (e.g. similarity with dtw) reads them
    elif len(shape) != 2:
        raise DataError(
            f"{name}: the job's estimators need 2-D features, got shape {shape}; time series need "
            "a feature stage such as similarity (with preprocessing.scaler: none)")
    if shape[0] != y.shape[0]:
        raise DataError(f"{name}: X has {shape[0]} rows but y has {y.shape[0]} labels")
    _check_finite(data, impute=job["preprocessing"]["impute"] != "none")
    labels, counts = np.unique(y, return_counts=True)
    if len(labels) < 2:
        raise DataError(f"{name}: only one class ({labels[0] if len(labels) else 'none'}) in the labels; "
                        "classification needs at least two")
    binary_only = sorted(set(job["metrics"]) & set(BINARY_METRICS))
    if len(labels) > 2 and binary_only:
        raise DataError(f"{name}: {len(labels)} classes, but metric(s) {', '.join(binary_only)} "
                        "need two; drop them from 'metrics'")
    n_splits = job["cv"]["n_splits"]
    if counts.min() < n_splits:
        small = labels[np.argmin(counts)]
        raise DataError(f"{name}: class {small} has {counts.min()} rows, fewer than cv.n_splits={n_splits}; "
                        "lower cv.n_splits or add data")


def _check_finite(data: JobData, *, impute: bool) -> None:
    X = data.lazy_X if data.lazy_X is not None else np.asarray(data.X)
    xp = da if isinstance(X, da.Array) else np
    per_row = tuple(range(1, X.ndim))
    bad_inf = xp.isinf(X).any(axis=per_row)
    bad_nan = xp.isnan(X).any(axis=per_row)
    if X.ndim == 3:
        impute = True  # NaN right-pads series of unequal length; the feature stage handles it
    if isinstance(X, da.Array):
        bad_inf, bad_nan = da.compute(bad_inf, bad_nan)
    if bad_inf.any():
        row = int(np.flatnonzero(bad_inf)[0])
        col = int(np.flatnonzero(np.isinf(np.asarray(X[row]).reshape(-1)))[0])
        raise DataError(f"{data.name}: infinite value in row {row}, column {_column_name(data, col)}; "
                        "remove or clip it")
    if bad_nan.any() and not impute:
        row = int(np.flatnonzero(bad_nan)[0])
        col = int(np.flatnonzero(np.isnan(np.asarray(X[row])))[0])
        raise DataError(
            f"{data.name}: {int(bad_nan.sum())} row(s) with missing values (NaN), first in row {row}, column "
            f"{_column_name(data, col)}; set preprocessing.impute to mean or median to impute them")


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


def job_fingerprint(job: dict) -> str:
    """SHA-256 of the validated job, so a resumed run is known to be the same job."""
    return hashlib.sha256(json.dumps(job, sort_keys=True, default=str).encode()).hexdigest()


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
    finished = _open_partial(partial, fingerprint, data_fingerprint, job_text, job)

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
            on_record=lambda key, record: _save_fold(partial, key, record, data_fingerprint),
            progress=progress, label="fold/member tasks", **_fanout_kwargs(job, common),
        )
    else:
        def save(i, record):
            _save_fold(partial, todo[i], record, data_fingerprint)

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
    _write_json(partial / "resources.json", {
        "peak_worker_memory_bytes": memory,
        "peak_worker_memory_max_bytes": max(memory.values()) if memory else None,
        "note": "ru_maxrss of each worker process since it started",
    })
    _write_json(partial / "metrics.json", {
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
    (partial / "summary.md").write_text(_summary_markdown(job, data, summary, all_records))
    os.replace(partial, run_dir)  # the run directory appears only once complete
    return RunResult(run_dir=run_dir, summary=summary, folds=all_records, reused=len(keys) - len(todo),
                     reused_members=reused_members)


def _open_partial(partial: Path, fingerprint: str, data_fingerprint: str, job_text, job) -> dict:
    """Create the partial run directory, or reopen one of the same job and data; return finished folds.

    A partial run records the job's fingerprint and the data's (the source
    file's digest, or the store's source fingerprint). Resuming over other
    data would average folds of two datasets, so it is refused, and so is a
    fold file recorded for other data.
    """
    marker = partial / "job-fingerprint"
    data_marker = partial / "data-fingerprint"
    if partial.exists():
        if not marker.exists() or marker.read_text() != fingerprint:
            raise JobSpecError(f"{partial} holds an interrupted run of a different job; "
                               "remove it or choose another --out")
        recorded = data_marker.read_text() if data_marker.exists() else "(not recorded)"
        if recorded != data_fingerprint:
            raise DataError(
                f"{partial} holds an interrupted run on other data (data fingerprint {recorded[:16]}, "
                f"now {data_fingerprint[:16]}): its folds cannot be reused; remove {partial} to start "
                "over, or choose another --out")
        finished = {}
        for path in sorted((partial / "folds").glob("*.json")):
            saved = json.loads(path.read_text())
            if saved.get("data_fingerprint") != data_fingerprint:
                raise DataError(f"{path} was recorded for other data (data fingerprint "
                                f"{str(saved.get('data_fingerprint'))[:16]}, now {data_fingerprint[:16]}); "
                                f"remove {partial} to start over")
            record = saved["record"]
            finished[(record["seed"], record["fold"])] = record
        return finished
    (partial / "folds").mkdir(parents=True)
    (partial / "job.yaml").write_text(job_text if job_text is not None else yaml.safe_dump(job, sort_keys=False))
    data_marker.write_text(data_fingerprint)
    marker.write_text(fingerprint)  # written last: the directory is a resumable run from here on
    return {}


def _save_fold(partial: Path, key, record: dict, data_fingerprint: str) -> None:
    """Save one fold's record with the fingerprint of the data it was computed on."""
    _write_json(partial / "folds" / _fold_file(*key), {"data_fingerprint": data_fingerprint, "record": record})


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


def _fold_file(seed, fold) -> str:
    return f"seed{seed}-fold{fold}.json"


def _write_json(path: Path, payload) -> None:
    """Write JSON atomically: a reader sees the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=_json_default) + "\n")
    os.replace(tmp, path)


def _summary_markdown(job, data, summary, records) -> str:
    labels, counts = np.unique(data.y, return_counts=True)
    lines = [
        f"# {job['name']}",
        "",
        f"- data: `{job['data']['source']}` ({len(data.y)} rows, {data.X.shape[1]} features, "
        f"class counts {dict(zip(labels.tolist(), counts.tolist()))})",
        f"- estimator: `{job['estimator']['name']}` {job['estimator']['params'] or ''}",
        f"- protocol: stratified {job['cv']['n_splits']}-fold CV x {job['cv']['n_repeats']} repeat(s), "
        f"seeds from {job['cv']['random_state']}; {job['preprocessing']['scaler']} scaling fitted per training fold",
        "",
        "| metric | mean | std | min | max |",
        "|---|---|---|---|---|",
    ]
    for name, s in summary.items():
        lines.append(f"| {name} | {s['mean']:.4f} | {s['std']:.4f} | {s['min']:.4f} | {s['max']:.4f} |")
    lines += ["", f"{len(records)} folds; per-fold values in `metrics.json`.", ""]
    return "\n".join(lines)


def _column_name(data: JobData, col) -> str:
    names = data.meta.get("feature_names") or []
    return f"{col} ({names[col]})" if col < len(names) else str(col)


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
