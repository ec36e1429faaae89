"""An :class:`~dimbsvm.svm.ensemble.EnsembleOTHRClassifier` fitted over a Dask array's chunks, on a client.

``fit(X, y)`` with ``X`` a Dask array and a client never brings the features
into this process. The array's row chunks are computed on the workers and
stay there while the fit runs; the labels (one per row) come here, where the
members' bags are drawn over them exactly as the in-memory fit draws them.
Then one plan on the client:

* per chunk, the rows of every member's bag that lie in it (a gather task);
* per member, its fit on its bag's rows gathered from the chunks, in the
  order the bag drew them (the member ``fit(X, y)`` fits);
* per chunk, every member's margins on the chunk's rows out of its bag,
  summed in member order (the pooled out-of-bag margins of a shared shift).

The shared shift is then searched here on the pooled margins, as the
in-memory fit searches it, so the fitted ensemble is the in-memory fit's.
This process holds the labels, the pooled margins and their counts (25 bytes
a row, and the search's sort of the margins), never a feature. Settings that
need the features of rows outside a member's bag in one place (``member_margins="oob"``, ``candidates="othr"`` for the shared
shift, ``param_grid``) are fitted in memory instead, with a warning.
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp
from dask.base import is_dask_collection
from sklearn.utils.validation import column_or_1d

from dimbsvm.parallel import TaskPlan, run_plan
from dimbsvm.rows import stack_rows
from dimbsvm.svm._base import signed_margins
from dimbsvm.svm.bagging import DrawnBag
from dimbsvm.svm.members import fit_member, pooled_mean

__all__ = ["chunked_fit_unsupported", "fit_gathered_member", "fit_members_over_chunks", "fit_over_chunks",
           "gather_bag_rows", "pooled_oob_chunk"]

logger = logging.getLogger(__name__)


def chunked_fit_unsupported(ensemble) -> str | None:
    """Why ``ensemble`` cannot be fitted over chunks (it needs out-of-bag features in one place), or ``None``."""
    if ensemble.param_grid is not None:
        return "param_grid ranks settings on every row's margins"
    if ensemble.threshold == "member" and ensemble.member_margins == "oob":
        return "member_margins='oob' searches each member on the features of its out-of-bag rows"
    if ensemble.threshold == "pooled_oob" and ensemble.candidates == "othr":
        return "candidates='othr' searches the shared shift among the features of every row"
    return None


def fit_over_chunks(ensemble, X, y, client):
    """Fit ``ensemble`` over the chunks of Dask array ``X`` on ``client``; the fitted ensemble.

    ``y``: the labels, a Dask array or array-like (brought here). Called by
    ``EnsembleOTHRClassifier.fit`` when :func:`chunked_fit_unsupported` is
    ``None``.
    """
    X = _row_chunked(X)
    y = column_or_1d(np.asarray(y.compute() if is_dask_collection(y) else y), warn=True)
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"Found input variables with inconsistent numbers of samples: [{X.shape[0]}, "
                         f"{y.shape[0]}]")
    positive = ensemble._set_classes(y)
    ensemble._resolve_bags(positive.size, int(np.count_nonzero(positive)))
    ensemble.n_features_in_ = int(X.shape[1])
    seeds, specs = ensemble._member_tasks()
    logger.info("fitting %d members over %d chunks on %s", len(seeds), X.numblocks[0], client)
    members, pooled = fit_members_over_chunks(X, y, positive, seeds, specs, client)
    ensemble.seeds_ = seeds
    return ensemble._set_members(X, positive, members, pooled_margins=pooled)


def _row_chunked(X):
    """Dask array ``X`` as a 2-D numeric array cut along rows only (each chunk whole rows)."""
    if X.ndim != 2:
        raise ValueError(f"Expected a 2D array, got a {X.ndim}D Dask array of shape {X.shape}")
    if not np.issubdtype(X.dtype, np.number) or np.issubdtype(X.dtype, np.complexfloating):
        raise ValueError(f"EnsembleOTHRClassifier needs numeric features; the Dask array holds {X.dtype}")
    if any(np.isnan(X.chunks[0])):
        raise ValueError("the Dask array's row chunks have unknown sizes: call X.compute_chunk_sizes() first")
    return X.rechunk({1: -1})


def fit_members_over_chunks(X, y, positive, seeds, specs, client):
    """Fit every member over the chunks of Dask array ``X`` on ``client``; the members and the pooled margins.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
        Cut along rows only.
    y : ndarray of shape (n_samples,)
        The labels.
    positive : ndarray of bool of shape (n_samples,)
        ``y == pos_label``.
    seeds, specs
        The ensemble's member seeds and :class:`~dimbsvm.svm.members.MemberSpec`
        (:meth:`~dimbsvm.svm.ensemble_plan.MemberPlanning._member_tasks`).
    client : distributed.Client

    Returns
    -------
    members : list of OTHRMember
    pooled : tuple of ndarray or None
        ``(margins, counts)`` as :func:`~dimbsvm.svm.members.pooled_oob_margins`
        gives them, where the specs keep out-of-bag margins (a shared shift).
    """
    bounds = np.cumsum((0, *X.chunks[0]))
    blocks = client.compute(list(X.to_delayed().ravel()))  # computed and kept on the workers, not sent here
    pooled = bool(specs[0].keep_oob)
    drawn = [spec.draw_bag(None, seed, positive=positive,
                           classes=(np.flatnonzero(positive), np.flatnonzero(~positive)))
             for seed, spec in zip(seeds, specs)]
    distinct = [np.unique(bag.bag) for bag in drawn]
    # per chunk, every member's distinct bag rows in it, numbered within the chunk
    in_chunk = [[rows[np.searchsorted(rows, lo):np.searchsorted(rows, hi)] - lo for rows in distinct]
                for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist())]
    plan = TaskPlan()
    gathered = [plan.add(gather_bag_rows, {"block": block, "wanted": in_chunk[c], "chunk": c}, name="gather")
                for c, block in enumerate(blocks)]
    fitted = []
    for m, (seed, spec, bag, rows) in enumerate(zip(seeds, specs, drawn, distinct)):
        local = DrawnBag(bag.seed, int(rows.size), np.searchsorted(rows, bag.bag), bag.n_draws, bag.random_state)
        fitted.append(plan.add(fit_gathered_member, {
            "pieces": gathered, "index": m, "y": y[rows], "seed": int(seed), "drawn": local,
            "options": dict(spec.options(), keep_oob=False)}, watch=True, name="member"))
    sums = [plan.add(pooled_oob_chunk, {"block": block, "members": fitted, "in_bag": in_chunk[c]}, watch=True,
                     name="oob") for c, block in enumerate(blocks)] if pooled else []
    try:
        results = run_plan(plan, client=client, label="ensemble members over chunks")
    finally:
        client.cancel(blocks)
    members = [results[ref.id] for ref in fitted]
    if not pooled:
        return members, None
    counts = np.concatenate([results[ref.id][1] for ref in sums])
    return members, (pooled_mean(np.concatenate([results[ref.id][0] for ref in sums]), counts), counts)


def gather_bag_rows(*, block, wanted, chunk) -> list:
    """Task body: the rows ``wanted[m]`` (increasing, within the chunk) of ``block`` for every member ``m``.

    Every row of the chunk is checked to be finite first, as the in-memory
    fit checks every row (a row in no bag is read here and nowhere else).
    """
    block = _rows_of(block)
    if not np.isfinite(block.data if sp.issparse(block) else block).all():
        raise ValueError(f"Input X contains NaN or infinity (in chunk {chunk}); EnsembleOTHRClassifier does not "
                         "accept missing values (impute them first)")
    return [block[rows] for rows in wanted]


def _rows_of(block):
    """A chunk as rows: CSR for a sparse chunk (scikit-learn's SVMs take it as it is), else an ndarray."""
    return sp.csr_matrix(block) if sp.issparse(block) else np.asarray(block)


def fit_gathered_member(*, pieces, index, y, seed, drawn, options):
    """Task body: member ``index`` fitted on its bag's distinct rows gathered from every chunk, in row order.

    ``drawn`` is the member's bag numbered within those rows: the rows it
    fits on, in the order it drew them, are the in-memory fit's.
    """
    X = stack_rows([chunk[index] for chunk in pieces])
    return fit_member(X, np.asarray(y), seed, drawn=drawn, **options)


def pooled_oob_chunk(*, block, members, in_bag):
    """Task body: per row of one chunk, the sum of the members' margins out of their bags, and their count.

    Summed in member order, as :func:`~dimbsvm.svm.members.pooled_oob_margins`
    sums them: the same values on any number of workers.
    """
    block = _rows_of(block)
    total = np.zeros(block.shape[0])
    counts = np.zeros(block.shape[0], dtype=np.int64)
    for member, bag in zip(members, in_bag):
        out = np.ones(block.shape[0], dtype=bool)
        out[bag] = False
        rows = np.flatnonzero(out)
        if rows.size:
            total[rows] += signed_margins(member.estimator, block[rows], member.margin_sign)
            counts[rows] += 1
    return total, counts
