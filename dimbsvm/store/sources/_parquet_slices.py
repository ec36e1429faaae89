"""Parquet partitions of a bounded size, cut inside row groups where a row group is larger than the budget.

Dask reads a Parquet file a row group at a time at least, so a file written
with large row groups (pyarrow's default is about a million rows) set the
memory of whatever read it, ``dimbsvm ingest`` in this process included. Here a
partition is planned from the files' footers alone: consecutive whole row
groups of one file up to ``budget`` bytes (uncompressed, as the footer states
them), or an equal slice of rows of one row group larger than that. A slice is
read by streaming its row group in batches and keeping
the rows from its start to its stop, so no read holds more than its slice's
rows and a batch; the price is that the slices of one row group decode its earlier
batches again (the k-th of m slices decodes k), which is CPU, not memory.

The cut depends on the files' metadata only, never on the columns read, so
partitions of any columns line up row for row.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask
import numpy as np
import pandas as pd

__all__ = ["READ_BUFFER", "SLICE_BATCH_ROWS", "ParquetPiece", "parquet_partitions", "plan_partitions",
           "read_parquet_pieces", "row_group_sizes"]

#: Bytes a Parquet read takes from the file at a time.
READ_BUFFER = 2**20
#: Rows a slice's row group is decoded in at a time (the rows before the slice are decoded and dropped).
SLICE_BATCH_ROWS = 65_536


@dataclass(frozen=True)
class ParquetPiece:
    """Rows ``start`` to ``stop`` of row group ``row_group`` of the file at ``path``."""

    path: str
    row_group: int
    start: int
    stop: int
    whole: bool


def plan_partitions(footers, budget: int) -> list[list[ParquetPiece]]:
    """The pieces of every partition, in row order, from each file's row-group sizes.

    Parameters
    ----------
    footers : list of (str, list of (int, int))
        Each file's path and its row groups' ``(rows, uncompressed bytes)``.
    budget : int
        Bytes a partition may hold, at most one row group's whole unless it is sliced.

    Examples
    --------
    >>> [[(p.row_group, p.start, p.stop) for p in part]
    ...  for part in plan_partitions([("a", [(10, 100), (10, 100), (40, 400)])], budget=250)]
    [[(0, 0, 10), (1, 0, 10)], [(2, 0, 20)], [(2, 20, 40)]]
    """
    partitions = []
    for path, groups in footers:
        current, held = [], 0
        for index, (rows, size) in enumerate(groups):
            if rows == 0:
                continue
            if size > budget:  # sliced: each slice a partition of its own
                if current:
                    partitions.append(current)
                    current, held = [], 0
                n_slices = int(np.ceil(size / budget))
                bounds = np.linspace(0, rows, n_slices + 1).round().astype(int)
                partitions += [[ParquetPiece(path, index, int(a), int(b), False)]
                               for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
                continue
            if current and held + size > budget:
                partitions.append(current)
                current, held = [], 0
            current.append(ParquetPiece(path, index, 0, rows, True))
            held += size
        if current:
            partitions.append(current)
    return partitions


def read_parquet_pieces(fs, pieces, columns, dtypes) -> pd.DataFrame:
    """Task body: the rows of ``pieces`` (one file's), columns ``columns`` cast to ``dtypes``, as one DataFrame."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    with fs.open(pieces[0].path, "rb") as handle:
        # a buffered stream: column chunks are read a page at a time, not whole (a row group's raw bytes)
        parquet = pq.ParquetFile(handle, buffer_size=READ_BUFFER, pre_buffer=False)
        for piece in pieces:
            if piece.whole:
                tables.append(parquet.read_row_group(piece.row_group, columns=columns))
                continue
            tables.append(_slice(parquet, piece, columns))
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    frame = table.to_pandas()
    frame.index = pd.RangeIndex(len(frame))
    return frame.astype(dtypes) if dtypes else frame


def _slice(parquet, piece: ParquetPiece, columns):
    """Rows ``piece.start:piece.stop`` of a row group, streamed in batches of at most :data:`SLICE_BATCH_ROWS`."""
    import pyarrow as pa

    seen, kept = 0, []
    batch_rows = min(piece.stop - piece.start, SLICE_BATCH_ROWS)
    for batch in parquet.iter_batches(batch_size=batch_rows, row_groups=[piece.row_group], columns=columns):
        low, high = max(piece.start - seen, 0), min(piece.stop - seen, batch.num_rows)
        if high > low:
            kept.append(batch.slice(low, high - low))
        seen += batch.num_rows
        if seen >= piece.stop:
            break
    return pa.Table.from_batches(kept, schema=kept[0].schema)  # (a slice holds rows: its stop > its start)


def row_group_sizes(fs, paths) -> list:
    """Each file's path and its row groups' ``(rows, uncompressed bytes)``, from its footer (what
    :func:`plan_partitions` takes)."""
    import pyarrow.parquet as pq

    footers = []
    for path in paths:
        with fs.open(path, "rb") as handle:
            metadata = pq.read_metadata(handle)
        footers.append((path, [(metadata.row_group(i).num_rows, metadata.row_group(i).total_byte_size)
                               for i in range(metadata.num_row_groups)]))
    return footers


def parquet_partitions(fs, planned, columns, dtypes) -> list:
    """Delayed DataFrames of ``columns`` of the partitions ``planned`` (:func:`plan_partitions`), in row order."""
    read = dask.delayed(read_parquet_pieces, pure=True)
    dtypes = {column: dtypes[column] for column in columns}
    return [read(fs, pieces, list(columns), dtypes) for pieces in planned]
