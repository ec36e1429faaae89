"""The ``dimbsvm`` command line.

Verbs::

    dimbsvm run JOB.yaml [--scheduler ADDRESS | --scheduler-file F] [--out DIR] [--workers N] [--resume | --fresh]
                [--mlflow URI] [--detach]
    dimbsvm status RUN_DIR [--json]
    dimbsvm logs RUN_DIR [--follow]
    dimbsvm cancel RUN_DIR [--wait SECONDS]
    dimbsvm validate JOB.yaml [--out DIR] [--registry DIR] [--scheduler ADDRESS]
    dimbsvm predict MODEL|REGISTRY@champion|REGISTRY@VERSION|models:/NAME@ALIAS DATA --out PRED.parquet|PRED.csv|PRED.zarr
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

import gc
import json
import logging
import os
import shlex
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from .cli_setup import cluster_factory_of, cluster_for, placement_of, read_job_file, tls_settings
from .cli_json import JSON_VERBS, json_output
from .cli_listings import cmd_datasets, cmd_estimators, cmd_features
from .cli_parser import build_parser
from .cli_registry import cmd_models, cmd_promote, cmd_rollback, open_registry
from .cli_retrain import cmd_retrain, cmd_schedule
from .cli_errors import describe_error, describe_unexpected
from .exceptions import DimbsvmError, one_line
from .jobs.run_phases import phase_line, process_started

logger = logging.getLogger("dimbsvm")

#: ``dimbsvm predict`` scores this many partitions (of ``--chunk-rows`` rows) or fewer in this process, with
#: Dask's threads, unless a flag asks for a cluster: an embedded cluster's start is most of such a run.
PREDICT_IN_PROCESS_PARTS = 2


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
    """Entry point of the ``dimbsvm`` console script.

    Parameters
    ----------
    argv : list of str, default=None
        The arguments; ``None`` reads ``sys.argv``: the console script, whose
        process exits when this returns.

    Returns
    -------
    status : int
        The exit status.
    """
    exits_next = argv is None
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    finally:
        if exits_next:
            # The interpreter's exit runs full garbage collections over every object the imports made
            # (scikit-learn, matplotlib, Bokeh, ...): slower than the small job it ends. Nothing left needs
            # them (files are closed, a cluster is shut down, weakref finalizers run at exit anyway), so the
            # objects are frozen out of those collections. Not when called with arguments, as tests do: that
            # process goes on.
            gc.freeze()


def _main(argv: list) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    args.argv = argv
    _configure_logging(args.verbose)
    if getattr(args, "json", False) and args.verb in JSON_VERBS:
        with json_output(args) as finish:
            status, error = _handled(args)
        return finish(status, error)
    return _handled(args)[0]


def _handled(args) -> tuple[int, str | None]:
    """The verb run with every error turned into one line on standard error: ``(exit status, that line)``."""
    restore = _terminate_as_interrupt() if args.verb != "schedule" else None  # schedule stops on its own
    try:
        _refuse_urls_for_local_paths(args)
        return args.handler(args), None
    except RunInterrupted as exc:
        return _failed(one_line(exc), 130)
    except KeyboardInterrupt as exc:
        return _failed("terminated (SIGTERM)" if isinstance(exc, _Terminated) else "interrupted", 130)
    except (DimbsvmError, OSError, ValueError) as exc:
        # ValueError: scikit-learn's (and numpy's) way of rejecting an input or a parameter combination,
        # e.g. raised inside a task; it reaches here as itself
        if args.verbose:
            traceback.print_exc()
        return _failed(f"error: {describe_error(exc, args)}", getattr(exc, "exit_status", 2))  # 3: SchedulerLostError
    except Exception as exc:  # noqa: BLE001 - anything else is a bug: still one line, traceback with -v
        if args.verbose:
            traceback.print_exc()
        return _failed(*describe_unexpected(exc, args))
    finally:
        if restore is not None:
            restore()


def _failed(line: str, status: int) -> tuple[int, str]:
    print(f"dimbsvm: {line}", file=sys.stderr)
    return status, line




def _terminate_as_interrupt():
    """Make SIGTERM unwind like Ctrl-C (cluster shut down, message printed); return the undo."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def on_term(signum, frame):
        raise _Terminated()

    previous = signal.signal(signal.SIGTERM, on_term)
    return lambda: signal.signal(signal.SIGTERM, previous)


def _parser():
    """The command line's parser, each verb bound to its handler here."""
    return build_parser({"run": _cmd_run, "validate": _cmd_validate, "predict": _cmd_predict,
                         "retrain": cmd_retrain, "schedule": cmd_schedule, "models": cmd_models,
                         "promote": cmd_promote, "rollback": cmd_rollback, "ingest": _cmd_ingest,
                         "datasets": cmd_datasets, "bench": _cmd_bench, "estimators": cmd_estimators,
                         "features": cmd_features, "status": _lazy("cmd_status"), "logs": _lazy("cmd_logs"),
                         "cancel": _lazy("cmd_cancel")})


def _lazy(name: str):
    """A handler of :mod:`dimbsvm.cli_detached`, imported when its verb runs."""
    def handler(args):
        from . import cli_detached

        return getattr(cli_detached, name)(args)

    return handler


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
    entered, began = time.time(), process_started()
    from .distributed import SchedulerLostError

    from .jobs import run_lifecycle as lifecycle

    tls = tls_settings(args)
    if args.detach:
        from .cli_detached import run_detached

        read_job_file(args.job)
        return run_detached(args, tls)
    remote = lifecycle.remote_out(args.out)  # a URL: written in a local staging directory, published when complete
    if remote is not None and remote.finished:
        from .jobs.remote_run_dir import check_staged_run, publish_run_dir

        check_staged_run(remote, args.job)  # only the job and data that made it
        print(f"dimbsvm: the run finished in {remote.staging}; publishing it to {remote.url}", file=sys.stderr)
        print(f"run directory: {publish_run_dir(remote.staging, remote.url)}")
        return 0
    if remote is not None and not args.fresh:  # an interrupted run of this URL resumes here, whichever machine ran it
        restored = lifecycle.restore_checkpoints(remote)
        if restored:
            print(f"dimbsvm: {restored}", file=sys.stderr)
    # everything that can be checked is checked before a cluster starts
    read_job_file(args.job)
    from .jobs.report_drawing import report_process

    report_process()  # started now: it imports the drawing libraries while this process imports and checks
    from .jobs.checks import check_job
    from .jobs.runner import run_checked

    checked = check_job(args.job, out=args.out if remote is None else remote.staging, resume=args.resume,
                        fresh=args.fresh, scheduler=args.scheduler, scheduler_file=args.scheduler_file, tls=tls,
                        cluster=args.cluster)
    checked = lifecycle.tracked(checked, args.mlflow)  # tracking (the mlflow package checked here)
    checks_done = time.time()
    job, plan = checked.job, checked.run
    total = job.cv.n_folds
    if plan.resuming:
        print(f"dimbsvm: resuming the interrupted run in {plan.partial} ({plan.saved_folds} of {total} folds saved)",
              file=sys.stderr)
    n_workers = args.workers or job.execution.n_workers
    placement = placement_of(args, job, checked.data)
    try:
        with cluster_for(args, tls=tls, n_workers=n_workers, require_encryption=job.execution.require_encryption,
                     placement=placement, cluster=cluster_factory_of(args, job)) as client, \
                lifecycle.checkpoints(remote, plan.partial):
            phases_before = {"start-up": entered - began, "checks": checks_done - entered,
                             "cluster start" if client is not None else "placement": time.time() - checks_done}
            result = run_checked(checked, client, progress=not args.no_progress, phases_before=phases_before)
    except KeyboardInterrupt as exc:
        how = "terminated (SIGTERM)" if isinstance(exc, _Terminated) else "interrupted"
        raise RunInterrupted(lifecycle.interrupted_line(args.argv, plan, total, how, remote)) from None
    except SchedulerLostError as exc:
        raise SchedulerLostError(lifecycle.interrupted_line(args.argv, plan, total, one_line(exc), remote)) from exc
    print(f"job {job.name}: {job.estimator.name} on {job.data.source}")
    if result.reused:
        print(f"resumed: reused {result.reused} of {len(result.folds)} folds from the interrupted run")
    if result.reused_members:
        print(f"resumed: reused {result.reused_members} finished ensemble member(s) from the interrupted run")
    width = max((len(name) for name in [*result.summary, *result.timings]), default=0)
    for name, stats in result.summary.items():
        print(f"  {name:<{width}}  {stats['mean']:.4f} ± {stats['std']:.4f}  ({stats['n']} folds)")
    for name, stats in result.timings.items():
        print(f"  {name:<{width}}  {stats['mean']:.4f} s a fold (min {stats['min']:.4f}, max {stats['max']:.4f})")
    print(phase_line(result.phases, time.time() - began))
    if result.search:
        print(_search_lines(result.search))
    # tracked after the run directory is written (a failure is a warning), before a URL's staging copy goes
    tracked_line = lifecycle.track_run(checked, result)
    if tracked_line:
        print(tracked_line)
    where = result.run_dir
    if remote is not None:
        from .jobs.remote_run_dir import publish_run_dir

        where = publish_run_dir(result.run_dir, remote.url)
    print(f"run directory: {where}")
    print(f"report: {where}/report.html")
    args.json_document = {"job": job.name, "estimator": job.estimator.name, "data": str(job.data.source),
                          "run_directory": str(where), "report": f"{where}/report.html", "summary": result.summary,
                          "reused_folds": result.reused, "reused_members": result.reused_members,
                          "search": result.search or None, "timings": result.timings,
                          "phase_seconds": result.phases}
    return 0


def _cmd_validate(args) -> int:
    run_dir = args.registry is None or args.out is not None  # --registry alone: a retrain, no run directory
    from .jobs.run_lifecycle import remote_out

    remote = remote_out(args.out)
    tls = tls_settings(args)
    read_job_file(args.job)
    from .jobs.checks import check_job, describe, described

    checked = check_job(args.job, run_dir=run_dir, out=args.out if remote is None else remote.staging,
                        resume=args.resume, fresh=False,
                        registry=args.registry, claim=False,
                        scheduler=args.scheduler, scheduler_file=args.scheduler_file, tls=tls, cluster=args.cluster)
    if args.fresh and checked.run is not None and checked.run.resuming:
        checked.run.resuming = False  # --fresh would start over (validate discards nothing)
    placement = placement_of(args, checked.job, checked.data)
    print(f"{args.job}: ok, every check before a run passed")
    for line in describe(checked, placement=placement):
        print(f"  {line}")
    args.json_document = described(checked, placement=placement)
    return 0


def _cmd_predict(args) -> int:
    from .distributed import check_cluster_options
    from .jobs.run_dir import check_writable
    from .predict import DimbsvmModel, check_output, plan_prediction
    from .store.location import is_url

    tls = tls_settings(args)
    check_cluster_options(args.scheduler, scheduler_file=args.scheduler_file, tls=tls, cluster=args.cluster)
    check_output(args.out)  # nothing dimbsvm did not write is replaced
    if not is_url(args.out):
        check_writable(Path(args.out), "predict --out")
    model = DimbsvmModel(*_load_prediction_model(args.model, args.mlflow))  # checked before a cluster starts
    # the input opened and its columns checked before a cluster starts too; no row is read here
    planned = plan_prediction(model, args.data, args.out, chunk_rows=args.chunk_rows)
    from .jobs.placement import cluster_flag

    demanded = cluster_flag(scheduler=args.scheduler, scheduler_file=args.scheduler_file, workers=args.workers,
                            cluster=args.cluster)
    if demanded is None and planned.n_parts <= PREDICT_IN_PROCESS_PARTS:
        # a cluster's start (seconds) is most of the time of scoring so few rows: Dask's threads here instead
        rows = f" ({planned.n_rows:,} rows)" if planned.n_rows is not None else ""
        print(f"running in this process: {planned.n_parts} partition(s){rows}; pass --workers N to use a cluster",
              flush=True)
        written = planned.run()
    else:
        with cluster_for(args, tls=tls):  # the partitions are scored and written on the active client
            written = planned.run()
    print(f"wrote {written.n_rows} predictions ({', '.join(written.columns)}) to {written.out}")
    return 0


def _load_prediction_model(ref: str, mlflow_uri: str | None = None):
    """``(model, meta)`` of a model directory, of ``REGISTRY@champion`` / ``REGISTRY@VERSION``, or of
    ``models:/NAME@ALIAS`` / ``models:/NAME/VERSION`` in the MLflow registry at ``mlflow_uri``.

    A path that exists is a model directory even if its name holds an ``@``.
    """
    from .jobs import load_artifact
    from .predict.mlflow_source import is_registered_model, load_registered_model

    if is_registered_model(ref):
        return load_registered_model(ref, tracking_uri=mlflow_uri)
    if "@" in ref and not Path(ref).exists():
        root, _, version = ref.rpartition("@")
        registry = open_registry(root)
        version = registry.resolve(version)
        logger.info("predicting with %s version %s", root, version)
        return registry.load(version)
    return load_artifact(ref)


def _named_counts(meta: dict) -> dict:
    """A store's class counts keyed by class name (its meta keys them by code); codes where no name is known.

    Examples
    --------
    >>> _named_counts({"class_counts": {"0": 259, "1": 77}, "class_map": {"negative": 0, "positive": 1}})
    {'negative': 259, 'positive': 77}
    """
    names = {str(code): name for name, code in (meta.get("class_map") or {}).items()}
    return {names.get(str(code), code): count for code, count in (meta.get("class_counts") or {}).items()}


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
    tls = tls_settings(args)
    check_cluster_options(args.scheduler, scheduler_file=args.scheduler_file, tls=tls, cluster=args.cluster)
    on_cluster = bool(args.scheduler or args.scheduler_file or args.workers or args.cluster)
    # without a cluster named, this process reads the source (in threads): no cluster start for small files
    with (cluster_for(args, tls=tls) if on_cluster else contextlib.nullcontext()):
        stored = ingest(_ingest_source(args), args.store, chunk_rows=args.chunk_rows, overwrite=args.overwrite,
                        verify=args.verify, dtype=args.dtype, compression=args.compression,
                        n_features=args.n_features, progress=not args.no_progress)
    meta = stored.meta
    kind = f" sparse CSR ({meta['nnz']} values)" if meta.get("sparse") else ""
    print(f"{stored.path}: X {tuple(stored.X.shape)} {stored.X.dtype}{kind} in chunks of {stored.X.chunks[0][0]} "
          f"rows ({meta.get('compression', 'zstd')}), classes {_named_counts(meta)}")
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
        tls = tls_settings(args)
        summary, out = bench(args.suite, out=args.out, scheduler=args.scheduler, scheduler_file=args.scheduler_file,
                             cluster=args.cluster,
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
    # Dask reads the environment when it is imported: if it was imported already, tell its config too, which
    # distributed reads when it is first imported (dimbsvm imports it lazily), and set loggers already
    # configured. Not imported here otherwise: jobs that run in this process on in-memory data never need it.
    dask = sys.modules.get("dask")
    if dask is not None:
        import dask.config

        dask.config.set({"logging.distributed": dask_level.lower()})
    for name in _DASK_LOGGERS:
        logging.getLogger(name).setLevel(dask_level)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
