"""The one pass over a tabular source before it is encoded.

Each partition is summarised on a worker (:func:`scan_partition`): its
length, its labels' counts, the categories of its nominal columns, and
whether its text columns hold numbers, words or both. Summaries are merged
in a tree (:func:`merge_scans`), so the client receives one small summary
whatever the number of rows. Sets that could grow with the rows (the
categories, the distinct labels) are cut once they pass the limit that
refuses them anyway, so a summary stays small even for an identifier column.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...datasets._labels import label_key
from ...datasets.tabular import _LOCALE_NUMBER  # the in-memory CSV reader's test, shared rather than copied
from ._cells import factorize_text, missing_cells, missing_mask, numbers_or_none, parse_numbers, stripped_text

__all__ = ["ColumnScan", "Scan", "ScanPlan", "merge_scans", "scan_partition"]

#: Cells quoted in an error message (bad numbers, missing labels).
SHOWN_CELLS = 5
#: Distinct labels kept in a summary: far more classes than a classifier of imbalanced data meets,
#: few enough that a continuous column chosen as the label by mistake keeps the summary small.
MAX_LABELS = 10_000


@dataclass(frozen=True)
class ScanPlan:
    """What :func:`scan_partition` looks at (picklable, shipped with every task).

    Attributes
    ----------
    kinds : dict
        Feature column -> kind (``"number"``, ``"text"``, ``"nominal"``).
    target : str
    id : str or None
    max_categories : int
    skip_blank_rows : bool
        Drop rows with no value in any column read (CSV: lines of bare commas,
        which the in-memory reader skips as blank lines).
    """

    kinds: dict
    target: str
    id: str | None
    max_categories: int
    skip_blank_rows: bool = False


@dataclass
class ColumnScan:
    """What one feature column holds, over the partitions merged so far.

    ``words`` and ``values`` are only gathered for text and nominal columns;
    ``locale_words`` counts the words that look like numbers written for a
    locale (``1,5``, ``12%``: :data:`dimbsvm.datasets.tabular._LOCALE_NUMBER`).
    ``cells`` are the first non-numeric cells as ``(partition, row, text)``;
    ``values`` the distinct category texts, cut past the limit; ``most_in_a_part``
    the most distinct values any one partition had (a lower bound of the
    column's, when ``values`` was cut).
    """

    numbers: int = 0
    words: int = 0
    locale_words: int = 0
    cells: list = field(default_factory=list)
    values: set = field(default_factory=set)
    most_in_a_part: int = 0


@dataclass
class Scan:
    """The summary of a source's partitions.

    Attributes
    ----------
    lengths : dict
        Partition -> rows.
    columns : dict
        Feature column -> :class:`ColumnScan`.
    labels : Counter
        Label key (:func:`~dimbsvm.datasets._labels.label_key`) -> rows.
    labels_cut : bool
        More than :data:`MAX_LABELS` distinct labels were seen (the counts are partial).
    missing_labels, missing_ids : int
    missing_label_cells, missing_id_cells : list of (partition, row)
    """

    lengths: dict = field(default_factory=dict)
    columns: dict = field(default_factory=dict)
    labels: Counter = field(default_factory=Counter)
    labels_cut: bool = False
    missing_labels: int = 0
    missing_label_cells: list = field(default_factory=list)
    missing_ids: int = 0
    missing_id_cells: list = field(default_factory=list)


def keep_rows(frame: pd.DataFrame, skip_blank_rows: bool) -> pd.DataFrame:
    """The partition's rows that count (blank CSV rows left out), with a fresh 0..n-1 index."""
    if skip_blank_rows and len(frame.columns):
        blank = np.ones(len(frame), dtype=bool)
        for column in frame.columns:
            rows = np.flatnonzero(blank)  # only rows blank so far: usually none after the first column
            if not rows.size:
                break
            blank[rows] = missing_cells(frame[column].iloc[rows])
        if blank.any():
            frame = frame.loc[~blank]
    return frame.reset_index(drop=True)


def scan_partition(frame: pd.DataFrame, plan: ScanPlan, part: int) -> Scan:
    """Summarise one partition (runs on a worker)."""
    frame = keep_rows(frame, plan.skip_blank_rows)
    scan = Scan(lengths={part: len(frame)})
    for column, kind in plan.kinds.items():
        if kind != "number":
            scan.columns[column] = _scan_column(frame[column], kind, plan.max_categories, part)
    codes, texts = factorize_text(frame[plan.target])
    counts = np.bincount(codes[codes >= 0], minlength=len(texts))
    for text, count in zip(texts, counts.tolist()):
        if count:
            scan.labels[label_key(text)] += count
    if len(scan.labels) > MAX_LABELS:
        scan.labels, scan.labels_cut = Counter(dict(list(scan.labels.items())[:MAX_LABELS + 1])), True
    scan.missing_labels, scan.missing_label_cells = _missing(codes < 0, part)
    if plan.id is not None:
        ids = frame[plan.id]
        missing = (ids.isna().to_numpy(dtype=bool) if pd.api.types.is_numeric_dtype(ids.dtype)
                   else missing_mask(stripped_text(ids)))
        scan.missing_ids, scan.missing_id_cells = _missing(missing, part)
    return scan


def _missing(missing: np.ndarray, part: int) -> tuple[int, list]:
    rows = np.flatnonzero(missing)
    return int(rows.size), [(part, int(r)) for r in rows[:SHOWN_CELLS]]


def _scan_column(series: pd.Series, kind: str, max_categories: int, part: int) -> ColumnScan:
    if kind == "text" and pd.api.types.is_float_dtype(series.dtype):  # parsed as numbers with the CSV block
        return ColumnScan(numbers=int(series.notna().sum()))
    if kind == "text":
        text = stripped_text(series)
        missing = missing_mask(text)
        if numbers_or_none(text, missing) is not None:  # the usual case, vectorised: numbers throughout
            return ColumnScan(numbers=int((~missing).sum()))
        series = text
    codes, texts = factorize_text(series)
    scan = ColumnScan(most_in_a_part=len(texts))
    if kind == "text":
        _, numeric = parse_numbers(texts)
        per_text = np.bincount(codes[codes >= 0], minlength=len(texts))
        scan.numbers = int(per_text[numeric].sum())
        scan.words = int(per_text[~numeric].sum())
        locale = np.array([not number and bool(_LOCALE_NUMBER.match(t)) for t, number in zip(texts, numeric)],
                          dtype=bool)
        scan.locale_words = int(per_text[locale].sum())
        if scan.words:
            word_rows = np.flatnonzero((codes >= 0) & ~numeric[np.maximum(codes, 0)])
            scan.cells = [(part, int(r), texts[codes[r]]) for r in word_rows[:SHOWN_CELLS]]
        texts = [t for t, number in zip(texts, numeric) if not number]
        scan.most_in_a_part = len(texts)
    scan.values = set(sorted(texts)[:max_categories + 1])
    return scan


def merge_scans(*scans: Scan, max_categories: int) -> Scan:
    """One summary of several (a node of the tree reduction)."""
    merged = Scan()
    for scan in scans:
        merged.lengths.update(scan.lengths)
        for column, part in scan.columns.items():
            into = merged.columns.setdefault(column, ColumnScan())
            into.numbers += part.numbers
            into.words += part.words
            into.locale_words += part.locale_words
            into.cells = sorted(into.cells + part.cells)[:SHOWN_CELLS]
            if len(into.values) <= max_categories:
                into.values = set(sorted(into.values | part.values)[:max_categories + 1])
            into.most_in_a_part = max(into.most_in_a_part, part.most_in_a_part)
        if not merged.labels_cut:
            merged.labels.update(scan.labels)
        merged.labels_cut = merged.labels_cut or scan.labels_cut or len(merged.labels) > MAX_LABELS
        merged.missing_labels += scan.missing_labels
        merged.missing_label_cells = sorted(merged.missing_label_cells + scan.missing_label_cells)[:SHOWN_CELLS]
        merged.missing_ids += scan.missing_ids
        merged.missing_id_cells = sorted(merged.missing_id_cells + scan.missing_id_cells)[:SHOWN_CELLS]
    return merged
