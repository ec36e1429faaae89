"""Nested CV through the fold engine's search against scikit-learn's GridSearchCV, and 1 vs 2 workers.

Usage (from the repository root)::

    python -m benchmarks.search_scale --out benchmarks/results/search-scale            # 3 repeats
    python -m benchmarks.search_scale --n 2000 --repeats 1 --out /tmp/search-scale     # quick look

On ``make_imbalanced(n, 16 features, 5 % minority)`` held in memory, the same nested
cross-validation (stratified 5-fold outer CV, ``svc_balanced`` with C x gamma, 16 candidates,
chosen by the mean G-mean of 3 inner folds, refitted per outer fold, min-max scaling fitted on
every training fold) is run four ways, each timed as the median wall time over ``--repeats``
runs after one untimed warm-up run:

- ``gridsearchcv``: a loop over the outer folds of ``GridSearchCV(Pipeline(MinMaxScaler, SVC),
  cv=3, n_jobs=1)`` in this process: the baseline a scikit-learn user writes;
- ``engine, in-process``: :func:`dimbsvm.model_selection.folds.run_folds` with a ``FoldSetup(search=...)`` and
  no client (the same tasks, run here one after another);
- ``engine, 1 worker`` and ``engine, 2 workers``: the same on a ``LocalCluster`` of
  single-threaded worker processes (started before timing), with the seconds the workers spent
  computing tasks (Dask's task stream) and the utilisation, task seconds / (wall x workers).

Every arm's per-fold G-mean and chosen parameters are checked equal to the baseline's. Prints
one JSON summary and writes ``summary.json`` and ``report.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

from dimbsvm.datasets import make_imbalanced
from dimbsvm.environment import machine_info, package_versions, utc_now
from dimbsvm.estimators import make_estimator
from dimbsvm.metrics import g_mean
from dimbsvm.model_selection.folds import FoldSetup, FoldSpec, run_folds
from dimbsvm.model_selection.search import Search, candidate_params
from dimbsvm.model_selection.splits import minority_class, repeat_splits
from dimbsvm.recommended import SVM_GRID

N_FEATURES = 16
N_SPLITS = 5
INNER = 3


def gridsearchcv_arm(X, y, specs):
    """The scikit-learn baseline: per outer fold, GridSearchCV over the pipeline, then its test G-mean."""
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler

    out = []
    for spec in specs:
        search = GridSearchCV(make_pipeline(MinMaxScaler(), make_estimator("svc_balanced")),
                              {f"svc__{k}": v for k, v in SVM_GRID.items()}, cv=INNER, scoring=make_scorer(g_mean),
                              n_jobs=1).fit(X[spec.train], y[spec.train])
        out.append((float(g_mean(y[spec.test], search.predict(X[spec.test]))),
                    {k.removeprefix("svc__"): v for k, v in search.best_params_.items()}))
    return out


def engine_arm(X, y, specs, client):
    search = Search(candidate_params(SVM_GRID), n_splits=INNER, scoring="g_mean")
    setup = FoldSetup(make_estimator("svc_balanced"), minority_class(y), scaler="minmax", impute="none",
                      metrics=("g_mean",), search=search)
    results, _ = run_folds(setup, X, y, specs, client=client)
    return [(r["record"]["g_mean"], r["record"]["params"]) for r in results]


def timed(arm, repeats, client=None):
    """Median wall seconds over ``repeats`` runs after a warm-up run; with a client, also the seconds its
    workers spent computing tasks in those runs (from Dask's task stream)."""
    from distributed import get_task_stream

    arm()  # warm-up: imports, worker-side caches
    times, busy, result = [], [], None
    for _ in range(repeats):
        start = time.perf_counter()
        if client is None:
            result = arm()
        else:
            with get_task_stream(client) as stream:
                result = arm()
            busy.append(sum(s["stop"] - s["start"] for task in stream.data for s in task["startstops"]
                            if s["action"] == "compute"))
        times.append(time.perf_counter() - start)
    return statistics.median(times), times, result, busy


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.search_scale", description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=4000, help="rows (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="results directory (summary.json, report.md)")
    args = parser.parse_args(argv)
    from distributed import Client, LocalCluster

    X, y = make_imbalanced(args.n, n_features=N_FEATURES, minority_fraction=0.05, random_state=0)
    X, y = np.asarray(X), np.asarray(y)
    specs = [FoldSpec((0, f), train, test) for f, (train, test) in enumerate(repeat_splits(y, n_splits=N_SPLITS,
                                                                                            seed=0))]
    started = utc_now()
    arms, n_workers = {}, {}
    arms["gridsearchcv"] = timed(lambda: gridsearchcv_arm(X, y, specs), args.repeats)
    arms["engine, in-process"] = timed(lambda: engine_arm(X, y, specs, None), args.repeats)
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            arms[f"engine, {workers} worker{'s' if workers > 1 else ''}"] = timed(
                lambda: engine_arm(X, y, specs, client), args.repeats, client)
            n_workers[f"engine, {workers} worker{'s' if workers > 1 else ''}"] = workers
    baseline = arms["gridsearchcv"][2]
    equal = {name: [(round(g, 12), p) for g, p in result] == [(round(g, 12), p) for g, p in baseline]
             for name, (_, _, result, _) in arms.items()}
    base_time = arms["gridsearchcv"][0]
    summary = {
        "kind": "search_scale", "title": "Nested CV: the engine's search against GridSearchCV, 1 and 2 workers",
        "command": "python -m benchmarks.search_scale" + (f" --n {args.n}" if args.n != 4000 else "")
                   + (f" --repeats {args.repeats}" if args.repeats != 3 else "")
                   + (f" --out {args.out}" if args.out else ""),
        "date": started, "machine": machine_info(), "packages": package_versions(),
        "n": args.n, "n_features": N_FEATURES, "outer_folds": N_SPLITS, "inner_folds": INNER,
        "candidates": len(candidate_params(SVM_GRID)), "repeats": args.repeats,
        "svm_fits": N_SPLITS * (len(candidate_params(SVM_GRID)) * INNER + 1),
        "arms": {name: {"median_s": median, "times_s": times, "ratio_to_gridsearchcv": median / base_time,
                        "equal_to_gridsearchcv": equal[name],
                        # task seconds on the workers, and their share of (wall x workers)
                        "task_s": statistics.median(busy) if busy else None,
                        "utilisation": (statistics.median(b / (t * n_workers[name]) for b, t in zip(busy, times))
                                        if busy else None)}
                 for name, (median, times, _, busy) in arms.items()},
        "speedup_2_vs_1_workers": arms["engine, 1 worker"][0] / arms["engine, 2 workers"][0],
        "chosen": [p for _, p in baseline],
    }
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        (args.out / "report.md").write_text("\n".join(render_markdown(summary)) + "\n")
    print(json.dumps({k: summary[k] for k in ("arms", "speedup_2_vs_1_workers")}, indent=2))
    return 0


def render_markdown(summary: dict) -> list[str]:
    lines = [f"make_imbalanced({summary['n']:,} rows, {summary['n_features']} features, 5 % minority) in memory; "
             f"{summary['outer_folds']}-fold outer CV, {summary['candidates']} candidates x {summary['inner_folds']} "
             f"inner folds + 1 refit per outer fold = {summary['svm_fits']} SVC fits per run; median of "
             f"{summary['repeats']} runs after a warm-up run; clusters started before timing.", "",
             "| arm | median wall (s) | / GridSearchCV | task seconds on the workers | utilisation | "
             "choices and G-mean equal to GridSearchCV |",
             "|---|---|---|---|---|---|"]
    for name, arm in summary["arms"].items():
        task_s = f"{arm['task_s']:.1f}" if arm.get("task_s") is not None else ""
        use = f"{arm['utilisation']:.2f}" if arm.get("utilisation") is not None else ""
        lines.append(f"| {name} | {arm['median_s']:.2f} | {arm['ratio_to_gridsearchcv']:.2f} | {task_s} | {use} | "
                     f"{'yes' if arm['equal_to_gridsearchcv'] else 'NO'} |")
    lines += ["", f"2 workers against 1: {summary['speedup_2_vs_1_workers']:.2f}x. Utilisation: task seconds / "
              "(wall x workers); task seconds growing with the worker count mean each task ran slower beside "
              "another one (the machine's logical CPUs share a core's resources)."]
    return lines


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
