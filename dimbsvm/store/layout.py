"""The Zarr layout of a dimbsvm store, and its ingest (opening and verifying: :mod:`dimbsvm.store.reading`).

A store is a Zarr v3 group on local disk::

    store.zarr/
      zarr.json        group attributes: {"dimbsvm": {...meta, "complete": bool}}
      X/               float64 (float32 if asked for), chunked by rows, crc32c-checksummed chunks
      y/               int32, chunked like X's rows

A sparse source (svmlight files, a ``scipy.sparse`` matrix, a Dask array of
CSR chunks) is kept sparse: ``X`` is then a group of CSR arrays per chunk
(:mod:`dimbsvm.store.sparse`); everything else below holds alike.

The ``complete`` flag is written last, after every chunk is on disk, so a store
whose ingest crashed part-way can never be opened as if it were whole. An
ingest writes the store beside its path and swaps it in only when complete,
under the path's lock, and writes only over a store of its own
(:mod:`dimbsvm.store.placement`): a failed ingest leaves the old store (or
nothing) in place, two ingests into one path run one after the other, and a
directory dimbsvm did not write is refused, never replaced. Every
chunk is written (all-zero ones too) and read through a store that refuses
an absent chunk (:mod:`dimbsvm.store._zarr`), so a deleted chunk file is an
error, never zeros. Each chunk carries a crc32c checksum (a Zarr codec), so a
damaged chunk fails to decode instead of yielding wrong numbers;
:func:`verify_store` checks every chunk's presence and checksum up front.

The meta records the source fingerprint, so ingesting the same source into the
same path twice reuses the finished store, once it is found undamaged. It also
records, with the completion marker, how many rows hold NaN or infinite values
(:mod:`dimbsvm.store.finite`), counted on each block as it is written, so a
job's data check need not read the chunks again.

Precision: files are read as float64 and stored as float64 unless float32 is
asked for (``dtype="float32"``, CLI ``--dtype float32``: half the disk and
memory, about 7 significant digits, so ``123456789.123`` reads back as
``123456792.0``). Arrays keep their float dtype (a float32 Dask array stays
float32); integer arrays become float64.
"""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp

from ..datasets import Dataset, load
from ..exceptions import StoreError
from . import placement
from .location import is_url, location
from .reading import incomplete_store
from .finite import META_KEY as NONFINITE_KEY, nonfinite_rows
from .fingerprints import array_fingerprint, dataset_fingerprint
from .sparse import SPARSE_FORMAT, chunk_lengths, index_dtype, is_sparse, write_csr_chunk
from .._validation import is_dask_array
from ._zarr import COMPRESSIONS, create_checksummed_array, open_group
from .stages import ATTR as _ATTR, read_meta as _read_attrs
from .write_progress import ChunkProgress
from .reading import STORE_FORMAT, StoredData, find_damage, open_store, verify_store

__all__ = ["STORE_FORMAT", "StoredData", "default_chunk_rows", "find_damage", "ingest", "open_store",
           "verify_store"]

logger = logging.getLogger("dimbsvm.store")

#: Default chunking: about this many chunks, each between the two sizes below. A chunk is the
#: unit of every per-chunk task (scaler statistics, out-of-bag margins, scoring, feature blocks),
#: so a store needs many more chunks than a cluster has workers; below 2 MiB a task's Dask
#: overhead (milliseconds) is no longer small against its work.
DEFAULT_CHUNKS = 128
MIN_CHUNK_BYTES = 2 * 2**20
MAX_CHUNK_BYTES = 32 * 2**20


def default_chunk_rows(n_rows: int, row_bytes: int) -> int:
    """Rows per chunk: ~:data:`DEFAULT_CHUNKS` chunks of 2 to 32 MiB (fewer, larger ones for small data).

    Examples
    --------
    >>> default_chunk_rows(10_000_000, 128)  # 1.2 GiB of float32 rows: 128 chunks of 10 MB
    78125
    >>> default_chunk_rows(1_484, 64)  # small data: one chunk
    1484
    """
    target = -(-int(n_rows) * int(row_bytes) // DEFAULT_CHUNKS)
    chunk_bytes = min(max(target, MIN_CHUNK_BYTES), MAX_CHUNK_BYTES)
    return max(1, min(int(n_rows), chunk_bytes // max(int(row_bytes), 1)))


#: Feature dtypes a store may hold.
DTYPES = ("float64", "float32")


def ingest(source, path, *, chunk_rows=None, overwrite=False, name=None, verify=False, dtype=None,
           compression=None, target=None, id=None, drop=None, nominal=None, max_categories=None,
           n_features=None, progress=False) -> StoredData:
    """Write a dataset into a Zarr store and return it opened.

    Parameters
    ----------
    source : str, path, Dataset or tuple (X, y)
        A file or bundled name understood by :func:`dimbsvm.datasets.load`, a
        loaded :class:`~dimbsvm.datasets.Dataset`, or arrays (numpy or Dask).
        Dask arrays are written chunk by chunk, so peak memory does not grow
        with the number of rows. svmlight files (``.svm``, ``.svmlight``,
        ``.libsvm``, a glob of them, local or at a URL) are parsed block by
        block on the workers into a sparse store, as are ``scipy.sparse``
        matrices and Dask arrays of CSR chunks
        (:mod:`dimbsvm.store.sparse`).
    path : str or path
        Directory of the store (created).
    chunk_rows : int, default=None
        Rows per chunk; by default :func:`default_chunk_rows` (about 128
        chunks of 2 to 32 MiB of features: many more tasks than workers).
    overwrite : bool, default=False
        Replace an existing store: one with a different source, a different
        ``chunk_rows`` or ``dtype``, or a damaged one. An undamaged complete
        store of the same source (chunking and dtype) is reused whatever this
        says. Only a dimbsvm store is ever replaced, and only once the new
        one is complete: any other file or non-empty directory at ``path``
        is refused whatever this says.
    name : str, default=None
        Dataset name recorded in the meta (defaults to the source's name).
    verify : bool, default=False
        Also read every chunk and check its checksum: of a store about to be
        reused (a damaged one is refused, or rebuilt with ``overwrite``), and
        of the store written. Without it a reused store is only checked for
        missing chunk files.
    dtype : {"float64", "float32"}, default=None
        How the features are stored. By default float64 for files, Datasets
        and integer arrays, and the array's own dtype for float arrays (numpy
        or Dask). ``"float32"`` halves the size and keeps about 7 significant
        digits; the store's meta records the dtype.
    compression : {"zstd", "lz4"}, default=None
        How the chunks are compressed (:data:`~dimbsvm.store.COMPRESSIONS`):
        ``"zstd"`` (the default for a new store) is smaller on data of few
        distinct values, ``"lz4"`` decodes several times faster, which jobs
        that pass over the store many times (an ensemble's folds) feel. The
        values read are the same; the store's meta records it.
    target, id : str, default=None
        For a Parquet or CSV source (file, directory, glob, URL) or a
        DataFrame: the label column (by default the one named ``class``,
        ``label`` or ``target``), and a column kept beside the rows as the
        store's ``ids`` array (:func:`dimbsvm.store.sources.open_ids`).
    drop, nominal : sequence of str, default=None
        Columns left out; columns one-hot encoded even though they hold numbers.
    max_categories : int, default=None
        A nominal column with more distinct values is refused (default 100).
        See :func:`dimbsvm.store.sources.resolve_tabular_source`.
    n_features : int, default=None
        For svmlight files: the feature count (default: the largest column
        index's); a file with a larger index is refused.
    progress : bool, default=False
        Show a progress line on stderr while a local store's chunks are
        written (:class:`~dimbsvm.store.write_progress.ChunkProgress`).

    Returns
    -------
    StoredData

    Raises
    ------
    StoreError
        The path holds something that is not a dimbsvm store; without
        ``overwrite``: the path holds another dataset, the same one in other
        chunks, or a damaged store (a missing chunk file); the disk filled up
        (the store at ``path`` is then unchanged).

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> stored = ingest("yeast5", os.path.join(d, "yeast5.zarr"))
    >>> stored.X.shape, stored.X.dtype.name, stored.meta["class_map"]["positive"]
    ((1484, 8), 'float64', 1)
    """
    path = location(path)
    if chunk_rows is not None and (isinstance(chunk_rows, bool) or int(chunk_rows) < 1):
        raise StoreError(f"chunk_rows must be >= 1, got {chunk_rows}")
    asked = {"chunk_rows": chunk_rows, "dtype": None if dtype is None else _dtype_name(dtype),
             "compression": compression, "progress": bool(progress)}
    if asked["dtype"] is not None and asked["dtype"] not in DTYPES:
        raise StoreError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if compression is not None and compression not in COMPRESSIONS:
        raise StoreError(f"compression must be one of {', '.join(COMPRESSIONS)}, got {compression!r}")
    # before the source is read: a foreign directory is refused at once
    target_state = placement.check_url_target(path) if is_url(path) else placement.check_target(path)
    from .sources import UnscannedCellError, with_columns

    source = with_columns(source, target=target, id=id, drop=drop, nominal=nominal, max_categories=max_categories)
    # A late refusal (see resolve_tabular_source's presume_numbers) leaves a local store as it was, but would leave a
    # claimed URL incomplete: a store at a URL is only written from a source scanned whole.
    X, y, ids, meta = _resolve_source(source, presume_numbers=not is_url(path), n_features=n_features,
                                      dtype=asked["dtype"])
    if name is not None:
        meta["name"] = name
    try:
        written = _place_store(path, X, y, ids, meta, asked, target_state, overwrite=overwrite, verify=verify)
    except UnscannedCellError:
        # A word in a column whose first rows hold numbers: the source is refused either way; the pass over
        # every column refuses it naming and counting every such cell, as a source resolved here always was.
        _resolve_source(source, presume_numbers=False)
        raise
    if not written:
        return open_store(path)
    logger.info("ingested %d rows into %s (%d-row chunks, %s, %s)", int(X.shape[0]), path, meta["chunk_rows"],
                meta["dtype"], meta["compression"])
    return verify_store(path) if verify else open_store(path)


def _place_store(path, X, y, ids, meta: dict, asked: dict, target_state, *, overwrite: bool, verify: bool) -> bool:
    """Write the store at ``path`` (in place on object storage, else staged and swapped in), or reuse the one there.

    Returns whether it was written (False: the store there already holds this source).
    """
    if is_url(path):
        if target_state == "store" and _reuse_or_rebuild(path, meta, asked, overwrite=False, verify=verify):
            return False
        placement.claim_url(path)  # one writer: the first to create the store's zarr.json
        _write_any_store(path, X, y, meta, mode="r+", ids=ids, **asked)
    else:
        with placement.lock_target(path):
            placement.clean_leftovers(path)
            target_state = placement.check_target(path)  # again: another writer may have finished meanwhile
            if target_state == "store":
                if _reuse_or_rebuild(path, meta, asked, overwrite=overwrite, verify=verify):
                    return False
                placement.check_replaceable(path)
            staged = placement.stage_beside(path)
            try:
                _write_any_store(staged, X, y, meta, ids=ids, **asked)
                placement.swap_in(staged, path, target_state)
            except BaseException as exc:
                placement.discard_staged(staged)
                if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                    raise StoreError(f"no space left on device while writing store {path} (staged in "
                                     f"{staged.parent}); the store at that path is unchanged") from None
                raise
    return True


def _reuse_or_rebuild(path, meta: dict, asked: dict, *, overwrite: bool, verify: bool) -> bool:
    """Whether the store at ``path`` is reused as it is; else it is rebuilt (``asked`` gains its settings).

    Raises
    ------
    StoreError
        Without ``overwrite``, what a rebuild would need: another dataset is
        there, or this one in other chunks, dtype or compression, or damaged.
        On object storage a store is never replaced (no rename there).
    """
    existing = _read_attrs(path)
    if not existing.get("complete"):
        if is_url(path):
            raise StoreError(incomplete_store(path, existing))
        return False  # a local store from a dimbsvm that wrote in place: replaced, it is dimbsvm's own
    if existing.get("fingerprint") != meta["fingerprint"]:
        if not overwrite:
            hint = ("object storage stores are never replaced: ingest to a new URL" if is_url(path)
                    else "pass overwrite=True (CLI: --overwrite) to replace it")
            raise StoreError(f"store {path} already holds another dataset ({existing.get('name')!r}); {hint}")
        return False
    if _reusable(path, existing, asked["chunk_rows"], overwrite, checksums=verify, dtype=asked["dtype"],
                 compression=asked["compression"]):
        logger.info("store %s already holds this source (fingerprint %s); reusing it", path, meta["fingerprint"][:12])
        return True
    if asked["chunk_rows"] is None and existing.get("chunk_rows"):
        asked["chunk_rows"] = int(existing["chunk_rows"])  # a rebuild keeps the store's chunking
    if asked["dtype"] is None and existing.get("dtype") in DTYPES:
        asked["dtype"] = existing["dtype"]  # and its dtype
    if asked["compression"] is None:
        asked["compression"] = existing.get("compression", "zstd")  # and its compression
    return False


def _write_any_store(path, X, y, meta: dict, **settings) -> None:
    """:func:`_write_sparse_store` for a sparse source, else :func:`_write_store`."""
    (_write_sparse_store if is_sparse(meta) else _write_store)(path, X, y, meta, **settings)


#: Values a row of a sparse source whose count is not known before it is read (a lazy array) is taken to hold,
#: to size its chunks.
SPARSE_ROW_VALUES = 64


def _write_sparse_store(path, X, y, meta: dict, *, chunk_rows, dtype, compression, mode="w", ids=None,
                        progress=False) -> None:
    """Write a complete sparse store at a fresh ``path`` (:mod:`dimbsvm.store.sparse`), one task per chunk."""
    if ids is not None:  # (no sparse source has an id column today: refused rather than dropped)
        raise StoreError("a sparse store keeps no ids; ingest the rows without an id column")
    n_rows, n_features = int(X.shape[0]), int(X.shape[1])
    store_dtype = np.dtype(dtype or _default_dtype(X))
    if chunk_rows is None:  # the stored bytes of an average row: its values, their columns, where it starts
        per_row_values = SPARSE_ROW_VALUES if meta.get("nnz") is None else meta["nnz"] / max(n_rows, 1)
        per_row = per_row_values * (store_dtype.itemsize + index_dtype(n_features).itemsize) + 8
        chunk_rows = default_chunk_rows(n_rows, max(1, int(np.ceil(per_row))))
    chunk_rows, compression = int(chunk_rows), compression or "zstd"
    count_classes = meta.pop("count_classes", False)
    group, y_arr = _begin_store(path, meta, y, mode=mode, chunk_rows=chunk_rows, dtype=store_dtype,
                                compression=compression, sparse=SPARSE_FORMAT)
    group.create_group("X")
    lengths = chunk_lengths(n_rows, chunk_rows)
    if is_dask_array(X):
        blocks = X.rechunk((lengths, n_features)).to_delayed().ravel().tolist()
    else:
        X = X.tocsr()
        blocks = [X[start:start + rows] for start, rows in zip(np.cumsum((0, *lengths[:-1])), lengths)]
    write = dask.delayed(write_csr_chunk, pure=False)
    writes = [write(path, chunk, block, dtype=store_dtype, compression=compression)
              for chunk, block in enumerate(blocks)]
    y_dask = da.asarray(y).astype(np.int32).rechunk((lengths,))
    stored_y = da.store(y_dask, y_arr, lock=False, compute=False)
    # One graph: a lazy source's blocks are parsed once for their rows and their labels.
    counted = [da.bincount(y_dask.astype(np.int64))] if count_classes else []
    with ChunkProgress(path, len(lengths), sparse=True, enabled=progress):
        chunks, _, *counts = dask.compute(writes, stored_y, *counted)
    meta.update(nnz=int(sum(c["nnz"] for c in chunks)), chunk_nnz=[c["nnz"] for c in chunks])
    _complete_store(group, meta, n_rows, np.sum([c["nonfinite"] for c in chunks] or [[0, 0]], axis=0),
                    counts[0] if count_classes else None)


def _write_store(path, X, y, meta: dict, *, chunk_rows, dtype, compression, mode="w", ids=None,
                 progress=False) -> None:
    """Write a complete store at a fresh ``path``; ``meta`` gains the chunking, dtype and completion marker.

    ``mode="r+"`` writes into a group already created (a claimed URL), ``"w"`` creates it. ``ids`` (a
    table's id column) is written beside the rows as the array ``ids``.
    """
    n_rows = int(X.shape[0])
    store_dtype = np.dtype(dtype or _default_dtype(X))
    if chunk_rows is None:
        row_bytes = store_dtype.itemsize * int(np.prod(X.shape[1:], dtype=np.int64))
        chunk_rows = default_chunk_rows(n_rows, row_bytes)
    chunk_rows = int(chunk_rows)

    compression = compression or "zstd"
    count_classes = meta.pop("count_classes", False)
    group, y_arr = _begin_store(path, meta, y, mode=mode, chunk_rows=chunk_rows, dtype=store_dtype,
                                compression=compression)
    x_arr = create_checksummed_array(group, "X", shape=X.shape, dtype=store_dtype.name,
                                     chunks=(chunk_rows, *X.shape[1:]), compression=compression)

    X_dask = da.asarray(X).astype(store_dtype)
    write_rows = _write_blocks(X_dask.chunks[0], chunk_rows,
                               store_dtype.itemsize * int(np.prod(X.shape[1:], dtype=np.int64)))
    X_dask = X_dask.rechunk((write_rows, *X.shape[1:]))
    y_dask = da.asarray(y).astype(np.int32).rechunk((write_rows,))
    sources, targets = [X_dask, y_dask], [x_arr, y_arr]
    if ids is not None:
        from .sources.ids import create_ids_array

        ids_dask, ids_arr = create_ids_array(group, ids, chunk_rows=chunk_rows, compression=compression,
                                             write_rows=write_rows)
        sources.append(ids_dask)
        targets.append(ids_arr)
    writes = da.store(sources, targets, lock=False, compute=False)  # one pass over the source
    # Rows holding NaN or +-inf, counted on each written block as it is in memory (the same keys as the writes,
    # unoptimised, so no block is computed twice) and recorded with the completion marker, so that a job's check
    # reads the record instead of every chunk (dimbsvm.store.finite).
    nonfinite = X_dask.map_blocks(_block_nonfinite, dtype=np.int64, chunks=((1,) * X_dask.numblocks[0], (2,)),
                                  drop_axis=list(range(2, X_dask.ndim))).sum(axis=0)
    # Class counts computed together with the writes, so a lazy source is read only once.
    counted = [da.bincount(y_dask.astype(np.int64))] if count_classes else []
    with ChunkProgress(path, -(-n_rows // chunk_rows), sparse=False, enabled=progress):
        _, nonfinite, *counts = dask.compute(writes, nonfinite, *counted)
    _complete_store(group, meta, n_rows, nonfinite, counts[0] if count_classes else None)


def _begin_store(path, meta: dict, y, *, mode, chunk_rows: int, dtype, compression: str, **marks):
    """The store's group with ``meta`` written first, marked incomplete, and its (empty) labels array.

    ``meta`` gains the format, chunking, dtype, compression and ``marks``.
    """
    group = open_group(path, mode=mode)
    meta.update(store_format=STORE_FORMAT, complete=False, chunk_rows=chunk_rows, dtype=np.dtype(dtype).name,
                compression=compression, **marks)
    group.attrs[_ATTR] = meta  # written first: marks the store as incomplete
    y_arr = create_checksummed_array(group, "y", shape=y.shape, dtype="int32", chunks=(chunk_rows,),
                                     compression=compression)
    return group, y_arr


def _complete_store(group, meta: dict, n_rows: int, nonfinite, class_counts=None) -> None:
    """Record the rows' NaN/inf counts (and the class counts, where counted) and write the completion marker."""
    if class_counts is not None:
        meta["class_counts"] = {str(k): int(c) for k, c in enumerate(class_counts) if c}
    meta[NONFINITE_KEY] = {"rows": n_rows, "nan": int(nonfinite[0]), "inf": int(nonfinite[1])}
    meta["complete"] = True
    group.attrs[_ATTR] = meta  # the completion marker, written last (with the record of the chunks it describes)


def _block_nonfinite(block) -> np.ndarray:
    """:func:`~dimbsvm.store.finite.nonfinite_rows` of one block, as a ``(1, 2)`` block of a Dask array."""
    return nonfinite_rows(block)[None, :]


def _write_blocks(source_rows, chunk_rows: int, row_bytes: int) -> tuple[int, ...]:
    """Rows of each write task: whole chunks, cut where the source's blocks are.

    Every block starts and ends on a chunk boundary (or the end), so no chunk
    is written by two tasks. A block lies inside one source block wherever it
    can: only the chunks that straddle two source blocks gather rows from
    both (from two workers, perhaps). Blocks hold up to
    :data:`MAX_CHUNK_BYTES` of chunks: several small chunks per task, since a
    task per chunk costs more in Dask's rechunking than writing it does.

    Examples
    --------
    >>> _write_blocks((10, 10), 4, 8)  # chunks 0-4, 4-8 inside the first block; 8-12 straddles
    (8, 4, 8)
    >>> _write_blocks((100,), 10, 2**20)  # 10 MiB chunks: 3 per block
    (30, 30, 30, 10)
    """
    n_rows = int(sum(source_rows))
    per_block = chunk_rows * max(1, MAX_CHUNK_BYTES // max(1, chunk_rows * row_bytes))
    edges, start = {0, n_rows}, 0
    for length in source_rows:
        edges.add(min(n_rows, -(-start // chunk_rows) * chunk_rows))  # the first chunk boundary in the block
        edges.add((start + int(length)) // chunk_rows * chunk_rows)  # the last
        start += int(length)
    edges = sorted(edges)
    sizes = []
    for low, high in zip(edges, edges[1:]):
        sizes.extend(min(per_block, high - at) for at in range(low, high, per_block))
    return tuple(sizes) or (0,)


def _reusable(path: Path, existing: dict, chunk_rows, overwrite: bool, *, checksums: bool, dtype=None,
              compression=None) -> bool:
    """Whether a complete store of the same source can be reused as it is.

    False (rebuild) under ``overwrite`` when it is of an older format, damaged,
    chunked otherwise or of another dtype or compression than asked for;
    without ``overwrite`` the latter four are refused.
    """
    if existing.get("store_format", 1) < STORE_FORMAT:
        logger.info("store %s was written by an older dimbsvm (format %s); rebuilding it",
                    path, existing.get("store_format", 1))
        return False
    problems = []
    if chunk_rows is not None and int(chunk_rows) != int(existing.get("chunk_rows", -1)):
        problems.append(f"it is chunked in {existing.get('chunk_rows')} rows, not the {int(chunk_rows)} asked for")
    stored_dtype = existing.get("dtype") or _array_dtype(path)
    if dtype is not None and stored_dtype != dtype:
        problems.append(f"it holds {stored_dtype} features, not the {dtype} asked for")
    stored_compression = existing.get("compression", "zstd")  # (stores from before the option: zstd)
    if compression is not None and stored_compression != compression:
        problems.append(f"it is compressed with {stored_compression}, not the {compression} asked for")
    damage = find_damage(path, checksums=checksums)
    if damage:
        problems.append(f"it is damaged: {damage}")
    if not problems:
        return True
    if not overwrite:
        remedy = ("a store at a URL is never replaced: ingest to a new URL" if is_url(path)
                  else "pass overwrite=True (CLI: --overwrite) to rebuild it")
        raise StoreError(f"store {path} holds this source, but " + "; ".join(problems) + "; " + remedy)
    logger.info("rebuilding store %s: %s", path, "; ".join(problems))
    return False


def _dtype_name(value) -> str:
    try:
        return np.dtype(value).name
    except TypeError:
        return str(value)


def _default_dtype(X) -> np.dtype:
    """float64, or the float dtype an array already has (a float32 array stays float32)."""
    dtype = np.dtype(getattr(X, "dtype", np.float64))
    return dtype if dtype in (np.dtype(np.float32), np.dtype(np.float64)) else np.dtype(np.float64)


def _array_dtype(path: Path) -> str | None:
    try:
        return str(open_group(path, mode="r")["X"].dtype)
    except Exception:  # noqa: BLE001 - a damaged store: found by find_damage
        return None


def _resolve_source(source, *, presume_numbers=False, n_features=None, dtype=None):
    """``(X, y, ids, meta)`` (meta with a fingerprint) for any accepted source; ``ids`` is None but for tables.

    ``presume_numbers``: see :func:`dimbsvm.store.sources.resolve_tabular_source`; ``n_features`` and
    ``dtype``: see :func:`dimbsvm.store.sources.svmlight.resolve_svmlight_source`.
    """
    from .sources import is_tabular_source, resolve_tabular_source  # (dask.dataframe only when ingesting)
    from .sources.svmlight import looks_svmlight, resolve_svmlight_source

    if n_features is not None and not looks_svmlight(source):
        raise StoreError("n_features applies to svmlight sources (.svm, .svmlight, .libsvm) only")
    if looks_svmlight(source):  # parsed block by block on the workers, kept sparse
        return resolve_svmlight_source(source, n_features=n_features, dtype=dtype or np.float64)
    if is_tabular_source(source):  # Parquet, CSV, URLs, DataFrames: read by the workers, partition by partition
        return resolve_tabular_source(source, presume_numbers=presume_numbers)
    if isinstance(source, (str, Path)):
        dataset = load(source)
        _check_arrays(dataset.X, dataset.y, dataset.source)
        meta = _sparse_meta(dataset.meta(), dataset.X)
        meta["fingerprint"] = dataset_fingerprint(dataset)
        return dataset.X, dataset.y, None, meta
    if isinstance(source, Dataset):
        _check_arrays(source.X, source.y, source.source or source.name)
        meta = _sparse_meta(source.meta(), source.X)
        meta["fingerprint"] = array_fingerprint(source.X, source.y)
        return source.X, source.y, None, meta
    if isinstance(source, tuple) and len(source) == 2:
        X, y = source
        if not hasattr(X, "shape") or not hasattr(y, "shape"):
            X, y = np.asarray(X), np.asarray(y)
        _check_arrays(X, y, "arrays")
        n_features = X.shape[1] if X.ndim > 1 else 1
        meta = {
            "name": "arrays", "source": "arrays", "n_samples": int(X.shape[0]),
            "shape": list(X.shape), "feature_names": [f"x{i}" for i in range(n_features)],
            "named_columns": False, "nominal_columns": [], "class_map": {}, "fingerprint": array_fingerprint(X, y),
        }
        if isinstance(X, da.Array) or isinstance(y, da.Array):
            meta["count_classes"] = True  # counted while streaming, never materialised
        else:
            labels, counts = np.unique(np.asarray(y), return_counts=True)
            meta["class_counts"] = {str(int(k)): int(c) for k, c in zip(labels, counts)}
        return X, y, None, _sparse_meta(meta, X)
    raise StoreError(f"cannot ingest a {type(source).__name__}: pass a path, a Dataset or (X, y)")


def _sparse_meta(meta: dict, X) -> dict:
    """``meta`` of a sparse ``X`` (scipy.sparse, or a Dask array of its chunks) marked sparse; else as it is.

    Made-up names (``x0, ...``) are left out: 10^6 of them would be megabytes in every meta read.
    """
    if not sp.issparse(getattr(X, "_meta", X)):
        return meta
    if not meta.get("named_columns", True):
        meta["feature_names"] = []
    meta.update(sparse=SPARSE_FORMAT, nnz=None if is_dask_array(X) else int(X.nnz))
    return meta


def _check_arrays(X, y, where):
    if X.ndim < 2:
        raise StoreError(f"{where}: X must be 2-D (or 3-D for time series), got shape {X.shape}")
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise StoreError(f"{where}: y must be 1-D with one label per row of X "
                         f"(X has {X.shape[0]} rows, y has shape {y.shape})")
    if not np.issubdtype(np.dtype(y.dtype), np.integer):
        raise StoreError(f"{where}: y must hold integer labels, got dtype {y.dtype}; "
                         "map class names to integers first (the readers do)")
