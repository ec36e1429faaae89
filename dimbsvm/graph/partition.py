"""Numeric kernels of the partitioned kNN build: arrays in, arrays out, no Dask, no I/O.

- :func:`partition_count` - how many partitions a build over ``n`` rows uses.
- :func:`fit_centroids` - k-means centroids of a sample of rows (the partitions' routing keys).
- :func:`nearest_centroids` - each row's ``overlap`` nearest centroids (the partitions it joins).
- :func:`smallest_columns` - each row's m smallest scores, cheaply among thousands of columns.
- :func:`boundary_radius` - how far beyond a partition's boundary rows still need to join it.
- :func:`rank_buckets` - rank ranges that cut an oversized partition into pieces within budget.
- :func:`group_partitions` - consecutive small partitions gathered into one task's work.
- :func:`top_k_candidates` - each row's k best distinct candidates from any number of lists.
- :func:`merge_candidate_lists` - the same, for lists that each cover some of the rows.
- :func:`paired_distances` - distances between matched rows (the refinement round's candidates).

The build itself (routing tasks, one task per partition, merging, refinement)
is in :mod:`dimbsvm.graph.partitioned` (task bodies) and
:mod:`dimbsvm.model_selection.graph_build` (what to submit).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["PAIRED_METRICS", "boundary_radius", "fit_centroids", "group_partitions", "merge_candidate_lists",
           "nearest_centroids", "paired_distances", "partition_count", "principal_direction", "rank_buckets",
           "smallest_columns", "top_k_candidates"]

#: Metrics :func:`paired_distances` computes (the refinement round is skipped for others).
PAIRED_METRICS = ("euclidean", "l2", "sqeuclidean", "manhattan", "l1", "cityblock", "cosine")


def partition_count(n, overlap, max_partition_rows):
    """The number of k-means partitions for ``n`` rows, each row in ``overlap`` of them.

    Partitions average half of ``max_partition_rows`` members, leaving room
    for uneven cluster sizes (an oversized partition is cut into pieces,
    :func:`rank_buckets`). Data that fits in one partition gets one.

    Examples
    --------
    >>> partition_count(1_000_000, 2, 200_000), partition_count(150_000, 2, 200_000)
    (20, 1)
    """
    if n <= max_partition_rows:
        return 1
    return max(overlap + 1, math.ceil(2 * overlap * n / max_partition_rows))


def fit_centroids(sample, n_centroids, *, random_state=0):
    """k-means centroids of ``sample`` (float64, shape ``(n_centroids, n_features)``).

    Exact k-means (scikit-learn ``KMeans``, one initialisation) for small
    samples, mini-batch k-means for large ones; both seeded, so the same
    sample gives the same centroids. Fewer distinct sample rows than
    ``n_centroids`` gives fewer centroids.
    """
    from sklearn.cluster import KMeans, MiniBatchKMeans

    sample = np.asarray(sample, dtype=np.float64)
    distinct = len(np.unique(sample, axis=0)) if len(sample) <= 200_000 else len(sample)
    n_centroids = max(1, min(int(n_centroids), distinct))
    if n_centroids == 1:
        return sample.mean(axis=0, keepdims=True)
    if len(sample) <= 20_000:
        model = KMeans(n_centroids, n_init=1, random_state=random_state)
    else:
        model = MiniBatchKMeans(n_centroids, n_init=3, batch_size=4096, random_state=random_state)
    return np.asarray(model.fit(sample).cluster_centers_, dtype=np.float64)


#: Row-to-centroid scores :func:`nearest_centroids` holds at once (128 MiB of float64; and as many int64 in
#: its partial sort). A 50,000-row chunk against 200 centroids (10^7 rows, the default budget) is one block.
SCORES_AT_ONCE = 1 << 24


def nearest_centroids(block, centroids, overlap, *, radius=None):
    """Each row's ``overlap`` nearest centroids (Euclidean), nearest first, ties by centroid number.

    With ``radius``, a row joins its j-th nearest centroid (j > 1) only if
    its distance to the boundary between its nearest centroid and that one
    (the bisecting hyperplane) is at most ``radius``: a row whose k nearest
    neighbours lie within ``radius`` has none in a farther centroid's cell,
    since reaching that cell means crossing the boundary. Skipped places
    are ``-1``.

    Parameters
    ----------
    block : ndarray of shape (n_rows, n_features)
    centroids : ndarray of shape (n_centroids, n_features)
    overlap : int
        At most ``n_centroids``.
    radius : float, default=None
        ``None`` joins all ``overlap`` nearest.

    Returns
    -------
    ndarray of shape (n_rows, overlap), int32

    Examples
    --------
    >>> C = np.array([[0.0], [1.0], [3.0]])
    >>> nearest_centroids(np.array([[0.0], [2.9]]), C, 2)
    array([[0, 1],
           [2, 1]], dtype=int32)
    >>> nearest_centroids(np.array([[0.0], [2.9]]), C, 2, radius=0.4)
    array([[ 0, -1],
           [ 2, -1]], dtype=int32)
    """
    block = np.asarray(block, dtype=np.float64)
    centroids = np.asarray(centroids, dtype=np.float64)
    step = max(1, SCORES_AT_ONCE // max(1, len(centroids)))
    if len(block) > step:  # rows a few thousand at a time against thousands of centroids (small leaves)
        return np.concatenate([nearest_centroids(block[i:i + step], centroids, overlap, radius=radius)
                               for i in range(0, len(block), step)])
    # ||x - c||^2 up to the row's own ||x||^2, which does not change the order
    scores = (centroids ** 2).sum(axis=1)[None, :] - 2.0 * block @ centroids.T
    if overlap < len(centroids):
        chosen = smallest_columns(scores, overlap)
    else:
        chosen = np.broadcast_to(np.arange(len(centroids)), scores.shape)
    picked = np.take_along_axis(scores, chosen, axis=1)
    order = np.lexsort((chosen, picked), axis=-1)  # nearest first, ties by centroid number
    chosen = np.take_along_axis(chosen, order, axis=1).astype(np.int32)
    if radius is not None and overlap > 1:
        picked = np.take_along_axis(picked, order, axis=1)
        gap = np.linalg.norm(centroids[chosen[:, 1:]] - centroids[chosen[:, :1]], axis=2)
        with np.errstate(divide="ignore", invalid="ignore"):
            # distance to the bisector of nearest and j-th: (|x-c_j|^2 - |x-c_1|^2) / (2 |c_j - c_1|)
            boundary = np.where(gap > 0, (picked[:, 1:] - picked[:, :1]) / (2 * gap), 0.0)
        chosen[:, 1:][boundary > radius] = -1
    return chosen


#: Columns per block in :func:`smallest_columns` (used from 16 blocks on).
COLUMN_BLOCK = 64


def smallest_columns(scores, m):
    """The columns of each row's ``m`` smallest scores, ascending by column number (any of equal scores).

    A partial sort of every row (a full sort would cost more than computing
    the scores). With many columns - a row against thousands of centroids -
    the partial sort of every column costs several times the scores'
    product; then the ``m`` smallest are sought among the ``m`` blocks of
    :data:`COLUMN_BLOCK` columns with the smallest minima, which hold them
    (a block holding one of them has a minimum no larger than it).

    Examples
    --------
    >>> smallest_columns(np.array([[5.0, 1.0, 4.0, 2.0], [0.0, 3.0, 2.0, 1.0]]), 2)
    array([[1, 3],
           [0, 3]])
    """
    n_rows, n_cols = scores.shape
    if n_cols < 16 * COLUMN_BLOCK or m * COLUMN_BLOCK >= n_cols:
        return np.sort(np.argpartition(scores, m - 1, axis=1)[:, :m], axis=1)
    n_blocks = -(-n_cols // COLUMN_BLOCK)
    padded = np.pad(scores, ((0, 0), (0, n_blocks * COLUMN_BLOCK - n_cols)), constant_values=np.inf)
    blocks = np.argpartition(padded.reshape(n_rows, n_blocks, COLUMN_BLOCK).min(axis=2), m - 1, axis=1)[:, :m]
    columns = (blocks[:, :, None] * COLUMN_BLOCK + np.arange(COLUMN_BLOCK)).reshape(n_rows, -1)
    best = np.argpartition(np.take_along_axis(padded, columns, axis=1), m - 1, axis=1)[:, :m]
    return np.sort(np.take_along_axis(columns, best, axis=1), axis=1)


def boundary_radius(sample, k, *, quantile=0.9, max_queries=5000, random_state=0):
    """A radius holding the k nearest neighbours of most rows, from a sample (Euclidean).

    The ``quantile`` of the distance from a sampled row to its k-th nearest
    other sampled row. The sample is sparser than the data, so this
    overestimates the data's own k-th neighbour distances: used as the
    ``radius`` of :func:`nearest_centroids`, it errs on the side of joining.

    Examples
    --------
    >>> boundary_radius(np.arange(10.0)[:, None], 2)
    2.0
    """
    from sklearn.neighbors import NearestNeighbors

    sample = np.asarray(sample, dtype=np.float64)
    if len(sample) <= k:
        return np.inf
    rng = np.random.RandomState(random_state)
    queries = sample[rng.choice(len(sample), size=min(max_queries, len(sample)), replace=False)]
    distances = NearestNeighbors(n_neighbors=k + 1, algorithm="brute").fit(sample).kneighbors(queries)[0]
    return float(np.quantile(distances[:, k], quantile))  # column 0 is the row itself


def rank_buckets(n_members, max_rows, margin=0.125):
    """Rank ranges ``[(lo, hi), ...]`` cutting ``n_members`` sorted members into pieces of at most ``max_rows``.

    Consecutive pieces share ``margin`` of a piece's core on each side, so
    that rows near a cut find their neighbours in at least one piece.

    Examples
    --------
    >>> rank_buckets(10, 20)
    [(0, 10)]
    >>> rank_buckets(100, 40)
    [(0, 28), (22, 53), (47, 78), (72, 100)]
    """
    if n_members <= max_rows:
        return [(0, n_members)]
    core_max = int(max_rows / (1 + 2 * margin))
    pieces = math.ceil(n_members / max(1, core_max))
    core = math.ceil(n_members / pieces)
    pad = int(core * margin)
    return [(max(0, j * core - pad), min(n_members, (j + 1) * core + pad)) for j in range(pieces)]


def group_partitions(sizes, max_rows, *, alone=None):
    """Runs of consecutive partitions ``[(first, stop), ...]`` of at most ``max_rows`` members in all.

    Partitions are taken in order and a run is closed before the partition
    that would take it over ``max_rows``; a partition of ``max_rows`` or more
    members, or one marked in ``alone``, is a run of its own. Every partition
    is in exactly one run.

    Examples
    --------
    >>> group_partitions([3, 4, 2, 9, 1, 1], 8)
    [(0, 2), (2, 3), (3, 4), (4, 6)]
    >>> group_partitions([1, 1, 1, 1], 8, alone=[False, True, False, False])
    [(0, 1), (1, 2), (2, 4)]
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    alone = np.zeros(sizes.size, dtype=bool) if alone is None else np.asarray(alone, dtype=bool)
    runs, first, total = [], 0, 0
    for p, size in enumerate(sizes):
        if p > first and (alone[p] or alone[p - 1] or total + size > max_rows):
            runs.append((first, p))
            first, total = p, 0
        total += int(size)
    if sizes.size:
        runs.append((first, int(sizes.size)))
    return runs


def principal_direction(rows, seed=0):
    """The unit direction of largest spread of ``rows``; a seeded random one when there are too few.

    Examples
    --------
    >>> np.abs(principal_direction(np.array([[0.0, 0.0], [4.0, 0.1], [8.0, 0.0]]))).round(2)
    array([1., 0.])
    """
    rows = np.asarray(rows, dtype=np.float64)
    if len(rows) >= 2:
        direction = np.linalg.svd(rows - rows.mean(axis=0), full_matrices=False)[2][0]
        if np.isfinite(direction).all() and np.linalg.norm(direction) > 0:
            return direction
    direction = np.random.RandomState(seed).normal(size=rows.shape[1])
    return direction / np.linalg.norm(direction)


def top_k_candidates(ids, distances, k, *, exclude=None):
    """Each row's ``k`` nearest distinct candidates among the columns of ``ids``.

    A candidate id met twice in a row keeps its smallest distance; ``-1``
    ids are padding and dropped. The order - distance, then id - is total,
    so the answer does not depend on the order of the columns (the lists
    they came from).

    Parameters
    ----------
    ids : ndarray of shape (n_rows, n_candidates), int
        Candidate row ids; ``-1`` for none.
    distances : ndarray of shape (n_rows, n_candidates), float
    k : int
    exclude : ndarray of shape (n_rows,), default=None
        An id each row must not list (its own id).

    Returns
    -------
    indices : ndarray of shape (n_rows, k), int64
        Nearest first; ``-1`` where a row has fewer than ``k`` candidates.
    distances : ndarray of shape (n_rows, k), float64
        ``inf`` where padded.

    Examples
    --------
    >>> ind, dist = top_k_candidates(np.array([[5, 7, 5], [0, -1, -1]]),
    ...                              np.array([[2.0, 1.0, 1.5], [3.0, 0.0, 0.0]]), 2, exclude=np.array([9, 0]))
    >>> ind
    array([[ 7,  5],
           [-1, -1]])
    >>> dist
    array([[1. , 1.5],
           [inf, inf]])
    """
    ids = np.array(ids, dtype=np.int64, ndmin=2)
    distances = np.array(distances, dtype=np.float64, ndmin=2)
    if ids.shape[1] < k:  # too few columns for k: pad, so every row has k slots
        pad = ((0, 0), (0, k - ids.shape[1]))
        ids, distances = np.pad(ids, pad, constant_values=-1), np.pad(distances, pad, constant_values=np.inf)
    invalid = ids < 0
    if exclude is not None:
        invalid |= ids == np.asarray(exclude, dtype=np.int64)[:, None]
    ids[invalid], distances[invalid] = -1, np.inf
    # Sorted by id, then distance: the first of equal ids has the smallest distance; the others go.
    order = np.lexsort((distances, ids), axis=-1)
    ids, distances = np.take_along_axis(ids, order, axis=1), np.take_along_axis(distances, order, axis=1)
    repeated = np.zeros(ids.shape, dtype=bool)
    repeated[:, 1:] = ids[:, 1:] == ids[:, :-1]
    ids[repeated], distances[repeated] = -1, np.inf
    order = np.lexsort((ids, distances), axis=-1)[:, :k]  # nearest first, ties by id
    ids, distances = np.take_along_axis(ids, order, axis=1), np.take_along_axis(distances, order, axis=1)
    ids[~np.isfinite(distances)] = -1  # padding sorts last; ties among it are not neighbours
    return ids, distances


def merge_candidate_lists(lists, n_rows, k, *, exclude=None):
    """Each of ``n_rows`` rows' ``k`` nearest distinct candidates from lists that each cover some rows.

    Parameters
    ----------
    lists : iterable of (rows, ids, distances)
        ``rows`` (shape ``(m,)``, distinct within a list) are row positions
        in ``[0, n_rows)``; ``ids`` and ``distances`` (shape ``(m, k)``)
        their candidates, ``-1`` / ``inf`` for none.
    n_rows, k : int
    exclude : ndarray of shape (n_rows,), default=None
        An id each row must not list (its own id).

    Returns
    -------
    indices, distances : ndarray of shape (n_rows, k)
        As :func:`top_k_candidates` gives them: the order of the lists does
        not matter.

    Examples
    --------
    >>> ind, dist = merge_candidate_lists([(np.array([0, 1]), np.array([[4], [5]]), np.array([[1.0], [2.0]])),
    ...                                    (np.array([1]), np.array([[6]]), np.array([[0.5]]))], 2, 1)
    >>> ind.ravel(), dist.ravel()
    (array([4, 6]), array([1. , 0.5]))
    """
    lists = list(lists)
    # One row of candidates per row: its lists side by side (a row appears at most once per list).
    per_row = np.bincount(np.concatenate([rows for rows, _, _ in lists] or [np.empty(0, dtype=np.int64)]),
                          minlength=n_rows)
    width = max(int(per_row.max(initial=0)), 1) * k
    ids, dists = np.full((n_rows, width), -1, dtype=np.int64), np.full((n_rows, width), np.inf)
    filled = np.zeros(n_rows, dtype=np.int64)
    for rows, ind, dist in lists:
        columns = filled[rows][:, None] + np.arange(k)
        ids[rows[:, None], columns], dists[rows[:, None], columns] = ind, dist
        filled[rows] += k
    del lists
    return top_k_candidates(ids, dists, k, exclude=exclude)


def paired_distances(A, B, metric="euclidean"):
    """Distances between matched rows ``A[..., i, :]`` and ``B[..., i, :]`` (float64).

    ``A`` broadcasts against ``B`` (e.g. one query row against its
    candidates). Only :data:`PAIRED_METRICS` are known.

    Examples
    --------
    >>> paired_distances(np.array([[0.0, 0.0]]), np.array([[3.0, 4.0]]))
    array([5.])
    """
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    if metric in ("euclidean", "l2", "sqeuclidean"):
        squared = ((A - B) ** 2).sum(axis=-1)
        return squared if metric == "sqeuclidean" else np.sqrt(squared)
    if metric in ("manhattan", "l1", "cityblock"):
        return np.abs(A - B).sum(axis=-1)
    if metric == "cosine":
        norms = np.linalg.norm(A, axis=-1) * np.linalg.norm(B, axis=-1)
        dots = (A * B).sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(norms > 0, 1.0 - dots / np.where(norms > 0, norms, 1.0), 1.0)
    raise ValueError(f"paired distances know {PAIRED_METRICS}; got metric {metric!r}")
