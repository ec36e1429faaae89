"""How a worker process allocates memory: glibc malloc settings set before the process starts.

Dask's nannies start every worker with ``MALLOC_TRIM_THRESHOLD_=65536``
(``distributed.nanny.pre-spawn-environ``), so that freed memory goes back to
the operating system at once. Setting any ``MALLOC_*`` tunable also switches
off glibc's adaptive mmap threshold, which stays at 128 KiB: every array of
more than 128 KiB is then a fresh ``mmap`` whose pages the kernel zeroes on
first touch and takes back on ``free``. dimbsvm's tasks allocate chunk-sized
arrays (tens of MB) hundreds of times per fold: fitting an ensemble at 10^7
rows on one worker, 30 % of the machine's busy CPU was the kernel's.

:func:`malloc_environment` keeps arrays up to a bound on the heap and lets a
worker keep that much freed memory for the next task; the bound is a quarter
of the worker's memory limit, at most 1 GiB. Measured on 2 cores
(``benchmarks/strong_scaling.py --malloc dimbsvm dask``, RESULTS.md): the
ensemble stage at 10^7 rows 17-22 % faster on one and on two workers, system
time 30 % -> 8 % of the busy CPU, peak worker memory 1.34 -> 1.5 GiB (the
heap keeps freed memory, up to the bound, which Dask counts as unmanaged).

Apply it with :func:`spawning_workers` around a ``LocalCluster``'s life (as
:func:`~dimbsvm.distributed.cluster_client` does), or for ``dask worker``
with ``--preload-nanny dimbsvm.distributed.worker_memory`` (:func:`dask_setup`).
The environment must be set before the worker process starts: glibc reads it
once, so a worker's ``env=`` or ``distributed.nanny.environ`` is too late.
"""

from __future__ import annotations

import contextlib
import logging
import os

__all__ = ["MALLOC_BOUND_MAX", "MALLOC_BOUND_MIN", "MALLOC_VARIABLES", "dask_setup", "malloc_environment",
           "spawning_workers"]

logger = logging.getLogger(__name__)

#: The largest array kept on the heap and the most freed memory a worker keeps (bytes).
MALLOC_BOUND_MAX = 2**30
#: The bound never goes below this, however small the memory limit.
MALLOC_BOUND_MIN = 32 * 2**20
#: The variables :func:`malloc_environment` sets.
MALLOC_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def malloc_environment(memory_limit=None) -> dict[str, str]:
    """glibc malloc settings for a worker process with ``memory_limit`` bytes (None or 0: no limit).

    Returns
    -------
    dict
        ``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_``, both a
        quarter of the limit clipped to [:data:`MALLOC_BOUND_MIN`,
        :data:`MALLOC_BOUND_MAX`].

    Examples
    --------
    >>> malloc_environment(4 * 2**30)["MALLOC_MMAP_THRESHOLD_"]
    '1073741824'
    >>> malloc_environment(512 * 2**20)["MALLOC_TRIM_THRESHOLD_"]
    '134217728'
    """
    bound = MALLOC_BOUND_MAX if not memory_limit else min(MALLOC_BOUND_MAX, max(MALLOC_BOUND_MIN,
                                                                                 int(memory_limit) // 4))
    return {"MALLOC_MMAP_THRESHOLD_": str(bound), "MALLOC_TRIM_THRESHOLD_": str(bound)}


@contextlib.contextmanager
def spawning_workers(memory_limit=None, *, malloc=True):
    """Nannies created within start workers with :func:`malloc_environment`; this process is left as it was.

    A nanny writes its pre-spawn variables into the environment of the
    process that runs it (a ``LocalCluster``'s: this one) before it spawns a
    worker, and Dask gives variables already in that environment precedence
    over its configuration: a cluster started earlier in this process with
    Dask's defaults leaves ``MALLOC_TRIM_THRESHOLD_=65536`` behind, which
    would win over these settings. So, within, this process's
    :data:`MALLOC_VARIABLES` are set to them (or removed, ``malloc=False``):
    Dask's nannies take them from there (and spawned workers inherit them),
    and on leaving they are restored. Keep the cluster's whole life within
    (a nanny restarting a worker reads them again).

    Parameters
    ----------
    memory_limit : int, default=None
        Each worker's memory limit in bytes.
    malloc : bool, default=True
        False: Dask's defaults, as in a clean environment (for comparisons).
    """
    saved = {name: os.environ.get(name) for name in MALLOC_VARIABLES}
    try:
        for name in MALLOC_VARIABLES:
            os.environ.pop(name, None)
        if malloc:
            os.environ.update(malloc_environment(memory_limit))
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def dask_setup(nanny) -> None:
    """Preload hook: ``dask worker ... --preload-nanny dimbsvm.distributed.worker_memory``.

    Sets :func:`malloc_environment` (from the nanny's memory limit) for the
    worker processes this nanny starts and restarts.
    """
    if type(nanny).__name__ != "Nanny":
        logger.warning("dimbsvm.distributed.worker_memory is a nanny preload (--preload-nanny); "
                       "in a worker it is too late to change how the process allocates")
        return
    limit = getattr(getattr(nanny, "memory_manager", None), "memory_limit", None)
    settings = malloc_environment(limit)
    nanny.pre_spawn_env.update(settings)  # in the environment the worker process starts with
    # the nanny's env (merged from Dask's defaults when it was created) is written into the worker's
    # os.environ after it starts: keep it saying what the process started with
    nanny.env.update(settings)
