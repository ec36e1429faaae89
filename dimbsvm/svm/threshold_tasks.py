"""The ensemble's shared threshold searched by range tasks instead of inside the one assemble task.

Task bodies around :mod:`dimbsvm.svm.range_threshold` (which holds the
arithmetic and why its result is the serial search's, bit for bit), and
:func:`add_ranged_search`, which adds them to a fold's plan: per stored chunk
its pooled out-of-bag margins as a sorted run (:func:`oob_run_block`) and a
small digest of it; one plan task (the positives, the bandwidth, the range
bounds); per value range a merge of every run's slice, its summary and the
candidates it holds; :func:`~dimbsvm.model_selection.chunk_bodies.assemble_fold`
then scores the at most ``max_candidates`` candidates. No Dask here.
"""

from __future__ import annotations

import logging


from ..fold_data.spans import ChunkPlace, chunk_index, chunk_rows, span_labels
from . import range_threshold as ranges
from .pooled_oob import pooled_oob_block

__all__ = ["MAX_THRESHOLD_RANGES", "ROWS_PER_RANGE", "add_ranged_search", "digest_block", "oob_run_block",
           "pick_block", "plan_block", "range_merge_block", "range_search_params", "summary_block"]

logger = logging.getLogger(__name__)

#: Value ranges per fold at most (enough for 64 workers).
MAX_THRESHOLD_RANGES = 64
#: Training rows per value range: fewer, larger ranges where there are few rows (each range is
#: three short tasks on the fold's critical path, each cheap per row).
ROWS_PER_RANGE = 250_000

# critical-path tasks of the fold: ahead of queued chunk work of other folds
_PRIORITY = 5


def range_search_params(estimator):
    """The threshold search's parameters when range tasks can run it exactly, else ``None``.

    Only midpoint candidates (eq. 23's need each minority row's neighbours in
    input space) and no ``probability`` (Platt's sigmoid is fitted on every
    pooled margin).
    """
    params = estimator.get_params(deep=False)
    keys = ("objective", "smoothing", "tolerance", "min_precision", "max_candidates")
    if params.get("candidates") != "midpoints" or params.get("probability") or not all(k in params for k in keys):
        return None
    return {key: params[key] for key in keys}


def oob_run_block(X, y, prepared, rows, parts, *, span, pos_label, place: ChunkPlace | None = None, spill=None,
                  key=None):
    """Task body: one chunk's pooled out-of-bag margins (:func:`pooled_oob_block`) as a sorted run with classes.

    Only the chunk's labels are read. With ``spill`` (a
    :class:`~dimbsvm.fold_data.context.RunSpill`) the run is kept there
    for fold ``key`` where this process can, and what it returns stands for
    the run (the range tasks then read only their slices of it).
    """
    chunk = pooled_oob_block(X, prepared, rows, parts, span=span, place=place)
    train = chunk_rows(rows, span, place).train
    positive = span_labels(y, span[0], span[1])[train - span[0]] == pos_label
    run = ranges.sorted_run(chunk.first, chunk.margins, chunk.counts, chunk.order, positive)
    spilled = None if spill is None else spill.write(key, chunk.first, run)
    return run if spilled is None else spilled


def digest_block(run):
    """Task body: :func:`~dimbsvm.svm.range_threshold.run_digest`."""
    return ranges.run_digest(run)


def plan_block(digests, *, smoothing, n_ranges):
    """Task body: :func:`~dimbsvm.svm.range_threshold.plan_ranges`."""
    return ranges.plan_ranges(digests, smoothing=smoothing, n_ranges=n_ranges)


def range_merge_block(runs, plan, *, index):
    """Task body: :func:`~dimbsvm.svm.range_threshold.range_block` (reads a slice of every run)."""
    return ranges.range_block(runs, plan, index)


def summary_block(block, plan):
    """Task body: :func:`~dimbsvm.svm.range_threshold.range_summary`."""
    return ranges.range_summary(block, plan)


def pick_block(block, summaries, plan, *, index, max_candidates):
    """Task body: :func:`~dimbsvm.svm.range_threshold.pick_ranks`."""
    return ranges.pick_ranks(block, summaries, plan, index, max_candidates=max_candidates)


def add_ranged_search(plan, *, X, y, prepared, parts, at, train_chunks, n_train, pos_label, search, oob_cost=None,
                      spill=None, key=None):
    """Add the range tasks of one fold's shared threshold.

    Parameters
    ----------
    plan : TaskPlan
    X, y, prepared : TaskRef
    parts : list of TaskRef
        The fitted members.
    at : callable
        ``at(span)``: the keyword arguments by which a chunk's task finds the
        fold's rows in it (``rows``, ``span`` and possibly ``place``, as
        :func:`~dimbsvm.fold_data.spans.chunk_rows` takes them).
    train_chunks : list of (int, int)
        The stored chunks of the training rows.
    n_train : int
        How many training rows: one value range per :data:`ROWS_PER_RANGE`, at
        most one per chunk and :data:`MAX_THRESHOLD_RANGES`.
    pos_label : object
        The fold's positive class (as the members were planned with it).
    oob_cost : float, default=None
        Each chunk's out-of-bag task's cost (:meth:`TaskPlan.add`); the
        search's own tasks count as the plan's median.
    search : dict
        :func:`range_search_params`.
    spill : RunSpill, default=None
        Where the chunks' sorted runs are kept for fold ``key`` (see :func:`oob_run_block`).

    Returns
    -------
    dict
        The keyword arguments of ``assemble_fold`` that carry the search:
        ``range_plan``, ``range_summaries``, ``range_picks`` (task
        references) and ``range_search``.
    """
    runs = [plan.add(oob_run_block, dict(X=X, y=y, prepared=prepared, parts=parts, pos_label=pos_label, spill=spill,
                                         key=key, **at(span)),
                     name="oob", cost=oob_cost,
                     affinity=chunk_index(span))
            for span in train_chunks]
    digests = [plan.add(digest_block, dict(run=run), name="thr_digest", priority=_PRIORITY) for run in runs]
    n_ranges = max(1, min(len(train_chunks), MAX_THRESHOLD_RANGES, -(-int(n_train) // ROWS_PER_RANGE)))
    planned = plan.add(plan_block, dict(digests=digests, smoothing=search["smoothing"], n_ranges=n_ranges),
                       name="thr_plan", priority=_PRIORITY)
    blocks = [plan.add(range_merge_block, dict(runs=runs, plan=planned, index=i), name="thr_range", priority=_PRIORITY)
              for i in range(n_ranges)]
    summaries = [plan.add(summary_block, dict(block=block, plan=planned), name="thr_summary", priority=_PRIORITY)
                 for block in blocks]
    picks = [plan.add(pick_block, dict(block=block, summaries=summaries, plan=planned, index=i,
                                       max_candidates=search["max_candidates"]), name="thr_pick", priority=_PRIORITY)
             for i, block in enumerate(blocks)]
    return dict(range_plan=planned, range_summaries=summaries, range_picks=picks, range_search=search)
