"""Feature stages of a store: groups below it, each finished by a marker written last.

A stage is a Zarr group below the store (``knn``, ``similarity/<name>``, ...)
holding the arrays a feature step writes. Its meta records the fingerprint of
its inputs and parameters; it counts as done only after :func:`finish_stage`,
so a crash part-way leaves it visibly incomplete and the next run recomputes
it, and a stage of other data or parameters is never mistaken for this one.

A stage is computed from a Dask array chunked by rows
(:func:`~dimbsvm.store.stage_inputs.row_chunked`),
or from a dimbsvm store, whose ``X`` is one. Each task computes the block of
one chunk and writes the rows it owns, whole Zarr chunks aligned with the Dask
chunks, so no process ever holds an n-row result and a rerun of a task writes
the same bytes. The fingerprint of a store's ``X`` is the store's source
fingerprint; for other Dask arrays it is the array's Dask name, which is
stable for a given graph but not across processes for every source: pass
``fingerprint=`` when a job must find its stage again after a restart.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from ..exceptions import StoreError
from ._zarr import create_checksummed_array, open_group
from .location import join, local_path, read_json

__all__ = ["ATTR", "finish_stage", "open_finished_stage", "open_stage", "read_meta",
           "stage_fingerprint", "stage_is_complete", "write_small"]

#: The group attribute holding dimbsvm's meta (fingerprint, completion marker, ...).
ATTR = "dimbsvm"


def stage_is_complete(store_path, stage: str, fingerprint: str) -> bool:
    """Whether ``stage`` of the store was finished for exactly this fingerprint."""
    meta = read_meta(local_path(store_path, "feature stages") / stage)
    return bool(meta and meta.get("complete") and meta.get("fingerprint") == fingerprint)


def open_stage(store_path, stage: str, fingerprint: str, meta: dict | None = None):
    """Start (or restart) a feature stage: a subgroup marked incomplete.

    Returns
    -------
    group : zarr.Group
        Writable; create its arrays with
        :func:`~dimbsvm.store.create_checksummed_array`.
    """
    group = open_group(local_path(store_path, "feature stages") / stage, mode="w")
    group.attrs[ATTR] = dict(meta or {}, fingerprint=fingerprint, complete=False)
    return group


def finish_stage(group, extra: dict | None = None) -> None:
    """Write a stage's completion marker, last, after all its chunks are written."""
    meta = dict(group.attrs[ATTR])
    meta.update(extra or {}, complete=True)
    group.attrs[ATTR] = meta


def open_finished_stage(store_path, stage: str):
    """``(group, meta)`` of a finished stage, opened read-only (a missing chunk raises).

    Raises
    ------
    StoreError
        The stage does not exist or its completion marker is missing.
    """
    path = local_path(store_path, "feature stages") / stage
    try:
        group = open_group(path, mode="r")
    except (FileNotFoundError, ValueError) as exc:
        raise StoreError(f"{path} is not a stage of a dimbsvm store: {exc}") from exc
    meta = dict(group.attrs.get(ATTR) or {})
    if not meta.get("complete"):
        raise StoreError(f"stage {path} is incomplete (its completion marker is missing); compute it again")
    return group, meta


def read_meta(path: Path):
    """The dimbsvm meta of a group on disk, or None when the path holds no dimbsvm group."""
    try:
        document = read_json(join(path, "zarr.json"))
    except (ValueError, OSError) as exc:
        raise StoreError(f"store {path} is damaged: cannot read its metadata ({exc})") from exc
    if document is None:
        return None
    meta = (document.get("attributes") or {}).get(ATTR) if isinstance(document, dict) else None
    return dict(meta) if meta is not None else None


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
