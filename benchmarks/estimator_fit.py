"""What ``EnsembleOTHRClassifier.fit`` costs in this process, and what ``n_jobs`` gives.

Usage (from the repository root)::

    python -m benchmarks.estimator_fit                  # n = 10^6 x 32, 3 repeats
    python -m benchmarks.estimator_fit --n 200000 --repeats 1

On ``make_imbalanced(n, 32, 1 % minority)`` held in memory:

- ``cost``: ``EnsembleOTHRClassifier(LinearSVC(), n_estimators=4,
  max_samples=20_000)`` fitted here (no client, ``n_jobs=None``): its CPU
  seconds (user plus system, this process) and wall seconds, against the
  reference a user would write by hand: the same four ``LinearSVC`` fitted on
  stratified bags of the same size and each scoring every row (the
  ensemble's members score their out-of-bag rows, 98 % of them), timed the
  same way with the numeric libraries as they are. The target is at most 3x.
- ``n_jobs``: eight members fitted with ``n_jobs=None`` and with
  ``n_jobs=2`` (the processes started by one untimed fit first, as a session
  reuses them): wall seconds, their ratio, and whether the two fits' decision
  values are equal. Two ensembles: ``linear``, ``LinearSVC`` members on bags
  of 20,000 of the ``n`` rows (a member is a tenth of a second, and the shared
  shift's search over every row's pooled margin, done once in this process,
  is a third of the fit), and ``rbf``, the default RBF ``SVC`` members on bags
  of 5,000 of the first 200,000 rows (the members are the fit).

Each ratio is the median over ``--repeats`` seeds, the two sides run back to
back. Prints one JSON summary and two markdown tables.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import numpy as np
from sklearn.svm import LinearSVC

from dimbsvm.datasets import make_imbalanced
from dimbsvm.environment import machine_info, package_versions, utc_now
from dimbsvm.svm.ensemble import EnsembleOTHRClassifier

N_FEATURES = 32
MINORITY = 0.01
BAG = 20_000


def _timed(func, *args, **kwargs):
    """``(result, CPU seconds of this process, wall seconds)`` of one call."""
    start, clock = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    result = func(*args, **kwargs)
    stop = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (stop.ru_utime - start.ru_utime) + (stop.ru_stime - start.ru_stime)
    return result, cpu, time.perf_counter() - clock


def by_hand(X, y, seed, n_members):
    """The reference: ``n_members`` LinearSVC on stratified bags of :data:`BAG` rows, each scoring every row."""
    rng = np.random.RandomState(seed)
    positive, negative = np.flatnonzero(y == 1), np.flatnonzero(y != 1)
    n_positive = round(BAG * positive.size / y.size)
    for _ in range(n_members):
        bag = np.concatenate([rng.choice(positive, n_positive), rng.choice(negative, BAG - n_positive)])
        LinearSVC(random_state=seed).fit(X[bag], y[bag]).decision_function(X)


def fit_cost(X, y, seed):
    """The in-process fit of four members against four SVMs by hand."""
    ensemble = EnsembleOTHRClassifier(LinearSVC(), n_estimators=4, max_samples=BAG, random_state=seed)
    _, fit_cpu, fit_wall = _timed(ensemble.fit, X, y)
    _, hand_cpu, hand_wall = _timed(by_hand, X, y, seed, 4)
    return {"seed": int(seed), "fit_cpu_s": fit_cpu, "fit_wall_s": fit_wall, "by_hand_cpu_s": hand_cpu,
            "by_hand_wall_s": hand_wall, "cpu_ratio": fit_cpu / hand_cpu,
            "fit_cpu_per_wall_s": fit_cpu / fit_wall}


#: The ensembles of the ``n_jobs`` measurement: (base, bag rows, rows used).
N_JOBS_ENSEMBLES = {"linear": (LinearSVC, BAG, None), "rbf": (None, 5_000, 200_000)}


def n_jobs_speedup(X, y, seed, n_jobs, kind):
    """Wall seconds of an 8-member fit in order and on ``n_jobs`` processes, and whether they agree."""
    base, bag, rows = N_JOBS_ENSEMBLES[kind]
    X, y = X[:rows], y[:rows]

    def fitted(jobs):
        return EnsembleOTHRClassifier(None if base is None else base(), n_estimators=8, max_samples=bag,
                                      random_state=seed, n_jobs=jobs)

    in_order, _, order_wall = _timed(fitted(None).fit, X, y)
    on_processes, _, processes_wall = _timed(fitted(n_jobs).fit, X, y)
    scored = slice(0, 20_000)
    equal = bool(np.array_equal(in_order.decision_function(X[scored]),
                                on_processes.decision_function(X[scored])))
    return {"seed": int(seed), "kind": kind, "n_jobs_none_wall_s": order_wall, "n_jobs_wall_s": processes_wall,
            "speedup": order_wall / processes_wall, "decision_values_equal": equal}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="rows (default 10^6)")
    parser.add_argument("--repeats", type=int, default=3, help="seeds; medians are reported")
    parser.add_argument("--n-jobs", type=int, default=2, help="processes of the n_jobs fit (default 2)")
    parser.add_argument("--skip-n-jobs", action="store_true", help="measure the in-process cost only")
    args = parser.parse_args(argv)

    X, y = make_imbalanced(args.n, N_FEATURES, MINORITY, random_state=0)
    X, y = np.asarray(X.compute()), np.asarray(y.compute())
    seeds = np.random.RandomState(0).randint(np.iinfo(np.int32).max, size=args.repeats)
    fit_cost(X, y, 0)  # untimed: first-call set-up (imports, the first scoring) is no fit's cost
    costs = [fit_cost(X, y, seed) for seed in seeds]
    speedups = {}
    if not args.skip_n_jobs:
        EnsembleOTHRClassifier(LinearSVC(), n_estimators=2, max_samples=BAG, n_jobs=args.n_jobs).fit(X, y)
        speedups = {kind: [n_jobs_speedup(X, y, seed, args.n_jobs, kind) for seed in seeds]
                    for kind in N_JOBS_ENSEMBLES}
    median = lambda runs, key: float(np.median([r[key] for r in runs]))  # noqa: E731
    summary = {
        "benchmark": "estimator_fit", "when": utc_now(), "machine": machine_info(), "packages": package_versions(),
        "n_samples": args.n, "n_features": N_FEATURES, "minority": MINORITY, "bag_rows": BAG,
        "cost": {"median_cpu_ratio": median(costs, "cpu_ratio"), "median_fit_cpu_s": median(costs, "fit_cpu_s"),
                 "median_by_hand_cpu_s": median(costs, "by_hand_cpu_s"),
                 "median_fit_cpu_per_wall_s": median(costs, "fit_cpu_per_wall_s"),
                 "target_met": median(costs, "cpu_ratio") <= 3.0, "runs": costs},
        "n_jobs": {kind: {"n_jobs": args.n_jobs, "median_speedup": median(runs, "speedup"),
                          "median_n_jobs_none_wall_s": median(runs, "n_jobs_none_wall_s"),
                          "median_n_jobs_wall_s": median(runs, "n_jobs_wall_s"),
                          "all_equal": all(r["decision_values_equal"] for r in runs), "runs": runs}
                   for kind, runs in speedups.items()},
    }
    print(json.dumps(summary, indent=2))
    print()
    print("| n | fit CPU s | fit CPU per wall s | by hand CPU s | ratio | target <= 3x |")
    print("|---|---|---|---|---|---|")
    c = summary["cost"]
    print(f"| {args.n:,} | {c['median_fit_cpu_s']:.2f} | {c['median_fit_cpu_per_wall_s']:.2f} | "
          f"{c['median_by_hand_cpu_s']:.2f} | {c['median_cpu_ratio']:.2f} | {'yes' if c['target_met'] else 'no'} |")
    if speedups:
        print()
        print(f"| members | n | n_jobs=None wall s | n_jobs={args.n_jobs} wall s | speedup | decision values equal |")
        print("|---|---|---|---|---|---|")
        for kind, s in summary["n_jobs"].items():
            rows = N_JOBS_ENSEMBLES[kind][2] or args.n
            print(f"| {kind} | {min(rows, args.n):,} | {s['median_n_jobs_none_wall_s']:.2f} | "
                  f"{s['median_n_jobs_wall_s']:.2f} | {s['median_speedup']:.2f} | "
                  f"{'yes' if s['all_equal'] else 'no'} |")

if __name__ == "__main__":
    main()
