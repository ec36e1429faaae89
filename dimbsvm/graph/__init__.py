"""Nearest-neighbour graphs: exact and approximate (pynndescent) kNN search."""

from dimbsvm.graph.knn import EXACT_MAX_ROWS, KNN_METHODS, nearest_neighbors

__all__ = ["EXACT_MAX_ROWS", "KNN_METHODS", "nearest_neighbors"]
