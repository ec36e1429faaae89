"""What a feature stage is computed from: a store's rows or a Dask array, chunked by rows only.

Apart from :mod:`~dimbsvm.store.stages` (which :mod:`~dimbsvm.store.layout`
reads), because a path given here is opened as a store.
"""

from __future__ import annotations

from pathlib import Path

import dask.array as da

from ..exceptions import DataError, StoreError
from .reading import open_store
from .location import local_path

__all__ = ["resolve_input", "row_chunked"]


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



def resolve_input(X, store):
    """``(store path, Dask X, source fingerprint)`` for a store path or an array plus a store."""
    if isinstance(X, (str, Path)):
        stored = open_store(X)
        return local_path(store or X, "feature stages"), stored.X, stored.meta["fingerprint"]
    if store is None:
        raise StoreError("store is required when X is an array (pass the store path to write to)")
    X = da.asarray(X)
    return local_path(store, "feature stages"), X, X.name
