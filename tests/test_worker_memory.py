"""Worker processes allocate arrays on the heap, not one mmap each (dimbsvm.distributed.worker_memory).

The truth checked is glibc's own account (``mallinfo2``): the bytes held in
mmapped blocks while a worker holds a 32 MiB array. Under Dask's defaults
(``MALLOC_TRIM_THRESHOLD_`` set, so the mmap threshold stays at 128 KiB) the
array is one mmapped block, which the contrast test shows; with dimbsvm's
settings it comes from the heap.
"""

import os
import platform

import pytest

from dimbsvm.distributed.worker_memory import (MALLOC_BOUND_MAX, MALLOC_BOUND_MIN, MALLOC_VARIABLES,
                                               malloc_environment)

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc tunables are glibc's")

ARRAY_BYTES = 32 * 2**20


def mmapped_bytes_of_an_array():
    """In a worker: glibc's mmapped bytes gained while a 32 MiB array is alive, and the malloc settings seen."""
    import ctypes
    import os

    import numpy as np

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                         "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    before = libc.mallinfo2().hblkhd
    array = np.ones(ARRAY_BYTES // 8)
    gained = libc.mallinfo2().hblkhd - before
    del array
    return gained, {k: v for k, v in os.environ.items() if k.startswith("MALLOC_") or k == "OMP_NUM_THREADS"}


@pytest.mark.parametrize(("limit", "bound"), [(None, MALLOC_BOUND_MAX), (0, MALLOC_BOUND_MAX),
                                              (16 * 2**30, MALLOC_BOUND_MAX), (2 * 2**30, 2**29),
                                              (2**20, MALLOC_BOUND_MIN)])
def test_bound_is_a_quarter_of_the_limit_within_bounds(limit, bound):
    assert malloc_environment(limit) == {"MALLOC_MMAP_THRESHOLD_": str(bound), "MALLOC_TRIM_THRESHOLD_": str(bound)}


@glibc
@pytest.mark.slow
def test_embedded_cluster_workers_keep_arrays_on_the_heap():
    from dimbsvm.distributed import cluster_client

    before = {name: os.environ.get(name) for name in MALLOC_VARIABLES}
    with cluster_client(n_workers=1, dashboard_address=None) as client:
        gained, environ = client.submit(mmapped_bytes_of_an_array, pure=False).result()
    # the nanny wrote its variables into this process; they are gone with the cluster
    assert {name: os.environ.get(name) for name in MALLOC_VARIABLES} == before
    assert environ["MALLOC_MMAP_THRESHOLD_"] == environ["MALLOC_TRIM_THRESHOLD_"]
    assert int(environ["MALLOC_MMAP_THRESHOLD_"]) > ARRAY_BYTES
    assert environ["OMP_NUM_THREADS"] == "1"  # Dask's other pre-spawn variables still reach the worker
    assert gained == 0


@glibc
@pytest.mark.slow
def test_contrast_dask_default_workers_mmap_each_array(monkeypatch):
    """The same check fails under Dask's defaults: the settings are what makes the difference."""
    from distributed import Client, LocalCluster

    for name in MALLOC_VARIABLES:  # Dask's defaults in a clean environment
        monkeypatch.delenv(name, raising=False)

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        gained, environ = client.submit(mmapped_bytes_of_an_array, pure=False).result()
    assert "MALLOC_MMAP_THRESHOLD_" not in environ
    assert environ["MALLOC_TRIM_THRESHOLD_"] == "65536"  # Dask's default, which pins the mmap threshold
    assert gained >= ARRAY_BYTES


@glibc
@pytest.mark.slow
def test_embedded_cluster_after_a_dask_default_cluster_in_the_same_process(monkeypatch):
    """A Dask-default cluster leaves MALLOC_TRIM_THRESHOLD_=65536 in this process, which Dask ranks above
    its configuration; the next embedded cluster's workers still get dimbsvm's settings."""
    from distributed import Client, LocalCluster

    from dimbsvm.distributed import cluster_client

    for name in MALLOC_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.submit(sum, [1, 2]).result()
    assert os.environ["MALLOC_TRIM_THRESHOLD_"] == "65536"  # what Dask's nanny left behind
    with cluster_client(n_workers=1, dashboard_address=None) as client:
        gained, environ = client.submit(mmapped_bytes_of_an_array, pure=False).result()
    assert environ["MALLOC_TRIM_THRESHOLD_"] == environ["MALLOC_MMAP_THRESHOLD_"] != "65536"
    assert gained == 0
    assert os.environ["MALLOC_TRIM_THRESHOLD_"] == "65536"  # left as it was


_FORKED_WORKER_SCRIPT = '''
import json, os, sys
from test_worker_memory import mmapped_bytes_of_an_array  # (workers import it too: tests/ is on PYTHONPATH)

if __name__ == "__main__":
    from distributed import Client, LocalCluster
    from dimbsvm.distributed.warmup import prewarm_forkserver
    if sys.argv[1] == "prewarmed":
        assert prewarm_forkserver(metrics=(), memory_limit=2 * 2**30)  # nothing to compile: only the fork matters
        assert "MALLOC_MMAP_THRESHOLD_" not in os.environ  # set for the forkserver only
    else:
        import dask
        dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"})
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \\
            Client(cluster) as client:
        gained, _ = client.submit(mmapped_bytes_of_an_array, pure=False).result()
        [parent] = client.run(os.getppid).values()
    print(json.dumps({"gained": gained, "forked": parent != os.getpid()}))
'''


@glibc
@pytest.mark.slow
@pytest.mark.parametrize("how", ["prewarmed", "plain-forkserver"])
def test_workers_forked_from_the_prewarmed_forkserver_keep_arrays_on_the_heap(tmp_path, how):
    # a forked worker allocates as its forkserver does (a nanny's pre-spawn variables never reach it):
    # prewarm_forkserver starts the forkserver with dimbsvm's settings; the contrast, a forkserver that
    # Dask starts on demand, maps every large array (the check can fail)
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    script = tmp_path / "forked.py"
    script.write_text(_FORKED_WORKER_SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.update(PYTHONPATH=os.pathsep.join([str(root), str(root / "tests")]), PYTHONWARNINGS="ignore",
               DASK_LOGGING__DISTRIBUTED="error")
    done = subprocess.run([sys.executable, str(script), how], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["forked"]  # the worker is a fork of the forkserver, not a child of the nanny's process
    if how == "prewarmed":
        assert result["gained"] == 0
    else:
        assert result["gained"] >= ARRAY_BYTES
