"""HPC-SVM's ``J^T L' J`` over Dask chunks, the hyperedges' rows exchanged through Zarr on disk.

Each hyperedge is a centre row and its ``k`` nearest other rows, which on
data in random order lie in every chunk: summing ``J^T L' J`` chunk by chunk
is an all-to-all exchange of rows. Through memory (the default of
:class:`~dimbsvm.svm.hpc.HPCClassifier`) the rows in flight add up to as much
as ``k`` times the data. Here they go through a scratch Zarr store instead,
in three passes of one task per chunk, none of which holds more than about one
chunk of rows:

1. *plan* (chunk ``a`` of the neighbour array): the hyperedges centred on
   chunk ``a``, cut into pieces of ``chunk / k`` hyperedges (about one chunk of
   vertex rows each), list their vertices grouped by the chunk ``b`` that holds
   them. Writes ``requests[b, a]``: the row numbers within ``b`` that ``a``'s
   pieces need, piece after piece. Returns the counts (pieces x chunks), the
   only thing that reaches the calling process.
2. *send* (chunk ``b`` of the rows): writes ``rows[b, a] = chunk_b[requests[b, a]]``
   for every ``a`` -- the input row, its sign and, when ``J`` is built from other
   features (Nystroem), those.
3. *receive* (chunk ``a``): for each piece, reads its slice of ``rows[b, a]``
   from every ``b``, puts the rows back in hyperedge order and adds the
   piece's ``accumulate_jlj`` term; the ``(p x p)`` terms are summed as a tree.

Every ``(b, a)`` block has Zarr chunks of its own, written by one task only,
so writers never share a file. The store holds ``(k + 1) n`` rows (for
``10^7 x 32`` float32 rows and ``k = 5``: 7.9 GB) and is deleted after the
pass, also when it fails. On a cluster of several machines the scratch
directory must be on a file system every worker sees.
"""

from __future__ import annotations

import logging
import math
import shutil
import tempfile
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import zarr

from dimbsvm.distributed.fanout import tree_sum
from dimbsvm.graph.hypergraph import validate_neighbors
from dimbsvm.svm._hpc_kernels import group_by_chunk, hyperedge_members, placed_piece_jlj

__all__ = ["exchange_jlj", "pieces_of"]

logger = logging.getLogger(__name__)

#: Smallest Zarr chunk (rows) of an exchange block; slices are usually larger.
MIN_SLICE_ROWS = 64


def pieces_of(n_rows, step):
    """``(lo, hi)`` row ranges of ``step`` hyperedges that cut a chunk of ``n_rows``."""
    return [(lo, min(lo + step, n_rows)) for lo in range(0, n_rows, step)]


def exchange_jlj(X, signs, F, neighbors, *, n_neighbors, sigma2, gamma, directory, compute):
    """``J^T L' J`` of Dask rows, with the hyperedges' rows exchanged through a Zarr store.

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
        Where the scratch store is made (in a new subdirectory, removed after).
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
    length = max(sizes) * (k + 1)  # the most vertex rows chunk a can ask of one chunk b
    # a piece asks each chunk for about step (k + 1) / n_chunks rows on data in random order
    slice_rows = int(min(length, max(MIN_SLICE_ROWS, math.ceil(step * (k + 1) / n_chunks))))
    local = np.int32 if length < np.iinfo(np.int32).max else np.int64
    if isinstance(neighbors, da.Array):
        neighbors = neighbors.rechunk((sizes, -1))
    else:
        neighbors = da.from_array(np.asarray(neighbors), chunks=(sizes, -1))
    neighbor_blocks = neighbors.to_delayed().ravel()
    row_blocks = list(zip(X.to_delayed().ravel(), signs.to_delayed().ravel(),
                          F.to_delayed().ravel() if F is not None else [None] * n_chunks))
    scratch = Path(tempfile.mkdtemp(prefix="hpc-exchange-", dir=directory))
    logger.info("J^T L' J: %d vertex rows of %d columns through %s (%.2f GB at most)",
                n * (k + 1), width, scratch, n * (k + 1) * width * dtype.itemsize / 1e9)
    try:
        group = zarr.open_group(str(scratch), mode="w", zarr_format=3)
        group.create_array("requests", shape=(n_chunks, n_chunks, length), dtype=local,
                           chunks=(1, 1, slice_rows), fill_value=-1, compressors=None)
        group.create_array("rows", shape=(n_chunks, n_chunks, length, width), dtype=dtype,
                           chunks=(1, 1, slice_rows, width), fill_value=0, compressors=None)
        path = str(scratch)
        # the two passes that write run to the end even when a task fails, so that nothing
        # writes into the store after it is removed; the receive pass only reads
        counts = _settled_results(compute(*(
            dask.delayed(_settled)(_plan, neighbor_blocks[a], a, starts, path, n_neighbors=k,
                                   step=step)
            for a in range(n_chunks))))
        asked = np.stack([c.sum(axis=0) for c in counts])  # asked[a, b]: rows a needs from b
        _settled_results(compute(*(
            dask.delayed(_settled)(_send, row_blocks[b], b, asked[:, b], path)
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


def _chunk_neighbors(block, a, starts, k):
    start, stop = int(starts[a]), int(starts[a + 1])
    return validate_neighbors(block, int(starts[-1]), rows=np.arange(start, stop), n_neighbors=k)


def _plan(block, a, starts, path, *, n_neighbors, step):
    """Write ``requests[b, a]`` for every chunk ``b``; return the counts (pieces x chunks)."""
    nbrs = _chunk_neighbors(block, a, starts, n_neighbors)
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
    requests = zarr.open_group(path, mode="r+")["requests"]
    for b, parts in enumerate(wanted):
        if parts:
            rows = np.concatenate(parts)
            requests[b, a, :rows.size] = rows
    return np.stack(counts)


def _send(block, b, asked, path):
    """Write ``rows[b, a]``, the rows of chunk ``b`` that chunk ``a`` asked for, for every ``a``."""
    X, signs, F = block
    group = zarr.open_group(path, mode="r+")
    requests, rows = group["requests"], group["rows"]
    d = X.shape[1]
    for a in np.flatnonzero(asked):
        wanted = requests[b, a, :asked[a]]
        out = np.empty((wanted.size, rows.shape[3]), dtype=rows.dtype)
        out[:, :d] = X[wanted]
        out[:, d] = signs[wanted]
        if F is not None:
            out[:, d + 1:] = F[wanted]
        rows[b, a, :wanted.size] = out
    return int(asked.sum())


def _receive(block, a, counts, starts, path, *, n_neighbors, step, n_features, sigma2,
             gamma):
    """``J^T L' J`` of the hyperedges centred on chunk ``a``, one piece at a time."""
    nbrs = _chunk_neighbors(block, a, starts, n_neighbors)
    rows = zarr.open_group(path, mode="r")["rows"]
    offset = np.zeros(len(starts) - 1, dtype=np.int64)
    jlj = 0.0
    for piece, (lo, hi) in enumerate(pieces_of(nbrs.shape[0], step)):
        members = hyperedge_members(starts[a] + lo, nbrs[lo:hi]).ravel()
        order, count = group_by_chunk(members, starts)
        if not np.array_equal(count, counts[piece]):
            raise RuntimeError(f"chunk {a}, piece {piece}: the neighbours changed between passes")
        gathered = np.concatenate([rows[b, a, offset[b]:offset[b] + count[b]]
                                   for b in np.flatnonzero(count)])
        offset += count
        jlj = jlj + placed_piece_jlj(gathered, order, hi - lo, n_neighbors, n_features,
                                     sigma2=sigma2, gamma=gamma)
    return jlj
