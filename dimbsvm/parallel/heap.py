"""Freed heap given back to the operating system after a worker's task, when the worker holds too much of it.

A worker's glibc heap keeps freed memory: up to the trim bound at its top
(:mod:`dimbsvm.distributed.worker_memory` raises it to spare the kernel's
page zeroing) and, whatever the bound, every freed block below a block still
in use. Tasks that allocate chunk- and range-sized temporaries one after
another leave such holes; Dask counts them as unmanaged memory, cannot spill
them, and restarts a worker whose process memory reaches 95 % of its limit
although most of it is free. After each task, where the memory the worker
does not manage is above :data:`UNMANAGED_SHARE` of its limit,
:func:`return_freed_heap` asks glibc to give back every free page of its
heap (``malloc_trim(0)``); and a task's inputs and results are freed after
it, by the worker, so :class:`dimbsvm.distributed.worker_memory.HeapTrim`
checks the same every second on the worker itself (a paused worker runs no
task, and would never resume). No effect where glibc is not the allocator.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging

__all__ = ["UNMANAGED_SHARE", "return_freed_heap", "should_trim"]

logger = logging.getLogger(__name__)

#: Unmanaged memory (the process's resident memory less the results its worker holds) above this share of
#: the worker's limit is trimmed after a task (Dask pauses a worker at 80 % of it and restarts it at 95 %).
UNMANAGED_SHARE = 0.5


def should_trim(resident: int, managed: int, limit: int, share: float = UNMANAGED_SHARE) -> bool:
    """Whether a worker with this much resident and managed memory under ``limit`` bytes should trim its heap.

    Examples
    --------
    >>> should_trim(3 * 2**30, 2**29, 4 * 2**30), should_trim(3 * 2**30, 2**31, 4 * 2**30)
    (True, False)
    >>> should_trim(3 * 2**30, 0, 0)  # no limit: nothing to stay under
    False
    """
    return bool(limit) and resident - managed > share * limit


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or ``None`` where the C library has none."""
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def return_freed_heap(limit: int, worker=None) -> bool:
    """In a Dask worker: trim the heap if its unmanaged memory is above :data:`UNMANAGED_SHARE` of ``limit``.

    ``worker``: the worker (default: the one running this task, if any).
    Returns whether it trimmed.
    """
    trim = _malloc_trim()
    if trim is None or not limit:
        return False
    import psutil

    if worker is None:
        from distributed import get_worker

        try:
            worker = get_worker()
        except ValueError:  # not in a worker
            return False
    managed = getattr(getattr(worker, "data", None), "fast", None)
    managed = getattr(managed, "total_weight", 0) or 0
    resident = psutil.Process().memory_info().rss
    if not should_trim(resident, managed, limit):
        return False
    trim(0)
    logger.debug("heap trimmed: %.0f -> %.0f MB resident", resident / 2**20, psutil.Process().memory_info().rss / 2**20)
    return True
