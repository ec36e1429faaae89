"""Nearest-neighbour graphs: exact and approximate (pynndescent) kNN search, and graphs kept in a store.

- :class:`KNNIndex` - a fitted index answering ``query(X_new, k)`` for new rows.
- :func:`nearest_neighbors` - one-shot search of query rows against index rows.
- :func:`open_knn_graph` / :class:`KNNGraph` - a finished ``knn`` stage of a store.

Building a graph of a whole dataset (in memory, or partitioned or sharded
as tasks into a store) is :func:`dimbsvm.model_selection.graph_build.knn_graph`:
this package holds its plain task bodies (:mod:`~dimbsvm.graph.partitioned`,
:mod:`~dimbsvm.graph.sharded`) and numeric kernels (:mod:`~dimbsvm.graph.partition`),
never a scheduler.
"""

from .._lazy import lazy_names

#: Public name -> the submodule that defines it, imported when first used: the threshold search imports graph.knn,
#: and jobs on in-memory data need neither Zarr nor Dask (which the stored graphs import).
_LAZY = {
    **dict.fromkeys(("EXACT_MAX_ROWS", "KNN_METHODS", "KNNIndex", "default_build_neighbors", "nearest_neighbors",
                     "pynndescent_metrics", "sample_recall", "warm_up"), ".knn"),
    **dict.fromkeys(("KNNGraph", "open_knn_graph"), ".stored"),
}

__all__ = ["EXACT_MAX_ROWS", "KNN_METHODS", "KNNGraph", "KNNIndex", "default_build_neighbors", "nearest_neighbors",
           "open_knn_graph", "pynndescent_metrics", "sample_recall", "warm_up"]


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
