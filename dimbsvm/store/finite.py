"""Rows holding NaN or infinite values: counted per block as a store is written, recorded in its meta.

A job refuses infinite values, and NaN unless it imputes
(:func:`dimbsvm.jobs.data.check_job_data`). Finding them in a store means
reading every chunk (a second of client time per 4x10^6 x 32 rows), though
the ingest had every block in memory already. So the ingest counts them, per
written block (:func:`nonfinite_rows`), summed exactly, and records the
totals in the store's meta beside the completion marker (:data:`META_KEY`):
the meta is written after every chunk, so the record describes the chunks
on disk, and the chunks' crc32c checksums make any later change to them an
error on read. A store without the record (an older dimbsvm, another tool)
is scanned as before.

No Dask or I/O here: the kernel sees one block of rows.
"""

from __future__ import annotations

import numpy as np

__all__ = ["META_KEY", "nonfinite_rows", "recorded_nonfinite"]

#: Store meta key: ``{"rows": n_rows, "nan": rows holding NaN, "inf": rows holding +-inf}``.
META_KEY = "nonfinite_rows"


def nonfinite_rows(block) -> np.ndarray:
    """``[rows holding NaN, rows holding +-inf]`` of a block of rows (a row holding both counts in both).

    Parameters
    ----------
    block : ndarray of shape (n_rows, ...)
        Rows of a store's features (2-D, or 3-D for time series).

    Returns
    -------
    counts : ndarray of shape (2,), int64

    Examples
    --------
    >>> nonfinite_rows(np.array([[0.0, np.nan], [np.inf, np.nan], [1.0, 2.0], [-np.inf, 0.0]])).tolist()
    [2, 2]
    >>> nonfinite_rows(np.full((2, 3), 3e38, dtype=np.float32)).tolist()  # sums overflow; the values are finite
    [0, 0]
    """
    block = np.asarray(block)
    if block.dtype.kind != "f" or block.size == 0:
        return np.zeros(2, dtype=np.int64)
    rows = block.reshape(block.shape[0], -1)
    # A row's sum is NaN or infinite whenever the row holds NaN or +-inf: one pass that allocates one value per
    # row, where isnan/isinf allocate one per cell. Sums that overflow are re-checked cell by cell below.
    with np.errstate(over="ignore", invalid="ignore"):  # overflowing or inf - inf sums are expected, not news
        suspects = rows[~np.isfinite(rows.sum(axis=1))]
    return np.array([np.isnan(suspects).any(axis=1).sum(), np.isinf(suspects).any(axis=1).sum()], dtype=np.int64)


def recorded_nonfinite(meta: dict, n_rows: int) -> tuple[int, int] | None:
    """``(rows holding NaN, rows holding +-inf)`` a store's meta records for its ``n_rows`` rows, or None.

    None when the store has no record (written before dimbsvm kept one, or
    by another tool) or a record of another number of rows: the caller then
    reads the rows.

    Examples
    --------
    >>> recorded_nonfinite({"nonfinite_rows": {"rows": 10, "nan": 2, "inf": 0}}, 10)
    (2, 0)
    >>> recorded_nonfinite({}, 10) is None
    True
    """
    record = meta.get(META_KEY)
    if not isinstance(record, dict) or record.get("rows") != int(n_rows):
        return None
    try:
        return int(record["nan"]), int(record["inf"])
    except (KeyError, TypeError, ValueError):
        return None
