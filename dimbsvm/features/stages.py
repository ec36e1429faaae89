"""Plumbing shared by the chunked feature stages: chunking, scheduling, stage files.

A feature stage (see :func:`dimbsvm.store.open_stage`) is computed from a Dask
array chunked by rows, or from a dimbsvm store, whose ``X`` is one. Each task
computes the block of one chunk and writes the rows it owns, whole Zarr chunks
aligned with the Dask chunks, so no process ever holds an n-row result and a
rerun of a task writes the same bytes.

A stage whose fingerprint (inputs and parameters) matches a finished one is
reused. The fingerprint of a store's ``X`` is the store's source fingerprint;
for other Dask arrays it is the array's Dask name, which is stable for a
given graph but not across processes for every source: pass ``fingerprint=``
when a job must find its stage again after a restart.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import dask
import dask.array as da
import numpy as np

from ..exceptions import DataError, StoreError
from ..store import create_checksummed_array, open_store

__all__ = ["row_chunked", "compute_on_client", "resolve_input", "stage_fingerprint", "write_small"]



def row_chunked(X):
    """``X`` as a Dask array chunked along rows only, in equal chunks (the last may be shorter).

    Equal chunks let each task own whole Zarr chunks of the arrays written
    from it. A path is opened as a dimbsvm store and its ``X`` returned.
    """
    if isinstance(X, (str, Path)):
        X = open_store(X).X
    X = da.asarray(X)
    if X.ndim not in (2, 3):
        raise DataError(f"expected rows as a 2-D (n, n_features) or 3-D (n, channels, length) array, "
                        f"got shape {X.shape}")
    rows = X.chunks[0]
    regular = all(c == rows[0] for c in rows[:-1]) and rows[-1] <= rows[0]
    return X.rechunk({0: rows[0] if regular else max(rows), **{a: -1 for a in range(1, X.ndim)}})


def compute_on_client(*collections, client=None):
    """``dask.compute`` on the given or current ``distributed`` client, else in-process threads."""
    from ..distributed.client import current_client

    client = current_client(client)
    if client is not None:
        return client.compute(list(collections), sync=True)
    return dask.compute(*collections)


def resolve_input(X, store):
    """``(store path, Dask X, source fingerprint)`` for a store path or an array plus a store."""
    if isinstance(X, (str, Path)):
        stored = open_store(X)
        return Path(store or X), stored.X, stored.meta["fingerprint"]
    if store is None:
        raise StoreError("store is required when X is an array (pass the store path to write to)")
    X = da.asarray(X)
    return Path(store), X, X.name


def stage_fingerprint(kind, source, array, params):
    """SHA-256 of the stage kind, the input's identity, a parameter array and JSON parameters."""
    digest = hashlib.sha256()
    digest.update(json.dumps([kind, source, params], sort_keys=True, default=str).encode())
    array = np.ascontiguousarray(array)
    digest.update(str((array.dtype, array.shape)).encode())
    digest.update(array.tobytes())
    return digest.hexdigest()


def write_small(group, name, values):
    """Write a small float64 array (references, moments) as one checksummed chunk."""
    values = np.asarray(values, dtype=np.float64)
    arr = create_checksummed_array(group, name, shape=values.shape, dtype="float64",
                                   chunks=tuple(max(1, s) for s in values.shape))
    arr[...] = values
