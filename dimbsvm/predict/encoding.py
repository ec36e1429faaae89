"""How a model reads raw rows: its input columns, each nominal column's training categories, its id and label.

A model trained on named columns carries an :class:`InputEncoding` in its
meta (``meta["input"]``), built from the training data's meta by
:func:`prediction_meta`. Predicting encodes raw rows (a pandas DataFrame with
the training columns, in any order; the label and the id may be there or
not) as training did: a numeric column as floats, a nominal column as one
0/1 feature per *training* category, in the training feature order. Cells are
read as the ingest reads them (:mod:`dimbsvm.store.sources._cells`): text
stripped, an empty cell, ``?`` or ``<null>`` missing. A value of a nominal
column that training never saw is refused naming column, value and row,
unless the job chose ``data.unknown_categories: ignore``: then it is encoded
as all zeros, like a missing cell.

Errors found in one partition of a larger input name the row within the
partition (:class:`RowError`); whoever knows where the partition starts
turns them into the row of the whole input (:meth:`RowError.at`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..datasets.tabular import refuse_other_delimiter
from ..exceptions import DataError
from ..store.sources._cells import (
    factorize_text,
    missing_mask,
    numbers_or_none,
    parse_numbers,
    stripped_text,
)
from ..store.sources._columns import GUESSED_TARGETS

__all__ = ["UNKNOWN_CATEGORIES", "InputEncoding", "RowError", "class_names", "column_names", "prediction_meta"]

logger = logging.getLogger(__name__)

#: What predicting does with a nominal value training never saw: refuse it, or encode it as missing.
UNKNOWN_CATEGORIES = ("error", "ignore")
#: Categories a message lists before "and N more".
_SHOWN = 10


class RowError(DataError):
    """A bad cell, its row counted from the start of one partition of the input.

    ``str()`` names the row within the partition; :meth:`at` gives the error
    naming the row of the whole input once the partition's first row is known.
    Picklable, so that it travels from a worker to the client unchanged.
    """

    def __init__(self, before: str, row: int, after: str, partition: int = 0):
        super().__init__(before, row, after, partition)
        self.before, self.row, self.after, self.partition = before, int(row), after, int(partition)

    def __str__(self) -> str:
        return f"{self.before}{self.row + 1} of partition {self.partition + 1}{self.after}"

    def at(self, first_row: int) -> DataError:
        """The same error naming the row of the whole input, its partition starting at 1-based ``first_row``."""
        return DataError(f"{self.before}{first_row + self.row}{self.after}")


@dataclass(frozen=True)
class InputEncoding:
    """A model's raw input columns and how each becomes features.

    Attributes
    ----------
    columns : tuple of (str, tuple or None)
        Each input column in training feature order, with its training
        categories (a nominal column) or ``None`` (a numeric column).
    id_column : str or None
        The training data's id column: passed through, never a feature.
    target : str or None
        The training data's label column: ignored where present.
    dropped : tuple of str
        Columns training left out: ignored where present.
    unknown_categories : {"error", "ignore"}
        What a nominal value not seen in training does.

    Examples
    --------
    >>> encoding = InputEncoding(columns=(("size", None), ("colour", ("blue", "red"))), target="class")
    >>> encoding.feature_names
    ['size', 'colour=blue', 'colour=red']
    >>> encoding.encode(pd.DataFrame({"colour": ["red", "?"], "size": [1.5, 2.0]}), source="rows").tolist()
    [[1.5, 0.0, 1.0], [2.0, 0.0, 0.0]]
    """

    columns: tuple
    id_column: str | None = None
    target: str | None = None
    dropped: tuple = ()
    unknown_categories: str = "error"

    def __post_init__(self):
        if self.unknown_categories not in UNKNOWN_CATEGORIES:
            raise ValueError(f"unknown_categories must be one of {UNKNOWN_CATEGORIES}, got {self.unknown_categories!r}")
        columns = tuple((str(name), None if categories is None else tuple(str(c) for c in categories))
                        for name, categories in self.columns)
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "dropped", tuple(self.dropped or ()))

    @property
    def input_columns(self) -> list[str]:
        """The raw columns a row must have, in training order."""
        return [name for name, _ in self.columns]

    @property
    def feature_names(self) -> list[str]:
        """The model's features, as training named them (``"colour=red"`` for a category)."""
        names = []
        for name, categories in self.columns:
            names.extend([name] if categories is None else [f"{name}={c}" for c in categories])
        return names

    @property
    def number_columns(self) -> list[str]:
        """The raw columns that hold numbers (the rest are nominal)."""
        return [name for name, categories in self.columns if categories is None]

    @property
    def has_nominal(self) -> bool:
        return any(categories is not None for _, categories in self.columns)

    def to_meta(self) -> dict:
        """The encoding as JSON-serialisable meta (``meta["input"]`` of a model)."""
        return {"columns": [{"name": name} if categories is None else {"name": name, "categories": list(categories)}
                            for name, categories in self.columns],
                "id_column": self.id_column, "target": self.target, "dropped": list(self.dropped),
                "unknown_categories": self.unknown_categories}

    @classmethod
    def from_meta(cls, meta: dict) -> InputEncoding | None:
        """The encoding a model's meta records (its ``"input"``), or ``None`` for a model that records none."""
        recorded = (meta or {}).get("input")
        if not recorded:
            return None
        return cls(columns=tuple((c["name"], c.get("categories")) for c in recorded["columns"]),
                   id_column=recorded.get("id_column"), target=recorded.get("target"),
                   dropped=tuple(recorded.get("dropped") or ()),
                   unknown_categories=recorded.get("unknown_categories", "error"))

    @classmethod
    def from_data_meta(cls, data_meta: dict, *, unknown_categories: str = "error") -> InputEncoding | None:
        """The encoding of training data, from its meta (a store's, a tabular source's or a reader's).

        The input columns are recovered from ``feature_names`` and the
        nominal columns (with ``categories`` where the meta has them, else the
        names ``"column=category"`` that follow each other). ``None`` for data
        without column names (svmlight, an ``.npz`` without names), which is
        then scored by position.

        Examples
        --------
        >>> meta = {"feature_names": ["size", "colour=blue", "colour=red"], "nominal_columns": ["colour"],
        ...         "target": "class", "id_column": "uid"}
        >>> InputEncoding.from_data_meta(meta).columns
        (('size', None), ('colour', ('blue', 'red')))
        """
        names = column_names(data_meta) or []
        if not names:
            return None
        nominal = [str(c) for c in (data_meta.get("nominal_columns") or [])]
        known = {str(c): [str(v) for v in values] for c, values in (data_meta.get("categories") or {}).items()}
        columns, used, i = [], set(), 0
        while i < len(names):
            for column in (c for c in nominal if c not in used):
                categories = known.get(column)
                if categories is None:  # readers that record no categories: the run of "column=..." names
                    run = []
                    for name in names[i:]:
                        if not name.startswith(f"{column}="):
                            break
                        run.append(name[len(column) + 1:])
                    categories = run
                if categories and names[i:i + len(categories)] == [f"{column}={c}" for c in categories]:
                    columns.append((column, tuple(categories)))
                    used.add(column)
                    i += len(categories)
                    break
            else:
                columns.append((names[i], None))
                i += 1
        # a nominal column with no category (every cell missing in training) has no feature, but rows have it
        columns.extend((column, ()) for column in nominal if column not in used)
        encoding = cls(columns=tuple(columns), id_column=data_meta.get("id_column"), target=data_meta.get("target"),
                       dropped=tuple(data_meta.get("dropped") or ()), unknown_categories=unknown_categories)
        if encoding.feature_names != names:  # cannot happen for meta the readers write; never guess
            logger.warning("the training data's feature names cannot be traced back to its columns; the model "
                           "will score encoded features only")
            return None
        return encoding

    def check_columns(self, columns, *, source: str) -> None:
        """Refuse input whose columns are not the training columns (the label, id and dropped ones may be there).

        Raises
        ------
        DataError
            One line naming the missing and the unexpected columns.
        """
        columns = [str(c) for c in columns]
        if len(self.input_columns) > 1:  # one column holding separators is a file of another separator
            refuse_other_delimiter(columns, source)
        missing = [c for c in self.input_columns if c not in set(columns)]
        allowed = set(self.input_columns) | {c for c in (self.id_column, self.target) if c} | set(self.dropped)
        # data whose meta names no label column (the in-memory CSV reader's): a label found by its name
        extra = [c for c in columns if c not in allowed
                 and not (self.target is None and c.strip().lower() in GUESSED_TARGETS)]
        parts = []
        if missing:
            parts.append(f"column(s) {_listed(missing)} the model was trained on are missing")
        if extra:
            parts.append(f"column(s) {_listed(extra)} are not among the model's input columns "
                         f"({_listed(self.input_columns)}): drop them")
        if parts:
            raise DataError(f"{source}: {'; '.join(parts)}")

    def encode(self, frame: pd.DataFrame, *, source: str, partition: int = 0) -> np.ndarray:
        """The features of raw rows, float64 ``(len(frame), n_features)`` in the model's order.

        Raises
        ------
        RowError
            A numeric cell that is not a number, missing or infinite; a
            nominal value not seen in training (unless ``unknown_categories``
            is ``"ignore"``). Rows are counted within ``frame``.
        DataError
            Columns missing or unexpected (:meth:`check_columns`).
        """
        self.check_columns(frame.columns, source=source)
        X = np.empty((len(frame), len(self.feature_names)), dtype=np.float64)
        at = 0
        for column, categories in self.columns:
            if categories is None:
                X[:, at] = _numbers(frame[column], column, source, partition)
                at += 1
            else:
                X[:, at:at + len(categories)] = self._one_hot(frame[column], column, categories, source, partition)
                at += len(categories)
        return X

    def _one_hot(self, series: pd.Series, column: str, categories, source: str, partition: int) -> np.ndarray:
        codes, texts = factorize_text(series)
        index = {c: k for k, c in enumerate(categories)}
        unseen = [t for t in texts if t not in index]
        if unseen and self.unknown_categories == "error":
            row = int(np.flatnonzero(codes == texts.index(unseen[0]))[0])
            raise RowError(f"{source}: row ", row,
                           f" (counting data rows from 1), column {column!r}: category {unseen[0]!r} was not seen in "
                           f"training (its categories: {_listed(list(categories), _SHOWN)}); to score such a value "
                           "as a missing one, train with data.unknown_categories: ignore", partition)
        position = np.array([index.get(t, -1) for t in texts] + [-1], dtype=np.int64)[codes]
        block = np.zeros((len(series), len(categories)), dtype=np.float64)
        present = np.flatnonzero(position >= 0)
        block[present, position[present]] = 1.0
        return block


def _numbers(series: pd.Series, column: str, source: str, partition: int) -> np.ndarray:
    """A numeric input column as floats: every cell a finite number, or one line naming the first that is not."""
    if pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_numeric_dtype(series.dtype):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
    else:  # text (CSV is read as text): numbers as the ingest reads them
        text = stripped_text(series)
        values = numbers_or_none(text, missing_mask(text))
        if values is None:
            codes, texts = factorize_text(text)
            k = int(np.flatnonzero(~parse_numbers(texts)[1])[0])
            row = int(np.flatnonzero(codes == k)[0])
            raise RowError(f"{source}: row ", row, f" (counting data rows from 1), column {column!r} is "
                                                   f"{texts[k]!r}, not a number; the model was trained on numbers "
                                                   "in this column", partition)
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        what = "empty (NaN)" if np.isnan(values[row]) else f"{values[row]}"
        raise RowError(f"{source}: row ", row, f" (counting data rows from 1), column {column!r} is {what}: every "
                                               f"cell to score needs a finite number ({int(bad.sum())} such cell(s) "
                                               "in this column)", partition)
    return values


def _listed(names: list, shown: int = 5) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(repr(name) for name in names[:shown]) + more


def class_names(meta: dict) -> dict[int, str]:
    """``{label code: class name}`` of a model's meta (its ``class_map``); empty where it records none.

    Examples
    --------
    >>> class_names({"class_map": {"legit": 0, "fraud": 1}})
    {0: 'legit', 1: 'fraud'}
    """
    return {int(code): str(name) for name, code in (meta.get("class_map") or {}).items()}


def prediction_meta(data_meta: dict, *, pos_label, unknown_categories: str = "error", model=None) -> dict:
    """What a saved model's meta records so that it can score raw rows on its own.

    ``input`` (the :class:`InputEncoding`, ``None`` for data without column
    names), ``class_names`` (code -> name), ``positive_class``,
    ``unknown_categories`` and, for a model whose decision threshold was
    moved (OTHR), ``threshold``: the shift already inside its decision value,
    so that a row is predicted positive where the decision value is above 0.

    Parameters
    ----------
    data_meta : dict
        The training data's meta, its labels coded as the model learnt them.
    pos_label : int
        The positive class's code.
    unknown_categories : {"error", "ignore"}, default="error"
    model : estimator, default=None
        The fitted model (or pipeline), for its threshold.
    """
    encoding = InputEncoding.from_data_meta(data_meta, unknown_categories=unknown_categories)
    names = class_names(data_meta)
    last = model.steps[-1][1] if hasattr(model, "steps") else model
    threshold = getattr(last, "threshold_", None)
    return {"input": encoding.to_meta() if encoding is not None else None,
            "class_names": {str(code): name for code, name in names.items()},
            "positive_class": names.get(int(pos_label)) if pos_label is not None else None,
            "unknown_categories": unknown_categories,
            "threshold": float(threshold) if isinstance(threshold, (int, float, np.floating)) else None}


def column_names(meta: dict) -> list[str] | None:
    """The column names data (or a model trained on it) carries, from its meta; ``None`` where it carries none.

    A name the data carries is a name even where it reads ``x0``: an
    ``.npz`` file's ``feature_names``, KEEL attributes, a CSV header, a
    store's columns. Only the names a reader made up for a format without
    any (``named_columns`` false: svmlight, an ``.npz`` without names,
    arrays) are none, and such data is matched by position. Meta recorded
    before dimbsvm told the two apart (no ``named_columns``) counts names
    reading ``x0, x1, ...`` as made up, as it did then.

    Examples
    --------
    >>> column_names({"feature_names": ["x1", "x0"], "named_columns": True})
    ['x1', 'x0']
    >>> column_names({"feature_names": ["x0", "x1"], "named_columns": False}) is None
    True
    >>> column_names({"feature_names": ["x0", "x1"]}) is None  # recorded by an earlier dimbsvm
    True
    """
    names = meta.get("feature_names")
    if names is None or meta.get("named_columns") is False:
        return None
    names = [str(name) for name in names]
    if "named_columns" not in meta and names == [f"x{j}" for j in range(len(names))]:
        return None
    return names
