"""What the verbs set up before their work: the job file read, and where the work runs (from the command
line's cluster flags: TLS settings, the job's placement, the cluster factory, and the client, or none for
work placed in this process)."""

from __future__ import annotations

import os
from pathlib import Path

from .exceptions import DimbsvmError

__all__ = ["cluster_factory_of", "cluster_for", "placement_of", "read_job_file", "tls_settings"]


def read_job_file(path) -> None:
    """Refuse a job file that cannot be read or is not YAML before the job layer (scikit-learn, ...) is imported.

    :func:`~dimbsvm.jobs.checks.check_job` reads it again and checks the rest;
    a missing or mistyped path is then one line at once.
    """
    from .jobs.yaml_load import parse_yaml, read_text_file

    parse_yaml(read_text_file(path, "job"), f"job file {Path(path)}")


def tls_settings(args):
    """The TLS files the flags name, or None (their existence is checked with the other cluster options)."""
    from .distributed import TLSSettings

    if not (args.tls_ca_file or args.tls_cert or args.tls_key):
        return None
    if not (args.tls_ca_file and args.tls_cert):
        raise DimbsvmError("TLS needs at least --tls-ca-file and --tls-cert")
    return TLSSettings(args.tls_ca_file, args.tls_cert, args.tls_key)


def placement_of(args, job, data, *, challenger_rows=None):
    """Where a job runs (:func:`dimbsvm.jobs.placement.place_job`) given the command line's cluster flags."""
    from .jobs.placement import place_job

    return place_job(job, data, scheduler=args.scheduler, scheduler_file=args.scheduler_file, workers=args.workers,
                     challenger_rows=challenger_rows, cluster=args.cluster)


def cluster_factory_of(args, job=None):
    """The cluster factory a verb uses (:func:`~dimbsvm.jobs.placement.cluster_factory`)."""
    from .jobs.placement import cluster_factory

    if job is None:
        return args.cluster
    return cluster_factory(job, cluster=args.cluster, scheduler=args.scheduler, scheduler_file=args.scheduler_file)


def cluster_for(args, *, tls=None, placement=None, **kwargs):
    """The cluster the CLI's flags name, or an embedded one; prints the dashboard address (stdout).

    With a ``placement`` decided by the job's size, its line is printed
    first; one that runs in this process yields ``None`` (no cluster).
    """
    import contextlib

    cluster = kwargs.get("cluster", args.cluster)
    if args.scale_from_zero and not (args.scheduler or args.scheduler_file or cluster
                                     or os.environ.get("DASK_SCHEDULER_ADDRESS")):
        raise DimbsvmError("--scale-from-zero is for a remote scheduler's cluster (--scheduler, --scheduler-file or "
                           "DASK_SCHEDULER_ADDRESS); an embedded cluster has its workers from the start")
    if placement is not None and placement.decided:
        print(placement.reason, flush=True)
    cost = placement.cost_line() if placement is not None else None
    if cost is not None:
        print(cost, flush=True)
    if placement is not None and placement.in_process:
        return contextlib.nullcontext(None)

    from .distributed import cluster_client

    kwargs.setdefault("n_workers", args.workers)
    kwargs.setdefault("timeout", args.connect_timeout)
    kwargs.setdefault("worker_timeout", args.worker_timeout)
    kwargs.setdefault("cluster", args.cluster)
    kwargs.setdefault("scale_from_zero", args.scale_from_zero)
    if not (args.scheduler or args.scheduler_file or kwargs["cluster"]):
        kwargs.setdefault("dashboard_address", args.dashboard_address)

    @contextlib.contextmanager
    def opened():
        with cluster_client(args.scheduler, scheduler_file=args.scheduler_file, tls=tls, **kwargs) as client:
            print(f"dashboard: {client.dashboard_link}", flush=True)
            yield client

    return opened()
