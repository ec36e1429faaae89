"""kNN graphs at scale: the partitioned build against one threaded pynndescent index and the sharded build.

Data: clustered Gaussian blobs (:func:`blobs`): 50 centres uniform in
[-10, 10]^d (``--d``, default 32), unit-variance clusters, float32, generated
lazily in 4096-row blocks seeded by block number (any chunking gives the same
rows), ingested once into a Zarr store under ``--cache``. k = 10. Recall is
measured against the exact neighbours of one fixed 2,000-row sample
(:func:`fixed_sample`, cached), the same rows for every strategy.

Each configuration runs in a fresh Python process (its own numba compile,
its own peak memory), bounded by ``--timeout`` seconds (the process group is
killed past it and the run recorded as timed out):

``single``
    One index in one process: ``KNNIndex(10, method="pynndescent",
    build_neighbors=w, n_jobs=None)`` (numba threads = cores), for each
    ``--single-widths`` w. Wall, process CPU (all threads), peak RSS.
    numba is compiled before the clock starts.
``partitioned`` / ``sharded``
    The stored build (:func:`dimbsvm.model_selection.graph_build.knn_graph`)
    on a ``LocalCluster`` of ``--workers`` single-threaded worker processes.
    Workers are warmed up (numba) before the clock starts; the warm-up is
    reported apart. CPU: the workers' process CPU over the build (``client.run``
    of ``getrusage`` before and after) plus this process (scheduler and
    orchestration). Peak memory: each worker's ``VmHWM`` (:func:`dimbsvm.environment.peak_rss_bytes`).
``warmup``
    The second worker's numba warm-up on one host: (a) workers spawned with
    a shared numba cache directory (:class:`~dimbsvm.distributed.warmup.NumbaCacheDir`),
    warmed one after the other; (b) workers forked from a prewarmed
    forkserver (:func:`~dimbsvm.distributed.warmup.prewarm_forkserver`).
``summary``
    Aggregates the result files below ``--out`` into ``summary.json``
    (medians over repeats, ratios against the single index of the same run
    directory); :func:`render_markdown` renders it (``benchmarks/results.py``).

Usage (from the repository root)::

    python -m benchmarks.knn_scale --n 1000000 --strategies single partitioned sharded --repeats 3
    python -m benchmarks.knn_scale --n 10000000 --strategies partitioned --timeout 2400
    python -m benchmarks.knn_scale --stage warmup
    # 16 cores: 1..16 workers at 10^7, each configuration under 8 minutes
    python -m benchmarks.knn_scale --n 10000000 --strategies single partitioned --workers 1 2 4 8 16 \\
        --timeout 480 --out $OUT/knn-scale
    python -m benchmarks.knn_scale --stage summary --out $OUT/knn-scale
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from dimbsvm.environment import machine_info, package_versions, peak_rss_bytes, utc_now
from dimbsvm.graph.partitioned import DEFAULT_MAX_PARTITION_ROWS

logger = logging.getLogger("benchmarks.knn_scale")

K = 10
D = 32
CENTERS = 50
BLOCK = 4096
SAMPLE = 2000
KIND = "knn_scale"
STRATEGIES = ("single", "partitioned", "sharded")

#: Versions recorded with every result.
PACKAGES = ("dimbsvm", "numpy", "scikit-learn", "dask", "distributed", "zarr", "pynndescent", "numba")


def blobs(n, *, d=D, centers=CENTERS, seed=0, chunks=50_000):
    """Lazy clustered rows (dask array, float32); row values depend only on (seed, d, row index)."""
    import dask
    import dask.array as da

    means = np.random.default_rng([seed, 0]).uniform(-10, 10, size=(centers, d))

    def block(b):
        rng = np.random.default_rng([seed, 1, b])
        rows = min(BLOCK, n - b * BLOCK)
        return (means[rng.integers(centers, size=rows)] + rng.normal(size=(rows, d))).astype(np.float32)

    parts = [da.from_delayed(dask.delayed(block)(b), shape=(min(BLOCK, n - b * BLOCK), d), dtype=np.float32)
             for b in range(-(-n // BLOCK))]
    return da.concatenate(parts).rechunk((chunks, d))


def fixed_sample(n):
    """The rows whose exact neighbours every strategy measures recall on (sorted)."""
    return np.sort(np.random.RandomState(0).choice(n, size=min(SAMPLE, n), replace=False))


def exact_sample_neighbors(X, rows, k=K, *, block=100_000):
    """Exact ``k`` nearest other rows of ``X[rows]``, reading ``X`` (numpy or zarr) ``block`` rows at a time."""
    from sklearn.neighbors import NearestNeighbors

    from dimbsvm.graph.knn import drop_self

    sample = np.asarray(X.get_orthogonal_selection((rows, slice(None))) if hasattr(X, "get_orthogonal_selection")
                        else X[rows])
    ind, dist = np.empty((len(rows), 0), dtype=np.int64), np.empty((len(rows), 0))
    for start in range(0, X.shape[0], block):
        part = np.asarray(X[start:start + block])
        d_part, i_part = NearestNeighbors(algorithm="brute").fit(part).kneighbors(sample, min(k + 1, len(part)))
        ind, dist = np.concatenate([ind, i_part + start], axis=1), np.concatenate([dist, d_part], axis=1)
        order = np.lexsort((ind, dist), axis=-1)[:, :k + 1]
        ind, dist = np.take_along_axis(ind, order, axis=1), np.take_along_axis(dist, order, axis=1)
    return drop_self(ind, dist, rows)[0]


def _cpu_s():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_mib():
    return peak_rss_bytes() / 2**20


def _worker_usage():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu": usage.ru_utime + usage.ru_stime, "maxrss": peak_rss_bytes()}


def data_store(args):
    """The store of ``blobs(args.n)`` under the cache (ingested once) and the fixed sample's exact neighbours."""
    import zarr

    from dimbsvm.store import ingest

    cache = Path(args.cache)
    path = cache / f"blobs-{args.n}-d{args.d}-c{args.chunk_rows}.zarr"
    if not (path / "zarr.json").exists():
        tic = time.perf_counter()
        ingest((blobs(args.n, d=args.d, chunks=args.chunk_rows), np.zeros(args.n, dtype=np.int32)), path,
               chunk_rows=args.chunk_rows)
        logger.info("ingested %s in %.1f s", path, time.perf_counter() - tic)
    exact_path = cache / f"exact-blobs-{args.n}-d{args.d}-k{K}-sample{SAMPLE}.npy"
    if not exact_path.exists():
        tic = time.perf_counter()
        np.save(exact_path, exact_sample_neighbors(zarr.open_array(str(path / "X"), mode="r"), fixed_sample(args.n)))
        logger.info("exact neighbours of the fixed sample in %.1f s", time.perf_counter() - tic)
    return path, np.load(exact_path)


def run_single(args, width):
    """One pynndescent index over all rows in this process, numba threads = cores."""
    import zarr

    from dimbsvm.graph.knn import KNNIndex, recall_of, warm_up

    path, exact = data_store(args)
    X = zarr.open_array(str(path / "X"), mode="r")[:]
    warm = warm_up()
    tic, cpu = time.perf_counter(), _cpu_s()
    index = KNNIndex(K, method="pynndescent", build_neighbors=width, random_state=0,
                     **_candidates(args.max_candidates)).fit(X)
    indices = index.neighbor_graph(K)[0]
    wall, cpu = time.perf_counter() - tic, _cpu_s() - cpu
    return {"build_neighbors": width, "wall_s": wall, "cpu_s": cpu, "warm_up_s": warm,
            "max_candidates": index.max_candidates_,
            "recall": recall_of(indices[fixed_sample(args.n)], exact), "peak_rss_mib": _peak_mib(),
            "threads": os.cpu_count(), "data_bytes": int(X.nbytes)}


def run_cluster(args, strategy, workers):
    """The stored build on a LocalCluster of ``workers`` single-threaded worker processes."""
    import shutil

    import zarr
    from distributed import Client, LocalCluster

    from dimbsvm.distributed.warmup import warm_up_workers
    from dimbsvm.graph import open_knn_graph
    from dimbsvm.graph.knn import recall_of
    from dimbsvm.model_selection.graph_build import knn_graph

    path, exact = data_store(args)
    shutil.rmtree(path / "knn", ignore_errors=True)  # time a fresh build, not the reuse of a finished one
    options = ({"overlap": args.overlap, "max_partition_rows": args.max_partition_rows,
                "target_recall": args.target_recall, "refine": args.refine, "max_rounds": args.max_rounds,
                "overlap_radius": _radius(args.overlap_radius), **_candidates(args.max_candidates)}
               if strategy == "partitioned" else {"shard_rows": args.shard_rows})
    tic = time.perf_counter()
    if args.prewarm:  # workers forked from one process that compiled pynndescent
        from dask.utils import parse_bytes

        from dimbsvm.distributed.warmup import prewarm_forkserver

        prewarm_forkserver(memory_limit=parse_bytes(args.memory_limit))  # (forked workers: dimbsvm's malloc settings)
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, memory_limit=args.memory_limit,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        start_s = time.perf_counter() - tic
        tic = time.perf_counter()
        warm = warm_up_workers(client)
        warm_s = time.perf_counter() - tic
        before, tic, cpu = client.run(_worker_usage), time.perf_counter(), _cpu_s()
        knn_graph(str(path), K, method=args.method, build_neighbors=args.width, random_state=0, client=client,
                  strategy=strategy, recall_sample=SAMPLE, **options)
        wall, client_cpu = time.perf_counter() - tic, _cpu_s() - cpu
        after = client.run(_worker_usage)
    meta = open_knn_graph(path).meta
    found = zarr.open_array(str(path / "knn" / "indices"), mode="r").get_orthogonal_selection(
        (fixed_sample(args.n), slice(None)))
    worker_cpu = sum(after[w]["cpu"] - before[w]["cpu"] for w in after if w in before)
    return {"workers": workers, "wall_s": wall, "cpu_s": worker_cpu + client_cpu, "worker_cpu_s": worker_cpu,
            "client_cpu_s": client_cpu, "warm_up_s": warm_s, "warm_up_per_worker_s": warm,
            "cluster_start_s": start_s, "prewarmed_forkserver": args.prewarm,
            "recall": recall_of(found, exact), "stage_recall": meta.get("recall"), "stage_recalls": meta.get("recalls"),
            "rounds": meta.get("rounds"), "round_widths": meta.get("round_widths"), "timings": meta.get("timings"),
            "stage_cpu_s": meta.get("cpu_s"),
            "build_neighbors": meta.get("build_neighbors"), "n_partitions": meta.get("n_partitions"),
            "max_candidates": meta.get("max_candidates"),
            "n_shards": meta.get("n_shards"), "max_partition_rows_held": max(meta.get("partition_rows") or [0]),
            "peak_worker_rss_mib": max(a["maxrss"] for a in after.values()) / 2**20,
            "peak_worker_rss_mib_by_worker": {w: a["maxrss"] / 2**20 for w, a in after.items()},
            "client_peak_rss_mib": _peak_mib(), "memory_limit": args.memory_limit, "options": options,
            "method": args.method}


def _candidates(text):
    """``--max-candidates``: not given (each build's default), "pynndescent" (its default) or an integer."""
    if text is None:
        return {}
    return {"max_candidates": None if text.lower() == "pynndescent" else int(text)}


def _radius(text):
    """``--overlap-radius``: "auto", "none" (every row in its ``overlap`` nearest partitions) or a float."""
    if text.lower() == "auto":
        return "auto"
    return None if text.lower() == "none" else float(text)


def run_warmup(args):
    """Seconds the second worker on a host spends compiling pynndescent: spawned with a shared cache, and forked."""
    import tempfile

    from distributed import Client, LocalCluster

    from dimbsvm.distributed.warmup import NumbaCacheDir, prewarm_forkserver

    result = {}
    if args.warmup_mode == "spawn":
        cache = tempfile.mkdtemp(prefix="numba-shared-")
        os.environ["NUMBA_CACHE_DIR"] = cache  # the spawned workers inherit it; the plugin says so too
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            client.register_plugin(NumbaCacheDir(cache))
            first, second = list(client.scheduler_info(n_workers=-1)["workers"])
            for name, worker in (("first_worker_s", first), ("second_worker_s", second)):  # one after the other
                result[name] = client.submit(_timed_build, workers=[worker], pure=False).result()
        result["numba_cache_dir"] = cache
    else:
        tic = time.perf_counter()
        prewarm_forkserver()
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            result["cluster_start_s"] = time.perf_counter() - tic  # includes the forkserver's one compile
            first, second = list(client.scheduler_info(n_workers=-1)["workers"])
            for name, worker in (("first_worker_s", first), ("second_worker_s", second)):
                result[name] = client.submit(_timed_build, workers=[worker], pure=False).result()
    result["mode"] = args.warmup_mode
    return result


def _timed_build():
    """A first NN-descent build in this worker, timed (what a kNN task would pay before any work)."""
    from dimbsvm.graph.knn import KNNIndex

    X = np.random.RandomState(1).rand(2000, 8).astype(np.float32)
    tic = time.perf_counter()
    KNNIndex(10, method="pynndescent", random_state=0).fit(X).neighbor_graph()
    return time.perf_counter() - tic


# --- driver ------------------------------------------------------------------------------------------


def _child(args):
    """Run one configuration in this process; print its JSON."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.stage == "warmup":
        result = run_warmup(args)
    elif args.strategy == "single":
        result = run_single(args, args.width)
    else:
        result = run_cluster(args, args.strategy, args.workers[0])
    print("RESULT " + json.dumps(result))


def _run_child(argv, timeout, log_path):
    """Run ``argv`` in a new process group; kill the group past ``timeout`` seconds."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return None, "timed out"
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        return None, f"exit status {proc.returncode}; see {log_path}"
    return json.loads(lines[-1][len("RESULT "):]), None


def _configurations(args):
    if args.stage == "warmup":
        return [("warmup", mode, None, None) for mode in ("spawn", "forkserver")]
    configs = []
    for strategy in args.strategies:
        if strategy == "single":
            configs += [("single", None, width, None) for width in args.single_widths]
        else:
            configs += [(strategy, None, args.width, w) for w in args.workers]
    return configs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stage", choices=("run", "warmup", "summary"), default="run")
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=D)
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=["single", "partitioned"])
    parser.add_argument("--workers", type=int, nargs="+", default=[2], help="worker processes (1 thread each)")
    parser.add_argument("--single-widths", type=int, nargs="+", default=[25])
    parser.add_argument("--width", type=int, default=None, help="build width of the partitioned/sharded build")
    parser.add_argument("--overlap", type=int, default=2)
    parser.add_argument("--max-partition-rows", type=int, default=None)
    parser.add_argument("--target-recall", type=float, default=0.95)
    parser.add_argument("--overlap-radius", default="auto",
                        help="'auto', 'none' (always the overlap nearest partitions) or a distance")
    parser.add_argument("--method", choices=("pynndescent", "exact", "auto"), default="pynndescent",
                        help="each partition's (or shard's) graph: NN-descent, or exact blocked distances")
    parser.add_argument("--refine", choices=("rebuild", "neighbors"), default="rebuild",
                        help="the partitioned build's refinement round")
    parser.add_argument("--max-rounds", type=int, default=2, help="refinement rounds at most (partitioned)")
    parser.add_argument("--max-candidates", default=None,
                        help="NN-descent candidates per row and iteration (single and partitioned): an integer, or "
                             "'pynndescent' for its default min(60, width); not given: each build's default")
    parser.add_argument("--shard-rows", type=int, default=250_000)
    parser.add_argument("--chunk-rows", type=int, default=50_000)
    parser.add_argument("--memory-limit", default="4GiB", help="per worker")
    parser.add_argument("--no-prewarm", dest="prewarm", action="store_false",
                        help="spawn workers that each compile numba (default: fork them from a prewarmed forkserver)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=2400, help="seconds per configuration and repeat")
    parser.add_argument("--cache", default="/tmp/knn-cache", help="stores and exact answers shared between runs")
    parser.add_argument("--out", default="benchmarks/results/knn-scale")
    parser.add_argument("--tag", default="", help="appended to result file names")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--strategy", help=argparse.SUPPRESS)
    parser.add_argument("--warmup-mode", help=argparse.SUPPRESS)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    command = "python -m benchmarks.knn_scale " + shlex.join(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.stage == "summary":
        summary = summarize(out, command=command)
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        logger.info("wrote %s from %d result files", out / "summary.json", len(summary["files"]))
        return None
    Path(args.cache).mkdir(parents=True, exist_ok=True)
    if args.stage == "run":
        data_store(args)  # ingest and exact answers once, outside every timed run
    for strategy, mode, width, workers in _configurations(args):
        for repeat in range(args.repeats if strategy != "warmup" else 1):
            name = (f"{strategy}-{mode}" if mode else
                    f"{strategy}-{args.n}" + (f"-w{width}" if width else "") + (f"-x{workers}" if workers else ""))
            name += (f"-{args.tag}" if args.tag else "") + f"-r{repeat}"
            child = [sys.executable, "-m", "benchmarks.knn_scale", *argv, "--child", "--strategy", strategy]
            child += ["--workers", str(workers)] if workers else []
            child += ["--width", str(width)] if width else []
            child += ["--warmup-mode", mode] if mode else []
            started, tic = utc_now(), time.perf_counter()
            result, error = _run_child(child, args.timeout, out / f"{name}.log")
            record = {"stage": strategy, "n": args.n, "d": args.d, "k": K, "repeat": repeat, "tag": args.tag,
                      "error": error, "timeout_s": args.timeout, "process_wall_s": time.perf_counter() - tic,
                      "command": command, "date": started, "machine": machine_info(),
                      "packages": package_versions(PACKAGES), **(result or {})}
            (out / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n")
            logger.info("%s: %s", name, error or {key: record.get(key) for key in ("wall_s", "cpu_s", "recall")})
    return None


# --- summary -----------------------------------------------------------------------------------------


def _median(values):
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


_GROUP = ("stage", "n", "d", "workers", "build_neighbors", "max_candidates", "tag", "mode")
_MEDIANS = ("wall_s", "cpu_s", "worker_cpu_s", "client_cpu_s", "recall", "stage_recall", "warm_up_s",
            "peak_rss_mib", "peak_worker_rss_mib", "first_worker_s", "second_worker_s", "cluster_start_s")


def summarize(out, command=None):
    """Aggregate the result files below ``out`` into the ``knn_scale`` summary (a dict).

    Runs of one configuration (same stage, n, d, workers, width, candidates, tag) are
    grouped: medians of wall, CPU, recall and memory over the repeats that
    finished, and the repeats that did not (timed out or failed) counted.
    ``comparisons`` set each partitioned or sharded group against the single
    index of the same n and d: the cheapest single width whose recall is at
    least the group's (else the most accurate single width, marked so).
    """
    out = Path(out)
    files = sorted(p for p in out.rglob("*.json") if p.name != "summary.json")
    groups = {}
    for path in files:
        result = json.loads(path.read_text())
        if result.get("stage") not in (*STRATEGIES, "warmup"):
            continue
        key = tuple(result.get(name) for name in _GROUP)
        groups.setdefault(key, []).append((path, result))
    rows = []
    for key, runs in sorted(groups.items(), key=lambda item: [str(v) for v in item[0]]):
        done = [r for _, r in runs if not r.get("error")]
        row = dict(zip(_GROUP, key), repeats=len(done), failed=[r["error"] for _, r in runs if r.get("error")],
                   files=[str(p.relative_to(out)) for p, _ in runs], command=runs[0][1].get("command"),
                   date=min(r.get("date", "") for _, r in runs), timeout_s=runs[0][1].get("timeout_s"))
        row.update({name: _median([r.get(name) for r in done]) for name in _MEDIANS})
        for name in ("rounds", "round_widths", "stage_recalls", "n_partitions", "n_shards", "max_partition_rows_held",
                     "timings", "method",
                     "stage_cpu_s", "options", "memory_limit", "threads", "data_bytes"):
            row[name] = done[-1].get(name) if done else None
        rows.append(row)
    single = [r for r in rows if r["stage"] == "single" and r["repeats"]]
    comparisons = []
    for row in rows:
        if row["stage"] not in ("partitioned", "sharded") or not row["repeats"]:
            continue
        same = [s for s in single if (s["n"], s["d"]) == (row["n"], row["d"])]
        if not same:
            continue
        enough = [s for s in same if s["recall"] >= row["recall"]]
        base = min(enough, key=lambda s: s["cpu_s"]) if enough else max(same, key=lambda s: s["recall"])
        comparisons.append({"stage": row["stage"], "n": row["n"], "d": row["d"], "workers": row["workers"],
                            "tag": row["tag"], "recall": row["recall"], "single_width": base["build_neighbors"],
                            "single_max_candidates": base.get("max_candidates"),
                            "single_recall": base["recall"], "single_at_least_equal_recall": bool(enough),
                            "cpu_ratio": row["cpu_s"] / base["cpu_s"], "wall_ratio": row["wall_s"] / base["wall_s"],
                            "memory_ratio": row["peak_worker_rss_mib"] / base["peak_rss_mib"]})
    commands = sorted({r["command"] for r in rows if r["command"]} | ({command} if command else set()))
    return {"kind": KIND, "title": "kNN graphs at scale: partitioned build, single index, sharded build",
            "description": ("Clustered Gaussian blobs (50 centres), k = 10, float32. Recall against the exact "
                            f"neighbours of one fixed {SAMPLE}-row sample, the same rows for every strategy. "
                            "Medians over the repeats that finished. CPU is process CPU (all threads) of the "
                            "single index, or of the workers plus the client/scheduler process for the cluster "
                            "builds; numba compilation is excluded from both (reported as warm-up)."),
            "date": utc_now(), "machine": machine_info(), "packages": package_versions(PACKAGES),
            "command": commands, "results_dir": str(out), "files": [str(p.relative_to(out)) for p in files],
            "runs": rows, "comparisons": comparisons}


def _f(value, fmt=".1f"):
    return "–" if value is None else format(value, fmt)


def _candidates_label(value):
    """A record's NN-descent candidates: a number, or pynndescent's default (records before they were kept)."""
    return "min(60, width)" if value is None else str(value)


def _widths(widths):
    return " -> ".join(str(w) for w in widths) if widths else "–"


def render_markdown(summary):
    """The ``knn_scale`` summary as markdown tables (for ``benchmarks/results.py``).

    Examples
    --------
    >>> run = {"stage": "single", "n": 10, "d": 2, "workers": None, "build_neighbors": 5, "tag": "", "repeats": 1,
    ...        "failed": [], "wall_s": 1.0, "cpu_s": 2.0, "recall": 0.9, "peak_rss_mib": 100.0}
    >>> print(render_markdown({"runs": [run]}).splitlines()[4])
    | single | 10 | 2 | – | 5 | min(60, width) | 1 | 1.0 | 2.0 | 0.9000 | – | – | 100 | – | – |
    """
    lines = []
    runs = [r for r in summary.get("runs", []) if r["stage"] != "warmup"]
    if runs:
        lines += ["### Builds", "",
                  ("| strategy | n | d | workers | width | NN-descent candidates | repeats (failed) | wall s | CPU s "
                   "| recall | rounds | round widths | peak RSS MiB (per worker) | warm-up s | largest task rows |"),
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in runs:
            failed = f" ({len(r['failed'])}: {', '.join(sorted(set(r['failed'])))})" if r.get("failed") else ""
            peak = r.get("peak_worker_rss_mib") if r["stage"] != "single" else r.get("peak_rss_mib")
            lines.append(f"| {r['stage']}{'-' + r['tag'] if r.get('tag') else ''} | {r['n']:,} | {r['d']} | "
                         f"{r.get('workers') or '–'} | {r.get('build_neighbors') or '–'} | "
                         f"{_candidates_label(r.get('max_candidates'))} | {r['repeats']}{failed} | "
                         f"{_f(r.get('wall_s'))} | {_f(r.get('cpu_s'))} | {_f(r.get('recall'), '.4f')} | "
                         f"{_f(r.get('rounds'), 'd')} | {_widths(r.get('round_widths'))} | {_f(peak, '.0f')} | "
                         f"{_f(r.get('warm_up_s'))} | "
                         f"{_f(r.get('max_partition_rows_held'), ',d')} |")
        lines.append("")
    parts = [r for r in runs if r["stage"] == "partitioned" and r.get("method")]
    if parts:
        lines += ["### Partitioned builds by partition graph (CPU s by step)", "",
                  ("| strategy | n | each partition's graph | overlap | budget (rows) | partitions | refinement "
                   "| round 0 recall (stage sample) | recall (fixed sample) | wall s | route | partitions | merges "
                   "| refinement |"),
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in parts:
            o, cpu, recalls = r.get("options") or {}, r.get("stage_cpu_s") or {}, r.get("stage_recalls") or [None]
            graph = "exact" if r["method"] == "exact" else f"NN-descent {_widths(r.get('round_widths'))}"
            budget = o.get("max_partition_rows") or DEFAULT_MAX_PARTITION_ROWS
            lines.append(f"| {r['stage']}{'-' + r['tag'] if r.get('tag') else ''} | {r['n']:,} | {graph} | "
                         f"{o.get('overlap', '–')} | {_f(budget, ',d')} | "
                         f"{_f(r.get('n_partitions'), ',d')} | {o.get('refine', '–')} x {_f(r.get('rounds'), 'd')} | "
                         f"{_f(recalls[0], '.4f')} | {_f(r.get('recall'), '.4f')} | {_f(r.get('wall_s'))} | "
                         + " | ".join(_f(cpu.get(step)) for step in ("route", "partition", "merge", "refine"))
                         + " |")
        lines.append("")
    comparisons = summary.get("comparisons", [])
    if comparisons:
        lines += ["### Against one threaded index (same n, same sample rows)", "",
                  ("| strategy | n | workers | recall | single width | single candidates | single recall "
                   "| single ≥ recall | CPU ratio | wall ratio | peak memory ratio (worker / single process) |"),
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for c in comparisons:
            lines.append(f"| {c['stage']}{'-' + c['tag'] if c.get('tag') else ''} | {c['n']:,} | {c['workers']} | "
                         f"{c['recall']:.4f} | {c['single_width']} | "
                         f"{_candidates_label(c.get('single_max_candidates'))} | {c['single_recall']:.4f} | "
                         f"{'yes' if c['single_at_least_equal_recall'] else 'no'} | {c['cpu_ratio']:.2f} | "
                         f"{c['wall_ratio']:.2f} | {c['memory_ratio']:.2f} |")
        lines.append("")
    targets = _targets(summary)
    if targets:
        lines += ["### Targets (issue 16)", "", *[f"- {t}" for t in targets], ""]
    warm = [r for r in summary.get("runs", []) if r["stage"] == "warmup"]
    if warm:
        lines += ["### numba warm-up of two workers on one host", "",
                  "| mode | first worker s | second worker s | cluster start s |", "|---|---|---|---|"]
        for r in warm:
            lines.append(f"| {r['mode']} | {_f(r.get('first_worker_s'))} | {_f(r.get('second_worker_s'))} | "
                         f"{_f(r.get('cluster_start_s'))} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _targets(summary):
    """Each target of issue 16 this summary can speak to: met or not, and on which numbers."""
    lines = []
    default = {(r["stage"], r["n"], r["workers"], r["tag"]) for r in summary.get("runs", [])
               if r.get("method") in (None, "pynndescent")}  # exact-leaf runs are experiments, not the build
    for c in summary.get("comparisons", []):
        if (c["stage"] == "partitioned" and c["n"] == 1_000_000
                and (c["stage"], c["n"], c["workers"], c["tag"]) in default):
            met = c["recall"] >= 0.95 and c["single_at_least_equal_recall"] and c["cpu_ratio"] <= 1.5
            lines.append(f"10^6, {c['workers']} workers: recall {c['recall']:.4f} >= 0.95 with CPU <= 1.5x the "
                         f"single index at equal recall (width {c['single_width']}, "
                         f"{_candidates_label(c.get('single_max_candidates'))} candidates, {c['single_recall']:.4f}): "
                         f"{c['cpu_ratio']:.2f}x - {'met' if met else 'not met'}"
                         + ("" if c["single_at_least_equal_recall"] else
                            " (no single width reached this recall: ratio against the most accurate one)"))
    for r in summary.get("runs", []):
        if r["stage"] == "partitioned" and r["n"] >= 10_000_000 and r.get("method") in (None, "pynndescent"):
            if r["repeats"]:
                lines.append(f"10^7, {r['workers']} workers: recall {r['recall']:.4f} measured - "
                             f"{'met' if r['recall'] >= 0.95 else 'not met'} ({r['wall_s']:.0f} s wall, "
                             f"{r['cpu_s']:.0f} CPU s, {r['peak_worker_rss_mib']:.0f} MiB peak per worker)")
            else:
                lines.append(f"10^7, {r['workers']} workers: not finished ({', '.join(r['failed'])})")
        if r["stage"] == "warmup" and r.get("second_worker_s") is not None:
            lines.append(f"second worker's numba warm-up, {r['mode']}: {r['second_worker_s']:.1f} s - "
                         f"{'met' if r['second_worker_s'] <= 5 else 'not met'} (target <= 5 s)")
    return lines


__all__ = ["blobs", "exact_sample_neighbors", "fixed_sample", "main", "render_markdown", "summarize"]

if __name__ == "__main__":
    main()
