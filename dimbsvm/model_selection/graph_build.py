"""Building kNN graphs of whole datasets: in memory, or as tasks into a store's ``knn`` stage.

:func:`knn_graph` answers in memory for numpy input and, for a Dask array or
a store, builds the stage with one of two strategies:

``"partitioned"`` (default; :func:`build_partitioned_graph`)
    rows routed to k-means partitions (each row to its ``overlap`` nearest),
    one graph per partition, candidates merged per row, refined by
    neighbours of neighbours while the recall on a sample is below
    ``target_recall``. Work grows as ``overlap * n``. Task bodies:
    :mod:`dimbsvm.graph.partitioned`.
``"sharded"`` (:func:`build_sharded_graph`)
    every row queried against every shard's index; work grows as
    ``n * n_shards``. Task bodies: :mod:`dimbsvm.graph.sharded`. Measured
    on 2 cores (``benchmarks/RESULTS.md``), it won nowhere: at 10^6 rows it
    took 2x the CPU of a partitioned build of higher recall, at 10^5 1.4x.
    It remains for metrics whose neighbours Euclidean k-means routing says
    little about (binary or set metrics), since it relies on no routing.

This module decides what to submit; the task bodies are plain functions in
:mod:`dimbsvm.graph`, and :mod:`dimbsvm.model_selection.engine` runs them
(in this process without a client, on the cluster with one). A finished
stage with the same fingerprint (data and parameters) is reused; an
unfinished one resumes from the steps on disk.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import dask.array as da
import numpy as np
from sklearn.utils import check_array, check_random_state

from ..exceptions import DataError
from ..graph import partitioned as part_tasks
from ..graph import sharded
from ..graph.knn import EXACT_MAX_ROWS, KNN_METHODS, KNNIndex, _check_metric, default_build_neighbors, recall_of
from ..graph.knn import sample_recall as _sample_recall_in_memory
from ..graph.partition import (PAIRED_METRICS, boundary_radius, fit_centroids, group_partitions,
                               nearest_centroids, principal_direction, rank_buckets)
from ..graph.stored import (KNNGraph, check_n_neighbors, exact_chunk_task, float_dtype, jsonable,
                            merge_exact_parts, open_knn_graph, peaks, seed_of)
from ..store import finish_stage, open_array, stage_is_complete
from ..store.stages import resolve_input, row_chunked, stage_fingerprint
from .engine import TaskPlan, compute, map_tasks, resolve_client, run_plan, worker_memory_limits

__all__ = ["STRATEGIES", "KNNGraph", "build_partitioned_graph", "build_sharded_graph", "knn_graph", "open_knn_graph"]

logger = logging.getLogger(__name__)

#: The accepted values of ``strategy``.
STRATEGIES = ("partitioned", "sharded")

_CHUNK_BYTES = 32 * 2**20  # rows per chunk when numpy input is written to a store


def knn_graph(X, n_neighbors=10, *, method="auto", metric="euclidean", random_state=None, client=None,
              store=None, strategy="partitioned", build_neighbors=None, recall_sample=2000, **options):
    """The k nearest other rows of every row: in memory, or built as tasks into a store.

    Parameters
    ----------
    X : {ndarray, sparse matrix}, dask.array.Array or path of a dimbsvm store
        Rows, 2-D. numpy (or sparse) input is answered in memory with one
        index; a Dask array or a store path is built as Dask tasks into the
        store's ``knn`` stage.
    n_neighbors : int, default=10
        k, smaller than the number of rows.
    method : {"auto", "exact", "pynndescent"}, default="auto"
        Search within one index (in memory: the whole data; otherwise one
        partition or shard). ``"auto"`` is exact below 20,000 rows.
    metric : str, default="euclidean"
        A metric pynndescent knows (:func:`~dimbsvm.graph.knn.pynndescent_metrics`).
    random_state : int, RandomState instance or None, default=None
        Seeds k-means, NN-descent and the recall sample.
    client : distributed.Client, default=None
        Where the tasks run; the current client when there is one, else
        this process, one task after the other.
    store : str or path, default=None
        The store to write the stage into; defaults to ``X`` when ``X`` is a
        store path. Giving it with numpy input asks for a stored build.
    strategy : {"partitioned", "sharded"}, default="partitioned"
        The stored build: :func:`build_partitioned_graph` or
        :func:`build_sharded_graph`.
    build_neighbors : int, default=None
        NN-descent graph width including the row itself (default: in memory
        :func:`~dimbsvm.graph.knn.default_build_neighbors`, 25 for k = 10;
        the partitioned build
        :func:`~dimbsvm.graph.partitioned.partition_build_neighbors`, 32;
        the sharded build 25).
    recall_sample : int, default=2000
        Rows whose exact neighbours are found to measure the recall of an
        approximate graph (logged; for a stored graph kept in its meta);
        0 skips it (and the partitioned build's refinement).
    **options
        Options of the stored build: ``overlap``, ``max_partition_rows``,
        ``target_recall``, ``max_rounds``, ``max_candidates`` (partitioned) or ``shard_rows``,
        ``query_epsilon`` (sharded); also ``stage`` and ``fingerprint``.

    Returns
    -------
    indices : ndarray or dask.array.Array of shape (n_samples, n_neighbors), int64
        Nearest first; row ``i`` never lists ``i``. Dask arrays (read from
        the store) for a stored build, so no process holds all rows.
    distances : same type and shape, float64

    Raises
    ------
    ValueError
        ``n_neighbors`` not in ``[1, n_samples - 1]``, NaN or infinite
        values, an unknown metric, method or strategy, an option of the
        other strategy.

    Examples
    --------
    >>> X = np.array([[0.0], [1.0], [3.0], [7.0]])
    >>> indices, distances = knn_graph(X, 1)
    >>> indices.ravel(), distances.ravel()
    (array([1, 0, 1, 2]), array([1., 1., 2., 4.]))
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"The 'strategy' parameter of knn_graph must be one of {STRATEGIES}. Got {strategy!r} "
                         "instead.")
    if isinstance(X, (str, Path, da.Array)) or store is not None:
        build = build_partitioned_graph if strategy == "partitioned" else build_sharded_graph
        graph = build(X, n_neighbors, store=store, method=method, metric=metric, build_neighbors=build_neighbors,
                      random_state=random_state, recall_sample=recall_sample, client=client, **options)
        return graph.indices, graph.distances
    if options:
        raise ValueError(f"options {sorted(options)} apply to a stored build (a Dask array, a store path or "
                         "store=...); numpy input is answered in memory")
    X = check_array(X, accept_sparse="csr", dtype=[np.float64, np.float32], input_name="X")
    check_n_neighbors(n_neighbors, X.shape[0])
    index = KNNIndex(n_neighbors, method=method, metric=metric, build_neighbors=build_neighbors,
                     random_state=random_state).fit(X)
    indices, distances = index.neighbor_graph(n_neighbors)
    if index.method_ == "pynndescent" and recall_sample:
        recall, rows = _sample_recall_in_memory(X, indices, metric=metric, sample_size=recall_sample,
                                                random_state=seed_of(random_state))
        logger.info("kNN graph (pynndescent, width %d, k=%d): recall %.4f on %d rows; built in %.1f s",
                    index.build_neighbors_, n_neighbors, recall, rows.size, index.build_time_)
    return indices, distances


# --- shared steps ----------------------------------------------------------------------------------


def _prepare(X, store, method, metric):
    """``(store path, row-chunked Dask X, source fingerprint, X is the store's own)``, validated."""
    if method not in KNN_METHODS:
        raise ValueError(f"method must be one of {KNN_METHODS}; got {method!r}.")
    from_store = isinstance(X, (str, Path))
    if not from_store and not isinstance(X, da.Array):
        X = np.asarray(X)
        X = da.from_array(X, chunks=(max(1, _CHUNK_BYTES // (8 * max(1, X.shape[-1]))), -1))
    store_path, X, source = resolve_input(X, store)
    X = row_chunked(X)
    if X.ndim != 2:
        raise DataError(f"a kNN graph needs 2-D rows, got shape {X.shape}")
    return store_path, X, source, from_store


def _check_finite(X, client):
    bad = da.map_blocks(lambda b: ~np.isfinite(b).all(axis=1), X, drop_axis=1, dtype=bool)
    any_bad, row = compute(bad.any(), da.argmax(bad), client=client)
    if any_bad:
        raise DataError(f"X has NaN or infinite values (first in row {int(row)}); a kNN graph needs finite rows")


def _chunks(n, chunk):
    return [(c, c0, min(c0 + chunk, n)) for c, c0 in enumerate(range(0, n, chunk))]


def _copy_rows(X, group, client):
    compute(da.store(X.astype(float_dtype(X.dtype)), group["_rows"], lock=False, compute=False), client=client)


def _warm_up(client, metric, timings):
    """Compile pynndescent on every worker before the first kNN task (once per host with a prewarmed forkserver)."""
    from ..distributed.warmup import warm_up_workers

    tic = time.perf_counter()
    warm = warm_up_workers(client, metric)
    timings["warm_up"] = time.perf_counter() - tic
    logger.info("numba warm-up per worker (s): %s", {w: round(s, 1) for w, s in warm.items()})
    return warm


def _exact_sample(rows_path, rows, sample, n, k, chunk, metric, client):
    """The exact k nearest other rows of the sampled rows, one task per chunk."""
    calls = [dict(start=c0, stop=c1) for _, c0, c1 in _chunks(n, chunk)]
    parts = map_tasks(exact_chunk_task, calls, client=client, label="exact sample searches",
                      shared=dict(rows_path=rows_path, sample=sample, k=k, metric=metric))
    return merge_exact_parts(parts, rows, k)


# --- the sharded build -----------------------------------------------------------------------------


def build_sharded_graph(X, n_neighbors=10, *, store=None, method="auto", metric="euclidean",
                        build_neighbors=None, shard_rows=None, random_state=None, recall_sample=2000,
                        client=None, stage="knn", fingerprint=None, query_epsilon=0.3) -> KNNGraph:
    """Build (or reuse) the ``knn`` stage shard by shard: every row queried against every shard.

    Parameters
    ----------
    shard_rows : int, default=None
        Rows per shard (rounded up to whole chunks); default
        :data:`~dimbsvm.graph.sharded.DEFAULT_SHARD_ROWS`. Smaller shards
        need less memory per worker and more query work.
    stage : str, default="knn"
        Name of the stage group below the store.
    fingerprint : str, default=None
        Identity of data and parameters; derived when not given.
    query_epsilon : float, default=0.3
        Search breadth of the queries of other shards' chunks (see
        :class:`~dimbsvm.graph.KNNIndex`).
    Other parameters
        As :func:`knn_graph`.

    Returns
    -------
    KNNGraph
    """
    store_path, X, source, from_store = _prepare(X, store, method, metric)
    n, chunk = int(X.shape[0]), int(X.chunks[0][0])
    check_n_neighbors(n_neighbors, n)
    k = int(n_neighbors)
    bounds = sharded.shard_bounds(n, chunk, k, shard_rows or sharded.DEFAULT_SHARD_ROWS)
    methods = [method if method != "auto" else ("exact" if b - a < EXACT_MAX_ROWS else "pynndescent")
               for a, b in bounds]
    for m in set(methods):
        _check_metric(metric, m, sparse=False)
    width = build_neighbors or default_build_neighbors(k)
    seeds = check_random_state(random_state).randint(np.iinfo(np.int32).max, size=len(bounds) + 1)
    params = {"n_neighbors": k, "method": method, "metric": metric, "build_neighbors": int(width),
              "shard_rows": int(bounds[0][1] - bounds[0][0]), "random_state": jsonable(random_state),
              "recall_sample": int(recall_sample), "rows": n, "query_epsilon": float(query_epsilon)}
    fingerprint = fingerprint or stage_fingerprint("knn", source, np.empty(0), params)
    if stage_is_complete(store_path, stage, fingerprint):
        logger.info("knn stage of %s already built for these data and parameters; reusing it", store_path)
        return open_knn_graph(store_path, stage)

    client = resolve_client(client)
    tic = time.perf_counter()
    _check_finite(X, client)
    timings = {"check": time.perf_counter() - tic}
    group, done, seeds = sharded.open_or_resume(store_path, stage, fingerprint,
                                                dict(params, strategy="sharded", seeds=seeds.tolist()), n=n,
                                                d=int(X.shape[1]), k=k, chunk=chunk, n_shards=len(bounds),
                                                dtype=float_dtype(X.dtype), copy_rows=not from_store)
    stage_path = Path(store_path) / stage
    rows_path = str(Path(store_path) / "X") if from_store else str(stage_path / "_rows")
    if not from_store and not done.any():
        tic = time.perf_counter()
        _copy_rows(X, group, client)
        timings["copy_rows"] = time.perf_counter() - tic
    if client is not None and "pynndescent" in methods:
        _warm_up(client, metric, timings)

    tic = time.perf_counter()
    calls = [dict(shard=s, start=a, stop=b, method=methods[s], seed=int(seeds[s]))
             for s, (a, b) in enumerate(bounds) if not done[s]]
    shared = dict(rows_path=rows_path, stage_path=str(stage_path), n=n, k=k, chunk=chunk, metric=metric,
                  build_neighbors=int(width), n_jobs=None, query_epsilon=float(query_epsilon))
    shard_stats = map_tasks(sharded._shard_task, calls, client=client, shared=shared, label="kNN shards")
    timings["shards"] = time.perf_counter() - tic
    logger.info("kNN: %d shard(s) built and queried in %.1f s (%d reused)", len(calls), timings["shards"],
                len(bounds) - len(calls))

    tic = time.perf_counter()
    merge_calls = [dict(start=c0, stop=c1) for _, c0, c1 in _chunks(n, chunk)]
    merge_stats = map_tasks(sharded._merge_task, merge_calls, client=client, label="kNN merges",
                            shared=dict(stage_path=str(stage_path), k=k))
    timings["merge"] = time.perf_counter() - tic

    recall = None
    if recall_sample and "pynndescent" in methods:
        tic = time.perf_counter()
        rows = np.sort(np.random.RandomState(int(seeds[-1])).choice(n, size=min(recall_sample, n), replace=False))
        exact = _exact_sample(rows_path, rows, open_array(rows_path).get_orthogonal_selection((rows,)), n, k, chunk,
                              metric, client)
        found = group["indices"].get_orthogonal_selection((rows, slice(None)))
        recall = recall_of(found, exact)
        timings["recall"] = time.perf_counter() - tic
        logger.info("kNN graph recall %.4f against exact neighbours of %d sampled rows", recall, rows.size)
    for name in sharded.SCRATCH:
        if name in group:
            del group[name]
    finish_stage(group, {
        "recall": recall, "recall_rows": int(min(recall_sample, n)) if recall is not None else 0,
        "timings": timings, "peak_rss_bytes": peaks([*shard_stats, *merge_stats]), "n_shards": len(bounds),
        "shard_methods": methods,
        "shard_times": [{key: stat[key] for key in ("shard", "rows", "build", "build_cpu", "query", "query_cpu",
                                                    "queried_rows")} for stat in shard_stats]})
    return open_knn_graph(store_path, stage)


# --- the partitioned build -------------------------------------------------------------------------


def build_partitioned_graph(X, n_neighbors=10, *, store=None, method="auto", metric="euclidean",
                            build_neighbors=None, max_candidates=part_tasks.DEFAULT_MAX_CANDIDATES, overlap=2,
                            overlap_radius="auto", max_partition_rows=None,
                            n_partitions=None, target_recall=0.95, max_rounds=2, refine="rebuild", widen=1.25,
                            kmeans_sample=None, random_state=None, recall_sample=2000, client=None, stage="knn",
                            fingerprint=None) -> KNNGraph:
    """Build (or reuse) the ``knn`` stage from k-means partitions; see :mod:`dimbsvm.graph.partitioned`.

    Parameters
    ----------
    max_candidates : int or None, default=60
        NN-descent's candidates per row and iteration in each partition's
        graph (:data:`~dimbsvm.graph.partitioned.DEFAULT_MAX_CANDIDATES`);
        ``None``: pynndescent's default, ``min(60, width)``.
    overlap : int, default=2
        Partitions each row joins at most (its nearest centroids). More
        finds more neighbours across partition boundaries and costs more.
    overlap_radius : float, "auto" or None, default="auto"
        A row joins its second and later nearest partitions only when its
        distance to their boundary with its nearest is at most this
        (:func:`~dimbsvm.graph.partition.nearest_centroids`): a farther
        partition cannot hold any of its neighbours within that radius.
        ``"auto"``: :func:`~dimbsvm.graph.partition.boundary_radius` of the
        k-means sample (an overestimate). ``None``: always join ``overlap``
        partitions. Euclidean metrics only (others join always).
    max_partition_rows : int, default=None
        The most rows one task indexes (default
        :data:`~dimbsvm.graph.partitioned.DEFAULT_MAX_PARTITION_ROWS`): partitions average half of it,
        and a larger one is cut into pieces. Bounds each task's memory
        (about 2.5x the rows' bytes plus 12 bytes per row and graph column).
    n_partitions : int, default=None
        k-means partitions; default
        :func:`~dimbsvm.graph.partition.partition_count` (one when all rows
        fit in one partition, else an average of half the budget).
    target_recall : float, default=0.95
        While the recall on ``recall_sample`` rows is below it, a
        refinement round runs, up to ``max_rounds``. ``None`` never refines.
    max_rounds : int, default=2
        Refinement rounds at most.
    refine : {"rebuild", "neighbors"}, default="rebuild"
        A refinement round either builds every partition's graph again,
        ``widen`` times wider per round and newly seeded, and merges it with
        the graph so far; or gives each row its neighbours' neighbours as
        candidates (Euclidean, Manhattan and cosine metrics), which crosses
        partitions through the rows that joined more than one. On clustered
        32-d data at 10^6 rows, a rebuild round took recall from 0.918 to
        0.989 where two neighbours-of-neighbours rounds reached 0.925 for as
        much CPU: NN-descent has already joined what a row's k neighbours
        know. A neighbours-of-neighbours task reads rows at random through
        memory maps of all routed rows (about ``overlap x n x d`` values),
        which count in each worker's resident memory: at 10^7 x 32 float32
        rows with overlap 3 (3.8 GB) it had 4-GiB workers killed; the build
        now refuses it after routing when the routed rows and the graph
        exceed 60 % of the smallest worker memory limit
        (:func:`check_refinement_memory`).
    widen : float, default=1.25
        Width factor per rebuild round.
    kmeans_sample : int, default=None
        Rows the centroids are fitted on (default: ``max(50,000, 100 x
        partitions)``, at most n).
    stage, fingerprint
        As :func:`build_sharded_graph`.
    Other parameters
        As :func:`knn_graph`.

    Returns
    -------
    KNNGraph
        Its meta holds ``recall`` (last measured), ``recalls`` (after the
        merge and after each refinement round), ``rounds``, ``timings``,
        ``partition_rows`` (rows each task held) and ``peak_rss_bytes``.
    """
    store_path, X, source, from_store = _prepare(X, store, method, metric)
    n, d, chunk = int(X.shape[0]), int(X.shape[1]), int(X.chunks[0][0])
    check_n_neighbors(n_neighbors, n)
    k = int(n_neighbors)
    opts = part_tasks.check_options(n, k, overlap=overlap, overlap_radius=overlap_radius,
                                    max_partition_rows=max_partition_rows, n_partitions=n_partitions,
                                    target_recall=target_recall, max_rounds=max_rounds, refine=refine, widen=widen,
                                    kmeans_sample=kmeans_sample, recall_sample=recall_sample,
                                    max_candidates=max_candidates)
    overlap, cap, n_parts = opts["overlap"], opts["max_partition_rows"], opts["n_partitions"]
    max_rounds, recall_sample = opts["max_rounds"], opts["recall_sample"]
    if refine == "neighbors" and metric not in PAIRED_METRICS and recall_sample:
        logger.warning("neighbours-of-neighbours refinement does not know metric %r; not refining", metric)
        max_rounds = 0
    big = method == "pynndescent" or (method == "auto" and cap >= EXACT_MAX_ROWS)
    _check_metric(metric, "pynndescent" if big else "exact", sparse=False)
    width = int(build_neighbors or part_tasks.partition_build_neighbors(k))
    seeds = check_random_state(random_state).randint(np.iinfo(np.int32).max, size=3)
    params = dict(opts, strategy="partitioned", n_neighbors=k, method=method, metric=metric, build_neighbors=width,
                  random_state=jsonable(random_state), rows=n)
    fingerprint = fingerprint or stage_fingerprint("knn", source, np.empty(0), params)
    if stage_is_complete(store_path, stage, fingerprint):
        logger.info("knn stage of %s already built for these data and parameters; reusing it", store_path)
        return open_knn_graph(store_path, stage)

    client = resolve_client(client)
    tic = time.perf_counter()
    _check_finite(X, client)
    timings = {"check": time.perf_counter() - tic}
    group, resumed = part_tasks.open_partitioned_stage(store_path, stage, fingerprint,
                                                       dict(params, seeds=seeds.tolist()), n=n, d=d, k=k,
                                                       chunk=chunk, dtype=float_dtype(X.dtype),
                                                       copy_rows=not from_store)
    stage_path = Path(store_path) / stage
    scratch = stage_path / part_tasks.SCRATCH_DIR
    rows_path = str(Path(store_path) / "X") if from_store else str(stage_path / "_rows")
    chunks = _chunks(n, chunk)
    if resumed:
        logger.info("resuming the knn stage of %s from its scratch files", store_path)
    elif not from_store:
        tic = time.perf_counter()
        _copy_rows(X, group, client)
        timings["copy_rows"] = time.perf_counter() - tic

    # Samples: k-means rows and recall rows, read in one pass, one task per chunk.
    tic = time.perf_counter()
    rng = np.random.RandomState(int(seeds[0]))
    km_rows = np.sort(rng.choice(n, size=opts["kmeans_sample"], replace=False))
    recall_rows = np.sort(np.random.RandomState(int(seeds[1])).choice(n, size=min(recall_sample, n), replace=False))
    wanted = np.union1d(km_rows, recall_rows)
    calls = [dict(start=c0, stop=c1, rows=wanted[(wanted >= c0) & (wanted < c1)]) for _, c0, c1 in chunks]
    sample = np.concatenate(map_tasks(part_tasks.read_sample_task, calls, client=client, label="kNN samples",
                                      shared=dict(rows_path=rows_path)))
    km_sample, recall_x = sample[np.searchsorted(wanted, km_rows)], sample[np.searchsorted(wanted, recall_rows)]
    centroids_path = scratch / "centroids.npy"
    if centroids_path.exists():
        centroids = np.load(centroids_path)
    else:
        centroids = drop_starved_centroids(fit_centroids(km_sample, n_parts, random_state=int(seeds[2])),
                                           km_sample, n=n, k=k)
        part_tasks.save_npy(centroids_path, centroids)
    n_parts, overlap = len(centroids), min(overlap, len(centroids))
    radius = None
    if overlap > 1 and metric in ("euclidean", "l2"):
        radius = (boundary_radius(km_sample, k, random_state=int(seeds[2])) if overlap_radius == "auto"
                  else overlap_radius)
    timings["plan"] = time.perf_counter() - tic

    tic = time.perf_counter()
    counts = {c: part_tasks.route_done(scratch, c) for c, _, _ in chunks}
    calls = [dict(chunk_id=c, start=c0, stop=c1) for c, c0, c1 in chunks if counts[c] is None]
    route_stats = map_tasks(part_tasks.route_task, calls, client=client, label="kNN routing",
                            shared=dict(rows_path=rows_path, scratch=str(scratch), overlap=overlap,
                                        radius=radius, dtype=float_dtype(X.dtype)))
    for call, stat in zip(calls, route_stats):
        counts[call["chunk_id"]] = stat["counts"]
    sizes = np.sum([counts[c] for c, _, _ in chunks], axis=0)
    timings["route"] = time.perf_counter() - tic
    if refine == "neighbors" and max_rounds and target_recall is not None and recall_sample:
        # what a refinement task maps: the routed rows, and the graph's k (id, distance) pairs per row
        check_refinement_memory(int(sizes.sum()) * d * np.dtype(float_dtype(X.dtype)).itemsize + n * k * 16,
                                worker_memory_limits(client))

    # One task per partition, or per piece of a partition over the budget.
    primary = nearest_centroids(km_sample, centroids, 1)[:, 0]
    plan = [(p, ranges, principal_direction(km_sample[primary == p], seed=int(seeds[2]) + p)
             if len(ranges) > 1 else None) for p, ranges in enumerate(rank_buckets(int(s), cap) for s in sizes)]
    nndescent = method == "pynndescent" or (method == "auto" and min(int(sizes.max()), cap) >= EXACT_MAX_ROWS)
    warm = _warm_up(client, metric, timings) if client is not None and nndescent else {}
    context = dict(client=client, scratch=str(scratch), stage_path=str(stage_path), chunks=chunks, k=k,
                   method=method, metric=metric, max_candidates=opts["max_candidates"], seed=int(seeds[2]),
                   timings=timings)
    stats = _build_round(0, plan, width, cap, **context)

    recalls, widths, round_ = [], [width], 0
    if recall_sample:
        tic = time.perf_counter()
        exact = _exact_sample(rows_path, recall_rows, recall_x, n, k, chunk, metric, client)
        recalls.append(recall_of(part_tasks.graph_rows(scratch, 0, recall_rows, chunk), exact))
        timings["recall"] = time.perf_counter() - tic
        logger.info("kNN graph recall %.4f against exact neighbours of %d sampled rows", recalls[-1],
                    recall_rows.size)
        while target_recall is not None and recalls[-1] < target_recall and round_ < max_rounds:
            round_ += 1
            tic = time.perf_counter()
            if refine == "rebuild":  # every partition again, wider, newly seeded; merged with the graph so far
                widths.append(int(np.ceil(width * widen ** round_)))
                stats += _build_round(round_, plan, widths[-1], cap, **context)
            else:
                calls = [dict(chunk_id=c, start=c0, stop=c1) for c, c0, c1 in chunks]
                stats += map_tasks(part_tasks.refine_task, calls, client=client, label="kNN refinement",
                                   shared=dict(stage_path=str(stage_path), scratch=str(scratch), chunk=chunk, k=k,
                                               metric=metric, round_=round_ - 1))
            timings[f"round_{round_}"] = time.perf_counter() - tic
            recalls.append(recall_of(part_tasks.graph_rows(scratch, round_, recall_rows, chunk), exact))
            logger.info("kNN %s round %d: recall %.4f (target %.2f)", refine, round_, recalls[-1], target_recall)
    part_tasks.remove_scratch(stage_path)
    built = [s for s in stats if s["kind"] == "partition"]
    finish_stage(group, {
        "recall": recalls[-1] if recalls else None, "recalls": recalls, "rounds": round_, "round_widths": widths,
        "max_candidates": opts["max_candidates"],
        "recall_rows": int(recall_rows.size) if recalls else 0, "timings": timings,
        "peak_rss_bytes": peaks([*route_stats, *stats]), "warm_up_s": warm, "partition_sizes": sizes.tolist(),
        "radius": radius, "members_per_row": float(sizes.sum() / n),
        "partition_rows": [s["rows"] for s in built],
        "partition_methods": sorted({str(m) for s in built for m in s.get("methods", [s["method"]])}),
        "cpu_s": {"route": sum(s["cpu"] for s in route_stats),
                  **{kind: sum(s["cpu"] for s in stats if s["kind"] == kind)
                     for kind in ("partition", "merge", "refine")}}})
    return open_knn_graph(store_path, stage)


#: Share of the smallest worker memory limit that the routed rows and the graph may take when
#: ``refine="neighbors"`` maps them all (Dask's default ``distributed.worker.memory.target``; mapped
#: pages cannot be spilled).
REFINE_MEMORY_SHARE = 0.6


def check_refinement_memory(mapped_bytes, memory_limits):
    """Refuse a neighbours-of-neighbours refinement whose memory maps would not fit the workers.

    A refinement task reads candidate rows and their graph rows at random
    through memory maps of every routed row and of the graph; the pages it
    touches count in the worker's resident memory, and past the nanny's
    limit the worker is killed (measured: 10^7 x 32 float32 rows in 3
    partitions each, 3.8 GB, killed 4-GiB workers within seconds, after
    round 0's ~12 minutes). Checked after routing, before any partition is
    built.

    Parameters
    ----------
    mapped_bytes : int
        Bytes a refinement task may map: all routed rows (members of all
        partitions) and the graph so far.
    memory_limits : list of int
        Each worker's memory limit in bytes (0: none); empty in-process.

    Raises
    ------
    ValueError
        When ``mapped_bytes`` exceed ``REFINE_MEMORY_SHARE`` of the smallest
        limit.
    """
    limits = [limit for limit in memory_limits if limit]
    if limits and mapped_bytes > REFINE_MEMORY_SHARE * min(limits):
        raise ValueError(
            f"refine='neighbors' reads the routed rows and the graph ({mapped_bytes / 2**30:.2f} GiB) through "
            f"memory maps whose pages count in each worker's memory, more than {REFINE_MEMORY_SHARE:.0%} of the "
            f"smallest worker memory limit ({min(limits) / 2**30:.2f} GiB): the workers would be killed. Use "
            "refine='rebuild' (the default), workers with more memory, or a smaller overlap. No partition graph "
            "was built.")


#: A centroid whose share of the k-means sample predicts fewer than this many times k + 1 rows is dropped.
MIN_PARTITION_FACTOR = 4


def drop_starved_centroids(centroids, sample, *, n, k):
    """The centroids whose partitions the sample predicts to hold at least ``4 (k + 1)`` of the ``n`` rows.

    Mini-batch k-means can leave a centre with a handful of rows; a row
    whose partitions hold k or fewer others has fewer than k candidates
    (measured: 400,000 rows of 384 Gaussian features in 160+ partitions of
    at most 5000 rows stopped on one such row). Its rows go to their next
    nearest centroid instead. At least one centroid is always kept.
    """
    assigned = nearest_centroids(sample, centroids, 1)[:, 0]
    expected = np.bincount(assigned, minlength=len(centroids)) * (n / max(len(sample), 1))
    keep = expected >= MIN_PARTITION_FACTOR * (k + 1)
    if keep.all() or not keep.any():
        return centroids
    logger.info("kNN partitions: %d of %d k-means centres predict fewer than %d rows; their rows go to the "
                "next nearest", int((~keep).sum()), len(centroids), MIN_PARTITION_FACTOR * (k + 1))
    return centroids[keep]


#: Small whole partitions are built by one task per run of them, of up to this many members...
GROUP_MAX_ROWS = part_tasks.DEFAULT_MAX_PARTITION_ROWS
#: ... and smaller where needed to keep at least this many tasks (many more tasks than workers).
GROUP_MIN_TASKS = 64


def group_whole_partitions(sizes, cut):
    """Runs ``[(first, stop), ...]`` of partitions (``sizes`` members; ``cut`` into pieces), one task's work each.

    A partition cut into pieces is a run of its own (one task per piece);
    consecutive whole partitions are gathered into runs of at most
    ``min(GROUP_MAX_ROWS, members / GROUP_MIN_TASKS)`` members. Small
    partitions (exact blocked distances take ~0.1 s for 10,000 rows) would
    otherwise be tasks too short for their scheduling, each reading every
    routed chunk's files.
    """
    budget = min(GROUP_MAX_ROWS, max(1, math.ceil(sum(sizes) / GROUP_MIN_TASKS)))
    return group_partitions(sizes, budget, alone=cut)


def _build_round(round_, plan, width, cap, *, client, scratch, stage_path, chunks, k, method, metric, max_candidates,
                 seed, timings):
    """One graph per partition (or piece), then one merge per chunk: the graph of build round ``round_``.

    Runs of small whole partitions are built by one task each
    (:func:`group_whole_partitions`); partitions cut into pieces and large
    ones by one task per piece.
    """
    seeds = [seed + p + 7919 * round_ for p in range(len(plan))]
    sizes = [sum(hi - lo for lo, hi in ranges) for _, ranges, _ in plan]
    pieces, calls, group_calls = {}, [], []
    for first, stop in group_whole_partitions(sizes, [len(ranges) > 1 for _, ranges, _ in plan]):
        if stop - first > 1:
            name = part_tasks.group_name(first, stop, round_)
            pieces.update((p, [name]) for p in range(first, stop))
            if not part_tasks.partition_done(scratch, name):
                group_calls.append(dict(first=first, stop=stop, seeds=seeds[first:stop],
                                        rows=sum(sizes[first:stop])))
            continue
        p, ranges, direction = plan[first]
        pieces[p] = [part_tasks.part_name(p, j, round_) for j in range(len(ranges))]
        calls += [dict(partition=p, piece_number=j, piece=piece, direction=direction, seed=seeds[p])
                  for j, piece in enumerate(ranges)
                  if not part_tasks.partition_done(scratch, part_tasks.part_name(p, j, round_))]
    work = sorted([(call["piece"][1] - call["piece"][0], part_tasks.partition_task, call) for call in calls]
                  + [(call.pop("rows"), part_tasks.partition_group_task, call) for call in group_calls],
                  key=lambda item: -item[0])  # largest first: no straggler at the end
    tic = time.perf_counter()
    tasks = TaskPlan()
    shared = {key: tasks.share(value) for key, value in dict(
        scratch=scratch, n_chunks=len(chunks), k=k, method=method, metric=metric, build_neighbors=width,
        max_candidates=max_candidates, round_=round_).items()}
    refs = [tasks.add(func, dict(shared, **call), watch=True, name="kNN partitions") for _, func, call in work]
    results = run_plan(tasks, client=client, retries=2, label="kNN partitions")
    part_stats = [results[ref.id] for ref in refs]
    timings[f"partitions_{round_}"] = time.perf_counter() - tic
    n_tasks = sum(len(names) for names in dict.fromkeys(map(tuple, pieces.values())))
    logger.info("kNN round %d: %d partition task(s) (width %d, %s candidates, %d of them building %d small partitions) "
                "in %.1f s (%d reused); largest held %d rows (budget %d)", round_, len(calls) + len(group_calls), width,
                max_candidates or "default",
                len(group_calls), sum(c["stop"] - c["first"] for c in group_calls), timings[f"partitions_{round_}"],
                n_tasks - len(calls) - len(group_calls), max([s["rows"] for s in part_stats], default=0), cap)
    tic = time.perf_counter()
    merge_stats = map_tasks(part_tasks.merge_task, [dict(chunk_id=c, start=c0, stop=c1) for c, c0, c1 in chunks],
                            client=client, label="kNN merges",
                            shared=dict(stage_path=stage_path, scratch=scratch, k=k, pieces=pieces, round_=round_))
    timings[f"merge_{round_}"] = time.perf_counter() - tic
    return [*part_stats, *merge_stats]
