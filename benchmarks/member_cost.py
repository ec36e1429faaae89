"""What one EnSVM-OTHR member costs, against the SVM it wraps.

Usage (from the repository root)::

    python -m benchmarks.member_cost                     # n = 10^6 x 32, 3 repeats
    python -m benchmarks.member_cost --n 200000 --repeats 1 --per-round-search

On ``make_imbalanced(n, 32, 1 % minority)`` held in memory, in this one
process with the numeric libraries limited to one thread (as in a
single-threaded Dask worker, see :mod:`dimbsvm.parallel.policy`), it
measures the CPU seconds of one member task, ``fit_member`` called with the
arguments :meth:`EnsembleOTHRClassifier.plan_members` gives it, on a balanced
bag of ``--bag`` rows with ``LinearSVC``, against the reference cost a member
cannot avoid: fitting the same ``LinearSVC`` on the same bag (rows gathered
included) plus scoring the member's out-of-bag rows (``decision_function``).
Two members:

- ``default``: ``EnsembleOTHRClassifier``'s default ``threshold="pooled_oob"``,
  which hands members ``margins="none"`` (no search; the member keeps its
  out-of-bag margins for the shared search);
- ``paper``: the paper's member search, ``threshold="member"``,
  ``member_margins="train"``, ``candidates="othr"`` (eq. 23 candidates from the
  nearest farther majority neighbour within the bag), exact G-mean,
  ``tolerance=0``, ``perturbation=0.1``.

The target is a member CPU of at most twice the reference. The median over
``--repeats`` member seeds is reported, after one untimed warm-up round. A bag of more than 40,000 rows holds
more than :data:`~dimbsvm.graph.knn.EXACT_MAX_ROWS` majority rows, so the
paper's search is approximate (pynndescent, compiled before timing).

CPU is user plus system time. The system part is mostly page faults of the
out-of-bag copy and varies several-fold between identical calls on a loaded
machine, so the user-CPU ratio is reported beside the total. ``--per-round-search`` also times the
paper's member with dimbsvm 0.1.0's candidate search, which rebuilt the
neighbour index in every widening round. Prints one JSON summary and one
markdown table row per member kind.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource

import numpy as np
from sklearn.svm import LinearSVC
from threadpoolctl import threadpool_limits

from dimbsvm.datasets import make_imbalanced
from dimbsvm.graph.knn import warm_up
from dimbsvm.rows import map_row_blocks
from dimbsvm.svm._base import signed_margins
from dimbsvm.svm.bagging import draw_bag
from dimbsvm.svm.ensemble import EnsembleOTHRClassifier

from dimbsvm.environment import machine_info, package_versions, utc_now

N_FEATURES = 32
MINORITY = 0.01

#: The ensembles whose members are measured (their parameters besides the base and the bags).
MEMBERS = {
    "default": {},
    "paper": {"threshold": "member", "member_margins": "train", "candidates": "othr",
              "objective": "g_mean", "smoothing": None, "tolerance": 0.0, "perturbation": 0.1},
}


def _cpu(func, *args, **kwargs):
    """``(result, CPU seconds of this process)`` of one call: user plus system time.

    The system part is mostly page faults of fresh allocations (the out-of-bag
    rows are copied once, 125 MB at 10^6 x 32 float32); on a loaded machine it
    varies several-fold between identical calls, so :data:`_SYSTEM` keeps it apart.
    """
    start = resource.getrusage(resource.RUSAGE_SELF)
    result = func(*args, **kwargs)
    stop = resource.getrusage(resource.RUSAGE_SELF)
    _SYSTEM.append(stop.ru_stime - start.ru_stime)
    return result, (stop.ru_utime - start.ru_utime) + (stop.ru_stime - start.ru_stime)


#: System CPU seconds of the calls timed by :func:`_cpu`, in order.
_SYSTEM = []


def reference_cost(X, y, seed, *, bag_rows):
    """CPU seconds of the base SVM's fit on the member's bag and of scoring its out-of-bag rows."""
    positive = y == 1
    # the member's first draws from its seed: the same bag
    bag, _ = draw_bag(positive, np.random.RandomState(seed), bootstrap="balanced", max_samples=bag_rows)
    oob = np.setdiff1d(np.arange(y.size), bag)

    def fit():
        return LinearSVC(random_state=seed).fit(X[bag], y[bag])

    svm, fit_cpu = _cpu(fit)
    _, score_cpu = _cpu(map_row_blocks, lambda block: signed_margins(svm, block, 1.0), X, oob)
    return {"fit_cpu_s": fit_cpu, "oob_scoring_cpu_s": score_cpu, "oob_rows": int(oob.size),
            "reference_system_cpu_s": _SYSTEM[-2] + _SYSTEM[-1]}


def member_cost(X, y, seed, kind, *, bag_rows):
    """CPU seconds of the member task ``kind`` with this seed, and what it searched on."""
    ensemble = EnsembleOTHRClassifier(LinearSVC(), bootstrap="balanced", max_samples=bag_rows,
                                      **MEMBERS[kind])
    spec = ensemble.plan_members(y).members[0]
    member, cpu = _cpu(spec.fit, X, y, int(seed))
    return {"member_cpu_s": cpu, "member_system_cpu_s": _SYSTEM[-1], "margins": member.margins}


@contextlib.contextmanager
def per_round_search():
    """dimbsvm 0.1.0's candidate search: a new neighbour index in every widening round."""
    from dimbsvm.svm import candidates

    class PerRound(candidates._MajoritySearch):
        def query(self, X_query, k):
            self.index = self.exact = None  # forget the index: build it again
            if k == self.X.shape[0]:
                self.method = "exact"
            self.first_k = k
            return super().query(X_query, k)

    saved = candidates._MajoritySearch
    candidates._MajoritySearch = PerRound
    try:
        yield
    finally:
        candidates._MajoritySearch = saved


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="rows (default 10^6)")
    parser.add_argument("--bag", type=int, default=20_000, help="rows of a member's balanced bag")
    parser.add_argument("--repeats", type=int, default=3, help="member seeds; the median is reported")
    parser.add_argument("--per-round-search", action="store_true",
                        help="also time the paper's member with 0.1.0's per-round index")
    args = parser.parse_args(argv)

    X, y = make_imbalanced(args.n, N_FEATURES, MINORITY, random_state=0)
    X, y = np.asarray(X.compute()), np.asarray(y.compute())
    seeds = np.random.RandomState(0).randint(np.iinfo(np.int32).max, size=args.repeats)
    kinds = list(MEMBERS) + (["paper_per_round_index"] if args.per_round_search else [])
    runs = {kind: [] for kind in kinds}
    import numba

    numba.set_num_threads(1)
    warm_up()  # numba compiles pynndescent once per process (issue 16, item 5): not a member's cost
    with threadpool_limits(1):
        # one untimed round first: the first scoring in a process costs several times the next
        # ones (one-time set-up), and pynndescent's query compiles on its first call
        reference_cost(X, y, 0, bag_rows=args.bag)
        for kind in MEMBERS:
            member_cost(X, y, 0, kind, bag_rows=args.bag)
        for seed in seeds:
            reference = reference_cost(X, y, seed, bag_rows=args.bag)
            for kind in kinds:
                with per_round_search() if kind == "paper_per_round_index" else contextlib.nullcontext():
                    measured = member_cost(X, y, seed, "paper" if kind.startswith("paper") else kind,
                                           bag_rows=args.bag)
                base = reference["fit_cpu_s"] + reference["oob_scoring_cpu_s"]
                base_user = base - reference["reference_system_cpu_s"]
                member_user = measured["member_cpu_s"] - measured["member_system_cpu_s"]
                runs[kind].append(dict(reference, **measured, seed=int(seed),
                                       ratio=measured["member_cpu_s"] / base,
                                       user_ratio=member_user / base_user))
    summary = {
        "benchmark": "member_cost",
        "when": utc_now(),
        "machine": machine_info(),
        "packages": package_versions(),
        "n_samples": args.n,
        "n_features": N_FEATURES,
        "minority": MINORITY,
        "bag_rows": args.bag,
        "threads": 1,
        "members": {
            kind: {
                "median_member_cpu_s": float(np.median([r["member_cpu_s"] for r in rs])),
                "median_fit_cpu_s": float(np.median([r["fit_cpu_s"] for r in rs])),
                "median_oob_scoring_cpu_s": float(np.median([r["oob_scoring_cpu_s"] for r in rs])),
                "median_ratio": float(np.median([r["ratio"] for r in rs])),
                "median_user_ratio": float(np.median([r["user_ratio"] for r in rs])),
                "target_met": bool(np.median([r["ratio"] for r in rs]) <= 2.0),
                "runs": rs,
            }
            for kind, rs in runs.items()
        },
    }
    print(json.dumps(summary, indent=2))
    print()
    print("| member | n | bag | member CPU s | fit CPU s | OOB scoring CPU s | ratio | user-CPU ratio "
          "| target <= 2x |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, result in summary["members"].items():
        print(f"| {kind} | {args.n:,} | {args.bag:,} | {result['median_member_cpu_s']:.2f} | "
              f"{result['median_fit_cpu_s']:.2f} | {result['median_oob_scoring_cpu_s']:.2f} | "
              f"{result['median_ratio']:.2f} | {result['median_user_ratio']:.2f} | "
              f"{'yes' if result['target_met'] else 'no'} |")


if __name__ == "__main__":
    main()
