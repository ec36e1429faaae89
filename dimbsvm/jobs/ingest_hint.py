"""The ``dimbsvm ingest`` line a refusal gives, for data a job reads only through a store."""

from __future__ import annotations

import shlex
from pathlib import Path

__all__ = ["ingest_command"]


def ingest_command(source: str, columns: dict | None = None) -> str:
    """The ``dimbsvm ingest`` line that makes a store of ``source`` with the given column options.

    Examples
    --------
    >>> ingest_command("data/train.parquet", {"target": "label", "drop": ["note"]})
    'dimbsvm ingest data/train.parquet data/train.zarr --target label --drop note'
    """
    columns = columns or {}
    store = str(Path(source.rstrip("/")).with_suffix(".zarr")) if "*" not in source else "STORE.zarr"
    words = ["dimbsvm", "ingest", source, store]
    for key in ("target", "id"):
        if columns.get(key) is not None:
            words += [f"--{key}", str(columns[key])]
    drop = columns.get("drop")
    if drop:
        words += ["--drop", *map(str, [drop] if isinstance(drop, str) else drop)]
    return shlex.join(words)
