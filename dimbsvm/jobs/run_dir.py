"""The run directory: assembled under a hidden partial directory, renamed into place when complete.

A run's folds are saved in ``.<name>.partial/folds`` as they arrive, with the
fingerprints of the job and of the data, so running the same job again on the
same data resumes; anything else is refused. ``os.replace`` of the whole
directory is the last step, so a run directory that exists is complete.

:func:`plan_run_dir` decides, before any work starts, where a run goes: a
given ``--out`` (refused when it names a file, a finished run, an empty or a
foreign directory, or an unwritable place), or by default
``runs/<name>-<UTC timestamp>``, where the newest interrupted run of the same
job on the same data is resumed instead of starting over.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from ..exceptions import DataError, DimbsvmError, JobSpecError

__all__ = ["RunDirPlan", "check_out_path", "check_writable", "fold_file", "job_fingerprint", "open_partial", "partial_dir",
           "plan_run_dir", "save_fold", "saved_progress", "summary_markdown", "write_json"]

#: Where runs go without --out.
RUNS_ROOT = Path("runs")
_JOB_MARKER = "job-fingerprint"
_DATA_MARKER = "data-fingerprint"


@dataclass
class RunDirPlan:
    """Where a run will be written, decided before any work starts.

    Attributes
    ----------
    run_dir : pathlib.Path
        The run directory (appears only when the run is complete).
    partial : pathlib.Path
        Its hidden partial directory, ``.<name>.partial`` beside it.
    resuming : bool
        ``partial`` holds an interrupted run of the same job and data.
    saved_folds : int
        Folds already saved there.
    """

    run_dir: Path
    partial: Path
    resuming: bool = False
    saved_folds: int = 0


def partial_dir(run_dir) -> Path:
    """The hidden directory a run is assembled in.

    Returns
    -------
    pathlib.Path
        ``.<name>.partial`` beside ``run_dir``.

    Examples
    --------
    >>> str(partial_dir("runs/quickstart-20250101-120000"))
    'runs/.quickstart-20250101-120000.partial'
    """
    run_dir = Path(run_dir)
    return run_dir.with_name(f".{run_dir.name}.partial")


def saved_progress(partial) -> tuple[int, int]:
    """What an interrupted run saved so far.

    Returns
    -------
    folds, members : int
        Fold records and finished ensemble members in the partial directory
        (0, 0 when it does not exist).
    """
    partial = Path(partial)
    folds = len(list((partial / "folds").glob("*.json"))) if (partial / "folds").is_dir() else 0
    members = len(list((partial / "members").glob("*.skops"))) if (partial / "members").is_dir() else 0
    return folds, members


def check_writable(path, what: str) -> None:
    """Raise unless ``path`` (a directory to create, or one to write into) can be written.

    The nearest existing directory is probed by creating and removing a
    file, which is the only test that also holds for root and read-only
    file systems.

    Parameters
    ----------
    path : str or path
    what : str
        What the path is, for the message (e.g. ``"--out"``).

    Raises
    ------
    DimbsvmError
        Naming the path, the directory that cannot be written and why.
    """
    path = Path(path)
    probe = path if path.is_dir() else next((p for p in path.parents if p.exists()), Path("."))
    if not probe.is_dir():
        raise DimbsvmError(f"{what} {path}: {probe} is a file, not a directory")
    try:
        fd, name = tempfile.mkstemp(dir=probe, prefix=".dimbsvm-write-test-")
    except OSError as exc:
        raise DimbsvmError(f"{what} {path} cannot be written: {probe}: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(name)


def plan_run_dir(job: dict, data_fingerprint: str, *, out=None, resume: bool = False, fresh: bool = False,
                 runs_root=RUNS_ROOT, now=None) -> RunDirPlan:
    """Decide where a run goes and whether it resumes, refusing every path it could not use.

    Parameters
    ----------
    job : dict
        The validated job.
    data_fingerprint : str
        Of the data the run will use.
    out : path, default=None
        The run directory asked for (``--out``). It must not exist; if its
        partial directory holds an interrupted run of the same job and data,
        that run is resumed. Without it the run goes to
        ``runs_root/<name>-<UTC timestamp>``, unless an interrupted run of the
        same job and data is found there: the newest is resumed.
    resume : bool, default=False
        Require an interrupted run to resume (an error if there is none).
    fresh : bool, default=False
        Start over: with ``out``, the interrupted run in its partial directory
        is discarded; without, a new timestamped directory is used.
    runs_root : path, default="runs"
    now : datetime, default=None
        For the timestamp (tests).

    Returns
    -------
    RunDirPlan

    Raises
    ------
    DimbsvmError
        ``out`` is a file, a finished run, an empty directory, a directory
        that is not a run, or cannot be written; its partial directory holds
        a run of another job or other data (without ``fresh``); ``resume``
        with nothing to resume.
    """
    if resume and fresh:
        raise DimbsvmError("--resume and --fresh contradict each other; give one")
    fingerprint = job_fingerprint(job)
    if out is None:
        runs_root = Path(runs_root)
        found = None if fresh else _newest_resumable(runs_root, job["name"], fingerprint, data_fingerprint)
        if found is not None:
            run_dir, partial = found
            return RunDirPlan(run_dir, partial, resuming=True, saved_folds=saved_progress(partial)[0])
        if resume:
            raise DimbsvmError(f"--resume: no interrupted run of job {job['name']!r} on this data under "
                               f"{runs_root}/ (looked for {runs_root}/.{job['name']}-*.partial)")
        stamp = (now or _dt.datetime.now(_dt.UTC)).strftime("%Y%m%d-%H%M%S")
        run_dir = runs_root / f"{job['name']}-{stamp}"
        check_writable(runs_root, "run directory")
        return RunDirPlan(run_dir, partial_dir(run_dir))

    run_dir = Path(out)
    check_out_path(run_dir)
    partial = partial_dir(run_dir)
    if not partial.exists():
        if resume:
            raise DimbsvmError(f"--resume: there is no interrupted run to resume at --out {run_dir} "
                               f"(no {partial})")
        return RunDirPlan(run_dir, partial)
    if not partial.is_dir():
        raise DimbsvmError(f"{partial} (the partial directory of --out {run_dir}) is a file, not a run; "
                           "remove it or choose another --out")
    if fresh:
        shutil.rmtree(partial)
        return RunDirPlan(run_dir, partial)
    check_writable(partial, "--out")
    _check_partial(partial, fingerprint, data_fingerprint)
    return RunDirPlan(run_dir, partial, resuming=True, saved_folds=saved_progress(partial)[0])


def check_out_path(out) -> None:
    """Refuse an ``--out`` that names a file, a finished run, an empty or a foreign directory, or cannot be written.

    Only the path is looked at (no job or data needed), so this runs first.

    Raises
    ------
    DimbsvmError
        Each case with its own message.
    """
    run_dir = Path(out)
    _check_out_entry(run_dir)
    check_writable(run_dir, "--out")


def _check_out_entry(run_dir: Path) -> None:
    if not run_dir.exists():
        if run_dir.is_symlink():
            raise DimbsvmError(f"--out {run_dir} is a dangling symbolic link; choose a new directory path")
        return
    if not run_dir.is_dir():
        raise DimbsvmError(f"--out {run_dir} is an existing file, not a directory; choose a new directory "
                           "path (the run directory is created by dimbsvm)")
    entries = sorted(p.name for p in run_dir.iterdir())
    if not entries:
        raise DimbsvmError(f"--out {run_dir} is an existing empty directory; dimbsvm creates the run directory "
                           f"itself (it appears only when complete): remove it (rmdir {run_dir}) or choose a path "
                           "that does not exist yet")
    if {"metrics.json", "job.yaml"} <= set(entries):
        raise DimbsvmError(f"run directory {run_dir} already exists and is complete; choose another --out "
                           "(or remove it to run again)")
    shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
    raise DimbsvmError(f"--out {run_dir} is an existing directory that is not a dimbsvm run (it holds {shown}); "
                       "choose a path that does not exist yet")


def _check_partial(partial: Path, fingerprint: str, data_fingerprint: str) -> None:
    """Refuse a partial directory of another job or other data (what :func:`open_partial` would refuse)."""
    marker = partial / _JOB_MARKER
    if not marker.is_file() or marker.read_text() != fingerprint:
        raise JobSpecError(f"{partial} holds an interrupted run of a different job; start over with --fresh "
                           f"(or remove {partial}), or choose another --out")
    data_marker = partial / _DATA_MARKER
    recorded = data_marker.read_text() if data_marker.is_file() else "(not recorded)"
    if recorded != data_fingerprint:
        raise DataError(
            f"{partial} holds an interrupted run on other data (data fingerprint {recorded[:16]}, now "
            f"{data_fingerprint[:16]}): its folds cannot be reused; start over with --fresh (or remove {partial}), "
            "or choose another --out")


def _newest_resumable(runs_root: Path, name: str, fingerprint: str, data_fingerprint: str):
    """``(run_dir, partial)`` of the newest interrupted run of this job and data under ``runs_root``, or None."""
    if not runs_root.is_dir():
        return None
    candidates = []
    for partial in runs_root.glob(f".{name}-*.partial"):
        try:
            same = ((partial / _JOB_MARKER).read_text() == fingerprint
                    and (partial / _DATA_MARKER).read_text() == data_fingerprint)
        except OSError:
            continue
        run_dir = runs_root / partial.name[1:-len(".partial")]
        if same and not run_dir.exists():
            candidates.append((run_dir.name, run_dir, partial))
    if not candidates:
        return None
    _, run_dir, partial = max(candidates)  # names end in a UTC timestamp: the newest sorts last
    return run_dir, partial


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
    if partial.exists():
        _check_partial(partial, fingerprint, data_fingerprint)
        finished = {}
        for path in sorted((partial / "folds").glob("*.json")):
            saved = json.loads(path.read_text())
            if saved.get("data_fingerprint") != data_fingerprint:
                raise DataError(f"{path} was recorded for other data (data fingerprint "
                                f"{str(saved.get('data_fingerprint'))[:16]}, now {data_fingerprint[:16]}); "
                                f"start over with --fresh (or remove {partial})")
            record = saved["record"]
            finished[(record["seed"], record["fold"])] = record
        return finished
    # assembled under a temporary name and renamed: an interruption here leaves no half-made partial
    partial.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial.with_name(f"{partial.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        (tmp / "folds").mkdir(parents=True)
        (tmp / "job.yaml").write_text(job_text if job_text is not None else yaml.safe_dump(job, sort_keys=False))
        (tmp / _DATA_MARKER).write_text(data_fingerprint)
        (tmp / _JOB_MARKER).write_text(fingerprint)
        os.replace(tmp, partial)  # the directory is a resumable run from here on
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
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
