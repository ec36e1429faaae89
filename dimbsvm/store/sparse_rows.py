"""A picklable handle on a sparse store's rows: :class:`StoreRows` that reads CSR chunks and gives CSR rows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .rows import StoreRows

__all__ = ["SparseStoreRows", "store_rows"]


@dataclass(frozen=True)
class _CachedChunk:
    """A decoded CSR chunk as the process's chunk cache keeps it (the cache counts ``nbytes``)."""

    matrix: sp.csr_matrix

    @property
    def nbytes(self) -> int:
        return int(sum(part.nbytes for part in self._parts()))

    def setflags(self, write: bool) -> None:
        """Make the matrix's arrays read-only, as the cache makes a dense chunk (shared by every task)."""
        for part in self._parts():
            part.setflags(write=write)

    def _parts(self):
        return self.matrix.data, self.matrix.indices, self.matrix.indptr


class SparseStoreRows(StoreRows):
    """:class:`~dimbsvm.store.StoreRows` of a sparse store: ``take`` returns ``scipy.sparse.csr_matrix`` rows.

    Reads the CSR chunks the rows fall in (each decoded once per process
    when the handle has a fingerprint, as dense chunks are) and stacks the
    rows asked for, in the order asked for. Checks the store's version after
    every read from disk, as :class:`~dimbsvm.store.StoreRows` does.

    Parameters
    ----------
    path : str or path
    shape : tuple
        ``(n_rows, n_features)``.
    chunk_rows : int
        Rows per stored chunk.
    fingerprint : str, default=""
        As :class:`~dimbsvm.store.StoreRows`.
    """

    sparse = True  # (rows are CSR: see dimbsvm.rows.no_rows)

    def __init__(self, path, shape, chunk_rows, fingerprint=""):
        super().__init__(path, shape, fingerprint)
        self.chunk_rows = int(chunk_rows)

    @property
    def block_rows(self) -> int:
        return self.chunk_rows

    def _open(self):
        if self._array is None:
            from ._zarr import open_group
            from .location import join

            self._array = open_group(join(self.path, "X"), mode="r")
        return self._array

    def take(self, rows, dtype=np.float64):
        """Rows ``rows`` (integer or boolean index, may repeat) as a CSR matrix of ``dtype`` (None: as stored)."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        rows = rows.astype(np.int64, copy=False)
        if rows.size and (rows.min() < 0 or rows.max() >= self.shape[0]):
            raise IndexError(f"rows out of range for {self.shape[0]} rows")
        order = np.argsort(rows, kind="stable")
        sorted_rows = rows[order]
        step = self.chunk_rows
        pieces = []
        if rows.size:
            first, last = int(sorted_rows[0]) // step, int(sorted_rows[-1]) // step
            bounds = np.searchsorted(sorted_rows, np.arange(first, last + 2) * step)
            for chunk, lo, hi in zip(range(first, last + 1), bounds[:-1], bounds[1:]):
                if hi > lo:
                    pieces.append(self._chunk(chunk)[sorted_rows[lo:hi] - chunk * step])
        stacked = (sp.vstack(pieces, format="csr") if pieces
                   else sp.csr_matrix((0, self.shape[1]), dtype=self._stored_dtype()))
        out = sp.csr_matrix(stacked[np.argsort(order, kind="stable")]) if rows.size else stacked
        return out if dtype is None else out.astype(dtype, copy=False)

    def _stored_dtype(self):
        return self._open()["0/data"].dtype if self.shape[0] else np.float64

    def _chunk(self, chunk) -> sp.csr_matrix:
        """Chunk ``chunk``, decoded: from the process's cache, or read (checked) and kept there."""
        from .sparse import read_csr_chunk

        cache, key = self._cache(), (self.path, self.fingerprint, chunk)
        cached = cache.get(key) if cache is not None else None
        if cached is not None:
            return cached.matrix
        n_rows = min(self.chunk_rows, self.shape[0] - chunk * self.chunk_rows)
        matrix = read_csr_chunk(self.path, chunk, n_rows, self.shape[1], group=self._open())
        self._check_version()
        if cache is not None:
            cache.put(key, _CachedChunk(matrix))
        return matrix

    def __getstate__(self):
        return dict(super().__getstate__(), chunk_rows=self.chunk_rows)

    def __repr__(self):
        return f"SparseStoreRows({self.path!r}, shape={self.shape})"


def store_rows(path, shape, meta: dict, fingerprint: str = "") -> StoreRows:
    """The row handle of the store at ``path`` (features of ``shape``, ``meta``): sparse or dense, as ingested."""
    from .sparse import is_sparse

    if is_sparse(meta):
        return SparseStoreRows(path, shape, meta["chunk_rows"], fingerprint)
    return StoreRows(path, shape, fingerprint)
