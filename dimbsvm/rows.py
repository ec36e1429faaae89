"""Read rows from arrays or row handles, a block at a time.

Task bodies receive training data as an in-memory array, a sparse matrix, or
a handle that reads rows on demand (:class:`~dimbsvm.store.StoreRows` for a
Zarr store, :class:`TransformedRows` for rows passed through fitted
preprocessing). The helpers here let the same code serve all three while
never asking a handle for more than one block of rows at a time.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["CACHE_BLOCK_BYTES", "DEFAULT_BLOCK_ROWS", "RowSubset", "TransformedRows", "cache_blocks", "is_in_memory",
           "map_row_blocks", "no_rows", "row_blocks", "stack_rows", "take_rows"]

#: Rows read at once from a handle when the handle does not say (``block_rows``).
DEFAULT_BLOCK_ROWS = 65_536

#: Bytes of rows that several models' passes (an ensemble's members) read at once: a whole stored
#: chunk does not stay in cache across the members' passes, pieces of this size do, which makes
#: the passes several times faster (``python -m benchmarks.chunk_passes``; the numbers in
#: ``benchmarks/scaling_notes.md``, "Measurements behind constants").
CACHE_BLOCK_BYTES = 2 << 20


def cache_blocks(block):
    """``(lo, hi)`` row ranges of an in-memory ``block``, each about :data:`CACHE_BLOCK_BYTES` (at least 1,024 rows).

    Examples
    --------
    >>> cache_blocks(np.zeros((20_000, 32)))
    [(0, 8192), (8192, 16384), (16384, 20000)]
    """
    n_rows = block.shape[0]
    row_bytes = max(1, int(np.prod(block.shape[1:], dtype=np.int64)) * block.dtype.itemsize)
    step = max(1024, CACHE_BLOCK_BYTES // row_bytes)
    return [(lo, min(lo + step, n_rows)) for lo in range(0, n_rows, step)] or [(0, 0)]


def is_in_memory(X) -> bool:
    """True for numpy arrays and scipy sparse matrices; False for row handles."""
    return isinstance(X, np.ndarray) or sp.issparse(X)


def stack_rows(blocks):
    """Blocks of rows one after the other: CSR when any block is sparse, else an ndarray.

    Examples
    --------
    >>> stack_rows([np.ones((1, 2)), np.zeros((2, 2))]).shape
    (3, 2)
    >>> stack_rows([sp.csr_matrix(np.eye(2)), sp.csr_matrix((1, 2))]).nnz
    2
    """
    blocks = list(blocks)
    if any(sp.issparse(block) for block in blocks):
        return sp.vstack(blocks, format="csr")
    return np.concatenate(blocks)


def no_rows(X, dtype=np.float64):
    """A block of no rows with ``X``'s columns: a CSR matrix for sparse data (a sparse store's handle), else an
    ndarray."""
    sparse = sp.issparse(X) or bool(getattr(X, "sparse", False))
    return sp.csr_matrix((0, *X.shape[1:]), dtype=dtype) if sparse else np.empty((0, *X.shape[1:]), dtype=dtype)


def take_rows(X, rows):
    """``X[rows]`` for arrays and handles alike; ``rows`` may repeat.

    A handle is asked for each distinct row once, in sorted order, and the
    result expanded, so a bootstrap bag reads no row twice. Rows already
    strictly increasing (out-of-bag rows, a fold's rows) are those distinct
    sorted rows: the handle is asked for them as they are, without sorting
    them again and copying the result.

    Examples
    --------
    >>> take_rows(np.arange(6).reshape(3, 2), [2, 0, 2]).tolist()
    [[4, 5], [0, 1], [4, 5]]
    """
    rows = np.asarray(rows, dtype=np.int64)
    if is_in_memory(X) or np.all(rows[1:] > rows[:-1]):
        return X[rows]
    unique, inverse = np.unique(rows, return_inverse=True)
    return X[unique][inverse]


def block_rows_of(X) -> int:
    """How many rows to read at once from ``X``: its ``block_rows`` or :data:`DEFAULT_BLOCK_ROWS`."""
    return int(getattr(X, "block_rows", None) or DEFAULT_BLOCK_ROWS)


def row_blocks(rows, block_rows):
    """Split ``rows`` into consecutive pieces of at most ``block_rows``.

    Examples
    --------
    >>> [b.tolist() for b in row_blocks(np.arange(5), 2)]
    [[0, 1], [2, 3], [4]]
    """
    rows = np.asarray(rows, dtype=np.int64)
    return [rows[start:start + block_rows] for start in range(0, rows.size, max(1, int(block_rows)))]


def map_row_blocks(func, X, rows, *, block_rows=None):
    """``func(X[rows])`` computed a block of rows at a time and concatenated.

    For in-memory ``X`` (and ``block_rows=None``) it is one call; for a handle
    only one block is held at a time. ``func`` must act row by row (e.g. a
    classifier's ``decision_function`` or ``predict``).
    """
    rows = np.asarray(rows, dtype=np.int64)
    if block_rows is None and is_in_memory(X):
        return func(X[rows])
    size = block_rows or block_rows_of(X)
    parts = [func(take_rows(X, block)) for block in row_blocks(rows, size)]
    return stack_rows(parts) if parts else func(take_rows(X, rows))


class TransformedRows:
    """Rows of ``X`` passed through a fitted transformer as they are read.

    Lets a task read raw rows from a store and hand preprocessed rows to an
    estimator without ever transforming (or holding) the whole data set.

    Parameters
    ----------
    X : ndarray or row handle
        Supports ``X[row_indices]`` and ``X.shape``.
    transformer : fitted transformer or None
        Applied to each block read; ``None`` passes rows through.

    Examples
    --------
    >>> from sklearn.preprocessing import MinMaxScaler
    >>> X = np.array([[0.0], [2.0], [4.0]])
    >>> TransformedRows(X, MinMaxScaler().fit(X))[np.array([1, 2])].ravel().tolist()
    [0.5, 1.0]
    """

    def __init__(self, X, transformer=None):
        self.X = X
        self.transformer = transformer
        self.shape = tuple(X.shape)
        self.block_rows = block_rows_of(X)

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, rows):
        block = take_rows(self.X, rows)
        return block if self.transformer is None else self.transformer.transform(block)

    def __repr__(self):
        return f"TransformedRows({self.X!r}, {self.transformer!r})"


class RowSubset:
    """Rows ``rows`` of ``X``, renumbered from 0, read only when asked for.

    Examples
    --------
    >>> X = np.arange(10).reshape(5, 2)
    >>> RowSubset(X, np.array([4, 1]))[np.array([1])].tolist()
    [[2, 3]]
    """

    def __init__(self, X, rows):
        self.X, self.rows = X, np.asarray(rows, dtype=np.int64)
        self.shape = (self.rows.size, *tuple(X.shape)[1:])
        self.block_rows = block_rows_of(X)

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, rows):
        return take_rows(self.X, self.rows[np.asarray(rows)])
