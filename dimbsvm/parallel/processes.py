"""Run a plan's tasks on this machine's cores, in processes: ``n_jobs`` without a client.

An estimator's ``n_jobs`` (scikit-learn's convention: ``None`` is one, ``-1``
every core) runs the tasks of a :class:`~dimbsvm.parallel.tasks.TaskPlan` on
that many worker processes of joblib's reusable loky executor, the one
scikit-learn's own ``n_jobs`` uses. Processes, not threads: LIBLINEAR draws
from one process-wide generator, so its fits are serialised by a lock in a
process shared by several threads (:mod:`dimbsvm.svm._native_rng`).

Each shared value (the training rows, the labels) is written once to a
temporary folder with :func:`joblib.dump` and mapped read-only by each task
that reads it (not sent with every task); a task's inputs that are
other tasks' results go through this process, as on a cluster they go
through the scheduler, and a task that joins many of them (``gathers``, an
assembly) runs in this process, where they already are. Tasks run through
:func:`~dimbsvm.parallel.policy.run_task`, numeric libraries limited to this
machine's cores shared among the processes; they are submitted in the plan's
order as their inputs finish, at most two per process unfinished at a time.
Every task is a plain function of its arguments (seeds included), so the
results do not depend on ``n_jobs``.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass

from .plan import TaskRef, Unfinished, resolve_refs, task_inputs
from .policy import TaskFailure, raise_failure, run_task
from .progress import Progress

__all__ = ["effective_n_jobs", "run_in_processes"]

logger = logging.getLogger(__name__)

#: Unfinished tasks per process, at most: one running, one waiting, so a process never idles for lack of work
#: while the plan's later tasks (and their inputs) stay in this process.
_IN_FLIGHT_PER_PROCESS = 2


def effective_n_jobs(n_jobs) -> int:
    """The processes ``n_jobs`` asks for, as scikit-learn counts them.

    ``None`` and ``1``: one (run here, in order); ``-1``: every core; ``-2``:
    all but one; a positive number: that many.

    Raises
    ------
    ValueError
        For ``0`` or a value that is not an integer.

    Examples
    --------
    >>> effective_n_jobs(None), effective_n_jobs(3)
    (1, 3)
    """
    import joblib

    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0):
        raise ValueError(f"n_jobs must be None or a non-zero integer; got {n_jobs!r}")
    return int(joblib.effective_n_jobs(n_jobs))


@dataclass(frozen=True)
class _SharedFile:
    """A shared value written by :func:`joblib.dump`, read by each process once per plan."""

    path: str


def run_in_processes(plan, n_jobs: int, *, progress=False, label="tasks", on_result=None, errors="raise") -> dict:
    """Run every task of ``plan`` on ``n_jobs`` processes; ``{task id: result}`` of the watched ones.

    Parameters and results as :func:`~dimbsvm.parallel.tasks.run_plan`
    without a client (which calls this for ``n_jobs`` above one).
    """
    from joblib.externals.loky import get_reusable_executor

    n_jobs = int(n_jobs)
    threads = max(1, (os.cpu_count() or 1) // n_jobs)
    executor = get_reusable_executor(max_workers=n_jobs)
    shared_bytes = sum(_nbytes(task.kwargs["value"]) for task in plan.tasks if task.shared)
    folder = tempfile.mkdtemp(prefix="dimbsvm-shared-", dir=_memory_backed_folder(shared_bytes))
    readers = {i: 0 for i in range(len(plan.tasks))}
    for task in plan.tasks:
        for ref in task_inputs(task):
            readers[ref.id] += 1
    waiting = {i: {ref.id for ref in task_inputs(task)} for i, task in enumerate(plan.tasks) if not task.shared}
    dependents: dict = {}
    for i, inputs in waiting.items():
        for j in inputs:
            dependents.setdefault(j, []).append(i)
    costs = plan.task_costs()
    bar = Progress(len(costs), label, enabled=progress, total_work=sum(costs.values()), parallelism=n_jobs)
    unfinished = Unfinished(costs)
    values, watched, running = {}, {}, {}
    originals = {i: task.kwargs["value"] for i, task in enumerate(plan.tasks) if task.shared}
    try:
        for i, task in enumerate(plan.tasks):
            if task.shared:
                values[i] = _SharedFile(os.path.join(folder, f"shared-{i}.pkl"))
                _dump(task.kwargs["value"], values[i].path)
                for k in dependents.get(i, ()):
                    waiting[k].discard(i)
        ready = sorted(i for i, inputs in waiting.items() if not inputs)
        while ready or running:
            while ready and len(running) < _IN_FLIGHT_PER_PROCESS * n_jobs:
                i = ready.pop(0)
                task = plan.tasks[i]
                if task.gathers:  # its inputs are results already here: run here (the shared values as they are)
                    kwargs = {key: resolve_refs(value, {**values, **originals}) for key, value in task.kwargs.items()}
                    running[_Done(run_task(task.func, kwargs))] = i
                else:
                    kwargs = {key: resolve_refs(value, values) for key, value in task.kwargs.items()}
                    running[executor.submit(_run_here_in_child, task.func, kwargs, threads)] = i
                for ref in task_inputs(task):
                    readers[ref.id] -= 1
                    if readers[ref.id] == 0 and not plan.tasks[ref.id].shared:
                        values.pop(ref.id, None)  # no task left to submit reads it
            done = [future for future in running if isinstance(future, _Done)] or \
                wait(running, return_when=FIRST_COMPLETED)[0]
            for future in sorted(done, key=running.get):
                i = running.pop(future)
                result = future.result()
                task = plan.tasks[i]
                if task.watch:
                    watched[i] = raise_failure(result) if errors == "raise" else result
                    if on_result is not None:
                        on_result(TaskRef(i, task.name), watched[i])
                if readers[i]:
                    values[i] = result
                if errors == "raise" and isinstance(result, TaskFailure):
                    raise_failure(result)  # an intermediate task's own error, as soon as it happens
                for k in dependents.get(i, ()):
                    waiting[k].discard(i)
                    if not waiting[k]:
                        ready.append(k)
                ready.sort()
                bar.advance(1, costs[i], unfinished.finish(i))
    except BaseException:
        for future in running:
            if not isinstance(future, _Done):
                future.cancel()
        raise
    finally:
        bar.close()
        shutil.rmtree(folder, ignore_errors=True)
    logger.info("%d %s finished on %d processes", plan.n_watched, label, n_jobs)
    return watched


class _Done:
    """The finished result of a task run in this process, where the loop expects a future."""

    def __init__(self, result):
        self._result = result

    def result(self):
        return self._result


def _dump(value, path) -> None:
    import joblib

    joblib.dump(value, path)


def _memory_backed_folder(nbytes: int):
    """``/dev/shm`` where it has room for ``nbytes`` twice over (the values are then never written to disk), else
    ``None`` (the temporary folder): a container's ``/dev/shm`` is often 64 MB."""
    try:
        room = shutil.disk_usage("/dev/shm").free if os.access("/dev/shm", os.W_OK) else 0
    except OSError:
        return None
    return "/dev/shm" if room > 2 * nbytes else None


def _nbytes(value) -> int:
    """Bytes of the arrays in ``value`` (an array or a sparse matrix; 0 for anything else)."""
    if hasattr(value, "nbytes"):
        return int(value.nbytes)
    return sum(int(getattr(value, part).nbytes) for part in ("data", "indices", "indptr") if hasattr(value, part))


#: The thread limit this worker process has set (once per process).
_LIMITED_TO: list = []


def _run_here_in_child(func, kwargs, threads):
    _limit_threads(threads)
    # each task maps the shared files afresh and lets go of them when it ends: a process kept for the next
    # plan holds no mapping of a file this plan's end removed (in /dev/shm, memory until unmapped)
    kwargs = {key: _loaded(value) for key, value in kwargs.items()}
    return run_task(func, kwargs)


def _loaded(value):
    if isinstance(value, list):
        return [_loaded(v) for v in value]
    if not isinstance(value, _SharedFile):
        return value
    import joblib

    return joblib.load(value.path, mmap_mode="r")


def _limit_threads(threads: int) -> None:
    """The numeric libraries of this worker process limited to its share of the cores (once per process)."""
    if _LIMITED_TO == [threads]:
        return
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads)
    if "numba" in sys.modules:
        import numba

        numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
    else:
        os.environ["NUMBA_NUM_THREADS"] = str(threads)  # sizes numba's pool when it starts in this process
    _LIMITED_TO[:] = [threads]
