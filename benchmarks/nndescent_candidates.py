"""NN-descent on one Gaussian blob: recall and CPU by graph width and candidates per row and iteration.

Usage (from the repository root)::

    python -m benchmarks.nndescent_candidates --rows 100000 200000 --configs 25:25 25:60 32:32 32:60 40:40

One 32-d standard Gaussian blob per row count (float32; the hardest kind of
partition the partitioned kNN build meets: at 10^7 rows of the knn_scale
blobs a partition is part of one blob). For each ``width:candidates`` a
:class:`~dimbsvm.graph.knn.KNNIndex` is built with one numba thread, and the
recall of its 10-neighbour graph is measured against brute force on a fixed
2,000-row sample. numba is compiled before the first timed build. Prints
one line per build: recall, process CPU seconds, and the CPU relative to
the first configuration of the same row count.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

K = 10
SAMPLE = 2000


def _config(text):
    width, candidates = text.split(":")
    return int(width), None if candidates == "default" else int(candidates)


def main(argv=None) -> int:
    from sklearn.neighbors import NearestNeighbors

    from dimbsvm.graph.knn import KNNIndex, recall_of

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 200_000])
    parser.add_argument("--configs", type=_config, nargs="+",
                        default=[_config(c) for c in ("25:25", "25:60", "32:32", "32:60", "40:40")],
                        help="width:candidates pairs ('default' candidates: pynndescent's min(60, width))")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    KNNIndex(K, method="pynndescent", n_jobs=1, random_state=0).fit(
        np.random.RandomState(0).normal(size=(3000, 32)).astype(np.float32))  # numba compiled here, not timed
    for n in args.rows:
        X = np.random.default_rng(args.seed).normal(size=(n, 32)).astype(np.float32)
        sample = np.random.default_rng(args.seed + 1).choice(n, SAMPLE, replace=False)
        truth = NearestNeighbors().fit(X).kneighbors(X[sample], K + 1)[1][:, 1:]
        first = None
        for width, candidates in args.configs:
            cpu = time.process_time()
            index = KNNIndex(K, method="pynndescent", build_neighbors=width, max_candidates=candidates,
                             random_state=args.seed, n_jobs=1).fit(X)
            graph = index.neighbor_graph(K)[0]
            cpu = time.process_time() - cpu
            first = first or cpu
            print(f"{n:,} rows, width {width}, candidates {candidates or 'default'}: "
                  f"recall {recall_of(graph[sample], truth):.4f}, {cpu:.1f} CPU s ({cpu / first:.2f}x)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
