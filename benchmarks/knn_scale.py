"""kNN graphs at scale: pynndescent width vs recall, exact extrapolation, the sharded build, numba compile.

Data: clustered Gaussian blobs (:func:`blobs`): 50 centres uniform in
[-10, 10]^32, unit-variance clusters, float32, generated lazily in 4096-row
blocks seeded by block number (any chunking gives the same rows). k = 10.

Each stage runs in a fresh Python process, so its compile time and peak
resident memory (``ru_maxrss``) are its own:

``compile``
    ``import pynndescent``, the first NN-descent build (numba compilation,
    :func:`dimbsvm.graph.knn.warm_up`) and the same build again (warm). With
    ``--cold-cache`` also in a process whose numba cache directory is empty
    (what a container with a read-only site-packages pays).
``single``
    The rows in memory, one index (``knn_graph(X, 10, method="pynndescent",
    build_neighbors=w)``) for each width ``w`` of ``--widths``: build time and
    recall against exact neighbours of a 2,000-row sample. scikit-learn's
    exact brute force (``NearestNeighbors(algorithm="brute")``) is timed for
    those 2,000 query rows against all n rows and extrapolated linearly to n
    query rows (stated as such in the output).
``sharded``
    The rows ingested into a Zarr store (chunks of 50,000 rows), then
    ``knn_graph(store, 10, method="pynndescent", shard_rows=...)`` on a
    ``LocalCluster`` of 2 worker processes with one thread each and
    ``--memory-limit`` per worker: the stage's own timings, recall and the
    peak resident memory of each worker (from the stage meta).

Usage (from the repository root)::

    python -m benchmarks.knn_scale --stage compile --cold-cache
    python -m benchmarks.knn_scale --stage single --n 100000 --widths 11 20 25 30
    python -m benchmarks.knn_scale --stage sharded --n 1000000 --shard-rows 250000 --memory-limit 1.5GiB

Results are written as JSON to ``--out`` (default ``benchmarks/results/knn-scale``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

logger = logging.getLogger("benchmarks.knn_scale")

K = 10
D = 32
CENTERS = 50
BLOCK = 4096
SAMPLE = 2000


def blobs(n, *, d=D, centers=CENTERS, seed=0, chunks=50_000):
    """Lazy clustered rows (dask array, float32); row values depend only on (seed, row index)."""
    import dask
    import dask.array as da

    means = np.random.default_rng([seed, 0]).uniform(-10, 10, size=(centers, d))

    def block(b):
        rng = np.random.default_rng([seed, 1, b])
        rows = min(BLOCK, n - b * BLOCK)
        return (means[rng.integers(centers, size=rows)] + rng.normal(size=(rows, d))).astype(np.float32)

    n_blocks = -(-n // BLOCK)
    parts = [da.from_delayed(dask.delayed(block)(b), shape=(min(BLOCK, n - b * BLOCK), d),
                             dtype=np.float32) for b in range(n_blocks)]
    return da.concatenate(parts).rechunk((chunks, d))


def _peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_s():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _load():
    return os.getloadavg()


def stage_compile(args):
    result = {"load_before": _load()}
    tic = time.perf_counter()
    import pynndescent  # noqa: F401  (timed: the import loads numba-cached functions)

    result["import_s"] = time.perf_counter() - tic
    from dimbsvm.graph.knn import KNNIndex, warm_up

    cpu = _cpu_s()
    result["first_build_s"] = warm_up()
    result["first_build_cpu_s"] = _cpu_s() - cpu
    X = np.random.RandomState(1).rand(2000, 8).astype(np.float32)
    tic, cpu = time.perf_counter(), _cpu_s()
    KNNIndex(10, method="pynndescent", random_state=0).fit(X).query(X[:50], 10)
    result["warm_build_s"] = time.perf_counter() - tic
    result["warm_build_cpu_s"] = _cpu_s() - cpu
    result["peak_rss_mib"] = _peak_mib()
    result["numba_cache_dir"] = os.environ.get("NUMBA_CACHE_DIR", "(default: next to the sources)")
    result["load_after"] = _load()
    return result


def stage_single(args):
    from sklearn.neighbors import NearestNeighbors

    from dimbsvm.graph.knn import KNNIndex, drop_self, recall_of, warm_up

    n = args.n
    tic = time.perf_counter()
    X = blobs(n).compute(scheduler="threads")
    result = {"n": n, "d": D, "k": K, "generate_s": time.perf_counter() - tic, "load_before": _load()}
    result["warm_up_s"] = warm_up()
    rows = np.sort(np.random.RandomState(0).choice(n, size=min(SAMPLE, n), replace=False))
    tic, cpu = time.perf_counter(), _cpu_s()
    exact = NearestNeighbors(algorithm="brute").fit(X).kneighbors(X[rows], K + 1)[1]
    sample_s = time.perf_counter() - tic
    result["exact_sample_cpu_s"] = _cpu_s() - cpu
    exact = drop_self(exact, exact * 1.0, rows)[0]
    result["exact_sample_s"] = sample_s
    result["exact_extrapolated_s"] = sample_s * n / rows.size
    result["widths"] = []
    for width in args.widths:
        tic, cpu = time.perf_counter(), _cpu_s()
        index = KNNIndex(K, method="pynndescent", build_neighbors=width, random_state=0).fit(X)
        indices = index.neighbor_graph(K)[0]
        seconds = time.perf_counter() - tic
        cpu = _cpu_s() - cpu
        recall = recall_of(indices[rows], exact)
        result["widths"].append({"build_neighbors": width, "build_s": seconds, "build_cpu_s": cpu, "recall": recall,
                                 "speedup_vs_exact": result["exact_extrapolated_s"] / seconds})
        logger.info("n=%d width=%d: %.1f s, recall %.4f", n, width, seconds, recall)
        del index, indices
    result["peak_rss_mib"] = _peak_mib()
    result["load_after"] = _load()
    return result


def stage_sharded(args):
    from distributed import Client, LocalCluster

    from dimbsvm.graph import knn_graph, open_knn_graph
    from dimbsvm.store import ingest

    n = args.n
    cache = Path(args.cache or tempfile.mkdtemp(prefix="knn-scale-"))
    path = cache / f"blobs-{n}.zarr"
    result = {"n": n, "d": D, "k": K, "data_mib_float32": n * D * 4 / 2**20, "memory_limit": args.memory_limit,
              "shard_rows": args.shard_rows, "build_neighbors": args.width, "load_before": _load()}
    tic = time.perf_counter()
    if not path.exists():  # the rows depend only on n, so a store from an earlier run is the same data
        ingest((blobs(n), np.zeros(n, dtype=np.int32)), path, chunk_rows=50_000)
    result["ingest_s"] = time.perf_counter() - tic
    shutil.rmtree(path / "knn", ignore_errors=True)  # time a fresh build, not the reuse of a finished one
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=args.memory_limit,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        tic = time.perf_counter()
        knn_graph(str(path), K, method="pynndescent", build_neighbors=args.width, shard_rows=args.shard_rows,
                  random_state=0, recall_sample=SAMPLE, client=client)
        result["total_s"] = time.perf_counter() - tic
        result["worker_memory_now_mib"] = {w: info["metrics"]["memory"] / 2**20
                                           for w, info in client.scheduler_info()["workers"].items()}
    meta = open_knn_graph(path).meta
    result.update(recall=meta["recall"], timings=meta["timings"], n_shards=meta["n_shards"],
                  shard_times=meta["shard_times"],
                  peak_worker_rss_mib={w: b / 2**20 for w, b in meta["peak_rss_bytes"].items()})
    result["load_after"] = _load()
    return result


STAGES = {"compile": stage_compile, "single": stage_single, "sharded": stage_sharded}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stage", choices=sorted(STAGES), required=True)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--widths", type=int, nargs="+", default=[11, 20, 25, 30])
    parser.add_argument("--width", type=int, default=25, help="build width of the sharded build")
    parser.add_argument("--shard-rows", type=int, default=250_000)
    parser.add_argument("--memory-limit", default="1.5GiB")
    parser.add_argument("--cold-cache", action="store_true", help="compile stage: also with an empty numba cache")
    parser.add_argument("--cache", help="directory for the sharded stage's store")
    parser.add_argument("--out", default="benchmarks/results/knn-scale")
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.in_process:  # the child: run one stage, print its JSON
        print(json.dumps(STAGES[args.stage](args)))
        return
    runs = [("default", {})]
    if args.stage == "compile" and args.cold_cache:
        runs.append(("cold-cache", {"NUMBA_CACHE_DIR": tempfile.mkdtemp(prefix="numba-empty-")}))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for label, env in runs:
        argv_child = [sys.executable, "-m", "benchmarks.knn_scale", *(argv or sys.argv[1:]), "--in-process"]
        tic = time.perf_counter()
        done = subprocess.run(argv_child, env={**os.environ, **env}, capture_output=True, text=True, check=False)
        if done.returncode:
            sys.stderr.write(done.stderr)
            raise SystemExit(f"stage {args.stage} failed")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result.update(stage=args.stage, variant=label, wall_s=time.perf_counter() - tic)
        name = f"{args.stage}-{label}" + (f"-{args.n}" if args.stage != "compile" else "") + ".json"
        (out / name).write_text(json.dumps(result, indent=2) + "\n")
        logger.info("%s", json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
