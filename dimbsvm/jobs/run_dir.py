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

One writer per run directory: the process that plans a run claims it with an
exclusive lock on ``.<name>.lock`` beside it (:func:`claim_run_dir`) and holds
it until the run directory is renamed into place (:func:`release_run_dir`).
A second process asking for the same ``--out``, or resuming the same
interrupted run, is refused with one line naming the holder's pid; a default
timestamped name that is taken or claimed gets a suffix ``-2``, ``-3``...
The kernel drops the lock when its process dies, so the lock file of a killed
run is free for the next one.
"""

from __future__ import annotations

import atexit
import datetime as _dt
import hashlib
import itertools
import json
import logging
import os
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from .._locks import HeldLock, LockHeld, exclusive_lock, write_atomic
from ..exceptions import DataError, DimbsvmError, JobSpecError
from .job_spec import JobSpec

__all__ = ["RunDirPlan", "check_out_path", "check_writable", "claim_run_dir", "fold_file", "job_fingerprint",
           "lock_file", "open_partial", "partial_dir", "plan_run_dir", "release_run_dir", "save_fold", "saved_progress",
           "write_json"]

logger = logging.getLogger(__name__)

#: Where runs go without --out.
RUNS_ROOT = Path("runs")
_JOB_MARKER = "job-fingerprint"
_DATA_MARKER = "data-fingerprint"
_TEMPORARY = re.compile(r"\..+\.\d+-[0-9a-f]+\.tmp")  # the names of dimbsvm._locks.temporary_name


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
    claimed : bool
        This process holds the run directory's lock (:func:`claim_run_dir`).
    """

    run_dir: Path
    partial: Path
    resuming: bool = False
    saved_folds: int = 0
    claimed: bool = False


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


def lock_file(run_dir) -> Path:
    """The lock file that claims a run directory.

    Examples
    --------
    >>> str(lock_file("runs/quickstart-20250101-120000"))
    'runs/.quickstart-20250101-120000.lock'
    """
    run_dir = Path(run_dir)
    return run_dir.with_name(f".{run_dir.name}.lock")


#: Run directories this process has claimed, by absolute path.
_CLAIMS: dict[Path, HeldLock] = {}
_CLAIMS_LOCK = threading.Lock()


def _claim_key(run_dir) -> Path:
    return Path(run_dir).resolve()


def claim_run_dir(run_dir) -> bool:
    """Claim ``run_dir`` for this process: only it may write the run (its partial directory, its rename).

    The claim is an exclusive lock on :func:`lock_file`, held until
    :func:`release_run_dir` or the end of the process (a killed process's
    lock dies with it). Claiming what this process already holds is allowed.

    Returns
    -------
    bool
        Whether this call took the claim (False: this process held it already).

    Raises
    ------
    LockHeld
        Another process holds it: "run directory X is being written by another
        dimbsvm process (pid N); wait for it or choose another --out".
    DimbsvmError
        The lock file cannot be created there.
    """
    key = _claim_key(run_dir)
    with _CLAIMS_LOCK:
        held = _CLAIMS.get(key)
        if held is not None and held.held:
            return False
        try:
            Path(run_dir).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DimbsvmError(f"run directory {run_dir} cannot be created: {exc.strerror or exc}") from None
        _CLAIMS[key] = exclusive_lock(lock_file(run_dir), f"run directory {run_dir}",
                                      hint="wait for it or choose another --out")
        return True


def release_run_dir(run_dir) -> None:
    """Give up this process's claim on ``run_dir`` and remove its lock file (nothing if not claimed)."""
    with _CLAIMS_LOCK:
        held = _CLAIMS.pop(_claim_key(run_dir), None)
    if held is not None:
        held.release()


def _holds(run_dir) -> bool:
    held = _CLAIMS.get(_claim_key(run_dir))
    return held is not None and held.held


@atexit.register
def _release_all() -> None:
    """Remove the lock files of claims still held at exit (a plan never run: ``dimbsvm validate``)."""
    with _CLAIMS_LOCK:
        held = list(_CLAIMS.values())
        _CLAIMS.clear()
    for lock in held:
        lock.release()


def _forget_claims() -> None:
    """In a forked child: the parent's claims are the parent's, not to be released by the child."""
    global _CLAIMS_LOCK
    _CLAIMS_LOCK = threading.Lock()
    _CLAIMS.clear()


os.register_at_fork(after_in_child=_forget_claims)


def plan_run_dir(job: JobSpec, data_fingerprint: str, *, out=None, resume: bool = False, fresh: bool = False,
                 runs_root=RUNS_ROOT, now=None, claim: bool = True) -> RunDirPlan:
    """Decide where a run goes and whether it resumes, refusing every path it could not use.

    Parameters
    ----------
    job : JobSpec
        The validated job.
    data_fingerprint : str
        Of the data the run will use.
    out : path, default=None
        The run directory asked for (``--out``). It must not exist; if its
        partial directory holds an interrupted run of the same job and data,
        that run is resumed. Without it the run goes to
        ``runs_root/<name>-<UTC timestamp>`` (with a suffix ``-2``, ``-3``...
        where that name is taken), unless an interrupted run of the same job
        and data is found there that no process is writing: the newest is resumed.
    resume : bool, default=False
        Require an interrupted run to resume (an error if there is none).
    fresh : bool, default=False
        Start over: with ``out``, the interrupted run in its partial directory
        is discarded (only a partial directory dimbsvm wrote); without, a new
        timestamped directory is used.
    runs_root : path, default="runs"
    now : datetime, default=None
        For the timestamp (tests).
    claim : bool, default=True
        Claim the run directory for this process (:func:`claim_run_dir`), so
        that no other process writes it until the run ends; without, the plan
        only looks (``dimbsvm validate``).

    Returns
    -------
    RunDirPlan

    Raises
    ------
    DimbsvmError
        ``out`` is a file, a finished run, an empty directory, a directory
        that is not a run, or cannot be written; another process is writing
        it (:class:`~dimbsvm._locks.LockHeld`); its partial directory holds a
        run of another job or other data (without ``fresh``), or with
        ``fresh`` is not one dimbsvm wrote; ``resume`` with nothing to resume.
    """
    if resume and fresh:
        raise DimbsvmError("--resume and --fresh contradict each other; give one")
    fingerprint = job_fingerprint(job)
    if out is None:
        return _plan_default(job.name, fingerprint, data_fingerprint, Path(runs_root), resume=resume, fresh=fresh,
                             now=now, claim=claim)
    run_dir = Path(out)
    check_out_path(run_dir)
    claimed_here = claim and claim_run_dir(run_dir)
    try:
        if claim:
            check_out_path(run_dir)  # again, now that it is ours: a run that finished meanwhile is complete
        plan = _plan_out(run_dir, fingerprint, data_fingerprint, resume=resume, fresh=fresh, claim=claim)
    except BaseException:
        if claimed_here:
            release_run_dir(run_dir)
        raise
    plan.claimed = claim
    return plan


def _plan_out(run_dir: Path, fingerprint: str, data_fingerprint: str, *, resume: bool, fresh: bool,
              claim: bool = True) -> RunDirPlan:
    partial = partial_dir(run_dir)
    if not partial.exists() and not partial.is_symlink():
        if resume:
            raise DimbsvmError(f"--resume: there is no interrupted run to resume at --out {run_dir} "
                               f"(no {partial})")
        return RunDirPlan(run_dir, partial)
    if partial.is_symlink() or not partial.is_dir():
        raise DimbsvmError(f"{partial} (the partial directory of --out {run_dir}) is a file or a link, not a run; "
                           "remove it or choose another --out")
    if fresh:
        _discard_partial(partial)
        return RunDirPlan(run_dir, partial)
    check_writable(partial, "--out")
    if not resume and _saved_nothing_of_another_run(partial, fingerprint, data_fingerprint):
        # a run that failed or was stopped before saving anything: nothing to lose, so the corrected job starts
        # over there instead of being refused (only a run, not validate, removes it)
        if claim:
            logger.info("%s holds a run of another job or data that saved nothing; starting over", partial)
            _discard_partial(partial)
        return RunDirPlan(run_dir, partial)
    _check_partial(partial, fingerprint, data_fingerprint)
    return RunDirPlan(run_dir, partial, resuming=True, saved_folds=saved_progress(partial)[0])


def _saved_nothing_of_another_run(partial: Path, fingerprint: str, data_fingerprint: str) -> bool:
    """Whether ``partial`` is dimbsvm's, of another job or data, and holds no saved fold or member."""
    job, data = recorded_fingerprints(partial)
    if job is None:
        return False  # not dimbsvm's (no marker): refused by _check_partial, never removed
    return (job, data) != (fingerprint, data_fingerprint) and saved_progress(partial) == (0, 0)


def _discard_partial(partial: Path) -> None:
    """Remove an interrupted run for ``--fresh``: only a directory carrying dimbsvm's job fingerprint."""
    if not (partial / _JOB_MARKER).is_file():
        raise DimbsvmError(f"--fresh: {partial} has no {_JOB_MARKER} file, so dimbsvm did not write it and will not "
                           "delete it; remove it yourself or choose another --out")
    try:
        shutil.rmtree(partial)
    except OSError as exc:
        raise DimbsvmError(f"--fresh: cannot remove the interrupted run {partial}: {exc.strerror or exc}") from None


def _plan_default(name: str, fingerprint: str, data_fingerprint: str, runs_root: Path, *, resume: bool, fresh: bool,
                  now, claim: bool) -> RunDirPlan:
    found = None if fresh else _newest_resumable(runs_root, name, fingerprint, data_fingerprint, claim=claim)
    if found is not None:
        run_dir, partial = found
        return RunDirPlan(run_dir, partial, resuming=True, saved_folds=saved_progress(partial)[0], claimed=claim)
    if resume:
        raise DimbsvmError(f"--resume: no interrupted run of job {name!r} on this data under "
                           f"{runs_root}/ (looked for {runs_root}/.{name}-*.partial)")
    stamp = (now or _dt.datetime.now(_dt.UTC)).strftime("%Y%m%d-%H%M%S")
    check_writable(runs_root, "run directory")
    run_dir = _new_run_dir(runs_root, f"{name}-{stamp}", claim=claim)
    return RunDirPlan(run_dir, partial_dir(run_dir), claimed=claim)


def _taken(run_dir: Path) -> bool:
    partial = partial_dir(run_dir)
    return run_dir.exists() or run_dir.is_symlink() or partial.exists() or partial.is_symlink()


def _new_run_dir(runs_root: Path, base: str, *, claim: bool) -> Path:
    """``runs_root/base``, or ``base-2``, ``base-3``...: the first name no run uses and no process claims."""
    for number in itertools.count(1):
        run_dir = runs_root / (base if number == 1 else f"{base}-{number}")
        if _taken(run_dir) or _holds(run_dir):
            continue
        if not claim:
            return run_dir
        try:
            claim_run_dir(run_dir)
        except LockHeld:  # another process planned this name an instant ago
            continue
        if not _taken(run_dir):
            return run_dir
        release_run_dir(run_dir)


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


def _newest_resumable(runs_root: Path, name: str, fingerprint: str, data_fingerprint: str, *, claim: bool = True):
    """``(run_dir, partial)`` of the newest interrupted run of this job and data under ``runs_root``, or None.

    With ``claim``, a run another process is writing is not interrupted: it is
    skipped, and the one returned is claimed for this process.
    """
    if not runs_root.is_dir():
        return None
    candidates = []
    for partial in runs_root.glob(f".{name}-*.partial"):
        run_dir = runs_root / partial.name[1:-len(".partial")]
        if _same_run(partial, fingerprint, data_fingerprint) and not run_dir.exists():
            candidates.append((_stamp_order(run_dir.name[len(name) + 1:]), run_dir, partial))
    for _, run_dir, partial in sorted(candidates, key=lambda c: c[0], reverse=True):  # the newest first
        if not claim:
            return run_dir, partial
        try:
            claimed_here = claim_run_dir(run_dir)
        except LockHeld as exc:
            logger.info("not resuming %s: %s", partial, exc)
            continue
        if _same_run(partial, fingerprint, data_fingerprint) and not run_dir.exists():  # still, now that it is ours
            return run_dir, partial
        if claimed_here:
            release_run_dir(run_dir)
    return None


def _same_run(partial: Path, fingerprint: str, data_fingerprint: str) -> bool:
    return recorded_fingerprints(partial) == (fingerprint, data_fingerprint)


def _stamp_order(rest: str):
    """Sort key of what follows ``<name>-`` in a run's name: its UTC timestamp, then its suffix.

    Examples
    --------
    >>> sorted(["20250101-120000-10", "20250101-120000-2", "20250101-120000"], key=_stamp_order)
    ['20250101-120000', '20250101-120000-2', '20250101-120000-10']
    """
    match = re.fullmatch(r"(\d{8}-\d{6})(?:-(\d+))?", rest)
    return (match.group(1), int(match.group(2) or 1)) if match else (rest, 0)


def recorded_fingerprints(run_dir: Path) -> tuple[str | None, str | None]:
    """The job's and the data's fingerprints a run (or partial) directory records; ``None`` where missing or
    unreadable. Written without a newline, they are compared as written."""
    return _marker_text(Path(run_dir) / _JOB_MARKER), _marker_text(Path(run_dir) / _DATA_MARKER)


def _marker_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def job_fingerprint(job: JobSpec) -> str:
    """SHA-256 of the validated job's canonical mapping, so a resumed run is known to be the same job.

    ``tracking`` is left out: where a run is logged does not change its results, so adding it (or
    ``--mlflow``) resumes an interrupted run instead of starting over.
    """
    canonical = job.to_dict()
    canonical.pop("tracking", None)
    return hashlib.sha256(json.dumps(canonical, sort_keys=True, default=str).encode()).hexdigest()


def open_partial(partial: Path, fingerprint: str, data_fingerprint: str, job_text, job: JobSpec) -> dict:
    """Create the partial run directory, or reopen one of the same job and data; return finished folds.

    A partial run records the job's fingerprint and the data's (the source
    file's digest, or the store's source fingerprint). Resuming over other
    data would average folds of two datasets, so it is refused, and so is a
    fold file recorded for other data.
    """
    _clear_leftovers(partial)
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
        text = job_text if job_text is not None else yaml.safe_dump(job.to_dict(), sort_keys=False)
        (tmp / "job.yaml").write_text(text)
        (tmp / _DATA_MARKER).write_text(data_fingerprint)
        (tmp / _JOB_MARKER).write_text(fingerprint)
        os.replace(tmp, partial)  # the directory is a resumable run from here on
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {}


def _clear_leftovers(partial: Path) -> None:
    """Remove the temporary files and directories of writers of this run that died mid-write.

    Only dimbsvm's own temporary names are touched: ``.<partial>.tmp-<pid>``
    beside it and ``.<file>.<pid>-<random>.tmp`` in it. The caller holds the
    run's claim, so no live process is writing them.
    """
    for leftover in partial.parent.glob(f"{partial.name}.tmp-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    if partial.is_dir():
        for leftover in partial.rglob(".*.tmp"):
            if leftover.is_file() and _TEMPORARY.fullmatch(leftover.name):
                leftover.unlink(missing_ok=True)


def save_fold(partial: Path, key, record: dict, data_fingerprint: str) -> None:
    """Save one fold's record with the fingerprint of the data it was computed on."""
    write_json(partial / "folds" / fold_file(*key), {"data_fingerprint": data_fingerprint, "record": record})


def fold_file(seed, fold) -> str:
    return f"seed{seed}-fold{fold}.json"


def write_json(path: Path, payload) -> None:
    """Write JSON atomically: a reader, or a run resumed after a crash, sees the old file or the whole new one.

    The temporary file's name is unique to the writer and it is on disk
    before the rename (:func:`dimbsvm._locks.write_atomic`).

    Raises
    ------
    DimbsvmError
        The file cannot be written (a full disk), naming it.
    """
    write_atomic(path, json.dumps(payload, indent=2, default=_json_default) + "\n")


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
