"""Linear HPC-SVM at scale: the kNN graph once, then the chunked fit, against LinearSVC.

Data: ``make_imbalanced(n, 32, minority_fraction=0.01, chunks=100_000, random_state=0)``.
Each stage runs in its own Python process, so its peak resident memory
(``ru_maxrss``) is its own:

``knn``
    The rows in memory, ``nearest_neighbors(X, X, k + 1)`` (pynndescent above
    20,000 rows), self removed, saved to ``--cache``; recall against exact
    neighbours on 500 sampled rows. With ``--graph random`` instead: ``k``
    distinct random other rows per row, a stand-in when NN-descent on the
    full data would take too long. The HPC pass costs the same for any
    neighbour array (random neighbours are the worst case for the gathers),
    but its model is then regularised by noise: read its G-mean as a smoke
    check only.
``hpc``
    ``HPCClassifier().fit(X_dask, y_dask, neighbors=...)`` with the threaded
    Dask scheduler and the lazy generator as input (chunks are generated when
    a task needs them, never persisted): the stage times of ``timings_``, the
    ``J^T L' J`` time of one chunk alone (its rows and the rows it touches
    already in memory), and the generator's own time for one pass.
``linear_svc``
    The rows in memory, ``LinearSVC(loss="hinge")``: HPC's solver on the
    untransformed rows (the problem HPC with ``c1=0`` solves); and
    ``LinearSVC()`` with its default squared hinge (``dual="auto"`` picks the
    primal solver here), what a user would run.

Both SVMs use ``C=1`` and ``class_weight="balanced"`` (at 1 % minority an
unweighted SVM predicts the majority everywhere, G-mean 0). Stage processes
run with ``OPENBLAS_NUM_THREADS=1``: on a shared machine multi-threaded BLAS
inside Dask's threads oversubscribes the cores and its timings swing tenfold.
``cpu_seconds`` (user + system time of the process) is reported beside the
wall time, as it is less sensitive to other load.

Usage (from the repository root)::

    python -m benchmarks.hpc_scale --n 100000 --cache /tmp/hpc-scale
    python -m benchmarks.hpc_scale --n 100000 1000000 --graph random --cache /tmp/hpc-scale
    python -m benchmarks.hpc_scale --stage hpc --n 1000000 --cache /tmp/hpc-scale   # one stage
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import dask
import numpy as np

from dimbsvm.datasets import make_imbalanced
from dimbsvm.graph.hypergraph import neighbors_excluding_self
from dimbsvm.graph.knn import nearest_neighbors
from dimbsvm.metrics import g_mean

logger = logging.getLogger(__name__)

K = 5
CHUNKS = 100_000


def _data(n):
    return make_imbalanced(n, 32, minority_fraction=0.01, chunks=CHUNKS, random_state=0)


def _peak_gib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB on Linux


def _cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _random_graph(n, seed=0):
    rng = np.random.default_rng(seed)
    neighbors = rng.integers(0, n - 1, size=(n, K))
    neighbors += neighbors >= np.arange(n)[:, None]  # skip the row itself
    while True:
        ordered = np.sort(neighbors, axis=1)
        bad = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
        if not bad.size:
            return neighbors
        redo = rng.integers(0, n - 1, size=(bad.size, K))
        neighbors[bad] = redo + (redo >= bad[:, None])


def stage_knn(n, cache, graph):
    if graph == "random":
        start = time.perf_counter()
        np.save(cache / f"neighbors_{graph}_{n}.npy", _random_graph(n))
        return {"seconds": time.perf_counter() - start, "graph": graph}
    X, _ = _data(n)
    X = X.compute()
    start = time.perf_counter()
    cpu = _cpu_seconds()
    found, _ = nearest_neighbors(X, X, K + 1, random_state=0)
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    neighbors = neighbors_excluding_self(found)
    np.save(cache / f"neighbors_{graph}_{n}.npy", neighbors)
    rows = np.random.default_rng(0).choice(n, size=min(500, n), replace=False)
    exact = neighbors_excluding_self(nearest_neighbors(X, X[rows], K + 1, method="exact")[0], rows)
    recall = np.mean([len(set(a) & set(b)) / K for a, b in zip(neighbors[rows], exact)])
    return {"seconds": seconds, "cpu_seconds": cpu, "recall_at_5": float(recall), "graph": graph}


def stage_hpc(n, cache, graph):
    from dimbsvm.svm._hpc_kernels import accumulate_jlj
    from dimbsvm.svm.hpc import HPCClassifier

    neighbors = np.load(cache / f"neighbors_{graph}_{n}.npy")
    X, y = _data(n)
    with dask.config.set(scheduler="threads"):
        start = time.perf_counter()
        X.sum().compute()
        generator = time.perf_counter() - start
        start, cpu = time.perf_counter(), _cpu_seconds()
        clf = HPCClassifier(C=1.0, class_weight="balanced", random_state=0).fit(
            X, y, neighbors=neighbors)
        total, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
        # one chunk's J^T L' J alone, its inputs already in memory
        rows = slice(0, X.chunks[0][0])
        touched, local = np.unique(neighbors[rows], return_inverse=True)
        Xc, yc, Xt, yt = dask.compute(X[rows], y[rows], X[touched], y[touched])
        signs = lambda v: np.where(v == clf.classes_[1], 1.0, -1.0)
        start = time.perf_counter()
        accumulate_jlj(Xc, local.reshape(-1, K), Xt, signs(yc), signs(yt), sigma2=clf.sigma2_)
        chunk = time.perf_counter() - start
        y_pred = clf.predict(X)
        score = g_mean(y.compute(), y_pred)
    return {"seconds": total, "cpu_seconds": cpu, "stages": clf.timings_, "jlj_one_chunk": chunk,
            "chunk_rows": X.chunks[0][0], "generator_one_pass": generator, "n_iter": clf.n_iter_,
            "train_g_mean": float(score), "graph": graph}


def stage_linear_svc(n, cache, graph):
    from sklearn.svm import LinearSVC

    X, y = _data(n)
    X, y = dask.compute(X, y)
    result = {}
    for loss in ("hinge", "squared_hinge"):
        start, cpu = time.perf_counter(), _cpu_seconds()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            svm = LinearSVC(loss=loss, C=1.0, class_weight="balanced", random_state=0).fit(X, y)
        seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
        result[loss] = {"seconds": seconds, "cpu_seconds": cpu, "n_iter": int(svm.n_iter_),
                        "warnings": len(caught), "train_g_mean": float(g_mean(y, svm.predict(X)))}
    return result


STAGES = {"knn": stage_knn, "hpc": stage_hpc, "linear_svc": stage_linear_svc}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--stage", choices=sorted(STAGES), default=None,
                        help="run one stage in this process (default: every stage, each in a subprocess)")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/hpc-scale"))
    parser.add_argument("--graph", choices=["knn", "random"], default="knn")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.stage:
        for n in args.n:
            result = STAGES[args.stage](n, args.cache, args.graph)
            result.update(stage=args.stage, n=n, peak_rss_gib=round(_peak_gib(), 3))
            print(json.dumps(result))
        return 0
    results = []
    for n in args.n:
        for stage in ("knn", "hpc", "linear_svc"):
            if stage == "knn" and (args.cache / f"neighbors_{args.graph}_{n}.npy").exists():
                logger.info("reusing the kNN graph of n=%d in %s", n, args.cache)
                continue
            out = subprocess.run([sys.executable, "-m", "benchmarks.hpc_scale", "--stage", stage,
                                  "--n", str(n), "--cache", str(args.cache), "--graph", args.graph],
                                 check=True, capture_output=True, text=True,
                                 env={**os.environ, "OPENBLAS_NUM_THREADS": "1"}).stdout
            results.append(json.loads(out.strip().splitlines()[-1]))
            logger.info("%s", results[-1])
    (args.cache / f"results_{args.graph}.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
