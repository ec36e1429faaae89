"""kNN graphs at scale: pynndescent width vs recall, exact extrapolation, the sharded build, numba compile.

Data: clustered Gaussian blobs (:func:`blobs`): 50 centres uniform in
[-10, 10]^d (``--d``, default 32), unit-variance clusters, float32, generated
lazily in 4096-row blocks seeded by block number (any chunking gives the same
rows). k = 10. Recall is measured against exact neighbours of a 2,000-row
sample; the ``single`` stage and the ``sharded`` stage's ``recall_fixed_sample``
use the same rows (``RandomState(0)``), so their recalls compare on the same
rows.

Each stage runs in a fresh Python process, so its compile time and peak
resident memory (``ru_maxrss``) are its own:

``compile``
    ``import pynndescent``, the first NN-descent build (numba compilation,
    :func:`dimbsvm.graph.knn.warm_up`) and the same build again (warm). With
    ``--cold-cache`` also in a process whose numba cache directory is empty
    (what a container with a read-only site-packages pays).
``single``
    The rows in memory, one index (``KNNIndex(10, method="pynndescent",
    build_neighbors=w)``) for each width ``w`` of ``--widths``: build time and
    recall on the sample. scikit-learn's exact brute force
    (``NearestNeighbors(algorithm="brute")``) is timed for the sample's query
    rows against all n rows and extrapolated linearly to n query rows (an
    extrapolation, stated as such in the output; the exact search of all n
    rows is not run).
``sharded``
    The rows ingested into a Zarr store (:func:`dimbsvm.store.ingest`, float32,
    ``--chunk-rows`` rows per chunk), then the sharded build
    (:func:`dimbsvm.graph.build_sharded_graph`, ``--shard-rows``) on a
    ``LocalCluster`` of 2 worker processes with one thread each and
    ``--memory-limit`` per worker: the stage's timings (wall and CPU per
    shard), recall, each worker's peak resident memory (``ru_maxrss`` reported
    by the tasks and read again at the end), the peak of Dask's own per-worker
    memory metric (polled every 0.5 s), whether a worker was paused or
    replaced, and the store's uncompressed size against the memory limit.
``summary``
    Aggregates every ``*.json`` result below ``--out`` into ``summary.json``
    (``"kind": "knn_scale"``); :func:`render_markdown` turns it into tables
    (``benchmarks/results.py`` calls it). Numbers are only ever read from the
    result files.

Usage (from the repository root)::

    python -m benchmarks.knn_scale --stage compile --cold-cache
    python -m benchmarks.knn_scale --stage single --n 100000 --widths 11 20 25 30
    python -m benchmarks.knn_scale --stage sharded --n 1000000 --shard-rows 250000 --memory-limit 1.5GiB
    # data larger than each worker's memory limit, and the single index on the same rows:
    python -m benchmarks.knn_scale --stage single --n 1500000 --d 256 --intrinsic-d 32 --widths 25 \
        --cache /tmp/knn-cache
    python -m benchmarks.knn_scale --stage sharded --n 1500000 --d 256 --intrinsic-d 32 --shard-rows 150000 \
        --chunk-rows 25000 --memory-limit 1.25GiB --cache /tmp/knn-cache --tag limit1.25GiB
    python -m benchmarks.knn_scale --stage summary

Why 256 columns for the memory-limited run: a worker holds about 0.6 GiB
before any data (pynndescent's compiled code), so its limit cannot be much
below 1 GiB, and the data must exceed it. At 32 float32 columns that is 8
million rows, and the sharded build's query work grows as n^2 / shard_rows
(each row is queried against every other shard): hours on two cores. With
256 columns per row the same bytes are 8x fewer rows. ``--intrinsic-d 32``
maps the 32-column blobs isometrically into 256 columns, so the neighbours
(and the recall one should expect) are those of the 32-column data; plain
256-column blobs have 256-dimensional clusters in which NN-descent with
width 25 found only about half of the true neighbours.

Results are written as JSON to ``--out`` (default ``benchmarks/results/knn-scale``),
one file per run, named ``<stage>-<variant>-<n>[-d<d>][-<tag>].json``; the
worker logs of a sharded run go beside it (``.log``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import itertools
import json
import logging
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from .environment import machine_info, package_versions, utc_now

logger = logging.getLogger("benchmarks.knn_scale")

K = 10
D = 32
CENTERS = 50
BLOCK = 4096
SAMPLE = 2000
KIND = "knn_scale"

#: Versions recorded with every result.
PACKAGES = ("dimbsvm", "numpy", "scikit-learn", "dask", "distributed", "zarr", "pynndescent", "numba")

#: Lines of a sharded run's worker log counted into the result: the memory monitor pausing a worker (above
#: the pause fraction of its limit, 80 % by default) and the nanny restarting one above the terminate fraction
#: (95 %). (A nanny killing a worker that is slow to exit when the cluster closes is not counted.)
_LOG_EVENTS = {
    "log_pause_events": re.compile(r"Pausing worker"),
    "log_memory_restarts": re.compile(r"exceeded \d+% memory budget"),
}


def blobs(n, *, d=D, centers=CENTERS, seed=0, chunks=50_000, intrinsic_d=None):
    """Lazy clustered rows (dask array, float32); row values depend only on (seed, d, intrinsic_d, row index).

    With ``intrinsic_d`` (< ``d``), the rows are the ``intrinsic_d``-column
    blobs mapped into ``d`` columns by a fixed random matrix with orthonormal
    columns: an isometry, so the neighbours are those of the
    ``intrinsic_d``-column rows while each row takes ``d`` columns of memory
    and every distance costs ``d`` columns of arithmetic.
    """
    import dask
    import dask.array as da

    k = intrinsic_d or d
    if not 1 <= k <= d:
        raise ValueError(f"intrinsic_d must be in [1, d={d}]; got {intrinsic_d!r}")
    means = np.random.default_rng([seed, 0]).uniform(-10, 10, size=(centers, k))
    basis = None
    if k < d:
        basis = np.linalg.qr(np.random.default_rng([seed, 2, d, k]).normal(size=(d, k)))[0].T  # (k, d)

    def block(b):
        rng = np.random.default_rng([seed, 1, b])
        rows = min(BLOCK, n - b * BLOCK)
        values = means[rng.integers(centers, size=rows)] + rng.normal(size=(rows, k))
        return (values if basis is None else values @ basis).astype(np.float32)

    n_blocks = -(-n // BLOCK)
    parts = [da.from_delayed(dask.delayed(block)(b), shape=(min(BLOCK, n - b * BLOCK), d),
                             dtype=np.float32) for b in range(n_blocks)]
    return da.concatenate(parts).rechunk((chunks, d))


def fixed_sample(n):
    """The rows whose exact neighbours every stage measures recall on (sorted)."""
    return np.sort(np.random.RandomState(0).choice(n, size=min(SAMPLE, n), replace=False))


def exact_sample_neighbors(X, rows, k=K, *, block=50_000):
    """Exact ``k`` nearest other rows of ``X[rows]``, reading ``X`` (numpy or zarr) ``block`` rows at a time.

    Returns
    -------
    indices : ndarray of shape (len(rows), k)
    """
    from sklearn.neighbors import NearestNeighbors

    from dimbsvm.graph.knn import drop_self

    n = X.shape[0]
    sample = np.asarray(X.get_orthogonal_selection((rows, slice(None))) if hasattr(X, "get_orthogonal_selection")
                        else X[rows])
    ind = np.empty((len(rows), 0), dtype=np.int64)
    dist = np.empty((len(rows), 0))
    for start in range(0, n, block):
        part = np.asarray(X[start:start + block])
        d_part, i_part = NearestNeighbors(algorithm="brute").fit(part).kneighbors(sample, min(k + 1, len(part)))
        ind = np.concatenate([ind, i_part + start], axis=1)
        dist = np.concatenate([dist, d_part], axis=1)
        order = np.lexsort((ind, dist), axis=-1)[:, :k + 1]
        ind, dist = np.take_along_axis(ind, order, axis=1), np.take_along_axis(dist, order, axis=1)
    return drop_self(ind, dist, rows)[0]


def _data_name(n, d, intrinsic_d):
    return f"blobs-{n}" + (f"-d{d}" if d != D else "") + (f"-i{intrinsic_d}" if intrinsic_d else "")


def _exact_cache(cache, n, d, intrinsic_d=None):
    name = f"exact-{_data_name(n, d, intrinsic_d)}-k{K}-sample{SAMPLE}.npy"
    return Path(cache) / name if cache else None


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

    n, d = args.n, args.d
    tic = time.perf_counter()
    X = blobs(n, d=d, intrinsic_d=args.intrinsic_d).compute(scheduler="threads")
    result = {"n": n, "d": d, "intrinsic_d": args.intrinsic_d or d, "k": K, "data_bytes": int(X.nbytes),
              "generate_s": time.perf_counter() - tic, "load_before": _load()}
    result["warm_up_s"] = warm_up()
    rows = fixed_sample(n)
    tic, cpu = time.perf_counter(), _cpu_s()
    exact = NearestNeighbors(algorithm="brute").fit(X).kneighbors(X[rows], K + 1)[1]
    sample_s = time.perf_counter() - tic
    result["exact_sample_cpu_s"] = _cpu_s() - cpu
    exact = drop_self(exact, exact * 1.0, rows)[0]
    cache = _exact_cache(args.cache, n, d, args.intrinsic_d)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, exact)
    result["exact_sample_rows"] = int(rows.size)
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
                                 "speedup_vs_exact": result["exact_extrapolated_s"] / seconds,
                                 "peak_rss_mib_so_far": _peak_mib()})
        logger.info("n=%d d=%d width=%d: %.1f s, recall %.4f", n, d, width, seconds, recall)
        del index, indices
    result["peak_rss_mib"] = _peak_mib()
    result["load_after"] = _load()
    return result


class _WorkerWatch(threading.Thread):
    """Poll the scheduler's view of the workers: peak memory metric, statuses seen, addresses seen."""

    def __init__(self, client, interval=0.5):
        super().__init__(daemon=True)
        self.client, self.interval = client, interval
        self.peak, self.statuses, self.limits = {}, {}, {}
        self.timeline = []  # (seconds since start, {worker: MiB}) every `record_every` seconds
        self._stop_event = threading.Event()

    def run(self, record_every=5.0):
        start = last = time.perf_counter()
        while not self._stop_event.is_set():
            try:
                workers = self.client.scheduler_info(n_workers=-1)["workers"]
            except Exception:  # noqa: BLE001  (the cluster is closing)
                break
            for address, info in workers.items():
                self.peak[address] = max(self.peak.get(address, 0), int(info["metrics"]["memory"]))
                self.statuses.setdefault(address, set()).add(str(info.get("status")))
                self.limits[address] = info.get("memory_limit")
            now = time.perf_counter()
            if now - last >= record_every or not self.timeline:
                self.timeline.append((round(now - start, 1), {a: round(i["metrics"]["memory"] / 2**20)
                                                              for a, i in workers.items()}))
                last = now
            self._stop_event.wait(self.interval)

    def stop(self):
        self._stop_event.set()
        self.join(timeout=10)


def _worker_maxrss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def stage_sharded(args):
    import zarr
    from dask.utils import parse_bytes
    from distributed import Client, LocalCluster

    from dimbsvm.graph import build_sharded_graph, open_knn_graph
    from dimbsvm.graph.knn import recall_of
    from dimbsvm.store import ingest

    n, d = args.n, args.d
    cache = Path(args.cache or tempfile.mkdtemp(prefix="knn-scale-"))
    name = _data_name(n, d, args.intrinsic_d) + (f"-c{args.chunk_rows}" if args.chunk_rows != 50_000 else "")
    path = cache / f"{name}.zarr"
    result = {"n": n, "d": d, "intrinsic_d": args.intrinsic_d or d, "k": K, "memory_limit": args.memory_limit,
              "memory_limit_bytes": int(parse_bytes(args.memory_limit)), "shard_rows": args.shard_rows,
              "chunk_rows": args.chunk_rows, "build_neighbors": args.width, "query_epsilon": args.query_epsilon,
              "load_before": _load()}
    tic = time.perf_counter()
    if not path.exists():  # the rows depend only on n and d, so a store from an earlier run is the same data
        rows = blobs(n, d=d, chunks=args.chunk_rows, intrinsic_d=args.intrinsic_d)
        ingest((rows, np.zeros(n, dtype=np.int32)), path, chunk_rows=args.chunk_rows)
    result["ingest_s"] = time.perf_counter() - tic
    X = zarr.open_array(str(path / "X"), mode="r")
    result["data_bytes"] = int(X.nbytes)  # uncompressed rows the workers index
    result["data_dtype"] = str(X.dtype)
    result["data_over_memory_limit"] = result["data_bytes"] / result["memory_limit_bytes"]
    shutil.rmtree(path / "knn", ignore_errors=True)  # time a fresh build, not the reuse of a finished one
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=args.memory_limit,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        watch = _WorkerWatch(client)
        watch.start()
        result["worker_maxrss_start_mib"] = {w: b / 2**20 for w, b in client.run(_worker_maxrss).items()}
        tic = time.perf_counter()
        try:
            build_sharded_graph(str(path), K, method="pynndescent", build_neighbors=args.width,
                                shard_rows=args.shard_rows, random_state=0, recall_sample=SAMPLE, client=client,
                                query_epsilon=args.query_epsilon)
        finally:
            result["total_s"] = time.perf_counter() - tic
            watch.stop()
            result["dask_peak_memory_mib"] = {w: b / 2**20 for w, b in watch.peak.items()}
            result["worker_statuses_seen"] = {w: sorted(s) for w, s in watch.statuses.items()}
            result["workers_seen"] = len(watch.peak)
            result["dask_memory_timeline_mib"] = watch.timeline
        result["worker_maxrss_end_mib"] = {w: b / 2**20 for w, b in client.run(_worker_maxrss).items()}
        result["worker_memory_now_mib"] = {w: info["metrics"]["memory"] / 2**20
                                           for w, info in client.scheduler_info(n_workers=-1)["workers"].items()}
    result["paused"] = any("paused" in s for s in result["worker_statuses_seen"].values())
    meta = open_knn_graph(path).meta
    result.update(recall=meta["recall"], recall_rows=meta["recall_rows"], timings=meta["timings"],
                  n_shards=meta["n_shards"], shard_rows_used=meta["shard_rows"], shard_times=meta["shard_times"],
                  peak_worker_rss_mib={w: b / 2**20 for w, b in meta["peak_rss_bytes"].items()})
    # The same 2,000 rows as the single stage: exact neighbours from its cache, else searched here.
    rows = fixed_sample(n)
    exact_path = _exact_cache(args.cache, n, d, args.intrinsic_d)
    tic = time.perf_counter()
    if exact_path is not None and exact_path.exists():
        exact, source = np.load(exact_path), f"cache {exact_path.name} (written by the single stage)"
    else:
        exact, source = exact_sample_neighbors(X, rows), "searched exactly by this run"
        if exact_path is not None:
            np.save(exact_path, exact)
    found = zarr.open_array(str(path / "knn" / "indices"), mode="r").get_orthogonal_selection((rows, slice(None)))
    result.update(recall_fixed_sample=recall_of(found, exact), recall_fixed_sample_rows=int(rows.size),
                  recall_fixed_sample_exact=source, recall_fixed_sample_s=time.perf_counter() - tic)
    result["load_after"] = _load()
    return result


STAGES = {"compile": stage_compile, "single": stage_single, "sharded": stage_sharded}


# --- summary ---------------------------------------------------------------------------------------------


def _label(path, result):
    """The run's variant: its recorded tag, else (results written before tags) the file name's second field."""
    if "tag" in result:
        return result["variant"] + (f"-{result['tag']}" if result["tag"] else "")
    parts = path.stem.split("-")
    return "-".join(parts[1:-1]) if result.get("stage") != "compile" else "-".join(parts[1:])


def _command_of(result):
    """The recorded command; for results written before commands were recorded, rebuilt from their parameters."""
    if result.get("command"):
        return result["command"], True
    stage = result.get("stage")
    words = ["python", "-m", "benchmarks.knn_scale", "--stage", str(stage)]
    if stage == "compile":
        words += ["--cold-cache"] if result.get("variant") == "cold-cache" else []
    elif stage == "single":
        words += ["--n", str(result["n"]), "--widths", *(str(w["build_neighbors"]) for w in result["widths"])]
    elif stage == "sharded":
        words += ["--n", str(result["n"]), "--shard-rows", str(result["shard_rows"]),
                  "--memory-limit", str(result["memory_limit"]), "--width", str(result["build_neighbors"])]
    return shlex.join(words), False


def _max(values):
    values = [v for v in (values or {}).values() if v is not None]
    return max(values) if values else None


def _single_rows(result, common):
    rows = result.get("exact_sample_rows") or min(SAMPLE, result["n"])
    exact = {"sample_rows": rows, "sample_s": result["exact_sample_s"],
             "sample_cpu_s": result.get("exact_sample_cpu_s"), "extrapolated_s": result["exact_extrapolated_s"],
             "extrapolated": True,
             "basis": f"scikit-learn brute force timed for {rows} query rows against all {result['n']} rows, "
                      f"scaled linearly to {result['n']} query rows; not run in full"}
    return [dict(common, n=result["n"], d=result.get("d", D), intrinsic_d=result.get("intrinsic_d", result.get("d", D)),
                 k=result.get("k", K),
                 build_neighbors=w["build_neighbors"], build_s=w["build_s"], build_cpu_s=w.get("build_cpu_s"),
                 recall=w["recall"], recall_rows=rows, speedup_vs_exact=w["speedup_vs_exact"],
                 generate_s=result.get("generate_s"), warm_up_s=result.get("warm_up_s"),
                 peak_rss_mib=result.get("peak_rss_mib"), data_bytes=result.get("data_bytes"), exact=exact)
            for w in result["widths"]]


def _sharded_row(result, common, log=None):
    shards = result.get("shard_times", [])
    # counted again from the worker log beside the result when there is one (the rules may have changed since)
    log_events = (_count_log_events(log.read_text()) if log is not None and log.exists()
                  else {key: result.get(key) for key in _LOG_EVENTS})
    data_bytes = result.get("data_bytes") or result["n"] * result.get("d", D) * 4
    limit = result.get("memory_limit_bytes")
    if limit is None:
        from dask.utils import parse_bytes

        limit = int(parse_bytes(result["memory_limit"]))
    return dict(
        common, n=result["n"], d=result.get("d", D), intrinsic_d=result.get("intrinsic_d", result.get("d", D)),
        k=result.get("k", K), build_neighbors=result["build_neighbors"],
        query_epsilon=result.get("query_epsilon"), shard_rows=result.get("shard_rows_used"),
        shard_rows_requested=result["shard_rows"], n_shards=result["n_shards"],
        chunk_rows=result.get("chunk_rows"), memory_limit=result["memory_limit"], memory_limit_bytes=limit,
        data_bytes=data_bytes, data_over_memory_limit=data_bytes / limit, timings=result["timings"],
        total_s=result["total_s"], ingest_s=result.get("ingest_s"),
        shard_build_s=sum(s["build"] for s in shards), shard_query_s=sum(s["query"] for s in shards),
        shard_build_cpu_s=sum(s["build_cpu"] for s in shards) if all("build_cpu" in s for s in shards) else None,
        shard_query_cpu_s=sum(s["query_cpu"] for s in shards) if all("query_cpu" in s for s in shards) else None,
        queried_rows=sum(s["queried_rows"] for s in shards) if all("queried_rows" in s for s in shards) else None,
        recall=result["recall"], recall_rows=result.get("recall_rows", SAMPLE),
        recall_fixed_sample=result.get("recall_fixed_sample"),
        peak_worker_rss_mib=_max(result.get("peak_worker_rss_mib")),
        worker_maxrss_end_mib=_max(result.get("worker_maxrss_end_mib")),
        dask_peak_memory_mib=_max(result.get("dask_peak_memory_mib")),
        paused=result.get("paused"), workers_seen=result.get("workers_seen"), **log_events)


def _ratio(a, b):
    return a / b if a is not None and b else None


def _growth(single, sharded):
    """Time ratios between consecutive n of the same configuration (default variants only)."""
    growth = []
    groups = {}
    for row in single:
        if row["variant"] == "default":
            groups.setdefault(("single", row["d"], row["intrinsic_d"], row["build_neighbors"]), []).append(row)
    for row in sharded:
        if row["variant"] == "default":
            groups.setdefault(("sharded", row["d"], row["intrinsic_d"], row["build_neighbors"]), []).append(row)
    for (stage, d, intrinsic_d, width), rows in sorted(groups.items()):
        rows = sorted({r["n"]: r for r in rows}.values(), key=lambda r: r["n"])  # newest file per n
        for a, b in itertools.pairwise(rows):
            entry = {"stage": stage, "d": d, "intrinsic_d": intrinsic_d, "build_neighbors": width, "n_from": a["n"],
                     "n_to": b["n"],
                     "n_ratio": b["n"] / a["n"], "files": [a["file"], b["file"]]}
            if stage == "single":
                entry["times"] = {"build_s": [a["build_s"], b["build_s"]], "build_cpu_s": [a["build_cpu_s"],
                                                                                       b["build_cpu_s"]],
                                  "exact_extrapolated_s": [a["exact"]["extrapolated_s"],
                                                           b["exact"]["extrapolated_s"]]}
            else:
                entry["times"] = {key: [a["timings"].get(key), b["timings"].get(key)]
                                  for key in ("check", "warm_up", "shards", "merge", "recall")}
                entry["times"].update(total_s=[a["total_s"], b["total_s"]],
                                      shard_build_s=[a["shard_build_s"], b["shard_build_s"]],
                                      shard_query_s=[a["shard_query_s"], b["shard_query_s"]],
                                      shard_build_cpu_s=[a["shard_build_cpu_s"], b["shard_build_cpu_s"]],
                                      shard_query_cpu_s=[a["shard_query_cpu_s"], b["shard_query_cpu_s"]])
                entry["queried_rows"] = [a["queried_rows"], b["queried_rows"]]
                entry["shard_rows_requested"] = [a["shard_rows_requested"], b["shard_rows_requested"]]
                entry["n_shards"] = [a["n_shards"], b["n_shards"]]
            entry["ratios"] = {key: _ratio(v[1], v[0]) for key, v in entry["times"].items()}
            growth.append(entry)
    return growth


def _comparisons(single, sharded):
    """Sharded recall against the single-index recall of the same (n, d, width)."""
    out = []
    for sh in sharded:
        same = ("n", "d", "intrinsic_d", "build_neighbors")
        matches = [s for s in single if all(s[key] == sh[key] for key in same)]
        if not matches:
            continue
        one = matches[-1]
        same_rows = sh["recall_fixed_sample"] is not None
        sharded_recall = sh["recall_fixed_sample"] if same_rows else sh["recall"]
        out.append({"n": sh["n"], "d": sh["d"], "intrinsic_d": sh["intrinsic_d"],
                    "build_neighbors": sh["build_neighbors"], "variant": sh["variant"],
                    "sharded_file": sh["file"], "single_file": one["file"], "single_recall": one["recall"],
                    "sharded_recall": sharded_recall, "difference": sharded_recall - one["recall"],
                    "sharded_at_least_single_minus_0_02": sharded_recall >= one["recall"] - 0.02,
                    "same_sample_rows": same_rows,
                    "memory_limit_bytes": sh["memory_limit_bytes"], "data_bytes": sh["data_bytes"],
                    "data_over_memory_limit": sh["data_over_memory_limit"],
                    "peak_worker_rss_mib": sh["peak_worker_rss_mib"]})
    return out


def summarize(out, command=None):
    """Aggregate the result files below ``out`` into the ``knn_scale`` summary (a dict).

    Parameters
    ----------
    out : str or Path
        The results directory; every ``*.json`` below it except
        ``summary.json`` is a result.
    command : str, default=None
        The command that wrote the summary.

    Returns
    -------
    summary : dict
        ``kind``, ``date``, ``machine``, ``packages``, ``command`` (the
        commands of the results - for results written before commands were
        recorded, rebuilt from their parameters and marked so - then this
        one), ``compile``, ``single`` (one
        row per build width), ``sharded``, ``comparisons`` (single vs sharded
        recall) and ``growth`` (time ratios between consecutive n).
    """
    out = Path(out)
    files = sorted(p for p in out.rglob("*.json") if p.name != "summary.json")
    compile_rows, single, sharded, commands, rebuilt = [], [], [], [], 0
    for path in files:
        result = json.loads(path.read_text())
        stage = result.get("stage")
        if stage not in STAGES:
            continue
        cmd, recorded = _command_of(result)
        rebuilt += not recorded
        if not recorded:
            cmd += f"  # not recorded: rebuilt from the parameters in {path.name}"
            if _label(path, result) not in ("default", "cold-cache"):
                cmd += f"; variant {_label(path, result)!r} used settings the file does not record"
        commands.append(cmd)
        mtime = _dt.datetime.fromtimestamp(path.stat().st_mtime, _dt.UTC).isoformat(timespec="seconds")
        common = {"file": str(path.relative_to(out)), "variant": _label(path, result), "command": cmd,
                  "command_recorded": recorded, "date": result.get("date", mtime),
                  "date_source": "recorded" if "date" in result else "file modification time",
                  "load_before": result.get("load_before"), "load_after": result.get("load_after"),
                  "wall_s": result.get("wall_s")}
        if stage == "compile":
            compile_rows.append(dict(common, **{key: result.get(key) for key in (
                "import_s", "first_build_s", "first_build_cpu_s", "warm_build_s", "warm_build_cpu_s",
                "peak_rss_mib", "numba_cache_dir")}))
        elif stage == "single":
            single += _single_rows(result, common)
        else:
            sharded.append(_sharded_row(result, common, log=path.with_suffix(".log")))
    single.sort(key=lambda r: (r["d"], r["intrinsic_d"], r["n"], r["date"], r["build_neighbors"]))
    sharded.sort(key=lambda r: (r["d"], r["intrinsic_d"], r["n"], r["date"]))
    summary = {
        "kind": KIND,
        "title": "kNN graphs at scale (pynndescent; single index and sharded build)",
        "description": ("Clustered Gaussian blobs (50 centres), k = 10, float32. Recall against exact neighbours of "
                        f"a {SAMPLE}-row sample. Exact times are measured on that sample and extrapolated "
                        "linearly to all rows (not run in full). Wall times come from a shared machine (see the "
                        "load averages); CPU seconds are less sensitive to it."),
        "date": utc_now(), "machine": machine_info(), "packages": package_versions(PACKAGES),
        "command": list(dict.fromkeys([*commands, *([command] if command else [])])),
        "commands_rebuilt": rebuilt,
        "results_dir": str(out), "files": [str(p.relative_to(out)) for p in files],
        "compile": compile_rows, "single": single, "sharded": sharded,
        "comparisons": _comparisons(single, sharded), "growth": _growth(single, sharded),
    }
    return summary


def _f(value, fmt=".1f", missing="–"):
    return missing if value is None else format(value, fmt)


def _mib(value):
    return _f(None if value is None else value / 2**20, ".0f")


def render_markdown(summary):
    """The ``knn_scale`` summary as markdown tables (for ``benchmarks/results.py``).

    Parameters
    ----------
    summary : dict
        The content of ``summary.json`` (:func:`summarize`).

    Returns
    -------
    markdown : str
        Single-index builds (time, recall, exact extrapolation), sharded
        builds (time per stage, recall, memory against the worker limit),
        single vs sharded recall, growth of the times with n, and the numba
        compile cost.

    Examples
    --------
    >>> row = {"n": 10, "d": 2, "build_neighbors": 5, "build_s": 1.0, "build_cpu_s": 0.5, "recall": 0.9,
    ...        "recall_rows": 10, "speedup_vs_exact": 2.0, "peak_rss_mib": 100.0, "variant": "default",
    ...        "exact": {"sample_rows": 10, "sample_s": 0.1, "extrapolated_s": 2.0}, "file": "f.json"}
    >>> print(render_markdown({"single": [row]}).splitlines()[4])
    | 10 | 2 | default | 5 | 1.0 | 0.5 | 0.9000 (10) | 0.10 s (10 rows) | 2.0 | 2.0 | 100 | f.json |
    """
    lines = []
    single = summary.get("single", [])
    if single:
        lines += ["### Single index in one process", "",
                  ("| n | d | variant | width | build s | build CPU s | recall (rows) | exact: measured on sample "
                   "| exact: extrapolated to n, s | × faster than exact | peak RSS MiB | file |"),
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in single:
            ex = r["exact"]
            lines.append(f"| {r['n']:,} | {_dim(r)} | {r['variant']} | {r['build_neighbors']} | {_f(r['build_s'])} | "
                         f"{_f(r.get('build_cpu_s'))} | {_f(r['recall'], '.4f')} ({r['recall_rows']}) | "
                         f"{_f(ex['sample_s'], '.2f')} s ({ex['sample_rows']} rows) | {_f(ex['extrapolated_s'])} | "
                         f"{_f(r['speedup_vs_exact'])} | {_f(r.get('peak_rss_mib'), '.0f')} | {r['file']} |")
        lines += ["", ("Exact times are extrapolations: scikit-learn's brute force is timed for the sample's query "
                       "rows against all n rows and scaled linearly to n query rows; the full exact search is not run."),
                  ""]
    sharded = summary.get("sharded", [])
    if sharded:
        lines += ["### Sharded build on a LocalCluster of 2 single-threaded workers", "",
                  ("| n | d | variant | data MiB | worker limit MiB | data / limit | shards × rows | check s | "
                   "warm-up s | shards s (build + query, CPU) | merge s | recall s | total s | recall (rows) | "
                   "recall, fixed sample | peak worker RSS MiB | Dask peak MiB | paused (log lines) | "
                   "memory restarts | workers seen | file |"),
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sharded:
            t = r["timings"]
            cpu = ""
            if r.get("shard_build_cpu_s") is not None:
                cpu = f", CPU {r['shard_build_cpu_s']:.0f} + {r['shard_query_cpu_s']:.0f}"
            lines.append(
                f"| {r['n']:,} | {_dim(r)} | {r['variant']} | {_mib(r['data_bytes'])} | "
                f"{_mib(r['memory_limit_bytes'])} | {r['data_over_memory_limit']:.2f} | "
                f"{_shards(r)} | {_f(t.get('check'))} | "
                f"{_f(t.get('warm_up'))} | {_f(t.get('shards'))} ({r['shard_build_s']:.0f} + "
                f"{r['shard_query_s']:.0f}{cpu}) | {_f(t.get('merge'))} | {_f(t.get('recall'))} | "
                f"{_f(r['total_s'])} | {_f(r['recall'], '.4f')} ({r['recall_rows']}) | "
                f"{_f(r.get('recall_fixed_sample'), '.4f')} | {_f(r.get('peak_worker_rss_mib'), '.0f')} | "
                f"{_f(r.get('dask_peak_memory_mib'), '.0f')} | {_yes_no(r.get('paused'))} "
                f"({_f(r.get('log_pause_events'), 'd')}) | {_f(r.get('log_memory_restarts'), 'd')} | "
                f"{_f(r.get('workers_seen'), 'd')} | {r['file']} |")
        lines += ["", ("Shard build and query seconds are summed over shards (the two workers run them in "
                       "parallel). Peak worker RSS is `ru_maxrss` of the worker process (numba compilation included); "
                       "the Dask peak is the scheduler's memory metric polled every 0.5 s. `paused`: a worker was seen "
                       "paused by Dask's memory monitor (above 80 % of its limit it starts no new task; the running "
                       "one continues), with the number of pause lines in the worker log. `memory restarts`: the "
                       "nanny restarted a worker above 95 % of its limit. `workers seen` > 2 means a worker was "
                       "replaced."), ""]
    comparisons = summary.get("comparisons", [])
    if comparisons:
        lines += ["### Sharded against single-index recall", "",
                  ("| n | d | width | sharded variant | single | sharded | sharded − single | same sample rows | "
                   "data / worker limit | peak worker RSS MiB |"), "|---|---|---|---|---|---|---|---|---|---|"]
        for c in comparisons:
            lines.append(f"| {c['n']:,} | {_dim(c)} | {c['build_neighbors']} | {c['variant']} | "
                         f"{c['single_recall']:.4f} | {c['sharded_recall']:.4f} | {c['difference']:+.4f} | "
                         f"{_yes_no(c['same_sample_rows'])} | "
                         f"{c['data_over_memory_limit']:.2f} | {_f(c.get('peak_worker_rss_mib'), '.0f')} |")
        lines.append("")
    growth = summary.get("growth", [])
    if growth:
        lines += ["### Growth with n", "", "| stage | d | width | n → n | time | from s | to s | ratio |",
                  "|---|---|---|---|---|---|---|---|"]
        for g in growth:
            for name, (a, b) in g["times"].items():
                lines.append(f"| {g['stage']} | {_dim(g)} | {g['build_neighbors']} | {g['n_from']:,} → {g['n_to']:,} "
                             f"| {name} | {_f(a)} | {_f(b)} | {_f(g['ratios'].get(name), '.2f')} |")
        lines.append("")
    compile_rows = summary.get("compile", [])
    if compile_rows:
        lines += ["### numba compilation (per process)", "",
                  "| variant | import s | first build s | warm build s | peak RSS MiB |", "|---|---|---|---|---|"]
        for r in compile_rows:
            lines.append(f"| {r['variant']} | {_f(r.get('import_s'))} | {_f(r.get('first_build_s'))} | "
                         f"{_f(r.get('warm_build_s'), '.2f')} | {_f(r.get('peak_rss_mib'), '.0f')} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _shards(row):
    """``shards × rows``; results written before the rows used were recorded show the rows asked for."""
    if row.get("shard_rows") is not None:
        return f"{row['n_shards']} × {row['shard_rows']:,}"
    return f"{row['n_shards']} (asked {row['shard_rows_requested']:,} rows)"


def _dim(row):
    """``d``, with the intrinsic dimension when the rows are lower-dimensional data mapped into d columns."""
    intrinsic = row.get("intrinsic_d")
    return f"{row['d']}" if intrinsic in (None, row["d"]) else f"{row['d']} ({intrinsic} mapped in)"


def _yes_no(value):
    return "–" if value is None else ("yes" if value else "no")


def _result_name(args, label):
    if args.stage == "compile":
        return f"compile-{label}.json"
    name = f"{args.stage}-{label}-{args.n}" + (f"-d{args.d}" if args.d != D else "")
    name += f"-i{args.intrinsic_d}" if args.intrinsic_d else ""
    return name + (f"-{args.tag}" if args.tag else "") + ".json"


def _count_log_events(text):
    return {key: len(pattern.findall(text)) for key, pattern in _LOG_EVENTS.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stage", choices=sorted([*STAGES, "summary"]), required=True)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=D, help="columns of the blobs")
    parser.add_argument("--intrinsic-d", type=int, help="blobs of this many columns mapped isometrically into --d")
    parser.add_argument("--widths", type=int, nargs="+", default=[11, 20, 25, 30])
    parser.add_argument("--width", type=int, default=25, help="build width of the sharded build")
    parser.add_argument("--shard-rows", type=int, default=250_000)
    parser.add_argument("--chunk-rows", type=int, default=50_000, help="rows per chunk of the sharded stage's store")
    parser.add_argument("--query-epsilon", type=float, default=0.3)
    parser.add_argument("--memory-limit", default="1.5GiB")
    parser.add_argument("--cold-cache", action="store_true", help="compile stage: also with an empty numba cache")
    parser.add_argument("--cache", help="directory for stores and exact-sample answers shared between stages")
    parser.add_argument("--tag", help="appended to the result file name (a variant of the same stage and n)")
    parser.add_argument("--out", default="benchmarks/results/knn-scale")
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    command = "python -m benchmarks.knn_scale " + shlex.join(a for a in argv if a != "--in-process")
    out = Path(args.out)
    if args.stage == "summary":
        summary = summarize(out, command=command)
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        logger.info("wrote %s from %d result files", out / "summary.json", len(summary["files"]))
        return
    if args.in_process:  # the child: run one stage, print its JSON
        print(json.dumps(STAGES[args.stage](args)))
        return
    runs = [("default", {})]
    if args.stage == "compile" and args.cold_cache:
        runs.append(("cold-cache", {"NUMBA_CACHE_DIR": tempfile.mkdtemp(prefix="numba-empty-")}))
    out.mkdir(parents=True, exist_ok=True)
    for label, env in runs:
        argv_child = [sys.executable, "-m", "benchmarks.knn_scale", *argv, "--in-process"]
        name = _result_name(args, label)
        started = utc_now()
        tic = time.perf_counter()
        done = subprocess.run(argv_child, env={**os.environ, **env}, capture_output=True, text=True, check=False)
        if args.stage == "sharded":
            (out / name).with_suffix(".log").write_text(done.stderr)
        if done.returncode:
            sys.stderr.write(done.stderr)
            raise SystemExit(f"stage {args.stage} failed")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result.update(stage=args.stage, variant=label, tag=args.tag, wall_s=time.perf_counter() - tic,
                      command=command, date=started, machine=machine_info(), packages=package_versions(PACKAGES))
        if args.stage == "sharded":
            result.update(_count_log_events(done.stderr))
        (out / name).write_text(json.dumps(result, indent=2) + "\n")
        logger.info("%s", json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
