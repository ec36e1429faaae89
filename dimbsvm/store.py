"""The Zarr layout every dimbsvm stage reads and writes.

A store is a Zarr v3 group on local disk::

    store.zarr/
      zarr.json        group attributes: {"dimbsvm": {...meta, "complete": bool}}
      X/               float32, chunked by rows, crc32c-checksummed chunks
      y/               int32, chunked like X's rows

The ``complete`` flag is written last, after every chunk is on disk, so a store
whose ingest crashed part-way can never be opened as if it were whole. Each
chunk carries a crc32c checksum (a Zarr codec), so a damaged chunk fails to
decode instead of yielding wrong numbers; :func:`verify_store` reads every chunk
once to find such damage up front.

The meta records the source fingerprint, so ingesting the same source into the
same path twice reuses the finished store.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

from .datasets import Dataset, load
from .exceptions import StoreError

__all__ = [
    "StoredData", "ingest", "open_store", "verify_store", "fingerprint_file",
    "create_checksummed_array", "open_stage", "finish_stage", "stage_is_complete", "StoreRows",
    "dataset_fingerprint", "open_finished_stage",
]

logger = logging.getLogger(__name__)

STORE_FORMAT = 1
_ATTR = "dimbsvm"
_DEFAULT_CHUNK_BYTES = 32 * 2**20


@dataclass
class StoredData:
    """A complete store opened lazily.

    Attributes
    ----------
    X : dask.array.Array
        Features, float32, chunked as stored.
    y : dask.array.Array
        Integer labels.
    meta : dict
        Everything :meth:`dimbsvm.datasets.Dataset.meta` records, plus
        ``fingerprint`` and ``store_format``.
    path : pathlib.Path
    """

    X: da.Array
    y: da.Array
    meta: dict
    path: Path

    def to_dataset(self) -> Dataset:
        """Read the whole store into memory as a :class:`~dimbsvm.datasets.Dataset`."""
        try:
            X, y = dask.compute(self.X, self.y, scheduler="threads")
        except ValueError as exc:  # zarr raises ValueError for a failed checksum
            raise StoreError(f"store {self.path} has a damaged chunk: {exc}") from exc
        return Dataset(
            X=np.asarray(X, dtype=np.float64),
            y=np.asarray(y),
            feature_names=list(self.meta.get("feature_names", [])),
            nominal_columns=list(self.meta.get("nominal_columns", [])),
            class_map=dict(self.meta.get("class_map", {})),
            name=self.meta.get("name", self.path.stem),
            source=str(self.path),
        )


class StoreRows:
    """A picklable handle on a store's features that reads only the rows asked for.

    Tasks receive this instead of the data: it carries the store path, and
    each process opens the array the first time it reads. It supports
    ``rows[index_array]`` and ``len(rows)`` and ``shape``, which is all the
    fold and member code needs.
    """

    def __init__(self, path, shape):
        self.path = str(path)
        self.shape = tuple(shape)
        self._array = None

    def __len__(self):
        return self.shape[0]

    @property
    def block_rows(self) -> int:
        """Rows per stored chunk: the natural amount to read at once."""
        return int(self._open().chunks[0])

    def _open(self):
        if self._array is None:
            self._array = zarr.open_group(self.path, mode="r")["X"]
        return self._array

    def __getitem__(self, rows):
        self._open()
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        try:
            # zarr reads the chunks these rows touch; sorting keeps that sequential
            order = np.argsort(rows, kind="stable")
            block = self._array.get_orthogonal_selection((rows[order],))
        except ValueError as exc:  # a failed checksum
            raise StoreError(f"store {self.path} has a damaged chunk: {exc}") from exc
        out = np.empty_like(block, dtype=np.float64)
        out[order] = block
        return out

    def __getstate__(self):
        return {"path": self.path, "shape": self.shape, "_array": None}

    def __repr__(self):
        return f"StoreRows({self.path!r}, shape={self.shape})"


def fingerprint_file(path) -> str:
    """SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def ingest(source, path, *, chunk_rows=None, overwrite=False, name=None) -> StoredData:
    """Write a dataset into a Zarr store and return it opened.

    Parameters
    ----------
    source : str, path, Dataset or tuple (X, y)
        A file or bundled name understood by :func:`dimbsvm.datasets.load`, a
        loaded :class:`~dimbsvm.datasets.Dataset`, or arrays (numpy or Dask).
        Dask arrays are written chunk by chunk, so peak memory does not grow
        with the number of rows.
    path : str or path
        Directory of the store (created).
    chunk_rows : int, default=None
        Rows per chunk; by default about 32 MiB of float32 features per chunk.
    overwrite : bool, default=False
        Replace an existing store with a different source. A complete store
        of the same source is reused whatever this says.
    name : str, default=None
        Dataset name recorded in the meta (defaults to the source's name).

    Returns
    -------
    StoredData

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> stored = ingest("yeast5", os.path.join(d, "yeast5.zarr"))
    >>> stored.X.shape, stored.meta["class_map"]["positive"]
    ((1484, 8), 1)
    """
    path = Path(path)
    X, y, meta = _resolve_source(source)
    if name is not None:
        meta["name"] = name

    existing = _read_attrs(path)
    if existing is not None:
        if existing.get("complete") and existing.get("fingerprint") == meta["fingerprint"]:
            logger.info("store %s already holds this source (fingerprint %s); reusing it",
                        path, meta["fingerprint"][:12])
            return open_store(path)
        if existing.get("complete") and not overwrite:
            raise StoreError(
                f"store {path} already holds another dataset ({existing.get('name')!r}); "
                "pass overwrite=True (CLI: --overwrite) to replace it")
    if path.exists():
        shutil.rmtree(path)

    n_rows = int(X.shape[0])
    if chunk_rows is None:
        row_bytes = 4 * int(np.prod(X.shape[1:], dtype=np.int64))
        chunk_rows = max(1, min(n_rows, _DEFAULT_CHUNK_BYTES // max(row_bytes, 1)))
    if int(chunk_rows) < 1:
        raise StoreError(f"chunk_rows must be >= 1, got {chunk_rows}")
    chunk_rows = int(chunk_rows)

    count_classes = meta.pop("count_classes", False)
    group = zarr.open_group(str(path), mode="w", zarr_format=3)
    meta.update(store_format=STORE_FORMAT, complete=False, chunk_rows=chunk_rows)
    group.attrs[_ATTR] = meta  # written first: marks the store as incomplete
    x_arr = create_checksummed_array(group, "X", shape=X.shape, dtype="float32",
                                     chunks=(chunk_rows, *X.shape[1:]))
    y_arr = create_checksummed_array(group, "y", shape=y.shape, dtype="int32", chunks=(chunk_rows,))

    X_dask = da.asarray(X).astype(np.float32).rechunk((chunk_rows, *X.shape[1:]))
    y_dask = da.asarray(y).astype(np.int32).rechunk((chunk_rows,))
    writes = da.store([X_dask, y_dask], [x_arr, y_arr], lock=False, compute=False)
    if count_classes:
        # Computed together with the writes, so a lazy source is read only once.
        _, counts = dask.compute(writes, da.bincount(y_dask.astype(np.int64)))
        meta["class_counts"] = {str(k): int(c) for k, c in enumerate(counts) if c}
    else:
        dask.compute(writes)
    meta["complete"] = True
    group.attrs[_ATTR] = meta  # the completion marker, written last
    logger.info("ingested %d rows into %s (%d-row chunks)", n_rows, path, chunk_rows)
    return open_store(path)


def open_store(path) -> StoredData:
    """Open a complete store as Dask arrays.

    Raises
    ------
    StoreError
        If the path is not a dimbsvm store, its completion marker is missing
        (an ingest that did not finish) or its arrays disagree with the meta.
    """
    path = Path(path)
    meta = _read_attrs(path)
    if meta is None:
        raise StoreError(f"{path} is not a dimbsvm store (no Zarr group with dimbsvm metadata)")
    if not meta.get("complete"):
        raise StoreError(
            f"store {path} is incomplete: its completion marker is missing "
            "(the ingest that wrote it did not finish); ingest again")
    try:
        group = zarr.open_group(str(path), mode="r")
        x_arr, y_arr = group["X"], group["y"]
    except (KeyError, FileNotFoundError, ValueError) as exc:
        raise StoreError(f"store {path} is damaged: {exc}") from exc
    if x_arr.shape[0] != y_arr.shape[0]:
        raise StoreError(f"store {path} is damaged: X has {x_arr.shape[0]} rows, y has {y_arr.shape[0]}")
    return StoredData(X=da.from_zarr(x_arr), y=da.from_zarr(y_arr), meta=meta, path=path)


def verify_store(path) -> StoredData:
    """Open a store and read every chunk once, checking its crc32c checksum.

    Raises
    ------
    StoreError
        Naming the array and the chunk that failed.
    """
    stored = open_store(path)
    group = zarr.open_group(str(stored.path), mode="r")
    for name in ("X", "y"):
        arr = group[name]
        step = arr.chunks[0]
        for start in range(0, arr.shape[0], step):
            try:
                arr[start:start + step]
            except ValueError as exc:
                raise StoreError(
                    f"store {stored.path}: chunk {start // step} of {name} "
                    f"(rows {start}..{min(start + step, arr.shape[0]) - 1}) failed its checksum: {exc}"
                ) from exc
    return stored


def create_checksummed_array(group, name, *, shape, dtype, chunks):
    """A new array in ``group`` whose chunks are zstd-compressed and crc32c-checksummed.

    Every array dimbsvm writes goes through here, so every chunk on disk can
    be verified.
    """
    return group.create_array(name, shape=shape, dtype=dtype, chunks=chunks,
                              compressors=[ZstdCodec(level=3), Crc32cCodec()], overwrite=True)


def stage_is_complete(store_path, stage: str, fingerprint: str) -> bool:
    """Whether ``stage`` of the store was finished for exactly this fingerprint."""
    meta = _read_attrs(Path(store_path) / stage)
    return bool(meta and meta.get("complete") and meta.get("fingerprint") == fingerprint)


def open_stage(store_path, stage: str, fingerprint: str, meta: dict | None = None):
    """Start (or restart) a feature stage: a subgroup marked incomplete.

    A stage is a Zarr group below the store (``knn``, ``similarity/<name>``,
    ...) holding the arrays a feature step writes. Its meta records the
    fingerprint of the inputs and parameters; the stage counts as done only
    after :func:`finish_stage`, so a crash part-way leaves it visibly
    incomplete and the next run recomputes it.

    Returns
    -------
    group : zarr.Group
    """
    group = zarr.open_group(str(Path(store_path) / stage), mode="w", zarr_format=3)
    group.attrs[_ATTR] = dict(meta or {}, fingerprint=fingerprint, complete=False)
    return group


def finish_stage(group, extra: dict | None = None) -> None:
    """Write a stage's completion marker, last, after all its chunks are written."""
    meta = dict(group.attrs[_ATTR])
    meta.update(extra or {}, complete=True)
    group.attrs[_ATTR] = meta


def open_finished_stage(store_path, stage: str):
    """``(group, meta)`` of a finished stage.

    Raises
    ------
    StoreError
        The stage does not exist or its completion marker is missing.
    """
    path = Path(store_path) / stage
    try:
        group = zarr.open_group(str(path), mode="r")
    except (FileNotFoundError, ValueError) as exc:
        raise StoreError(f"{path} is not a stage of a dimbsvm store: {exc}") from exc
    meta = dict(group.attrs.get(_ATTR) or {})
    if not meta.get("complete"):
        raise StoreError(f"stage {path} is incomplete (its completion marker is missing); compute it again")
    return group, meta


def _read_attrs(path: Path):
    """The dimbsvm meta of a store, or None when the path holds no dimbsvm group."""
    if not (path / "zarr.json").exists():
        return None
    try:
        group = zarr.open_group(str(path), mode="r")
    except (ValueError, json.JSONDecodeError, FileNotFoundError) as exc:
        raise StoreError(f"store {path} is damaged: cannot read its metadata ({exc})") from exc
    meta = group.attrs.get(_ATTR)
    return dict(meta) if meta is not None else None


def _resolve_source(source):
    """Arrays and meta (with a fingerprint) for any accepted source."""
    if isinstance(source, (str, Path)):
        dataset = load(source)
        _check_arrays(dataset.X, dataset.y, dataset.source)
        meta = dataset.meta()
        meta["fingerprint"] = dataset_fingerprint(dataset)
        return dataset.X, dataset.y, meta
    if isinstance(source, Dataset):
        _check_arrays(source.X, source.y, source.source or source.name)
        meta = source.meta()
        meta["fingerprint"] = _array_fingerprint(source.X, source.y)
        return source.X, source.y, meta
    if isinstance(source, tuple) and len(source) == 2:
        X, y = source
        if not hasattr(X, "shape") or not hasattr(y, "shape"):
            X, y = np.asarray(X), np.asarray(y)
        _check_arrays(X, y, "arrays")
        n_features = X.shape[1] if X.ndim > 1 else 1
        meta = {
            "name": "arrays", "source": "arrays", "n_samples": int(X.shape[0]),
            "shape": list(X.shape), "feature_names": [f"x{i}" for i in range(n_features)],
            "nominal_columns": [], "class_map": {}, "fingerprint": _array_fingerprint(X, y),
        }
        if isinstance(X, da.Array) or isinstance(y, da.Array):
            meta["count_classes"] = True  # counted while streaming, never materialised
        else:
            labels, counts = np.unique(np.asarray(y), return_counts=True)
            meta["class_counts"] = {str(int(k)): int(c) for k, c in zip(labels, counts)}
        return X, y, meta
    raise StoreError(f"cannot ingest a {type(source).__name__}: pass a path, a Dataset or (X, y)")


def dataset_fingerprint(dataset: Dataset) -> str:
    """SHA-256 of the file a dataset was read from, else of its arrays."""
    src = Path(dataset.source)
    return fingerprint_file(src) if src.is_file() else _array_fingerprint(dataset.X, dataset.y)


def _array_fingerprint(X, y) -> str:
    """Content hash for in-memory arrays; Dask's deterministic token for lazy ones."""
    if isinstance(X, da.Array) or isinstance(y, da.Array):
        return "dask-" + dask.base.tokenize(X, y)
    digest = hashlib.sha256()
    for arr in (np.ascontiguousarray(X), np.ascontiguousarray(y)):
        digest.update(str((arr.dtype, arr.shape)).encode())
        digest.update(arr.tobytes())
    return digest.hexdigest()


def _check_arrays(X, y, where):
    if X.ndim < 2:
        raise StoreError(f"{where}: X must be 2-D (or 3-D for time series), got shape {X.shape}")
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise StoreError(f"{where}: y must be 1-D with one label per row of X "
                         f"(X has {X.shape[0]} rows, y has shape {y.shape})")
    if not np.issubdtype(np.dtype(y.dtype), np.integer):
        raise StoreError(f"{where}: y must hold integer labels, got dtype {y.dtype}; "
                         "map class names to integers first (the readers do)")
