"""The ``ids`` array a store keeps beside its rows (a tabular source's id column).

Integer ids are stored as int64; any other id as text, in Zarr v3's
variable-length UTF-8 string type. The array is chunked like ``y`` and,
like every array of a store, compressed and crc32c-checksummed with every
chunk written.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from .._zarr import create_checksummed_array, open_group

__all__ = ["IDS", "create_ids_array", "open_ids"]

#: The array's name in a store.
IDS = "ids"


def create_ids_array(group, ids: da.Array, *, chunk_rows: int, compression: str = "zstd", write_rows=None):
    """Create the store's ``ids`` array and the Dask array to write into it.

    Parameters
    ----------
    group : zarr.Group
        The store being written.
    ids : dask.array.Array of shape (n_samples,)
        int64, or object holding str.
    chunk_rows : int
        Rows per chunk (as ``X`` and ``y``).
    compression : str, default="zstd"
    write_rows : tuple of int, default=None
        Rows of each write task, whole chunks (as ``X`` and ``y`` are
        written); ``None``: one chunk per task.

    Returns
    -------
    source : dask.array.Array
        ``ids`` rechunked like the rows written beside them, for :func:`dask.array.store`
        together with ``X`` and ``y`` (so the source is read once).
    target : zarr.Array
    """
    integer = np.issubdtype(ids.dtype, np.integer)
    dtype = "int64" if integer else str
    target = create_checksummed_array(group, IDS, shape=ids.shape, dtype=dtype, chunks=(int(chunk_rows),),
                                      compression=compression)
    source = (ids.astype(np.int64) if integer else ids).rechunk((write_rows or int(chunk_rows),))
    return source, target


def open_ids(path) -> da.Array | None:
    """A store's ids as a lazy Dask array (int64, or str), or None when it keeps none.

    ``path`` is a store's location: a directory or a URL.
    """
    group = open_group(path, mode="r")
    if IDS not in group:
        return None
    return da.from_zarr(group[IDS])
