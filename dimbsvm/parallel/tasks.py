"""The one way dimbsvm runs tasks: in-process without a client, on the cluster with one.

Two entries:

* :func:`map_tasks` - independent calls of one function (kNN partitions,
  feature blocks, chunks of an SGD epoch);
* :class:`TaskPlan` + :func:`run_plan` - calls that depend on each other's
  results (a fold's preprocessing, then its ensemble members, then the
  scoring of its test rows), built by the fold engine
  (:mod:`dimbsvm.model_selection`) and submitted here as one plan, so members
  of different folds and the final model run side by side (in order, at most
  :data:`MAX_IN_FLIGHT` unfinished tasks at a time).

Without a client every call runs here, in order, in this process. With one,
every call is a task run through :func:`dimbsvm.parallel.policy.run_task`
(thread limits, no retries of deterministic errors); a task's own exception
reaches the caller as itself. Large shared inputs go through :func:`share`,
once, never inside each task's spec.
"""

from __future__ import annotations

import logging
import sys
import threading
import uuid
import warnings
from collections import deque

from .clients import current_client
from .policy import raise_failure, run_task, worker_threads
from .plan import TaskPlan, TaskRef, Unfinished, last_readers, resolve_refs
from .processes import effective_n_jobs, run_in_processes
from .progress import Progress

__all__ = ["MAX_IN_FLIGHT", "TaskPlan", "TaskRef", "compute", "map_tasks", "run_plan", "share"]

logger = logging.getLogger(__name__)

#: Tasks of a plan submitted and not yet finished, at most (:func:`run_plan`). A benchmark suite
#: is a plan of 10^5 tasks or more; sent at once they flood the scheduler, and an embedded one
#: (in this process) stops reading until the client's connection to it times out.
MAX_IN_FLIGHT = 10_000
#: Seconds a failing plan waits for the cancellation of its remaining tasks to be sent.
CANCEL_SECONDS = 10.0


def map_tasks(func, calls, *, client=None, shared=None, retries=2, progress=False, label="tasks",
              on_result=None, n_jobs=None) -> list:
    """``func(**shared, **call)`` for every ``call`` in ``calls``, results in the order of ``calls``.

    Parameters
    ----------
    func : callable
        A module-level function (pickles by reference); a plain task body.
    calls : list of dict
        Per-task keyword arguments: seeds, row ranges, paths - not data.
    client : distributed.Client or None, keyword-only
        ``None`` runs the calls here, one after another.
    shared : dict, default=None
        Keyword arguments common to all calls (e.g. the data); on a cluster
        each value is sent once (:func:`share`) and passed by reference.
    retries : int, default=2
        Retries of a task that met a transient (I/O) error. Deterministic
        errors are raised at once; work lost with a worker is recomputed by
        Dask regardless.
    progress : bool, default=False
        Show progress on stderr.
    label : str
        What the tasks are, for progress and the log.
    on_result : callable, default=None
        ``on_result(i, result)`` as each call finishes (completion order), e.g.
        to save results so an interrupted run can resume.
    n_jobs : int, default=None
        Without a client: processes to run the calls on
        (:mod:`~dimbsvm.parallel.processes`; ``None``: here, in order).

    Returns
    -------
    list
    """
    plan = TaskPlan()
    refs = {key: plan.share(value) for key, value in (shared or {}).items()}
    tasks = [plan.add(func, dict(refs, **call), watch=True, name=label) for call in calls]
    index = {ref.id: i for i, ref in enumerate(tasks)}

    def collect(ref, result):
        if on_result is not None:
            on_result(index[ref.id], result)

    results = run_plan(plan, client=client, retries=retries, progress=progress, label=label, on_result=collect,
                       n_jobs=n_jobs)
    return [results[ref.id] for ref in tasks]


def run_plan(plan: TaskPlan, *, client=None, retries=2, progress=False, label="tasks", on_result=None,
             errors="raise", max_in_flight=MAX_IN_FLIGHT, n_jobs=None) -> dict:
    """Run every task of ``plan``; return ``{task id: result}`` of the watched ones.

    Parameters
    ----------
    plan : TaskPlan
    client : distributed.Client or None, keyword-only
        ``None`` runs the tasks here, in order.
    retries, progress, label
        As :func:`map_tasks`.
    on_result : callable, default=None
        ``on_result(ref, result)`` as each watched task finishes.
    errors : {"raise", "return"}, default="raise"
        ``"raise"``: the first task error is raised (as itself). ``"return"``:
        a watched task that failed, or whose inputs did, has a
        :class:`~dimbsvm.parallel.policy.TaskFailure` as its result and the
        rest of the plan goes on (a benchmark records the failure of one fold
        and keeps the others).
    max_in_flight : int, default=MAX_IN_FLIGHT
        On a cluster, tasks submitted and not yet finished at most: the plan
        is submitted in its order, and past this many the client waits for
        the oldest before it submits more.
    n_jobs : int, default=None
        Without a client: the processes to run the tasks on, as scikit-learn
        counts them (``None`` or ``1``: here, in order; ``-1``: every core;
        :mod:`~dimbsvm.parallel.processes`). Ignored with a client, and
        inside a Dask worker's task (its cluster's threads are the parallelism).
    """
    if errors not in ("raise", "return"):
        raise ValueError(f"errors must be 'raise' or 'return'; got {errors!r}")
    if client is None and effective_n_jobs(n_jobs) > 1 and not _in_worker_task():
        return run_in_processes(plan, effective_n_jobs(n_jobs), progress=progress, label=label, on_result=on_result,
                                errors=errors)
    if client is None:
        return _run_here(plan, progress=progress, label=label, on_result=on_result, errors=errors)
    if max_in_flight < 2:
        raise ValueError(f"max_in_flight must be at least 2; got {max_in_flight!r}")
    return _run_on_cluster(plan, client, retries=retries, progress=progress, label=label, on_result=on_result,
                           errors=errors, max_in_flight=max_in_flight)


def _in_worker_task() -> bool:
    # a process that never imported distributed runs no worker (and is not made to import it here)
    return "distributed" in sys.modules and worker_threads() is not None


def _run_here(plan, *, progress, label, on_result, errors):
    results, watched = {}, {}
    costs = plan.task_costs()
    bar = Progress(len(costs), label, enabled=progress, total_work=sum(costs.values()))
    unfinished = Unfinished(costs)
    last_use = last_readers(plan)
    call = run_task if errors == "return" else _call
    try:
        for i, task in enumerate(plan.tasks):
            if task.shared:
                results[i] = task.kwargs["value"]
                continue
            kwargs = {key: resolve_refs(value, results) for key, value in task.kwargs.items()}
            results[i] = call(task.func, kwargs)  # with errors="return": failures become values, as on a cluster
            for j in last_use.get(i, ()):
                if not plan.tasks[j].watch:
                    results.pop(j, None)  # an intermediate result no later task reads
            if task.watch:
                watched[i] = results[i]
                if on_result is not None:
                    on_result(TaskRef(i, task.name), results[i])
            bar.advance(1, costs[i], unfinished.finish(i))
    finally:
        bar.close()  # a terminal's line ends before an error is printed
    logger.info("%d %s finished in-process", plan.n_watched, label)
    return watched


def _call(func, kwargs):
    return func(**kwargs)


def _run_on_cluster(plan, client, *, retries, progress, label, on_result, errors, max_in_flight):
    from distributed import as_completed

    futures, in_flight, submitted = {}, deque(), {}
    last_use = last_readers(plan)
    completed = as_completed()
    results = {}
    costs = plan.task_costs()
    bar = Progress(len(costs), label, enabled=progress, total_work=sum(costs.values()),
                   parallelism=sum(client.nthreads().values()))
    unfinished = Unfinished(costs)
    homes = _affinity_workers(client) if any(task.affinity is not None for task in plan.tasks) else []

    def collect(batch):
        for future in batch:
            i = submitted[future.key]
            if plan.tasks[i].watch:
                result = future.result()
                results[i] = raise_failure(result) if errors == "raise" else result  # a task's own error, as itself
                if on_result is not None:
                    on_result(TaskRef(i, plan.tasks[i].name), results[i])
            bar.advance(1, costs[i], unfinished.finish(i))  # every task, watched or not, as it finishes

    tag = uuid.uuid4().hex[:8]
    try:
        for i, task in enumerate(plan.tasks):
            if task.shared:
                futures[i] = share(client, task.kwargs["value"])
                continue
            kwargs = {key: resolve_refs(value, futures) for key, value in task.kwargs.items()}
            home = {} if task.affinity is None or not homes else \
                {"workers": [homes[task.affinity % len(homes)]], "allow_other_workers": True}
            future = client.submit(run_task, task.func, kwargs, pure=False, retries=retries,
                                   priority=task.priority, key=f"{task.name}-{tag}-{i}", **home)
            futures[i] = future
            in_flight.append(future)
            submitted[future.key] = i
            completed.add(future)
            # An intermediate result stays on the cluster while a submitted task reads it; the
            # client lets go once its last reader is submitted. Watched futures are kept.
            for j in last_use.get(i, ()):
                if not plan.tasks[j].watch:
                    futures.pop(j, None)
            if len(in_flight) >= max_in_flight:
                in_flight = _wait_for_room(in_flight, max_in_flight)
                if completed.has_ready():
                    collect(completed.next_batch(block=False))
        for batch in completed.batches():
            collect(batch)
    except BaseException:
        _cancel(client, [*in_flight, *futures.values()])  # stop what is left of the plan
        raise
    finally:
        bar.close()
    # Finished: the futures are released, not cancelled. Cancelling a finished watched task that
    # other tasks read (a search's inner scores) makes the scheduler cancel its dependents too, and
    # it trips an assertion on those no client holds ("Exception while handling op register-client").
    futures.clear()
    in_flight.clear()
    logger.info("%d %s finished on the cluster", plan.n_watched, label)
    return results


def _affinity_workers(client) -> list:
    """The cluster's workers, in address order: affinity ``k`` goes to the ``k mod n``-th."""
    try:
        return sorted(client.scheduler_info(n_workers=-1)["workers"])
    except Exception:  # noqa: BLE001 - affinity is a preference: without the list, tasks go anywhere
        logger.debug("no worker list for task affinity", exc_info=True)
        return []


def _wait_for_room(in_flight: deque, max_in_flight: int) -> deque:
    """The unfinished futures of ``in_flight`` once at most half of ``max_in_flight`` are left.

    Waits for the oldest: the plan's order is the order its tasks can run, so
    they are the first to finish, and the newer half keeps the workers busy
    meanwhile. Every dependency of a submitted task is submitted, so the
    wait ends.
    """
    from distributed import wait

    in_flight = deque(future for future in in_flight if not future.done())
    if len(in_flight) >= max_in_flight:
        oldest = [in_flight.popleft() for _ in range(len(in_flight) - max_in_flight // 2)]
        wait(oldest)
    return in_flight


def _cancel(client, futures) -> None:
    """Cancel ``futures``, the error being raised meanwhile left as it is.

    A client that lost its scheduler cannot send the cancellation (once
    closed it raises ``ClosedClientError``); its futures were cancelled by
    distributed already, and the error on its way up says why.
    """
    if not futures or getattr(client, "status", "running") in ("closing", "closed"):
        return  # (a client closed by a watch, e.g. no worker ever joined: sending would wait forever)

    def cancel():
        try:
            client.cancel(futures)
        except Exception:  # noqa: BLE001 - the error already being raised is the one to report
            logger.debug("could not cancel the rest of the plan", exc_info=True)

    # bounded: a client closed from another thread meanwhile never answers, and the error must go up
    sender = threading.Thread(target=cancel, name="dimbsvm-cancel-plan", daemon=True)
    sender.start()
    sender.join(CANCEL_SECONDS)
    if sender.is_alive():
        logger.debug("cancelling the rest of the plan did not finish within %g s", CANCEL_SECONDS)


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


def compute(*collections, client=None):
    """``dask.compute`` of Dask collections on ``client`` or the current client, else with threads here."""
    client = current_client(client)
    if client is not None:
        return tuple(client.compute(list(collections), sync=True))
    import dask  # here, not at the top: a plan of plain tasks run in this process needs no Dask

    return dask.compute(*collections)
