"""Steps both stored kNN builds take: input checks, row copies, numba warm-up, the exact recall sample."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import dask.array as da
import numpy as np

from ...exceptions import DataError
from ...graph.knn import KNN_METHODS
from ...graph.stored import exact_chunk_task, float_dtype, merge_exact_parts, open_knn_graph
from ...store import stage_is_complete
from ...store.stage_inputs import resolve_input, row_chunked
from ...parallel import compute, current_client, map_tasks

logger = logging.getLogger(__name__)

_CHUNK_BYTES = 32 * 2**20  # rows per chunk when numpy input is written to a store


def prepare_input(X, store, method, metric):
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


def check_finite(X, client):
    bad = da.map_blocks(lambda b: ~np.isfinite(b).all(axis=1), X, drop_axis=1, dtype=bool)
    any_bad, row = compute(bad.any(), da.argmax(bad), client=client)
    if any_bad:
        raise DataError(f"X has NaN or infinite values (first in row {int(row)}); a kNN graph needs finite rows")


def chunk_bounds(n, chunk):
    return [(c, c0, min(c0 + chunk, n)) for c, c0 in enumerate(range(0, n, chunk))]


def copy_rows(X, group, client):
    compute(da.store(X.astype(float_dtype(X.dtype)), group["_rows"], lock=False, compute=False), client=client)


def warm_up(client, metric, timings):
    """Compile pynndescent on every worker before the first kNN task (once per host with a prewarmed forkserver)."""
    from ...distributed.warmup import warm_up_workers

    tic = time.perf_counter()
    warm = warm_up_workers(client, metric)
    timings["warm_up"] = time.perf_counter() - tic
    logger.info("numba warm-up per worker (s): %s", {w: round(s, 1) for w, s in warm.items()})
    return warm


def exact_sample_calls(rows_path, sample, n, k, chunk, metric):
    """``(func, shared, calls)`` of the exact search for the sampled rows, one task per chunk.

    Their results, in order, give :func:`~dimbsvm.graph.stored.merge_exact_parts` the exact k
    nearest other rows of the sample.
    """
    return (exact_chunk_task, dict(rows_path=rows_path, sample=sample, k=k, metric=metric),
            [dict(start=c0, stop=c1) for _, c0, c1 in chunk_bounds(n, chunk)])


def exact_sample(rows_path, rows, sample, n, k, chunk, metric, client):
    """The exact k nearest other rows of the sampled rows, one task per chunk."""
    func, shared, calls = exact_sample_calls(rows_path, sample, n, k, chunk, metric)
    parts = map_tasks(func, calls, client=client, label="exact sample searches", shared=shared)
    return merge_exact_parts(parts, rows, k)


def finished_graph(store_path, stage, fingerprint):
    """The stage's graph when a finished one of this fingerprint is in the store (said in the log), else None."""
    if not stage_is_complete(store_path, stage, fingerprint):
        return None
    logger.info("knn stage of %s already built for these data and parameters; reusing it", store_path)
    return open_knn_graph(store_path, stage)


def start_build(X, client):
    """``(client, timings)``: where the tasks run, once the rows are checked finite (timed as ``check``)."""
    client = current_client(client)
    tic = time.perf_counter()
    check_finite(X, client)
    return client, {"check": time.perf_counter() - tic}
