"""HPC-SVM over Dask chunks: the passes of a fit that never holds all rows, and their exchanges.

:func:`fit_chunked` is :meth:`HPCClassifier.fit <dimbsvm.svm.hpc.HPCClassifier.fit>`
on Dask arrays. It builds lazy work (Dask arrays, ``dask.delayed`` terms summed
as a tree by :func:`tree_sum`) and hands every computation to :func:`dimbsvm.parallel.compute`,
on the client the estimator resolved once at the start of ``fit``. The numeric
work of each task is in :mod:`dimbsvm.svm._hpc_kernels`. The passes:

1. moments (``sigma^2``, class counts, finiteness), reduced to scalars
   (:func:`moments`);
2. ``J^T L' J``, :func:`jlj_in_memory` or :func:`jlj_through_disk`;
3. the solve: all transformed rows gathered for LIBLINEAR
   (:func:`transformed_rows`), or one chunk at a time for SGD
   (:func:`epoch_chunks`);
4. the hinge sums of the objective (:func:`hinge_sums`).

**Bringing each hyperedge's rows together.**
Each hyperedge is a centre row and its ``k`` nearest other rows, which on
data in random order lie in every chunk: summing ``J^T L' J`` chunk by chunk
is an all-to-all exchange of rows. Both functions cut the hyperedges centred
on a chunk into pieces of ``chunk / k`` (about one chunk of vertex rows each)
and sum the pieces' ``accumulate_jlj`` terms as a tree.

:func:`jlj_in_memory` (the default of :class:`~dimbsvm.svm.hpc.HPCClassifier`)
moves the rows between tasks: fast, but the calling process reads the
neighbour array and the rows in flight add up to as much as ``k`` times the
data. :func:`jlj_through_disk` moves them through a scratch directory instead,
in three passes of one task per chunk, none of which holds more than about one
chunk of rows:

1. *plan* (chunk ``a`` of the neighbour array): the hyperedges centred on
   chunk ``a``, cut into pieces of ``chunk / k`` hyperedges (about one chunk of
   vertex rows each), list their vertices grouped by the chunk ``b`` that holds
   them. Writes ``requests/b_a.npy``: the row numbers within ``b`` that ``a``'s
   pieces need, piece after piece. Returns the counts (pieces x chunks), the
   only thing that reaches the calling process.
2. *send* (chunk ``b`` of the rows): writes ``rows/b_a.npy``, the requested
   rows of chunk ``b`` for every ``a`` -- the input row, its sign and, when
   ``J`` is built from other features (Nystroem), those.
3. *receive* (chunk ``a``): for each piece, reads its slice of every
   ``rows/b_a.npy`` (memory-mapped, so only the slice is read), puts the rows
   back in hyperedge order and adds the piece's ``accumulate_jlj`` term; the
   ``(p x p)`` terms are summed as a tree.

Each file is written by one task only. The exchange holds ``(k + 1) n`` rows
(for ``10^7 x 32`` float32 rows and ``k = 5``: 7.9 GB) and is deleted after
the pass, also when it fails. On a cluster of several machines the scratch
directory must be on a file system every worker sees.

The files are plain ``.npy`` arrays rather than Zarr: they are scratch, read
once, and the number of ``(b, a)`` blocks grows as the square of the number
of chunks, so the cost per read and write dominates. The same pass through a
Zarr store (one array, a chunk per block slice, no compression) took 3.9x as
long at 10^6 rows in 50 chunks (median of 2, one thread; 82 s against 21 s).
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import shutil
import tempfile
from pathlib import Path

import dask
import dask.array as da
import numpy as np
from sklearn.utils.validation import column_or_1d

from dimbsvm.exceptions import DataError
from dimbsvm.features.references import choose_rows_chunked
from dimbsvm.graph.hypergraph import check_n_neighbors, validate_neighbors
from dimbsvm.parallel import compute, current_client
from dimbsvm.svm._base import binary_classes
from dimbsvm.svm._hpc_kernels import (
    augment,
    gather_piece_jlj,
    group_by_chunk,
    hinge_sums as hinge_sums_of,
    hyperedge_members,
    kernel_width,
    piece_jlj,
    placed_piece_jlj,
    rows_of_chunk,
    transform_rows,
)

__all__ = [
    "compute_scores",
    "epoch_chunks",
    "fit_chunked",
    "hinge_sums",
    "jlj_in_memory",
    "jlj_through_disk",
    "moments",
    "pieces_of",
    "transformed_rows",
    "tree_sum",
]

logger = logging.getLogger(__name__)


def _shares_memory(client):
    """Whether the tasks run as threads of this process (no client): they can share chunks."""
    return client is None


def compute_scores(scores, *, client=None):
    """The values of a lazy score array, computed on ``client`` or the current client."""
    return compute(scores, client=current_client(client))[0]


def tree_sum(terms):
    """One delayed sum of delayed terms, added pairwise as a tree.

    A flat sum would make one task hold every term; the tree holds two.

    Parameters
    ----------
    terms : list of dask.delayed.Delayed
        At least one.

    Returns
    -------
    total : dask.delayed.Delayed
    """
    while len(terms) > 1:
        terms = [dask.delayed(_add)(*terms[i:i + 2]) if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]


def _add(a, b):
    return a + b


# -- the fit ---------------------------------------------------------------------------------


def fit_chunked(estimator, X, y, neighbors, *, client):
    """Fit an :class:`~dimbsvm.svm.hpc.HPCClassifier` on Dask arrays.

    Parameters
    ----------
    estimator : HPCClassifier
        Its parameters are read and its fitted attributes set; ``_seed`` and
        ``timings_`` are set by its ``fit``.
    X : dask.array.Array of shape (n_samples, n_features)
    y : array-like or dask.array.Array of shape (n_samples,)
    neighbors : ndarray or dask.array.Array of shape (n_samples, >= n_neighbors)
    client : distributed.Client or None, keyword-only
        Where the passes run (resolved by the caller); ``None``: Dask's threads here.

    Returns
    -------
    estimator : HPCClassifier
    """
    est = estimator
    if X.ndim != 2 or not np.issubdtype(X.dtype, np.number):
        raise DataError(f"X must be a 2-D numeric array, got shape {X.shape} and dtype {X.dtype}")
    if est.exchange_dir is not None and not os.path.isdir(est.exchange_dir):
        raise DataError(f"exchange_dir={str(est.exchange_dir)!r} is not an existing directory")
    if neighbors is None:
        raise DataError(
            "Dask input needs neighbors=: an (n_samples, n_neighbors) integer array of each "
            "sample's nearest other samples (build it once with dimbsvm.graph and reuse it)")
    n = X.shape[0]
    y = da.asarray(y) if isinstance(y, da.Array) else da.from_array(column_or_1d(y))
    if y.shape != (n,):
        raise DataError(f"y must have one label per row of X ({n}), got shape {y.shape}")
    X = X.rechunk({1: -1})  # kept in its dtype: the tasks compute in float64
    y = y.rechunk((X.chunks[0],))
    check_n_neighbors(est.n_neighbors, n)
    if neighbors.shape[0] != n:
        raise DataError(f"neighbors has {neighbors.shape[0]} rows for {n} samples")
    est.n_features_in_ = X.shape[1]
    with est._timed("moments"):
        (classes, counts), finite, sigma2, variance = moments(X, y, client=client)
    if not finite:
        raise DataError("X holds NaN or inf; HPCClassifier needs finite values")
    est.classes_, _ = binary_classes(np.asarray(classes), type(est).__name__)
    est._class_counts = np.asarray(counts)
    est.sigma2_ = float(sigma2)
    est.kernel_gamma_ = kernel_width(est.kernel, est.kernel_gamma, X.shape[1], float(variance))
    signs = (y == est.classes_[1]).astype(np.int8) * 2 - 1  # {-1, +1}, one byte a row
    with est._timed("features"):
        if est.kernel == "linear":
            F = X
        else:
            if est.n_components is None:
                raise DataError("the exact kernel path needs data in memory; set n_components "
                                "(Nystroem landmarks) for Dask input")
            rows = choose_rows_chunked(X.chunks[0], est.n_components, seed=est._seed,
                                       compute=functools.partial(compute, client=client))
            est._check_components(n)
            est._set_landmarks(compute(X[rows], client=client)[0])
            F = X.map_blocks(est._feature_block, chunks=(X.chunks[0], (est.n_components,)),
                             dtype=np.float64, meta=np.empty((0, 0)))
    with est._timed("jlj"):
        common = {"n_neighbors": est.n_neighbors, "sigma2": est.sigma2_, "gamma": est.gamma,
                  "client": client}
        if est.exchange_dir is not None:
            jlj = jlj_through_disk(X, signs, None if F is X else F, neighbors,
                                   directory=est.exchange_dir, **common)
        else:
            jlj = jlj_in_memory(X, signs, None if F is X else F, neighbors, **common)
    J = F.map_blocks(augment, chunks=(F.chunks[0], (F.shape[1] + 1,)), dtype=np.float64)
    return est._solve_linear(jlj, J, signs, client=client)


def moments(X, y, *, client):
    """``((classes, counts), all finite, sigma^2 of eq. (18), X.var())``, one pass over the chunks."""
    return compute(da.unique(y, return_counts=True), da.isfinite(X).all(),
                    X.var(axis=0, ddof=1, dtype=np.float64).sum(), X.var(dtype=np.float64),
                    client=client)  # eq. (18)


def transformed_rows(J, signs, R, *, client):
    """All transformed rows ``u_i = R^-T J_i`` and their signs, gathered in this process."""
    return compute(J.map_blocks(transform_rows, R=R, dtype=np.float64), signs, client=client)


def epoch_chunks(U, signs, rng, *, client):
    """One SGD epoch: ``(U_b, signs_b)`` of every chunk, computed one at a time in a seeded order.

    Nothing holds more than one chunk of transformed rows: each is computed
    when the solver asks for it.
    """
    for b in rng.permutation(U.numblocks[0]):
        yield compute(U.blocks[int(b)], signs.blocks[int(b)], client=client)


def hinge_sums(J, signs, wb, *, client):
    """:func:`dimbsvm.svm._hpc_kernels.hinge_sums` of Dask rows: one term a chunk, summed as a tree."""
    terms = [dask.delayed(hinge_sums_of)(J_b, s_b, wb)
             for J_b, s_b in zip(J.to_delayed().ravel(), signs.to_delayed().ravel())]
    return compute(tree_sum(terms), client=client)[0]


# -- J^T L' J: bringing each hyperedge's rows together -------------------------------------------


def pieces_of(n_rows, step):
    """``(lo, hi)`` row ranges of ``step`` hyperedges that cut a chunk of ``n_rows``."""
    return [(lo, min(lo + step, n_rows)) for lo in range(0, n_rows, step)]


def _row_blocks(X, signs, F):
    """Each chunk's delayed ``(X, signs, F or None)``."""
    n_chunks = X.numblocks[0]
    return list(zip(X.to_delayed().ravel(), signs.to_delayed().ravel(),
                    F.to_delayed().ravel() if F is not None else [None] * n_chunks))


def jlj_in_memory(X, signs, F, neighbors, *, n_neighbors, sigma2, gamma, client):
    """``J^T L' J`` of Dask rows, with the hyperedges' rows moved between tasks in memory.

    Each source chunk is computed once (one key per block). On a
    ``distributed`` client, small tasks cut from it the rows a piece's
    hyperedges touch, at most ``k`` per hyperedge, so a piece's task holds
    its own chunk and about one chunk of gathered rows, and only those rows
    travel. Without one (threads sharing memory), each piece is handed one
    key listing every chunk and cuts its rows itself: no copies in flight,
    and a graph of one task per piece rather than one per (piece, chunk).
    (Fancy-indexing the Dask array instead lets the optimiser push the
    slice into the producer, which then regenerates a whole chunk for every
    piece.) The neighbour array is read here, a chunk at a time, to build the
    graph, which carries each piece's indices.

    Parameters are those of :func:`jlj_through_disk`, without ``directory``.
    """
    n, k = X.shape[0], n_neighbors
    starts = np.cumsum((0, *X.chunks[0]))
    step = max(1, X.chunks[0][0] // k)
    # the graph carries these indices (about 2 n k of them): int32 where they fit
    index = np.int32 if max(X.chunks[0]) * (k + 1) < np.iinfo(np.int32).max else np.int64
    shared_memory = _shares_memory(client)  # threads of this process, no transfers
    row_index = np.int32 if n < np.iinfo(np.int32).max else np.int64
    blocks = _row_blocks(X, signs, F)
    every_block = dask.delayed(list)(blocks) if shared_memory else None  # references only
    terms = []
    for a, (start, stop) in enumerate(itertools.pairwise(starts)):
        block = neighbors[start:stop]
        if isinstance(block, da.Array):
            block, = compute(block, client=client)
        block = validate_neighbors(block, n, rows=np.arange(start, stop), n_neighbors=k)
        for lo, hi in pieces_of(stop - start, step):
            touched, local = np.unique(block[lo:hi], return_inverse=True)
            local = local.reshape(hi - lo, k).astype(index, copy=False)
            if shared_memory:  # the piece cuts its rows from the chunks it is handed
                terms.append(dask.delayed(gather_piece_jlj)(
                    blocks[a], lo, hi, local, every_block, touched.astype(row_index, copy=False),
                    starts, sigma2=sigma2, gamma=gamma))
                continue
            # small tasks cut the rows, so only those travel to the piece's worker
            cuts = np.searchsorted(touched, starts)  # touched is sorted: a slice per chunk
            parts = [dask.delayed(rows_of_chunk)(
                blocks[b], (touched[cuts[b]:cuts[b + 1]] - starts[b]).astype(index))
                for b in np.flatnonzero(np.diff(cuts))]
            terms.append(dask.delayed(piece_jlj)(blocks[a], lo, hi, local, parts,
                                                 sigma2=sigma2, gamma=gamma))
    jlj, = compute(tree_sum(terms), client=client)
    return jlj


def jlj_through_disk(X, signs, F, neighbors, *, n_neighbors, sigma2, gamma, directory, client):
    """``J^T L' J`` of Dask rows, with the hyperedges' rows exchanged through files on disk.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
        Input rows, one chunk along the columns.
    signs : dask.array.Array of shape (n_samples,)
        Labels in {-1, +1}, chunked like the rows of ``X``.
    F : dask.array.Array of shape (n_samples, n_outputs) or None
        Rows entering ``J = [F 1]`` when they differ from ``X`` (Nystroem),
        chunked like ``X``; ``None`` means ``X``.
    neighbors : ndarray or dask.array.Array of shape (n_samples, >= n_neighbors)
        Each row's nearest other rows; read one chunk at a time by the tasks.
    n_neighbors : int
    sigma2 : float
        ``sigma^2`` of eq. (18).
    gamma : float
    directory : str or path-like
        Where the scratch files are written (in a new subdirectory, removed after).
    client : distributed.Client or None
        Where the tasks run (``None``: Dask's threads in this process).

    Returns
    -------
    jlj : ndarray of shape (p, p)
    """
    n, d = X.shape
    k = n_neighbors
    sizes = X.chunks[0]
    starts = np.cumsum((0, *sizes))
    n_chunks = len(sizes)
    step = max(1, sizes[0] // k)
    width = d + 1 + (0 if F is None else F.shape[1])
    dtype = np.result_type(X.dtype, np.float32, *(() if F is None else (F.dtype,)))
    if isinstance(neighbors, da.Array):
        neighbors = neighbors.rechunk((sizes, -1))
    else:
        neighbors = da.from_array(np.asarray(neighbors), chunks=(sizes, -1))
    neighbor_blocks = neighbors.to_delayed().ravel()
    row_blocks = _row_blocks(X, signs, F)
    scratch = Path(tempfile.mkdtemp(prefix="hpc-exchange-", dir=directory))
    logger.info("J^T L' J: %d vertex rows of %d columns through %s (%.2f GB at most)",
                n * (k + 1), width, scratch, n * (k + 1) * width * dtype.itemsize / 1e9)
    try:
        for part in ("requests", "rows"):
            (scratch / part).mkdir()
        path = str(scratch)
        # the two passes that write run to the end even when a task fails, so that nothing
        # writes into the directory after it is removed; the receive pass only reads
        counts = _settled_results(compute(*(
            dask.delayed(_settled)(_plan, neighbor_blocks[a], a, starts, path, n_neighbors=k,
                                   step=step)
            for a in range(n_chunks)), client=client))
        asked = np.stack([c.sum(axis=0) for c in counts])  # asked[a, b]: rows a needs from b
        _settled_results(compute(*(
            dask.delayed(_settled)(_send, row_blocks[b], b, asked[:, b], path, dtype=dtype)
            for b in range(n_chunks)), client=client))
        terms = [dask.delayed(_receive)(neighbor_blocks[a], a, counts[a], starts, path,
                                        n_neighbors=k, step=step, n_features=d,
                                        sigma2=sigma2, gamma=gamma)
                 for a in range(n_chunks)]
        jlj, = compute(tree_sum(terms), client=client)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return jlj


def _settled(func, *args, **kwargs):
    """``func(*args, **kwargs)``, or the exception it raised (returned, not raised)."""
    try:
        return func(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - handed back to the caller, who raises it
        return error


def _settled_results(results):
    """The results of :func:`_settled` tasks; the first exception among them is raised."""
    for result in results:
        if isinstance(result, Exception):
            raise result
    return results


def _plan(block, a, starts, path, *, n_neighbors, step):
    """Write ``requests/b_a.npy`` for every chunk ``b``; return the counts (pieces x chunks)."""
    nbrs = validate_neighbors(block, int(starts[-1]), rows=np.arange(starts[a], starts[a + 1]),
                              n_neighbors=n_neighbors)
    n_chunks = len(starts) - 1
    wanted = [[] for _ in range(n_chunks)]
    counts = []
    for lo, hi in pieces_of(nbrs.shape[0], step):
        members = hyperedge_members(starts[a] + lo, nbrs[lo:hi]).ravel()
        order, count = group_by_chunk(members, starts)
        grouped = members[order]
        for b, (first, last) in enumerate(zip(np.r_[0, np.cumsum(count)[:-1]], np.cumsum(count))):
            if last > first:
                wanted[b].append(grouped[first:last] - starts[b])
        counts.append(count)
    local = np.int32 if starts[-1] < np.iinfo(np.int32).max else np.int64
    for b, parts in enumerate(wanted):
        if parts:
            np.save(_block_file(path, "requests", b, a), np.concatenate(parts).astype(local))
    return np.stack(counts)


def _block_file(path, part, b, a):
    return Path(path) / part / f"{b}_{a}.npy"


def _send(block, b, asked, path, *, dtype):
    """Write ``rows/b_a.npy``, the rows of chunk ``b`` that chunk ``a`` asked for, for every ``a``."""
    X, signs, F = block
    d = X.shape[1]
    width = d + 1 + (0 if F is None else F.shape[1])
    for a in np.flatnonzero(asked):
        wanted = np.load(_block_file(path, "requests", b, a))
        out = np.empty((wanted.size, width), dtype=dtype)
        out[:, :d] = X[wanted]
        out[:, d] = signs[wanted]
        if F is not None:
            out[:, d + 1:] = F[wanted]
        np.save(_block_file(path, "rows", b, a), out)
    return int(asked.sum())


def _receive(block, a, counts, starts, path, *, n_neighbors, step, n_features, sigma2,
             gamma):
    """``J^T L' J`` of the hyperedges centred on chunk ``a``, one piece at a time."""
    nbrs = np.asarray(block)[:, :n_neighbors].astype(np.int64)  # validated by the plan
    offset = np.zeros(len(starts) - 1, dtype=np.int64)
    jlj = 0.0
    for piece, (lo, hi) in enumerate(pieces_of(nbrs.shape[0], step)):
        members = hyperedge_members(starts[a] + lo, nbrs[lo:hi]).ravel()
        order, count = group_by_chunk(members, starts)
        if not np.array_equal(count, counts[piece]):
            raise RuntimeError(f"chunk {a}, piece {piece}: the neighbours changed between passes")
        gathered = np.concatenate([_read_rows(path, b, a, offset[b], count[b])
                                   for b in np.flatnonzero(count)])
        offset += count
        jlj = jlj + placed_piece_jlj(gathered, order, hi - lo, n_neighbors, n_features,
                                     sigma2=sigma2, gamma=gamma)
    return jlj


def _read_rows(path, b, a, start, count):
    """Rows ``start:start + count`` of ``rows/b_a.npy``; only those pages are read."""
    rows = np.load(_block_file(path, "rows", b, a), mmap_mode="r")
    out = np.array(rows[start:start + count])
    del rows  # unmapped: what was read leaves this process's resident memory
    return out
