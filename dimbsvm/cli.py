"""The ``dimbsvm`` command line.

Verbs::

    dimbsvm run JOB.yaml [--scheduler ADDRESS | --scheduler-file F] [--out DIR] [--workers N]
    dimbsvm predict MODEL DATA --out PRED.zarr [--scheduler ADDRESS]
    dimbsvm retrain JOB.yaml --registry DIR [--scheduler ADDRESS]
    dimbsvm schedule JOB.yaml --cron "0 3 * * *" --registry DIR
    dimbsvm models DIR
    dimbsvm promote DIR VERSION --reason TEXT
    dimbsvm rollback DIR --reason TEXT
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
import os
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

    cluster = argparse.ArgumentParser(add_help=False)
    group = cluster.add_argument_group("cluster")
    group.add_argument("--scheduler", help="scheduler address, tcp:// or tls:// (default: "
                                           "$DASK_SCHEDULER_ADDRESS, else an embedded LocalCluster)")
    group.add_argument("--scheduler-file", help="file written by `dask scheduler --scheduler-file`")
    group.add_argument("--workers", type=int, help="workers of the embedded cluster (default: one per core)")
    group.add_argument("--tls-ca-file", help="CA certificate (PEM) for a tls:// scheduler")
    group.add_argument("--tls-cert", help="client certificate (PEM)")
    group.add_argument("--tls-key", help="client private key (PEM)")
    group.add_argument("--connect-timeout", type=float, default=20.0,
                       help="seconds to wait for a remote scheduler (default: 20)")
    group.add_argument("--no-progress", action="store_true", help="do not show task progress")

    run = verbs.add_parser("run", parents=[cluster], help="run a job (YAML) on a Dask cluster")
    run.add_argument("job", help="job spec file (YAML)")
    run.add_argument("--out", help="run directory to create (default: runs/<job name>-<timestamp>); "
                                   "an interrupted run with the same --out resumes")
    run.set_defaults(handler=_cmd_run)

    predict = verbs.add_parser("predict", parents=[cluster], help="score data with a model, chunk by chunk")
    predict.add_argument("model", help="model directory (the run directory's model/)")
    predict.add_argument("data", help="Zarr store or data file to score")
    predict.add_argument("--out", required=True, help="Zarr store to create with y_pred and decision")
    predict.add_argument("--chunk-rows", type=int, default=100_000, help="rows per task for file input")
    predict.set_defaults(handler=_cmd_predict)

    retrain = verbs.add_parser("retrain", parents=[cluster],
                               help="train a challenger and promote it if it beats the champion")
    retrain.add_argument("job", help="job spec file (YAML) with a retrain section")
    retrain.add_argument("--registry", required=True, help="model registry directory")
    retrain.set_defaults(handler=_cmd_retrain)

    schedule = verbs.add_parser("schedule", parents=[cluster], help="retrain on a cron schedule (foreground)")
    schedule.add_argument("job", help="job spec file (YAML)")
    schedule.add_argument("--registry", required=True, help="model registry directory")
    schedule.add_argument("--cron", required=True, help='cron expression in UTC, e.g. "0 3 * * *" '
                                                        "(a sixth field gives seconds)")
    schedule.add_argument("--max-runs", type=int, help="stop after this many runs")
    schedule.set_defaults(handler=_cmd_schedule)

    models = verbs.add_parser("models", help="list a registry's versions and its champion")
    models.add_argument("registry")
    models.set_defaults(handler=_cmd_models)

    promote = verbs.add_parser("promote", help="make a version the champion, by hand")
    promote.add_argument("registry")
    promote.add_argument("version")
    promote.add_argument("--reason", required=True)
    promote.set_defaults(handler=_cmd_promote)

    rollback = verbs.add_parser("rollback", help="re-point the champion at the one it replaced")
    rollback.add_argument("registry")
    rollback.add_argument("--reason", required=True)
    rollback.set_defaults(handler=_cmd_rollback)

    ingest = verbs.add_parser("ingest", help="write a data file into a Zarr store")
    ingest.add_argument("source", help="data file (.dat .csv .npz .svm .data .ts) or bundled name")
    ingest.add_argument("store", help="store directory to create")
    ingest.add_argument("--chunk-rows", type=int, help="rows per chunk (default: ~32 MiB per chunk)")
    ingest.add_argument("--overwrite", action="store_true",
                        help="replace a store holding other data, or rebuild a damaged one")
    ingest.add_argument("--verify", action="store_true",
                        help="check every chunk's checksum (of a store being reused, and of the one written)")
    ingest.set_defaults(handler=_cmd_ingest)

    datasets = verbs.add_parser("datasets", help="list bundled and shared datasets")
    datasets.set_defaults(handler=_cmd_datasets)

    estimators = verbs.add_parser("estimators", help="list the estimators jobs can name")
    estimators.set_defaults(handler=_cmd_estimators)
    return parser


def _cmd_run(args) -> int:
    from .jobs import load_job, load_job_data, run_job

    job = load_job(args.job)  # the job and its data are checked before a cluster starts
    job_text = Path(args.job).read_text()
    data = load_job_data(job["data"]["source"], nominal=job["data"].get("nominal", ()))
    n_workers = args.workers or job["execution"].get("n_workers")
    with _client(args, n_workers=n_workers, require_encryption=job["execution"]["require_encryption"]) as client:
        result = run_job(job, client, out=args.out, progress=not args.no_progress, job_text=job_text, data=data)
    print(f"job {job['name']}: {job['estimator']['name']} on {job['data']['source']}")
    if result.reused:
        print(f"resumed: reused {result.reused} of {len(result.folds)} folds from the interrupted run")
    if result.reused_members:
        print(f"resumed: reused {result.reused_members} finished ensemble member(s) from the interrupted run")
    for name, stats in result.summary.items():
        print(f"  {name:<12} {stats['mean']:.4f} ± {stats['std']:.4f}  ({stats['n']} folds)")
    print(f"run directory: {result.run_dir}")
    return 0


def _cmd_predict(args) -> int:
    import dask.array as da

    from .datasets import load
    from .distributed import write_predictions
    from .jobs import load_model
    from .store import open_store

    model, meta = load_model(args.model)  # checked before a cluster starts
    data = Path(args.data)
    if data.is_dir() and (data / "zarr.json").exists():
        X = open_store(data).X
    else:
        X = da.from_array(load(args.data).X, chunks=(args.chunk_rows, -1))
    if X.ndim != 2 or X.shape[1] != meta["n_features"]:
        raise DimbsvmError(f"{args.data} has {X.shape[1:]} features per row; the model was trained on "
                           f"{meta['n_features']}")
    with _client(args):  # dask computes on the active client
        out = write_predictions(model, X, args.out, pos_label=meta["positive_label"],
                                meta={"model": str(args.model), "data": str(args.data),
                                      "data_fingerprint": meta.get("data_fingerprint") or ""})
    print(f"wrote {X.shape[0]} predictions (y_pred, decision) to {out}")
    return 0


def _cmd_retrain(args) -> int:
    from .jobs import load_job, load_job_data
    from .jobs.retrain import retrain

    job = load_job(args.job)
    data = load_job_data(job["data"]["source"], nominal=job["data"].get("nominal", ()))
    with _client(args, require_encryption=job["execution"]["require_encryption"]) as client:
        outcome = retrain(job, client, args.registry, job_text=Path(args.job).read_text(), data=data)
    _print_outcome(outcome)
    return 0


def _print_outcome(outcome) -> None:
    verdict = "promoted" if outcome.promoted else "not promoted"
    print(f"challenger {outcome.version}: {verdict} ({outcome.reason})")
    for name, value in outcome.challenger_metrics.items():
        champ = outcome.champion_metrics.get(name) if outcome.champion_metrics else None
        versus = f"  champion {outcome.champion}: {champ:.4f}" if champ is not None else ""
        print(f"  {name:<10} {value:.4f}{versus}")


def _cmd_schedule(args) -> int:
    from .jobs import load_job
    from .jobs.retrain import retrain
    from .jobs.schedule import parse_cron, run_schedule

    job = load_job(args.job)
    parse_cron(args.cron)  # a bad expression fails before a cluster starts
    job_text = Path(args.job).read_text()
    with _client(args, require_encryption=job["execution"]["require_encryption"]) as client:
        def run_once():
            outcome = retrain(job, client, args.registry, job_text=job_text)
            _print_outcome(outcome)
            sys.stdout.flush()
            return f"{outcome.version} {'promoted' if outcome.promoted else 'not promoted'}: {outcome.reason}"

        runs = run_schedule(run_once, args.cron, max_runs=args.max_runs)
    print(f"schedule stopped after {runs} run(s)")
    return 0


def _cmd_models(args) -> int:
    from .jobs.registry import ModelRegistry

    registry = ModelRegistry(args.registry)
    versions = registry.versions()
    if not versions:
        print(f"{args.registry}: no versions")
        return 0
    for info in versions:
        mark = "*" if info["champion"] else " "
        metrics = " ".join(f"{k}={v:.4f}" for k, v in info.get("holdout_metrics", {}).items())
        print(f"{mark} {info['id']}  {info.get('job', '')}  {metrics}")
    print(f"champion: {registry.champion()}")
    return 0


def _cmd_promote(args) -> int:
    from .jobs.registry import ModelRegistry

    ModelRegistry(args.registry).set_champion(args.version, reason=args.reason)
    print(f"champion: {args.version}")
    return 0


def _cmd_rollback(args) -> int:
    from .jobs.registry import ModelRegistry

    version = ModelRegistry(args.registry).rollback(reason=args.reason)
    print(f"champion: {version}")
    return 0


def _client(args, **kwargs):
    """The cluster the CLI's flags name, or an embedded one; prints the dashboard address."""
    import contextlib

    from .distributed import TLSSettings, cluster_client

    tls = None
    if args.tls_ca_file or args.tls_cert or args.tls_key:
        if not (args.tls_ca_file and args.tls_cert):
            raise DimbsvmError("TLS needs at least --tls-ca-file and --tls-cert")
        tls = TLSSettings(args.tls_ca_file, args.tls_cert, args.tls_key)
    kwargs.setdefault("n_workers", args.workers)
    kwargs.setdefault("timeout", args.connect_timeout)

    @contextlib.contextmanager
    def opened():
        with cluster_client(args.scheduler, scheduler_file=args.scheduler_file, tls=tls, **kwargs) as client:
            print(f"dimbsvm: dashboard {client.dashboard_link}", file=sys.stderr)
            yield client

    return opened()


def _cmd_ingest(args) -> int:
    from .store import ingest

    stored = ingest(args.source, args.store, chunk_rows=args.chunk_rows, overwrite=args.overwrite,
                    verify=args.verify)
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
    # The scheduler and workers log every start and stop at INFO; distributed
    # reads its log level from Dask's config when it is first imported (also
    # in worker processes, which inherit the environment).
    if verbose < 2:
        import dask

        os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")  # for worker processes
        dask.config.set({"logging.distributed": "warning"})  # Dask read the environment at import
        logging.getLogger("distributed").setLevel(logging.WARNING)  # in case it is already imported


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
