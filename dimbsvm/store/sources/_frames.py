"""A tabular source as a lazy Dask DataFrame whose partitions the workers read.

Parquet keeps its column types. CSV is text (pyarrow's parser, which
refuses a row with too few or too many values), typed later from its
values as the in-memory CSV reader types it; its partitions are blocks of
:mod:`._csv_blocks`, which parse the columns that hold numbers as numbers
on the way in. A pandas DataFrame is cut into partitions; a Dask DataFrame
is taken as it is.
"""

from __future__ import annotations

import csv
import io
import itertools
from dataclasses import dataclass
from functools import cached_property

import dask.dataframe as dd
import pandas as pd
from dask.utils import parse_bytes

from ...exceptions import DataError
from ._csv_blocks import CsvBlocks, csv_blocks, numbers_in_rows
from ._locate import Location, locate
from ._parquet_slices import parquet_partitions, plan_partitions, row_group_sizes

__all__ = ["Opened", "open_frame"]

#: Bytes of CSV text per partition when none is asked for: a few times a store chunk's size once parsed,
#: and many partitions for a cluster's workers to share.
CSV_BLOCKSIZE = 32 * 2**20
#: Bytes of a local Parquet file's rows (uncompressed) per partition when none is asked for: whole row groups up to
#: it, a larger row group in slices (._parquet_slices); what one reader (this process, in ingest) holds at a time.
PARQUET_BLOCKSIZE = 64 * 2**20
#: The same on object storage, Dask's default: every partition read there opens the file again (a few requests'
#: latency each: its size, its footer, the column chunks), which a quarter of the partitions pay a quarter as often.
PARQUET_URL_BLOCKSIZE = 256 * 2**20
#: Bytes of a pandas DataFrame per partition when none is asked for.
DATAFRAME_PART_BYTES = 64 * 2**20
#: Rows of a CSV's first file from which its columns of numbers are guessed (a wrong guess costs time only).
CSV_GUESS_ROWS = 1000


@dataclass(frozen=True)
class Opened:
    """A source opened lazily.

    Attributes
    ----------
    frame : dask.dataframe.DataFrame
        Columns named by strings; nothing read yet but metadata.
    format : {"parquet", "csv", "dataframe"}
    description : str
        The source as error messages name it.
    name : str
        Default dataset name.
    location : Location or None
        The files (None for a DataFrame).
    blocksize : int or str or None
        What the frame was opened with.
    storage_options : dict or None
        What the frame was opened with.
    csv : CsvBlocks or None
        A CSV source's blocks, which are its partitions.
    """

    frame: dd.DataFrame
    format: str
    description: str
    name: str
    location: Location | None
    blocksize: int | str | None = None
    storage_options: dict | None = None
    csv: CsvBlocks | None = None

    def partitions(self, columns, numbers=()) -> list:
        """The partitions of ``columns`` as delayed pandas DataFrames, cut alike whatever the columns.

        ``numbers``: the CSV columns to parse as numbers where they hold only
        numbers (the others are text); other sources keep their types.

        Parquet reads only the columns asked for, in partitions of a bounded
        size cut from the files' footers alone (:mod:`._parquet_slices`: whole
        row groups up to the block size, a larger row group in slices of rows),
        so partitions of any columns line up and none holds a whole large row
        group.
        """
        columns = list(columns)
        if self.csv is not None:
            return self.csv.partitions(columns, numbers)
        if self.format != "parquet":
            return self.frame[columns].to_delayed()
        dtypes = {column: self.frame.dtypes[column] for column in columns}
        return parquet_partitions(self.location.fs, self._parquet_plan, columns, dtypes)

    @cached_property
    def _parquet_plan(self) -> list:
        """The Parquet partitions' pieces, planned once from the files' footers (every read of columns cuts alike)."""
        footers = row_group_sizes(self.location.fs, self.location.paths or self.location.urls)
        return plan_partitions(footers, parse_bytes(_parquet_blocksize(self.location, self.blocksize)))


def open_frame(source, *, blocksize=None, storage_options=None) -> Opened:
    """Open a path, URL, pandas or Dask DataFrame as a Dask DataFrame.

    Parameters
    ----------
    source : str, path, pandas.DataFrame or dask.dataframe.DataFrame
    blocksize : int or str, default=None
        Bytes per partition: of an uncompressed CSV's text (default
        :data:`CSV_BLOCKSIZE`; a compressed CSV is always one partition per
        file), of a Parquet file's rows, uncompressed (default
        :data:`PARQUET_BLOCKSIZE`, :data:`PARQUET_URL_BLOCKSIZE` at a URL;
        a larger row group is read in slices of rows), of a
        pandas DataFrame in memory (default :data:`DATAFRAME_PART_BYTES`).
    storage_options : dict, default=None
        For the fsspec filesystem of a URL.
    """
    if isinstance(source, pd.DataFrame):
        frame = _from_pandas(source, blocksize)
        return Opened(frame=frame, format="dataframe", description="the pandas DataFrame", name="dataframe",
                      location=None)
    if isinstance(source, dd.DataFrame):
        return Opened(frame=_string_columns(source, "the Dask DataFrame"), format="dataframe",
                      description="the Dask DataFrame", name="dataframe", location=None)
    location = locate(source, storage_options)
    options = dict(storage_options or {})
    if location.format == "parquet":
        _check_same_columns(location)
        frame = dd.read_parquet(list(location.urls), storage_options=options or None,
                                blocksize=_parquet_blocksize(location, blocksize))
        frame = _string_columns(frame, location.text)
        blocks = None
    else:
        header, first_rows = _csv_header(location)
        frame = _read_csv(location, header, blocksize, options)
        blocks = csv_blocks(location.urls, header=header, numbers_guess=numbers_in_rows(first_rows, header),
                            blocksize=blocksize if blocksize is not None else CSV_BLOCKSIZE,
                            compression=location.compression, storage_options=options)
    return Opened(frame=frame, format=location.format, description=location.text, name=location.name,
                  location=location, blocksize=blocksize, storage_options=options or None, csv=blocks)


#: A source of more Parquet files than this has its files' columns checked against the first's on up to this many
#: (each file's footer is a read; a lake of thousands is checked where its partitions are read, in a task's error).
MAX_SCHEMA_CHECKS = 256


def _check_same_columns(location: Location) -> None:
    """Refuse, in one line, Parquet files of one source that do not all have the first file's columns.

    Dask reads every file with the first one's columns: a file without one
    failed inside a task as pandas' ``KeyError``, naming neither the file nor
    the cause.
    """
    paths = location.paths or location.urls
    if len(paths) < 2:
        return
    import pyarrow.parquet as pq

    def names(path):
        with location.fs.open(path, "rb") as handle:
            return pq.read_schema(handle).names

    first = names(paths[0])
    for path in paths[1:MAX_SCHEMA_CHECKS]:
        missing = [name for name in first if name not in set(names(path))]
        if missing:
            raise DataError(f"{location.text}: {path} has no column(s) {missing} that {paths[0]} has; the Parquet "
                            "files of one source must all have the same columns")


def _parquet_blocksize(location: Location, blocksize):
    if blocksize is not None:
        return blocksize
    return PARQUET_BLOCKSIZE if location.local else PARQUET_URL_BLOCKSIZE


def _from_pandas(df: pd.DataFrame, blocksize) -> dd.DataFrame:
    df = _string_columns(df, "the pandas DataFrame")
    part_bytes = int(blocksize) if blocksize is not None else DATAFRAME_PART_BYTES
    row_bytes = max(1, int(df.memory_usage(index=False, deep=False).sum()) // max(1, len(df)))
    # sort=False: the rows keep their order, whatever the index says.
    return dd.from_pandas(df, chunksize=max(1, part_bytes // row_bytes), sort=False)


def _string_columns(frame, description: str):
    names = [str(c) for c in frame.columns]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise DataError(f"{description}: duplicate column names {duplicated}")
    if names != list(frame.columns):
        frame = frame.rename(columns=dict(zip(frame.columns, names)))
    return frame


def _read_csv(location: Location, header: list, blocksize, options: dict) -> dd.DataFrame:
    compressed = location.compression is not None
    try:  # Dask parses a sample here, for the columns: a malformed first block fails now
        frame = dd.read_csv(
            list(location.urls), dtype=str, keep_default_na=False, engine="pyarrow",
            blocksize=None if compressed else (blocksize if blocksize is not None else CSV_BLOCKSIZE),
            compression=location.compression, storage_options=options or None)
    except (ValueError, OSError) as exc:
        raise DataError(f"{location.text}: cannot read it: {' '.join(str(exc).split())}") from exc
    if len(frame.columns) != len(header):
        raise DataError(f"{location.text}: the header has {len(header)} columns, the CSV parser found "
                        f"{len(frame.columns)}")
    # The header's own names (stripped, as the in-memory reader has them), by position.
    return frame.rename(columns=dict(zip(frame.columns, header)))


def _csv_header(location: Location) -> tuple[list[str], list[list[str]]]:
    """The first file's header row, checked as the in-memory CSV reader checks it, and its first rows."""
    path = location.paths[0]
    try:
        with location.fs.open(path, "rb", compression=location.compression) as raw:
            text = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace", newline="")
            reader = csv.reader(text)
            header = next((row for row in reader if any(c.strip() for c in row)), None)
            line = reader.line_num
            first_rows = _first_rows(reader)
    except (OSError, EOFError, csv.Error) as exc:
        raise DataError(f"{location.text}: not a readable CSV file: {' '.join(str(exc).split())}") from exc
    if header is None:
        raise DataError(f"{location.text}: empty file (no header row)")
    header = [c.strip() for c in header]
    if any(not c for c in header):
        raise DataError(f"{location.text}, line {line}: empty column name in header")
    duplicated = sorted({c for c in header if header.count(c) > 1})
    if duplicated:
        raise DataError(f"{location.text}, line {line}: duplicate column names {duplicated}")
    return header, first_rows


def _first_rows(reader) -> list[list[str]]:
    """Up to :data:`CSV_GUESS_ROWS` rows after the header: a row Python's csv module cannot read ends them
    (whether the file is malformed is for the CSV parser to say)."""
    rows = []
    try:
        rows.extend(itertools.islice(reader, CSV_GUESS_ROWS))
    except csv.Error:
        pass
    return rows
