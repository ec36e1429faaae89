"""Nearest-neighbour graphs: exact and approximate (pynndescent) kNN search, in memory or sharded.

- :func:`knn_graph` - every row's k nearest other rows; numpy in memory, a Dask
  array or a store built shard by shard on Dask workers into the store's ``knn`` stage.
- :class:`KNNIndex` - a fitted index answering ``query(X_new, k)`` for new rows.
- :func:`nearest_neighbors` - one-shot search of query rows against index rows.
"""

from dimbsvm.graph.knn import (EXACT_MAX_ROWS, KNN_METHODS, KNNIndex, default_build_neighbors, nearest_neighbors,
                               pynndescent_metrics, sample_recall, warm_up)
from dimbsvm.graph.sharded import KNNGraph, build_sharded_graph, knn_graph, open_knn_graph, warm_up_workers

__all__ = ["EXACT_MAX_ROWS", "KNN_METHODS", "KNNGraph", "KNNIndex", "build_sharded_graph", "default_build_neighbors",
           "knn_graph", "nearest_neighbors", "open_knn_graph", "pynndescent_metrics", "sample_recall", "warm_up",
           "warm_up_workers"]
