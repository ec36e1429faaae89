"""Sparse stores: rows kept as CSR, one group of three arrays per chunk of rows.

A dense store's ``X`` is one Zarr array cut by rows. Text, logs and hashed
crosses have 10^5-10^6 columns and a few dozen values a row, which no dense
array holds, so a sparse store keeps, for each chunk ``c`` of ``chunk_rows``
rows, the chunk's CSR arrays::

    store.zarr/
      zarr.json          {"dimbsvm": {..., "sparse": "csr", "nnz": total, "chunk_nnz": [...]}}
      X/                 a group (the shape is the meta's "shape")
        0/data           the chunk's stored values (float64 or float32)
        0/indices        their columns (int32, or int64 past 2^31 - 1 columns)
        0/indptr         where each row starts in data (int64, rows + 1 values)
        1/...
      y/                 as in a dense store

Each of those arrays is one Zarr chunk, compressed and crc32c-checksummed
like every array dimbsvm writes, so a chunk's values either decode whole or
fail their checksum, and a missing file is damage, never zeros (the checked
store refuses it). The labels, ids, meta, completion marker (written last),
fingerprints and placement (staged beside the path and swapped in) are a
dense store's. Each chunk is written by one task, so no two tasks touch one
file.

The kernels here see one chunk: no Dask, no scheduling.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..exceptions import StoreError
from ._zarr import create_checksummed_array, missing_chunks, open_group
from .finite import nonfinite_rows
from .location import join, read_json

__all__ = ["CSR_PARTS", "SPARSE_FORMAT", "chunk_lengths", "csr_array", "find_sparse_damage", "index_dtype",
           "is_sparse", "read_csr_chunk", "sparse_nonfinite_rows", "write_csr_chunk"]

#: The meta value (key ``"sparse"``) of a sparse store.
SPARSE_FORMAT = "csr"
#: The arrays of one chunk, in the order a reader needs them.
CSR_PARTS = ("indptr", "indices", "data")


def is_sparse(meta: dict | None) -> bool:
    """Whether a store's meta describes a sparse store."""
    return bool(meta) and meta.get("sparse") == SPARSE_FORMAT


def index_dtype(n_features: int) -> np.dtype:
    """int32 column indices where they fit (scipy's own choice), else int64."""
    return np.dtype(np.int32) if int(n_features) <= np.iinfo(np.int32).max else np.dtype(np.int64)


def chunk_lengths(n_rows: int, chunk_rows: int) -> tuple[int, ...]:
    """Rows of each chunk.

    Examples
    --------
    >>> chunk_lengths(10, 4)
    (4, 4, 2)
    >>> chunk_lengths(0, 4)
    ()
    """
    return tuple(min(int(chunk_rows), int(n_rows) - start) for start in range(0, int(n_rows), int(chunk_rows)))


def sparse_nonfinite_rows(block) -> np.ndarray:
    """:func:`~dimbsvm.store.finite.nonfinite_rows` of a CSR block, from its stored values only.

    Examples
    --------
    >>> block = sp.csr_matrix(np.array([[0.0, np.nan], [np.inf, np.nan], [1.0, 0.0]]))
    >>> sparse_nonfinite_rows(block).tolist()
    [2, 1]
    """
    block = sp.csr_matrix(block)
    bad = ~np.isfinite(block.data)
    if not bad.any():
        return np.zeros(2, dtype=np.int64)
    rows = np.repeat(np.arange(block.shape[0]), np.diff(block.indptr))[bad]
    return nonfinite_rows(_row_flags(rows, block.data[bad], block.shape[0]))


def _row_flags(rows, values, n_rows) -> np.ndarray:
    """A dense ``(n_rows, 2)`` block holding each row's first NaN and first infinity (for the counts)."""
    flags = np.zeros((n_rows, 2))
    nan = np.isnan(values)
    flags[rows[nan], 0] = np.nan
    flags[rows[~nan], 1] = np.inf
    return flags


def write_csr_chunk(path, chunk: int, block, *, dtype, compression: str) -> dict:
    """Write chunk ``chunk`` of a sparse store's ``X`` (its group ``X`` exists); return what the meta records.

    Parameters
    ----------
    path : str or path
        The store (local directory or URL) being written.
    chunk : int
        The chunk's number.
    block : scipy.sparse matrix or ndarray
        The chunk's rows (converted to CSR, sorted indices, explicit zeros kept).
    dtype : numpy dtype
        The stored values' dtype.
    compression : str
        One of :data:`~dimbsvm.store.COMPRESSIONS`.

    Returns
    -------
    dict
        ``nnz`` (stored values) and ``nonfinite`` (``[rows with NaN, rows with +-inf]``).
    """
    block = sp.csr_matrix(block, dtype=dtype)
    if not block.has_sorted_indices:
        block = block.sorted_indices()
    group = open_group(join(path, "X", str(int(chunk))), mode="w")
    arrays = {"indptr": block.indptr.astype(np.int64), "indices": block.indices.astype(index_dtype(block.shape[1])),
              "data": block.data}
    for name, values in arrays.items():
        target = create_checksummed_array(group, name, shape=values.shape, dtype=values.dtype,
                                          chunks=(max(1, values.size),), compression=compression)
        if values.size:
            target[:] = values
    return {"nnz": int(block.nnz), "nonfinite": sparse_nonfinite_rows(block).tolist()}


def read_csr_chunk(path, chunk: int, n_rows: int, n_features: int, *, group=None) -> sp.csr_matrix:
    """Chunk ``chunk`` of a sparse store's ``X`` (``n_rows`` rows), read through the checked store.

    ``group``: the store's ``X`` group, already opened read-only (saves opening it again).

    Raises
    ------
    StoreError
        A part of the chunk is missing or fails its checksum, or its arrays
        disagree with each other (naming the chunk and its rows).
    """
    group = open_group(join(path, "X"), mode="r") if group is None else group
    parts = {}
    for name in CSR_PARTS:
        try:
            parts[name] = group[f"{int(chunk)}/{name}"][:]
        except StoreError:  # a missing chunk file: the checked store's refusal
            problem = "is missing on disk (it would read as zeros)"
        except (KeyError, FileNotFoundError):
            problem = "is missing"
        except ValueError as exc:  # a failed checksum, an undecodable (truncated) file
            problem = f"failed its checksum: {exc}"
        else:
            continue
        raise StoreError(f"store {path} is damaged: the {name} array of chunk {chunk} of X {problem}; rebuild it "
                         f"with `dimbsvm ingest SOURCE {path} --overwrite`")
    try:
        return sp.csr_matrix((parts["data"], parts["indices"], parts["indptr"]), shape=(int(n_rows), int(n_features)))
    except ValueError as exc:  # arrays that disagree: a chunk written by something else
        raise StoreError(f"store {path} is damaged: the arrays of chunk {chunk} of X disagree: {exc}") from exc


def find_sparse_damage(path, lengths, n_features: int, *, checksums: bool) -> str | None:
    """What is wrong with a sparse store's ``X`` chunks (``lengths``: rows of each), or None.

    Every part of every chunk must have its metadata and its chunk file; with
    ``checksums`` each chunk is also read and its arrays checked against each
    other.
    """
    start = 0
    for chunk, rows in enumerate(lengths):
        where = f"chunk {chunk} of X (rows {start}..{start + rows - 1})"
        for name in CSR_PARTS:
            part = join(path, "X", str(chunk), name)
            if read_json(join(part, "zarr.json")) is None:
                return f"{where}: its {name} array is missing"
            if missing_chunks(part):
                return f"{where}: its {name} values are missing on disk"
        if checksums:
            try:
                read_csr_chunk(path, chunk, rows, n_features)
            except StoreError as exc:
                return f"{where}: {str(exc).split(' is damaged: ', 1)[-1].split('; rebuild', 1)[0]}"
        start += rows
    return None


def csr_array(path, lengths, n_features: int, dtype, token: str):
    """A sparse store's ``X`` as a Dask array of CSR chunks (each read when computed).

    Parameters
    ----------
    path : str or path
    lengths : tuple of int
        Rows of each chunk.
    n_features : int
    dtype : numpy dtype
    token : str
        The store's content fingerprint: the array's Dask name, so that a
        store replaced at the same path is never taken for the old one.
    """
    import dask.array as da

    meta = sp.csr_matrix((0, int(n_features)), dtype=dtype)
    return da.map_blocks(_read_block, str(path), tuple(int(n) for n in lengths), int(n_features),
                         chunks=(tuple(lengths), (int(n_features),)), dtype=dtype, meta=meta,
                         name=f"dimbsvm-csr-{token}")


def _read_block(path, lengths, n_features, block_id=None):
    chunk = block_id[0]
    return read_csr_chunk(path, chunk, lengths[chunk], n_features)
