"""Run a validated job: load data, check it, fan out (repeat, fold) tasks, write the run directory.

The run directory is assembled under a hidden ``.partial`` name and renamed
into place only when everything is written, so a failed run never leaves a
directory that looks complete.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from ..datasets import Dataset, load
from ..distributed import run_tasks
from ..estimators import make_estimator
from ..evaluation import BINARY_METRICS, evaluate_fold, positive_label, repeat_seeds, summarize
from ..exceptions import DataError
from ..store import open_store

__all__ = ["RunResult", "run_job", "load_job_data", "check_job_data"]

logger = logging.getLogger(__name__)


@dataclass
class RunResult:
    """What a finished run produced."""

    run_dir: Path
    summary: dict
    folds: list


def load_job_data(source: str) -> Dataset:
    """The job's dataset: a dimbsvm Zarr store directory, a data file or a bundled name."""
    path = Path(source)
    if path.is_dir() and (path / "zarr.json").exists():
        return open_store(path).to_dataset()
    return load(source)


def check_job_data(dataset: Dataset, job: dict) -> None:
    """Reject data the job cannot use, before any task starts.

    Raises
    ------
    DataError
        NaN/inf without imputation, fewer than two classes, binary-only
        metrics on multi-class labels, or a class smaller than the number of
        folds.
    """
    X, y, name = dataset.X, dataset.y, dataset.name or dataset.source
    if X.ndim != 2:
        raise DataError(
            f"{name}: the job's estimators need 2-D features, got shape {X.shape} "
            "(time series need a feature stage such as similarity features)")
    if X.shape[0] != y.shape[0]:
        raise DataError(f"{name}: X has {X.shape[0]} rows but y has {y.shape[0]} labels")
    if np.isinf(X).any():
        rows, cols = np.nonzero(np.isinf(X))
        raise DataError(f"{name}: infinite value in row {rows[0]}, column "
                        f"{_column_name(dataset, cols[0])}; remove or clip it")
    if job["preprocessing"]["impute"] == "none" and np.isnan(X).any():
        rows, cols = np.nonzero(np.isnan(X))
        raise DataError(
            f"{name}: {len(rows)} missing value(s) (NaN), first in row {rows[0]}, column "
            f"{_column_name(dataset, cols[0])}; set preprocessing.impute to mean or median to impute them")
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


def run_job(job: dict, client, *, out=None, progress=True, job_text: str | None = None) -> RunResult:
    """Run a validated job on ``client`` and write its run directory.

    Parameters
    ----------
    job : dict
        As returned by :func:`dimbsvm.jobs.validate_job`.
    client : distributed.Client
    out : path, default=None
        The run directory; default ``runs/<name>-<UTC timestamp>``. It must
        not exist yet.
    progress : bool, default=True
        Show task progress on stderr.
    job_text : str, default=None
        The job file as written, copied into the run directory verbatim.

    Returns
    -------
    RunResult
    """
    run_dir = Path(out) if out else Path("runs") / f"{job['name']}-{_dt.datetime.now(_dt.UTC):%Y%m%d-%H%M%S}"
    if run_dir.exists():
        raise FileExistsError(f"run directory {run_dir} already exists; choose another --out")
    dataset = load_job_data(job["data"]["source"])
    check_job_data(dataset, job)

    cv = job["cv"]
    pos_label = positive_label(dataset.y)
    estimator = make_estimator(job["estimator"]["name"], job["estimator"]["params"])
    common = {
        "estimator": estimator, "n_splits": cv["n_splits"], "metrics": tuple(job["metrics"]),
        "scaler": job["preprocessing"]["scaler"], "impute": job["preprocessing"]["impute"],
        "pos_label": pos_label,
    }
    calls = [{"seed": seed, "fold": fold, **common}
             for seed in repeat_seeds(cv["n_repeats"], cv["random_state"])
             for fold in range(cv["n_splits"])]
    logger.info("job %s: %s on %s (%d rows), %d fold tasks", job["name"], job["estimator"]["name"],
                dataset.name, dataset.n_samples, len(calls))
    records = run_tasks(
        client, evaluate_fold, calls,
        shared={"X": dataset.X, "y": dataset.y},
        retries=job["execution"]["retries"], progress=progress, label="folds",
    )
    summary = summarize(records, job["metrics"])
    _write_run_dir(run_dir, job, job_text, dataset, records, summary, pos_label)
    return RunResult(run_dir=run_dir, summary=summary, folds=records)


def _write_run_dir(run_dir: Path, job, job_text, dataset, records, summary, pos_label):
    partial = run_dir.with_name(f".{run_dir.name}.partial")
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    try:
        _write_run_files(partial, job, job_text, dataset, records, summary, pos_label)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    partial.rename(run_dir)  # the run directory appears only once complete


def _write_run_files(partial: Path, job, job_text, dataset, records, summary, pos_label):
    (partial / "job.yaml").write_text(job_text if job_text is not None else yaml.safe_dump(job, sort_keys=False))
    metrics = {
        "job": job["name"],
        "estimator": job["estimator"],
        "dataset": dataset.meta() | {"feature_names": None},
        "positive_label": pos_label,
        "cv": job["cv"],
        "summary": summary,
        "folds": records,
        "finished_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    (partial / "metrics.json").write_text(json.dumps(metrics, indent=2, default=_json_default) + "\n")
    (partial / "summary.md").write_text(_summary_markdown(job, dataset, summary, records))


def _summary_markdown(job, dataset, summary, records) -> str:
    counts = dataset.meta()["class_counts"]
    lines = [
        f"# {job['name']}",
        "",
        f"- data: `{job['data']['source']}` ({dataset.n_samples} rows, {dataset.X.shape[1]} features, "
        f"class counts {counts})",
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


def _column_name(dataset, col) -> str:
    names = dataset.feature_names
    return f"{col} ({names[col]})" if col < len(names) else str(col)


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
