"""Detached runs: a job's driver runs on the cluster, and the submitting process may exit.

``dimbsvm run JOB --scheduler ... --detach`` checks the job as ``run`` does,
then submits one task, :func:`drive`, and returns. The task runs on a worker
(it secedes from the worker's thread pool, so the worker keeps its slot for
the job's own tasks) and starts ``dimbsvm run`` there as a child process,
with the same job, run directory and cluster, in the submitter's working
directory: the run is an attached run's, records included. The run directory
must be on a filesystem the submitter and the workers share.

What the task knows is kept beside the run directory, in ``.<name>.detached/``
(:func:`record_dir`): ``state.json`` (submitted, running, finished, failed or
cancelled; the attempt, the worker, the reason of a failure), ``driver.log``
(the child's output, attempt after attempt) and, once asked for, ``cancel``.
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
import subprocess
import sys
import time
from pathlib import Path

from .._locks import LockHeld, exclusive_lock, write_atomic
from ..exceptions import DimbsvmError
from .run_dir import lock_file, partial_dir, saved_progress

__all__ = ["DETACHED_STATES", "cancel_requested", "drive", "progress", "read_state", "record_dir", "request_cancel",
           "utc_stamp", "write_state"]

logger = logging.getLogger(__name__)

#: A detached run's states; the last three are final.
DETACHED_STATES = ("submitted", "running", "finished", "failed", "cancelled")
#: Seconds between the driver's looks at its child and at the cancel file.
POLL_SECONDS = 0.5
#: Seconds a new attempt waits for the child of a dead one to let go of the run directory.
LOCK_PATIENCE = 120.0
_PR_SET_PDEATHSIG = 1


def record_dir(run_dir) -> Path:
    """Where a detached run's state, log and cancel request are kept: ``.<name>.detached`` beside it.

    Examples
    --------
    >>> str(record_dir("runs/nightly"))
    'runs/.nightly.detached'
    """
    run_dir = Path(run_dir)
    return run_dir.with_name(f".{run_dir.name}.detached")


def read_state(run_dir) -> dict | None:
    """The detached run's ``state.json`` (None when the run was never detached)."""
    path = record_dir(run_dir) / "state.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise DimbsvmError(f"cannot read {path}: {exc}") from None


def write_state(run_dir, **fields) -> dict:
    """Update ``state.json`` with ``fields`` (whole file or old file, whatever happens)."""
    state = dict(read_state(run_dir) or {}, **fields, updated=utc_stamp())
    write_atomic(record_dir(run_dir) / "state.json", json.dumps(state, indent=2, sort_keys=True) + "\n")
    return state


def request_cancel(run_dir) -> None:
    """Ask the driver to stop: it interrupts its child (the partial run is kept) and records ``cancelled``."""
    write_atomic(record_dir(run_dir) / "cancel", f"{utc_stamp()}\n")


def cancel_requested(run_dir) -> bool:
    return (record_dir(run_dir) / "cancel").exists()


def drive(run_dir: str, command: list, cwd: str) -> str:
    """The detached driver: run ``command`` (``dimbsvm run ...``) in ``cwd`` until it ends; its final state.

    Runs as a Dask task. Raises only when this worker cannot see the run
    directory's parent or ``cwd`` (a filesystem it does not share), so that
    the task errs and the submitter says why; every other outcome is recorded
    in ``state.json`` and returned.
    """
    from distributed import get_worker, secede

    run_dir = Path(run_dir)
    for needed in (run_dir.parent, Path(cwd)):
        if not needed.is_dir():
            raise DimbsvmError(f"the worker running the detached driver cannot see {needed}: --detach needs a "
                               "filesystem the workers share with the submitter, at the same path")
    secede()  # the worker's thread slot is for the job's tasks; this one mostly waits
    state = read_state(run_dir) or {}
    attempt = int(state.get("attempt", 0)) + 1
    worker = get_worker().address
    if cancel_requested(run_dir):
        return write_state(run_dir, state="cancelled", attempt=attempt, reason="cancelled before it started")["state"]
    _wait_for_run_dir(run_dir)
    write_state(run_dir, state="running", attempt=attempt, worker=worker, worker_pid=os.getpid(), started=utc_stamp())
    log_path = record_dir(run_dir) / "driver.log"
    with open(log_path, "a", encoding="utf-8") as log:
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
            time.sleep(POLL_SECONDS)
    if child.returncode == 0:
        return write_state(run_dir, state="finished", reason=None, returncode=0)["state"]
    if cancelled:
        return write_state(run_dir, state="cancelled", reason="cancelled while running; the partial run is kept",
                           returncode=child.returncode)["state"]
    return write_state(run_dir, state="failed", reason=_last_error(log_path, child.returncode),
                       returncode=child.returncode)["state"]


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
    """What a run has done, from its files: ``{"finished": bool, "folds_saved": int, "members_saved": int}``."""
    run_dir = Path(run_dir)
    finished = (run_dir / "metrics.json").is_file()
    folds, members = (0, 0) if finished else saved_progress(partial_dir(run_dir))
    return {"finished": finished, "folds_saved": folds, "members_saved": members}


def utc_stamp() -> str:
    """Now, in UTC, as the state file writes times (``2026-11-29T04:23:20Z``)."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
