"""Run many independent tasks on a client and collect their results in order."""

from __future__ import annotations

import logging
import sys
import uuid
import warnings

import dask
from distributed import as_completed

logger = logging.getLogger(__name__)

__all__ = ["run_tasks", "share", "show_progress", "tree_sum"]


def run_tasks(client, func, calls, *, shared=None, retries=2, progress=True, label="tasks", on_result=None):
    """Submit ``func(**shared, **kwargs)`` for every ``kwargs`` in ``calls``.

    Parameters
    ----------
    client : distributed.Client
    func : callable
        A module-level function (pickles by reference).
    calls : list of dict
        Per-task keyword arguments: seeds and fold numbers, not data.
    shared : dict, default=None
        Keyword arguments common to all tasks (e.g. the data). Each value is
        scattered to the cluster once and passed to tasks by reference.
    retries : int, default=2
        How often a task that raised is retried before the error is raised
        here. Work lost with a dead worker is recomputed by Dask regardless.
    progress : bool, default=True
        Show ``done/total`` on stderr while tasks finish.
    label : str
        What the tasks are, for the progress line.
    on_result : callable, default=None
        Called as ``on_result(i, result)`` as each task finishes (in
        completion order), e.g. to save results so an interrupted run can
        resume.

    Returns
    -------
    results : list
        ``func``'s return values, in the order of ``calls``.
    """
    shared = dict(shared or {})
    refs = {key: share(client, value) for key, value in shared.items()}
    futures = [client.submit(func, **refs, **kwargs, pure=False, retries=retries) for kwargs in calls]
    index = {future.key: i for i, future in enumerate(futures)}
    results = [None] * len(futures)
    total = len(futures)
    show = progress and total > 0
    try:
        for done, future in enumerate(as_completed(futures), start=1):
            i = index[future.key]
            results[i] = future.result()  # re-raises the task's own error
            if on_result is not None:
                on_result(i, results[i])
            if show:
                show_progress(done, total, label)
    finally:
        if show:
            sys.stderr.write("\n")
        for future in futures:
            future.cancel()
    logger.info("%d %s finished", total, label)
    return results


def share(client, value):
    """Put ``value`` on the cluster so that losing a worker cannot lose it.

    Scattered data cannot be recomputed, and Dask's active memory manager
    drops "extra" replicas, so a worker killed while holding the only copy
    would fail every task that needs it. Instead the value becomes the
    result of a trivial task: the scheduler keeps the task's input, and if
    the worker holding the result dies the task simply runs again. It is
    sent once; tasks receive it by reference.
    """
    with warnings.catch_warnings():
        # the value travels inside this one task's spec on purpose
        warnings.filterwarnings("ignore", message="Large object", category=UserWarning)
        return client.submit(_identity, value, pure=False, key=f"shared-{type(value).__name__}-{uuid.uuid4().hex}")


def _identity(value):
    return value


def show_progress(done, total, label):
    """Draw ``[####....] done/total label`` on stderr, overwriting the line."""
    width = 30
    filled = int(width * done / total)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label}")
    sys.stderr.flush()


def tree_sum(terms):
    """One delayed sum of delayed terms, added pairwise as a tree.

    A flat sum would make one task hold every term; the tree holds two.

    Parameters
    ----------
    terms : list of dask.delayed.Delayed
        At least one.

    Returns
    -------
    total : dask.delayed.Delayed
    """
    while len(terms) > 1:
        terms = [dask.delayed(_add)(*terms[i:i + 2]) if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]


def _add(a, b):
    return a + b
