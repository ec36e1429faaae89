"""The ``dimbsvm`` command line's parser: verbs, flags, their help, and flag values checked as they are parsed.

Building it imports no job, cluster or numeric code (``dimbsvm -h`` stays
instant); :mod:`dimbsvm.cli` gives each verb its handler.
"""

from __future__ import annotations

import argparse

from ._version import __version__

__all__ = ["CRON_FIELDS", "build_parser", "dashboard_address", "positive_int", "seconds"]

#: ``schedule --cron``'s fields, as croniter reads them (the text of ``dimbsvm.jobs.schedule.CRON_FIELDS``, kept
#: here so that building the parser imports no job code; tests/test_retrain.py checks they agree).
CRON_FIELDS = ("5 fields: MINUTE HOUR DAY-OF-MONTH MONTH DAY-OF-WEEK (\"0 3 * * *\": 03:00 every day); "
                "6 fields: the same, then SECOND, last (not first as in Quartz/Spring: \"* * * * * */20\" is every "
                "20 s, \"*/20 * * * * *\" every second of minutes 0, 20 and 40)")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not allowed: give at least 1")
    return value


# -- flag values checked by argparse (issue 30): refused as one usage line before anything starts --------------


def seconds(text: str) -> float:
    """A positive, finite number of seconds (``nan`` and ``inf`` parse as floats, and would wait forever)."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed: give a finite number of seconds above 0")
    return value


def dashboard_address(text: str) -> str:
    """``[HOST]:PORT`` or ``PORT`` (comma-separated for several), as Dask's dashboard takes it, PORT 0 to 65535.

    Dask parses the value only when the cluster starts, and fails there with
    an error that is not a user's.
    """
    for item in text.split(","):
        host, _, port = item.strip().rpartition(":")
        if not port.isdigit() or int(port) > 65535 or ":" in host or any(c.isspace() for c in host):
            raise argparse.ArgumentTypeError(f"{text!r} is not [HOST]:PORT with PORT a number from 0 to 65535 "
                                             "(e.g. :8787, localhost:0)")
    return text
# -- end of the flag values of issue 30 ------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors as one line like every other error (``-h`` shows the usage)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} -h`)\n")


def _cluster_flags(default: str) -> argparse.ArgumentParser:
    """The cluster flags of a verb; ``default``: where the verb runs without ``--scheduler`` (its help says it)."""
    cluster = _Parser(add_help=False)
    group = cluster.add_argument_group("cluster")
    group.add_argument("--scheduler", help=f"scheduler address, tcp:// or tls:// (default: {default})")
    group.add_argument("--scheduler-file", help="file written by `dask scheduler --scheduler-file`")
    group.add_argument("--cluster", metavar="MODULE:CALLABLE",
                       help="a function (imported from MODULE, the working directory first) that returns a Dask "
                            "cluster or client: dask-jobqueue, Kubernetes, dask-gateway, Coiled, an adaptive "
                            "LocalCluster (examples: deploy/clusters.py); closed at the end; it may start with no "
                            "worker")
    group.add_argument("--workers", type=positive_int, metavar="N",
                       help="workers of the embedded cluster, at least 1 (default: one per core)")
    group.add_argument("--tls-ca-file", help="CA certificate (PEM) for a tls:// scheduler")
    group.add_argument("--tls-cert", help="client certificate (PEM)")
    group.add_argument("--tls-key", help="client private key (PEM)")
    group.add_argument("--worker-timeout", type=seconds, default=60.0, metavar="SECONDS",
                       help="seconds a remote scheduler may take to have its first worker (default: 60); with "
                            "--cluster, counted from when the work is submitted")
    group.add_argument("--scale-from-zero", action="store_true",
                       help="the scheduler's cluster starts workers when it sees work (an autoscaler with minimum "
                            "0, e.g. the Kubernetes operator's DaskAutoscaler): submit without waiting for a "
                            "worker; --worker-timeout then counts from the submission")
    group.add_argument("--connect-timeout", type=seconds, default=20.0,
                       help="seconds to wait for a remote scheduler (default: 20)")
    group.add_argument("--no-progress", action="store_true", help="do not show task progress")
    group.add_argument("--dashboard-address", type=dashboard_address, default=":0", metavar="[HOST]:PORT",
                       help="where an embedded cluster serves the Dask dashboard (default :0, a free port)")
    return cluster


def _json_flag(verb) -> None:
    verb.add_argument("--json", action="store_true",
                      help="one JSON document on stdout, also on failure; the usual lines go to stderr "
                           "(schema: dimbsvm.cli_json.SCHEMAS)")


def build_parser(handlers: dict) -> argparse.ArgumentParser:
    """The ``dimbsvm`` command line: every verb and flag, each verb's ``handler`` taken from ``handlers`` (by verb)."""
    parser = _Parser(prog="dimbsvm", description="SVMs for class-imbalanced data on Dask.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv: debug)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True)

    placed = _cluster_flags("$DASK_SCHEDULER_ADDRESS, else small work in this process, else an embedded "
                            "LocalCluster; the first line printed says which")
    embedded = _cluster_flags("$DASK_SCHEDULER_ADDRESS, else an embedded LocalCluster")
    run = verbs.add_parser("run", parents=[placed],
                           help="run a job (YAML): small ones in this process, others on a Dask cluster")
    run.add_argument("job", help="job spec file (YAML)")
    _json_flag(run)
    _mlflow_flag(run)  # issue 35: experiment tracking
    run.add_argument("--out", help="run directory to create (default: runs/<job name>-<timestamp>); "
                                   "an interrupted run with the same --out resumes")
    _resume_flags(run)
    run.add_argument("--detach", action="store_true",
                     help="run the job's driver on the cluster (--scheduler or --scheduler-file; --out on a "
                          "filesystem the workers share, or an object-store URL) and return at once; follow it "
                          "with dimbsvm status, logs and cancel")
    run.set_defaults(handler=handlers["run"])

    status = verbs.add_parser("status", help="what a run (detached or not) is doing or did: its state, folds saved, "
                                             "an estimate, its summary or why it failed")
    status.add_argument("run", help="the run directory (--out of dimbsvm run)")
    _json_flag(status)
    status.set_defaults(handler=handlers["status"])
    logs = verbs.add_parser("logs", help="a detached run's driver output, every attempt")
    logs.add_argument("run", help="the run directory of a detached run")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing until the run ends")
    logs.set_defaults(handler=handlers["logs"])
    cancel = verbs.add_parser("cancel", help="stop a detached run (its partial run is kept: dimbsvm run resumes it)")
    cancel.add_argument("run", help="the run directory of a detached run")
    cancel.add_argument("--wait", type=float, default=120.0, metavar="SECONDS",
                        help="seconds to wait for the driver to stop (default: 120)")
    cancel.set_defaults(handler=handlers["cancel"])

    validate = verbs.add_parser("validate", parents=[placed],
                                help="run every check of `dimbsvm run` (job, data, folds, paths, scheduler "
                                     "address, TLS files) without starting anything")
    validate.add_argument("job", help="job spec file (YAML)")
    _json_flag(validate)
    validate.add_argument("--out", help="the --out the run will be given")
    validate.add_argument("--registry", help="the --registry a retrain will be given")
    _resume_flags(validate)
    validate.set_defaults(handler=handlers["validate"])

    few_parts = _cluster_flags("$DASK_SCHEDULER_ADDRESS, else at most two partitions in this process, else an "
                               "embedded LocalCluster; the first line printed says which")
    predict = verbs.add_parser("predict", parents=[few_parts],
                               help="score data with a model, partition by partition (a few here, more on a "
                                    "cluster)")
    predict.add_argument("model", help="model directory (a run directory's model/), or REGISTRY@champion, "
                                       "REGISTRY@VERSION (a version id or its unique prefix, e.g. v0003), or a "
                                       "model that retrain registered in MLflow: models:/NAME@ALIAS, "
                                       "models:/NAME/VERSION (see --mlflow)")
    predict.add_argument("data", help="rows to score, labelled or not: Parquet or CSV (a file, a directory, a glob; "
                                      "local or a URL such as s3://bucket/rows/), a Zarr store, or a file the "
                                      "readers know (KEEL .dat, .npz, svmlight). Raw columns are encoded as in "
                                      "training (nominal columns over the training categories) and matched by "
                                      "name; the label and id columns may be there or not; a missing or an "
                                      "extra column is an error. Formats without names (svmlight, .npz without "
                                      "feature_names) are taken by position, checked by count only")
    predict.add_argument("--mlflow", metavar="URI",
                         help="the MLflow tracking and registry URI a models:/ model is read from (default: "
                              "$MLFLOW_TRACKING_URI); needs pip install \"dimbsvm[mlflow]\"")
    predict.add_argument("--out", required=True,
                         help="output to create, local or a URL: .parquet (a directory of part files, _SUCCESS "
                              "written last) or .csv, with the id column (else row), prediction (the class name), "
                              "decision and, for a model with probabilities, proba_<positive class>; or a local "
                              "Zarr store (y_pred codes, decision). An existing output is refused")
    predict.add_argument("--chunk-rows", type=positive_int, default=100_000,
                         help="rows per task for input without partitions (a single CSV file), and rows scored "
                              "at once within a partition")
    predict.set_defaults(handler=handlers["predict"])

    retrain = verbs.add_parser("retrain", parents=[placed],
                               help="train a challenger and promote it if it beats the champion")
    retrain.add_argument("job", help="job spec file (YAML) with a retrain section")
    _json_flag(retrain)
    retrain.add_argument("--registry", required=True, help="model registry directory")
    _mlflow_flag(retrain)
    retrain.add_argument("--force", action="store_true",
                         help="retrain even when the champion, or a challenger the gates kept out against it, was "
                              "fitted on the same data with the same parameters")
    retrain.add_argument("--exit-code", action="store_true",
                         help="exit with the decision: 0 promoted, 4 champion kept (the challenger failed a gate), "
                              "5 unchanged (nothing fitted); without it, 0 for all three. Failures: 1, 2, 3, 130")
    retrain.set_defaults(handler=handlers["retrain"])

    schedule = verbs.add_parser("schedule", parents=[placed], help="retrain on a cron schedule (foreground); "
                                "logs the next run and each outcome at INFO, exits 0 when stopped")
    schedule.add_argument("job", help="job spec file (YAML)")
    schedule.add_argument("--registry", required=True, help="model registry directory")
    schedule.add_argument("--cron", required=True, help=f"cron expression in UTC. {CRON_FIELDS}")
    schedule.add_argument("--max-runs", type=positive_int, help="stop after this many runs")
    _mlflow_flag(schedule)
    schedule.set_defaults(handler=handlers["schedule"])

    models = verbs.add_parser("models", help="list a registry's versions and its champion")
    models.add_argument("registry", help="model registry directory (written by retrain)")
    _json_flag(models)
    models.set_defaults(handler=handlers["models"])

    promote = verbs.add_parser("promote", help="make a version the champion, by hand")
    promote.add_argument("registry", help="model registry directory")
    promote.add_argument("version", help="version id, or its unique prefix (e.g. v0003)")
    promote.add_argument("--reason", required=True, help="why (recorded in the registry's history)")
    promote.set_defaults(handler=handlers["promote"])

    rollback = verbs.add_parser("rollback", help="re-point the champion at the one before it in the promotion "
                                                 "history (a second rollback steps back again)")
    rollback.add_argument("registry", help="model registry directory")
    rollback.add_argument("--reason", required=True, help="why (recorded in the registry's history)")
    rollback.set_defaults(handler=handlers["rollback"])

    ingest = verbs.add_parser("ingest", parents=[_cluster_flags("this process reads the source, in threads")],
                              help="write a data file into a Zarr store (read in this process, or by the "
                                   "workers of the cluster that --scheduler, --scheduler-file or --workers name)")
    ingest.add_argument("source", help="data file (.dat .csv .npz .svm .data .ts), bundled name, or Parquet/CSV/"
                                       "svmlight file, directory, glob or URL (s3:// gs:// az:// https://; .csv.gz "
                                       "too); svmlight is stored sparse")
    ingest.add_argument("store", help="store directory to create")
    ingest.add_argument("--chunk-rows", type=positive_int, help="rows per chunk (default: ~128 chunks of 2 to 32 MiB)")
    ingest.add_argument("--dtype", choices=("float64", "float32"),
                        help="feature precision in the store (default: float64 for files; float32 halves the "
                             "size and keeps about 7 significant digits)")
    ingest.add_argument("--compression", choices=("zstd", "lz4"),
                        help="chunk codec: zstd (default; smaller on data of few distinct values) or lz4 "
                             "(decodes several times faster)")
    ingest.add_argument("--n-features", type=positive_int, metavar="N",
                        help="svmlight source: the feature count (default: the largest column index's); kept "
                             "sparse in the store")
    ingest.add_argument("--overwrite", action="store_true",
                        help="replace a store holding other data, or rebuild a damaged one")
    ingest.add_argument("--verify", action="store_true",
                        help="check every chunk's checksum (of a store being reused, and of the one written)")
    columns = ingest.add_argument_group("columns of a Parquet or CSV source")
    columns.add_argument("--target", metavar="COL",
                         help="the label column (default: the one named class, label or target, any case)")
    columns.add_argument("--id", metavar="COL", help="a row identifier, kept beside the rows (never a feature)")
    columns.add_argument("--drop", metavar="COL", nargs="+", help="columns to leave out")
    columns.add_argument("--nominal", metavar="COL", nargs="+",
                         help="columns to one-hot encode even though they hold numbers")
    columns.add_argument("--max-categories", metavar="N", type=positive_int,
                         help="refuse a nominal column with more distinct values (default: 100)")
    ingest.set_defaults(handler=handlers["ingest"])

    datasets = verbs.add_parser("datasets", help="list bundled and shared datasets")
    datasets.set_defaults(handler=handlers["datasets"])

    bench = verbs.add_parser("bench", parents=[embedded],
                             help="run a quality benchmark suite against the peers (needs dimbsvm[bench])")
    bench.add_argument("suite", nargs="?", help="suite file (YAML), e.g. benchmarks/smoke.yaml")
    bench.add_argument("--out", help="results directory (default: bench-results/<suite name>); an earlier "
                                     "results directory there is replaced")
    bench.add_argument("--rewrite", metavar="RESULTS_DIR",
                       help="re-analyse an existing results directory from its folds.csv instead of running")
    bench.set_defaults(handler=handlers["bench"])

    estimators = verbs.add_parser("estimators", help="list the estimators jobs can name, with their parameters")
    estimators.add_argument("--json", action="store_true", help="machine-readable output")
    estimators.set_defaults(handler=handlers["estimators"])

    features = verbs.add_parser("features", help="list the feature stages jobs can name, with their parameters")
    features.add_argument("--json", action="store_true", help="machine-readable output")
    features.set_defaults(handler=handlers["features"])
    return parser


def _mlflow_flag(parser) -> None:
    parser.add_argument("--mlflow", metavar="URI",
                        help="log to this MLflow tracking URI (e.g. sqlite:///mlflow.db), overriding the job's "
                             "tracking.mlflow; needs pip install \"dimbsvm[mlflow]\"")


def _resume_flags(parser) -> None:
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--resume", action="store_true",
                       help="resume an interrupted run (with --out: its run; without: the newest of this job and "
                            "data under runs/), and fail if there is none; the default resumes when it can")
    which.add_argument("--fresh", action="store_true",
                       help="start over: discard the interrupted run of --out, or use a new runs/ directory")
