"""The partitioned stored kNN build (:func:`build_partitioned_graph`): k-means partitions, one graph each, merged.

Task bodies: :mod:`dimbsvm.graph.partitioned`; routing and partition
planning: :mod:`dimbsvm.graph.partition`.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import numpy as np
from sklearn.utils import check_random_state

from ...graph import partitioned as part_tasks
from ...graph.knn import EXACT_MAX_ROWS, _check_metric, recall_of
from ...graph.partition import (PAIRED_METRICS, boundary_radius, fit_centroids, group_partitions,
                                nearest_centroids, principal_direction, rank_buckets)
from ...graph.stored import (KNNGraph, check_n_neighbors, float_dtype, jsonable, merge_exact_parts, open_knn_graph,
                             peaks)
from ...store import finish_stage
from ...store.stages import stage_fingerprint
from ..._sampling import sorted_sample
from ...parallel import TaskPlan, map_tasks, run_plan, worker_memory_limits
from ._steps import (chunk_bounds, copy_rows, exact_sample_calls, finished_graph, prepare_input, start_build,
                     warm_up)

__all__ = ["GROUP_MAX_ROWS", "GROUP_MIN_TASKS", "MIN_PARTITION_FACTOR", "REFINE_MEMORY_SHARE",
           "build_partitioned_graph", "check_refinement_memory", "drop_starved_centroids", "group_whole_partitions"]

logger = logging.getLogger(__name__)


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
        As :func:`~dimbsvm.model_selection.graph_build.sharded_build.build_sharded_graph`.
    Other parameters
        As :func:`~dimbsvm.model_selection.graph_build.knn_graph`.

    Returns
    -------
    KNNGraph
        Its meta holds ``recall`` (last measured), ``recalls`` (after the
        merge and after each refinement round), ``rounds``, ``timings``,
        ``partition_rows`` (rows each task held) and ``peak_rss_bytes``.
    """
    store_path, X, source, from_store = prepare_input(X, store, method, metric)
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
    reused = finished_graph(store_path, stage, fingerprint)
    if reused is not None:
        return reused

    client, timings = start_build(X, client)
    group, resumed = part_tasks.open_partitioned_stage(store_path, stage, fingerprint,
                                                       dict(params, seeds=seeds.tolist()), n=n, d=d, k=k,
                                                       chunk=chunk, dtype=float_dtype(X.dtype),
                                                       copy_rows=not from_store)
    stage_path = Path(store_path) / stage
    scratch = stage_path / part_tasks.SCRATCH_DIR
    rows_path = str(Path(store_path) / "X") if from_store else str(stage_path / "_rows")
    chunks = chunk_bounds(n, chunk)
    if resumed:
        logger.info("resuming the knn stage of %s from its scratch files", store_path)
    elif not from_store:
        tic = time.perf_counter()
        copy_rows(X, group, client)
        timings["copy_rows"] = time.perf_counter() - tic

    # Samples: k-means rows and recall rows, read in one pass, one task per chunk.
    tic = time.perf_counter()
    km_rows = sorted_sample(n, opts["kmeans_sample"], seeds[0])  # (drawn in time of the sample, not of n)
    recall_rows = sorted_sample(n, recall_sample, seeds[1])
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
    warm = warm_up(client, metric, timings) if client is not None and nndescent else {}
    context = dict(client=client, scratch=str(scratch), stage_path=str(stage_path), chunks=chunks, k=k,
                   method=method, metric=metric, max_candidates=opts["max_candidates"], seed=int(seeds[2]),
                   timings=timings)
    # The recall sample's exact search runs beside round 0, after its partition tasks have started:
    # it fills the workers the last partitions leave idle instead of waiting for the merges.
    beside = exact_sample_calls(rows_path, recall_x, n, k, chunk, metric) if recall_sample else None
    stats, exact_parts = _build_round(0, plan, width, cap, beside=beside, **context)

    recalls, widths, round_ = [], [width], 0
    if recall_sample:
        tic = time.perf_counter()
        exact = merge_exact_parts(exact_parts, recall_rows, k)
        recalls.append(recall_of(part_tasks.graph_rows(scratch, 0, recall_rows, chunk), exact))
        timings["recall"] = time.perf_counter() - tic
        logger.info("kNN graph recall %.4f against exact neighbours of %d sampled rows", recalls[-1],
                    recall_rows.size)
        while target_recall is not None and recalls[-1] < target_recall and round_ < max_rounds:
            round_ += 1
            tic = time.perf_counter()
            if refine == "rebuild":  # every partition again, wider, newly seeded; merged with the graph so far
                widths.append(int(np.ceil(width * widen ** round_)))
                stats += _build_round(round_, plan, widths[-1], cap, **context)[0]
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
                 seed, timings, beside=None):
    """One graph per partition (or piece), then one merge per chunk: the graph of build round ``round_``.

    Runs of small whole partitions are built by one task each
    (:func:`group_whole_partitions`); partitions cut into pieces and large
    ones by one task per piece. ``beside``: ``(func, shared, calls)`` of
    other tasks to run with the partitions' at a lower priority (after all
    of them have started).

    Returns
    -------
    stats : list of dict
        The partition and merge tasks' statistics.
    beside_results : list or None
        The results of ``beside``'s calls, in their order.
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
    beside_refs = []
    if beside is not None:
        func, beside_shared, beside_calls = beside
        beside_shared = {key: tasks.share(value) for key, value in beside_shared.items()}
        beside_refs = [tasks.add(func, dict(beside_shared, **call), watch=True, name=func.__name__, priority=-1)
                       for call in beside_calls]
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
    return [*part_stats, *merge_stats], [results[ref.id] for ref in beside_refs] if beside is not None else None
