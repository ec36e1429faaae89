"""The hook by which an estimator adds its own fit tasks to a fold's plan, and what the engine hands it.

The fold engine (:func:`~dimbsvm.model_selection.folds.add_fold`) keeps what
every estimator shares: the fold's rows, its preprocessing (the prepare
task), one fit task for a plain estimator, the scoring of the test rows, the
record and the saving of parts. An estimator that satisfies
:class:`PlansFoldFit` plans its fit instead: the engine builds a
:class:`FoldContext` and the estimator adds its tasks to ``context.plan``
(calling ``context.prepare`` for the fold's prepared steps where its tasks
need them) and returns a :class:`FoldFit`. The ensemble's bagging, pooled
out-of-bag margins, threshold search and screening live beside it this way
(:mod:`dimbsvm.svm.ensemble_fold`), and the engine names none of them, as
scikit-learn's ``BaseSearchCV`` hands a search strategy its
``evaluate_candidates`` and knows nothing of the strategy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, runtime_checkable

__all__ = ["FoldContext", "FoldFit", "PartStore", "PlansFoldFit", "RunSpill"]


@dataclass(frozen=True)
class FoldContext:
    """One fold as the engine hands it to an estimator that plans its own fit tasks.

    Attributes
    ----------
    plan : TaskPlan
        The plan every fold of the run is added to.
    key : tuple
        The fold's key (``(seed, fold)``, or ``("final",)`` for a model).
    X, y : TaskRef
        The data (an array or a row handle on a store) and the labels, shared once in ``plan``.
    rows : callable
        ``rows()``: the task whose result is the fold's
        :class:`~dimbsvm.fold_data.prepared.FoldRows` (added the first time
        it is asked for; a store fold planned from its counts needs it only
        where a task looks rows up in the whole fold).
    rows_from_labels : callable or None
        ``rows_from_labels(labels)``: the fold's rows computed from the labels
        where a task runs (a store fold known by its counts, whose rows never
        travel); ``None`` where the fold is given by its rows.
    at : callable
        ``at(span)``: the keyword arguments (``rows``, ``span`` and maybe
        ``place``) by which a task of one stored chunk finds the fold's rows in
        it (:func:`~dimbsvm.fold_data.spans.chunk_rows`).
    prepare : callable
        ``prepare(ranges=None)``: adds the fold's prepare task once and returns
        it. ``ranges``: per-chunk tasks whose results carry the chunk's
        min-max range (a :class:`~dimbsvm.svm.bag_bodies.ChunkPass`), read by
        the estimator's own tasks, so that the scaler is merged from them
        instead of from reads of its own (only where :attr:`merged_ranges`).
    train_labels : ndarray or ClassCounts
        The fold's training labels in this process, or only their class
        counts (a store fold planned from its counts: this process holds no row).
    train_chunks : list of (int, int)
        The stored chunks of the training rows (empty for data in memory).
    n_train, n_test : int
    in_store : bool
        The data is a row handle on a store (tasks per stored chunk).
    merged_ranges : bool
        The scaler is merged from per-chunk min-max ranges.
    n_feature_stages : int
        Feature stages fitted in the prepare task (the estimator sees their output).
    stage : object or None
        A stored feature stage, looked up by row number.
    part_store : PartStore or None
        Where finished parts are saved as they arrive and found on resume.
    run_spill : RunSpill or None
        Where per-chunk tasks keep what other tasks read a slice of.
    sample_weight : TaskRef or None
        One weight per row of ``X`` (``fit(X, y, sample_weight)`` on arrays
        in memory); ``None`` for a job's folds, which carry no row weights.
    fit_params : TaskRef or None
        The base estimator's routed ``fit`` arguments (scikit-learn's metadata
        routing, :mod:`dimbsvm.svm.routing`), row-aligned ones one per row of
        ``X``; ``None`` without routing.
    """

    plan: object
    key: tuple
    X: object
    y: object
    rows: Callable
    rows_from_labels: Callable | None
    at: Callable
    prepare: Callable
    train_labels: object
    train_chunks: list
    n_train: int
    n_test: int
    in_store: bool
    merged_ranges: bool
    n_feature_stages: int = 0
    stage: object = None
    part_store: PartStore | None = None
    run_spill: RunSpill | None = None
    sample_weight: object = None
    fit_params: object = None


@dataclass(frozen=True)
class FoldFit:
    """What an estimator's fit tasks give the engine.

    Attributes
    ----------
    prepared : TaskRef
        The fold's prepare task (``context.prepare()``).
    fitted : TaskRef
        The task whose result is ``(fitted estimator, seconds of its fit tasks)``.
    by_chunk : bool
        The fit ran tasks per stored chunk: the test rows are then scored a
        chunk per task too, even where they lie in one chunk.
    costs : FoldCosts
        The fold's task costs (the engine prices the scoring of test rows by them).
    saved_parts : dict
        ``{task id: (fold key, part index)}`` of watched tasks whose results the
        engine saves in the part store as they arrive.
    reused : int
        Parts loaded from the part store instead of refitted.
    """

    prepared: object
    fitted: object
    by_chunk: bool
    costs: object
    saved_parts: dict = field(default_factory=dict)
    reused: int = 0


@runtime_checkable
class PlansFoldFit(Protocol):
    """An estimator that adds its own fit tasks to a fold's plan (the hook of the fold engine)."""

    def plan_fold_fit(self, context: FoldContext) -> FoldFit:
        """Add the fold's fit tasks to ``context.plan``; what the engine needs of them."""


class RunSpill(Protocol):
    """Where a fold's chunk tasks keep what other tasks read a slice of: sorted out-of-bag margin runs, read back
    a range at a time, an ensemble's bag rows, read back a member at a time, and chunks' large ranges, read
    back by the fold's prepare task.

    The job layer gives one (:class:`dimbsvm.jobs.threshold_runs.ThresholdRunDirectory`);
    it is pickled into the tasks, so it must be small and picklable.
    """

    def write(self, key, first, run):
        """Keep fold ``key``'s run whose first training row is ``first``; what stands for it (with the run's
        ``values``, ``rows`` and ``positive``), or ``None`` where this process cannot (the run is kept)."""

    def write_pieces(self, key, first, pieces):
        """Keep fold ``key``'s bag rows of a chunk (a list of ``CountedPiece``, one a member), ``first`` the
        chunk's first training row; what stands for the list (``[i]`` gives member ``i``'s piece), or ``None``
        where this process cannot (the pieces are kept)."""

    def write_range(self, key, first, chunk_range):
        """Keep fold ``key``'s range of a chunk (as ``block_range`` gives it), ``first`` the chunk's first
        training row; what stands for it (its ``read()`` gives the range back), or ``None`` where this process
        cannot or the range is small (the range is kept)."""

    def forget(self, key) -> None:
        """Drop fold ``key``'s runs, bag rows and ranges once the fold has finished."""


class PartStore(Protocol):
    """Where finished parts of multi-part folds are kept, and found again on resume.

    The job layer gives one (:class:`dimbsvm.jobs.part_store.PartDirectory`:
    a directory of skops files in the partial run directory); the engine
    only calls these methods, so it does no I/O of its own.
    """

    def load(self, key, index):
        """The saved part ``index`` of fold ``key``, or ``None``."""

    def save(self, key, index, part) -> None:
        """Keep a finished part."""

    def forget(self, key) -> None:
        """Drop a fold's parts once the fold's result is saved."""

    def flush(self) -> None:
        """Wait until every save and forget asked for is done (a store may do them in the background)."""
