"""A store's folds by their counts: what the driver plans a store's fold from without holding its rows.

:func:`layouts_of` runs tasks over the labels where they are read, a stored
chunk each: first each chunk's class counts
(:func:`~dimbsvm.model_selection.span_folds.span_class_counts`), which give
each chunk's first rank in each class, then each chunk's rows of each class
and fold (:func:`~dimbsvm.model_selection.span_folds.span_fold_counts`), and
gives each fold its :class:`FoldLayout` (the chunks holding its rows, its
sizes, its training rows' class counts, the chunks' first ranks);
:func:`store_fold_rows` adds the tasks of a fold's rows: one task a chunk for
its rows' folds, one joining them into the repeat's assignment. No task
reads every label to plan or split a store, and no Dask here: tasks go
through :mod:`dimbsvm.parallel`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .._counts import ClassCounts, unique_counts
from ..fold_data.spans import ChunkPlace
from ..parallel import TaskPlan, run_plan
from .bodies import assigned_rows, every_row, fold_assignment, fold_rows
from .span_folds import joined_folds, span_class_counts, span_fold_counts, span_folds

__all__ = ["FoldLayout", "expected_layouts", "layouts_of", "store_chunk_folds", "store_fold_rows"]


@dataclass(frozen=True)
class FoldLayout:
    """A store's fold by its counts: each stored chunk's training and test rows of each class.

    What the engine plans a store's fold from when the driver holds no index
    array of it (:attr:`FoldSpec.layout`): which chunks have rows of the
    fold, how many, and the training rows' class counts.

    Attributes
    ----------
    classes : ndarray
        The classes, increasing.
    train, test : ndarray of int64 of shape (n_chunks, n_classes)
        Rows of each class in each chunk.
    block_rows : int
        Rows per stored chunk.
    """

    classes: np.ndarray
    train: np.ndarray
    test: np.ndarray
    block_rows: int

    @classmethod
    def of_repeat(cls, classes, counts, *, fold, block_rows) -> FoldLayout:
        """Fold ``fold`` (``None``: every row for training) of :func:`~dimbsvm.model_selection.splits.chunk_fold_counts`."""
        every = counts.sum(axis=1)
        test = np.zeros_like(every) if fold is None else counts[:, int(fold)]
        return cls(np.asarray(classes), every - test, test, int(block_rows))

    @property
    def first_ranks(self) -> np.ndarray:
        """``(n_chunks, n_classes)``: rows of each class before each chunk (what a chunk's folds start from)."""
        return _first_ranks(self.train + self.test)

    @property
    def class_totals(self) -> np.ndarray:
        """Rows of each class in the data."""
        return (self.train + self.test).sum(axis=0)

    @property
    def n_train(self) -> int:
        return int(self.train.sum())

    @property
    def n_test(self) -> int:
        return int(self.test.sum())

    def train_counts(self) -> ClassCounts:
        """The training rows' classes and counts, for an ensemble's member plan."""
        return ClassCounts.of(self.classes, self.train.sum(axis=0))

    def places(self, fold) -> list[ChunkPlace]:
        """Each stored chunk's :class:`~dimbsvm.fold_data.spans.ChunkPlace` in fold ``fold`` (``None``:
        every row trains), from the counts alone."""
        train, test = self.train.sum(axis=1), self.test.sum(axis=1)
        train_first, test_first = np.cumsum(train) - train, np.cumsum(test) - test
        class_first = _first_ranks(self.train)
        return [ChunkPlace(None if fold is None else int(fold), int(train_first[c]), int(test_first[c]),
                           int(train[c]), int(test[c]), tuple(int(n) for n in class_first[c]))
                for c in range(train.size)]

    def spans(self, which: str) -> list[tuple[int, int]]:
        """``[(start, stop), ...]`` of the chunks holding ``which`` (``"train"`` or ``"test"``) rows, in order:
        what :func:`~dimbsvm.fold_data.spans.chunk_spans` gives for those rows."""
        held = np.flatnonzero(getattr(self, which).sum(axis=1) > 0)
        return [(int(c) * self.block_rows, (int(c) + 1) * self.block_rows) for c in held]


def store_fold_rows(plan: TaskPlan, y, split: dict, assignments: dict | None, layout: FoldLayout | None = None):
    """The task of a store fold's rows, computed where the tasks run from the labels handle ``y``.

    A CV fold's rows are its repeat's fold assignment and the fold's number
    (:class:`~dimbsvm.model_selection.bodies.AssignedRows`): one byte a row
    travels to a worker, not two index arrays of eight. The assignment is
    computed a chunk at a time from ``layout``'s first ranks (one task a
    chunk, :func:`~dimbsvm.model_selection.span_folds.span_folds`) and
    joined by one task; the repeat's tasks are added once, shared by its
    folds through ``assignments``. A final model's rows are every row, built
    where used.
    """
    if "test_from" in split:
        return plan.add(fold_rows, dict(y=y, **split), name="rows")
    if split.get("fold") is None:
        return plan.add(every_row, dict(y=y), name="rows")
    key = (int(split["n_splits"]), int(split["seed"]))
    assignments = {} if assignments is None else assignments
    if key not in assignments and layout is None:  # a fold whose rows the driver holds: the same folds, one task
        assignments[key] = plan.add(fold_assignment, dict(y=y, n_splits=key[0], seed=key[1]), name="assignment",
                                    priority=10)
    if key not in assignments:
        parts = store_chunk_folds(plan, y, split, assignments, layout)
        assignments[key] = plan.add(joined_folds, dict(parts=parts), name="assignment", priority=10)
    return plan.add(assigned_rows, dict(assignment=assignments[key], fold=int(split["fold"])), name="rows")


def store_chunk_folds(plan: TaskPlan, y, split: dict, assignments: dict, layout: FoldLayout):
    """The tasks of each stored chunk's rows' folds in a store fold's repeat, by chunk; ``None`` for a final model.

    One task a chunk (:func:`~dimbsvm.model_selection.span_folds.span_folds`)
    from ``layout``'s first ranks, added once a repeat and shared by its
    folds through ``assignments``: what the per-chunk tasks find their rows
    in (:func:`~dimbsvm.fold_data.spans.chunk_rows`), and what
    :func:`store_fold_rows` joins where a task needs every row.
    """
    if split.get("fold") is None:
        return None
    key = ("chunks", int(split["n_splits"]), int(split["seed"]))
    if key not in assignments:
        ranks, totals = layout.first_ranks, layout.class_totals
        assignments[key] = [plan.add(span_folds, dict(y=y, classes=layout.classes, start=start, stop=stop,
                                                      first_ranks=ranks[c], totals=totals, n_splits=key[1],
                                                      seed=key[2]), name="folds", priority=10)
                            for c, (start, stop) in enumerate(_spans(int(totals.sum()), layout.block_rows))]
    return assignments[key]


def layouts_of(specs, labels, *, block_rows, client, retries):
    """``specs`` with the :class:`FoldLayout` of each fold planned from counts, computed by tasks over ``labels``.

    One task a stored chunk counts its classes; the driver turns the counts
    into each chunk's first rank in each class; then one task a chunk and
    repeat counts its rows of each class in each fold. The driver receives
    those counts, a few numbers per chunk, and checks them against the
    classes the labels record.
    """
    wanted = [spec for spec in specs if spec.train is None and spec.layout is None]
    if not wanted:
        return specs
    if not block_rows:
        raise ValueError(f"fold {wanted[0].key} has no rows: only the folds of a store are planned from counts")
    classes, counts = unique_counts(labels)  # a store's handle knows them without reading a label
    block_rows = int(block_rows)
    spans = _spans(len(labels), block_rows)
    by_chunk = _run_spans(span_class_counts, labels, spans, dict(classes=classes), client=client, retries=retries,
                          label="class counts")
    if not np.array_equal(by_chunk.sum(axis=0), counts):
        raise ValueError(f"the labels' classes {classes.tolist()} number {by_chunk.sum(axis=0).tolist()} rows, "
                         f"not the {np.asarray(counts).tolist()} recorded for them: the data changed while it was read")
    first_ranks = _first_ranks(by_chunk)
    repeats = sorted({(spec.split["n_splits"], spec.split["seed"]) for spec in wanted if spec.split["seed"] is not None})
    counted = {}
    for n_splits, seed in repeats:  # one pass a repeat: each chunk's rows of each class in each fold
        per_chunk = [dict(first_ranks=first_ranks[c], totals=counts, n_splits=n_splits, seed=seed)
                     for c in range(len(spans))]
        counted[n_splits, seed] = _run_spans(span_fold_counts, labels, spans, dict(classes=classes), per_chunk,
                                             client=client, retries=retries, label="fold counts")
    laid = {}
    for spec in wanted:
        split = spec.split
        if split["seed"] is None:
            layout = FoldLayout(classes, by_chunk, np.zeros_like(by_chunk), block_rows)
        else:
            layout = FoldLayout.of_repeat(classes, counted[split["n_splits"], split["seed"]], fold=split["fold"],
                                          block_rows=block_rows)
        laid[spec.key] = replace(spec, layout=layout)
    return [laid.get(spec.key, spec) for spec in specs]


def expected_layouts(specs, labels, *, block_rows):
    """``specs`` with each store fold laid out from the labels' class totals alone: no label is read.

    Each stored chunk holds its share of every class, and each fold its
    share of each chunk's (the largest remainders rounded up): what a price
    of the plan needs (its chunks, sizes and class counts), where
    :func:`layouts_of` would run tasks over the labels for the exact counts.
    """
    wanted = [spec for spec in specs if spec.train is None and spec.layout is None]
    if not wanted:
        return specs
    classes, counts = unique_counts(labels)  # a store's handle knows them without reading a label
    spans = _spans(len(labels), int(block_rows))
    by_chunk = _shares(np.asarray(counts, dtype=np.int64), np.array([stop - start for start, stop in spans]))
    laid = {}
    for spec in wanted:
        split = spec.split
        if split["seed"] is None:
            layout = FoldLayout(classes, by_chunk, np.zeros_like(by_chunk), int(block_rows))
        else:
            k = int(split["n_splits"])
            per_fold = np.stack([_shares(chunk, np.ones(k)) for chunk in by_chunk])  # (chunks, folds, classes)
            layout = FoldLayout.of_repeat(classes, per_fold, fold=split["fold"],
                                          block_rows=int(block_rows))
        laid[spec.key] = replace(spec, layout=layout)
    return [laid.get(spec.key, spec) for spec in specs]


def _shares(totals: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``(len(weights), len(totals))`` integers: each total cut in proportion to ``weights``, columns summing to it.

    Examples
    --------
    >>> _shares(np.array([10, 3]), np.array([2, 1, 1])).tolist()
    [[5, 1], [3, 1], [2, 1]]
    """
    exact = np.outer(weights / weights.sum(), totals)
    shares = np.floor(exact).astype(np.int64)
    short = totals - shares.sum(axis=0)
    for column, missing in enumerate(short):  # the remainders, one each to the largest fractions, first first
        order = np.argsort(shares[:, column] - exact[:, column], kind="stable")
        shares[order[:int(missing)], column] += 1
    return shares


def _spans(n_rows: int, block_rows: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` of the stored chunks of ``n_rows`` rows."""
    return [(start, min(start + block_rows, n_rows)) for start in range(0, n_rows, block_rows)]


def _first_ranks(by_chunk: np.ndarray) -> np.ndarray:
    """Rows of each class before each chunk, from each chunk's rows of each class."""
    return np.cumsum(by_chunk, axis=0) - by_chunk


def _run_spans(body, labels, spans, common, per_span=None, *, client, retries, label) -> np.ndarray:
    """``body`` over each span of the labels, one task each; their results stacked in span order."""
    plan = TaskPlan()
    y_ref = plan.share(labels)
    refs = [plan.add(body, dict(common, y=y_ref, start=start, stop=stop, **(per_span[i] if per_span else {})),
                     watch=True, name=label.replace(" ", "_"))
            for i, (start, stop) in enumerate(spans)]
    results = run_plan(plan, client=client, retries=retries, progress=False, label=label)
    return np.stack([results[ref.id] for ref in refs])
