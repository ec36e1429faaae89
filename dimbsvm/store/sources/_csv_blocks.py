"""CSV files cut into blocks at line ends, each block parsed on a worker (no Dask in the parsing).

A block's presumed number columns are parsed as numbers while the text is
read: Arrow's CSV reader converts a decimal text to the correctly rounded
float, which is what Python's ``float`` gives, so this is the in-memory
reader's number bit for bit, without a column of text in between. Where a
presumed number column of a block holds anything else (a word, a cell
padded with spaces, ``1_000``, a NaN, which may have been written in a
form ``float`` refuses), the block is parsed again with every column as
text, and its cells go the text way (:mod:`._cells`) as every cell did
before. Which columns to presume numbers is only a guess (from the first
rows of the first file): a wrong one costs a second parse, never a
different value.

Text mode is what ``dask.dataframe.read_csv(dtype=str,
keep_default_na=False, engine="pyarrow")`` gives: no cell is NA, an empty
cell is ``""``.

The scan of a block (:func:`scan_block`) may leave those columns unread: a
column with numbers in its first rows can only be numeric, or mixed, which
is an error, never nominal, so there is nothing in it for the scan to
decide, and the encoding, which parses it as numbers anyway, finds a cell
that is not one.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, replace

import dask
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
from dask.bytes import read_bytes

from ...datasets.tabular import CSV_MISSING
from ._cells import parse_numbers
from ._scan import Scan, ScanPlan, keep_rows, scan_partition

__all__ = ["CsvBlocks", "csv_blocks", "numbers_in_rows", "parse_block", "scan_block"]

_STRING = pd.StringDtype("pyarrow")


@dataclass(frozen=True)
class CsvBlocks:
    """The blocks of one or more CSV files, and how their header reads.

    Attributes
    ----------
    header : tuple of str
        Column names (the first file's header row, stripped).
    blocks : tuple of (dask.delayed.Delayed, bool)
        Each block's bytes (whole lines) and whether it starts its file (and
        so with the header row).
    numbers_guess : frozenset of str
        The columns whose cells in the first rows are numbers (at least one)
        or missing.
    """

    header: tuple
    blocks: tuple
    numbers_guess: frozenset

    def partitions(self, columns, numbers=()) -> list:
        """Delayed pandas DataFrames of ``columns``, one per block.

        ``numbers`` are parsed as float64 (NaN where missing) in every block
        where they all hold only numbers; every other column, and every
        column of any other block, is text (``string[pyarrow]``).
        """
        columns, numbers = tuple(columns), set(numbers)
        numbers = tuple(c for c in columns if c in numbers)
        parse = dask.delayed(parse_block, pure=True)
        return [parse(block, self.header, first, columns, numbers) for block, first in self.blocks]

    def scans(self, columns, plan: ScanPlan, unread=()) -> list:
        """Delayed :class:`~._scan.Scan` summaries of ``columns``, one per block (:func:`scan_block`)."""
        columns, unread = tuple(columns), tuple(c for c in columns if c in set(unread))
        scan = dask.delayed(scan_block, pure=True)
        return [scan(block, self.header, first, columns, unread, plan, part)
                for part, (block, first) in enumerate(self.blocks)]


def csv_blocks(urls, *, header, numbers_guess, blocksize, compression, storage_options) -> CsvBlocks:
    """Cut the files into blocks (lazily: nothing but the listing is read).

    A compressed file cannot be cut: ``blocksize`` is then ignored and each
    file is one block.
    """
    _, per_file = read_bytes(list(urls), delimiter=b"\n", blocksize=None if compression else blocksize,
                             sample=False, compression=compression, **(storage_options or {}))
    blocks = tuple((block, k == 0) for file_blocks in per_file for k, block in enumerate(file_blocks))
    return CsvBlocks(header=tuple(header), blocks=blocks, numbers_guess=frozenset(numbers_guess))


def parse_block(block: bytes, header, first_of_file: bool, columns, numbers) -> pd.DataFrame:
    """One block's rows: ``numbers`` as float64 if they all hold numbers, else every column as text.

    Raises
    ------
    pyarrow.ArrowInvalid
        A malformed row (too few or too many values, bad UTF-8); a
        ``ValueError``.
    """
    if first_of_file:
        block = _after_header(block)
    header, columns = list(header), list(columns)
    if numbers:
        table = _read(block, header, columns, numbers)
        if table is not None and not any(pc.any(pc.is_nan(table.column(c))).as_py() for c in numbers):
            return _frame(table, columns, numbers)
    return _frame(_read(block, header, columns, ()), columns, ())


def scan_block(block: bytes, header, first_of_file: bool, columns, unread, plan: ScanPlan, part: int) -> Scan:
    """Summarise one block (runs on a worker), parsing only the columns the scan needs.

    ``unread`` columns (presumed numbers: :attr:`CsvBlocks.numbers_guess`)
    are not parsed, and the summary has no entry for them. Except where a
    row is blank in every column read: whether such a row is blank (and
    skipped) or a row with a missing label (refused) depends on the columns
    left out, so the whole block is parsed and summarised as before, the
    ``unread`` columns as text columns parsed as numbers where they hold only
    numbers.
    """
    skipped = set(unread)
    frame = parse_block(block, header, first_of_file, [c for c in columns if c not in skipped], ())
    if not skipped:
        return scan_partition(frame, plan, part)
    if len(keep_rows(frame, plan.skip_blank_rows)) == len(frame):
        kinds = {c: kind for c, kind in plan.kinds.items() if c not in skipped}
        return scan_partition(frame, replace(plan, kinds=kinds), part)
    return scan_partition(parse_block(block, header, first_of_file, columns, unread), plan, part)


def _read(block: bytes, header: list, columns: list, numbers) -> pa.Table | None:
    """The block as an Arrow table, or None if a ``numbers`` column held a cell that is not one."""
    types = {c: pa.float64() if c in numbers else pa.string() for c in columns}
    convert = pa_csv.ConvertOptions(column_types=types, include_columns=columns, strings_can_be_null=False,
                                    null_values=sorted(CSV_MISSING) if numbers else [])
    try:
        return pa_csv.read_csv(io.BytesIO(block), read_options=pa_csv.ReadOptions(column_names=header),
                               convert_options=convert)
    except pa.ArrowInvalid:
        if numbers:
            return None  # a cell that is not a number, or a malformed row the text parse will report
        if not block:  # a file of a header and nothing else
            return pa.table({c: pa.array([], pa.string()) for c in columns})
        raise


def _frame(table: pa.Table, columns: list, numbers) -> pd.DataFrame:
    data = {c: table.column(c).to_numpy() if c in numbers else pd.array(table.column(c), dtype=_STRING)
            for c in columns}
    return pd.DataFrame(data, columns=columns, index=pd.RangeIndex(table.num_rows))


def _after_header(block: bytes) -> bytes:
    """The block from the line after its header row (the first row with a non-blank cell) on."""
    text = io.TextIOWrapper(io.BytesIO(block), encoding="utf-8-sig", errors="replace", newline="")
    reader = csv.reader(text)
    if not any(any(cell.strip() for cell in row) for row in reader):
        return b""
    at = 0
    for _ in range(reader.line_num):
        at = block.find(b"\n", at) + 1
        if at == 0:
            return b""
    return block[at:]


def numbers_in_rows(rows, header) -> set[str]:
    """The columns whose cells in ``rows`` (lists of text) are numbers (at least one) or missing.

    Examples
    --------
    >>> sorted(numbers_in_rows([["1", "a", "", "?"], ["2.5", "3", "", "4"]], ["x", "y", "z", "w"]))
    ['w', 'x']
    """
    cells = {name: set() for name in header}
    for row in rows:
        for name, cell in zip(header, row):
            cells[name].add(cell.strip())
    present = {name: sorted(texts - CSV_MISSING) for name, texts in cells.items()}
    return {name for name, texts in present.items() if texts and parse_numbers(texts)[1].all()}
