"""Cells of one partition as text, numbers or category codes: arrays in, arrays out, no Dask.

Every cell is read the way the in-memory CSV reader
(:func:`dimbsvm.datasets.load_csv`) reads it: text is stripped, an empty
cell, ``?`` or ``<null>`` is missing, and a number is what Python's
``float`` accepts, so a streamed CSV gives the same floats to the last bit.
Columns of numbers take a vectorised path (one ``float`` per cell in C);
the texts of other columns are handled once per distinct value.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...datasets.tabular import CSV_MISSING

__all__ = ["cell_text", "factorize_text", "missing_cells", "missing_mask", "numbers_or_none", "parse_numbers",
           "stripped_text"]

_MISSING = sorted(CSV_MISSING)


def cell_text(value) -> str:
    """A cell as the text it stands for: strings stripped, bytes decoded, anything else ``str()``.

    Examples
    --------
    >>> cell_text("  red "), cell_text(3), cell_text(b"x")
    ('red', '3', 'x')
    """
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return value.strip() if isinstance(value, str) else str(value)


def stripped_text(series: pd.Series) -> pd.Series:
    """A column's cells as stripped text (NA stays NA; other values as :func:`cell_text` has them)."""
    if isinstance(series.dtype, pd.StringDtype):
        return series.str.strip()  # vectorised (Arrow) for what CSV and Parquet give
    return series.map(cell_text, na_action="ignore").astype("string")


def missing_mask(text: pd.Series) -> np.ndarray:
    """Which cells of a stripped text column are missing (NA, empty, ``?``, ``<null>``)."""
    return (text.isna() | text.isin(_MISSING)).to_numpy(dtype=bool)


def missing_cells(series: pd.Series) -> np.ndarray:
    """Which cells of a column are missing: NaN in a column of floats, else as :func:`missing_mask` says.

    Examples
    --------
    >>> missing_cells(pd.Series([1.0, np.nan])).tolist(), missing_cells(pd.Series([" ? ", "a"])).tolist()
    ([False, True], [True, False])
    """
    if pd.api.types.is_float_dtype(series.dtype):
        return series.isna().to_numpy(dtype=bool)
    return missing_mask(stripped_text(series))


def numbers_or_none(text: pd.Series, missing: np.ndarray) -> np.ndarray | None:
    """A stripped text column as float64 (NaN where missing), or None if a present cell is not a number.

    Examples
    --------
    >>> text = pd.Series([" 1.5", "?", "2"], dtype="string").str.strip()
    >>> numbers_or_none(text, missing_mask(text)).tolist()
    [1.5, nan, 2.0]
    >>> numbers_or_none(pd.Series(["1", "abc"], dtype="string"), np.zeros(2, bool)) is None
    True
    """
    values = _arrow_numbers(text, missing)
    if values is not None:
        return values
    values = np.full(len(text), np.nan, dtype=np.float64)
    present = ~missing
    try:
        # numpy converts each str with Python's float: the in-memory reader's numbers, bit for bit.
        values[present] = text.to_numpy(dtype=object)[present].astype(np.float64)
    except (ValueError, TypeError):
        return None
    return values


def _arrow_numbers(text: pd.Series, missing: np.ndarray) -> np.ndarray | None:
    """The fast path of :func:`numbers_or_none`: Arrow's cast, or None to let Python's ``float`` decide.

    Arrow's cast is correctly rounded, so every number it reads is Python's
    float bit for bit; it refuses some texts ``float`` takes (``1_000``,
    non-ASCII digits) and takes one form ``float`` refuses (``nan(...)``), so
    a refusal, or a NaN whose text ``float`` does not take, hands the column
    to Python's ``float``.
    """
    try:
        cells = pa.array(text.array, type=pa.string(), from_pandas=True)
        cells = pc.if_else(pa.array(missing), pa.scalar(None, pa.string()), cells)
        values = pc.cast(cells, pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None
    nan_cells = np.flatnonzero(np.isnan(values) & ~missing)
    try:
        for cell in text.iloc[nan_cells]:  # only these cells: a whole column as objects costs more than the cast
            float(cell)  # raises for a text Python's float refuses
    except (ValueError, TypeError):
        return None
    return values


def factorize_text(series: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Codes of a column's cells into its distinct non-missing texts.

    Parameters
    ----------
    series : pandas.Series
        Any dtype; NA cells and the missing markers (``""``, ``?``,
        ``<null>``, after stripping) are missing.

    Returns
    -------
    codes : ndarray of shape (n_rows,), int64
        Index into ``texts``; -1 for a missing cell.
    texts : list of str
        The distinct texts, in order of first appearance.

    Examples
    --------
    >>> codes, texts = factorize_text(pd.Series([" a", "b", "?", None, "a "]))
    >>> codes.tolist(), texts
    ([0, 1, -1, -1, 0], ['a', 'b'])
    """
    raw_codes, uniques = pd.factorize(series, use_na_sentinel=True)
    index: dict[str, int] = {}
    # The last slot serves pandas' sentinel -1, so missing cells map to -1 in one take.
    remap = np.full(len(uniques) + 1, -1, dtype=np.int64)
    for k, value in enumerate(uniques):
        text = cell_text(value)
        if text not in CSV_MISSING:
            remap[k] = index.setdefault(text, len(index))
    return remap[np.asarray(raw_codes, dtype=np.int64)], list(index)


def parse_numbers(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each text as a float, and whether it is one.

    Returns
    -------
    values : ndarray of float64
        NaN where the text is not a number.
    numeric : ndarray of bool

    Examples
    --------
    >>> values, numeric = parse_numbers(["1.5", "abc", "1e3"])
    >>> values.tolist()[::2], numeric.tolist()
    ([1.5, 1000.0], [True, False, True])
    """
    values = np.full(len(texts), np.nan, dtype=np.float64)
    numeric = np.zeros(len(texts), dtype=bool)
    for k, text in enumerate(texts):
        try:
            values[k] = float(text)
        except ValueError:
            continue
        numeric[k] = True
    return values, numeric
