"""Score encoded feature arrays chunk by chunk: a store's rows, or a file the in-memory readers read.

:func:`prediction_features` opens the data to score and puts its columns in
the order of the model's training features: by name for every input that
names its columns (a CSV header, a KEEL ``.dat`` file's attributes, a store's
``feature_names``, an ``.npz`` archive's ``feature_names``), so that a
reordered file gives the same decision values; by position, checked by count
only, for inputs without names (svmlight, an ``.npz`` without
``feature_names``); a missing named column is refused, and so is an extra
one, except in a CSV, whose other columns (its label) are ignored. The
scoring functions below take ``X`` already in the model's column order.
"""

from __future__ import annotations

import csv
import logging
import os
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp

from ..datasets import load, load_csv_features
from ..datasets.tabular import load_npz_features, load_svmlight
from ..exceptions import DataError
from ..model_selection.scoring import positive_scores
from .encoding import column_names
from ..store import create_checksummed_array, finish_stage, open_stage, open_store
from ..store.location import filesystem, is_url
from ..store.sources.svmlight import looks_svmlight
from ..store.sparse import is_sparse

logger = logging.getLogger(__name__)

__all__ = [
    "align_features",
    "feature_order",
    "has_probability",
    "is_store",
    "predict_chunks",
    "prediction_columns",
    "prediction_features",
    "write_prediction_csv",
    "write_predictions",
]

#: Chunks computed at once when writing CSV: enough to keep a cluster busy, few enough to hold.
CSV_BATCH_CHUNKS = 32


def prediction_features(source, meta: dict, *, chunk_rows: int = 100_000) -> da.Array:
    """The feature columns of ``source`` in the order the model (its ``meta``) was trained on, as row chunks.

    Parameters
    ----------
    source : str or path-like
        A dimbsvm Zarr store, a data file (any suffix :func:`dimbsvm.datasets.load`
        reads; a CSV may lack the label column) or a bundled dataset name.
    meta : dict
        The model's meta: ``n_features`` and, where recorded, ``feature_names``.
    chunk_rows : int, default=100_000
        Rows per chunk (per task) for file input; a store keeps its chunks.

    Returns
    -------
    X : dask.array.Array of shape (n_samples, n_features)

    Raises
    ------
    DataError
        A feature the model was trained on is missing from the data, the data
        has a named column the model was not trained on, or (inputs without
        names) the column count differs.
    """
    path = Path(source)
    n_features, feature_names = int(meta["n_features"]), column_names(meta)
    if is_store(source):
        stored = open_store(source)
        X, names = stored.X, column_names(stored.meta)
        if is_sparse(stored.meta):
            return _sparse_by_index(X, n_features, feature_names, source=str(source))
    elif looks_svmlight(source):  # kept sparse, its columns those of the model's training (by index)
        X = load_svmlight(path, n_features=n_features).X
        return da.from_array(X, chunks=(chunk_rows, -1), asarray=False,
                             meta=sp.csr_matrix((0, n_features), dtype=X.dtype))
    elif path.suffix.lower() == ".csv":  # labelled or not: the model's names choose the columns, in its order
        X, names = load_csv_features(path, n_features=n_features, feature_names=feature_names), None
    elif path.suffix.lower() == ".npz":  # labelled or not; named by its feature_names array where it has one
        X, names = load_npz_features(path)
    else:
        dataset = load(source).to_dense()  # rows matched to the model's columns as a dense block
        X, names = dataset.X, column_names(dataset.meta())
    X = align_features(X, names, feature_names=feature_names, n_features=n_features, source=str(source))
    return X if isinstance(X, da.Array) else da.from_array(X, chunks=(chunk_rows, -1))


def _sparse_by_index(X: da.Array, n_features: int, feature_names, *, source: str) -> da.Array:
    """A sparse store's rows with the model's ``n_features`` columns, matched by index.

    A sparse store names no column: its columns are the model's by index.
    One with fewer columns (the source's largest index was lower) is widened
    with columns of zeros, as svmlight means them; one with more is refused.
    """
    if feature_names is not None:
        raise DataError(f"{source} is a sparse store, whose columns have no names; the model was trained on named "
                        "columns: score a table or a dense store of them")
    width = int(X.shape[1])
    if width > n_features:
        raise DataError(f"{source} has {width} features per row (sparse, by index); the model was trained on "
                        f"{n_features}")
    if width == n_features:
        return X
    return X.map_blocks(_widened, n_features, chunks=(X.chunks[0], (n_features,)), dtype=X.dtype,
                        meta=sp.csr_matrix((0, n_features), dtype=X.dtype))


def _widened(block, n_features):
    block = sp.csr_matrix(block)
    return sp.csr_matrix((block.data, block.indices, block.indptr), shape=(block.shape[0], int(n_features)))


def is_store(source) -> bool:
    """Whether ``source`` is a dimbsvm Zarr store: a directory (local, or at a URL) with a ``zarr.json``."""
    if is_url(str(source)):
        fs, path = filesystem(str(source).rstrip("/"))
        return fs.exists(f"{path}/zarr.json")
    path = Path(source)
    return path.is_dir() and (path / "zarr.json").exists()


def align_features(X, names, *, feature_names, n_features: int, source: str):
    """``X`` with its columns in the model's training order, matched by name where both sides name them.

    * ``names`` and ``feature_names`` are the same names: the columns are
      taken by name (reordered where the order differs), also where they
      read ``x0, x1, ...``;
    * either side has no names (``None``: see :func:`column_names`): the
      columns are taken by position, and only their count is checked;
    * otherwise the data is refused, naming the missing and the extra columns.

    Parameters
    ----------
    X : ndarray or dask.array.Array of shape (n_samples, n_columns)
    names : sequence of str or None
        ``X``'s column names.
    feature_names : sequence of str or None
        The model's training feature names.
    n_features : int
        Features per row the model expects.
    source : str
        The data, named in messages.

    Returns
    -------
    X : ndarray or dask.array.Array of shape (n_samples, n_features)

    Raises
    ------
    DataError
        One line: the count differs, or the named columns differ (missing, extra).

    Examples
    --------
    >>> X = np.array([[1.0, 2.0, 3.0]])
    >>> align_features(X, ["c", "a", "b"], feature_names=["a", "b", "c"], n_features=3, source="new").tolist()
    [[2.0, 3.0, 1.0]]
    >>> align_features(X, ["a", "b", "d"], feature_names=["a", "b", "c"], n_features=3, source="new")
    Traceback (most recent call last):
    ...
    dimbsvm.exceptions.DataError: new: feature column(s) 'c' the model was trained on are missing; column(s) 'd' are not among the model's features (columns are matched to them by name): drop them
    """
    if X.ndim != 2:
        raise DataError(f"{source} has {X.shape[1:]} features per row; the model was trained on {n_features} "
                        "(prediction needs 2-D features)")
    order = feature_order(names, X.shape[1], feature_names=feature_names, n_features=n_features, source=source)
    if order is None:
        return X
    logger.info("%s: columns reordered by name to the model's feature order", source)
    return X[:, order]


def feature_order(names, n_columns: int, *, feature_names, n_features: int, source: str) -> list[int] | None:
    """The data's column of each model feature, in the model's order; ``None`` where the columns are as they are.

    The rules of :func:`align_features`, for data that is not an array
    (a store's rows).

    Raises
    ------
    DataError
        As :func:`align_features`.
    """
    names = None if names is None else [str(name) for name in names]
    feature_names = None if feature_names is None else [str(name) for name in feature_names]
    if names is not None and feature_names is not None and (set(names) != set(feature_names) or
                                                           len(names) != len(set(names))):
        raise DataError(f"{source}: {_differences(names, feature_names)}")
    if n_columns != n_features:
        raise DataError(f"{source} has ({n_columns},) features per row; the model was trained on {n_features}")
    if names is None or feature_names is None or names == feature_names:
        return None
    position = {name: j for j, name in enumerate(names)}
    return [position[name] for name in feature_names]


def _differences(names: list[str], feature_names: list[str]) -> str:
    """What differs between the data's column names and the model's feature names, in one line."""
    missing = [name for name in feature_names if name not in set(names)]
    extra = [name for name in names if name not in set(feature_names)]
    repeated = sorted({name for name in names if names.count(name) > 1})
    parts = []
    if missing:
        parts.append(f"feature column(s) {_listed(missing)} the model was trained on are missing")
    if extra:
        parts.append(f"column(s) {_listed(extra)} are not among the model's features (columns are matched to "
                     "them by name): drop them")
    if repeated:
        parts.append(f"column(s) {_listed(repeated)} occur more than once")
    return "; ".join(parts)


def _listed(names: list[str], shown: int = 5) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(repr(name) for name in names[:shown]) + more


def has_probability(model) -> bool:
    """Whether ``model`` offers ``predict_proba`` (e.g. ``OTHRClassifier(probability=True)``)."""
    return hasattr(model, "predict_proba")


def _score_block(block, model, pos_label, with_probability, feature_names=None, block_info=None):
    """Predicted label, positive-class score (and probability) of each row of one chunk, as (rows, 2 or 3)."""
    X = np.asarray(block, dtype=np.float64)
    _refuse_empty_cells(X, first_row=block_info[0]["array-location"][0][0] if block_info else 0,
                        feature_names=feature_names)
    out = np.empty((X.shape[0], 3 if with_probability else 2), dtype=np.float64)
    out[:, 0] = model.predict(X)
    out[:, 1] = positive_scores(model, X, pos_label)
    if with_probability:
        out[:, 2] = model.predict_proba(X)[:, list(model.classes_).index(pos_label)]
    return out


def _refuse_empty_cells(X: np.ndarray, *, first_row: int, feature_names=None) -> None:
    """One line naming the first empty (NaN) or infinite cell of a chunk: a model cannot score it."""
    if sp.issparse(X):  # only its stored values can be other than finite numbers
        cells = sp.csr_matrix(X).tocoo()  # (in row order)
        bad = ~np.isfinite(cells.data)
        if not bad.any():
            return
        first = int(np.flatnonzero(bad)[0])
        row, column, value = int(cells.row[first]), int(cells.col[first]), cells.data[first]
    else:
        bad = ~np.isfinite(X)
        if not bad.any():
            return
        row, column = (int(i) for i in np.argwhere(bad)[0])
        value = X[row, column]
    named = feature_names is not None and column < len(feature_names)
    label = repr(str(feature_names[column])) if named else str(column + 1)
    what = "empty (NaN)" if np.isnan(value) else f"{value}"
    raise DataError(f"row {first_row + row + 1} (counting data rows from 1), column "
                    f"{label} is {what}: every cell to score needs a finite number "
                    f"({int(bad.sum())} such cell(s) in rows {first_row + 1}..{first_row + X.shape[0]})")


def prediction_columns(model, X: da.Array, *, pos_label, feature_names=None) -> dict[str, da.Array]:
    """Lazy ``y_pred``, ``decision`` and, where the model has ``predict_proba``, ``probability`` columns.

    ``X``'s columns are taken by position: open the data with
    :func:`prediction_features` to have them matched to the model's by name.

    The model enters the graph once and each task scores one chunk, so no
    task holds more than a chunk of rows. ``decision`` grows with the
    likelihood of ``pos_label`` (scikit-learn's ``decision_function``
    orientation for the positive class); ``probability`` is the model's
    probability of ``pos_label``. An empty (NaN) or infinite cell raises
    :class:`~dimbsvm.exceptions.DataError` naming its row and its column
    (by ``feature_names``, the model's, where given).
    """
    if X.ndim != 2:
        raise DataError(f"prediction needs 2-D features, got shape {X.shape}")
    X = X.rechunk({1: -1})
    with_probability = has_probability(model)
    width = 3 if with_probability else 2
    names = list(feature_names) if feature_names is not None else None
    scored = da.map_blocks(_score_block, X, dask.delayed(model), pos_label, with_probability, names,
                           dtype=np.float64, chunks=(X.chunks[0], (width,)))
    columns = {"y_pred": scored[:, 0].astype(np.int64), "decision": scored[:, 1]}
    if with_probability:
        columns["probability"] = scored[:, 2]
    return columns


def predict_chunks(model, X: da.Array, *, pos_label, feature_names=None) -> tuple[da.Array, da.Array]:
    """Lazy predictions and decision values of ``model`` over the row chunks of ``X``.

    Returns
    -------
    y_pred : dask.array.Array of int
    decision : dask.array.Array of float
        See :func:`prediction_columns`.
    """
    columns = prediction_columns(model, X, pos_label=pos_label, feature_names=feature_names)
    return columns["y_pred"], columns["decision"]


def write_predictions(model, X: da.Array, out, *, pos_label, meta: dict, feature_names=None) -> Path:
    """Write ``y_pred``, ``decision`` (and ``probability``) arrays to a new Zarr store at ``out``.

    The store's completion marker is written after every chunk.
    """
    out = Path(out)
    if out.exists():
        raise FileExistsError(f"prediction output {out} already exists")
    columns = prediction_columns(model, X, pos_label=pos_label, feature_names=feature_names)
    rows = X.chunks[0][0]
    group = open_stage(out, ".", meta.get("data_fingerprint", ""), meta)
    targets = [create_checksummed_array(group, name, shape=column.shape, dtype=column.dtype.name, chunks=(rows,))
               for name, column in columns.items()]
    da.store([column.rechunk(rows) for column in columns.values()], targets, lock=False)
    finish_stage(group, {"n_rows": int(X.shape[0])})
    logger.info("wrote %d predictions to %s", X.shape[0], out)
    return out


def write_prediction_csv(model, X: da.Array, out, *, pos_label, class_names: dict, feature_names=None) -> Path:
    """Write ``row,prediction,decision[,probability]`` lines to a new CSV file at ``out``, class names for labels.

    ``probability`` (of the positive class) is written where the model has
    ``predict_proba``.

    Chunks are computed a batch at a time (on the active Dask client, if
    any) and appended in row order; the file is written under a temporary
    name and renamed when complete, so a failure leaves no partial CSV.

    Parameters
    ----------
    class_names : dict
        ``{label code: class name}``; a code it lacks is written as is.
    """
    out = Path(out)
    if out.exists():
        raise FileExistsError(f"prediction output {out} already exists")
    columns = prediction_columns(model, X, pos_label=pos_label, feature_names=feature_names)
    y_pred, scores = columns.pop("y_pred"), list(columns.values())
    tmp = out.with_name(f".{out.name}.partial")
    start = 0
    try:
        with open(tmp, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["row", "prediction", *columns])
            n_chunks = len(y_pred.chunks[0])
            for first in range(0, n_chunks, CSV_BATCH_CHUNKS):
                blocks = range(first, min(first + CSV_BATCH_CHUNKS, n_chunks))
                computed = dask.compute(*[(y_pred.blocks[i], *[score.blocks[i] for score in scores]) for i in blocks])
                for labels, *values in computed:
                    names = [class_names.get(int(code), int(code)) for code in labels]
                    writer.writerows(zip(range(start, start + len(labels)), names, *[v.tolist() for v in values]))
                    start += len(labels)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    logger.info("wrote %d predictions to %s", start, out)
    return out
