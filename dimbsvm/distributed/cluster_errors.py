"""The errors of reaching a cluster, apart from the client that raises most of them and the checks that raise
the others (:mod:`~dimbsvm.distributed.compat`), which the client calls."""

from __future__ import annotations

from ..exceptions import DimbsvmError

__all__ = ["ClusterConnectionError", "NoWorkersError", "WorkerMismatchError"]


class ClusterConnectionError(DimbsvmError):
    """The scheduler could not be reached, or refused the connection."""


class NoWorkersError(ClusterConnectionError):
    """No worker joined the scheduler in time: nothing could run the job."""


class WorkerMismatchError(ClusterConnectionError):
    """A worker (or the scheduler) runs another dimbsvm, or incompatible versions of what it needs."""
