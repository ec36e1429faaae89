"""Members' passes over a stored chunk, whole or in cache-sized pieces, on 1 and 2 workers.

Usage (from the repository root; a store made by ``benchmarks.strong_scaling``)::

    python -m benchmarks.chunk_passes --store /tmp/strong/syn-10000000.zarr --tasks 103

Each task reads one chunk (as float64), then runs 16 matrix-vector products
(an ensemble's members) over it: over the whole chunk, or over
:func:`dimbsvm.rows.cache_blocks` pieces. The same tasks run on embedded
clusters of 1 and 2 single-threaded workers with dimbsvm's malloc settings,
alternating; printed are the medians of the read and of the passes per task.
A growth of the passes' time beside a second worker that the pieces remove
is the shared cache's capacity, not the CPUs.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

N_MEMBERS = 16


def _task(path, chunk, pieces):
    import zarr

    from dimbsvm.rows import cache_blocks

    array = zarr.open_array(path, mode="r")
    rows = array.chunks[0]
    start = time.perf_counter()
    block = np.asarray(array[chunk * rows:(chunk + 1) * rows], dtype=np.float64)
    read = time.perf_counter() - start
    weights = np.random.RandomState(0).normal(size=(N_MEMBERS, block.shape[1]))
    start = time.perf_counter()
    for lo, hi in cache_blocks(block) if pieces else [(0, block.shape[0])]:
        for w in weights:
            block[lo:hi] @ w
    return read, time.perf_counter() - start


def main(argv=None) -> int:
    from dask.utils import parse_bytes
    from distributed import Client, LocalCluster

    from dimbsvm.distributed.worker_memory import spawning_workers

    parser = argparse.ArgumentParser(prog="python -m benchmarks.chunk_passes", description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="a dimbsvm store (its X array is read)")
    parser.add_argument("--tasks", type=int, default=103, help="chunks read (one task each)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--memory-limit", default="6GiB", help="per worker")
    args = parser.parse_args(argv)
    path = f"{args.store.rstrip('/')}/X"
    print("| pieces | workers | repeat | wall s | read ms (median) | passes ms (median) |")
    print("|---|---|---|---|---|---|")
    for repeat in range(args.repeats):
        for pieces in (False, True):
            for workers in (1, 2):
                with spawning_workers(parse_bytes(args.memory_limit)), \
                        LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                                     memory_limit=args.memory_limit) as cluster, Client(cluster) as client:
                    client.run(lambda: None)
                    start = time.perf_counter()
                    times = client.gather(client.map(_task, [path] * args.tasks, range(args.tasks),
                                                     [pieces] * args.tasks, pure=False))
                    wall = time.perf_counter() - start
                read, passes = np.median([t[0] for t in times]), np.median([t[1] for t in times])
                print(f"| {'2 MB' if pieces else 'whole chunk'} | {workers} | {repeat} | {wall:.2f} | "
                      f"{read * 1e3:.1f} | {passes * 1e3:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
