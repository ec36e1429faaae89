"""Feature maps: the similarity (Fisher) kernel, distances and kernel blocks.

- :class:`SimilarityFeatures` - normalised distances to a reference set (eq. (10)).
- :mod:`~dimbsvm.features.distances` - distances to references (incl. DTW, Jensen-Shannon).
- :mod:`~dimbsvm.features.modalities` - which distance reads which columns or channels.
- :mod:`~dimbsvm.features.kernels` - kernel blocks K(X, S) and the Nystroem map.
- :mod:`~dimbsvm.features.kernel_blocks` - the same, chunk by chunk into the Zarr store.
"""

from .distances import METRICS, pairwise_distances_to
from .kernel_blocks import (
    DistanceBlocks,
    KernelBlocks,
    distance_moments,
    nystroem_features,
    open_distance_blocks,
    open_kernel_blocks,
    similarity_features,
    write_distance_blocks,
    write_kernel_blocks,
    write_nystroem_features,
)
from .kernels import KERNELS, kernel_block, nystroem_normalization
from .similarity import SimilarityFeatures

__all__ = [
    "SimilarityFeatures",
    "METRICS",
    "KERNELS",
    "pairwise_distances_to",
    "kernel_block",
    "nystroem_normalization",
    "DistanceBlocks",
    "KernelBlocks",
    "distance_moments",
    "write_distance_blocks",
    "open_distance_blocks",
    "similarity_features",
    "write_kernel_blocks",
    "open_kernel_blocks",
    "nystroem_features",
    "write_nystroem_features",
]
