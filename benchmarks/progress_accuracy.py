"""How far the progress line's time left is from the truth, on real jobs (issue 33, item 4).

Usage (from the repository root)::

    python -m benchmarks.progress_accuracy --out benchmarks/results/progress-accuracy
    python -m benchmarks.results benchmarks/results/progress-accuracy --update

Each job is run through :func:`dimbsvm.jobs.run_job` in this process, with
every advance of its :class:`~dimbsvm.parallel.progress.Progress` recorded:
the clock, the tasks done and the time left the line would show then
(:meth:`Progress.seconds_left`, computed whether or not the line is drawn).
The truth at an advance is the time from it to the last task's advance. The
table gives, over the advances with at least 10 % of the tasks done (and not
the last), the first estimate's ratio to the truth and the worst factor
``max(estimate / truth, truth / estimate)``; the issue asks for at most 2.
The line shows whole seconds, so the worst factor is also given over the
advances where the truth is at least a second.

Jobs (``make_imbalanced``, 5 % minority, 20 features, in memory unless
said): ``ensemble``, 2x10^5 rows, 10 LinearSVC members on bags of 20,000,
3-fold CV and the final model, in this process; ``ensemble-2w``, the same
on an embedded ``LocalCluster`` of two single-threaded workers; ``rbf``,
the issue's case at a size that finishes: the default
``EnsembleOTHRClassifier`` (RBF SVC members on bootstrap bags as large as
the training set) on 8,000 rows, 3-fold CV and the final model, on the
two-worker cluster; ``store``, the strong-scaling job (16 LinearSVC
members, bags of 20,000, 2-fold CV and the final model) over a 10^6-row
Zarr store on the two-worker cluster.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.results import docstring_text, publish, when_and_where
from dimbsvm.environment import utc_now

logger = logging.getLogger("benchmarks.progress_accuracy")

#: The share of the tasks done from which the estimate must be within a factor of 2.
FROM_SHARE = 0.1
#: The progress line's resolution: it shows the time left in whole seconds.
SHOWN_SECONDS = 1.0

JOBS = ("ensemble", "ensemble-2w", "rbf", "store")


def accuracy(advances, from_share: float = FROM_SHARE) -> dict:
    """The estimates' error against the truth: ``advances`` is ``[(clock, done, total, seconds_left), ...]``.

    Returns
    -------
    dict
        ``n_tasks``, ``seconds`` (first advance to last), ``first_ratio``
        (estimate / truth at the first advance with ``done >= from_share *
        total``), ``worst_factor`` (``max(estimate / truth, truth /
        estimate)`` over those advances, the last excluded) and
        ``n_checked``; ``worst_factor_shown`` is the same over the advances
        where the truth is at least :data:`SHOWN_SECONDS` (the line shows
        whole seconds: below one, ``~0:00 left`` and ``~0:01 left`` are all
        it can say). The ratios are None where no advance qualifies.

    Examples
    --------
    >>> advances = [(0.0, 1, 4, 9.0), (1.0, 2, 4, 4.0), (2.0, 3, 4, 1.0), (3.0, 4, 4, 0.0)]
    >>> accuracy(advances)["worst_factor"], accuracy(advances, from_share=0.5)["worst_factor"]
    (3.0, 2.0)
    >>> near_end = [(0.0, 1, 4, 3.0), (1.0, 2, 4, 2.0), (2.5, 3, 4, 0.1), (3.0, 4, 4, 0.0)]
    >>> accuracy(near_end)["worst_factor"], accuracy(near_end)["worst_factor_shown"]  # 0.1 s against 0.5 s
    (5.0, 1.0)
    """
    clocks = np.array([a[0] for a in advances], dtype=float)
    done = np.array([a[1] for a in advances])
    total = advances[-1][2]
    left = np.array([a[3] for a in advances], dtype=float)
    truth = clocks[-1] - clocks
    checked = (done >= from_share * total) & (done < total) & (truth > 0)
    out = {"n_tasks": int(total), "seconds": float(clocks[-1] - clocks[0]), "n_checked": int(checked.sum()),
           "first_ratio": None, "worst_factor": None, "worst_factor_shown": None}
    if checked.any():
        ratios = left[checked] / truth[checked]
        factors = np.maximum(ratios, 1 / ratios)
        out["first_ratio"] = float(ratios[0])
        out["worst_factor"] = float(np.max(factors))
        shown = truth[checked] >= SHOWN_SECONDS
        if shown.any():
            out["worst_factor_shown"] = float(np.max(factors[shown]))
    return out


def _recorded_run(job, client, out):
    """Run ``job`` with every progress advance of its task plans recorded.

    Returns the advances of the longest plan, the wall time, and per task
    name the costs the plan gave and (on a cluster) the tasks' measured
    compute seconds, from distributed's task stream.
    """
    import contextlib

    from dimbsvm.jobs import run_job
    from dimbsvm.parallel import progress, tasks

    plans, real = [], progress.Progress.advance
    costs, real_add = {}, tasks.TaskPlan.add

    def advance(self, *args, **kwargs):
        real(self, *args, **kwargs)
        if not plans or plans[-1][0] is not self:
            plans.append((self, []))
        plans[-1][1].append((self._clock(), self.done, self.total, self.seconds_left()))

    def add(self, func, kwargs, **options):
        ref = real_add(self, func, kwargs, **options)
        if options.get("cost") is not None:
            costs.setdefault(ref.name, []).append(float(options["cost"]))
        return ref

    progress.Progress.advance, tasks.TaskPlan.add = advance, add
    stream = None
    try:
        if client is not None:
            from distributed import get_task_stream

            stream = get_task_stream(client)
        with stream if stream is not None else contextlib.nullcontext():
            start = time.monotonic()
            run_job(job, client, out=out, progress=False)
            wall = time.monotonic() - start
    finally:
        progress.Progress.advance, tasks.TaskPlan.add = real, real_add
    measured = {}
    for task in stream.data if stream is not None else ():
        seconds = sum(s["stop"] - s["start"] for s in task["startstops"] if s["action"] == "compute")
        measured.setdefault(str(task["key"]).rsplit("-", 2)[0], []).append(seconds)
    kinds = [{"name": name, "n": len(values), "cost_s": float(np.median(values)),
              "measured_s": float(np.median(measured[name])) if name in measured else None}
             for name, values in sorted(costs.items())]
    return max((advances for _, advances in plans), key=len), wall, kinds


def _job(name, source, params):
    from dimbsvm.jobs import validate_job

    return validate_job({"name": name, "data": {"source": str(source)},
                         "estimator": {"name": "ensemble_othr", "params": params},
                         "cv": {"n_splits": 3 if name != "store" else 2, "n_repeats": 1, "random_state": 0},
                         "metrics": ["g_mean", "f_measure"]})


def run(names, workdir: Path) -> list[dict]:
    from distributed import Client, LocalCluster

    from dimbsvm.datasets import make_imbalanced

    rows = []
    cluster = client = None
    try:
        for name in names:
            if name in ("ensemble", "ensemble-2w"):
                X, y = make_imbalanced(200_000, n_features=20, minority_fraction=0.05, random_state=0)
                source = workdir / "ensemble.npz"
                np.savez(source, X=np.asarray(X), y=np.asarray(y))
                params = {"estimator": "linear_svc", "n_estimators": 10, "max_samples": 20_000, "smoothing": None,
                          "random_state": 0}
            elif name == "rbf":
                X, y = make_imbalanced(8_000, n_features=20, minority_fraction=0.05, random_state=0)
                source = workdir / "rbf.npz"
                np.savez(source, X=np.asarray(X), y=np.asarray(y))
                params = {}
            else:
                from benchmarks.strong_scaling import BAG, N_MEMBERS, make_store

                source = make_store(1_000_000, 64, workdir)
                params = {"estimator": "linear_svc", "n_estimators": N_MEMBERS, "bootstrap": "balanced",
                          "max_samples": BAG, "random_state": 0}
            on_cluster = name != "ensemble"
            if on_cluster and client is None:
                cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None)
                client = Client(cluster)
            out = workdir / f"run-{name}"
            shutil.rmtree(out, ignore_errors=True)
            advances, wall, kinds = _recorded_run(_job(name, source, params), client if on_cluster else None, out)
            row = {"job": name, "where": "2 workers" if on_cluster else "this process", "wall_s": wall,
                   **accuracy(advances), "advances": [[t - advances[0][0], d, n, s] for t, d, n, s in advances],
                   "task_kinds": kinds}
            logger.info("%s", json.dumps({k: v for k, v in row.items() if k != "advances"}))
            rows.append(row)
    finally:
        if client is not None:
            client.close()
            cluster.close()
    return rows


def render_markdown(summary: dict) -> str:
    lines = ["| job | where | tasks | run s | tasks' span s | estimates checked (from 10 % done) | "
             "first: estimate / truth | worst factor | worst factor, truth >= 1 s | within 2x (truth >= 1 s) |",
             "|---|---|---|---|---|---|---|---|---|---|"]

    def shown(value):
        return "-" if value is None else f"{value:.2f}"

    for r in summary["rows"]:
        shown_worst = r.get("worst_factor_shown")
        ok = "-" if shown_worst is None else ("yes" if shown_worst <= 2 else "no")
        lines.append(f"| {r['job']} | {r['where']} | {r['n_tasks']} | {r['wall_s']:.1f} | {r['seconds']:.1f} | "
                     f"{r['n_checked']} | {shown(r['first_ratio'])} | {shown(r['worst_factor'])} | "
                     f"{shown(shown_worst)} | {ok} |")
    lines += ["", "The tasks' costs, as the fold engine gave them, against their compute time on the workers "
              "(medians per task name; the in-process job's tasks are not timed one by one):", "",
              "| job | task | tasks | cost s | measured s | measured / cost |", "|---|---|---|---|---|---|"]
    for r in summary["rows"]:
        for kind in r.get("task_kinds", []):
            measured = kind["measured_s"]
            ratio = "-" if not measured else f"{measured / kind['cost_s']:.2f}"
            lines.append(f"| {r['job']} | {kind['name']} | {kind['n']} | {kind['cost_s']:.4f} | "
                         f"{shown(measured) if measured is None else f'{measured:.4f}'} | {ratio} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", nargs="+", choices=JOBS, default=list(JOBS))
    parser.add_argument("--out", help="results directory (summary.json, report.md)")
    parser.add_argument("--note", default="", help="a sentence about the machine's state")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    started, wall = utc_now(), time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="progress-accuracy-"))
    try:
        rows = run(args.jobs, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    summary = {"kind": "progress_accuracy", "title": "Progress: the time left it shows against the truth, on real "
               "jobs (issue 33, item 4)",
               "command": "python -m benchmarks.progress_accuracy" + (f" --jobs {' '.join(args.jobs)}"
                                                                      if args.jobs != list(JOBS) else "")
               + (f" --out {args.out}" if args.out else ""),
               "description": docstring_text(__doc__, 3, 5, note=args.note),
               **when_and_where(started, wall), "rows": rows}
    return publish(summary, render_markdown, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
