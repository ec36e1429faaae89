"""Task bodies of the partitioned kNN build (the default for data beyond one worker).

The build (:func:`dimbsvm.model_selection.graph_build.build_partitioned_graph`):

1. k-means centroids are fitted on a seeded sample of rows
   (:func:`~dimbsvm.graph.partition.fit_centroids`);
2. one task per chunk of rows (:func:`route_task`) puts each row in its
   ``overlap`` nearest partitions - a farther one only if the row lies
   within ``radius`` of its boundary with the nearest
   (:func:`~dimbsvm.graph.partition.nearest_centroids`) - and writes the
   chunk's rows grouped by partition to the stage's scratch space;
3. one task per partition (:func:`partition_task`) gathers its members'
   rows, builds a kNN graph over them (pynndescent, exact for small
   partitions) and writes each member's ``k`` candidates. A partition over
   ``max_partition_rows`` is cut into pieces along its principal direction
   (:func:`~dimbsvm.graph.partition.rank_buckets`), one task each, so no
   task holds more rows than its budget; a run of small whole partitions is
   built by one task (:func:`partition_group_task`), one after the other;
4. one task per chunk (:func:`merge_task`) keeps each row's ``k`` nearest
   distinct candidates from all its partitions;
5. while the recall measured on a sample is below target, one refinement
   round: steps 3-4 again, wider and newly seeded, merged with the graph so
   far; or (:func:`refine_task`, one task per chunk) each row's candidates
   are its neighbours' neighbours, across partition boundaries.

Work grows as ``overlap * n`` at most (each row is indexed up to ``overlap``
times; on well-separated clusters about once), not as ``n * n_shards`` as in
the sharded build (:mod:`dimbsvm.graph.sharded`).

Scratch space (``<stage>/_scratch``, deleted when the stage is finished):
one writer per file, each file written under a temporary name and renamed,
the file that marks a step done last, so an interrupted build resumes from
the files present::

    centroids.npy
    route/c<chunk>.{ids,rows,pos,offsets}.npy     grouped by partition; offsets last
    part/r<round>/p<partition>-<piece>.{ind,dist,ids}.npy   member ids ascending; ids last
    part/r<round>/g<first>-<stop>.{ind,dist,ids}.npy        a run of whole partitions, as one output
    graph/r<round>/c<chunk>.{ind,dist}.npy                  the graph after round 0 and each refinement

Disk: ``overlap`` copies of the rows (uncompressed) plus 16 bytes per
neighbour per row per round. The refinement reads rows and graph rows at
random through memory maps of these files: the pages it touches count in a
worker's resident memory (as reclaimable page cache) while the task runs.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from numbers import Integral, Real
from pathlib import Path

import numpy as np

from ..exceptions import DataError
from ..store import create_checksummed_array, open_array, open_group, open_stage, writable
from .knn import KNNIndex, default_build_neighbors
from .partition import (merge_candidate_lists, nearest_centroids, paired_distances, partition_count,
                        top_k_candidates)
from .stored import task_stats

__all__ = ["DEFAULT_MAX_CANDIDATES", "DEFAULT_MAX_PARTITION_ROWS", "SCRATCH_DIR", "check_options", "graph_rows",
           "merge_task", "group_name", "open_partitioned_stage", "part_name", "partition_build_neighbors",
           "partition_done", "partition_group_task", "partition_task", "read_sample_task",
           "refine_task", "remove_scratch", "route_done", "route_task", "save_npy"]

#: The stage's scratch directory.
SCRATCH_DIR = "_scratch"

#: Largest partition (rows held by one task) when not given: small beside a worker's baseline memory
#: (measured in ``benchmarks/scaling_notes.md``, "Measurements behind constants").
DEFAULT_MAX_PARTITION_ROWS = 200_000


def partition_build_neighbors(n_neighbors):
    """The NN-descent width of each partition's graph when none is given: 32 for k = 10.

    One widening step (``1.25x``, rounded up) above
    :func:`~dimbsvm.graph.knn.default_build_neighbors`. Each partition's
    graph is built once when round 0 meets the target recall, and a
    rebuild round costs more than a wider first round. On clustered 32-d
    blobs at 10^7 rows (2 workers, 60 candidates), round 0 at width 25 took
    927 s to recall 0.9496, just short of 0.95, so a whole second round
    would have followed; at width 32 it took 1,189 s to 0.960, and the
    build 1,293 s in all (width 25 with pynndescent's 25 candidates: 825 s
    to 0.911, then a rebuild round, 2,054 s in all). At 10^6 rows width 32
    costs 91 CPU s against 66 at width 25 (recall 0.995 against 0.958);
    ``benchmarks/scaling_notes.md`` has the runs.

    Examples
    --------
    >>> partition_build_neighbors(10)
    32
    """
    return math.ceil(1.25 * default_build_neighbors(n_neighbors))


#: NN-descent candidates per row and iteration in a partition's graph when not given (pynndescent's own
#: default is the graph width, at most 60): on the hardest kind of partition (one Gaussian blob) a narrower
#: graph with more candidates finds as many true neighbours for less CPU (``benchmarks/nndescent_candidates.py``;
#: the numbers in ``benchmarks/scaling_notes.md``, "Measurements behind constants").
DEFAULT_MAX_CANDIDATES = 60


def _check_int(name, value, low, high=None):
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low or (high is not None
                                                                                       and value > high):
        bounds = f"[{low}, {'inf' if high is None else high}]"
        raise ValueError(f"The '{name}' parameter of knn_graph must be an int in the range {bounds}. "
                         f"Got {value!r} instead.")
    return int(value)


def check_options(n, k, *, overlap, overlap_radius, max_partition_rows, n_partitions, target_recall, max_rounds,
                  refine, widen, kmeans_sample, recall_sample, max_candidates=DEFAULT_MAX_CANDIDATES):
    """The partitioned build's options, validated, with defaults resolved for ``n`` rows and ``k`` neighbours.

    Raises
    ------
    ValueError
        Naming the parameter, the accepted values and the value given.
    """
    opts = {"overlap": _check_int("overlap", overlap, 1),
            "max_partition_rows": _check_int("max_partition_rows", DEFAULT_MAX_PARTITION_ROWS
                                             if max_partition_rows is None else max_partition_rows, k + 2),
            "max_rounds": _check_int("max_rounds", max_rounds, 0),
            "recall_sample": _check_int("recall_sample", recall_sample, 0),
            "max_candidates": None if max_candidates is None else _check_int("max_candidates", max_candidates, 1)}
    if refine not in ("rebuild", "neighbors"):
        raise ValueError(f"The 'refine' parameter of knn_graph must be one of ('rebuild', 'neighbors'). "
                         f"Got {refine!r} instead.")
    if isinstance(widen, bool) or not isinstance(widen, Real) or widen < 1:
        raise ValueError(f"The 'widen' parameter of knn_graph must be a float >= 1. Got {widen!r} instead.")
    if target_recall is not None and (isinstance(target_recall, bool) or not isinstance(target_recall, Real)
                                      or not 0 < target_recall <= 1):
        raise ValueError(f"The 'target_recall' parameter of knn_graph must be a float in the range (0, 1] or None. "
                         f"Got {target_recall!r} instead.")
    if not (overlap_radius in (None, "auto") or (isinstance(overlap_radius, Real) and overlap_radius >= 0)):
        raise ValueError(f"The 'overlap_radius' parameter of knn_graph must be a float >= 0, 'auto' or None. "
                         f"Got {overlap_radius!r} instead.")
    parts = (partition_count(n, opts["overlap"], opts["max_partition_rows"]) if n_partitions is None
             else _check_int("n_partitions", n_partitions, 1, n))
    sample = (max(50_000, 100 * parts) if kmeans_sample is None else _check_int("kmeans_sample", kmeans_sample, 1))
    return dict(opts, overlap=min(opts["overlap"], parts), n_partitions=parts, kmeans_sample=min(n, sample),
                overlap_radius=overlap_radius, target_recall=target_recall, refine=refine, widen=float(widen))

_REFINE_BLOCK = 1024  # rows whose k * k candidates are gathered at once in a refinement task


def save_npy(path, array):
    """Write ``array`` to ``path`` (.npy) under a temporary name, then rename: a file present is complete."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npy")
    np.save(tmp, np.ascontiguousarray(array))
    os.replace(tmp, path)


def _route_file(scratch, chunk_id, what):
    return Path(scratch) / "route" / f"c{chunk_id:06d}.{what}.npy"


def part_name(partition, piece, round_=0):
    """The scratch name of one piece of one partition's output in build round ``round_``."""
    return f"r{round_}/p{partition:05d}-{piece:03d}"


def group_name(first, stop, round_=0):
    """The scratch name of the output of whole partitions ``first:stop`` built by one task in round ``round_``."""
    return f"r{round_}/g{first:05d}-{stop:05d}"


def _part_file(scratch, name, what):
    return Path(scratch) / "part" / f"{name}.{what}.npy"


def _graph_file(scratch, round_, chunk_id, what):
    return Path(scratch) / "graph" / f"r{round_}" / f"c{chunk_id:06d}.{what}.npy"


def route_done(scratch, chunk_id):
    """The partition counts of a routed chunk, or None if it is not routed yet."""
    path = _route_file(scratch, chunk_id, "offsets")
    return np.diff(np.load(path)) if path.exists() else None


def partition_done(scratch, name):
    """Whether a piece of a partition has written its candidates."""
    return _part_file(scratch, name, "ids").exists()


def open_partitioned_stage(store_path, stage, fingerprint, meta, *, n, d, k, chunk, dtype, copy_rows):
    """The stage group and whether an unfinished build of the same fingerprint is resumed.

    A resumed build keeps its scratch files (routed chunks, built
    partitions); a new one starts from an empty stage.
    """
    path = Path(store_path) / stage
    try:
        group = open_group(path, mode="r+")
        old = dict(group.attrs.get("dimbsvm") or {})
        if (old.get("fingerprint") == fingerprint and not old.get("complete")
                and (path / SCRATCH_DIR / "centroids.npy").exists()):
            return group, True
    except (FileNotFoundError, ValueError, KeyError):
        pass
    group = open_stage(store_path, stage, fingerprint, meta)
    shutil.rmtree(path / SCRATCH_DIR, ignore_errors=True)
    for name, dt in (("indices", "int64"), ("distances", "float64")):
        create_checksummed_array(group, name, shape=(n, k), dtype=dt, chunks=(chunk, k))
    if copy_rows:
        # X is not a store's own array: tasks read rows from this copy instead of receiving data.
        create_checksummed_array(group, "_rows", shape=(n, d), dtype=np.dtype(dtype).name, chunks=(chunk, d))
    (path / SCRATCH_DIR).mkdir(parents=True, exist_ok=True)
    return group, False


def remove_scratch(stage_path):
    """Delete the scratch files and the row copy of a finished stage."""
    shutil.rmtree(Path(stage_path) / SCRATCH_DIR, ignore_errors=True)
    group = open_group(stage_path, mode="r+")
    if "_rows" in group:
        del group["_rows"]


def read_sample_task(*, rows_path, start, stop, rows):
    """Task body: the rows of ``rows`` (global numbers, all in ``start:stop``)."""
    if len(rows) == 0:
        return np.empty((0, open_array(rows_path).shape[1]))
    return open_array(rows_path)[start:stop][np.asarray(rows) - start]


def route_task(*, rows_path, scratch, chunk_id, start, stop, overlap, radius, dtype):
    """Task body: put each row of ``start:stop`` in its ``overlap`` nearest partitions (within ``radius``).

    Writes the chunk's row ids and rows grouped by partition (ascending
    within a partition), each row's position of its first copy, and the
    partitions' offsets (last: the chunk is routed).

    Returns
    -------
    dict
        ``counts`` (members per partition), timings and :func:`task_stats`.
    """
    tic, cpu = time.perf_counter(), time.process_time()
    centroids = np.load(Path(scratch) / "centroids.npy")
    block = np.asarray(open_array(rows_path)[start:stop], dtype=dtype)
    parts = nearest_centroids(block, centroids, overlap, radius=radius).ravel()
    order = np.argsort(parts, kind="stable")  # grouped by partition, rows ascending in each
    order = order[parts[order] >= 0]  # places skipped by the radius rule
    local = order // overlap
    offsets = np.searchsorted(parts[order], np.arange(len(centroids) + 1))
    _, first = np.unique(local, return_index=True)  # local is not sorted; unique sorts it
    save_npy(_route_file(scratch, chunk_id, "ids"), local + start)
    save_npy(_route_file(scratch, chunk_id, "rows"), block[local])
    save_npy(_route_file(scratch, chunk_id, "pos"), first)
    save_npy(_route_file(scratch, chunk_id, "offsets"), offsets)  # last: marks the chunk routed
    return dict(task_stats(), kind="route", counts=np.diff(offsets), seconds=time.perf_counter() - tic,
                cpu=time.process_time() - cpu)


class _RoutedChunks:
    """The routed chunks' members of partitions ``first:stop``, each chunk's files opened once.

    A task that builds many small partitions would otherwise open every
    chunk's files once per partition (at 10^7 rows in 200 chunks and 6,000
    partitions: millions of file opens).
    """

    def __init__(self, scratch, n_chunks, first, stop):
        self._sources = []
        for c in range(n_chunks):
            offsets = np.load(_route_file(scratch, c, "offsets"))
            if offsets[stop] > offsets[first]:
                self._sources.append((offsets, np.load(_route_file(scratch, c, "ids"), mmap_mode="r"),
                                      np.load(_route_file(scratch, c, "rows"), mmap_mode="r")))

    def slices(self, partition):
        """Yield ``(ids, rows)`` memory-mapped slices of one partition's members, chunk by chunk."""
        for offsets, chunk_ids, chunk_rows in self._sources:
            a, b = int(offsets[partition]), int(offsets[partition + 1])
            if b > a:
                yield chunk_ids[a:b], chunk_rows[a:b]

    def members(self, partition):
        """``(ids, rows)`` of one partition's members, in memory; ``rows`` is None when it has none."""
        parts = [(np.array(ids), np.array(rows)) for ids, rows in self.slices(partition)]
        if not parts:
            return np.empty(0, dtype=np.int64), None
        return np.concatenate([ids for ids, _ in parts]), np.concatenate([rows for _, rows in parts])


def _piece_members(source, partition, piece, direction):
    """Ids of one piece of an oversized partition: a range of members ranked along ``direction``.

    Holds 16 bytes per member of the partition (projection and id) and one
    chunk's slice of rows at a time (``source``: :class:`_RoutedChunks`).
    """
    proj, ids = [], []
    for chunk_ids, chunk_rows in source.slices(partition):
        proj.append(np.asarray(chunk_rows, dtype=np.float64) @ direction)
        ids.append(np.array(chunk_ids))
    proj, ids = np.concatenate(proj), np.concatenate(ids)
    ranked = ids[np.lexsort((ids, proj))]  # ties along the direction by row id: the same split every time
    lo, hi = piece
    return np.sort(ranked[lo:hi])


def partition_task(*, scratch, n_chunks, partition, piece_number, piece, direction, k, method, metric,
                   build_neighbors, seed, round_=0, max_candidates=None):
    """Task body: a kNN graph over one partition (or one piece of it); writes each member's k candidates.

    ``piece`` is a rank range of the partition's members: along
    ``direction`` when that is given (an oversized partition cut into
    pieces, see :func:`_piece_members`), else all of them.

    Returns
    -------
    dict
        ``rows`` (members held), ``method``, timings and :func:`task_stats`.
    """
    tic, cpu = time.perf_counter(), time.process_time()
    source = _RoutedChunks(scratch, n_chunks, partition, partition + 1)
    if direction is None:
        ids, rows = source.members(partition)
    else:
        ids = _piece_members(source, partition, piece, np.asarray(direction))
        rows = np.concatenate([np.asarray(chunk_rows[np.isin(chunk_ids, ids, assume_unique=True)])
                               for chunk_ids, chunk_rows in source.slices(partition)])
    m = len(ids)
    ind, dist, used = _partition_graph(ids, rows, k, method=method, metric=metric, build_neighbors=build_neighbors,
                                       max_candidates=max_candidates, seed=seed)
    del rows
    _save_part(scratch, part_name(partition, piece_number, round_), ids, ind, dist)
    return dict(task_stats(), kind="partition", partition=partition, piece=piece_number, rows=m, method=used,
                seconds=time.perf_counter() - tic, cpu=time.process_time() - cpu)


def _partition_graph(ids, rows, k, *, method, metric, build_neighbors, seed, max_candidates=None):
    """Each member's k candidates (global ids; ``-1`` / ``inf`` past ``len(ids) - 1``) and the search used.

    The index is a :class:`~dimbsvm.graph.knn.KNNIndex` with ``n_jobs=None``:
    numba uses the threads the worker's execution policy allows.
    """
    m = len(ids)
    ind = np.full((m, k), -1, dtype=np.int64)
    dist = np.full((m, k), np.inf)
    if m < 2:
        return ind, dist, None
    kk = min(k, m - 1)
    index = KNNIndex(kk, method=method, metric=metric, build_neighbors=build_neighbors,
                     max_candidates=max_candidates, random_state=seed, n_jobs=None).fit(rows)
    local, dist[:, :kk] = index.neighbor_graph(kk)
    ind[:, :kk] = ids[local]
    return ind, dist, index.method_


def _save_part(scratch, name, ids, ind, dist):
    save_npy(_part_file(scratch, name, "ind"), ind)
    save_npy(_part_file(scratch, name, "dist"), dist)
    save_npy(_part_file(scratch, name, "ids"), ids)  # last: marks the output written


def partition_group_task(*, scratch, n_chunks, first, stop, seeds, k, method, metric, build_neighbors, round_=0,
                         max_candidates=None):
    """Task body: the kNN graphs of whole partitions ``first:stop``, one after the other; one output.

    Each partition's graph is the one :func:`partition_task` would build
    (same members in the same order, same seed); the output holds each
    member's k nearest distinct candidates over the group's partitions (a
    row in two of them keeps the better), which is what :func:`merge_task`
    would keep of them. Holds one partition's rows at a time, and ``k``
    candidates per member of the group.

    Returns
    -------
    dict
        ``rows`` (the most members held at once), ``members``, ``methods``,
        timings and :func:`task_stats`.
    """
    tic, cpu = time.perf_counter(), time.process_time()
    source = _RoutedChunks(scratch, n_chunks, first, stop)
    lists, held, used = [], 0, set()
    for partition, seed in zip(range(first, stop), seeds):
        ids, rows = source.members(partition)
        ind, dist, method_used = _partition_graph(ids, rows, k, method=method, metric=metric,
                                                  build_neighbors=build_neighbors, max_candidates=max_candidates,
                                                  seed=seed)
        lists.append((ids, ind, dist))
        held, used = max(held, len(ids)), used | {method_used} - {None}
        del rows
    members = np.unique(np.concatenate([ids for ids, _, _ in lists]))
    ind, dist = merge_candidate_lists(((np.searchsorted(members, ids), ind, dist) for ids, ind, dist in lists),
                                      members.size, k, exclude=members)
    del lists
    _save_part(scratch, group_name(first, stop, round_), members, ind, dist)
    return dict(task_stats(), kind="partition", partition=first, partitions=stop - first, piece=0, rows=held,
                members=int(members.size), method=None, methods=sorted(used), seconds=time.perf_counter() - tic,
                cpu=time.process_time() - cpu)


def _write_graph(stage_path, scratch, round_, chunk_id, start, stop, ind, dist):
    group = open_group(stage_path, mode="r+")
    writable(group["indices"])[start:stop] = ind
    writable(group["distances"])[start:stop] = dist
    save_npy(_graph_file(scratch, round_, chunk_id, "dist"), dist)
    save_npy(_graph_file(scratch, round_, chunk_id, "ind"), ind)


def merge_task(*, stage_path, scratch, chunk_id, start, stop, k, pieces, round_=0):
    """Task body: each row of ``start:stop`` keeps its k nearest distinct candidates from all its partitions.

    ``pieces`` maps each partition to its output names (of build round
    ``round_``); after the first round the graph of the round before is one
    more list, so a rebuild round can only add neighbours. Partitions are read
    in a fixed order and the order of candidates is total (distance, then
    id), so the result does not depend on which tasks ran where or when.

    Raises
    ------
    DataError
        A row has fewer than k candidates (its partitions were too small).
    """
    tic, cpu = time.perf_counter(), time.process_time()
    counts = route_done(scratch, chunk_id)
    n_rows = stop - start
    lists = []
    # A group's output serves all its partitions: each output is read once.
    for name in dict.fromkeys(name for partition in np.flatnonzero(counts) for name in pieces[int(partition)]):
        members = np.load(_part_file(scratch, name, "ids"), mmap_mode="r")
        a, b = np.searchsorted(members, [start, stop])
        if b > a:
            lists.append((np.asarray(members[a:b]) - start,
                          np.load(_part_file(scratch, name, "ind"), mmap_mode="r")[a:b],
                          np.load(_part_file(scratch, name, "dist"), mmap_mode="r")[a:b]))
    if round_ > 0:
        lists.append((np.arange(n_rows), np.load(_graph_file(scratch, round_ - 1, chunk_id, "ind")),
                      np.load(_graph_file(scratch, round_ - 1, chunk_id, "dist"))))
    ind, dist = merge_candidate_lists(lists, n_rows, k, exclude=np.arange(start, stop))
    del lists
    short = np.flatnonzero(ind[:, -1] < 0)
    if short.size:
        raise DataError(f"rows {start + short[:5]} have fewer than k={k} candidates: their partitions are "
                        "too small; raise max_partition_rows or overlap")
    _write_graph(stage_path, scratch, round_, chunk_id, start, stop, ind, dist)
    return dict(task_stats(), kind="merge", seconds=time.perf_counter() - tic, cpu=time.process_time() - cpu)


class _Gather:
    """Rows and graph rows by global row id, through memory maps of the scratch files (opened on demand)."""

    def __init__(self, scratch, round_, chunk):
        self.scratch, self.round, self.chunk = scratch, round_, chunk
        self._graphs, self._rows = {}, {}

    def _graph(self, c):
        if c not in self._graphs:
            self._graphs[c] = np.load(_graph_file(self.scratch, self.round, c, "ind"), mmap_mode="r")
        return self._graphs[c]

    def _row_source(self, c):
        if c not in self._rows:
            self._rows[c] = (np.load(_route_file(self.scratch, c, "rows"), mmap_mode="r"),
                             np.load(_route_file(self.scratch, c, "pos")))
        return self._rows[c]

    def _take(self, ids, width, fetch):
        flat = ids.ravel()
        out = None
        owner = flat // self.chunk
        order = np.argsort(owner, kind="stable")
        cuts = np.flatnonzero(np.diff(owner[order])) + 1
        for group in np.split(order, cuts):
            if group.size == 0:
                continue
            c = int(owner[group[0]])
            part = fetch(c, flat[group] - c * self.chunk)
            if out is None:
                out = np.empty((flat.size, width), dtype=part.dtype)
            out[group] = part
        return out.reshape(*ids.shape, width)

    def graph(self, ids):
        """The graph rows (neighbour ids) of ``ids``."""
        width = self._graph(int(ids.flat[0]) // self.chunk).shape[1]
        return self._take(ids, width, lambda c, local: self._graph(c)[local])

    def rows(self, ids):
        """The data rows of ``ids``."""
        def fetch(c, local):
            rows, pos = self._row_source(c)
            return rows[pos[local]]

        return self._take(ids, self._row_source(int(ids.flat[0]) // self.chunk)[0].shape[1], fetch)


def refine_task(*, stage_path, scratch, chunk_id, start, stop, chunk, k, metric, round_):
    """Task body: one round of neighbours of neighbours for rows ``start:stop``.

    Each row's candidates are the neighbours of its neighbours in the graph
    of round ``round_`` (whatever partition they came from); with its current
    neighbours, it keeps the k nearest distinct ones and writes round
    ``round_ + 1``. Rows are taken ``_REFINE_BLOCK`` at a time, so a task
    holds that many rows' k * k candidates and their rows.
    """
    tic, cpu = time.perf_counter(), time.process_time()
    gather = _Gather(scratch, round_, chunk)
    own_ind = np.load(_graph_file(scratch, round_, chunk_id, "ind"))
    own_dist = np.load(_graph_file(scratch, round_, chunk_id, "dist"))
    new_ind, new_dist = np.empty_like(own_ind), np.empty_like(own_dist)
    for b0 in range(0, stop - start, _REFINE_BLOCK):
        b1 = min(b0 + _REFINE_BLOCK, stop - start)
        ids = np.arange(start + b0, start + b1)
        hop = gather.graph(own_ind[b0:b1]).reshape(b1 - b0, -1)  # neighbours of neighbours
        dist = paired_distances(gather.rows(ids)[:, None, :], gather.rows(hop), metric)
        both_ind = np.concatenate([own_ind[b0:b1], hop], axis=1)
        both_dist = np.concatenate([own_dist[b0:b1], dist], axis=1)
        new_ind[b0:b1], new_dist[b0:b1] = top_k_candidates(both_ind, both_dist, k, exclude=ids)
    _write_graph(stage_path, scratch, round_ + 1, chunk_id, start, stop, new_ind, new_dist)
    return dict(task_stats(), kind="refine", seconds=time.perf_counter() - tic, cpu=time.process_time() - cpu,
                changed=int((new_ind != own_ind).any(axis=1).sum()))


def graph_rows(scratch, round_, rows, chunk):
    """The neighbour ids of ``rows`` (sorted global ids) in the graph of round ``round_``."""
    return _Gather(scratch, round_, chunk).graph(np.asarray(rows)[:, None])[:, 0, :]
