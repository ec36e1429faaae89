"""Building kNN graphs of whole datasets: in memory, or as tasks into a store's ``knn`` stage.

:func:`knn_graph` answers in memory for numpy input and, for a Dask array or
a store, builds the stage with one of two strategies:

``"partitioned"`` (default; :func:`build_partitioned_graph`)
    rows routed to k-means partitions (each row to its ``overlap`` nearest),
    one graph per partition, candidates merged per row, refined by
    neighbours of neighbours while the recall on a sample is below
    ``target_recall``. Work grows as ``overlap * n``. Task bodies:
    :mod:`dimbsvm.graph.partitioned`.
``"sharded"`` (:func:`build_sharded_graph`)
    every row queried against every shard's index; work grows as
    ``n * n_shards``. Task bodies: :mod:`dimbsvm.graph.sharded`. Measured
    on 2 cores (``benchmarks/RESULTS.md``), it won nowhere: at 10^6 rows it
    took 2x the CPU of a partitioned build of higher recall, at 10^5 1.4x.
    It remains for metrics whose neighbours Euclidean k-means routing says
    little about (binary or set metrics), since it relies on no routing.

This package decides what to submit (:mod:`.partitioned_build`,
:mod:`.sharded_build`, the steps they share in :mod:`._steps`); the task
bodies are plain functions in :mod:`dimbsvm.graph`, and :mod:`dimbsvm.parallel` runs them
(in this process without a client, on the cluster with one). A finished
stage with the same fingerprint (data and parameters) is reused; an
unfinished one resumes from the steps on disk.
"""


from __future__ import annotations

import logging
from pathlib import Path

import dask.array as da
import numpy as np
from sklearn.utils import check_array

from ...graph.knn import KNNIndex
from ...graph.knn import sample_recall as _sample_recall_in_memory
from ...graph.stored import KNNGraph, check_n_neighbors, open_knn_graph, seed_of
from .partitioned_build import build_partitioned_graph, check_refinement_memory
from .sharded_build import build_sharded_graph

__all__ = ["STRATEGIES", "KNNGraph", "build_partitioned_graph", "build_sharded_graph", "check_refinement_memory",
           "knn_graph", "open_knn_graph"]

logger = logging.getLogger(__name__)

#: The accepted values of ``strategy``.
STRATEGIES = ("partitioned", "sharded")


def knn_graph(X, n_neighbors=10, *, method="auto", metric="euclidean", random_state=None, client=None,
              store=None, strategy="partitioned", build_neighbors=None, recall_sample=2000, **options):
    """The k nearest other rows of every row: in memory, or built as tasks into a store.

    Parameters
    ----------
    X : {ndarray, sparse matrix}, dask.array.Array or path of a dimbsvm store
        Rows, 2-D. numpy (or sparse) input is answered in memory with one
        index; a Dask array or a store path is built as Dask tasks into the
        store's ``knn`` stage.
    n_neighbors : int, default=10
        k, smaller than the number of rows.
    method : {"auto", "exact", "pynndescent"}, default="auto"
        Search within one index (in memory: the whole data; otherwise one
        partition or shard). ``"auto"`` is exact below 20,000 rows.
    metric : str, default="euclidean"
        A metric pynndescent knows (:func:`~dimbsvm.graph.knn.pynndescent_metrics`).
    random_state : int, RandomState instance or None, default=None
        Seeds k-means, NN-descent and the recall sample.
    client : distributed.Client, default=None
        Where the tasks run; the current client when there is one, else
        this process, one task after the other.
    store : str or path, default=None
        The store to write the stage into; defaults to ``X`` when ``X`` is a
        store path. Giving it with numpy input asks for a stored build.
    strategy : {"partitioned", "sharded"}, default="partitioned"
        The stored build: :func:`build_partitioned_graph` or
        :func:`build_sharded_graph`.
    build_neighbors : int, default=None
        NN-descent graph width including the row itself (default: in memory
        :func:`~dimbsvm.graph.knn.default_build_neighbors`, 25 for k = 10;
        the partitioned build
        :func:`~dimbsvm.graph.partitioned.partition_build_neighbors`, 32;
        the sharded build 25).
    recall_sample : int, default=2000
        Rows whose exact neighbours are found to measure the recall of an
        approximate graph (logged; for a stored graph kept in its meta);
        0 skips it (and the partitioned build's refinement).
    **options
        Options of the stored build: ``overlap``, ``max_partition_rows``,
        ``target_recall``, ``max_rounds``, ``max_candidates`` (partitioned) or ``shard_rows``,
        ``query_epsilon`` (sharded); also ``stage`` and ``fingerprint``.

    Returns
    -------
    indices : ndarray or dask.array.Array of shape (n_samples, n_neighbors), int64
        Nearest first; row ``i`` never lists ``i``. Dask arrays (read from
        the store) for a stored build, so no process holds all rows.
    distances : same type and shape, float64

    Raises
    ------
    ValueError
        ``n_neighbors`` not in ``[1, n_samples - 1]``, NaN or infinite
        values, an unknown metric, method or strategy, an option of the
        other strategy.

    Examples
    --------
    >>> X = np.array([[0.0], [1.0], [3.0], [7.0]])
    >>> indices, distances = knn_graph(X, 1)
    >>> indices.ravel(), distances.ravel()
    (array([1, 0, 1, 2]), array([1., 1., 2., 4.]))
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"The 'strategy' parameter of knn_graph must be one of {STRATEGIES}. Got {strategy!r} "
                         "instead.")
    if isinstance(X, (str, Path, da.Array)) or store is not None:
        build = build_partitioned_graph if strategy == "partitioned" else build_sharded_graph
        graph = build(X, n_neighbors, store=store, method=method, metric=metric, build_neighbors=build_neighbors,
                      random_state=random_state, recall_sample=recall_sample, client=client, **options)
        return graph.indices, graph.distances
    if options:
        raise ValueError(f"options {sorted(options)} apply to a stored build (a Dask array, a store path or "
                         "store=...); numpy input is answered in memory")
    X = check_array(X, accept_sparse="csr", dtype=[np.float64, np.float32], input_name="X")
    check_n_neighbors(n_neighbors, X.shape[0])
    index = KNNIndex(n_neighbors, method=method, metric=metric, build_neighbors=build_neighbors,
                     random_state=random_state).fit(X)
    indices, distances = index.neighbor_graph(n_neighbors)
    if index.method_ == "pynndescent" and recall_sample:
        recall, rows = _sample_recall_in_memory(X, indices, metric=metric, sample_size=recall_sample,
                                                random_state=seed_of(random_state))
        logger.info("kNN graph (pynndescent, width %d, k=%d): recall %.4f on %d rows; built in %.1f s",
                    index.build_neighbors_, n_neighbors, recall, rows.size, index.build_time_)
    return indices, distances

