"""The ``dimbsvm`` command line.

Verbs::

    dimbsvm run JOB.yaml [--scheduler ADDRESS | --scheduler-file F] [--out DIR] [--workers N] [--resume | --fresh]
                [--mlflow URI]
    dimbsvm validate JOB.yaml [--out DIR] [--registry DIR] [--scheduler ADDRESS]
    dimbsvm predict MODEL|REGISTRY@champion|REGISTRY@VERSION DATA --out PRED.parquet|PRED.csv|PRED.zarr
                    [--chunk-rows N] [--scheduler ADDRESS]
    dimbsvm retrain JOB.yaml --registry DIR [--force] [--exit-code] [--scheduler ADDRESS] [--mlflow URI]
    dimbsvm schedule JOB.yaml --cron "0 3 * * *" --registry DIR [--max-runs N] [--mlflow URI]
    dimbsvm models DIR
    dimbsvm promote DIR VERSION --reason TEXT
    dimbsvm rollback DIR --reason TEXT
    dimbsvm ingest SOURCE STORE [--chunk-rows N] [--dtype float64|float32] [--compression zstd|lz4]
                   [--target COL] [--id COL] [--drop COL ...] [--nominal COL ...] [--max-categories N]
                   [--overwrite] [--verify]
    dimbsvm datasets
    dimbsvm bench SUITE.yaml [--out DIR] [--scheduler ADDRESS] | dimbsvm bench --rewrite RESULTS_DIR
    dimbsvm estimators [--json]
    dimbsvm features [--json]
    dimbsvm --version

Errors a user can fix (bad data, bad job, bad paths, a damaged store, an
unusable scheduler address, a missing optional package, an estimator's
``ValueError`` for a parameter combination it refuses) print one line
``dimbsvm: error: ...`` on stderr and exit with status 2; ``-v`` adds the
traceback. Everything ``run`` can check is checked before a cluster starts
(``validate`` runs exactly those checks). An interrupted ``run`` (SIGINT or
SIGTERM) exits with status 130 and one line saying what was saved and the
command that resumes. Before any work a remote cluster must have a worker
within ``--worker-timeout`` seconds, and every worker the client's dimbsvm
and compatible packages (a one-line error naming the worker, status 2). A
scheduler lost in the middle of the work ends with status 3 and one line
naming it (for ``run``: what was saved, and the command that resumes). An
unexpected error (a bug) prints one line too, and exits with status 1.

Exit status of ``retrain``: 0 when the run did its work, whatever it decided
(cron, systemd, Kubernetes and SLURM count any other status as a failure,
and a Kubernetes Job would retrain again); its first line of output says
which. With ``--exit-code`` the decision is in the status too, for CI
scripts that branch on it: 0 the challenger was promoted (or was the first
model), 4 the champion was kept (the challenger failed a gate, or another
process promoted a model meanwhile), 5 unchanged (the champion was fitted on
the same data with the same parameters: nothing was fitted). Failures keep
their statuses (1, 2, 3, 130) with or without it.

With tracking (``tracking.mlflow`` in the job, or ``--mlflow URI``), ``run``
and ``retrain`` write their run directory or registry version first and then
log to MLflow (:mod:`dimbsvm.jobs.tracking`); an MLflow error afterwards is one
WARNING line and does not change the exit status, since the results are on
disk. Without the mlflow package, asking for tracking is an error (status 2)
before a cluster starts.

``schedule`` logs "next run at ..." and each run's outcome at INFO on
stderr without ``-v``; WARNING only for what needs a look (due runs skipped
because a run took longer than the interval, runs due less than a minute
apart), ERROR for a failed run, after which the schedule goes on. It exits 0
when stopped (SIGTERM, SIGINT, ``--max-runs``). Its ``--cron`` is croniter's:
five fields ``MINUTE HOUR DAY-OF-MONTH MONTH DAY-OF-WEEK``; a sixth field is
SECOND and comes last (``* * * * * */20``: every 20 s), not first as in
Quartz or Spring (``*/20 * * * * *`` is every second of minutes 0, 20, 40).
"""


from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import signal
import sys
import threading
import traceback
from pathlib import Path

from ._version import __version__
from .cli_listings import cmd_datasets, cmd_estimators, cmd_features
from .cli_registry import cmd_models, cmd_promote, cmd_rollback, open_registry
from .exceptions import DimbsvmError

logger = logging.getLogger("dimbsvm")

#: ``retrain --exit-code`` statuses of the routine outcomes (failures: 1 bug, 2 user error, 3 scheduler lost,
#: 130 interrupted). Above 3 so that no failure status is reused; 0 is the one that changes the champion.
RETRAIN_EXIT = {"promoted": 0, "kept": 4, "unchanged": 5}
#: ``schedule --cron``'s fields, as croniter reads them (the text of ``dimbsvm.jobs.schedule.CRON_FIELDS``, kept
#: here so that building the parser imports no job code; tests/test_retrain.py checks they agree).
_CRON_FIELDS = ("5 fields: MINUTE HOUR DAY-OF-MONTH MONTH DAY-OF-WEEK (\"0 3 * * *\": 03:00 every day); "
                "6 fields: the same, then SECOND, last (not first as in Quartz/Spring: \"* * * * * */20\" is every "
                "20 s, \"*/20 * * * * *\" every second of minutes 0, 20 and 40)")


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by SIGINT/SIGTERM; the message says what was saved and how to resume."""


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C so that everything unwinds in order."""


#: Arguments that name a local (or shared-filesystem) path, with what they are and the verbs that take a URL too.
_LOCAL_ONLY = {"out": ("output directories and files", {"run", "validate", "predict"}),
               "registry": ("model registries", set()),
               "model": ("model directories", {"predict"})}


def _refuse_urls_for_local_paths(args) -> None:
    """One line for a URL where only a local path works (``Path("s3://b/x")`` would be the directory ``s3:/b/x``)."""
    from .store.location import is_url

    for name, (what, url_verbs) in _LOCAL_ONLY.items():
        value = getattr(args, name, None)
        if args.verb not in url_verbs and isinstance(value, str) and is_url(value.split("@", 1)[0]):
            flag = name if name == "model" or args.verb in ("models", "promote", "rollback") else f"--{name}"
            raise DimbsvmError(f"{flag} {value}: {what} are written on a local or shared filesystem, not at a URL; "
                               "object storage holds data stores (dimbsvm ingest SOURCE s3://BUCKET/NAME.zarr, "
                               "then data.source: s3://BUCKET/NAME.zarr)")


def main(argv=None) -> int:
    """Entry point of the ``dimbsvm`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    args = parser.parse_args(argv)
    args.argv = argv
    _configure_logging(args.verbose)
    restore = _terminate_as_interrupt() if args.verb != "schedule" else None  # schedule stops on its own
    try:
        _refuse_urls_for_local_paths(args)
        return args.handler(args)
    except RunInterrupted as exc:
        print(f"dimbsvm: {_one_line(exc)}", file=sys.stderr)
        return 130
    except KeyboardInterrupt as exc:
        what = "terminated (SIGTERM)" if isinstance(exc, _Terminated) else "interrupted"
        print(f"dimbsvm: {what}", file=sys.stderr)
        return 130
    except (DimbsvmError, OSError, ValueError) as exc:
        # ValueError: scikit-learn's (and numpy's) way of rejecting an input or a parameter combination,
        # e.g. raised inside a task; it reaches here as itself
        if args.verbose:
            traceback.print_exc()
        print(f"dimbsvm: error: {_describe(exc)}", file=sys.stderr)
        return getattr(exc, "exit_status", 2)  # 3: the scheduler was lost (SchedulerLostError)
    except Exception as exc:  # noqa: BLE001 - anything else is a bug: still one line, traceback with -v
        if args.verbose:
            traceback.print_exc()
        if _from_object_storage(exc):
            print(f"dimbsvm: error: object storage refused the request: {_one_line(exc)} (check the credentials "
                  "and endpoint: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, ...)", file=sys.stderr)
            return 2
        print(f"dimbsvm: error: unexpected {type(exc).__name__}: {_one_line(exc)} (this is probably a bug in "
              "dimbsvm; rerun with -v for the traceback and report it)", file=sys.stderr)
        return 1
    finally:
        if restore is not None:
            restore()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _from_object_storage(exc: BaseException) -> bool:
    """Whether an error was raised by an object-storage client (credentials, endpoint, permissions)."""
    roots = ("botocore", "aiobotocore", "google.auth", "google.api_core", "azure.core")
    return any(cls.__module__.startswith(roots) for cls in type(exc).__mro__)


def _describe(exc: BaseException) -> str:
    """One line for a user-caused error; OSErrors name the path and the reason."""
    if isinstance(exc, OSError) and not isinstance(exc, DimbsvmError) and exc.strerror:
        paths = " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p is not None)
        return f"{paths}: {exc.strerror}" if paths else exc.strerror
    return _one_line(exc)


def _terminate_as_interrupt():
    """Make SIGTERM unwind like Ctrl-C (cluster shut down, message printed); return the undo."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def on_term(signum, frame):
        raise _Terminated()

    previous = signal.signal(signal.SIGTERM, on_term)
    return lambda: signal.signal(signal.SIGTERM, previous)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not allowed: give at least 1")
    return value


# -- flag values checked by argparse (issue 30): refused as one usage line before anything starts --------------


def _seconds(text: str) -> float:
    """A positive, finite number of seconds (``nan`` and ``inf`` parse as floats, and would wait forever)."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed: give a finite number of seconds above 0")
    return value


def _dashboard_address(text: str) -> str:
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


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dimbsvm", description="SVMs for class-imbalanced data on Dask.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv: debug)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True)

    cluster = _Parser(add_help=False)
    group = cluster.add_argument_group("cluster")
    group.add_argument("--scheduler", help="scheduler address, tcp:// or tls:// (default: "
                                           "$DASK_SCHEDULER_ADDRESS, else an embedded LocalCluster)")
    group.add_argument("--scheduler-file", help="file written by `dask scheduler --scheduler-file`")
    group.add_argument("--workers", type=_positive_int, metavar="N",
                       help="workers of the embedded cluster, at least 1 (default: one per core)")
    group.add_argument("--tls-ca-file", help="CA certificate (PEM) for a tls:// scheduler")
    group.add_argument("--tls-cert", help="client certificate (PEM)")
    group.add_argument("--tls-key", help="client private key (PEM)")
    group.add_argument("--worker-timeout", type=_seconds, default=60.0, metavar="SECONDS",
                       help="seconds a remote scheduler may take to have its first worker (default: 60)")
    group.add_argument("--connect-timeout", type=_seconds, default=20.0,
                       help="seconds to wait for a remote scheduler (default: 20)")
    group.add_argument("--no-progress", action="store_true", help="do not show task progress")
    group.add_argument("--dashboard-address", type=_dashboard_address, default=":0", metavar="[HOST]:PORT",
                       help="where an embedded cluster serves the Dask dashboard (default :0, a free port)")

    run = verbs.add_parser("run", parents=[cluster], help="run a job (YAML) on a Dask cluster")
    run.add_argument("job", help="job spec file (YAML)")
    _mlflow_flag(run)  # issue 35: experiment tracking
    run.add_argument("--out", help="run directory to create (default: runs/<job name>-<timestamp>); "
                                   "an interrupted run with the same --out resumes")
    _resume_flags(run)
    run.set_defaults(handler=_cmd_run)

    validate = verbs.add_parser("validate", parents=[cluster],
                                help="run every check of `dimbsvm run` (job, data, folds, paths, scheduler "
                                     "address, TLS files) without starting anything")
    validate.add_argument("job", help="job spec file (YAML)")
    validate.add_argument("--out", help="the --out the run will be given")
    validate.add_argument("--registry", help="the --registry a retrain will be given")
    _resume_flags(validate)
    validate.set_defaults(handler=_cmd_validate)

    predict = verbs.add_parser("predict", parents=[cluster],
                               help="score data with a model, partition by partition on the cluster")
    predict.add_argument("model", help="model directory (a run directory's model/), or REGISTRY@champion, "
                                       "REGISTRY@VERSION (a version id or its unique prefix, e.g. v0003)")
    predict.add_argument("data", help="rows to score, labelled or not: Parquet or CSV (a file, a directory, a glob; "
                                      "local or a URL such as s3://bucket/rows/), a Zarr store, or a file the "
                                      "readers know (KEEL .dat, .npz, svmlight). Raw columns are encoded as in "
                                      "training (nominal columns over the training categories) and matched by "
                                      "name; the label and id columns may be there or not; a missing or an "
                                      "extra column is an error. Formats without names (svmlight, .npz without "
                                      "feature_names) are taken by position, checked by count only")
    predict.add_argument("--out", required=True,
                         help="output to create, local or a URL: .parquet (a directory of part files, _SUCCESS "
                              "written last) or .csv, with the id column (else row), prediction (the class name), "
                              "decision and, for a model with probabilities, proba_<positive class>; or a local "
                              "Zarr store (y_pred codes, decision). An existing output is refused")
    predict.add_argument("--chunk-rows", type=_positive_int, default=100_000,
                         help="rows per task for input without partitions (a single CSV file), and rows scored "
                              "at once within a partition")
    predict.set_defaults(handler=_cmd_predict)

    retrain = verbs.add_parser("retrain", parents=[cluster],
                               help="train a challenger and promote it if it beats the champion")
    retrain.add_argument("job", help="job spec file (YAML) with a retrain section")
    retrain.add_argument("--registry", required=True, help="model registry directory")
    _mlflow_flag(retrain)
    retrain.add_argument("--force", action="store_true",
                         help="retrain even when the champion was fitted on the same data with the same parameters")
    retrain.add_argument("--exit-code", action="store_true",
                         help="exit with the decision: 0 promoted, 4 champion kept (the challenger failed a gate), "
                              "5 unchanged (nothing fitted); without it, 0 for all three. Failures: 1, 2, 3, 130")
    retrain.set_defaults(handler=_cmd_retrain)

    schedule = verbs.add_parser("schedule", parents=[cluster], help="retrain on a cron schedule (foreground); "
                                "logs the next run and each outcome at INFO, exits 0 when stopped")
    schedule.add_argument("job", help="job spec file (YAML)")
    schedule.add_argument("--registry", required=True, help="model registry directory")
    schedule.add_argument("--cron", required=True, help=f"cron expression in UTC. {_CRON_FIELDS}")
    schedule.add_argument("--max-runs", type=_positive_int, help="stop after this many runs")
    _mlflow_flag(schedule)
    schedule.set_defaults(handler=_cmd_schedule)

    models = verbs.add_parser("models", help="list a registry's versions and its champion")
    models.add_argument("registry", help="model registry directory (written by retrain)")
    models.set_defaults(handler=cmd_models)

    promote = verbs.add_parser("promote", help="make a version the champion, by hand")
    promote.add_argument("registry", help="model registry directory")
    promote.add_argument("version", help="version id, or its unique prefix (e.g. v0003)")
    promote.add_argument("--reason", required=True, help="why (recorded in the registry's history)")
    promote.set_defaults(handler=cmd_promote)

    rollback = verbs.add_parser("rollback", help="re-point the champion at the one before it in the promotion "
                                                 "history (a second rollback steps back again)")
    rollback.add_argument("registry", help="model registry directory")
    rollback.add_argument("--reason", required=True, help="why (recorded in the registry's history)")
    rollback.set_defaults(handler=cmd_rollback)

    ingest = verbs.add_parser("ingest", parents=[cluster],
                              help="write a data file into a Zarr store (read in this process, or by the "
                                   "workers of the cluster that --scheduler, --scheduler-file or --workers name)")
    ingest.add_argument("source", help="data file (.dat .csv .npz .svm .data .ts), bundled name, or Parquet/CSV "
                                       "file, directory, glob or URL (s3:// gs:// az:// https://; .csv.gz too)")
    ingest.add_argument("store", help="store directory to create")
    ingest.add_argument("--chunk-rows", type=_positive_int, help="rows per chunk (default: ~128 chunks of 2 to 32 MiB)")
    ingest.add_argument("--dtype", choices=("float64", "float32"),
                        help="feature precision in the store (default: float64 for files; float32 halves the "
                             "size and keeps about 7 significant digits)")
    ingest.add_argument("--compression", choices=("zstd", "lz4"),
                        help="chunk codec: zstd (default; smaller on data of few distinct values) or lz4 "
                             "(decodes several times faster)")
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
    columns.add_argument("--max-categories", metavar="N", type=_positive_int,
                         help="refuse a nominal column with more distinct values (default: 100)")
    ingest.set_defaults(handler=_cmd_ingest)

    datasets = verbs.add_parser("datasets", help="list bundled and shared datasets")
    datasets.set_defaults(handler=cmd_datasets)

    bench = verbs.add_parser("bench", parents=[cluster],
                             help="run a quality benchmark suite against the peers (needs dimbsvm[bench])")
    bench.add_argument("suite", nargs="?", help="suite file (YAML), e.g. benchmarks/smoke.yaml")
    bench.add_argument("--out", help="results directory (default: bench-results/<suite name>); an earlier "
                                     "results directory there is replaced")
    bench.add_argument("--rewrite", metavar="RESULTS_DIR",
                       help="re-analyse an existing results directory from its folds.csv instead of running")
    bench.set_defaults(handler=_cmd_bench)

    estimators = verbs.add_parser("estimators", help="list the estimators jobs can name, with their parameters")
    estimators.add_argument("--json", action="store_true", help="machine-readable output")
    estimators.set_defaults(handler=cmd_estimators)

    features = verbs.add_parser("features", help="list the feature stages jobs can name, with their parameters")
    features.add_argument("--json", action="store_true", help="machine-readable output")
    features.set_defaults(handler=cmd_features)
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


def _search_lines(search: dict) -> str:
    """The search's outcome in a few lines: what the folds chose, and the final model's parameters."""
    folds = [c for c in search["chosen"] if c["fold"] != "final"]
    counts = {}
    for choice in folds:
        key = json.dumps(choice["params"], sort_keys=True)
        counts[key] = counts.get(key, 0) + 1
    lines = [f"search: {search['n_candidates']} candidates by {search['scoring']} on "
             f"{search['space']['cv']} inner folds; the folds chose"]
    lines += [f"  {params}  in {n} of {len(folds)} folds" for params, n in sorted(counts.items(), key=lambda kv: -kv[1])]
    final = next((c for c in search["chosen"] if c["fold"] == "final"), None)
    if final is not None:
        lines.append(f"  final model: {json.dumps(final['params'], sort_keys=True)}")
    return "\n".join(lines)


def _cmd_run(args) -> int:
    from .distributed import SchedulerLostError
    from .jobs.checks import check_job
    from .jobs.runner import run_checked

    tls = _tls(args)
    remote = _remote_out(args.out)  # a URL: written in a local staging directory, published when complete
    if remote is not None and remote.finished:
        from .jobs.remote_run_dir import publish_run_dir

        print(f"dimbsvm: the run finished in {remote.staging}; publishing it to {remote.url}", file=sys.stderr)
        print(f"run directory: {publish_run_dir(remote.staging, remote.url)}")
        return 0
    # everything that can be checked is checked before a cluster starts
    checked = check_job(args.job, out=args.out if remote is None else remote.staging, resume=args.resume,
                        fresh=args.fresh, scheduler=args.scheduler, scheduler_file=args.scheduler_file, tls=tls)
    checked = _tracked(checked, args.mlflow)  # issue 35: tracking (the mlflow package checked here)
    job, plan = checked.job, checked.run
    total = job.cv.n_folds
    if plan.resuming:
        print(f"dimbsvm: resuming the interrupted run in {plan.partial} ({plan.saved_folds} of {total} folds saved)",
              file=sys.stderr)
    n_workers = args.workers or job.execution.n_workers
    placement = _placement(args, job, checked.data)
    try:
        with _client(args, tls=tls, n_workers=n_workers, require_encryption=job.execution.require_encryption,
                     placement=placement) as client:
            result = run_checked(checked, client, progress=not args.no_progress)
    except KeyboardInterrupt as exc:
        raise RunInterrupted(_interrupted(args, plan, total, exc, remote=remote)) from None
    except SchedulerLostError as exc:
        raise SchedulerLostError(_interrupted(args, plan, total, exc, how=_one_line(exc), remote=remote)) from exc
    print(f"job {job.name}: {job.estimator.name} on {job.data.source}")
    if result.reused:
        print(f"resumed: reused {result.reused} of {len(result.folds)} folds from the interrupted run")
    if result.reused_members:
        print(f"resumed: reused {result.reused_members} finished ensemble member(s) from the interrupted run")
    width = max((len(name) for name in result.summary), default=0)
    for name, stats in result.summary.items():
        print(f"  {name:<{width}}  {stats['mean']:.4f} ± {stats['std']:.4f}  ({stats['n']} folds)")
    if result.search:
        print(_search_lines(result.search))
    # tracked after the run directory is written (a failure is a warning), before a URL's staging copy goes
    _track_run(checked, result)
    where = result.run_dir
    if remote is not None:
        from .jobs.remote_run_dir import publish_run_dir

        where = publish_run_dir(result.run_dir, remote.url)
    print(f"run directory: {where}")
    print(f"report: {where}/report.html")
    return 0


def _remote_out(out):
    """The staging plan of a ``--out`` URL (checked: nothing but an unfinished run of dimbsvm's there), or None."""
    from .store.location import is_url

    if out is None or not is_url(out):
        return None
    from .jobs.remote_run_dir import plan_remote_out

    remote = plan_remote_out(out)
    remote.staging.parent.mkdir(parents=True, exist_ok=True)
    return remote


def _tracked(checked, uri):
    """``checked`` with ``--mlflow`` applied; a job that asks for tracking without mlflow installed fails here."""
    import dataclasses

    from .jobs.tracking import with_tracking

    job = with_tracking(checked.job, uri)
    return checked if job is checked.job else dataclasses.replace(checked, job=job)


def _track_run(checked, result) -> None:
    if checked.job.tracking is not None:
        from .jobs.tracking import track_run

        run_id = track_run(checked.job, result.run_dir)
        if run_id:
            print(f"mlflow: run {run_id} at {checked.job.tracking.mlflow}")


def _interrupted(args, plan, total: int, exc: BaseException, how: str | None = None, remote=None) -> str:
    """The one line an interrupted run ends with: what was saved, and the command that resumes."""
    from .jobs.run_dir import saved_progress

    how = how or ("terminated (SIGTERM)" if isinstance(exc, _Terminated) else "interrupted")
    if plan.run_dir.exists():  # interrupted after the last step: the run is complete
        if remote is not None:
            return (f"{how} after the run finished in {plan.run_dir}, before it was published to {remote.url}; "
                    f"publish it with: {_resume_command(args, remote.url)}")
        return f"{how} after the run finished; its run directory is {plan.run_dir}"
    folds, members = saved_progress(plan.partial)
    saved = f"{folds} of {total} folds"
    if members:
        saved += f" and {members} ensemble member(s)"
    where = f"saved in {plan.partial}" if plan.partial.exists() else "saved (nothing was written yet)"
    out = plan.run_dir if remote is None else remote.url  # a URL's run resumes from its staging directory
    return f"{how}: {saved} {where}; resume with: {_resume_command(args, out)}"


def _resume_command(args, run_dir) -> str:
    """The command line of this run with ``--out RUN_DIR`` (and without ``--fresh``)."""
    argv, skip = [], False
    for arg in args.argv:
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
        argv.append(arg)
    return shlex.join(["dimbsvm", *argv, "--out", str(run_dir)])


def _cmd_validate(args) -> int:
    from .jobs.checks import check_job, describe

    run_dir = args.registry is None or args.out is not None  # --registry alone: a retrain, no run directory
    remote = _remote_out(args.out)
    checked = check_job(args.job, run_dir=run_dir, out=args.out if remote is None else remote.staging,
                        resume=args.resume, fresh=False,
                        registry=args.registry, claim=False,
                        scheduler=args.scheduler, scheduler_file=args.scheduler_file, tls=_tls(args))
    if args.fresh and checked.run is not None and checked.run.resuming:
        checked.run.resuming = False  # --fresh would start over (validate discards nothing)
    placement = _placement(args, checked.job, checked.data)
    print(f"{args.job}: ok, every check before a run passed")
    for line in describe(checked, placement=placement):
        print(f"  {line}")
    return 0


def _cmd_predict(args) -> int:
    from .distributed import check_cluster_options
    from .jobs.run_dir import check_writable
    from .predict import DimbsvmModel, check_output, plan_prediction
    from .store.location import is_url

    tls = _tls(args)
    check_cluster_options(args.scheduler, scheduler_file=args.scheduler_file, tls=tls)
    check_output(args.out)  # nothing dimbsvm did not write is replaced
    if not is_url(args.out):
        check_writable(Path(args.out), "predict --out")
    model = DimbsvmModel(*_load_prediction_model(args.model))  # checked before a cluster starts
    # the input opened and its columns checked before a cluster starts too; no row is read here
    planned = plan_prediction(model, args.data, args.out, chunk_rows=args.chunk_rows)
    with _client(args, tls=tls):  # the partitions are scored and written on the active client
        written = planned.run()
    print(f"wrote {written.n_rows} predictions ({', '.join(written.columns)}) to {written.out}")
    return 0


def _load_prediction_model(ref: str):
    """``(model, meta)`` of a model directory, or of ``REGISTRY@champion`` / ``REGISTRY@VERSION``.

    A path that exists is a model directory even if its name holds an ``@``.
    """
    from .jobs import load_artifact

    if "@" in ref and not Path(ref).exists():
        root, _, version = ref.rpartition("@")
        registry = open_registry(root)
        version = registry.resolve(version)
        logger.info("predicting with %s version %s", root, version)
        return registry.load(version)
    return load_artifact(ref)


def _cmd_retrain(args) -> int:
    from .jobs.checks import check_job
    from .jobs.retrain import retrain_checked

    tls = _tls(args)
    checked = check_job(args.job, run_dir=False, registry=args.registry, scheduler=args.scheduler,
                        scheduler_file=args.scheduler_file, tls=tls)
    checked = _tracked(checked, args.mlflow)
    job = checked.job
    holdout = job.retrain.holdout
    # the challenger is one fit on the rows left after the holdout (all of them with a separate holdout source)
    training_rows = [len(checked.data.y) * (1 if holdout.source else 1 - holdout.fraction)]
    placement = _placement(args, job, checked.data, training_rows=training_rows)
    with _client(args, tls=tls, require_encryption=job.execution.require_encryption,
                 placement=placement) as client:
        outcome = retrain_checked(checked, client, args.registry, force=args.force)
    _print_outcome(outcome)
    return RETRAIN_EXIT[outcome.action] if args.exit_code else 0


def _print_outcome(outcome) -> None:
    print(outcome.summary())
    if outcome.search_params is not None:
        print(f"  parameters chosen by the search: {json.dumps(outcome.search_params, sort_keys=True)}")
    for name, value in outcome.challenger_metrics.items():
        if outcome.unchanged:  # no challenger: these are the champion's recorded holdout metrics
            print(f"  {name:<10} champion {outcome.version}: {value:.4f}")
            continue
        champ = outcome.champion_metrics.get(name) if outcome.champion_metrics else None
        versus = f"  champion {outcome.champion}: {champ:.4f}" if champ is not None else ""
        print(f"  {name:<10} challenger {outcome.version}: {value:.4f}{versus}")


def _cmd_schedule(args) -> int:
    from .jobs.retrain import retrain
    from .jobs.schedule import parse_cron, run_schedule

    from .distributed import check_workers
    from .jobs.checks import check_job

    parse_cron(args.cron)  # a bad expression, or one that never matches, fails before a cluster starts
    if not args.verbose:  # "next run at" and the outcomes are the schedule's routine output (container logs)
        logging.getLogger("dimbsvm.jobs.schedule").setLevel(logging.INFO)
    tls = _tls(args)
    # the checks of `retrain` (issue 30: job file, cluster options, registry, data, holdout), once before the
    # cluster starts; each run then reads the data again, as it is by then
    checked = check_job(args.job, run_dir=False, registry=args.registry, scheduler=args.scheduler,
                        scheduler_file=args.scheduler_file, tls=tls)
    checked = _tracked(checked, args.mlflow)
    job, job_text = checked.job, checked.job_text
    # workers are checked before each run (they may come, go or be upgraded between runs), not at start
    with _client(args, tls=tls, require_encryption=job.execution.require_encryption,
                 worker_timeout=None) as client:
        def run_once():
            check_workers(client, timeout=args.worker_timeout)
            outcome = retrain(job, client, args.registry, job_text=job_text)
            _print_outcome(outcome)
            sys.stdout.flush()
            return outcome.summary()

        runs = run_schedule(run_once, args.cron, max_runs=args.max_runs)
    print(f"schedule stopped after {runs} run(s)")
    return 0


def _named_counts(meta: dict) -> dict:
    """A store's class counts keyed by class name (its meta keys them by code); codes where no name is known.

    Examples
    --------
    >>> _named_counts({"class_counts": {"0": 259, "1": 77}, "class_map": {"negative": 0, "positive": 1}})
    {'negative': 259, 'positive': 77}
    """
    names = {str(code): name for name, code in (meta.get("class_map") or {}).items()}
    return {names.get(str(code), code): count for code, count in (meta.get("class_counts") or {}).items()}


def _tls(args):
    """The TLS files the flags name, or None (their existence is checked with the other cluster options)."""
    from .distributed import TLSSettings

    if not (args.tls_ca_file or args.tls_cert or args.tls_key):
        return None
    if not (args.tls_ca_file and args.tls_cert):
        raise DimbsvmError("TLS needs at least --tls-ca-file and --tls-cert")
    return TLSSettings(args.tls_ca_file, args.tls_cert, args.tls_key)


def _placement(args, job, data, *, training_rows=None):
    """Where a job runs (:func:`dimbsvm.jobs.placement.place_job`) given the command line's cluster flags."""
    import math

    from .jobs.placement import place_job

    return place_job(job, data.y, n_features=math.prod(data.X.shape[1:]), scheduler=args.scheduler,
                     scheduler_file=args.scheduler_file, workers=args.workers, training_rows=training_rows)


def _client(args, *, tls=None, placement=None, **kwargs):
    """The cluster the CLI's flags name, or an embedded one; prints the dashboard address (stdout).

    With a ``placement`` decided by the job's size, its line is printed
    first; one that runs in this process yields ``None`` (no cluster).
    """
    import contextlib

    if placement is not None and placement.work is not None:
        print(placement.reason, flush=True)
    if placement is not None and placement.in_process:
        return contextlib.nullcontext(None)

    from .distributed import cluster_client

    kwargs.setdefault("n_workers", args.workers)
    kwargs.setdefault("timeout", args.connect_timeout)
    kwargs.setdefault("worker_timeout", args.worker_timeout)
    if not (args.scheduler or args.scheduler_file):
        kwargs.setdefault("dashboard_address", args.dashboard_address)

    @contextlib.contextmanager
    def opened():
        with cluster_client(args.scheduler, scheduler_file=args.scheduler_file, tls=tls, **kwargs) as client:
            print(f"dashboard: {client.dashboard_link}", flush=True)
            yield client

    return opened()


def _cmd_ingest(args) -> int:
    import contextlib

    from .distributed import check_cluster_options
    from .jobs.run_dir import check_writable
    from .store import ingest
    from .store.location import is_url
    from .store.placement import check_target, check_url_target

    if is_url(args.store):
        check_url_target(args.store)  # before the source is read: nothing but a dimbsvm store is written over
    else:
        store = Path(args.store)
        check_target(store)  # before the source is read: only a store of dimbsvm's is ever replaced
        check_writable(store.parent if store.exists() else store, "store")  # the new store is staged beside it
    tls = _tls(args)
    check_cluster_options(args.scheduler, scheduler_file=args.scheduler_file, tls=tls)
    on_cluster = bool(args.scheduler or args.scheduler_file or args.workers)
    # without a cluster named, this process reads the source (in threads): no cluster start for small files
    with (_client(args, tls=tls) if on_cluster else contextlib.nullcontext()):
        stored = ingest(_ingest_source(args), args.store, chunk_rows=args.chunk_rows, overwrite=args.overwrite,
                        verify=args.verify, dtype=args.dtype, compression=args.compression)
    meta = stored.meta
    print(f"{stored.path}: X {tuple(stored.X.shape)} {stored.X.dtype} in chunks of {stored.X.chunks[0][0]} rows "
          f"({meta.get('compression', 'zstd')}), classes {_named_counts(meta)}")
    if meta.get("target_guessed"):
        print(f"label column {meta['target']!r}: found by its name (--target COL chooses another)")
    if meta.get("id_column"):
        print(f"ids: column {meta['id_column']!r} ({meta.get('id_dtype')}), kept beside the rows as the array 'ids'")
    return 0


def _ingest_source(args):
    """The source as given, or with the columns chosen on the command line (Parquet, CSV, URLs)."""
    from .store.sources import with_columns

    return with_columns(args.source, target=args.target, id=args.id, drop=args.drop, nominal=args.nominal,
                        max_categories=args.max_categories)


def _cmd_bench(args) -> int:
    from .bench.quality import bench, check_bench_extra

    if (args.suite is None) == (args.rewrite is None):
        raise DimbsvmError("bench needs a suite file, or --rewrite RESULTS_DIR (not both)")
    check_bench_extra()
    from .bench.report import rewrite_results, summary_lines

    if args.rewrite:
        summary, out = rewrite_results(args.rewrite), Path(args.rewrite)
    else:
        tls = _tls(args)
        summary, out = bench(args.suite, out=args.out, scheduler=args.scheduler, scheduler_file=args.scheduler_file,
                             n_workers=args.workers, tls=tls, dashboard_address=args.dashboard_address,
                             timeout=args.connect_timeout, progress=not args.no_progress,
                             command="dimbsvm " + shlex.join(args.argv))
    for line in summary_lines(summary):
        print(line)
    print(f"results: {out}  ({summary['run']['n_tasks']} fold tasks in {summary['run']['wall_time_s']:.0f} s)")
    return 0


#: Levels of Dask's and the event loop's loggers per verbosity (0: default, 1: -v, 2: -vv).
_DASK_LEVELS = ("CRITICAL", "WARNING", "INFO")
#: The loggers distributed configures when it is imported (distributed.config), and asyncio's.
_DASK_LOGGERS = ("distributed", "distributed.client", "distributed.gc", "tornado", "tornado.application", "bokeh",
                 "asyncio")


def _configure_logging(verbose: int) -> None:
    """dimbsvm's own warnings always; Dask's logs only with -v.

    At the default verbosity the scheduler's and workers' logs (every start
    and stop, the chatter of a shutdown, heartbeats that raced it, the
    "Compute Failed" of a task whose error the CLI reports itself) are
    silenced, here and in worker processes, which read the level from the
    environment: an error reaches the user once, as the CLI's one line.
    ``DASK_LOGGING__DISTRIBUTED`` set by the user wins at the default verbosity.
    """
    level = logging.DEBUG if verbose > 1 else logging.INFO
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logger.setLevel(level if verbose else logging.WARNING)
    if verbose or "DASK_LOGGING__DISTRIBUTED" not in os.environ:
        os.environ["DASK_LOGGING__DISTRIBUTED"] = _DASK_LEVELS[min(verbose, 2)].lower()  # for worker processes
    dask_level = os.environ["DASK_LOGGING__DISTRIBUTED"].upper()
    # Dask read the environment when it was imported: tell its config too, which distributed reads
    # when it is first imported (dimbsvm imports it lazily), and set loggers already configured
    import dask

    dask.config.set({"logging.distributed": dask_level.lower()})
    for name in _DASK_LOGGERS:
        logging.getLogger(name).setLevel(dask_level)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
