"""``dimbsvm retrain`` and ``dimbsvm schedule``: a challenger fitted, gated against the champion, promoted or not;
once, or on a cron schedule."""

from __future__ import annotations

import json
import logging
import sys

from .cli_setup import cluster_factory_of, cluster_for, placement_of, read_job_file, tls_settings

__all__ = ["RETRAIN_EXIT", "cmd_retrain", "cmd_schedule", "print_outcome"]

#: ``retrain --exit-code`` statuses of the routine outcomes (failures: 1 bug, 2 user error, 3 scheduler lost,
#: 130 interrupted). Above 3 so that no failure status is reused; 0 is the one that changes the champion.
RETRAIN_EXIT = {"promoted": 0, "kept": 4, "unchanged": 5}


def cmd_retrain(args) -> int:
    tls = tls_settings(args)
    read_job_file(args.job)
    from .jobs.checks import check_job
    from .jobs.retrain import retrain_checked
    from .jobs.run_lifecycle import tracked

    checked = check_job(args.job, run_dir=False, registry=args.registry, scheduler=args.scheduler,
                        scheduler_file=args.scheduler_file, tls=tls, cluster=args.cluster)
    checked = tracked(checked, args.mlflow)
    job = checked.job
    holdout = job.retrain.holdout
    # the challenger is one fit on the rows left after the holdout (all of them with a separate holdout source)
    challenger_rows = int(len(checked.data.y) * (1 if holdout.source else 1 - holdout.fraction))
    placement = placement_of(args, job, checked.data, challenger_rows=challenger_rows)
    with cluster_for(args, tls=tls, require_encryption=job.execution.require_encryption,
                 placement=placement, cluster=cluster_factory_of(args, job)) as client:
        outcome = retrain_checked(checked, client, args.registry, force=args.force)
    print_outcome(outcome)
    args.json_document = {"action": outcome.action, "version": outcome.version, "champion": outcome.champion,
                          "promoted": outcome.promoted, "reason": outcome.reason,
                          "challenger_metrics": outcome.challenger_metrics,
                          "champion_metrics": outcome.champion_metrics, "search_params": outcome.search_params}
    return RETRAIN_EXIT[outcome.action] if args.exit_code else 0


def print_outcome(outcome) -> None:
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


def cmd_schedule(args) -> int:
    from .jobs.schedule import parse_cron, run_schedule

    parse_cron(args.cron)  # a bad expression, or one that never matches, fails before a cluster starts
    if not args.verbose:  # "next run at" and the outcomes are the schedule's routine output (container logs)
        logging.getLogger("dimbsvm.jobs.schedule").setLevel(logging.INFO)
    tls = tls_settings(args)
    read_job_file(args.job)
    from .distributed import check_workers
    from .jobs.checks import check_job
    from .jobs.retrain import retrain
    from .jobs.run_lifecycle import tracked

    # the checks of `retrain` (issue 30: job file, cluster options, registry, data, holdout), once before the
    # cluster starts; each run then reads the data again, as it is by then
    checked = check_job(args.job, run_dir=False, registry=args.registry, scheduler=args.scheduler,
                        scheduler_file=args.scheduler_file, tls=tls, cluster=args.cluster)
    checked = tracked(checked, args.mlflow)
    job, job_text = checked.job, checked.job_text
    # workers are checked before each run (they may come, go or be upgraded between runs), not at start, and as
    # they join; a factory's cluster (or one said to scale from zero) may have none between runs: not waited for
    scales_from_zero = cluster_factory_of(args, job) is not None or args.scale_from_zero
    # placed as `retrain` places one run, by the data as it is now: small retrainings run in this process
    holdout = job.retrain.holdout
    challenger_rows = int(len(checked.data.y) * (1 if holdout.source else 1 - holdout.fraction))
    placement = placement_of(args, job, checked.data, challenger_rows=challenger_rows)
    with cluster_for(args, tls=tls, require_encryption=job.execution.require_encryption, placement=placement,
                 worker_timeout=None, cluster=cluster_factory_of(args, job)) as client:
        def run_once():
            if client is not None:
                check_workers(client, timeout=args.worker_timeout, wait=not scales_from_zero)
            outcome = retrain(job, client, args.registry, job_text=job_text)
            print_outcome(outcome)
            sys.stdout.flush()
            return outcome.summary()

        runs = run_schedule(run_once, args.cron, max_runs=args.max_runs)
    print(f"schedule stopped after {runs} run(s)")
    return 0
