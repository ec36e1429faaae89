"""Feature stages of a store: groups below it, each finished by a marker written last.

A stage is a Zarr group below the store (``knn``, ``similarity/<name>``, ...)
holding the arrays a feature step writes. Its meta records the fingerprint of
its inputs and parameters; it counts as done only after :func:`finish_stage`,
so a crash part-way leaves it visibly incomplete and the next run recomputes
it, and a stage of other data or parameters is never mistaken for this one.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..exceptions import StoreError
from ._zarr import open_group

__all__ = ["ATTR", "finish_stage", "open_finished_stage", "open_stage", "read_meta", "stage_is_complete"]

#: The group attribute holding dimbsvm's meta (fingerprint, completion marker, ...).
ATTR = "dimbsvm"


def stage_is_complete(store_path, stage: str, fingerprint: str) -> bool:
    """Whether ``stage`` of the store was finished for exactly this fingerprint."""
    meta = read_meta(Path(store_path) / stage)
    return bool(meta and meta.get("complete") and meta.get("fingerprint") == fingerprint)


def open_stage(store_path, stage: str, fingerprint: str, meta: dict | None = None):
    """Start (or restart) a feature stage: a subgroup marked incomplete.

    Returns
    -------
    group : zarr.Group
        Writable; create its arrays with
        :func:`~dimbsvm.store.create_checksummed_array`.
    """
    group = open_group(Path(store_path) / stage, mode="w")
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
    path = Path(store_path) / stage
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
    path = Path(path)
    if not (path / "zarr.json").exists():
        return None
    try:
        group = open_group(path, mode="r")
    except (ValueError, json.JSONDecodeError, FileNotFoundError) as exc:
        raise StoreError(f"store {path} is damaged: cannot read its metadata ({exc})") from exc
    meta = group.attrs.get(ATTR)
    return dict(meta) if meta is not None else None
