"""``dimbsvm run --detach``, ``status``, ``logs`` and ``cancel``: a run whose driver lives on the cluster.

The submitter checks everything ``run`` checks, records the run as submitted
(:mod:`dimbsvm.jobs.detached`), submits the driver task and returns within
seconds; the other verbs read and write only the files beside the run
directory, so they work from any machine that sees them.
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
import time
import uuid
from pathlib import Path

from .exceptions import DimbsvmError, one_line

__all__ = ["cmd_cancel", "cmd_logs", "cmd_status", "run_detached"]

#: Seconds the submitter waits to see the driver start (or fail to), before it leaves it to the cluster.
SUBMIT_WAIT = 15.0
_FINAL = ("finished", "failed", "cancelled")


def run_detached(args, tls) -> int:
    """``dimbsvm run JOB --detach``: the checks of ``run``, then the driver submitted to the cluster."""
    from distributed import fire_and_forget

    from .distributed import cluster_client
    from .jobs.checks import check_job
    from .jobs.detached import clear_cancel, drive, read_state, utc_stamp, write_state
    from .jobs.run_dir import release_run_dir
    from .store.location import is_url, location

    if args.cluster:
        raise DimbsvmError("--detach needs a cluster that outlives this process: --scheduler or --scheduler-file "
                           "(a --cluster factory's cluster is closed when this process ends)")
    if not (args.scheduler or args.scheduler_file or os.environ.get("DASK_SCHEDULER_ADDRESS")):
        raise DimbsvmError("--detach needs a remote scheduler (--scheduler, --scheduler-file or "
                           "DASK_SCHEDULER_ADDRESS): the driver runs on its workers")
    remote = args.out is not None and is_url(str(args.out))
    if remote:
        from .jobs.remote_run_dir import plan_remote_out

        run_dir = location(str(args.out))
        if args.fresh:
            raise DimbsvmError(f"--fresh with --detach --out {run_dir}: a detached run at a URL resumes what it "
                               "finds there; start over at another --out")
        plan_remote_out(run_dir)  # nothing but an unfinished run of dimbsvm's there
        checked = check_job(args.job, run_dir=False, scheduler=args.scheduler, scheduler_file=args.scheduler_file,
                            tls=tls, cluster=None)
        _refuse_local_data(args.job, run_dir)
    else:
        checked = check_job(args.job, out=args.out, resume=args.resume, fresh=args.fresh, scheduler=args.scheduler,
                            scheduler_file=args.scheduler_file, tls=tls, cluster=None)
        run_dir = checked.run.run_dir.resolve()
        release_run_dir(checked.run.run_dir)  # the driver's child claims it on the cluster
    clear_cancel(run_dir)
    key = f"dimbsvm-driver-{str(run_dir).rstrip('/').rsplit('/', 1)[-1]}-{uuid.uuid4().hex[:8]}"
    with cluster_client(args.scheduler, scheduler_file=args.scheduler_file, tls=tls, timeout=args.connect_timeout,
                        worker_timeout=args.worker_timeout, scale_from_zero=True) as client:
        command = _driver_command(args, run_dir, client.scheduler.address)
        cwd = None if remote else os.getcwd()
        write_state(run_dir, state="submitted", attempt=0, key=key, scheduler=client.scheduler.address,
                    command=command, cwd=cwd, submitted=utc_stamp(), folds_total=checked.job.cv.n_folds,
                    job=checked.job.name, reason=None, worker=None)
        job_text = Path(args.job).read_text() if remote else None
        future = client.submit(drive, str(run_dir), command, cwd, job_text, key=key, pure=False)
        fire_and_forget(future)
        state = _first_news(future, run_dir)
    where = f"on worker {state['worker']}" if state.get("worker") else "waiting for a worker"
    print(f"detached: job {checked.job.name}, driver {where} ({state['state']})")
    print(f"run directory: {run_dir}")
    print(f"follow it: dimbsvm status {run_dir} | dimbsvm logs {run_dir} | dimbsvm cancel {run_dir}")
    args.json_document = {"job": checked.job.name, "estimator": checked.job.estimator.name,
                          "data": str(checked.job.data.source), "run_directory": str(run_dir), "summary": {},
                          "detached": _public(read_state(run_dir) or state)}
    return 0


def _refuse_local_data(job_path, run_dir: str) -> None:
    """A run at a URL runs in a worker's scratch directory: its data must be named so that any worker finds it."""
    import yaml

    from .store.location import is_url

    source = str((yaml.safe_load(Path(job_path).read_text()) or {}).get("data", {}).get("source", ""))
    path = Path(source)
    if is_url(source) or path.is_absolute():
        return
    if os.sep in source or path.suffix or (Path(job_path).parent / source).exists():
        raise DimbsvmError(f"--detach with --out {run_dir}: data.source {source} is a path relative to the job "
                           "file, which a worker running the driver does not have; give it as a URL (or an "
                           "absolute path every worker sees)")


def _driver_command(args, run_dir, address: str) -> list:
    """``dimbsvm run`` as the driver's child runs it: absolute paths, the scheduler by address, no progress bar
    (for a run at a URL, the job's path is replaced by the copy the driver writes)."""
    command = [sys.executable, "-m", "dimbsvm.cli", "run", str(Path(args.job).resolve()), "--out", str(run_dir),
               "--scheduler", address, "--no-progress", "--worker-timeout", f"{args.worker_timeout:g}",
               "--connect-timeout", f"{args.connect_timeout:g}"]
    for flag, value in (("--tls-ca-file", args.tls_ca_file), ("--tls-cert", args.tls_cert),
                        ("--tls-key", args.tls_key), ("--mlflow", args.mlflow)):
        if value:
            command += [flag, value if flag == "--mlflow" else str(Path(value).resolve())]
    if args.scale_from_zero:
        command.append("--scale-from-zero")
    return command


def _first_news(future, run_dir: Path) -> dict:
    """Wait briefly for the driver to start (or for its task to fail: a worker that cannot see the files)."""
    from .jobs.detached import read_state, write_state

    deadline = time.monotonic() + SUBMIT_WAIT
    while time.monotonic() < deadline:
        if future.status == "error":
            reason = one_line(future.exception())
            write_state(run_dir, state="failed", reason=reason)
            raise DimbsvmError(f"the detached driver failed to start: {reason}")
        state = read_state(run_dir) or {}
        if state.get("state") != "submitted":
            return state
        time.sleep(0.2)
    return read_state(run_dir) or {}


def cmd_status(args) -> int:
    """``dimbsvm status RUN``: what a run is doing or did, from its files."""
    status = run_status(args.run)
    print(_status_line(status))
    args.json_document = status
    return 0


def run_status(run_dir) -> dict:
    """A run's state (detached or not), its progress and, finished, its summary."""
    from .jobs.detached import finished_metrics, progress, read_state
    from .jobs.run_dir import partial_dir
    from .store.location import is_url

    remote = is_url(str(run_dir))
    if not remote:
        run_dir = Path(run_dir)
        run_dir = run_dir.resolve() if run_dir.exists() or run_dir.parent.exists() else run_dir
    record = read_state(run_dir)
    done = progress(run_dir)
    interrupted = done["folds_saved"] > 0 if remote else partial_dir(run_dir).is_dir()
    if record is None and not done["finished"] and not interrupted:
        raise DimbsvmError(f"{run_dir}: no run there (no run directory, no interrupted run, no detached run)")
    status = {"run_directory": str(run_dir), "detached": record is not None, **done}
    if record is not None:
        status.update(_public(record))
        if done["finished"] and record.get("state") not in _FINAL:
            status["state"] = "finished"  # (the child finished; its driver is writing the state)
    else:
        status["state"] = "finished" if done["finished"] else "interrupted"
    if done["finished"]:
        metrics = finished_metrics(run_dir)
        status["summary"] = metrics.get("summary", {})
        status["folds_saved"] = len(metrics.get("folds", []))
    elif status["state"] == "running" and done["folds_saved"] and status.get("folds_total") and status.get("submitted"):
        elapsed = (_dt.datetime.now(_dt.timezone.utc) - _parse(status["submitted"])).total_seconds()
        left = status["folds_total"] - done["folds_saved"]
        status["seconds_left_estimate"] = round(elapsed / done["folds_saved"] * max(left, 0))
    return status


def _status_line(status: dict) -> str:
    run, state = status["run_directory"], status["state"]
    if state == "finished":
        scores = "; ".join(f"{name} {s['mean']:.4f} ± {s['std']:.4f}" for name, s in status.get("summary", {}).items()
                           if s.get("mean") is not None)
        return f"{run}: finished; {scores}; report {run}/report.html"
    if state == "running":
        total = status.get("folds_total")
        folds = f"{status['folds_saved']} of {total} folds saved" if total else f"{status['folds_saved']} folds saved"
        left = status.get("seconds_left_estimate")
        tail = f"; about {_dt.timedelta(seconds=left)} left at the rate so far" if left is not None else ""
        return f"{run}: running (attempt {status.get('attempt')}, driver on {status.get('worker')}); {folds}{tail}"
    if state == "submitted":
        return f"{run}: submitted to {status.get('scheduler')}, waiting for a worker to start its driver"
    if state == "interrupted":
        return (f"{run}: interrupted ({status['folds_saved']} folds saved); `dimbsvm run JOB --out {run}` "
                "resumes it")
    return f"{run}: {state}: {status.get('reason')}"


def cmd_logs(args) -> int:
    """``dimbsvm logs RUN``: the detached driver's output, every attempt; ``--follow`` until it ends."""
    from .jobs.detached import driver_logs, read_state, record_dir

    run_dir = _run_location(args.run)
    if read_state(run_dir) is None:
        raise DimbsvmError(f"{args.run}: not a detached run (no {record_dir(run_dir)}/state.json)")
    shown = 0
    while True:
        final = (read_state(run_dir) or {}).get("state") in _FINAL  # (read before the logs: their last lines)
        text = driver_logs(run_dir)
        sys.stdout.write(text[shown:])
        sys.stdout.flush()
        shown = len(text)
        if not args.follow or final:
            return 0
        time.sleep(1.0)


def _run_location(run):
    """A run directory as the record knows it: a URL as given, a local path made absolute."""
    from .store.location import is_url, location

    return location(run) if is_url(run) else Path(run).resolve()


def cmd_cancel(args) -> int:
    """``dimbsvm cancel RUN``: ask the driver to stop (the partial run is kept) and wait for it to."""
    from .jobs.detached import read_state, request_cancel

    run_dir = _run_location(args.run)
    state = read_state(run_dir)
    if state is None:
        raise DimbsvmError(f"{args.run}: not a detached run, nothing to cancel")
    if state.get("state") in _FINAL:
        raise DimbsvmError(f"{args.run} is {state['state']} already; nothing to cancel")
    request_cancel(run_dir)
    deadline = time.monotonic() + args.wait
    while time.monotonic() < deadline:
        state = read_state(run_dir) or {}
        if state.get("state") in _FINAL:
            print(_status_line(run_status(run_dir)))
            return 0
        time.sleep(0.5)
    raise DimbsvmError(f"asked {args.run}'s driver to stop; it has not within {args.wait:g} s (a driver waiting for "
                       "a worker stops when it starts); dimbsvm status shows when it does")


def _public(record: dict) -> dict:
    """The state record as ``status`` shows it (the child's command line stays in the file)."""
    return {k: v for k, v in record.items() if k not in ("command", "cwd", "driver_pid", "worker_pid")}




def _parse(stamp: str) -> _dt.datetime:
    return _dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=_dt.timezone.utc)
