"""Score a store or a file chunk by chunk and write predictions to Zarr or CSV."""

from __future__ import annotations

import csv
import logging
import os
from pathlib import Path

import dask
import dask.array as da
import numpy as np

from ..model_selection.scoring import positive_scores
from ..exceptions import DataError
from ..store import create_checksummed_array, finish_stage, open_stage

logger = logging.getLogger(__name__)

__all__ = ["has_probability", "prediction_columns", "predict_chunks", "write_prediction_csv", "write_predictions"]

#: Chunks computed at once when writing CSV: enough to keep a cluster busy, few enough to hold.
CSV_BATCH_CHUNKS = 32


def has_probability(model) -> bool:
    """Whether ``model`` offers ``predict_proba`` (e.g. ``OTHRClassifier(probability=True)``)."""
    return hasattr(model, "predict_proba")


def _score_block(block, model, pos_label, with_probability):
    """Predicted label, positive-class score (and probability) of each row of one chunk, as (rows, 2 or 3)."""
    X = np.asarray(block, dtype=np.float64)
    out = np.empty((X.shape[0], 3 if with_probability else 2), dtype=np.float64)
    out[:, 0] = model.predict(X)
    out[:, 1] = positive_scores(model, X, pos_label)
    if with_probability:
        out[:, 2] = model.predict_proba(X)[:, list(model.classes_).index(pos_label)]
    return out


def prediction_columns(model, X: da.Array, *, pos_label) -> dict[str, da.Array]:
    """Lazy ``y_pred``, ``decision`` and, where the model has ``predict_proba``, ``probability`` columns.

    The model enters the graph once and each task scores one chunk, so no
    task holds more than a chunk of rows. ``decision`` grows with the
    likelihood of ``pos_label`` (scikit-learn's ``decision_function``
    orientation for the positive class); ``probability`` is the model's
    probability of ``pos_label``.
    """
    if X.ndim != 2:
        raise DataError(f"prediction needs 2-D features, got shape {X.shape}")
    X = X.rechunk({1: -1})
    with_probability = has_probability(model)
    width = 3 if with_probability else 2
    scored = da.map_blocks(_score_block, X, dask.delayed(model), pos_label, with_probability,
                           dtype=np.float64, chunks=(X.chunks[0], (width,)))
    columns = {"y_pred": scored[:, 0].astype(np.int64), "decision": scored[:, 1]}
    if with_probability:
        columns["probability"] = scored[:, 2]
    return columns


def predict_chunks(model, X: da.Array, *, pos_label) -> tuple[da.Array, da.Array]:
    """Lazy predictions and decision values of ``model`` over the row chunks of ``X``.

    Returns
    -------
    y_pred : dask.array.Array of int
    decision : dask.array.Array of float
        See :func:`prediction_columns`.
    """
    columns = prediction_columns(model, X, pos_label=pos_label)
    return columns["y_pred"], columns["decision"]


def write_predictions(model, X: da.Array, out, *, pos_label, meta: dict) -> Path:
    """Write ``y_pred``, ``decision`` (and ``probability``) arrays to a new Zarr store at ``out``.

    The store's completion marker is written after every chunk.
    """
    out = Path(out)
    if out.exists():
        raise FileExistsError(f"prediction output {out} already exists")
    columns = prediction_columns(model, X, pos_label=pos_label)
    rows = X.chunks[0][0]
    group = open_stage(out, ".", meta.get("data_fingerprint", ""), meta)
    targets = [create_checksummed_array(group, name, shape=column.shape, dtype=column.dtype.name, chunks=(rows,))
               for name, column in columns.items()]
    da.store([column.rechunk(rows) for column in columns.values()], targets, lock=False)
    finish_stage(group, {"n_rows": int(X.shape[0])})
    logger.info("wrote %d predictions to %s", X.shape[0], out)
    return out


def write_prediction_csv(model, X: da.Array, out, *, pos_label, class_names: dict) -> Path:
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
    columns = prediction_columns(model, X, pos_label=pos_label)
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
