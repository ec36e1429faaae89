"""What surrounds a run of ``dimbsvm run`` besides its tasks: an output URL's staging and checkpoints,
tracking, and the line an interrupted run ends with.

The CLI (:func:`dimbsvm.cli`'s ``run`` verb) calls these in order and prints
what they return; nothing here prints. A run to a URL is written in a local
staging directory and published when complete (:mod:`~dimbsvm.jobs.remote_run_dir`);
while it runs, its partial directory is mirrored there, so that a run
interrupted on one machine resumes on another.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shlex

__all__ = ["checkpoints", "interrupted_line", "remote_out", "restore_checkpoints", "resume_command", "track_run",
           "tracked"]


def remote_out(out):
    """The staging plan of a ``--out`` URL (checked: nothing but an unfinished run of dimbsvm's there), or None."""
    from ..store.location import is_url

    if out is None or not is_url(out):
        return None
    from .remote_run_dir import plan_remote_out

    remote = plan_remote_out(out)
    remote.staging.parent.mkdir(parents=True, exist_ok=True)
    return remote


def restore_checkpoints(remote) -> str | None:
    """Bring back the mirror of an interrupted run of ``remote``'s URL; the line that says so, or None."""
    from .remote_run_dir import restore_checkpoints as restore

    if restore(remote):
        return f"the interrupted run mirrored at {remote.url} was restored into {remote.staging.parent}"
    return None


def checkpoints(remote, partial):
    """While a URL's run is written, its partial directory mirrored there (a context manager; none for a path)."""
    if remote is None:
        return contextlib.nullcontext()
    from .remote_run_dir import Checkpoints

    return Checkpoints(remote.url, partial)


def tracked(checked, uri):
    """``checked`` with ``--mlflow`` applied; a job that asks for tracking without mlflow installed fails here."""
    from .tracking import with_tracking

    job = with_tracking(checked.job, uri)
    return checked if job is checked.job else dataclasses.replace(checked, job=job)


def track_run(checked, result) -> str | None:
    """The run logged to the job's tracking store (after its run directory is written); the line that says so,
    or None (no tracking, or a failure, which is a warning)."""
    if checked.job.tracking is None:
        return None
    from .tracking import track_run as track

    run_id = track(checked.job, result.run_dir)
    return f"mlflow: run {run_id} at {checked.job.tracking.mlflow}" if run_id else None


def interrupted_line(argv, plan, total: int, how: str, remote=None) -> str:
    """The one line an interrupted run ends with: what was saved, and the command that resumes.

    Parameters
    ----------
    argv : list of str
        The run's command line after ``dimbsvm``.
    plan : RunPlan
        The run's plan (its run and partial directories).
    total : int
        The job's folds.
    how : str
        What stopped it ("interrupted", "terminated (SIGTERM)", a lost scheduler's line).
    remote : RemoteOut, default=None
        The staging plan of an output URL.
    """
    from .run_dir import saved_progress

    if plan.run_dir.exists():  # interrupted after the last step: the run is complete
        if remote is not None:
            return (f"{how} after the run finished in {plan.run_dir}, before it was published to {remote.url}; "
                    f"publish it with: {resume_command(argv, remote.url)}")
        return f"{how} after the run finished; its run directory is {plan.run_dir}"
    folds, members = saved_progress(plan.partial)
    saved = f"{folds} of {total} folds"
    if members:
        saved += f" and {members} ensemble member(s)"
    where = f"saved in {plan.partial}" if plan.partial.exists() else "saved (nothing was written yet)"
    out = plan.run_dir if remote is None else remote.url  # a URL's run resumes from its mirror there
    return f"{how}: {saved} {where}; resume with: {resume_command(argv, out)}"


def resume_command(argv, run_dir) -> str:
    """The command line ``argv`` with ``--out RUN_DIR`` (and without ``--fresh`` or ``--resume``).

    Examples
    --------
    >>> resume_command(["run", "job.yaml", "--fresh", "--out", "a"], "runs/x")
    'dimbsvm run job.yaml --out runs/x'
    """
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in ("--fresh", "--resume"):
            continue
        if arg == "--out":
            skip = True
            continue
        if arg.startswith("--out="):
            continue
        kept.append(arg)
    return shlex.join(["dimbsvm", *kept, "--out", str(run_dir)])
