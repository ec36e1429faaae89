"""svmlight / LIBSVM files read by the workers: cut at line ends, parsed block by block, kept sparse.

A source is a local path or an fsspec URL naming one file or a glob of
files (``.svm``, ``.svmlight``, ``.libsvm``, each optionally ``.gz``,
``.bz2`` or ``.xz``; a compressed file is one block). As for CSV, two passes
over the bytes run on the workers (or Dask's local threads):

1. a scan: each block's rows, stored values, smallest and largest column
   index and label counts, a summary whose size does not grow with rows;
2. the blocks parsed again, into CSR matrices of the columns the scan
   settled and labels coded by the class map it settled, and written chunk
   by chunk (:mod:`dimbsvm.store.sparse`).

Each block is parsed by scikit-learn's :func:`~sklearn.datasets.load_svmlight_file`
(comments, ``qid`` and blank lines as it reads them). Indices follow its
``zero_based="auto"`` over the *whole* source: one-based unless some index
anywhere is 0 (a per-block guess would let two blocks disagree). The feature
count is the largest index's, or the one given (``n_features``); a file
with a larger index is refused with one line, never cut or reshaped.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp

from ...datasets._labels import label_key
from ...exceptions import DataError, one_line
from ..location import filesystem
from ._decide import class_map_from_counts
from ._locate import Location, _has_magic, _protocols
from ._scan import MAX_LABELS

__all__ = ["SVMLIGHT_SUFFIXES", "BlockScan", "looks_svmlight", "parse_block", "resolve_svmlight_source",
           "scan_block"]

SVMLIGHT_SUFFIXES = (".svm", ".svmlight", ".libsvm")
_COMPRESSED = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz"}
#: Bytes per block: a block's parse holds its CSR (~12 bytes a value) and scikit-learn's buffers.
DEFAULT_BLOCKSIZE = 64 * 2**20


def looks_svmlight(source) -> bool:
    """Whether a path, URL or glob names svmlight files (by suffix).

    Examples
    --------
    >>> looks_svmlight("train.svm"), looks_svmlight("s3://b/part-*.libsvm.gz"), looks_svmlight("train.csv")
    (True, True, False)
    """
    return isinstance(source, (str, Path)) and _compression_of(str(source)) is not False


def _compression_of(path: str):
    """fsspec's compression name of an svmlight file (None: plain), or False when not an svmlight name."""
    name = PurePosixPath(path.split("://", 1)[-1]).name.lower()
    for suffix, compression in (("", None), *_COMPRESSED.items()):
        if name.endswith(tuple(s + suffix for s in SVMLIGHT_SUFFIXES)):
            return compression
    return False


@dataclass(frozen=True)
class BlockScan:
    """What the scan of one block found (a summary, not its rows).

    Attributes
    ----------
    rows, nnz : int
        Rows and stored values.
    min_index, max_index : int
        The smallest and largest column index as written (-1 when the block stores no value).
    labels : dict
        Label key -> rows; at most :data:`~dimbsvm.store.sources._scan.MAX_LABELS` + 1 keys.
    """

    rows: int
    nnz: int
    min_index: int
    max_index: int
    labels: dict


def _parse(data: bytes, n_features=None):
    """scikit-learn's parse of a block with the indices as written (no shift)."""
    from sklearn.datasets import load_svmlight_file

    if not data.strip():
        return sp.csr_matrix((0, int(n_features or 0))), np.empty(0)
    return load_svmlight_file(io.BytesIO(data), n_features=n_features, zero_based=True)


def scan_block(data: bytes, where: str) -> BlockScan:
    """The scan of one block's bytes (whole lines); ``where`` names the source in errors."""
    try:
        X, y = _parse(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"{where}: not a readable svmlight file: {one_line(exc)}") from exc
    values, counts = np.unique(y, return_counts=True)
    labels = {}
    for value, count in zip(values.tolist(), counts.tolist()):
        if len(labels) > MAX_LABELS:
            break
        key = label_key(value)
        labels[key] = labels.get(key, 0) + int(count)
    has_values = X.nnz > 0
    return BlockScan(rows=int(X.shape[0]), nnz=int(X.nnz), min_index=int(X.indices.min()) if has_values else -1,
                     max_index=int(X.indices.max()) if has_values else -1, labels=labels)


def parse_block(data: bytes, *, width: int, shift: int, class_map: dict, dtype, where: str):
    """One block's rows as ``(CSR of n_features = width - shift columns, int32 codes)``.

    ``width``: one more than the largest index as written; ``shift``: 1 for
    one-based indices (every index moves down by one), else 0.
    """
    try:
        X, y = _parse(data, n_features=width)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"{where}: not a readable svmlight file: {one_line(exc)}") from exc
    X = sp.csr_matrix(X, dtype=dtype)
    if shift:
        X = sp.csr_matrix((X.data, X.indices - shift, X.indptr), shape=(X.shape[0], width - shift))
    keys = {value: label_key(value) for value in np.unique(y).tolist()}
    codes = np.empty(y.shape[0], dtype=np.int32)
    for value, key in keys.items():
        codes[y == value] = class_map[key]
    return X, codes


def resolve_svmlight_source(source, *, n_features=None, dtype=np.float64, blocksize=None, storage_options=None):
    """Read svmlight files lazily: one scan pass, then ``(X, y, None, meta)`` of Dask arrays.

    Parameters
    ----------
    source : str or path
        A file or a glob, local or at a URL.
    n_features : int, default=None
        The feature count; by default the largest column index's.
    dtype : numpy dtype, default=float64
    blocksize : int, default=None
        Bytes per block (default 64 MiB); compressed files are one block each.
    storage_options : dict, default=None
        Passed to fsspec (credentials, ``endpoint_url``, ...).

    Returns
    -------
    X : dask.array.Array of CSR chunks
    y : dask.array.Array of int32
    ids : None
    meta : dict
        As a dense store's, with ``sparse``, ``nnz``, ``zero_based`` and no feature names.

    Raises
    ------
    DataError
        No file; a line scikit-learn cannot parse; an index beyond ``n_features``; no labels.
    """
    from dask.bytes import read_bytes

    from ...store.fingerprints import fingerprint_file

    location = _locate(source, storage_options)
    compression = _compression_of(location.paths[0])
    # a compressed file cannot be cut: it is one block
    _, blocks = read_bytes(list(location.urls), delimiter=b"\n",
                           blocksize=None if compression else blocksize or DEFAULT_BLOCKSIZE,
                           sample=False, compression=compression, **(storage_options or {}))
    blocks = [(block, url) for url, file_blocks in zip(location.urls, blocks) for block in file_blocks]
    scans = [dask.delayed(scan_block, pure=True)(block, url) for block, url in blocks]
    digests = ([dask.delayed(fingerprint_file, pure=False)(p) for p in location.paths] if location.local else [])
    scans, digests = dask.compute(scans, digests)

    rows = [s.rows for s in scans]
    if not sum(rows):
        raise DataError(f"{location.text}: no rows")
    indexed = [s for s in scans if s.nnz]
    low = min((s.min_index for s in indexed), default=0)
    high = max((s.max_index for s in indexed), default=-1)
    shift = 0 if low == 0 else 1  # scikit-learn's zero_based="auto", over the whole source
    found = high + 1 - shift
    if n_features is None:
        n_features = max(found, 1)
    elif int(n_features) < found:
        raise DataError(f"{location.text}: a row has a value in column {high} (as written, "
                        f"{'zero' if shift == 0 else 'one'}-based), beyond the {int(n_features)} features given")
    n_features = int(n_features)
    counts: dict = {}
    for scan in scans:
        for key, count in scan.labels.items():
            counts[key] = counts.get(key, 0) + count
    if len(counts) > MAX_LABELS:
        raise DataError(f"{location.text}: more than {MAX_LABELS} distinct labels; dimbsvm classifies, so the "
                        "labels must be classes")
    class_map = class_map_from_counts(counts, source=location.text)

    dtype = np.dtype(dtype)
    parse = [dask.delayed(parse_block, pure=True, nout=2)(block, width=n_features + shift, shift=shift,
                                                          class_map=class_map, dtype=dtype, where=url)
             for block, url in blocks]
    empty = sp.csr_matrix((0, n_features), dtype=dtype)
    X = da.concatenate([da.from_delayed(p[0], shape=(r, n_features), dtype=dtype, meta=empty)
                        for p, r in zip(parse, rows)])
    y = da.concatenate([da.from_delayed(p[1], shape=(r,), dtype=np.int32) for p, r in zip(parse, rows)])
    n_rows, nnz = int(sum(rows)), int(sum(s.nnz for s in scans))
    meta = {
        "name": _name(location.text), "source": location.text, "n_samples": n_rows, "shape": [n_rows, n_features],
        "feature_names": [], "named_columns": False, "nominal_columns": [], "class_map": class_map,
        "class_counts": {str(class_map[k]): int(c) for k, c in counts.items()},
        "fingerprint": _fingerprint(location, digests, n_features), "sparse": "csr", "nnz": nnz,
        "zero_based": shift == 0,
    }
    return X, y, None, meta


def _locate(source, storage_options) -> Location:
    text = str(source)
    fs, path = filesystem(text, storage_options)
    try:
        paths = sorted(fs.glob(path)) if _has_magic(path) else ([path] if fs.isfile(path) else [])
    except OSError as exc:
        raise DataError(f"{text}: cannot list it: {one_line(exc)}") from exc
    if not paths:
        raise DataError(f"{text}: file not found" if not _has_magic(path) else f"{text}: no file matches")
    kinds = {_compression_of(p) for p in paths}
    if False in kinds or len(kinds) > 1:
        raise DataError(f"{text}: every file must be svmlight ({', '.join(SVMLIGHT_SUFFIXES)}), compressed alike")
    local = "file" in _protocols(fs)
    urls = tuple(paths) if local else tuple(fs.unstrip_protocol(p) for p in paths)
    return Location(text=text, format="svmlight", compression=kinds.pop(), urls=urls, local=local, fs=fs,
                    paths=tuple(paths))


def _fingerprint(location: Location, digests, n_features: int) -> str:
    """The files' fingerprint; a feature count given beyond the files' own is part of the identity."""
    import hashlib

    files = location.fingerprint(digests)
    return hashlib.sha256(f"svmlight:{files}:{n_features}".encode()).hexdigest()


def _name(text: str) -> str:
    name = PurePosixPath(text.rstrip("/").split("://", 1)[-1]).name
    for suffix in _COMPRESSED:
        name = name.removesuffix(suffix)
    for suffix in SVMLIGHT_SUFFIXES:
        name = name.removesuffix(suffix)
    return name.replace("*", "") or "data"
