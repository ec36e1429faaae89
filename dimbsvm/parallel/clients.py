"""Which client library code runs on: the one it is given, the active one, or none (this process)."""

from __future__ import annotations

__all__ = ["current_client", "worker_memory_limits"]


def current_client(client=None):
    """The client to use: the one given, else the active one, else ``None``.

    Library code calls this and runs in-process when it returns ``None``;
    it never starts a cluster. Inside a Dask task the answer is ``None``
    unless a client is given: a task that submits tasks and waits for them
    can starve its worker of threads, so work nested in a task (an ensemble
    fitted inside a fold task) runs in that task.
    """
    if client is not None:
        return client
    try:
        from distributed import get_client, get_worker
    except ImportError:
        return None
    try:
        get_worker()
        return None  # inside a task
    except ValueError:
        pass
    try:
        return get_client()
    except ValueError:
        return None


def worker_memory_limits(client) -> list[int]:
    """The memory limit (bytes; 0: none) of each worker the scheduler knows now; empty without a client."""
    if client is None:
        return []
    workers = client.scheduler_info(n_workers=-1)["workers"].values()
    return [int(worker.get("memory_limit") or 0) for worker in workers]
