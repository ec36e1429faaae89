"""Detached runs: a job's driver runs on the cluster, and the submitting process may exit.

``dimbsvm run JOB --scheduler ... --detach`` checks the job as ``run`` does,
then submits one task, :func:`drive`, and returns. The task runs on a worker
(it secedes from the worker's thread pool, so the worker keeps its slot for
the job's own tasks) and starts ``dimbsvm run`` there as a child process,
with the same job, run directory and cluster, in the submitter's working
directory: the run is an attached run's, records included. A local run
directory must be on a filesystem the submitter and the workers share; one at
a URL needs none: the job travels with the task, the child runs in a scratch
directory of the worker's, stages the run there and publishes it at the URL
(:mod:`dimbsvm.jobs.remote_run_dir`, whose mirror of the partial run lets
another worker resume it).

What the task knows is kept beside the run directory, in ``.<name>.detached/``
(:func:`record_dir`, local or at the URL, each file written whole):
``state.json`` (submitted, running, finished, failed or cancelled; the attempt,
the worker, the reason of a failure), ``driver-<attempt>.log`` (the child's
output) and, once asked for, ``cancel``.
A worker that dies takes its child with it (the child is signalled when its
parent dies); the scheduler runs the task again on another worker, whose
child resumes the interrupted run from its partial directory. ``dimbsvm
status``, ``logs`` and ``cancel`` read and write only these files, so they
work from any machine that sees them.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime as _dt
import json
import logging
import os
import signal
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .._locks import LockHeld, exclusive_lock, write_atomic
from ..exceptions import DimbsvmError
from ..store.location import filesystem, is_url, location, read_json
from .run_dir import lock_file, partial_dir, saved_progress

__all__ = ["DETACHED_STATES", "cancel_requested", "clear_cancel", "drive", "driver_logs", "finished_metrics", "progress",
           "read_state", "record_dir", "request_cancel", "utc_stamp", "write_state"]

logger = logging.getLogger(__name__)

#: A detached run's states; the last three are final.
DETACHED_STATES = ("submitted", "running", "finished", "failed", "cancelled")
#: Seconds between the driver's looks at its child and at the cancel file.
POLL_SECONDS = 0.5
#: Seconds between those looks when the run (and its cancel request) is at a URL: each is a request.
REMOTE_POLL_SECONDS = 3.0
#: Seconds a new attempt waits for the child of a dead one to let go of the run directory.
LOCK_PATIENCE = 120.0
_PR_SET_PDEATHSIG = 1


def record_dir(run_dir) -> Path | str:
    """Where a detached run's state, logs and cancel request are kept: ``.<name>.detached`` beside it
    (a local path, or a URL beside a run directory at a URL).

    Examples
    --------
    >>> str(record_dir("runs/nightly"))
    'runs/.nightly.detached'
    >>> record_dir("s3://bucket/runs/nightly")
    's3://bucket/runs/.nightly.detached'
    """
    if is_url(str(run_dir)):
        url = location(str(run_dir))
        parent, _, name = url.rpartition("/")
        return f"{parent}/.{name}.detached"
    run_dir = Path(run_dir)
    return run_dir.with_name(f".{run_dir.name}.detached")


class _Record:
    """The files of a detached run's record, on a local filesystem or at a URL (each written whole)."""

    def __init__(self, run_dir):
        self.where = record_dir(run_dir)
        self.remote = isinstance(self.where, str)

    def read(self, name: str) -> bytes | None:
        try:
            if self.remote:
                fs, path = filesystem(f"{self.where}/{name}")
                return fs.cat_file(path)
            return (self.where / name).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise DimbsvmError(f"cannot read {self.where}/{name}: {exc}") from None

    def write(self, name: str, data: bytes | str) -> None:
        data = data.encode() if isinstance(data, str) else data
        if self.remote:  # an object appears whole
            fs, path = filesystem(f"{self.where}/{name}")
            fs.pipe_file(path, data)
        else:
            write_atomic(self.where / name, data)

    def exists(self, name: str) -> bool:
        if self.remote:
            fs, path = filesystem(f"{self.where}/{name}")
            return fs.exists(path)
        return (self.where / name).exists()

    def remove(self, name: str) -> None:
        if self.exists(name):
            if self.remote:
                fs, path = filesystem(f"{self.where}/{name}")
                fs.rm_file(path)
            else:
                (self.where / name).unlink(missing_ok=True)

    def logs(self) -> list[tuple[int, bytes]]:
        """Every attempt's log, in attempt order."""
        if self.remote:
            fs, path = filesystem(self.where)
            names = [p.rsplit("/", 1)[-1] for p in (fs.ls(path, detail=False) if fs.exists(path) else [])]
        else:
            names = [p.name for p in self.where.iterdir()] if self.where.is_dir() else []
        attempts = sorted(int(n[len("driver-"):-len(".log")]) for n in names
                          if n.startswith("driver-") and n.endswith(".log") and n[7:-4].isdigit())
        return [(a, self.read(f"driver-{a}.log") or b"") for a in attempts]


def read_state(run_dir) -> dict | None:
    """The detached run's ``state.json`` (None when the run was never detached)."""
    where = record_dir(run_dir)
    path = f"{where}/state.json" if isinstance(where, str) else where / "state.json"
    try:
        return read_json(path)
    except (OSError, ValueError) as exc:
        raise DimbsvmError(f"cannot read {path}: {exc}") from None


def write_state(run_dir, **fields) -> dict:
    """Update ``state.json`` with ``fields`` (whole file or old file, whatever happens)."""
    state = dict(read_state(run_dir) or {}, **fields, updated=utc_stamp())
    _Record(run_dir).write("state.json", json.dumps(state, indent=2, sort_keys=True) + "\n")
    return state


def request_cancel(run_dir) -> None:
    """Ask the driver to stop: it interrupts its child (the partial run is kept) and records ``cancelled``."""
    _Record(run_dir).write("cancel", f"{utc_stamp()}\n")


def cancel_requested(run_dir) -> bool:
    return _Record(run_dir).exists("cancel")


def clear_cancel(run_dir) -> None:
    """Forget an earlier cancel request (a new submission of the same run)."""
    _Record(run_dir).remove("cancel")


def driver_logs(run_dir) -> str:
    """Every attempt's output, in order, each under its ``--- attempt N`` line."""
    return "".join(text.decode(errors="replace") for _, text in _Record(run_dir).logs())


def drive(run_dir: str, command: list, cwd: str | None, job_text: str | None = None) -> str:
    """The detached driver: run ``command`` (``dimbsvm run ...``) until it ends; its final state.

    Runs as a Dask task. For a local run directory the child runs in
    ``cwd``, which the worker must see (a filesystem shared with the
    submitter); for one at a URL it runs in a scratch directory of the
    worker's, with the job written there from ``job_text`` (``command[4]``
    names it) and its output uploaded beside the run. Raises only when the
    worker cannot see what it needs, so that the task errs and the submitter
    says why; every other outcome is recorded in ``state.json`` and returned.
    """
    from distributed import get_worker, secede

    remote = is_url(str(run_dir))
    scratch = None
    if remote:
        scratch = Path(tempfile.mkdtemp(prefix="dimbsvm-driver-"))
        job = scratch / Path(command[4]).name
        job.write_text(job_text)
        command = [*command[:4], str(job), *command[5:]]
        cwd = str(scratch)
    else:
        run_dir = Path(run_dir)
        for needed in (run_dir.parent, Path(cwd)):
            if not needed.is_dir():
                raise DimbsvmError(f"the worker running the detached driver cannot see {needed}: --detach needs a "
                                   "filesystem the workers share with the submitter, at the same path (or an "
                                   "--out URL)")
    secede()  # the worker's thread slot is for the job's tasks; this one mostly waits
    try:
        return _drive(run_dir, command, cwd, remote, get_worker().address)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _drive(run_dir, command: list, cwd: str, remote: bool, worker: str) -> str:
    record = _Record(run_dir)
    state = read_state(run_dir) or {}
    attempt = int(state.get("attempt", 0)) + 1
    if cancel_requested(run_dir):
        return write_state(run_dir, state="cancelled", attempt=attempt, reason="cancelled before it started")["state"]
    if not remote:
        _wait_for_run_dir(run_dir)
    write_state(run_dir, state="running", attempt=attempt, worker=worker, worker_pid=os.getpid(), started=utc_stamp())
    log_path = (Path(cwd) if remote else record.where) / f"driver-{attempt}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    poll = REMOTE_POLL_SECONDS if remote else POLL_SECONDS
    with open(log_path, "w", encoding="utf-8") as log:
        log.write(f"--- attempt {attempt} on worker {worker} at {utc_stamp()}\n")
        log.flush()
        child = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 preexec_fn=_dies_with_parent())
        write_state(run_dir, driver_pid=child.pid)
        cancelled = False
        while child.poll() is None:
            if not cancelled and cancel_requested(run_dir):
                cancelled = True
                child.send_signal(signal.SIGINT)  # the run saves what it has and stops, as after Ctrl-C
            if remote:
                _upload_log(record, attempt, log_path)
            time.sleep(poll)
    if remote:
        record.write(f"driver-{attempt}.log", log_path.read_bytes())
    if child.returncode == 0:
        return write_state(run_dir, state="finished", reason=None, returncode=0)["state"]
    if cancelled:
        return write_state(run_dir, state="cancelled", reason="cancelled while running; the partial run is kept",
                           returncode=child.returncode)["state"]
    return write_state(run_dir, state="failed", reason=_last_error(log_path, child.returncode),
                       returncode=child.returncode)["state"]


def _upload_log(record: _Record, attempt: int, log_path: Path) -> None:
    """The log so far, beside a run at a URL; a failed upload waits for the next (the run goes on)."""
    try:
        record.write(f"driver-{attempt}.log", log_path.read_bytes())
    except OSError as exc:
        logger.warning("detached driver: the log of attempt %d was not uploaded to %s (%s); retrying", attempt,
                       record.where, exc)


def _wait_for_run_dir(run_dir: Path) -> None:
    """Wait until no process holds the run directory's claim (the child of an attempt whose worker died
    is stopping); a new attempt's child would be refused meanwhile."""
    deadline = time.monotonic() + LOCK_PATIENCE
    while True:
        try:
            with exclusive_lock(lock_file(run_dir), f"run directory {run_dir}"):
                return
        except LockHeld:
            if time.monotonic() > deadline:
                return  # the child says who holds it
            time.sleep(1.0)


def _dies_with_parent():
    """A ``preexec_fn`` that has the kernel send SIGTERM to the child when this worker process dies (Linux);
    elsewhere None. The libc function is looked up here, before the fork."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def preexec():
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))

    return preexec


def _last_error(log_path: Path, returncode: int) -> str:
    """The child's own one-line error, or its exit status."""
    with contextlib.suppress(OSError):
        lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines()]
        errors = [line for line in lines if line.startswith("dimbsvm: ")]
        if errors:
            return errors[-1].removeprefix("dimbsvm: ").removeprefix("error: ")
    return f"dimbsvm run exited with status {returncode}"


def progress(run_dir) -> dict:
    """What a run has done, from its files: ``{"finished": bool, "folds_saved": int, "members_saved": int}``
    (at a URL: the run published, or the mirror of its partial directory)."""
    if is_url(str(run_dir)):
        from .remote_run_dir import CHECKPOINT_PREFIX, COMPLETE_MARKER

        fs, path = filesystem(location(str(run_dir)))
        if fs.exists(f"{path}/{COMPLETE_MARKER}"):
            return {"finished": True, "folds_saved": 0, "members_saved": 0}
        mirror = f"{path}/{CHECKPOINT_PREFIX}"
        folds = len(fs.glob(f"{mirror}/folds/*.json")) if fs.exists(f"{mirror}/folds") else 0
        members = len(fs.glob(f"{mirror}/members/*.skops")) if fs.exists(f"{mirror}/members") else 0
        return {"finished": False, "folds_saved": folds, "members_saved": members}
    run_dir = Path(run_dir)
    finished = (run_dir / "metrics.json").is_file()
    folds, members = (0, 0) if finished else saved_progress(partial_dir(run_dir))
    return {"finished": finished, "folds_saved": folds, "members_saved": members}


def finished_metrics(run_dir) -> dict:
    """A finished run's ``metrics.json`` (local, or at the URL it was published to)."""
    if is_url(str(run_dir)):
        fs, path = filesystem(location(str(run_dir)))
        return json.loads(fs.cat_file(f"{path}/metrics.json"))
    return json.loads((Path(run_dir) / "metrics.json").read_text())


def utc_stamp() -> str:
    """Now, in UTC, as the state file writes times (``2026-11-29T04:23:20Z``)."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
