"""Opening and verifying a dimbsvm store (its layout and ingest: :mod:`dimbsvm.store.layout`).

:func:`open_store` refuses a store that is not complete, of an older format, or
whose arrays disagree with its meta; :func:`find_damage` names a missing or
corrupt chunk (its array and rows) and :func:`verify_store` checks them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import dask
import dask.array as da
import numpy as np

from ..datasets import Dataset
from ..exceptions import StoreError
from ._zarr import missing_chunks, open_group
from .fingerprints import content_fingerprint
from .location import filesystem, is_url, join, location, name_of, read_json
from .sparse import chunk_lengths, csr_array, find_sparse_damage, is_sparse
from .stages import read_meta as _read_attrs

__all__ = ["STORE_FORMAT", "StoredData", "find_damage", "incomplete_store", "open_store", "store_exists",
           "verify_store"]

#: 2: every chunk is on disk (format 1 skipped all-zero chunks, so a missing chunk could not be told
#: from zeros).
STORE_FORMAT = 2


@dataclass
class StoredData:
    """A complete store opened lazily.

    Attributes
    ----------
    X : dask.array.Array
        Features, float64 or float32 as ingested, chunked as stored; of a
        sparse store, a Dask array of ``scipy.sparse.csr_matrix`` chunks.
    y : dask.array.Array
        Integer labels.
    meta : dict
        Everything :meth:`dimbsvm.datasets.Dataset.meta` records, plus
        ``fingerprint`` and ``store_format``.
    path : pathlib.Path or str
        A local directory, or the store's URL.
    """

    X: da.Array
    y: da.Array
    meta: dict
    path: Path | str

    def to_dataset(self) -> Dataset:
        """Read the whole store into memory as a :class:`~dimbsvm.datasets.Dataset`."""
        try:
            X, y = dask.compute(self.X, self.y, scheduler="threads")
        except StoreError:
            raise
        except ValueError as exc:  # zarr raises ValueError for a failed checksum
            raise StoreError(f"store {self.path} has a damaged chunk: {exc}") from exc
        return Dataset(
            X=X.tocsr().astype(np.float64) if is_sparse(self.meta) else np.asarray(X, dtype=np.float64),
            y=np.asarray(y),
            feature_names=list(self.meta.get("feature_names", [])),
            nominal_columns=list(self.meta.get("nominal_columns", [])),
            class_map=dict(self.meta.get("class_map", {})),
            name=self.meta.get("name", name_of(self.path).rsplit(".", 1)[0]),
            source=str(self.path),
        )


def incomplete_store(path, meta: dict) -> str:
    """The line for a store without its completion marker: what to do differs on disk and at a URL.

    An ingest to the same local path replaces it (it is dimbsvm's own); at a
    URL a store is never replaced (object storage has no rename), so the
    unfinished one must be deleted first, once its writer has stopped.
    """
    writer = meta.get("writer")
    by = f" (its writer: {writer})" if writer else ""
    if is_url(path):
        return (f"store {path} is incomplete: an ingest is writing it, or one stopped part-way{by}; if none is "
                "running, delete it with your storage tools and ingest again")
    return (f"store {path} is incomplete: its completion marker is missing (the ingest that wrote it did not "
            f"finish{by}); ingest again to the same path, which replaces it")


def open_store(path) -> StoredData:
    """Open a complete store as Dask arrays (reading a missing chunk raises ``StoreError``).

    Raises
    ------
    StoreError
        If the path is not a dimbsvm store, its completion marker is missing
        (an ingest that did not finish), it was written by an older format,
        or its arrays disagree with the meta.
    """
    path = location(path)
    meta = _read_attrs(path)
    if meta is None and not store_exists(path):
        raise StoreError(f"{path} is not a dimbsvm store (it does not exist)")
    if meta is None:
        raise StoreError(f"{path} is not a dimbsvm store (no Zarr group with dimbsvm metadata)")
    if not meta.get("complete"):
        raise StoreError(incomplete_store(path, meta))
    if meta.get("store_format", 1) < STORE_FORMAT:
        raise StoreError(
            f"store {path} was written by an older dimbsvm (store format {meta.get('store_format', 1)}), which "
            "skipped all-zero chunks, so a missing chunk cannot be told from zeros; rebuild it with "
            "`dimbsvm ingest SOURCE STORE --overwrite`")
    try:
        group = open_group(path, mode="r")
        x_arr, y_arr = group["X"], group["y"]
    except (KeyError, FileNotFoundError, ValueError) as exc:
        raise StoreError(f"store {path} is damaged: {exc}") from exc
    if is_sparse(meta):
        n_rows, n_features = (int(v) for v in meta["shape"])
        if n_rows != y_arr.shape[0]:
            raise StoreError(f"store {path} is damaged: its meta records {n_rows} rows, y has {y_arr.shape[0]}")
        X = csr_array(path, chunk_lengths(n_rows, meta["chunk_rows"]), n_features, np.dtype(meta["dtype"]),
                      token=content_fingerprint(meta))
        return StoredData(X=X, y=da.from_zarr(y_arr), meta=meta, path=path)
    if x_arr.shape[0] != y_arr.shape[0]:
        raise StoreError(f"store {path} is damaged: X has {x_arr.shape[0]} rows, y has {y_arr.shape[0]}")
    return StoredData(X=da.from_zarr(x_arr), y=da.from_zarr(y_arr), meta=meta, path=path)


def find_damage(path, *, checksums: bool = True) -> str | None:
    """What is wrong with the chunks of a store's ``X`` and ``y`` (and ``ids``, if it keeps them), or None.

    Every chunk must exist on disk; with ``checksums`` each is also read and
    its crc32c checked. The answer names the array, the chunk and its rows.
    """
    path = location(path)
    arrays = _row_arrays(path)
    meta = _read_attrs(path) or {}
    if is_sparse(meta):
        damage = find_sparse_damage(path, chunk_lengths(int(meta["shape"][0]), int(meta["chunk_rows"])),
                                    int(meta["shape"][1]), checksums=checksums)
        if damage:
            return damage
    for name in arrays:
        if read_json(join(path, name, "zarr.json")) is None:
            return f"array {name} is missing"
        missing = missing_chunks(join(path, name))
        if missing:
            arr = open_group(path, mode="r")[name]
            step = arr.chunks[0]
            first = missing[0][0]
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            return (f"chunk {first} of {name} (rows {first * step}..{min((first + 1) * step, arr.shape[0]) - 1}) "
                    f"is missing on disk{more}")
    if not checksums:
        return None
    group = open_group(path, mode="r")
    for name in arrays:
        arr = group[name]
        step = arr.chunks[0]
        for start in range(0, arr.shape[0], step):
            try:
                arr[start:start + step]
            except ValueError as exc:  # a failed checksum or an undecodable (truncated) chunk
                return (f"chunk {start // step} of {name} (rows {start}..{min(start + step, arr.shape[0]) - 1}) "
                        f"failed its checksum: {exc}")
    return None


def _row_arrays(path) -> tuple[str, ...]:
    """The arrays of a store cut by rows: ``X`` (when dense), ``y``, and ``ids`` when its meta names an id column."""
    meta = _read_attrs(path) or {}
    return (*(() if is_sparse(meta) else ("X",)), "y", *(("ids",) if meta.get("id_column") else ()))


def verify_store(path) -> StoredData:
    """Open a store and check that every chunk is on disk and passes its crc32c checksum.

    Raises
    ------
    StoreError
        Naming the array, the chunk and its rows.
    """
    stored = open_store(path)
    damage = find_damage(stored.path, checksums=True)
    if damage:
        raise StoreError(f"store {stored.path}: {damage}; rebuild it with `dimbsvm ingest SOURCE STORE --overwrite`")
    return stored


def store_exists(path) -> bool:
    """Whether anything is at ``path`` (a local path or a URL)."""
    if isinstance(path, Path):
        return path.exists()
    fs, root = filesystem(path)
    return fs.exists(root)
