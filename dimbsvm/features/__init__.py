"""Feature maps: the similarity (Fisher) kernel, distances and kernel blocks.

- :class:`SimilarityFeatures` - normalised distances to a reference set (eq. (10)).
- :class:`StructuralFeatures` - [x, lambda * n(x)], the kNN neighbourhood vector appended (structural similarity).
- :class:`HIKEncoder` - unary codes on which a linear kernel is the histogram intersection kernel.
- :mod:`~dimbsvm.features.distances` - distances to references (incl. DTW, Jensen-Shannon).
- :mod:`~dimbsvm.features.modalities` - which distance reads which columns or channels.
- :mod:`~dimbsvm.features.moments` - moments of distances (chunk merging) and eq. (10).
- :mod:`~dimbsvm.features.references` - choosing the reference rows, in memory or by chunks.
- :mod:`~dimbsvm.features.kernels` - kernel blocks K(X, S) and the Nystroem map.
- :mod:`~dimbsvm.features.distance_blocks`, :mod:`~dimbsvm.features.kernel_blocks` - distance
  and kernel blocks chunk by chunk into the Zarr store (:mod:`~dimbsvm.store.stages`).
"""

from .._lazy import lazy_names

#: Public name -> the submodule that defines it, imported when first used: the estimators import features.kernels,
#: and jobs on in-memory data need neither Zarr nor Dask (which the stored blocks import).
_LAZY = {
    **dict.fromkeys(("DISTANCE_METRICS", "pairwise_distances_to"), ".distances"),
    **dict.fromkeys(("DistanceBlocks", "distance_moments", "open_distance_blocks", "reference_moments",
                     "similarity_features", "write_distance_blocks"), ".distance_blocks"),
    **dict.fromkeys(("KernelBlocks", "nystroem_features", "open_kernel_blocks", "write_kernel_blocks",
                     "write_nystroem_features"), ".kernel_blocks"),
    **dict.fromkeys(("KERNELS", "kernel_block", "nystroem_normalization"), ".kernels"),
    "SimilarityFeatures": ".similarity",
    "HIKEncoder": ".hik",
    "StructuralFeatures": ".structural",
}

__all__ = [
    "SimilarityFeatures",
    "StructuralFeatures",
    "HIKEncoder",
    "DISTANCE_METRICS",
    "KERNELS",
    "pairwise_distances_to",
    "kernel_block",
    "nystroem_normalization",
    "DistanceBlocks",
    "KernelBlocks",
    "distance_moments",
    "reference_moments",
    "write_distance_blocks",
    "open_distance_blocks",
    "similarity_features",
    "write_kernel_blocks",
    "open_kernel_blocks",
    "nystroem_features",
    "write_nystroem_features",
]


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
