"""A tabular source as lazy arrays and a store's meta: the public face of :mod:`dimbsvm.store.sources`."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd

from ...exceptions import DataError, DimbsvmError
from ..fingerprints import fingerprint_file
from ._columns import choose_roles, column_kinds, id_kind
from ._decide import Decision, decide
from ._encode import encode_partition
from ._frames import Opened, open_frame
from ._locate import looks_tabular
from ._scan import ColumnScan, ScanPlan, merge_scans, scan_partition

__all__ = ["DEFAULT_MAX_CATEGORIES", "TabularSource", "is_tabular_source", "resolve_tabular_source", "with_columns"]

logger = logging.getLogger("dimbsvm.store")

#: Distinct values a nominal column may have before it is refused (one feature per value).
DEFAULT_MAX_CATEGORIES = 100
#: Scan summaries merged per task of the tree reduction.
_MERGE_EVERY = 8


@dataclass(frozen=True)
class TabularSource:
    """A Parquet or CSV path or URL, or a DataFrame, with how to read its columns.

    What :func:`dimbsvm.store.ingest` is given when columns are chosen
    (``dimbsvm ingest --target ...`` builds one); the attributes are the
    keyword arguments of :func:`resolve_tabular_source`.

    Examples
    --------
    >>> TabularSource("s3://bucket/rows/", target="churned", drop=["email"]).drop
    ('email',)
    """

    source: object
    target: str | None = None
    id: str | None = None
    drop: tuple = ()
    nominal: tuple = ()
    max_categories: int = DEFAULT_MAX_CATEGORIES
    blocksize: int | str | None = None
    storage_options: dict | None = field(default=None, hash=False)

    def __post_init__(self):
        for name in ("drop", "nominal"):
            value = getattr(self, name)
            object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value or ()))

    def resolve(self, *, presume_numbers=False):
        """``(X, y, ids, meta)``: see :func:`resolve_tabular_source`."""
        return resolve_tabular_source(self.source, target=self.target, id=self.id, drop=self.drop,
                                      nominal=self.nominal, max_categories=self.max_categories,
                                      blocksize=self.blocksize, storage_options=self.storage_options,
                                      presume_numbers=presume_numbers)


def with_columns(source, *, target=None, id=None, drop=None, nominal=None, max_categories=None):
    """``source`` with the columns chosen, or ``source`` itself when nothing is chosen.

    What ``ingest(source, path, target=..., ...)`` and ``dimbsvm ingest
    --target ...`` hand on.

    Raises
    ------
    DataError
        Columns are chosen for a source that is not tabular (a KEEL ``.dat``
        file or an ``.npz`` archive has its label where its format says).

    Examples
    --------
    >>> with_columns("yeast5")
    'yeast5'
    >>> with_columns("rows.parquet", target="y").target
    'y'
    """
    chosen = {key: value for key, value in (("target", target), ("id", id), ("drop", drop), ("nominal", nominal),
                                            ("max_categories", max_categories)) if value is not None}
    if not chosen:
        return source
    if isinstance(source, TabularSource):
        return replace(source, **chosen)
    if not is_tabular_source(source):
        raise DataError(f"{source}: choosing columns ({', '.join(chosen)}) applies to Parquet and CSV sources "
                        "(files, directories, globs, URLs) and DataFrames; this source's format says which "
                        "column is the label")
    return TabularSource(source, **chosen)


def is_tabular_source(source) -> bool:
    """Whether ``source`` is read by this package rather than by :func:`dimbsvm.datasets.load`.

    True for a :class:`TabularSource`, a pandas or Dask DataFrame, any URL,
    a glob, a ``.parquet``/``.pq`` file, a ``.csv`` file (plain or
    compressed) and a local directory of Parquet files.

    Examples
    --------
    >>> is_tabular_source("rows/*.parquet"), is_tabular_source("yeast5"), is_tabular_source("a.dat")
    (True, False, False)
    """
    if isinstance(source, (TabularSource, pd.DataFrame, dd.DataFrame)):
        return True
    return isinstance(source, (str, Path)) and looks_tabular(source)


def resolve_tabular_source(source, *, target=None, id=None, drop=None, nominal=None,
                           max_categories=DEFAULT_MAX_CATEGORIES, blocksize=None, storage_options=None,
                           presume_numbers=False):
    """Read a tabular source lazily: one pass for what the encoding needs, then lazy arrays.

    The pass runs on the workers (or Dask's local threads), partition by
    partition, and sends the client one small summary: partition lengths,
    class counts, each nominal column's categories, and whether each text
    column holds numbers, words or both. Nothing the client holds grows with
    the rows. The arrays returned read the source again, on the workers,
    when they are computed (by ``ingest`` as it writes the store).

    Columns: the label is ``target``, or else the one column named
    ``class``, ``label`` or ``target`` (any case; ``meta["target_guessed"]``
    then says so); ``id`` is kept beside the rows, never a feature; ``drop``
    is left out; the rest are features. A numeric column is read as floats
    (NaN where missing); a column of text holding only numbers is numeric
    (as the CSV reader decides; declare it ``nominal`` to one-hot encode
    it), one holding no number, a categorical column, and any column named
    in ``nominal`` are one-hot encoded over their sorted categories
    (``"colour=red"``; a missing cell is all zeros). Text cells are
    stripped; an empty cell, ``?`` and ``<null>`` are missing. Labels
    become integers by the one label rule (binary: the minority is 1),
    applied to the class counts of the pass.

    Parameters
    ----------
    source : str, path, pandas.DataFrame, dask.dataframe.DataFrame or TabularSource
        A Parquet file, directory or glob; a CSV file (``.csv``, ``.csv.gz``,
        ``.csv.bz2``, ``.csv.xz``, ``.csv.zst``), directory or glob; local or
        an fsspec URL (``s3://``, ``gs://``, ``az://``, ``file://``,
        ``http(s)://``). Reading ``s3://`` needs ``pip install "dimbsvm[s3]"``
        (``[gcs]``, ``[azure]`` likewise).
    target : str, default=None
        The label column.
    id : str, default=None
        A column of row identifiers (integers, or anything else as text),
        returned as ``ids``.
    drop : str or sequence of str, default=None
        Columns left out.
    nominal : str or sequence of str, default=None
        Columns one-hot encoded whatever their values.
    max_categories : int, default=100
        A nominal column with more distinct values is refused, before any
        encoding (an identifier or free text would make a feature per row).
    blocksize : int or str, default=None
        Bytes per partition (see :func:`~dimbsvm.store.sources._frames.open_frame`).
    storage_options : dict, default=None
        For a URL's fsspec filesystem (credentials, ``endpoint_url``); by
        default the filesystem's own configuration (e.g. ``AWS_*`` variables).
    presume_numbers : bool, default=False
        A CSV's columns whose first rows hold numbers can only be numeric, or
        an error: with True the pass does not read them (it is about three
        times cheaper), and a cell in them that is not a number is found when
        the arrays are computed, raising :class:`UnscannedCellError` (a
        ``DataError`` naming that cell). ``ingest`` does this, and on that
        error resolves again with False, for the refusal that counts every
        such cell.

    Returns
    -------
    X : dask.array.Array of shape (n_samples, n_features), float64 or float32
        Chunked by partition, chunk lengths known. float32 where the
        source's number columns are float32 (the rest exact in float32: bool,
        8- and 16-bit integers) and no text column holds numbers, so that
        ``ingest`` stores float32 data as float32, as it stores a float32
        array; float64 otherwise.
    y : dask.array.Array of shape (n_samples,), int32
    ids : dask.array.Array of shape (n_samples,) or None
        int64 for an integer id column, else object (str).
    meta : dict
        ``name, source, n_samples, shape, feature_names, nominal_columns,
        class_map, class_counts, fingerprint`` (as
        :meth:`dimbsvm.datasets.Dataset.meta` has them) and ``format,
        partitions, target, target_guessed, categories, dropped`` and, with
        an id, ``id_column, id_dtype``.

    Raises
    ------
    DataError
        One line: unknown columns (listing the columns there are), no label
        column, a numeric column with stray words (naming the cells), a
        nominal column past ``max_categories``, a missing label or id, an
        unreadable file, a URL whose filesystem package is not installed.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"uid": [7, 8, 9], "size": [1.5, 2.0, 0.5], "colour": ["red", "blue", "red"],
    ...                    "class": ["a", "b", "b"]})
    >>> X, y, ids, meta = resolve_tabular_source(df, id="uid")
    >>> meta["feature_names"], meta["class_map"], meta["target_guessed"]
    (['size', 'colour=blue', 'colour=red'], {'b': 0, 'a': 1}, True)
    >>> X.compute().tolist(), y.compute().tolist(), ids.compute().tolist()
    ([[1.5, 0.0, 1.0], [2.0, 1.0, 0.0], [0.5, 0.0, 1.0]], [1, 0, 0], [7, 8, 9])
    """
    if isinstance(source, TabularSource):
        return source.resolve(presume_numbers=presume_numbers)
    max_categories = _check_max_categories(max_categories)
    opened = open_frame(source, blocksize=blocksize, storage_options=storage_options)
    frame = opened.frame
    roles = choose_roles(list(frame.columns), target=target, id=id, drop=drop, nominal=nominal,
                         source=opened.description)
    kinds = column_kinds(frame.dtypes, roles, source=opened.description)
    id_dtype = id_kind(frame.dtypes[roles.id]) if roles.id is not None else None
    skip_blank = opened.format == "csv"
    plan = ScanPlan(kinds=kinds, target=roles.target, id=roles.id, max_categories=max_categories,
                    skip_blank_rows=skip_blank)
    # A local file's SHA-256 reads all of it: on the workers, one task per file, beside the scan.
    digests = ([dask.delayed(fingerprint_file, pure=False)(p) for p in opened.location.paths]
               if opened.location is not None and opened.location.local else [])
    likely = _likely_numbers(opened, kinds)
    unread = likely if presume_numbers else []
    parts = opened.partitions(roles.read) if opened.csv is None else None
    scan, digests = _scan(_scan_parts(opened, parts, roles, kinds, likely, unread, plan), plan,
                          opened.description, digests)
    if any(scan.columns.get(column, ColumnScan()).words for column in unread):
        # A block scanned whole held a word in a presumed column: an error, whose message counts every such cell
        unread = []
        scan, _ = _scan(_scan_parts(opened, parts, roles, kinds, likely, unread, plan), plan, opened.description)
    decision = decide(scan, roles, kinds, source=opened.description, max_categories=max_categories,
                      id_dtype=id_dtype, skip_blank_rows=skip_blank, float32_source=_float32_source(frame, kinds),
                      unread=unread)
    if opened.csv is not None:  # the columns found to hold numbers are parsed as numbers where they are read
        parts = opened.partitions(roles.read, numbers=decision.plan.text_numbers)
    X, y, ids = _lazy_arrays(parts, decision)
    meta = _meta(opened, roles, decision, _fingerprint(opened, roles, id_dtype, digests))
    if roles.target_guessed:
        logger.info("%s: label column %r found by its name; pass target= (--target) to choose another",
                    opened.description, roles.target)
    return X, y, ids, meta


def _check_max_categories(value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise DataError(f"max_categories must be an integer >= 1, got {value!r}")
    return int(value)


#: Number dtypes whose every value a float32 holds exactly.
_EXACT_IN_FLOAT32 = tuple(np.dtype(t) for t in ("float32", "float16", "bool", "int8", "uint8", "int16", "uint16"))


def _float32_source(frame, kinds: dict) -> bool:
    """Whether the number columns hold float32 values: some float32 (or float16) columns, the rest exact in it."""
    dtypes = [np.dtype(getattr(frame.dtypes[c], "numpy_dtype", frame.dtypes[c]))
              for c, kind in kinds.items() if kind == "number"]
    return (any(d in (np.dtype("float32"), np.dtype("float16")) for d in dtypes)
            and all(d in _EXACT_IN_FLOAT32 for d in dtypes))


def _likely_numbers(opened: Opened, kinds: dict) -> list[str]:
    """The text columns of a CSV whose first rows hold numbers: the scan parses them as numbers where it can."""
    guess = opened.csv.numbers_guess if opened.csv is not None else ()
    return [column for column, kind in kinds.items() if kind == "text" and column in guess]


def _scan(level, plan: ScanPlan, description: str, also=None):
    """Merge the partitions' summaries in a tree; one small object reaches the client.

    ``also``: delayed values computed in the same pass, returned beside the scan.
    """
    while len(level) > 1:
        level = [dask.delayed(merge_scans, pure=True)(*level[i:i + _MERGE_EVERY],
                                                      max_categories=plan.max_categories)
                 for i in range(0, len(level), _MERGE_EVERY)]
    try:
        scan, also = dask.compute(level[0], also)
    except DimbsvmError:
        raise
    except (ValueError, OSError) as exc:  # a malformed CSV row, an unreadable file, an object store's refusal
        raise DataError(f"{description}: cannot read it: {' '.join(str(exc).split())}") from exc
    return scan, also


def _scan_parts(opened: Opened, parts, roles, kinds: dict, likely, unread, plan: ScanPlan) -> list:
    """Delayed :class:`~._scan.Scan` summaries, one per partition, each reading only the columns it looks at
    where that is cheaper.

    Numeric columns need no scan, and Parquet reads a column without the
    others. A CSV block (``parts`` is None) is parsed by
    :func:`~._csv_blocks.scan_block`: ``likely`` columns as numbers where
    they hold only numbers, ``unread`` ones not at all (unless a row is blank
    in the others: a blank row is blank in every column). The encoding checks
    every partition's length against the scan's count.
    """
    scan = dask.delayed(scan_partition, pure=True)
    if opened.csv is not None:
        if not unread:
            return [scan(part, plan, k) for k, part in enumerate(opened.partitions(roles.read, numbers=likely))]
        return opened.csv.scans(roles.read, plan, unread=unread)
    looked_at = [c for c in roles.read if kinds.get(c, "number") != "number" or c in (roles.target, roles.id)]
    if opened.format == "parquet" and len(looked_at) < len(roles.read):
        narrow = opened.partitions(looked_at)
        parts = narrow if len(narrow) == len(parts) else parts
    return [scan(part, plan, k) for k, part in enumerate(parts)]


def _lazy_arrays(parts, decision: Decision):
    """X, y and ids as Dask arrays of known chunk lengths, one chunk per non-empty partition."""
    plan = dask.delayed(decision.plan, pure=True)  # one copy in the graph, not one per task
    n_features = decision.plan.n_features
    xs, ys, id_chunks = [], [], []
    first_row = 1
    id_dtype = np.int64 if decision.plan.id_dtype == "int64" else object
    x_dtype = np.dtype(decision.plan.dtype)
    for part, n_rows in zip(parts, decision.lengths):
        if n_rows:
            encoded = dask.delayed(encode_partition, pure=True, nout=3)(part, plan, first_row, n_rows)
            xs.append(da.from_delayed(encoded[0], shape=(n_rows, n_features), dtype=x_dtype))
            ys.append(da.from_delayed(encoded[1], shape=(n_rows,), dtype=np.int32))
            id_chunks.append(da.from_delayed(encoded[2], shape=(n_rows,), dtype=id_dtype))
        first_row += n_rows
    X, y = da.concatenate(xs, axis=0), da.concatenate(ys)
    ids = da.concatenate(id_chunks) if decision.plan.id is not None else None
    return X, y, ids


def _meta(opened: Opened, roles, decision: Decision, fingerprint: str) -> dict:
    n_rows = int(sum(decision.lengths))
    meta = {
        "name": opened.name, "source": opened.description, "n_samples": n_rows,
        "shape": [n_rows, decision.plan.n_features], "feature_names": list(decision.feature_names),
        "nominal_columns": list(decision.nominal_columns), "class_map": dict(decision.class_map),
        "class_counts": dict(decision.class_counts), "fingerprint": fingerprint,
        "format": opened.format, "partitions": len(decision.lengths), "target": roles.target,
        "target_guessed": roles.target_guessed, "categories": dict(decision.categories), "dropped": list(roles.drop),
    }
    if roles.id is not None:
        meta.update(id_column=roles.id, id_dtype=decision.plan.id_dtype)
    return meta


def _fingerprint(opened: Opened, roles, id_dtype, file_digests) -> str:
    """The source's identity and every choice that changes what is stored.

    A local file read with the defaults keeps the bare fingerprint of its
    bytes, the one stores written by the in-memory readers carry.
    """
    if opened.location is not None:
        content = opened.location.fingerprint(file_digests)
    else:  # Dask's deterministic token: of the data of a pandas DataFrame, of the graph of a Dask one
        content = "dask-" + dask.base.tokenize(opened.frame)
    if opened.location is not None and opened.location.local and len(opened.location.paths) == 1 \
            and roles.is_default():
        return content
    choices = {"content": content, "target": roles.target, "id": roles.id, "id_dtype": id_dtype,
               "drop": sorted(roles.drop), "nominal": sorted(roles.nominal)}
    return hashlib.sha256(json.dumps(choices, sort_keys=True).encode()).hexdigest()

