"""One partition as features, labels and ids (runs on a worker; no Dask here).

The plan fixes everything the scan found (each column's kind, every nominal
column's categories, the class map), so every partition is encoded the same
way wherever it runs: features in source order, a nominal column as one 0/1
column per category in sorted order (``"colour=red"``), a missing nominal
cell as all zeros, a missing number as NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...datasets._labels import label_key
from ...exceptions import DataError
from ._cells import factorize_text, missing_mask, numbers_or_none, parse_numbers, stripped_text
from ._scan import keep_rows

__all__ = ["EncodePlan", "UnscannedCellError", "encode_partition"]


class UnscannedCellError(DataError):
    """A cell that is not a number, in a column the scan presumed to hold numbers without reading it all.

    Such a column held numbers in its first rows, so the source is refused
    either way; :func:`dimbsvm.store.ingest` resolves the source again with
    every column scanned, for the refusal that counts every such cell.
    """


@dataclass(frozen=True)
class EncodePlan:
    """How every partition is encoded (picklable, shipped with every task).

    Attributes
    ----------
    source : str
        Named in error messages.
    columns : tuple of (name, how, categories)
        ``how`` is ``"number"`` (a numeric dtype), ``"text-number"`` (text
        holding numbers) or ``"nominal"`` (one-hot over ``categories``).
    target : str
    class_map : dict
        Label key -> integer label.
    id : str or None
    id_dtype : {"int64", "str"} or None
    skip_blank_rows : bool
    dtype : {"float64", "float32"}
        Of the features.
    unread : tuple of str
        Text-number columns the scan did not read (presumed from their first
        rows): a cell in them that is not a number raises
        :class:`UnscannedCellError`.
    """

    source: str
    columns: tuple
    target: str
    class_map: dict
    id: str | None
    id_dtype: str | None
    skip_blank_rows: bool = False
    dtype: str = "float64"
    unread: tuple = ()

    @property
    def text_numbers(self) -> tuple:
        """The columns of text found to hold numbers."""
        return tuple(column for column, how, _ in self.columns if how == "text-number")

    @property
    def n_features(self) -> int:
        return sum(len(categories) if how == "nominal" else 1 for _, how, categories in self.columns)


def encode_partition(frame: pd.DataFrame, plan: EncodePlan, first_row: int, n_rows: int | None = None):
    """``(X, y, ids)`` of one partition: ``(n, n_features)`` of ``plan.dtype``, int32 ``(n,)``, and the ids or None.

    ``first_row`` is the 1-based row of the source the partition starts at
    (for error messages); ``n_rows``, the rows the scan counted in it.

    Raises
    ------
    DataError
        A cell the scan did not see, or a partition of another length (the
        source changed between the scan and this read), naming the column
        and the row, or the rows.
    """
    frame = keep_rows(frame, plan.skip_blank_rows)
    if n_rows is not None and len(frame) != n_rows:
        raise DataError(f"{plan.source}: the rows from row {first_row} on: {len(frame)} rows where the scan of the "
                        f"source counted {n_rows}; the source changed while it was read: ingest again")
    X = np.empty((len(frame), plan.n_features), dtype=plan.dtype)
    at = 0
    for column, how, categories in plan.columns:
        if how == "nominal":
            X[:, at:at + len(categories)] = _one_hot(frame[column], categories, plan.source, column, first_row)
            at += len(categories)
        else:
            X[:, at] = _numbers(frame[column], how, plan.source, column, first_row, column in plan.unread)
            at += 1
    y = _labels(frame[plan.target], plan, first_row)
    ids = None if plan.id is None else _ids(frame[plan.id], plan.id_dtype)
    return X, y, ids


def _changed(source: str, column: str, row: int, what: str) -> DataError:
    return DataError(f"{source}: column {column!r}, row {row}: {what}, which the scan of the source did not see; "
                     "the source changed while it was read: ingest again")


def _numbers(series: pd.Series, how: str, source: str, column: str, first_row: int, unread: bool) -> np.ndarray:
    if how == "number" or pd.api.types.is_float_dtype(series.dtype):  # numbers as the CSV block parsed them
        return series.to_numpy(dtype=np.float64, na_value=np.nan)
    text = stripped_text(series)
    values = numbers_or_none(text, missing_mask(text))
    if values is not None:
        return values
    codes, texts = factorize_text(text)
    k = int(np.flatnonzero(~parse_numbers(texts)[1])[0])
    row = int(np.flatnonzero(codes == k)[0])
    if unread:
        raise UnscannedCellError(f"{source}: column {column!r}, row {first_row + row}: {texts[k]!r} is not a number "
                                 "(the column holds numbers in its first rows)")
    raise _changed(source, column, first_row + row, f"{texts[k]!r} is not a number")


def _one_hot(series: pd.Series, categories, source: str, column: str, first_row: int) -> np.ndarray:
    codes, texts = factorize_text(series)
    index = {c: k for k, c in enumerate(categories)}
    unknown = [t for t in texts if t not in index]
    if unknown:
        row = int(np.flatnonzero(codes == texts.index(unknown[0]))[0])
        raise _changed(source, column, first_row + row, f"category {unknown[0]!r}")
    position = np.array([index[t] for t in texts] + [-1], dtype=np.int64)[codes]
    block = np.zeros((len(series), len(categories)), dtype=np.float64)
    present = np.flatnonzero(position >= 0)
    block[present, position[present]] = 1.0
    return block


def _labels(series: pd.Series, plan: EncodePlan, first_row: int) -> np.ndarray:
    codes, texts = factorize_text(series)
    if (codes < 0).any():
        raise _changed(plan.source, plan.target, first_row + int(np.flatnonzero(codes < 0)[0]), "a missing label")
    keys = [label_key(t) for t in texts]
    unknown = [k for k in keys if k not in plan.class_map]
    if unknown:
        row = int(np.flatnonzero(codes == keys.index(unknown[0]))[0])
        raise _changed(plan.source, plan.target, first_row + row, f"class {unknown[0]!r}")
    return np.array([plan.class_map[k] for k in keys], dtype=np.int32)[codes]


def _ids(series: pd.Series, id_dtype: str) -> np.ndarray:
    if id_dtype == "int64":
        return series.to_numpy(dtype=np.int64)
    text = stripped_text(series)
    # missing ids are refused by the scan; a missing cell here reads as "" as it always has
    return text.mask(pd.Series(missing_mask(text), index=text.index), "").to_numpy(dtype=object)
