"""How every dimbsvm task runs on a worker: thread limits, and which errors are final.

Each task body is called through :func:`run_task`, which

* limits the numeric libraries to the worker's own thread count: numba
  (pynndescent's NN-descent, ``n_jobs=None`` means "numba's threads") and the
  BLAS/OpenMP pools (threadpoolctl). A single-threaded worker that lets numba
  start one thread per core makes 16 workers no faster than one;
* bounds scikit-learn's ``working_memory`` (the size of the blocks its
  chunked computations hold: brute-force neighbour search, pairwise
  distances) to a sixteenth of the worker's memory limit, between 16 and
  1024 MiB (scikit-learn's default, 1024 MiB, is more than a 500 MiB worker
  has: an exact kNN search of 5000 rows was killed by the nanny);
* tells the LIBLINEAR lock (:mod:`dimbsvm.svm._native_rng`) whether other
  tasks can run in this process at the same time (only then is it needed:
  not in a one-thread worker process; always in a process shared by several
  workers, as an in-process ``LocalCluster``);
* turns an error that would happen again on a rerun (bad data, a bad
  parameter, a damaged store: anything but an I/O hiccup) into a
  :class:`TaskFailure` value, so that Dask does not retry it and the caller
  re-raises the original exception, not Dask's wrapper.

Work lost with a worker is recomputed by Dask regardless of this module.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import sys
import traceback
from dataclasses import dataclass

from .heap import return_freed_heap

logger = logging.getLogger(__name__)

__all__ = ["TaskFailure", "concurrent_fits", "fits_may_overlap", "in_order_threads", "is_transient", "raise_failure",
           "run_task", "task_threads", "task_working_memory", "worker_memory_limit", "worker_threads"]

#: OSErrors that a rerun would meet again: they are the caller's to fix, not the cluster's.
_PERMANENT_OS_ERRORS = (FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError, NotADirectoryError)

_CONCURRENT_FITS = contextvars.ContextVar("dimbsvm_concurrent_fits", default=True)


@contextlib.contextmanager
def concurrent_fits(possible: bool):
    """Declare, for the code inside, whether other threads of this process may fit at the same time."""
    token = _CONCURRENT_FITS.set(bool(possible))
    try:
        yield
    finally:
        _CONCURRENT_FITS.reset(token)


def fits_may_overlap() -> bool:
    """Whether other threads of this process may fit while this code does (see :func:`concurrent_fits`)."""
    return _CONCURRENT_FITS.get()


@dataclass
class TaskFailure:
    """A task's deterministic error, returned as a value so that Dask does not retry it.

    Attributes
    ----------
    error : BaseException
        The exception the task raised (or a ``RuntimeError`` carrying its text
        when it could not be pickled).
    where : str
        The task body's name, for the log.
    traceback : str
        The task's traceback, formatted on the worker.
    """

    error: BaseException
    where: str
    traceback: str


def is_transient(error: BaseException) -> bool:
    """True for errors worth retrying: I/O errors other than missing or forbidden paths."""
    return isinstance(error, OSError) and not isinstance(error, _PERMANENT_OS_ERRORS)


#: The attribute of a Dask worker that a version check refused (:mod:`dimbsvm.distributed.version_gate`): why.
REFUSED_WORKER = "dimbsvm_refused"


def worker_threads() -> int | None:
    """Threads of the Dask worker running this code, or None outside a worker task."""
    try:
        from distributed import get_worker

        return int(get_worker().state.nthreads)
    except (ImportError, ValueError, AttributeError):
        return None


def task_working_memory(memory_limit) -> int:
    """scikit-learn ``working_memory`` (MiB) for a task in a worker of ``memory_limit`` bytes (0/None: none).

    Examples
    --------
    >>> task_working_memory(500 * 2**20), task_working_memory(64 * 2**30), task_working_memory(None)
    (31, 1024, 1024)
    """
    if not memory_limit:
        return 1024
    return int(min(1024, max(16, memory_limit / 2**20 / 16)))


def worker_memory_limit():
    """The memory limit of the Dask worker running this code, in bytes; ``None`` off a worker or without one."""
    try:
        from distributed import get_worker

        return get_worker().memory_manager.memory_limit
    except (ImportError, ValueError, AttributeError):
        return None


_BLAS_LIMITED = False


@contextlib.contextmanager
def task_threads(n_threads: int):
    """Limit numba and the BLAS/OpenMP pools to ``n_threads`` inside the block.

    numba's thread count is a per-thread setting, so it is set in the thread
    that runs the task (and restored); if numba is not imported yet, its pool
    is sized by ``NUMBA_NUM_THREADS`` when it is. The BLAS/OpenMP pools are
    process-wide: they are limited once, and only in a process that is one
    worker and nothing else (a worker process started by a nanny or ``dask
    worker``). In a process shared with the client or other workers (an
    in-process ``LocalCluster``), concurrent tasks limiting and restoring a
    global setting would race, and would change the client's own pools.
    """
    global _BLAS_LIMITED
    if "numba" not in sys.modules:
        os.environ.setdefault("NUMBA_NUM_THREADS", str(n_threads))  # sizes the pool when numba starts
    import numba  # (waits for an import under way in another thread)

    if not _BLAS_LIMITED and _dedicated_worker_process():
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=n_threads)  # kept for the life of the process
        _BLAS_LIMITED = True
    before = numba.get_num_threads()
    numba.set_num_threads(max(1, min(n_threads, numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        numba.set_num_threads(before)


@contextlib.contextmanager
def in_order_threads():
    """BLAS limited to one thread inside the block, unless this code runs in a worker's task.

    For a job run in this process (no client): its tasks run one after
    another, as on a one-thread worker (what ``--workers`` starts, whose BLAS
    is limited to one thread by :func:`task_threads`). Its products are small
    (an ensemble member's margins, a block of test rows), and a second BLAS
    thread only adds wake-ups and spinning to each of them, which cost several
    times the product when the machine's other cores are busy
    (``benchmarks/RESULTS.md``, small jobs). The results are the same: a
    one-thread worker computes them with one BLAS thread too. The limit is
    process-wide and restored at the end of the block. Inside a worker's task
    nothing changes here: the worker's policy applies, and its process's pools
    may be shared with other tasks.
    """
    # a process that never imported distributed runs no worker (and is not made to import it here)
    if "distributed" in sys.modules and worker_threads() is not None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _dedicated_worker_process() -> bool:
    """True when this process runs exactly one Dask worker and no scheduler (nor, then, a client's work)."""
    try:
        from distributed import Scheduler, Worker
    except ImportError:
        return False
    return len(Worker._instances) == 1 and not Scheduler._instances


def run_task(func, kwargs: dict):
    """Call ``func(**kwargs)`` under the worker's execution policy (see the module docstring).

    Inputs that are :class:`TaskFailure` (an upstream task failed for good)
    are passed on without calling ``func``.
    """
    for value in _values(kwargs):
        if isinstance(value, TaskFailure):
            return value
    n_threads = worker_threads()
    if n_threads is not None:
        _reschedule_if_refused()
        from .result_sizes import register

        register()  # the worker counts what the results it keeps hold
    threads = task_threads(n_threads) if n_threads is not None else contextlib.nullcontext()
    memory = contextlib.nullcontext()
    if n_threads is not None:  # in a worker: blocks of scikit-learn's chunked computations within its limit
        import sklearn

        memory = sklearn.config_context(working_memory=task_working_memory(worker_memory_limit()))
    try:
        # other fits can run in this process at the same time unless it is a one-thread worker's own
        with threads, memory, concurrent_fits(n_threads != 1 or not _dedicated_worker_process()):
            return func(**kwargs)
    except Exception as error:  # noqa: BLE001 - sorted into final and transient right here
        if is_transient(error):
            raise  # Dask retries it
        return TaskFailure(_picklable(error), getattr(func, "__qualname__", repr(func)), traceback.format_exc())
    finally:
        if n_threads is not None:  # the temporaries the task freed, given back where the worker holds too many
            return_freed_heap(worker_memory_limit())


def _reschedule_if_refused() -> None:
    """In a worker the version check refused (closing as this runs): the task goes to another worker."""
    from distributed import Reschedule, get_worker

    if getattr(get_worker(), REFUSED_WORKER, None):
        raise Reschedule()


def raise_failure(result):
    """Return ``result``, or raise the task's own error if it is a :class:`TaskFailure`."""
    if isinstance(result, TaskFailure):
        logger.debug("task %s failed on a worker:\n%s", result.where, result.traceback)
        raise result.error
    return result


def _values(kwargs):
    for value in kwargs.values():
        if isinstance(value, (list, tuple)):
            yield from value
        else:
            yield value


def _picklable(error: BaseException) -> BaseException:
    import pickle

    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001 - any pickling problem: keep the text
        return RuntimeError(f"{type(error).__name__}: {error}")
