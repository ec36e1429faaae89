"""Fingerprints: the identity of the data a store (or a run, or a model) was made from.

A store records its source's fingerprint, so that ingesting the same source
again reuses it, and runs and registries record the fingerprint of the data
they used, so that a resumed run or a scored champion is known to be on the
same numbers.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from .._validation import is_dask_array
from ..datasets import Dataset

__all__ = ["array_fingerprint", "content_fingerprint", "dataset_fingerprint", "fingerprint_file"]


def fingerprint_file(path) -> str:
    """SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def content_fingerprint(meta) -> str:
    """The identity of the numbers a store (or loaded dataset) holds: its source's fingerprint and dtype.

    A store records its source's fingerprint, so that ingesting the same
    source again is recognised; a float32 store of that source holds other
    numbers than a float64 one, and a run or model recorded on one must not
    pass for the other. float64 (and data without a recorded dtype) keeps the
    bare source fingerprint, so runs and registries recorded before the
    dtype was part of it still match.

    Examples
    --------
    >>> content_fingerprint({"fingerprint": "ab12", "dtype": "float64"})
    'ab12'
    >>> content_fingerprint({"fingerprint": "ab12", "dtype": "float32"})
    'ab12:float32'
    """
    fingerprint = meta.get("fingerprint") or ""
    dtype = meta.get("dtype")
    return f"{fingerprint}:{dtype}" if fingerprint and dtype not in (None, "float64") else fingerprint


def dataset_fingerprint(dataset: Dataset) -> str:
    """SHA-256 of the file a dataset was read from, else of its arrays."""
    src = Path(dataset.source)
    return fingerprint_file(src) if src.is_file() else array_fingerprint(dataset.X, dataset.y)


def array_fingerprint(X, y) -> str:
    """Content hash for in-memory arrays (scipy sparse ones by their CSR arrays); Dask's deterministic token for lazy ones."""
    if is_dask_array(X) or is_dask_array(y):
        import dask.base

        return "dask-" + dask.base.tokenize(X, y)
    digest = hashlib.sha256()
    if hasattr(X, "tocsr"):  # scipy.sparse: its canonical CSR arrays (duplicates summed, indices sorted)
        X = X.tocsr(copy=True)
        X.sum_duplicates()
        digest.update(b"csr" + str(X.shape).encode())
        parts = (X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data, y)
    else:
        parts = (X, y)
    for arr in map(np.ascontiguousarray, parts):
        digest.update(str((arr.dtype, arr.shape)).encode())
        digest.update(arr.tobytes())
    return digest.hexdigest()
