"""The one place that opens a Dask client."""

from __future__ import annotations

import contextlib
import logging
import os

logger = logging.getLogger(__name__)

__all__ = ["cluster_client", "current_client"]


def current_client(client=None):
    """The client to use: the one given, else the active one, else ``None``.

    Library code calls this and runs in-process when it returns ``None``;
    it never starts a cluster.
    """
    if client is not None:
        return client
    try:
        from distributed import get_client
        return get_client()
    except (ImportError, ValueError):
        return None


@contextlib.contextmanager
def cluster_client(scheduler: str | None = None, *, n_workers: int | None = None,
                   threads_per_worker: int = 1, processes: bool = True):
    """Connect to a scheduler, or start an embedded ``LocalCluster``.

    Parameters
    ----------
    scheduler : str, default=None
        ``tcp://HOST:PORT`` (or any address ``distributed.Client`` accepts).
        Falls back to the ``DASK_SCHEDULER_ADDRESS`` environment variable;
        without either, an embedded ``LocalCluster`` is started and closed
        on exit.
    n_workers : int, default=None
        Workers of the embedded cluster (default: one per core).
    threads_per_worker : int, default=1
        One thread per worker: SVM fits hold the GIL for long stretches.
    processes : bool, default=True
        Embedded workers as processes (as on a real cluster).

    Yields
    ------
    distributed.Client
    """
    from distributed import Client, LocalCluster

    address = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")
    if address:
        logger.info("connecting to scheduler %s", address)
        with Client(address) as client:
            yield client
        return
    n_workers = n_workers or os.cpu_count() or 1
    logger.info("starting an embedded LocalCluster with %d worker(s)", n_workers)
    with LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker,
                      processes=processes, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        yield client
