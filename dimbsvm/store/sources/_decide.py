"""From the scan to the encoding plan (in the client, on the scan's small summary).

Each text column's kind is settled as the in-memory CSV reader settles it
(numbers throughout: numeric; no number: nominal; both: an error naming the
cells), every nominal column's categories are fixed (refused past
``max_categories``), and the classes are mapped to integers by the
project's one label rule, applied to the class counts of the scan rather
than to the labels themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...datasets import _labels
from ...exceptions import DataError
from ._columns import Roles
from ._encode import EncodePlan
from ._scan import MAX_LABELS, ColumnScan, Scan

__all__ = ["Decision", "class_map_from_counts", "decide"]


@dataclass(frozen=True)
class Decision:
    """The encoding plan, and what the store's meta records about it."""

    plan: EncodePlan
    lengths: tuple[int, ...]
    feature_names: list
    nominal_columns: list
    categories: dict
    class_map: dict
    class_counts: dict


def class_map_from_counts(counts, *, source: str) -> dict:
    """The class map :func:`~dimbsvm.datasets._labels.encode_labels` gives labels with these counts.

    The same rule, applied to ``{label key: rows}`` rather than to every
    label, so the labels of a source larger than memory are never gathered:
    a continuous target is refused; two classes: the minority is 1 (KEEL's
    ``positive``/``negative`` keep their meaning); more: sorted order.

    Examples
    --------
    >>> class_map_from_counts({"b": 3, "a": 1}, source="demo")
    {'b': 0, 'a': 1}
    >>> class_map_from_counts({"10": 2, "9": 1, "2": 1}, source="demo")
    {'2': 0, '9': 1, '10': 2}
    """
    count_of = {str(k): int(c) for k, c in counts.items() if c}
    if not count_of:
        raise DataError(f"{source}: no class labels")
    _labels._check_not_continuous(list(count_of), source)
    order = _labels._sorted_classes(list(count_of))
    if len(order) == 2:
        return _labels._binary_map(order, count_of, source)
    return {c: i for i, c in enumerate(order)}


def decide(scan: Scan, roles: Roles, kinds: dict, *, source: str, max_categories: int, id_dtype,
           skip_blank_rows: bool, float32_source: bool = False, unread=()) -> Decision:
    """Settle kinds, categories and classes, or refuse the source with a one-line reason.

    ``float32_source``: the source's number columns are float32 (or narrower)
    values; the features are then float32 too unless a text column holds
    numbers (parsed as float64), so that float32 data is stored as float32,
    as a float32 array is.

    ``unread``: text columns the scan presumed to hold numbers without
    reading them all; they are text holding numbers, checked as they are
    encoded (:class:`~._encode.UnscannedCellError`).

    Raises
    ------
    DataError
        No rows; a text column holding numbers and words, or numbers written
        for a locale (``1,5``, ``12%``); a nominal column
        with more than ``max_categories`` values; a missing label or id; a
        label column that is continuous or has too many values.
    """
    lengths = tuple(scan.lengths[p] for p in sorted(scan.lengths))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    if not offsets[-1]:
        raise DataError(f"{source}: no data rows")

    def row(part, local):  # 1-based row of the whole source
        return int(offsets[part] + local + 1)

    columns, names, nominal_columns, categories = [], [], [], {}
    for column in roles.features:
        kind = kinds[column]
        if kind == "number":
            columns.append((column, "number", ()))
            names.append(column)
            continue
        seen = scan.columns.get(column, ColumnScan())
        if kind == "text" and (column in unread and not seen.words or seen.words == 0 and seen.numbers):
            columns.append((column, "text-number", ()))
            names.append(column)
            continue
        if kind == "text" and seen.words and seen.locale_words == seen.words:
            _refuse_locale_numbers(column, seen, row, source)
        if kind == "text" and seen.numbers:
            _refuse_words(column, seen, row, source)
        found = sorted(seen.values)
        if not found:  # else a nominal column of no category: no feature, and no word of why
            raise DataError(f"{source}: column {column!r} has no value in any row; leave it out with --drop {column}, "
                            "or fill it")
        if len(found) > max_categories:
            _refuse_categories(column, max(len(found), seen.most_in_a_part), max_categories, source)
        columns.append((column, "nominal", tuple(found)))
        names.extend(f"{column}={c}" for c in found)
        nominal_columns.append(column)
        categories[column] = found

    _check_present(scan.missing_labels, scan.missing_label_cells, "label", roles.target, row, source)
    if roles.id is not None:
        _check_present(scan.missing_ids, scan.missing_id_cells, "id", roles.id, row, source)
    label_source = f"{source}, target column {roles.target!r}"
    if scan.labels_cut:
        _labels._check_not_continuous(list(scan.labels), label_source)
        raise DataError(f"{label_source}: more than {MAX_LABELS} distinct values, too many for class labels; "
                        "choose the label column with --target COLUMN")
    class_map = class_map_from_counts(scan.labels, source=label_source)
    counts = {class_map[k]: c for k, c in scan.labels.items()}
    float32 = float32_source and not any(how == "text-number" for _, how, _ in columns)
    plan = EncodePlan(source=source, columns=tuple(columns), target=roles.target, class_map=class_map, id=roles.id,
                      id_dtype=id_dtype, skip_blank_rows=skip_blank_rows, dtype="float32" if float32 else "float64",
                      unread=tuple(c for c in unread if c in roles.features))
    return Decision(plan=plan, lengths=lengths, feature_names=names, nominal_columns=nominal_columns,
                    categories=categories, class_map=class_map,
                    class_counts={str(k): int(counts[k]) for k in sorted(counts)})


def _refuse_words(column, seen, row, source) -> None:
    shown = ", ".join(f"row {row(part, local)}: {text!r}" for part, local, text in seen.cells)
    more = f" and {seen.words - len(seen.cells)} more" if seen.words > len(seen.cells) else ""
    raise DataError(
        f"{source}: column {column!r} holds numbers except in {seen.words} cell(s) ({shown}{more}); fix those "
        "cells (a missing value may be empty, '?' or '<null>'), or declare the column nominal "
        f"(--nominal {column}, nominal=[{column!r}] in ingest)")


def _refuse_locale_numbers(column, seen, row, source) -> None:
    # Else "1,5" and "12%" would become categories, and the model would silently lose their order.
    part, local, text = seen.cells[0]
    raise DataError(
        f"{source}: column {column!r} holds numbers written with a decimal comma, thousands separators or a "
        f"percent sign (row {row(part, local)}: {text!r}, {seen.words} such cell(s)); convert them to plain "
        "numbers (1234.5, 0.12 for 12%), or declare the column nominal if it really is categorical "
        f"(--nominal {column}, nominal=[{column!r}] in ingest)")


def _refuse_categories(column, at_least: int, max_categories: int, source) -> None:
    raise DataError(
        f"{source}: nominal column {column!r} has at least {at_least} distinct values, more than max_categories="
        f"{max_categories}, and one-hot encoding would make a feature of each; keep it beside the rows with "
        f"--id {column}, leave it out with --drop {column}, or raise --max-categories")


def _check_present(n_missing: int, cells, what: str, column: str, row, source) -> None:
    if n_missing:
        shown = ", ".join(f"row {row(part, local)}" for part, local in cells)
        more = f" and {n_missing - len(cells)} more" if n_missing > len(cells) else ""
        raise DataError(f"{source}: missing {what} in column {column!r} ({shown}{more})")
