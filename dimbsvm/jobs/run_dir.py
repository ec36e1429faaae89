"""The run directory: assembled under a hidden partial directory, renamed into place when complete.

A run's folds are saved in ``.<name>.partial/folds`` as they arrive, with the
fingerprints of the job and of the data, so running the same job again on the
same data resumes; anything else is refused. ``os.replace`` of the whole
directory is the last step, so a run directory that exists is complete.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import yaml

from ..exceptions import DataError, JobSpecError

__all__ = ["fold_file", "job_fingerprint", "open_partial", "save_fold", "summary_markdown", "write_json"]


def job_fingerprint(job: dict) -> str:
    """SHA-256 of the validated job, so a resumed run is known to be the same job."""
    return hashlib.sha256(json.dumps(job, sort_keys=True, default=str).encode()).hexdigest()


def open_partial(partial: Path, fingerprint: str, data_fingerprint: str, job_text, job) -> dict:
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


def save_fold(partial: Path, key, record: dict, data_fingerprint: str) -> None:
    """Save one fold's record with the fingerprint of the data it was computed on."""
    write_json(partial / "folds" / fold_file(*key), {"data_fingerprint": data_fingerprint, "record": record})


def fold_file(seed, fold) -> str:
    return f"seed{seed}-fold{fold}.json"


def write_json(path: Path, payload) -> None:
    """Write JSON atomically: a reader sees the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=_json_default) + "\n")
    os.replace(tmp, path)


def summary_markdown(job, data, summary, records) -> str:
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


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
