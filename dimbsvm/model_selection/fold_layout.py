"""A store's folds by their counts: what the driver plans a store's fold from without holding its rows.

:func:`layouts_of` runs one task per repeat over the labels where they are read
(:func:`~dimbsvm.model_selection.splits.chunk_fold_counts`) and gives each
fold its :class:`FoldLayout` (the chunks holding its rows, its sizes, its
training rows' class counts); :func:`store_fold_rows` adds the task of a fold's
rows, which the workers build from one fold assignment per repeat. No Dask
here: tasks go through :mod:`dimbsvm.parallel`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .._counts import ClassCounts
from ..parallel import TaskPlan, run_plan
from .bodies import assigned_rows, every_row, fold_assignment, fold_rows
from .splits import chunk_class_counts, chunk_fold_counts

__all__ = ["FoldLayout", "layouts_of", "store_fold_rows"]


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
    def n_train(self) -> int:
        return int(self.train.sum())

    @property
    def n_test(self) -> int:
        return int(self.test.sum())

    def train_counts(self) -> ClassCounts:
        """The training rows' classes and counts, for an ensemble's member plan."""
        return ClassCounts.of(self.classes, self.train.sum(axis=0))

    def spans(self, which: str) -> list[tuple[int, int]]:
        """``[(start, stop), ...]`` of the chunks holding ``which`` (``"train"`` or ``"test"``) rows, in order:
        what :func:`~dimbsvm.model_selection.spans.chunk_spans` gives for those rows."""
        held = np.flatnonzero(getattr(self, which).sum(axis=1) > 0)
        return [(int(c) * self.block_rows, (int(c) + 1) * self.block_rows) for c in held]


def store_fold_rows(plan: TaskPlan, y, split: dict, assignments: dict | None):
    """The task of a store fold's rows, computed where the tasks run from the labels handle ``y``.

    A CV fold's rows are its repeat's fold assignment (one task per repeat,
    shared by its folds: one byte a row travels to a worker, not two index
    arrays of eight) and its number (:class:`~dimbsvm.model_selection.bodies.AssignedRows`);
    a final model's are every row, built where used.
    """
    if "test_from" in split:
        return plan.add(fold_rows, dict(y=y, **split), name="rows")
    if split.get("fold") is None:
        return plan.add(every_row, dict(y=y), name="rows")
    key = (int(split["n_splits"]), int(split["seed"]))
    assignments = {} if assignments is None else assignments
    if key not in assignments:
        assignments[key] = plan.add(fold_assignment, dict(y=y, n_splits=key[0], seed=key[1]), name="assignment",
                                    priority=10)
    return plan.add(assigned_rows, dict(assignment=assignments[key], fold=int(split["fold"])), name="rows")


def layouts_of(specs, labels, *, block_rows, client, retries):
    """``specs`` with the :class:`FoldLayout` of each fold planned from counts, computed by tasks over ``labels``.

    One task per repeat (and one for a final model's chunks, if no repeat
    runs) counts each chunk's rows of each class and fold where the labels
    are read; the driver receives those counts, a few numbers per chunk.
    """
    wanted = [spec for spec in specs if spec.train is None and spec.layout is None]
    if not wanted:
        return specs
    if not block_rows:
        raise ValueError(f"fold {wanted[0].key} has no rows: only the folds of a store are planned from counts")
    plan = TaskPlan()
    y_ref = plan.share(labels)
    repeats = {}
    for spec in wanted:
        n_splits, seed = spec.split["n_splits"], spec.split["seed"]
        if seed is not None and (n_splits, seed) not in repeats:
            repeats[n_splits, seed] = plan.add(chunk_fold_counts, dict(y=y_ref, n_splits=n_splits, seed=seed,
                                                                        block_rows=block_rows),
                                               watch=True, name="fold_counts")
    every = None
    if any(spec.split["seed"] is None for spec in wanted) and not repeats:
        every = plan.add(chunk_class_counts, dict(y=y_ref, block_rows=block_rows), watch=True, name="class_counts")
    results = run_plan(plan, client=client, retries=retries, progress=False, label="fold counts")
    counted = {key: results[ref.id] for key, ref in repeats.items()}
    if every is not None:
        classes, by_chunk = results[every.id]
    else:  # every row's classes per chunk: any repeat's folds summed
        classes, by_fold = next(iter(counted.values()))
        by_chunk = by_fold.sum(axis=1)
    laid = {}
    for spec in wanted:
        split = spec.split
        if split["seed"] is None:
            layout = FoldLayout(classes, by_chunk, np.zeros_like(by_chunk), block_rows)
        else:
            layout = FoldLayout.of_repeat(*counted[split["n_splits"], split["seed"]], fold=split["fold"],
                                          block_rows=block_rows)
        laid[spec.key] = replace(spec, layout=layout)
    return [laid.get(spec.key, spec) for spec in specs]
