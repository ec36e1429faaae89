"""Task bodies of the sharded kNN build (``strategy="sharded"``): every row queried against every shard.

The build (:func:`dimbsvm.model_selection.graph_build.build_sharded_graph`):

1. the rows are cut into shards of whole chunks; one task per shard
   (:func:`_shard_task`) builds an index over the shard, takes the shard's
   own rows' neighbours from its graph (self excluded) and queries every
   other chunk against it, writing ``k`` candidates per (shard, row) to a
   scratch array - one index and one chunk in memory at a time;
2. one task per chunk (:func:`_merge_task`) merges the shards' candidates
   of its rows into the top ``k``, one shard at a time, so its memory does
   not grow with the number of shards (ties by row number, so the result
   does not depend on the order tasks ran);
3. a sample of rows is searched exactly, chunk by chunk
   (:func:`~dimbsvm.graph.stored.exact_chunk_task`), and the recall of the
   graph on it goes into the stage meta.

Work grows as ``n * n_shards``: every row is queried against every other
shard, so adding workers (and shards) does not shorten it (4x the workers
bought 1.17x at 10^6 rows). The partitioned build
(:mod:`dimbsvm.graph.partitioned`) is the default: on 2 cores at 10^6 rows
it reached recall 0.996 for 172 CPU s where this build reached 0.991 for
337 (``benchmarks/RESULTS.md``, kNN section). This one is kept for metrics
whose neighbours Euclidean k-means routing says little about: it relies on
no routing.

Memory per worker: no task holds all rows. A worker needs its own baseline
(about 0.6 GiB resident once pynndescent's numba code is compiled) plus one
shard task: the shard's rows, its NN-descent graph, pynndescent's search
graph and reordered copy of the rows, and one chunk of other rows - about
twice the shard's row bytes plus 1 KB per shard row. Measured
(``benchmarks/knn_scale.py``): 1.5 million rows of 256 float32 columns
(1.43 GiB) in 150,000-row shards ran on two workers limited to 1.25 GiB each,
peaking at 1.06 GiB per worker, with a recall of 0.996 against 0.945 for one
NN-descent index over all rows.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from ..store import create_checksummed_array, open_array, open_group, open_stage, writable
from .knn import KNNIndex
from .stored import exact_chunk_task, task_stats as _task_stats

__all__ = ["DEFAULT_SHARD_ROWS", "SCRATCH", "open_or_resume", "shard_bounds"]

logger = logging.getLogger(__name__)

#: Rows per shard when not given: a shard task over this many 32-column float32 rows stays within about
#: a GiB per worker, numba's compiled code included (``benchmarks/scaling_notes.md``).
DEFAULT_SHARD_ROWS = 250_000

#: The exact sample search of the recall check (one task per chunk), under its former name.
_exact_chunk_task = exact_chunk_task

#: Scratch arrays of the stage, deleted when it is finished.
SCRATCH = ("_rows", "_candidate_indices", "_candidate_distances", "_shard_done")


def shard_bounds(n, chunk, k, shard_rows):
    """Row ranges of the shards: whole chunks, each with more than k rows (a short tail joins its neighbour)."""
    per = max(1, -(-max(int(shard_rows), k + 2) // chunk)) * chunk
    bounds = [(a, min(a + per, n)) for a in range(0, n, per)]
    if len(bounds) > 1 and bounds[-1][1] - bounds[-1][0] < k + 2:
        bounds[-2:] = [(bounds[-2][0], n)]
    return bounds


def open_or_resume(store_path, stage, fingerprint, meta, *, n, d, k, chunk, n_shards, dtype, copy_rows):
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
