"""The ``dimbsvm`` command line.

Verbs::

    dimbsvm run JOB.yaml [--scheduler ADDRESS] [--out DIR] [--workers N]
    dimbsvm ingest SOURCE STORE [--chunk-rows N] [--overwrite] [--verify]
    dimbsvm datasets
    dimbsvm estimators

Errors a user can fix (bad data, bad job, damaged store) print one line
``dimbsvm: error: ...`` and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from .exceptions import DimbsvmError

logger = logging.getLogger("dimbsvm")


def main(argv=None) -> int:
    """Entry point of the ``dimbsvm`` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    _configure_logging(args.verbose)
    try:
        return args.handler(args)
    except (DimbsvmError, FileNotFoundError, FileExistsError) as exc:
        print(f"dimbsvm: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dimbsvm: interrupted", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dimbsvm", description="SVMs for class-imbalanced data on Dask.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv: debug)")
    verbs = parser.add_subparsers(dest="verb", required=True)

    run = verbs.add_parser("run", help="run a job (YAML) on a Dask cluster")
    run.add_argument("job", help="job spec file (YAML)")
    run.add_argument("--scheduler", help="scheduler address (default: $DASK_SCHEDULER_ADDRESS, "
                                         "else an embedded LocalCluster)")
    run.add_argument("--out", help="run directory to create (default: runs/<job name>-<timestamp>)")
    run.add_argument("--workers", type=int, help="workers of the embedded cluster (default: one per core)")
    run.add_argument("--no-progress", action="store_true", help="do not show task progress")
    run.set_defaults(handler=_cmd_run)

    ingest = verbs.add_parser("ingest", help="write a data file into a Zarr store")
    ingest.add_argument("source", help="data file (.dat .csv .npz .svm .data .ts) or bundled name")
    ingest.add_argument("store", help="store directory to create")
    ingest.add_argument("--chunk-rows", type=int, help="rows per chunk (default: ~32 MiB per chunk)")
    ingest.add_argument("--overwrite", action="store_true", help="replace a store holding other data")
    ingest.add_argument("--verify", action="store_true", help="read back every chunk and check checksums")
    ingest.set_defaults(handler=_cmd_ingest)

    datasets = verbs.add_parser("datasets", help="list bundled and shared datasets")
    datasets.set_defaults(handler=_cmd_datasets)

    estimators = verbs.add_parser("estimators", help="list the estimators jobs can name")
    estimators.set_defaults(handler=_cmd_estimators)
    return parser


def _cmd_run(args) -> int:
    from .distributed import cluster_client
    from .jobs import load_job, run_job

    job = load_job(args.job)  # validated completely before a cluster starts
    job_text = Path(args.job).read_text()
    n_workers = args.workers or job["execution"].get("n_workers")
    with cluster_client(args.scheduler, n_workers=n_workers) as client:
        print(f"dimbsvm: dashboard {client.dashboard_link}", file=sys.stderr)
        result = run_job(job, client, out=args.out, progress=not args.no_progress, job_text=job_text)
    print(f"job {job['name']}: {job['estimator']['name']} on {job['data']['source']}")
    for name, stats in result.summary.items():
        print(f"  {name:<12} {stats['mean']:.4f} ± {stats['std']:.4f}  ({stats['n']} folds)")
    print(f"run directory: {result.run_dir}")
    return 0


def _cmd_ingest(args) -> int:
    from .store import ingest, verify_store

    stored = ingest(args.source, args.store, chunk_rows=args.chunk_rows, overwrite=args.overwrite)
    if args.verify:
        verify_store(stored.path)
    print(f"{stored.path}: X {tuple(stored.X.shape)} in chunks of {stored.X.chunks[0][0]} rows, "
          f"classes {stored.meta.get('class_counts')}")
    return 0


def _cmd_datasets(args) -> int:
    from .datasets import list_available, shared_datasets_dir

    available = list_available()
    print("bundled: " + ", ".join(available["bundled"]))
    shared = available.get("shared") or {}
    if not shared or not any(shared.values()):
        print("shared datasets: not found (set DIMBSVM_SHARED_DATASETS)")
        return 0
    print(f"shared ({shared_datasets_dir()}):")
    for group, names in shared.items():
        print(f"  {group} ({len(names)}): {', '.join(names)}")
    return 0


def _cmd_estimators(args) -> int:
    from .estimators import describe_estimators

    print(json.dumps(describe_estimators(), indent=2))
    return 0


def _configure_logging(verbose: int) -> None:
    level = logging.DEBUG if verbose > 1 else logging.INFO
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logger.setLevel(level if verbose else logging.WARNING)
    # the scheduler and workers log every start and stop at INFO
    logging.getLogger("distributed").setLevel(logging.WARNING if verbose < 2 else logging.INFO)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
