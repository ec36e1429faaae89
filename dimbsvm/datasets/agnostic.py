"""The agnostic-learning sets' reader: a whitespace matrix (``NAME_train.data``) and its labels beside it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..exceptions import DataError
from ._base import Dataset
from ._labels import encode_labels
from ._text import read_text
from .tabular import _existing_file

__all__ = ["load_agnostic"]


def load_agnostic(path) -> Dataset:
    """Read an agnostic-learning challenge training set (ada, hiva, sylva, ...).

    Parameters
    ----------
    path : str or path-like
        A directory holding exactly one ``*_train.data`` file, or a ``.data``
        file. Features are whitespace-separated numbers, one row per line; the
        sibling ``.labels`` file holds one label (+1/-1) per line.

    Returns
    -------
    Dataset
        The minority class (+1 in the challenge sets) is 1; features are named
        ``x0, ...``; the name drops the ``_train`` suffix (``"sylva"``).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "toy_train.data").write_text("0 1\\n2 3\\n4 5\\n")
    >>> _ = (folder / "toy_train.labels").write_text("-1\\n1\\n-1\\n")
    >>> ds = load_agnostic(folder)
    >>> ds.name, ds.X.shape, ds.y.tolist()
    ('toy', (3, 2), [0, 1, 0])
    """
    data_path = _agnostic_data_file(Path(path))
    labels_path = data_path.with_suffix(".labels")
    if not labels_path.is_file():
        raise DataError(f"{data_path}: label file {labels_path.name} not found beside it")
    X = _read_whitespace_matrix(data_path)
    label_lines = [
        (n, line.strip())
        for n, line in enumerate(read_text(labels_path).splitlines(), start=1)
        if line.strip()
    ]
    if len(label_lines) != len(X):
        raise DataError(
            f"{data_path}: {len(X)} data rows but {labels_path.name} has "
            f"{len(label_lines)} labels"
        )
    for n, text in label_lines:
        if len(text.split()) != 1:
            raise DataError(f"{labels_path}, line {n}: expected one label, got {text!r}")
    y, class_map = encode_labels([text for _, text in label_lines], source=str(labels_path))
    name = data_path.stem.removesuffix("_train")
    return Dataset(
        X=X,
        y=y,
        feature_names=[f"x{j}" for j in range(X.shape[1])],
        named_columns=False,  # the format names no column
        class_map=class_map,
        name=name,
        source=str(data_path),
    )


def _agnostic_data_file(path: Path) -> Path:
    if path.is_dir():
        found = sorted(path.glob("*_train.data"))
        if len(found) != 1:
            raise DataError(
                f"{path}: expected exactly one *_train.data file in the directory, "
                f"found {[p.name for p in found]}"
            )
        return found[0]
    if path.suffix != ".data":
        raise DataError(f"{path}: expected a directory or a .data file")
    return _existing_file(path)


def _read_whitespace_matrix(path: Path) -> np.ndarray:
    try:
        # The C parser is fast on the large sets; failures are re-scanned
        # below to name the offending line.
        X = np.loadtxt(path, dtype=np.float64, ndmin=2)
    except ValueError:
        _raise_row_error(path)
        raise  # _raise_row_error always raises; kept for the type checker
    if X.size == 0:
        raise DataError(f"{path}: no data rows")
    return X


def _raise_row_error(path: Path) -> None:
    expected = None
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if expected is None:
            expected = len(fields)
        if len(fields) != expected:
            raise DataError(
                f"{path}, line {number}: expected {expected} values (as on the first row), "
                f"got {len(fields)}"
            )
        for column, text in enumerate(fields):
            try:
                float(text)
            except ValueError:
                raise DataError(
                    f"{path}, line {number}, column {column}: {text!r} is not a number"
                ) from None
    raise DataError(f"{path}: cannot parse as a whitespace-separated matrix")
