"""Routing one chunk of rows to its nearest centroids: a partial sort of every column against block minima.

Usage (from the repository root)::

    python -m benchmarks.route_centroids --rows 50000 --centroids 200 1200 6000 --repeats 3

For each number of centroids, the scores of one chunk (32 Gaussian features,
centroids near sampled rows) are computed once; then each row's ``overlap``
smallest are selected by a partial sort of every column (``np.argpartition``,
the selection before block minima) and by
:func:`dimbsvm.graph.partition.smallest_columns`, alternating in one process;
then :func:`~dimbsvm.graph.partition.nearest_centroids` as a whole (scores
included). Prints the medians, and whether both selections agree.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _median_seconds(func, repeats):
    times = []
    for _ in range(repeats):
        tic = time.perf_counter()
        func()
        times.append(time.perf_counter() - tic)
    return float(np.median(times))


def main(argv=None) -> int:
    from dimbsvm.graph.partition import nearest_centroids, smallest_columns

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--centroids", type=int, nargs="+", default=[200, 1200, 6000])
    parser.add_argument("--overlap", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    rng = np.random.RandomState(0)
    X = rng.normal(size=(args.rows, 32))
    m = args.overlap
    for n_centroids in args.centroids:
        centroids = X[rng.choice(args.rows, n_centroids, replace=False)] + 0.1 * rng.normal(size=(n_centroids, 32))
        step = max(1, 2**24 // n_centroids)  # the rows nearest_centroids scores at once
        blocks = [(centroids**2).sum(axis=1)[None, :] - 2.0 * X[i:i + step] @ centroids.T
                  for i in range(0, args.rows, step)]
        old = np.concatenate([np.sort(np.argpartition(b, m - 1, axis=1)[:, :m], axis=1) for b in blocks])
        new = np.concatenate([smallest_columns(b, m) for b in blocks])
        sort_s = _median_seconds(lambda: [np.argpartition(b, m - 1, axis=1) for b in blocks], args.repeats)  # noqa: B023 - timed now
        block_s = _median_seconds(lambda: [smallest_columns(b, m) for b in blocks], args.repeats)  # noqa: B023 - timed now
        whole_s = _median_seconds(lambda: nearest_centroids(X, centroids, m), args.repeats)  # noqa: B023 - timed now
        print(f"{n_centroids} centroids, {args.rows:,} rows: selection by partial sort {sort_s:.2f} s, "
              f"by block minima {block_s:.2f} s ({sort_s / block_s:.2f}x), same columns {np.array_equal(old, new)}; "
              f"nearest_centroids {whole_s:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
