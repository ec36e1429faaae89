"""Readers for tabular files: CSV, NumPy ``.npz`` and svmlight (the agnostic-learning sets: :mod:`.agnostic`)."""

from __future__ import annotations

import csv
import re
import zipfile
from pathlib import Path

import numpy as np

from ..exceptions import DataError
from ._base import Dataset
from ._labels import encode_labels
from ._text import ENCODING, not_utf8

__all__ = ["load_csv", "load_csv_features", "load_npz", "load_npz_features", "load_svmlight",
           "refuse_other_delimiter"]

# Cell values read as "missing" in CSV files: NaN in numeric columns,
# an all-zero block in nominal ones.
CSV_MISSING = frozenset({"", "?", "<null>"})


def _existing_file(path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    return path


def load_csv(path, target="class", nominal=()) -> Dataset:
    """Read a CSV file with a header row.

    A column whose non-missing values are all numbers is numeric; one whose
    non-missing values are all non-numeric, or that is named in ``nominal``,
    is nominal and one-hot encoded in sorted category order (columns named
    ``"x0=A"``). A column that is numeric except for some cells is an error
    naming the cells: the reader does not guess whether they are typos or
    categories. Neither does it guess at numbers written for a locale
    (``1,5``, ``1.234,5``, ``12%``): a column of them is an error naming a
    cell, unless it is named in ``nominal``. Missing cells (empty, ``?`` or
    ``<null>``) become NaN in numeric columns and an all-zero block in nominal
    ones. Labels follow the
    binary-minority rule of :func:`~dimbsvm.datasets._labels.encode_labels`.

    Parameters
    ----------
    path : str or path-like
        The CSV file.
    target : str, default="class"
        Name of the label column. When left at ``"class"`` and the header has
        no such column, the column named ``label``, ``class`` or ``target`` in
        any case (exactly one) is the label, and in a header without one, the
        last column; any other name must exist.
    nominal : sequence of str, default=()
        Columns to one-hot encode even though their values are numbers (or
        mostly numbers), e.g. numeric category codes.

    Returns
    -------
    Dataset

    Examples
    --------
    >>> import tempfile, pathlib
    >>> tmp = pathlib.Path(tempfile.mkdtemp()) / "toy.csv"
    >>> _ = tmp.write_text("x0,colour,class\\n1.5,red,a\\n2.0,blue,b\\n?,red,b\\n")
    >>> ds = load_csv(tmp)
    >>> ds.feature_names, ds.nominal_columns, ds.class_map
    (['x0', 'colour=blue', 'colour=red'], ['colour'], {'b': 0, 'a': 1})
    >>> ds.X[2].tolist()
    [nan, 0.0, 1.0]
    """
    path = _existing_file(path)
    header, rows, line_numbers = _read_csv_rows(path)
    target_index = _target_index(header, target, path)

    declared = [nominal] if isinstance(nominal, str) else list(nominal)
    unknown = sorted(set(declared) - set(header))
    if unknown:
        raise DataError(f"{path}: nominal column(s) {unknown} are not in the header; columns are {header}")
    blocks, names, nominal = [], [], []
    for j, column_name in enumerate(header):
        if j == target_index:
            continue
        values = [row[j] for row in rows]
        numbers = None if column_name in declared else _numeric_column(values, path, column_name, line_numbers)
        if numbers is not None:
            blocks.append(numbers[:, None])
            names.append(column_name)
            continue
        categories = sorted({v for v in values if v not in CSV_MISSING})
        if not categories:  # else a nominal column of no category: no feature, and no word of why
            raise DataError(f"{path}: column {column_name!r} has no value in any row; leave it out with "
                            f"--drop {column_name}, or fill it")
        index = {c: k for k, c in enumerate(categories)}
        block = np.zeros((len(values), len(categories)), dtype=np.float64)
        for i, v in enumerate(values):
            if v not in CSV_MISSING:
                block[i, index[v]] = 1.0
        blocks.append(block)
        names.extend(f"{column_name}={c}" for c in categories)
        nominal.append(column_name)

    labels = [row[target_index] for row in rows]
    for i, label in enumerate(labels):
        if label in CSV_MISSING:
            raise DataError(
                f"{path}, line {line_numbers[i]}: missing label in column {header[target_index]!r}"
            )
    y, class_map = encode_labels(labels, source=f"{path}, target column {header[target_index]!r}")
    X = np.hstack(blocks) if blocks else np.empty((len(rows), 0), dtype=np.float64)
    return Dataset(
        X=np.ascontiguousarray(X, dtype=np.float64),
        y=y,
        feature_names=names,
        nominal_columns=nominal,
        class_map=class_map,
        name=path.stem,
        source=str(path),
    )


#: Column names (in any case) that name a label: the default target is found by them before by position.
TARGET_NAMES = ("class", "label", "target")


def _target_index(header, target, path) -> int:
    """The label column of ``header``: ``target``; by default (``"class"``) a column named as a label, else the last.

    A header with a column called ``label`` (or ``Class``, ``TARGET``) whose
    last column is something else must not have that last column taken as
    the label: only a header with no such name is read by position.
    """
    if target in header:
        return header.index(target)
    if target != "class":
        raise DataError(f"{path}: no target column {target!r}; columns are {header}")
    named = [j for j, name in enumerate(header) if name.strip().lower() in TARGET_NAMES]
    if len(named) > 1:
        raise DataError(f"{path}: columns {[header[j] for j in named]} could each be the label; keep one of them "
                        "(or rename the others), or ingest the file with --target NAME")
    return named[0] if named else len(header) - 1


def load_csv_features(path, *, n_features: int, feature_names=None, target: str = "class") -> np.ndarray:
    """The feature columns of a CSV file to score with a model, with or without a label column.

    Data to predict on usually has no label. The columns are chosen by what
    the model was trained on:

    * with ``feature_names`` (the training columns after encoding): those
      columns by name, in that order; a name ``"col=A"`` of a one-hot encoded
      nominal column is the indicator of ``col == "A"``; other columns (the
      label) are ignored;
    * without: a header of ``n_features`` columns is all features; one of
      ``n_features + 1`` has a label column, ``target`` if present, else the
      last one, which is dropped.

    Parameters
    ----------
    path : str or path-like
    n_features : int
        Features per row the model expects.
    feature_names : sequence of str, default=None
        The training data's feature names, when known.
    target : str, default="class"
        The label column's name, if there is one.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64

    Raises
    ------
    DataError
        A named column is missing, the column count fits neither case, or a
        feature column is not numeric (naming the cells).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> tmp = pathlib.Path(tempfile.mkdtemp()) / "new.csv"
    >>> _ = tmp.write_text("x0,x1\\n1.5,2\\n0,1\\n")
    >>> load_csv_features(tmp, n_features=2).tolist()
    [[1.5, 2.0], [0.0, 1.0]]
    """
    path = _existing_file(path)
    header, rows, line_numbers = _read_csv_rows(path)
    n_features = int(n_features)
    if feature_names:
        names = [str(n) for n in feature_names]
        if len(names) != n_features:
            raise DataError(f"the model lists {len(names)} feature names for {n_features} features")
        columns = []
        missing = []
        for name in names:
            if name in header:
                j = header.index(name)
                numbers = _numeric_column([row[j] for row in rows], path, name, line_numbers)
                if numbers is None:
                    raise DataError(f"{path}: column {name!r} holds no numbers; the model was trained on it as a "
                                    "numeric feature")
                columns.append(numbers)
            elif "=" in name and name.split("=", 1)[0] in header:
                source, category = name.split("=", 1)
                j = header.index(source)
                columns.append(np.array([1.0 if row[j] == category else 0.0 for row in rows]))
            else:
                missing.append(name)
        if missing:
            raise DataError(f"{path}: feature column(s) {missing[:5]}{' and more' if len(missing) > 5 else ''} "
                            f"the model was trained on are not in the header; columns are {header}")
        return np.ascontiguousarray(np.column_stack(columns), dtype=np.float64)
    if len(header) == n_features:
        keep = list(range(len(header)))
    elif len(header) == n_features + 1:
        label = _target_index(header, target, path)  # the rule load_csv trained with
        keep = [j for j in range(len(header)) if j != label]
    else:
        raise DataError(f"{path} has {len(header)} columns; the model needs {n_features} feature columns "
                        f"(plus, optionally, one label column)")
    columns = []
    for j in keep:
        numbers = _numeric_column([row[j] for row in rows], path, header[j], line_numbers)
        if numbers is None:
            raise DataError(f"{path}: column {header[j]!r} holds no numbers; the model needs numeric features "
                            "(a model trained on nominal columns needs their names: retrain with this dimbsvm)")
        columns.append(numbers)
    return np.ascontiguousarray(np.column_stack(columns), dtype=np.float64)


#: Separators other than the comma, by name, that a CSV header read as one column betrays.
OTHER_DELIMITERS = {";": "semicolon", "\t": "tab", "|": "pipe"}


def refuse_other_delimiter(columns, source: str) -> None:
    """Refuse a header read as one column that holds another separator: the file is not comma-separated.

    Read with commas, such a file is one text column, which then fails far
    from the cause ("no label column", "not a class label").

    Raises
    ------
    DataError

    Examples
    --------
    >>> refuse_other_delimiter(["a;b;class"], "rows.csv")
    Traceback (most recent call last):
    ...
    dimbsvm.exceptions.DataError: rows.csv: the header is one column, 'a;b;class': the file looks semicolon-separated, \
and dimbsvm reads comma-separated CSV; save it with commas (pandas: read_csv(path, sep=';').to_csv(new_path, index=False))
    """
    if len(columns) != 1:
        return
    for separator, name in OTHER_DELIMITERS.items():
        if separator in columns[0]:
            raise DataError(f"{source}: the header is one column, {columns[0]!r}: the file looks {name}-separated, "
                            "and dimbsvm reads comma-separated CSV; save it with commas (pandas: read_csv(path, "
                            f"sep={separator!r}).to_csv(new_path, index=False))")


def _read_csv_rows(path: Path) -> tuple[list[str], list[list[str]], list[int]]:
    try:
        with path.open(newline="", encoding=ENCODING) as handle:
            reader = csv.reader(handle)
            header = next((r for r in reader if any(c.strip() for c in r)), None)
            if header is None:
                raise DataError(f"{path}: empty file (no header row)")
            header = [c.strip() for c in header]
            refuse_other_delimiter(header, str(path))
            if any(not c for c in header):
                raise DataError(f"{path}, line {reader.line_num}: empty column name in header")
            if len(set(header)) != len(header):
                raise DataError(f"{path}, line {reader.line_num}: duplicate column names")
            rows, line_numbers = [], []
            for row in reader:
                if not any(c.strip() for c in row):
                    continue
                if len(row) != len(header):
                    raise DataError(
                        f"{path}, line {reader.line_num}: expected {len(header)} values "
                        f"(one per header column), got {len(row)}"
                    )
                rows.append([c.strip() for c in row])
                line_numbers.append(reader.line_num)
    except csv.Error as exc:
        raise DataError(f"{path}: not a readable CSV file: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise not_utf8(path) from exc
    if not rows:
        raise DataError(f"{path}: no data rows after the header")
    return header, rows, line_numbers


def _numeric_column(values: list[str], path: Path, column: str, line_numbers: list[int]) -> np.ndarray | None:
    """The column as floats (missing -> NaN); None when no value is a number (a nominal column).

    Raises
    ------
    DataError
        Some values are numbers and some are not: naming the column, the lines
        and the values that are not numbers.
    """
    present = [(i, v) for i, v in enumerate(values) if v not in CSV_MISSING]
    bad = [(i, v) for i, v in present if not _is_number(v)]
    if not bad and present:
        return np.array([np.nan if v in CSV_MISSING else float(v) for v in values], dtype=np.float64)
    nominal = f"(data.nominal: [{column}] in a job, nominal=[{column!r}] in load_csv)"
    if present and all(_LOCALE_NUMBER.match(v) for _, v in bad):
        # else "1,5" and "12%" become categories, one-hot encoded, and the model silently loses their order
        i, v = bad[0]
        raise DataError(
            f"{path}: column {column!r} holds numbers written with a decimal comma, thousands separators or a "
            f"percent sign (line {line_numbers[i]}: {v!r}, {len(bad)} such cell(s)); convert them to plain "
            "numbers (1234.5, 0.12 for 12%), or declare the column nominal if it really is categorical "
            f"{nominal}")
    if len(bad) == len(present):
        return None  # non-numeric throughout (or empty): nominal
    shown = ", ".join(f"line {line_numbers[i]}: {v!r}" for i, v in bad[:5])
    more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
    raise DataError(
        f"{path}: column {column!r} holds numbers except in {len(bad)} cell(s) ({shown}{more}); fix those "
        f"cells (a missing value may be empty, '?' or '<null>'), or declare the column nominal {nominal}")


#: A number as a spreadsheet in many locales writes it: thousands grouped by ``,`` ``.`` ``'`` or a (narrow,
#: non-breaking) space, a decimal comma, a trailing percent sign. Only consulted for cells ``float`` refuses.
_LOCALE_NUMBER = re.compile(r"""
    [+-]?
    (?: \d{1,3} (?: [,.'\u00a0\u202f\ ] \d{3} )+ (?: [.,] \d+ )?    # 1,234,567.8  1.234,5  1 234
      | \d* [.,] \d+                                                # 0,5  ,5  1,25
      | \d+ )                                                       # 12 (before a %)
    \s* %?
    $""", re.VERBOSE)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def load_npz_features(path):
    """The features of a ``.npz`` archive to score with a model: ``X``, labelled (``y``) or not.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
    feature_names : list of str or None
        The archive's ``feature_names`` array; None where it has none (its
        columns are then matched by position).

    Examples
    --------
    >>> import tempfile, pathlib, numpy as np
    >>> tmp = pathlib.Path(tempfile.mkdtemp()) / "new.npz"
    >>> np.savez(tmp, X=np.eye(2), feature_names=np.array(["a", "b"]))
    >>> X, names = load_npz_features(tmp)
    >>> X.shape, names
    ((2, 2), ['a', 'b'])
    """
    X, feature_names, _ = _npz_features(_existing_file(path), required=("X",))
    return X, feature_names


def _npz_features(path, *, required):
    """``(X, feature_names or None, every array)`` of a ``.npz`` archive holding the ``required`` arrays."""
    if not zipfile.is_zipfile(path):  # else numpy tries it as a pickle and suggests loading it unsafely
        raise DataError(f"{path}: not a .npz archive (not a zip file); write one with numpy.savez(path, X=..., y=...)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise DataError(f"{path}: not a readable .npz archive: {exc}") from exc
    missing = [key for key in required if key not in arrays]
    if missing:
        raise DataError(f"{path}: missing array(s) {missing}; found {sorted(arrays)}")
    try:
        X = np.asarray(arrays["X"], dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{path}: array 'X' is not numeric: {exc}") from exc
    if X.ndim != 2:
        raise DataError(f"{path}: array 'X' must be 2-D, got shape {X.shape}")
    feature_names = None
    if "feature_names" in arrays:
        feature_names = [str(n) for n in np.asarray(arrays["feature_names"]).ravel()]
        if len(feature_names) != X.shape[1]:
            raise DataError(
                f"{path}: 'feature_names' has {len(feature_names)} entries for "
                f"{X.shape[1]} columns of X"
            )
    return X, feature_names, arrays


def load_npz(path) -> Dataset:
    """Read a NumPy ``.npz`` archive with arrays ``X`` and ``y``.

    Parameters
    ----------
    path : str or path-like
        Archive written by :func:`numpy.savez`; keys ``X`` (2-D, numeric) and
        ``y`` (1-D, numbers or strings), optionally ``feature_names``.

    Returns
    -------
    Dataset
        Labels follow the binary-minority rule of
        :func:`~dimbsvm.datasets._labels.encode_labels`; feature names default
        to ``x0, x1, ...``.

    Examples
    --------
    >>> import tempfile, pathlib, numpy as np
    >>> tmp = pathlib.Path(tempfile.mkdtemp()) / "toy.npz"
    >>> np.savez(tmp, X=np.eye(3), y=np.array([5, 7, 7]))
    >>> ds = load_npz(tmp)
    >>> ds.y.tolist(), ds.class_map
    ([1, 0, 0], {'7': 0, '5': 1})
    """
    path = _existing_file(path)
    X, feature_names, arrays = _npz_features(path, required=("X", "y"))
    y_source = np.asarray(arrays["y"])
    if y_source.ndim != 1 or len(y_source) != len(X):
        raise DataError(
            f"{path}: array 'y' must be 1-D with one label per row of X ({len(X)}), "
            f"got shape {y_source.shape}"
        )
    feature_names = feature_names or [f"x{j}" for j in range(X.shape[1])]
    y, class_map = encode_labels(y_source, source=str(path))
    return Dataset(
        X=X,
        y=y,
        feature_names=feature_names,
        named_columns="feature_names" in arrays,
        class_map=class_map,
        name=path.stem,
        source=str(path),
    )


def load_svmlight(path, *, dense=False, n_features=None) -> Dataset:
    """Read an svmlight / libsvm file, kept sparse unless densified on request.

    Parameters
    ----------
    path : str or path-like
        File in the format read by :func:`sklearn.datasets.load_svmlight_file`
        (indices one-based unless one of them is 0, as its ``"auto"``).
    dense : bool, default=False
        Return ``X`` as a dense array. Text-like data of 10^5 columns is
        gigabytes dense; keep it sparse where the estimator takes CSR.
    n_features : int, default=None
        The feature count (default: the largest index's); a file with a
        larger index is refused.

    Returns
    -------
    Dataset
        ``X`` a float64 ``scipy.sparse.csr_matrix`` (an ndarray with
        ``dense``); labels follow the binary-minority rule (for ``-1``/``+1``
        data the smaller class is 1); features named ``x0, ...``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> tmp = pathlib.Path(tempfile.mkdtemp()) / "toy.svm"
    >>> _ = tmp.write_text("-1 1:0.5 3:1\\n+1 2:2\\n-1 1:1\\n")
    >>> ds = load_svmlight(tmp)
    >>> ds.X.shape, ds.X.nnz, ds.y.tolist(), ds.class_map
    ((3, 3), 4, [0, 1, 0], {'-1': 0, '1': 1})
    >>> load_svmlight(tmp, dense=True).X.tolist()[0]
    [0.5, 0.0, 1.0]
    """
    from sklearn.datasets import load_svmlight_file

    path = _existing_file(path)
    try:
        X, y_source = load_svmlight_file(str(path), n_features=n_features)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a readable svmlight file: {exc}") from exc
    X = X.toarray() if dense else X.tocsr()
    y, class_map = encode_labels(y_source, source=str(path))
    return Dataset(
        X=np.asarray(X, dtype=np.float64) if dense else X.astype(np.float64),
        y=y,
        feature_names=[f"x{j}" for j in range(X.shape[1])],
        named_columns=False,  # the format names no column
        class_map=class_map,
        name=path.stem,
        source=str(path),
    )
