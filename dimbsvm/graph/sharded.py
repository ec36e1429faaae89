"""kNN graphs of whole datasets: in memory, or sharded across Dask workers into the store.

:func:`knn_graph` answers in memory for numpy input (:class:`~dimbsvm.graph.knn.KNNIndex`)
and, for a Dask array or a store, runs the sharded build of ``DESIGN.md``:

1. the rows are cut into shards of whole chunks; one task per shard builds
   an index over the shard, takes the shard's own rows' neighbours from its
   graph (self excluded) and queries every other chunk against it, writing
   ``k`` candidates per (shard, row) to a scratch array - one index and one
   chunk in memory at a time;
2. one task per chunk merges the shards' candidates of its rows into the
   top ``k``, one shard at a time, so its memory does not grow with the
   number of shards (ties by row number, so the result does not depend on
   the order tasks ran);
3. a sample of rows is searched exactly, chunk by chunk, and the recall of
   the graph on it goes into the stage meta.

Stage (see :mod:`dimbsvm.store.stages`)::

    store.zarr/knn/   indices (n x k, int64), distances (n x k, float64)
                      meta: fingerprint, parameters, recall, timings, peak memory

A finished stage with the same fingerprint (data and parameters) is reused.
A build that stopped part-way resumes: shards whose done flag is set are not
built again.

Memory per worker: no task holds all rows. A worker needs its own baseline
(about 0.6 GiB resident once pynndescent's numba code is compiled) plus one
shard task: the shard's rows, its NN-descent graph, pynndescent's search
graph and reordered copy of the rows, and one chunk of other rows - about
twice the shard's row bytes plus 1 KB per shard row. Measured
(``benchmarks/knn_scale.py``): 1.5 million rows of 256 float32 columns
(1.43 GiB) in 150,000-row shards ran on two workers limited to 1.25 GiB each,
peaking at 1.06 GiB per worker, with a recall of 0.996 against 0.945 for one
NN-descent index over all rows. Choose ``shard_rows`` so that this stays
under the worker's pause threshold (Dask's default: 80 % of its limit);
above it the worker runs its current task but starts no other until memory
falls. The number of rows is not bounded by it; the query work is: every row
is queried against every other shard, ``n * (n_shards - 1)`` queries.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import dask.array as da
import numpy as np
from sklearn import config_context
from sklearn.neighbors import NearestNeighbors
from sklearn.utils import check_array, check_random_state

from ..exceptions import DataError
from ..store.stages import resolve_input, row_chunked, stage_fingerprint
from ..store import (
    create_checksummed_array,
    finish_stage,
    open_array,
    open_finished_stage,
    open_group,
    open_stage,
    stage_is_complete,
    writable,
)
from .knn import (
    EXACT_MAX_ROWS,
    KNN_METHODS,
    KNNIndex,
    _check_metric,
    default_build_neighbors,
    drop_self,
    recall_of,
    sample_recall,
    warm_up,
)

__all__ = [
    "DEFAULT_SHARD_ROWS",
    "KNNGraph",
    "build_sharded_graph",
    "knn_graph",
    "open_knn_graph",
    "warm_up_workers",
]

logger = logging.getLogger(__name__)

#: Rows per shard when not given: a shard task over this many 32-column float32 rows peaked at about
#: 0.9 GiB per worker, numba's compiled code included (see the module docstring for other sizes).
DEFAULT_SHARD_ROWS = 250_000

_CHUNK_BYTES = 32 * 2**20  # rows per chunk when numpy input is written to a store

_SCRATCH = ("_rows", "_candidate_indices", "_candidate_distances", "_shard_done")


@dataclass
class KNNGraph:
    """A finished ``knn`` stage.

    Attributes
    ----------
    path : pathlib.Path
        The stage's group.
    indices : dask.array.Array of shape (n_samples, n_neighbors), int64
        Lazily read from the store; row ``i`` never contains ``i``.
    distances : dask.array.Array of shape (n_samples, n_neighbors), float64
    meta : dict
        Parameters, ``recall`` (``None`` when not measured), ``timings``
        (seconds per step) and ``peak_rss_bytes`` per worker.
    """

    path: Path
    indices: da.Array
    distances: da.Array
    meta: dict


def knn_graph(X, n_neighbors=10, *, method="auto", metric="euclidean", random_state=None, client=None,
              store=None, build_neighbors=None, shard_rows=None, recall_sample=2000):
    """The k nearest other rows of every row: in memory, or sharded into a store.

    Parameters
    ----------
    X : {ndarray, sparse matrix}, dask.array.Array or path of a dimbsvm store
        Rows, 2-D. numpy (or sparse) input is answered in memory; a Dask
        array or a store path is built shard by shard as Dask tasks and
        written to the store's ``knn`` stage.
    n_neighbors : int, default=10
        k, smaller than the number of rows.
    method : {"auto", "exact", "pynndescent"}, default="auto"
        Search within an index (in memory: the whole data; sharded: one
        shard). ``"auto"`` is exact below 20,000 rows.
    metric : str, default="euclidean"
        A metric pynndescent knows (:func:`~dimbsvm.graph.knn.pynndescent_metrics`).
    random_state : int, RandomState instance or None, default=None
        Seeds NN-descent and the recall sample.
    client : distributed.Client, default=None
        Where the sharded build runs; the current client when there is one,
        else this process, one task after the other.
    store : str or path, default=None
        The store to write the stage into; defaults to ``X`` when ``X`` is a
        store path. Giving it with numpy input asks for the sharded build.
    build_neighbors : int, default=None
        NN-descent graph width including the row itself (default
        :func:`~dimbsvm.graph.knn.default_build_neighbors`, 25 for k = 10).
    shard_rows : int, default=None
        Rows per shard (rounded up to whole chunks); default
        :data:`DEFAULT_SHARD_ROWS`. Smaller shards need less memory per
        worker and more query work (every chunk is queried against every
        other shard).
    recall_sample : int, default=2000
        Rows whose exact neighbours are found to measure the recall of an
        approximate graph (logged; for a stored graph kept in its meta);
        0 skips it.

    Returns
    -------
    indices : ndarray or dask.array.Array of shape (n_samples, n_neighbors), int64
        Nearest first; row ``i`` never lists ``i``. Dask arrays (read from
        the store) for the sharded build, so no process holds all rows.
    distances : same type and shape, float64

    Raises
    ------
    ValueError
        ``n_neighbors`` not in ``[1, n_samples - 1]``, NaN or infinite
        values, an unknown metric or method.

    Examples
    --------
    >>> X = np.array([[0.0], [1.0], [3.0], [7.0]])
    >>> indices, distances = knn_graph(X, 1)
    >>> indices.ravel(), distances.ravel()
    (array([1, 0, 1, 2]), array([1., 1., 2., 4.]))
    """
    if isinstance(X, (str, Path, da.Array)) or store is not None:
        graph = build_sharded_graph(X, n_neighbors, store=store, method=method, metric=metric,
                                    build_neighbors=build_neighbors, shard_rows=shard_rows,
                                    random_state=random_state, recall_sample=recall_sample, client=client)
        return graph.indices, graph.distances
    X = check_array(X, accept_sparse="csr", dtype=[np.float64, np.float32], input_name="X")
    _check_k(n_neighbors, X.shape[0])
    index = KNNIndex(n_neighbors, method=method, metric=metric, build_neighbors=build_neighbors,
                     random_state=random_state).fit(X)
    indices, distances = index.neighbor_graph(n_neighbors)
    if index.method_ == "pynndescent" and recall_sample:
        recall, rows = sample_recall(X, indices, metric=metric, sample_size=recall_sample,
                                     random_state=_seed(random_state))
        logger.info("kNN graph (pynndescent, width %d, k=%d): recall %.4f on %d rows; built in %.1f s",
                    index.build_neighbors_, n_neighbors, recall, rows.size, index.build_time_)
    return indices, distances


def _check_k(k, n):
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k < n:
        raise ValueError(f"n_neighbors must be an integer smaller than the number of rows "
                         f"(n_samples = {n}); got {k!r}")


def _seed(random_state):
    return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))


def open_knn_graph(store, stage="knn") -> KNNGraph:
    """A finished kNN stage of a store (:class:`KNNGraph`); ``StoreError`` if absent or incomplete."""
    group, meta = open_finished_stage(store, stage)
    return KNNGraph(Path(store) / stage, da.from_zarr(group["indices"]), da.from_zarr(group["distances"]), meta)


def warm_up_workers(client, metric="euclidean"):
    """Run :func:`~dimbsvm.graph.knn.warm_up` once on every worker, all at once.

    Each worker compiles pynndescent's numba code in a task of its own (not
    in its event loop, which keeps answering the scheduler meanwhile); a
    worker that is already warm answers in milliseconds.

    Returns
    -------
    seconds : dict
        ``{worker address: seconds spent}``.
    """
    workers = list(client.scheduler_info()["workers"])
    # Pinned on purpose: the point is to reach every worker. The tasks carry no data.
    futures = [client.submit(warm_up, metric, workers=[w], allow_other_workers=False, pure=False)
               for w in workers]
    return dict(zip(workers, client.gather(futures)))


def build_sharded_graph(X, n_neighbors=10, *, store=None, method="auto", metric="euclidean",
                        build_neighbors=None, shard_rows=None, random_state=None, recall_sample=2000,
                        client=None, stage="knn", fingerprint=None, query_epsilon=0.3) -> KNNGraph:
    """Build (or reuse) the ``knn`` stage of a store shard by shard; see :func:`knn_graph`.

    Parameters
    ----------
    stage : str, default="knn"
        Name of the stage group below the store.
    fingerprint : str, default=None
        Identity of data and parameters; derived when not given (see
        :mod:`dimbsvm.store.stages`).
    query_epsilon : float, default=0.3
        Search breadth of the queries of other shards' chunks (see
        :class:`~dimbsvm.graph.KNNIndex`).
    Other parameters
        As :func:`knn_graph`.

    Returns
    -------
    KNNGraph
    """
    from ..distributed.client import current_client

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
    n, chunk = int(X.shape[0]), int(X.chunks[0][0])
    _check_k(n_neighbors, n)
    k = int(n_neighbors)
    bounds = _shard_bounds(n, chunk, k, shard_rows or DEFAULT_SHARD_ROWS)
    methods = [method if method != "auto" else ("exact" if b - a < EXACT_MAX_ROWS else "pynndescent")
               for a, b in bounds]
    for m in set(methods):
        _check_metric(metric, m, sparse=False)
    width = build_neighbors or default_build_neighbors(k)
    seeds = check_random_state(random_state).randint(np.iinfo(np.int32).max, size=len(bounds) + 1)
    params = {"n_neighbors": k, "method": method, "metric": metric, "build_neighbors": int(width),
              "shard_rows": int(bounds[0][1] - bounds[0][0]), "random_state": _jsonable(random_state),
              "recall_sample": int(recall_sample), "rows": n, "query_epsilon": float(query_epsilon)}
    fingerprint = fingerprint or stage_fingerprint("knn", source, np.empty(0), params)
    if stage_is_complete(store_path, stage, fingerprint):
        logger.info("knn stage of %s already built for these data and parameters; reusing it", store_path)
        return open_knn_graph(store_path, stage)

    client = current_client(client)
    tic = time.perf_counter()
    _check_finite(X, client)
    timings = {"check": time.perf_counter() - tic}
    group, done, seeds = _open_or_resume(store_path, stage, fingerprint, dict(params, seeds=seeds.tolist()),
                                         n=n, d=int(X.shape[1]), k=k, chunk=chunk, n_shards=len(bounds),
                                         dtype=_float_dtype(X.dtype), copy_rows=not from_store)
    stage_path = Path(store_path) / stage
    rows_path = str(Path(store_path) / "X") if from_store else str(stage_path / "_rows")
    if not from_store and not done.any():
        tic = time.perf_counter()
        _compute(da.store(X.astype(_float_dtype(X.dtype)), group["_rows"], lock=False, compute=False),
                          client=client)
        timings["copy_rows"] = time.perf_counter() - tic
    if client is not None and "pynndescent" in methods:
        tic = time.perf_counter()
        warm = warm_up_workers(client, metric)
        timings["warm_up"] = time.perf_counter() - tic
        logger.info("numba warm-up per worker (s): %s", {w: round(s, 1) for w, s in warm.items()})

    tic = time.perf_counter()
    calls = [dict(shard=s, start=a, stop=b, method=methods[s], seed=int(seeds[s]))
             for s, (a, b) in enumerate(bounds) if not done[s]]
    shared = dict(rows_path=rows_path, stage_path=str(stage_path), n=n, k=k, chunk=chunk, metric=metric,
                  build_neighbors=int(width), n_jobs=1 if client is not None else None,
                  query_epsilon=float(query_epsilon))
    shard_stats = _run(client, _shard_task, calls, shared, "kNN shards")
    timings["shards"] = time.perf_counter() - tic
    logger.info("kNN: %d shard(s) built and queried in %.1f s (%d reused)", len(calls), timings["shards"],
                len(bounds) - len(calls))

    tic = time.perf_counter()
    merge_calls = [dict(start=c0, stop=min(c0 + chunk, n)) for c0 in range(0, n, chunk)]
    merge_stats = _run(client, _merge_task, merge_calls, dict(stage_path=str(stage_path), k=k), "kNN merges")
    timings["merge"] = time.perf_counter() - tic

    recall = None
    if recall_sample and "pynndescent" in methods:
        tic = time.perf_counter()
        recall = _sharded_recall(rows_path, stage_path, n, k, chunk, metric, recall_sample, int(seeds[-1]), client)
        timings["recall"] = time.perf_counter() - tic
        logger.info("kNN graph recall %.4f against exact neighbours of %d sampled rows", recall,
                    min(recall_sample, n))
    for name in _SCRATCH:
        if name in group:
            del group[name]
    finish_stage(group, {
        "recall": recall, "recall_rows": int(min(recall_sample, n)) if recall is not None else 0,
        "timings": timings, "peak_rss_bytes": _peaks([*shard_stats, *merge_stats]), "n_shards": len(bounds),
        "shard_methods": methods,
        "shard_times": [{key: stat[key] for key in ("shard", "rows", "build", "build_cpu", "query", "query_cpu",
                                                    "queried_rows")} for stat in shard_stats]})
    return open_knn_graph(store_path, stage)


def _peaks(stats):
    """Peak resident memory per worker over the tasks' reports."""
    peak = {}
    for stat in stats:
        peak[stat["worker"]] = max(peak.get(stat["worker"], 0), stat["peak_rss"])
    return peak


def _jsonable(random_state):
    return random_state if random_state is None or isinstance(random_state, (int, np.integer)) else repr(random_state)


def _float_dtype(dtype):
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


def _shard_bounds(n, chunk, k, shard_rows):
    """Row ranges of the shards: whole chunks, each with more than k rows (a short tail joins its neighbour)."""
    per = max(1, -(-max(int(shard_rows), k + 2) // chunk)) * chunk
    bounds = [(a, min(a + per, n)) for a in range(0, n, per)]
    if len(bounds) > 1 and bounds[-1][1] - bounds[-1][0] < k + 2:
        bounds[-2:] = [(bounds[-2][0], n)]
    return bounds


def _check_finite(X, client):
    bad = da.map_blocks(lambda b: ~np.isfinite(b).all(axis=1), X, drop_axis=1, dtype=bool)
    first = da.argmax(bad)
    any_bad, row = _compute(bad.any(), first, client=client)
    if any_bad:
        raise DataError(f"X has NaN or infinite values (first in row {int(row)}); a kNN graph needs finite rows")


def _open_or_resume(store_path, stage, fingerprint, meta, *, n, d, k, chunk, n_shards, dtype, copy_rows):
    """The stage group, its shards' done flags and seeds; an unfinished build of the same fingerprint resumes."""
    path = Path(store_path) / stage
    try:
        group = open_group(path, mode="r+")
        old = dict(group.attrs.get("dimbsvm") or {})
        if old.get("fingerprint") == fingerprint and not old.get("complete") and "_shard_done" in group:
            done = group["_shard_done"][:].astype(bool)
            logger.info("resuming the knn stage of %s: %d of %d shard(s) done", store_path, done.sum(), n_shards)
            return group, done, np.asarray(old["seeds"])  # the seeds the finished shards used
    except (FileNotFoundError, ValueError, KeyError):
        pass
    group = open_stage(store_path, stage, fingerprint, meta)
    for name, dt in (("indices", "int64"), ("distances", "float64")):
        create_checksummed_array(group, name, shape=(n, k), dtype=dt, chunks=(chunk, k))
    create_checksummed_array(group, "_candidate_indices", shape=(n_shards, n, k), dtype="int64", chunks=(1, chunk, k))
    create_checksummed_array(group, "_candidate_distances", shape=(n_shards, n, k), dtype="float64",
                             chunks=(1, chunk, k))
    flags = create_checksummed_array(group, "_shard_done", shape=(n_shards,), dtype="int8", chunks=(1,))
    flags[:] = 0
    if copy_rows:
        # X is not a store's own array: tasks read rows from this copy instead of receiving data.
        create_checksummed_array(group, "_rows", shape=(n, d), dtype=np.dtype(dtype).name, chunks=(chunk, d))
    return group, np.zeros(n_shards, dtype=bool), np.asarray(meta["seeds"])


def _run(client, func, calls, shared, label):
    if client is None:
        return [func(**shared, **call) for call in calls]
    from ..distributed import run_tasks

    return run_tasks(client, func, calls, shared=shared, progress=False, label=label)


def _task_stats():
    import resource

    try:
        from distributed import get_worker

        worker = get_worker().address
    except (ImportError, ValueError):
        worker = "local"
    return {"worker": worker, "peak_rss": int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024}


def _shard_task(*, rows_path, stage_path, shard, start, stop, n, k, chunk, method, metric, build_neighbors,
                seed, n_jobs, query_epsilon):
    """Task body: index one shard, write k candidates of every row from it, set the shard's done flag.

    In memory at a time: the shard's rows and index, and one chunk of other
    rows with its answers. The shard's own rows' neighbours (from the index's
    graph) are written and dropped before the first query, which prepares
    pynndescent's search structures.
    """
    rows = open_array(rows_path)
    group = open_group(stage_path, mode="r+")
    out_ind, out_dist = writable(group["_candidate_indices"]), writable(group["_candidate_distances"])
    tic, cpu = time.perf_counter(), time.process_time()
    index = KNNIndex(k, method=method, metric=metric, build_neighbors=build_neighbors, random_state=seed,
                     n_jobs=n_jobs, query_epsilon=query_epsilon).fit(rows[start:stop])
    own_ind, own_dist = index.neighbor_graph(k)
    for c0 in range(start, stop, chunk):
        c1 = min(c0 + chunk, stop)
        out_ind[shard, c0:c1] = own_ind[c0 - start:c1 - start] + start
        out_dist[shard, c0:c1] = own_dist[c0 - start:c1 - start]
    del own_ind, own_dist
    build, build_cpu = time.perf_counter() - tic, time.process_time() - cpu
    tic, cpu = time.perf_counter(), time.process_time()
    for c0 in range(0, n, chunk):
        if start <= c0 < stop:
            continue
        c1 = min(c0 + chunk, n)
        ind, dist = index.query(rows[c0:c1], k)
        out_ind[shard, c0:c1] = ind + start
        out_dist[shard, c0:c1] = dist
    writable(group["_shard_done"])[shard] = 1  # written last: the shard's candidates are all on disk
    return dict(_task_stats(), shard=shard, rows=stop - start, build=build, build_cpu=build_cpu,
                query=time.perf_counter() - tic, query_cpu=time.process_time() - cpu,
                queried_rows=n - (stop - start), method=index.method_)


def _merge_task(*, stage_path, start, stop, k):
    """Task body: the top k of every shard's candidates for rows ``start:stop``.

    Shards are merged one at a time into a running top k, so memory does not
    grow with the number of shards. Each shard's candidates are rows of that
    shard only (no index appears twice), and the order - distance, then row
    number - is total, so the result is the top k of all candidates at once.
    """
    group = open_group(stage_path, mode="r+")
    cand_ind, cand_dist = group["_candidate_indices"], group["_candidate_distances"]
    ind, dist = np.empty((stop - start, 0), dtype=np.int64), np.empty((stop - start, 0))
    for shard in range(cand_ind.shape[0]):
        ind = np.concatenate([ind, cand_ind[shard, start:stop]], axis=1)
        dist = np.concatenate([dist, cand_dist[shard, start:stop]], axis=1)
        order = np.lexsort((ind, dist), axis=-1)[:, :k]  # nearest first, ties by row number
        ind, dist = np.take_along_axis(ind, order, axis=1), np.take_along_axis(dist, order, axis=1)
    writable(group["indices"])[start:stop] = ind
    writable(group["distances"])[start:stop] = dist
    return _task_stats()


def _exact_chunk_task(*, rows_path, start, stop, sample, k, metric):
    """Task body: the exact k + 1 nearest rows of ``start:stop`` to each sampled row."""
    block = open_array(rows_path)[start:stop]
    with config_context(working_memory=64):  # bounds the sample-by-chunk distance slabs
        dist, ind = NearestNeighbors(n_neighbors=min(k + 1, stop - start), metric=metric,
                                     algorithm="brute").fit(block).kneighbors(sample)
    return ind + start, dist


def _sharded_recall(rows_path, stage_path, n, k, chunk, metric, size, seed, client):
    rows = np.sort(np.random.RandomState(seed).choice(n, size=min(size, n), replace=False))
    sample = open_array(rows_path).get_orthogonal_selection((rows,))
    calls = [dict(start=c0, stop=min(c0 + chunk, n)) for c0 in range(0, n, chunk)]
    parts = _run(client, _exact_chunk_task, calls, dict(rows_path=rows_path, sample=sample, k=k, metric=metric),
                 "exact sample searches")
    ind = np.concatenate([p[0] for p in parts], axis=1)
    dist = np.concatenate([p[1] for p in parts], axis=1)
    order = np.lexsort((ind, dist), axis=-1)[:, :k + 1]
    exact = drop_self(np.take_along_axis(ind, order, axis=1), np.take_along_axis(dist, order, axis=1), rows)[0]
    found = open_group(stage_path, mode="r")["indices"].get_orthogonal_selection((rows, slice(None)))
    return recall_of(found, exact)


def _compute(*collections, client=None):
    """Compute Dask collections where the engine says (the given or current client, else here)."""
    from ..model_selection.engine import compute

    return compute(*collections, client=client)
