"""Predict at scale: score an input partition by partition on the cluster, write CSV, Parquet or a store.

Inputs: Parquet or CSV (a file, a directory, a glob; local or an fsspec URL),
read as a lazy Dask DataFrame whose partitions the workers read and encode
with the model's training encoding (:mod:`dimbsvm.predict.encoding`); a
dimbsvm store (its encoded rows, columns matched by name, and its ``ids``);
or a file the in-memory readers read (KEEL ``.dat``, ``.npz``, svmlight, a
CSV scored by a model that records no input encoding).

Outputs, one row per input row in input order: the model's id column (where
the input has it) or else ``row`` (0-based), ``prediction`` (the class name),
``decision`` (grows with the positive class) and, for a model with
probabilities, ``proba_<positive class>``:

- ``.parquet``: a directory of part files (``part.00000.parquet``, ...),
  written by the workers into a hidden staging directory beside it and moved
  into place when all are written; the completion marker ``_SUCCESS`` is
  written last (readers of Parquet datasets ignore ``_`` files);
- ``.csv``: one file, its parts written by the workers and concatenated by
  one task under a hidden name, then moved into place (at a URL: into the
  output itself, by an upload that completes only where no object of that
  name exists);
- anything else: a new Zarr store (``y_pred`` codes, ``decision``,
  ``probability``), local, from a store or a file.

The client holds the model and the partitions' row counts, never the rows.
An output that exists is refused: nothing dimbsvm did not write is replaced.
Of two runs writing one output, the second is refused when it would write
(at a URL by S3's conditional writes: ``_CLAIMED``, created first, claims a
Parquet output; it is removed once ``_SUCCESS`` is written).
"""

from __future__ import annotations

import logging
import operator
import os
from dataclasses import dataclass
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..exceptions import DimbsvmError
from ..store.location import filesystem, is_url
from ..store.sources import is_tabular_source
from ..store.sources._frames import open_frame
from ..store.sources._scan import keep_rows
from .arrays import _refuse_empty_cells, is_store, prediction_features
from .encoding import RowError
from .model import DimbsvmModel
from .reach import check_workers_reach
from .writers import COMPLETE_MARKER, write_csv, write_parquet

__all__ = ["COMPLETE_MARKER", "Prediction", "Written", "check_output", "output_kind", "plan_prediction", "predict_to"]

logger = logging.getLogger(__name__)

#: Bytes of CSV text per partition when ``chunk_rows`` cannot be turned into bytes.
_CSV_SAMPLE_BYTES = 1 << 16
#: Fewest bytes of CSV text per partition that --chunk-rows may ask for.
_CSV_MIN_BLOCK = 1 << 12


@dataclass(frozen=True)
class Written:
    """A finished prediction output."""

    out: str
    n_rows: int
    columns: tuple


def output_kind(out) -> str:
    """``"csv"``, ``"parquet"`` or ``"store"``, by the output's suffix.

    Examples
    --------
    >>> output_kind("s3://b/pred.parquet/"), output_kind("pred.CSV"), output_kind("pred.zarr")
    ('parquet', 'csv', 'store')
    """
    name = str(out).rstrip("/").rsplit("/", 1)[-1].lower()
    if name.endswith(".csv"):
        return "csv"
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    return "store"


def check_output(out) -> None:
    """Refuse an output that exists (dimbsvm replaces nothing), a store at a URL or a URL in a bucket that does not
    exist, in one line."""
    text = str(out)
    if is_url(text):
        if output_kind(text) == "store":
            raise DimbsvmError(f"prediction output {text}: a Zarr store of predictions is written to a local or "
                               "shared path; at a URL, choose a .parquet or .csv output")
        fs, path = filesystem(text.rstrip("/"))
        bucket = path.split("/", 1)[0] if "/" in path.lstrip("/") and not path.startswith("/") else ""
        if bucket and not fs.exists(bucket):  # writing there would create it: a mistyped name becomes a bucket
            raise DimbsvmError(f"prediction output {text}: the bucket {bucket} does not exist (dimbsvm creates no "
                               "bucket); create it first or correct the URL")
        if fs.exists(path):
            raise DimbsvmError(f"prediction output {text} already exists; choose a new --out")
        return
    if Path(text).exists() or Path(text).is_symlink():
        raise DimbsvmError(f"prediction output {text} already exists; choose a new --out")


def predict_to(model: DimbsvmModel, source, out, *, chunk_rows: int = 100_000, storage_options=None) -> Written:
    """Score ``source`` with ``model`` on the active Dask client (or Dask's local threads) and write ``out``.

    Parameters
    ----------
    model : DimbsvmModel
    source : str or path
        Parquet or CSV (file, directory, glob; local or URL), a dimbsvm
        store, or a file :func:`dimbsvm.datasets.load` reads.
    out : str or path
        ``.parquet`` (directory of part files), ``.csv`` or a new local Zarr
        store; ``.parquet`` and ``.csv`` may be URLs.
    chunk_rows : int, default=100_000
        Rows per task for input without partitions of its own (a single
        CSV file, the in-memory readers' files), and rows scored at once
        within a partition.
    storage_options : dict, default=None
        For the fsspec filesystems of URLs (default: their environment).

    Returns
    -------
    Written

    Raises
    ------
    DimbsvmError
        The output exists, or is a store at a URL.
    DataError
        One line: columns missing or unexpected, a cell that is not a finite
        number, a category not seen in training, naming row and column.
    """
    return plan_prediction(model, source, out, chunk_rows=chunk_rows, storage_options=storage_options).run()


@dataclass
class Prediction:
    """A prediction planned (input opened, columns checked, tasks laid out) and not yet run: :meth:`run` runs it.

    Planning touches no rows, so that everything it can refuse is refused
    before a cluster starts.
    """

    out: str
    kind: str
    key: str
    columns: tuple
    parts: list | None = None
    first_rows: object = None
    store: tuple | None = None
    storage_options: dict | None = None
    n_rows: int | None = None  # where known before reading (arrays and stores; not Parquet or CSV)

    @property
    def n_parts(self) -> int:
        """The partitions scored (each a task): about ``chunk_rows`` rows each."""
        if self.store is not None:
            return int(self.store[1].numblocks[0])
        return len(self.parts or ())

    def run(self) -> Written:
        """Score and write, on the active Dask client (or Dask's local threads)."""
        check_workers_reach(self.out, self.storage_options)  # before any row is scored
        if self.store is not None:
            return _write_store(*self.store)
        writer = write_parquet if self.kind == "parquet" else write_csv
        try:
            n_rows = writer(self.parts, self.out, self.storage_options)
        except RowError as exc:  # named within its partition: find where the partition starts
            if self.first_rows is None:
                raise
            raise exc.at(self.first_rows(exc.partition)) from None
        logger.info("wrote %d predictions to %s", n_rows, self.out)
        return Written(out=self.out, n_rows=n_rows, columns=self.columns)


def plan_prediction(model: DimbsvmModel, source, out, *, chunk_rows: int = 100_000,
                    storage_options=None) -> Prediction:
    """Check the output and the input and lay out the tasks of :func:`predict_to`, reading no rows.

    Raises
    ------
    DimbsvmError, DataError
        As :func:`predict_to`, for everything found without reading rows.
    """
    check_output(out)
    kind, out = output_kind(out), str(out).rstrip("/")
    if not is_url(out):
        out = os.path.abspath(out)  # where this process means it: workers elsewhere have other working directories
    scores = ("prediction", "decision", *((model.probability_column,) if model.has_probability else ()))
    if _reads_as_frame(model, source):
        if kind == "store":
            raise DimbsvmError(f"prediction output {out}: a Zarr store of predictions is written from a store or a "
                               "file the in-memory readers read; for Parquet or CSV input choose a .parquet or "
                               ".csv output")
        parts, first_rows, key = _frame_parts(model, source, chunk_rows, storage_options)
        return Prediction(out=out, kind=kind, key=key, columns=(key, *scores), parts=parts, first_rows=first_rows,
                          storage_options=storage_options)
    X, ids, key = _array_input(model, source, chunk_rows)
    if kind == "store":
        return Prediction(out=out, kind=kind, key=key, columns=(), store=(model, X, out, source),
                          n_rows=int(X.shape[0]))
    return Prediction(out=out, kind=kind, key=key, columns=(key, *scores), parts=_array_parts(model, X, ids, key),
                      storage_options=storage_options, n_rows=int(X.shape[0]))


def _reads_as_frame(model: DimbsvmModel, source) -> bool:
    """Whether ``source`` is read as a Dask DataFrame (else as encoded arrays)."""
    if isinstance(source, pd.DataFrame):
        return True
    if is_store(source) or not is_tabular_source(source):
        return False
    # a local CSV file scored by a model that records no input encoding (saved before it was recorded) keeps
    # the in-memory reader, which matches feature names such as "colour=red" to the file's columns
    local_csv = not is_url(str(source)) and str(source).lower().endswith(".csv")
    return not (local_csv and not model.meta.get("input"))


# ---------------------------------------------------------------------------------------------- frame input


def _frame_parts(model: DimbsvmModel, source, chunk_rows: int, storage_options):
    """Delayed output frames of a tabular source, one per partition, and how to find a partition's first row."""
    blocksize = _csv_blocksize(source, chunk_rows, storage_options)
    opened = open_frame(source, blocksize=blocksize, storage_options=storage_options)
    encoding = model.encoding
    if encoding is not None:  # missing or unexpected columns: one line before any task
        encoding.check_columns(opened.frame.columns, source=opened.description)
    skip_blank = opened.format == "csv"
    if opened.csv is not None:  # the model's number columns parsed as numbers as the text is read
        inputs = opened.partitions(opened.frame.columns, numbers=encoding.number_columns if encoding else ())
    else:
        inputs = opened.frame.to_delayed()
    shared = dask.delayed(model, pure=True)  # one copy in the graph
    scored = [dask.delayed(_score_part, pure=True)(part, shared, opened.description, k, chunk_rows, skip_blank)
              for k, part in enumerate(inputs)]
    key = model.id_column
    if key is None or key not in opened.frame.columns:
        scored, key = _numbered(scored), "row"

    def first_row(partition: int) -> int:
        counts = dask.compute(*[dask.delayed(_count_rows)(part, skip_blank) for part in inputs[:partition]])
        return 1 + int(sum(counts))

    return scored, first_row, key


def _score_part(frame: pd.DataFrame, model: DimbsvmModel, source: str, partition: int, chunk_rows: int,
                skip_blank: bool) -> pd.DataFrame:
    return model.score_frame(keep_rows(frame, skip_blank), source=source, partition=partition, chunk_rows=chunk_rows)


def _count_rows(frame: pd.DataFrame, skip_blank: bool) -> int:
    return len(keep_rows(frame, skip_blank))


def _numbered(scored: list) -> list:
    """The scored parts with a ``row`` column (0-based across parts), each part's offset a chain of counts."""
    numbered, offset = [], 0
    for part in scored:
        numbered.append(dask.delayed(_with_rows, pure=True)(part, offset))
        offset = dask.delayed(operator.add, pure=True)(offset, dask.delayed(len, pure=True)(part))
    return numbered


def _with_rows(frame: pd.DataFrame, first: int) -> pd.DataFrame:
    frame = frame.copy()
    frame.insert(0, "row", np.arange(first, first + len(frame), dtype=np.int64))
    return frame


def _csv_blocksize(source, chunk_rows: int, storage_options) -> int | None:
    """Bytes of an uncompressed CSV that hold about ``chunk_rows`` rows (from its first lines); else None."""
    text = str(source)
    if isinstance(source, pd.DataFrame) or not text.lower().endswith(".csv"):
        return None
    try:
        if is_url(text):
            fs, path = filesystem(text, storage_options)
            with fs.open(path, "rb") as handle:
                sample = handle.read(_CSV_SAMPLE_BYTES)
        else:
            with open(text, "rb") as handle:
                sample = handle.read(_CSV_SAMPLE_BYTES)
    except (OSError, ValueError):
        return None  # the reader names what is wrong with the file
    lines = sample.count(b"\n")
    if lines < 2:
        return None
    return max(_CSV_MIN_BLOCK, int(chunk_rows * len(sample) / lines))


# ---------------------------------------------------------------------------------------------- array input


def _array_input(model: DimbsvmModel, source, chunk_rows: int):
    """The encoded features of a store or a file (columns in the model's order), and a store's ids and their name."""
    X = prediction_features(source, model.meta, chunk_rows=chunk_rows)
    if not is_store(source):
        return X, None, "row"
    from ..store import open_store
    from ..store.sources import open_ids

    stored = open_store(source)
    ids = open_ids(stored.path)
    name = stored.meta.get("id_column") or model.id_column or "id"
    return (X, None, "row") if ids is None else (X, ids, name)


def _array_parts(model: DimbsvmModel, X: da.Array, ids, key: str) -> list:
    X = X.rechunk({1: -1})
    names = list(model.meta.get("feature_names") or []) or None
    shared = dask.delayed(model, pure=True)
    parts, first = [], 0
    blocks = X.to_delayed().ravel()
    id_blocks = ids.rechunk((X.chunks[0],)).to_delayed().ravel() if ids is not None else [None] * len(blocks)
    for block, id_block, rows in zip(blocks, id_blocks, X.chunks[0]):
        parts.append(dask.delayed(_score_block, pure=True)(block, id_block, key, shared, first, names))
        first += rows
    return parts


def _score_block(block, ids, key: str, model: DimbsvmModel, first: int, feature_names) -> pd.DataFrame:
    """The output rows of one chunk of encoded features (``first``: its 0-based first row)."""
    X = block.astype(np.float64) if sp.issparse(block) else np.asarray(block, dtype=np.float64)
    _refuse_empty_cells(X, first_row=first, feature_names=feature_names)
    scored = _score_features(model, X)
    if ids is not None:
        scored.insert(0, key, np.asarray(ids))
    else:
        scored.insert(0, "row", np.arange(first, first + X.shape[0], dtype=np.int64))
    return scored


def _score_features(model: DimbsvmModel, X: np.ndarray) -> pd.DataFrame:
    from ..model_selection.scoring import positive_scores

    estimator = model.estimator
    out = {"prediction": pd.array([model.class_name(c) for c in estimator.predict(X)], dtype="string"),
           "decision": positive_scores(estimator, X, model.pos_label)}
    if model.has_probability:
        out[model.probability_column] = estimator.predict_proba(X)[:, list(estimator.classes_).index(model.pos_label)]
    return pd.DataFrame(out)


def _write_store(model: DimbsvmModel, X, out, source) -> Written:
    from .arrays import write_predictions

    path = write_predictions(model.estimator, X, out, pos_label=model.pos_label,
                             feature_names=model.meta.get("feature_names"),
                             meta={"data": str(source), "data_fingerprint": model.meta.get("data_fingerprint") or "",
                                   "class_names": {str(k): v for k, v in model._names.items()}})
    columns = ("y_pred", "decision", *(("probability",) if model.has_probability else ()))
    return Written(out=str(path), n_rows=int(X.shape[0]), columns=columns)
