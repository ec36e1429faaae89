"""Start a Dask cluster on SLURM for dimbsvm, write its scheduler file, and keep it up.

Needs the optional dependency dask-jobqueue (``pip install dask-jobqueue``) in
the same environment as dimbsvm, on a shared filesystem the compute nodes see.
Run it where a long-lived process is allowed (a login node in tmux, or a
small long SLURM job)::

    python deploy/slurm/start_cluster.py --scheduler-file ~/dimbsvm/scheduler.json \\
        --jobs 4 --cores 16 --memory 64GB --walltime 08:00:00 --queue compute --account myproj

The scheduler runs in this process; each SLURM job runs ``--cores``
single-threaded worker processes under nannies (SVM fits hold the GIL). The
cluster is adaptive: it holds ``--min-jobs`` jobs (default 0: none while no
dimbsvm job runs, so no allocation is spent idle) and submits up to ``--jobs``
while work waits; dimbsvm submits a job's tasks before any worker has joined,
so a cluster at zero sees the demand. Workers retire a few minutes before their
walltime and replacement jobs are submitted while work remains, so the cluster
outlives any one job. Then, from any node::

    dimbsvm retrain jobs/retrain.yaml --registry ~/dimbsvm/registry --scheduler-file ~/dimbsvm/scheduler.json

Ctrl-C or SIGTERM cancels the worker jobs and removes the scheduler file.
``--dry-run`` prints the worker job script and submits nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path


def walltime_seconds(text: str) -> int:
    """SLURM's time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S.

    >>> walltime_seconds("08:00:00"), walltime_seconds("90"), walltime_seconds("1-12")
    (28800, 5400, 129600)
    """
    days, _, rest = text.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days:
        h, m, s = (parts + [0, 0])[:3]
    else:
        h, m, s = {1: [0, parts[0], 0], 2: [0, *parts], 3: parts}[len(parts)]
    return ((int(days or 0) * 24 + h) * 60 + m) * 60 + s


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scheduler-file", default="~/dimbsvm/scheduler.json", help="file to write for clients")
    p.add_argument("--jobs", type=int, default=2, help="most SLURM jobs at once, while work waits (default: 2)")
    p.add_argument("--min-jobs", type=int, default=0,
                   help="SLURM jobs kept while no work waits (default: 0; at most --jobs)")
    p.add_argument("--cores", type=int, default=8, help="cores per job = worker processes per job (default: 8)")
    p.add_argument("--memory", default="32GB", help="memory per job (default: 32GB)")
    p.add_argument("--walltime", default="08:00:00", help="walltime per job (default: 08:00:00)")
    p.add_argument("--queue", help="partition (#SBATCH -p)")
    p.add_argument("--account", help="account (#SBATCH -A)")
    p.add_argument("--interface", help="network interface of the nodes, e.g. ib0 (default: the hostname's)")
    p.add_argument("--port", type=int, default=8786, help="scheduler port (default: 8786; 0 for any)")
    p.add_argument("--local-directory", default="${TMPDIR:-/tmp}",
                   help="node-local scratch for workers, expanded on the node (default: ${TMPDIR:-/tmp})")
    p.add_argument("--log-directory", default="~/dimbsvm/slurm-logs", help="worker job logs")
    p.add_argument("--sbatch", action="append", default=[], metavar="OPTION",
                   help="extra #SBATCH option, repeatable, e.g. --sbatch=--qos=long")
    p.add_argument("--tls-dir", help="directory from deploy/tls/make-certs.sh (shared): run over tls://")
    p.add_argument("--dry-run", action="store_true", help="print the worker job script and exit")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if not 0 <= args.min_jobs <= args.jobs:
        print(f"start_cluster.py: --min-jobs must be between 0 and --jobs ({args.jobs}), got {args.min_jobs}",
              file=sys.stderr)
        return 2
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError:
        print("start_cluster.py: needs dask-jobqueue: pip install dask-jobqueue", file=sys.stderr)
        return 2

    security = None
    if args.tls_dir:
        from distributed.security import Security

        d = Path(args.tls_dir).expanduser().resolve()
        security = Security(tls_ca_file=str(d / "ca.pem"),
                            tls_scheduler_cert=str(d / "scheduler.pem"), tls_scheduler_key=str(d / "scheduler.key"),
                            tls_worker_cert=str(d / "worker.pem"), tls_worker_key=str(d / "worker.key"),
                            tls_client_cert=str(d / "client.pem"), tls_client_key=str(d / "client.key"),
                            require_encryption=True)
    lifetime = max(walltime_seconds(args.walltime) - 600, 300)  # retire 5-10 minutes before the walltime
    cluster = SLURMCluster(
        cores=args.cores, processes=args.cores, memory=args.memory, walltime=args.walltime,
        queue=args.queue, account=args.account, interface=args.interface, security=security,
        job_name="dimbsvm-worker", local_directory=args.local_directory,
        log_directory=os.path.expanduser(args.log_directory), job_extra_directives=args.sbatch,
        worker_extra_args=["--lifetime", f"{lifetime}s", "--lifetime-stagger", "300s",
                           "--preload-nanny", "dimbsvm.distributed.worker_memory"],
        scheduler_options={"port": args.port, "dashboard_address": ":8787"},
    )
    if args.dry_run:
        print(cluster.job_script())
        cluster.close()
        return 0
    scheduler_file = Path(args.scheduler_file).expanduser()
    stop = threading.Event()
    try:
        # from --min-jobs to --jobs as work waits; jobs that reach their walltime are replaced while it does
        cluster.adapt(minimum_jobs=args.min_jobs, maximum_jobs=args.jobs)
        scheduler_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = scheduler_file.with_name(scheduler_file.name + ".tmp")
        tmp.write_text(json.dumps({"type": "Scheduler", "address": cluster.scheduler_address}) + "\n")
        os.replace(tmp, scheduler_file)
        print(f"scheduler {cluster.scheduler_address}, dashboard {cluster.dashboard_link}; "
              f"wrote {scheduler_file}", flush=True)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        while not stop.wait(300):
            n = len(cluster.scheduler_info.get("workers", {}))
            print(f"{n} worker(s) connected", flush=True)
    finally:
        scheduler_file.unlink(missing_ok=True)
        cluster.close()  # cancels the worker jobs (scancel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
