"""The sharded stored kNN build: every row queried against every shard's index (:func:`build_sharded_graph`).

Task bodies: :mod:`dimbsvm.graph.sharded`. Work grows as ``n * n_shards``;
kept for metrics that k-means routing says little about (see the package's
docstring for where it was measured).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
from sklearn.utils import check_random_state

from ..._sampling import sorted_sample
from ...graph import sharded
from ...graph.knn import EXACT_MAX_ROWS, _check_metric, default_build_neighbors, recall_of
from ...graph.stored import KNNGraph, check_n_neighbors, float_dtype, jsonable, open_knn_graph, peaks
from ...store import finish_stage, open_array
from ...store.stages import stage_fingerprint
from ...parallel import map_tasks
from ._steps import chunk_bounds, copy_rows, exact_sample, finished_graph, prepare_input, start_build, warm_up

__all__ = ["build_sharded_graph"]

logger = logging.getLogger(__name__)


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
        As :func:`~dimbsvm.model_selection.graph_build.knn_graph`.

    Returns
    -------
    KNNGraph
    """
    store_path, X, source, from_store = prepare_input(X, store, method, metric)
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
    reused = finished_graph(store_path, stage, fingerprint)
    if reused is not None:
        return reused

    client, timings = start_build(X, client)
    group, done, seeds = sharded.open_or_resume(store_path, stage, fingerprint,
                                                dict(params, strategy="sharded", seeds=seeds.tolist()), n=n,
                                                d=int(X.shape[1]), k=k, chunk=chunk, n_shards=len(bounds),
                                                dtype=float_dtype(X.dtype), copy_rows=not from_store)
    stage_path = Path(store_path) / stage
    rows_path = str(Path(store_path) / "X") if from_store else str(stage_path / "_rows")
    if not from_store and not done.any():
        tic = time.perf_counter()
        copy_rows(X, group, client)
        timings["copy_rows"] = time.perf_counter() - tic
    if client is not None and "pynndescent" in methods:
        warm_up(client, metric, timings)

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
    merge_calls = [dict(start=c0, stop=c1) for _, c0, c1 in chunk_bounds(n, chunk)]
    merge_stats = map_tasks(sharded._merge_task, merge_calls, client=client, label="kNN merges",
                            shared=dict(stage_path=str(stage_path), k=k))
    timings["merge"] = time.perf_counter() - tic

    recall = None
    if recall_sample and "pynndescent" in methods:
        tic = time.perf_counter()
        rows = sorted_sample(n, recall_sample, seeds[-1])
        exact = exact_sample(rows_path, rows, open_array(rows_path).get_orthogonal_selection((rows,)), n, k, chunk,
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
