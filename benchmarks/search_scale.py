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
- ``engine, in-process``: :func:`dimbsvm.model_selection.folds.run_folds` with ``search=`` and
  no client (the same tasks, run here one after another);
- ``engine, 1 worker`` and ``engine, 2 workers``: the same on a ``LocalCluster`` of
  single-threaded worker processes (started before timing).

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
from dimbsvm.model_selection.folds import FoldSpec, run_folds
from dimbsvm.model_selection.search import Search, candidate_params
from dimbsvm.model_selection.splits import positive_label, repeat_splits
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
    results, _ = run_folds(make_estimator("svc_balanced"), X, y, specs, client=client, scaler="minmax",
                           impute="none", features=(), metrics=("g_mean",), pos_label=positive_label(y),
                           search=search)
    return [(r["record"]["g_mean"], r["record"]["params"]) for r in results]


def timed(arm, repeats):
    arm()  # warm-up: imports, worker-side caches
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = arm()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times, result


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
    arms = {}
    arms["gridsearchcv"] = timed(lambda: gridsearchcv_arm(X, y, specs), args.repeats)
    arms["engine, in-process"] = timed(lambda: engine_arm(X, y, specs, None), args.repeats)
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            arms[f"engine, {workers} worker{'s' if workers > 1 else ''}"] = timed(
                lambda: engine_arm(X, y, specs, client), args.repeats)
    baseline = arms["gridsearchcv"][2]
    equal = {name: [(round(g, 12), p) for g, p in result] == [(round(g, 12), p) for g, p in baseline]
             for name, (_, _, result) in arms.items()}
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
                        "equal_to_gridsearchcv": equal[name]}
                 for name, (median, times, _) in arms.items()},
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
             "| arm | median wall (s) | / GridSearchCV | choices and G-mean equal to GridSearchCV |",
             "|---|---|---|---|"]
    for name, arm in summary["arms"].items():
        lines.append(f"| {name} | {arm['median_s']:.2f} | {arm['ratio_to_gridsearchcv']:.2f} | "
                     f"{'yes' if arm['equal_to_gridsearchcv'] else 'NO'} |")
    lines += ["", f"2 workers against 1: {summary['speedup_2_vs_1_workers']:.2f}x."]
    return lines


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
