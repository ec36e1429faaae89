"""A worker plugin that gives a worker's freed heap back to the operating system, paused or not.

Memory a task's inputs and results held is freed by the worker after the
task (so :func:`~dimbsvm.parallel.policy.run_task`'s own check at the end of
a task comes too early for it), and a worker paused at 80 % of its limit runs
no task at all: with unmanaged memory that is free but kept by glibc, such a
worker never resumes, and the tasks queued on it wait forever. :class:`HeapTrim`
runs :func:`~dimbsvm.parallel.heap.return_freed_heap` on the worker's event
loop every second.
"""

from __future__ import annotations

from distributed import WorkerPlugin

__all__ = ["HeapTrim"]


class HeapTrim(WorkerPlugin):
    """Worker plugin: every ``interval`` seconds, the worker's freed heap given back where its unmanaged memory is
    above half its limit (:func:`dimbsvm.parallel.heap.return_freed_heap`).

    Register with ``client.register_plugin(HeapTrim())``
    (:func:`~dimbsvm.distributed.cluster_client` does).

    Parameters
    ----------
    interval : float, default=1.0
        Seconds between checks (a check reads the process's resident memory).
    """

    name = "dimbsvm-heap-trim"

    def __init__(self, interval: float = 1.0):
        self.interval = float(interval)
        self._callback = None

    def setup(self, worker):
        from tornado.ioloop import PeriodicCallback

        from ..parallel.heap import return_freed_heap

        limit = worker.memory_manager.memory_limit or 0
        self._callback = PeriodicCallback(lambda: return_freed_heap(limit, worker), self.interval * 1000)
        self._callback.start()

    def teardown(self, worker):
        if self._callback is not None:
            self._callback.stop()
