"""HPC-SVM's ``J^T L' J`` over Dask chunks: bringing each hyperedge's rows together.

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

import itertools
import logging
import shutil
import tempfile
from pathlib import Path

import dask
import dask.array as da
import numpy as np

from dimbsvm.distributed.client import current_client
from dimbsvm.distributed.fanout import tree_sum
from dimbsvm.graph.hypergraph import validate_neighbors
from dimbsvm.svm._hpc_kernels import (
    gather_piece_jlj,
    group_by_chunk,
    hyperedge_members,
    piece_jlj,
    placed_piece_jlj,
    take_rows,
)

__all__ = ["jlj_in_memory", "jlj_through_disk", "pieces_of"]

logger = logging.getLogger(__name__)

def pieces_of(n_rows, step):
    """``(lo, hi)`` row ranges of ``step`` hyperedges that cut a chunk of ``n_rows``."""
    return [(lo, min(lo + step, n_rows)) for lo in range(0, n_rows, step)]


def _row_blocks(X, signs, F):
    """Each chunk's delayed ``(X, signs, F or None)``."""
    n_chunks = X.numblocks[0]
    return list(zip(X.to_delayed().ravel(), signs.to_delayed().ravel(),
                    F.to_delayed().ravel() if F is not None else [None] * n_chunks))


def jlj_in_memory(X, signs, F, neighbors, *, n_neighbors, sigma2, gamma, compute):
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
    shared_memory = current_client() is None  # threads of this process, no transfers
    row_index = np.int32 if n < np.iinfo(np.int32).max else np.int64
    blocks = _row_blocks(X, signs, F)
    every_block = dask.delayed(list)(blocks) if shared_memory else None  # references only
    terms = []
    for a, (start, stop) in enumerate(itertools.pairwise(starts)):
        block = neighbors[start:stop]
        block = validate_neighbors(block.compute() if isinstance(block, da.Array) else block,
                                   n, rows=np.arange(start, stop), n_neighbors=k)
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
            parts = [dask.delayed(take_rows)(
                blocks[b], (touched[cuts[b]:cuts[b + 1]] - starts[b]).astype(index))
                for b in np.flatnonzero(np.diff(cuts))]
            terms.append(dask.delayed(piece_jlj)(blocks[a], lo, hi, local, parts,
                                                 sigma2=sigma2, gamma=gamma))
    jlj, = compute(tree_sum(terms))
    return jlj


def jlj_through_disk(X, signs, F, neighbors, *, n_neighbors, sigma2, gamma, directory, compute):
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
    compute : callable
        ``compute(*delayed) -> tuple of results`` (the client's or Dask's).

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
            for a in range(n_chunks))))
        asked = np.stack([c.sum(axis=0) for c in counts])  # asked[a, b]: rows a needs from b
        _settled_results(compute(*(
            dask.delayed(_settled)(_send, row_blocks[b], b, asked[:, b], path, dtype=dtype)
            for b in range(n_chunks))))
        terms = [dask.delayed(_receive)(neighbor_blocks[a], a, counts[a], starts, path,
                                        n_neighbors=k, step=step, n_features=d,
                                        sigma2=sigma2, gamma=gamma)
                 for a in range(n_chunks)]
        jlj, = compute(tree_sum(terms))
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
