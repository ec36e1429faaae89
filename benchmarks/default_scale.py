"""Every estimator's default at 10^4, 10^5 and 10^6 rows: fit time and G-mean on held-back rows.

Usage (from the repository root)::

    python -m benchmarks.default_scale --out benchmarks/results/default-scale

Data: ``make_imbalanced(n, n_features=32)`` (1 % minority, rows already of unit variance, so no scaler)
with ``random_state=0`` for training, and one held-back set of :data:`TEST_ROWS` rows drawn with
``random_state=1`` for every size. Estimators: the registry's defaults as a job builds them
(``make_estimator(name)``, fitted on all training rows; ``random_state`` left at its default), in this
process, one after the other. With ``--workers N`` a local Dask cluster of ``N`` single-threaded worker
processes is active, so the ensemble's members are fitted as tasks on it (the other estimators fit in this
process whatever is active); without it the members fit one after the other in this process.
The peer ``svc_balanced`` (``SVC(class_weight="balanced")``) runs up to ``--peer-max-rows`` (default
10^5): above, its fit alone takes hours. Above 10^4 rows each cell is one fit (``--repeats`` applies up to
10^4); the table gives the median and the range of the repeats.

Before any timing, one small pynndescent search is run, so numba's compilation of pynndescent (once
per process; its seconds are recorded as ``warmup_s``) is not charged to the first estimator that
searches approximately (OTHR's candidate search and HPC's graph above 20,000 rows).

An estimator that refuses the data (ACT above its ``max_kernel_size``) is recorded with its error.
What the fitted model used is recorded from ``scaled_defaults_`` (:mod:`dimbsvm.svm.scaled_defaults`).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time

import numpy as np

from benchmarks.results import write_summary
from dimbsvm.environment import machine_info, package_versions, utc_now

logger = logging.getLogger("benchmarks.default_scale")

TITLE = "Defaults that scale: every estimator's default at 10^4, 10^5 and 10^6 rows (issue 33, item 3)"
#: Held-back rows, the same for every size.
TEST_ROWS = 50_000
#: What RESULTS.md says the table measures.
DESCRIPTION = ("Data: make_imbalanced(n, n_features=32) (1 % minority, features of unit variance, so no scaler), "
               "random_state=0 for training, one held-back set of 50,000 rows (random_state=1) for every size. "
               "Estimators: the registry's defaults as a job builds them (make_estimator(name); random_state left "
               "at its default), each a whole fit on all training rows, one after the other; svc_balanced, the "
               "peer SVC(class_weight='balanced'), up to 10^5 rows only (above, its fit alone takes hours). Up to "
               "10^4 rows the median (range) of 3 fits, above one fit. 'defaults replaced' is the fitted model's "
               "scaled_defaults_ (dimbsvm.svm.scaled_defaults, threshold LARGE_N = 20,000 training rows). ACT "
               "refuses more than max_kernel_size=5000 rows (its n x n kernel); its message suggests bagging it.")
#: Registry names: dimbsvm's methods, then the peer.
METHODS = ("thr", "othr", "ensemble_othr", "hpc", "act", "svc_balanced")
PEER = "svc_balanced"
#: Candidates for a default, measured beside the registry's: name -> (registry name, parameters).
VARIANTS = {"ensemble_othr_linear": ("ensemble_othr", {"estimator": "linear_svc"})}


def make_data(n_rows, random_state, n_features=32):
    from dimbsvm.datasets import make_imbalanced

    X, y = make_imbalanced(n_rows, n_features=n_features, random_state=random_state)
    return np.asarray(X.compute(), dtype=np.float64), np.asarray(y.compute())


def warm_up() -> float:
    """Compile pynndescent's numba functions once (seconds), before anything is timed."""
    from dimbsvm.graph.knn import nearest_neighbors

    start = time.perf_counter()
    X = np.random.default_rng(0).normal(size=(2_000, 32))
    nearest_neighbors(X, X, 5, method="pynndescent", random_state=0)
    return time.perf_counter() - start


def measure(name, X, y, X_test, y_test) -> dict:
    """One whole fit of the registry's default ``name``: seconds, G-mean on the held-back rows, what it used."""
    from dimbsvm.estimators import make_estimator
    from dimbsvm.metrics import g_mean

    estimator = make_estimator(*VARIANTS.get(name, (name, None)))
    start = time.perf_counter()
    try:
        estimator.fit(X, y)
    except Exception as exc:  # noqa: BLE001 - a refusal is a result (ACT above max_kernel_size)
        return {"fit_s": time.perf_counter() - start, "error": f"{type(exc).__name__}: {exc}"}
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    predicted = estimator.predict(X_test)
    return {"fit_s": fit_s, "predict_s": time.perf_counter() - start, "g_mean": float(g_mean(y_test, predicted)),
            "scaled": {key: repr(value) for key, value in getattr(estimator, "scaled_defaults_", {}).items()}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--methods", nargs="+", choices=METHODS + tuple(VARIANTS), default=list(METHODS))
    parser.add_argument("--repeats", type=int, default=3, help="fits per cell up to 10^4 rows (above: one)")
    parser.add_argument("--peer-max-rows", type=int, default=100_000,
                        help="largest training set the peer svc_balanced is fitted on")
    parser.add_argument("--workers", type=int, default=0,
                        help="fit the ensemble's members on a local cluster of this many single-threaded workers")
    parser.add_argument("--out", help="results directory (summary.json, report.md)")
    parser.add_argument("--note", default="", help="a sentence about the machine's state, kept in the summary")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    started, wall = utc_now(), time.perf_counter()
    load_before = os.getloadavg()
    warmup_s = warm_up()
    X_test, y_test = make_data(TEST_ROWS, random_state=1)
    rows = []
    cluster = None
    if args.workers:
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        Client(cluster)  # the active client: the ensemble fans its members out on it
    for n in args.sizes:
        X, y = make_data(n, random_state=0)
        for name in args.methods:
            if name == PEER and n > args.peer_max_rows:
                rows.append({"method": name, "rows": n, "repeat": 0, "skipped": f"above {args.peer_max_rows} rows"})
                continue
            for repeat in range(args.repeats if n <= 10_000 else 1):
                row = {"method": name, "rows": n, "repeat": repeat, **measure(name, X, y, X_test, y_test)}
                logger.info("%s", row)
                rows.append(row)
    if cluster is not None:
        cluster.close()
    summary = {"kind": "default_scale", "title": TITLE,
               "command": "python -m benchmarks.default_scale " + " ".join(argv if argv is not None else sys.argv[1:]),
               "date": started, "wall_seconds": time.perf_counter() - wall, "machine": machine_info(),
               "packages": package_versions(), "rows": rows, "warmup_s": warmup_s, "test_rows": TEST_ROWS,
               "load_average": {"start": list(load_before), "end": list(os.getloadavg())}, "note": args.note,
               "workers": args.workers,
               "description": DESCRIPTION}
    text = render_markdown(summary)
    if args.out:
        write_summary(args.out, summary, text)
    print(text)
    return 0


def render_markdown(summary: dict) -> str:
    """One row per (estimator, rows): fit seconds median (range), G-mean, predict seconds, what it used."""
    groups: dict = {}
    for row in summary["rows"]:
        groups.setdefault((row["rows"], row["method"]), []).append(row)
    load = summary.get("load_average", {})
    lines = []
    if summary.get("note"):
        lines += [summary["note"], ""]
    lines += [f"Held-back rows: {summary['test_rows']:,}. numba's compilation of pynndescent, once per process and "
              f"not in the table: {summary['warmup_s']:.1f} s. Load average (1, 5, 15 min) at the start "
              f"{', '.join(f'{v:.2f}' for v in load.get('start', []))}, at the end "
              f"{', '.join(f'{v:.2f}' for v in load.get('end', []))}. "
              + (f"Ensemble members fitted on a local cluster of {summary['workers']} single-threaded workers; every "
                 "other fit in one process." if summary.get("workers") else "Every fit in one process."), "",
              "| rows | estimator (registry default) | fits | fit s, median (min-max) | G-mean (held back) "
              "| predict s | defaults replaced (scaled_defaults_) |", "|" + "---|" * 7]
    order = METHODS + tuple(VARIANTS)
    for (n, method), cell in sorted(groups.items(), key=lambda item: (item[0][0], order.index(item[0][1]))):
        first = cell[0]
        if "skipped" in first:
            lines.append(f"| {n:,} | {method} | 0 | skipped: {first['skipped']} | - | - | - |")
            continue
        if "error" in first:
            reason = first["error"].split(". ")[0]  # the first sentence: what was refused and why
            lines.append(f"| {n:,} | {method} | {len(cell)} | refused: {reason} | - | - | - |")
            continue
        fits = [row["fit_s"] for row in cell]
        spread = f" ({min(fits):.2f}-{max(fits):.2f})" if len(fits) > 1 else ""
        g_means = sorted({round(row["g_mean"], 4) for row in cell})
        scaled = ", ".join(f"{k}={v}" for k, v in first.get("scaled", {}).items()) or "none"
        lines.append(f"| {n:,} | {method} | {len(cell)} | {statistics.median(fits):.2f}{spread} "
                     f"| {' / '.join(f'{g:.4f}' for g in g_means)} | {statistics.median(r['predict_s'] for r in cell):.2f} "
                     f"| {scaled} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
