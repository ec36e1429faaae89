"""Run many independent tasks on a client and collect their results in order."""

from __future__ import annotations

import logging
import sys

from distributed import as_completed

logger = logging.getLogger(__name__)

__all__ = ["run_tasks", "share", "show_progress"]


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
    """Scatter ``value`` to every worker, so that losing one worker does not lose it.

    Scattered data cannot be recomputed: a copy held by a single worker that
    is killed (SIGKILL, memory limit) would fail every task that needs it.
    Every task of a job reads the shared data (labels, the store handle), so
    every worker needs a copy anyway; a worker that joins later gets one
    from the others when it first runs such a task.
    """
    return client.scatter(value, broadcast=True, hash=False)


def show_progress(done, total, label):
    """Draw ``[####....] done/total label`` on stderr, overwriting the line."""
    width = 30
    filled = int(width * done / total)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label}")
    sys.stderr.flush()
