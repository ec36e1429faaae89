"""Kernel blocks K(X_chunk, S) against landmarks, chunk by chunk, kept in the store.

The same chunked machinery as :mod:`dimbsvm.features.distance_blocks`, for
kernels: each task writes K(X_chunk, S) for the rows it owns, and the stage
keeps K(S, S) and its inverse square root, so Nystroem features
``K(X, S) K(S, S)^{-1/2}`` (a linear stand-in for a kernel method at any n)
need nothing but the stage.

Stages (see :mod:`dimbsvm.store.stages`)::

    store.zarr/kernel/<name>/       K (n x |S|), landmarks, K_SS, normalization (|S| x |S|)
    store.zarr/nystroem/<name>/     features (n x |S|)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import dask.array as da
import numpy as np

from ..parallel import compute
from ..exceptions import DataError
from ..store import create_checksummed_array, finish_stage, open_stage, stage_is_complete
from .kernels import KERNELS, kernel_block, nystroem_normalization, resolve_gamma
from ..store import open_finished_stage
from ..store.stage_inputs import resolve_input, row_chunked
from ..store.stages import stage_fingerprint, write_small

__all__ = ["KernelBlocks", "write_kernel_blocks", "open_kernel_blocks", "nystroem_features",
           "write_nystroem_features"]

logger = logging.getLogger(__name__)


@dataclass
class KernelBlocks:
    """A finished ``kernel/<name>`` stage.

    Attributes
    ----------
    path : pathlib.Path
    K : dask.array.Array of shape (n_samples, n_landmarks)
    landmarks : ndarray of shape (n_landmarks, n_features)
    normalization : ndarray of shape (n_landmarks, n_landmarks)
        ``K(S, S)^{-1/2}``, see :func:`~dimbsvm.features.kernels.nystroem_normalization`.
    kernel : str
    gamma : float or None
    fingerprint : str
    """

    path: Path
    K: da.Array
    landmarks: np.ndarray
    normalization: np.ndarray
    kernel: str
    gamma: float | None
    fingerprint: str


def write_kernel_blocks(X, landmarks, store=None, name="default", *, kernel="rbf", gamma=None,
                        fingerprint=None, client=None):
    """Compute K(X_chunk, S) chunk by chunk into stage ``kernel/<name>``.

    Also stores ``K(S, S)`` and its inverse square root, so Nystroem
    features (:func:`nystroem_features`) need nothing but this stage.

    Parameters
    ----------
    X : dask.array.Array, ndarray, or path of a dimbsvm store
        2-D rows.
    landmarks : ndarray of shape (n_landmarks, n_features)
    store : str or path, default=None
        Defaults to ``X`` when ``X`` is a store path.
    name : str, default="default"
    kernel : {"rbf", "linear", "laplacian"}, default="rbf"
    gamma : float, default=None
        ``None`` means ``1 / n_features``.
    fingerprint : str, default=None
    client : distributed.Client, default=None

    Returns
    -------
    KernelBlocks
    """
    if kernel not in KERNELS:
        raise DataError(f"unknown kernel {kernel!r}; choose one of {', '.join(KERNELS)}")
    store_path, X, source = resolve_input(X, store)
    if X.ndim != 2:
        raise DataError(f"kernel blocks need 2-D rows (n, n_features), got shape {X.shape}")
    S = np.asarray(landmarks, dtype=np.float64)
    gamma = None if kernel == "linear" else resolve_gamma(gamma, X.shape[1])
    stage = f"kernel/{name}"
    fingerprint = fingerprint or stage_fingerprint("kernel", source, S, {"kernel": kernel, "gamma": gamma})
    if stage_is_complete(store_path, stage, fingerprint):
        logger.info("stage %s of %s is finished for this input; reusing it", stage, store_path)
        return open_kernel_blocks(store_path, name)

    X = row_chunked(X)
    K_SS = kernel_block(S, S, kernel, gamma=gamma)
    group = open_stage(store_path, stage, fingerprint,
                       meta={"kind": "kernel", "kernel": kernel, "gamma": gamma, "n_rows": X.shape[0]})
    write_small(group, "landmarks", S)
    write_small(group, "K_SS", K_SS)
    write_small(group, "normalization", nystroem_normalization(K_SS))
    target = create_checksummed_array(group, "K", shape=(X.shape[0], S.shape[0]), dtype="float64",
                                      chunks=(X.chunks[0][0], S.shape[0]))
    K = X.map_blocks(_kernel_chunk, landmarks=S, kernel=kernel, gamma=gamma,
                     chunks=(X.chunks[0], (S.shape[0],)), dtype=np.float64, meta=np.empty((0, 0)))
    compute(da.store(K, target, lock=False, compute=False), client=client)
    finish_stage(group)
    logger.info("wrote %d x %d %s kernel blocks to %s/%s", X.shape[0], S.shape[0], kernel,
                store_path, stage)
    return open_kernel_blocks(store_path, name)


def open_kernel_blocks(store, name="default"):
    """Open a finished ``kernel/<name>`` stage (``StoreError`` if unfinished)."""
    group, meta = open_finished_stage(store, f"kernel/{name}")
    return KernelBlocks(path=Path(store) / "kernel" / name, K=da.from_zarr(group["K"]),
                        landmarks=group["landmarks"][...],
                        normalization=group["normalization"][...], kernel=meta["kernel"],
                        gamma=meta["gamma"], fingerprint=meta["fingerprint"])


def nystroem_features(blocks):
    """Lazy Nystroem features ``K(X, S) K(S, S)^{-1/2}`` from stored kernel blocks.

    Parameters
    ----------
    blocks : KernelBlocks

    Returns
    -------
    dask.array.Array of shape (n_samples, n_landmarks)
    """
    return blocks.K.map_blocks(_right_multiply, matrix=blocks.normalization, dtype=np.float64)


def write_nystroem_features(blocks, store, name="default", *, client=None):
    """Write :func:`nystroem_features` of a kernel stage to stage ``nystroem/<name>``.

    Returns
    -------
    dask.array.Array
        The stored features, read lazily.
    """
    stage = f"nystroem/{name}"
    fingerprint = stage_fingerprint("nystroem", blocks.fingerprint, blocks.normalization, {})
    if not stage_is_complete(store, stage, fingerprint):
        features = nystroem_features(blocks)
        group = open_stage(store, stage, fingerprint, meta={"kind": "nystroem"})
        target = create_checksummed_array(group, "features", shape=features.shape, dtype="float64",
                                          chunks=(features.chunks[0][0], features.shape[1]))
        compute(da.store(features, target, lock=False, compute=False), client=client)
        finish_stage(group)
    group, _ = open_finished_stage(store, stage)
    return da.from_zarr(group["features"])


def _kernel_chunk(block, *, landmarks, kernel, gamma):
    return kernel_block(block, landmarks, kernel, gamma=gamma)


def _right_multiply(block, *, matrix):
    return block @ matrix

