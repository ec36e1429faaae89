"""Freed heap given back after a worker's task where the worker's unmanaged memory is too high."""

import numpy as np

from dimbsvm.parallel.heap import UNMANAGED_SHARE, return_freed_heap, should_trim


def test_the_heap_is_trimmed_only_above_the_unmanaged_share_of_the_limit():
    limit = 1000
    assert not should_trim(int(UNMANAGED_SHARE * limit), 0, limit)
    assert should_trim(int(UNMANAGED_SHARE * limit) + 1, 0, limit)
    assert not should_trim(900, 500, limit)  # the worker's own results are Dask's to spill
    assert not should_trim(10**12, 0, 0)


def test_a_worker_trims_its_heap_where_unmanaged_memory_is_above_the_share(client):
    # in a worker: a limit of one byte puts any process above the share, a huge one none
    def freed_after_holes(limit):
        kept = [np.ones(2**16) for _ in range(64)]  # heap blocks with holes between them once half are freed
        del kept[::2]
        return return_freed_heap(limit)

    assert client.submit(freed_after_holes, 1, pure=False).result() is True
    assert client.submit(freed_after_holes, 2**50, pure=False).result() is False
    assert return_freed_heap(1) is False  # not in a worker: nothing is trimmed


def test_the_heap_trim_plugin_checks_every_worker_paused_or_not(client, monkeypatch):
    # registered on the workers, the plugin's periodic check calls the trim with each worker and its limit
    import time

    from dimbsvm.distributed.heap_trim import HeapTrim
    from dimbsvm.parallel import heap

    calls = []
    monkeypatch.setattr(heap, "return_freed_heap", lambda limit, worker: calls.append((limit, worker.address)))
    client.register_plugin(HeapTrim(interval=0.05))
    deadline = time.monotonic() + 10
    workers = set(client.scheduler_info()["workers"])
    while {address for _, address in calls} != workers and time.monotonic() < deadline:
        time.sleep(0.05)
    assert {address for _, address in calls} == workers
    client.unregister_worker_plugin(HeapTrim.name)
