"""numba compiled once per host, before kNN tasks start.

pynndescent (0.7.0) declares its NN-descent kernels ``cache=False`` (they
take the distance function as an argument), so a numba cache directory
cannot keep them: every new process compiles them again, 45-75 s on a
2-core machine, several times that when many workers compile at once. What
numba can cache (trees, heaps, distances) is cached in ``NUMBA_CACHE_DIR``.
Two tools follow from that:

* :func:`prewarm_forkserver` - new worker processes become forks of one
  process that has compiled pynndescent: distributed's
  ``multiprocessing-method`` is set to ``forkserver`` and the forkserver
  imports :mod:`dimbsvm.graph._prewarm`, which compiles; each worker the
  nannies of this process start afterwards inherits the compiled code and
  warms up in well under a second. Call it before starting a
  ``LocalCluster``; for ``dask worker --nworkers N`` pass
  ``--preload-nanny dimbsvm.distributed.warmup`` (its :func:`dask_setup`
  calls it). Compilation then happens once per worker *host process*.
* :class:`NumbaCacheDir` - a worker plugin giving every worker of a host the
  same writable numba cache directory (:func:`shared_numba_cache_dir`),
  for the cacheable part and for workers that are not forks.

:func:`warm_up_workers` runs :func:`dimbsvm.graph.knn.warm_up` once on every
worker, all at once, before the first kNN task (the kNN builds call it).
"""

from __future__ import annotations

import getpass
import logging
import multiprocessing
import os
import sys
import tempfile

from distributed.diagnostics.plugin import WorkerPlugin

from .worker_memory import spawning_workers

__all__ = ["NumbaCacheDir", "dask_setup", "prewarm_forkserver", "shared_numba_cache_dir", "warm_up_workers"]

logger = logging.getLogger(__name__)

_PRELOAD = "dimbsvm.graph._prewarm"


def shared_numba_cache_dir():
    """``NUMBA_CACHE_DIR`` if set, else one directory per host and user under the temporary directory."""
    path = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(tempfile.gettempdir(),
                                                              f"dimbsvm-numba-cache-{getpass.getuser()}")
    os.makedirs(path, exist_ok=True)
    return path


def _use_cache_dir(path):
    os.environ["NUMBA_CACHE_DIR"] = path
    if "numba" in sys.modules:  # functions decorated from now on (pynndescent's, if not imported yet) use it
        import numba

        numba.config.CACHE_DIR = path
    if "pynndescent" in sys.modules:
        logger.debug("pynndescent was imported before NUMBA_CACHE_DIR was set; its cache stays where it was")


class NumbaCacheDir(WorkerPlugin):
    """Worker plugin: every worker uses one numba cache directory (per host).

    Register with ``client.register_plugin(NumbaCacheDir())``. Takes effect
    for numba functions defined after it runs, so register it before the
    first task imports pynndescent.

    Parameters
    ----------
    path : str, default=None
        The directory; default :func:`shared_numba_cache_dir` on each worker.
    """

    name = "dimbsvm-numba-cache-dir"

    def __init__(self, path=None):
        self.path = path

    def setup(self, worker=None):
        _use_cache_dir(self.path or shared_numba_cache_dir())


def prewarm_forkserver(metrics=("euclidean",), memory_limit=None):
    """Make this process's future Dask worker processes forks of one pynndescent-compiled process.

    Sets distributed's ``multiprocessing-method`` to ``forkserver``, numba's
    threading layer to ``workqueue`` (GNU OpenMP does not survive a fork)
    unless one is chosen, the shared numba cache directory, and the
    forkserver's preload to compile pynndescent for ``metrics``. The
    forkserver is started at once, so compiling overlaps with starting the
    scheduler. Call before starting a ``LocalCluster`` (or nannies).

    A forked worker allocates as the forkserver does: glibc read its malloc
    settings when the forkserver started, and a nanny's pre-spawn variables
    (Dask's or :mod:`~dimbsvm.distributed.worker_memory`'s) never reach it.
    So the forkserver starts with dimbsvm's worker settings
    (:func:`~dimbsvm.distributed.worker_memory.malloc_environment` of
    ``memory_limit``, the workers' limit in bytes; None: no limit).

    Returns
    -------
    bool
        False when this process's forkserver was already running (it keeps
        its preload; nothing changed), else True.
    """
    import dask
    from distributed.utils import get_mp_context
    from multiprocessing import forkserver

    server = forkserver._forkserver
    if getattr(server, "_forkserver_pid", None) is not None:
        logger.warning("the forkserver of this process is already running; it cannot be prewarmed now")
        return False
    os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")
    os.environ["DIMBSVM_PREWARM_METRICS"] = ",".join(metrics)
    _use_cache_dir(shared_numba_cache_dir())
    dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"})
    get_mp_context()  # distributed sets its own preload list once; ours is added after it
    modules = list(getattr(server, "_preload_modules", None) or ["distributed"])
    multiprocessing.get_context("forkserver").set_forkserver_preload([*modules, _PRELOAD])
    with spawning_workers(memory_limit):  # the forkserver process starts with them; this one is left as it was
        forkserver.ensure_running()
    logger.info("forkserver started; it compiles pynndescent for %s before forking workers", ", ".join(metrics))
    return True


def dask_setup(service):
    """Preload hook: ``dask worker --nworkers N --preload-nanny dimbsvm.distributed.warmup``."""
    if type(service).__name__ == "Nanny":
        prewarm_forkserver(memory_limit=getattr(getattr(service, "memory_manager", None), "memory_limit", None))
    else:
        _use_cache_dir(shared_numba_cache_dir())


def warm_up_workers(client, metric="euclidean"):
    """Run :func:`~dimbsvm.graph.knn.warm_up` once on every worker, all at once.

    Each worker compiles pynndescent's numba code in a task of its own (not
    in its event loop, which keeps answering the scheduler meanwhile); a
    worker that is already warm (or a fork of a prewarmed forkserver)
    answers in milliseconds.

    Returns
    -------
    seconds : dict
        ``{worker address: seconds spent}``.
    """
    from dimbsvm.graph.knn import warm_up

    workers = list(client.scheduler_info(n_workers=-1)["workers"])
    # Pinned on purpose: the point is to reach every worker. The tasks carry no data.
    futures = [client.submit(warm_up, metric, workers=[w], allow_other_workers=False, pure=False)
               for w in workers]
    return dict(zip(workers, client.gather(futures)))
