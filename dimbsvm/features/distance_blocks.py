"""Distance blocks dist(X_chunk, S) against a reference set, chunk by chunk, kept in the store.

The chunked side of :class:`~dimbsvm.features.SimilarityFeatures`: for data
beyond one process, each task computes the distance block of one chunk
against the small reference set S, so no process ever holds the n x K|S|
matrix. The moments of each reference's distances come from per-chunk
partial moments merged with Chan's pairwise update
(:mod:`dimbsvm.features.moments`), in the same pass that writes the blocks.

Stage (see :mod:`dimbsvm.store.stages`)::

    store.zarr/similarity/<name>/   distances (n x K|S|), references, mu, sigma (K x |S|)
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
from .modalities import modality_distances, parse_modalities
from .moments import block_moments, check_spread, fisher_vectors, mean_and_spread, merge_moments
from ..store import open_finished_stage
from ..store.stage_inputs import resolve_input, row_chunked
from ..store.stages import stage_fingerprint, write_small

__all__ = ["DistanceBlocks", "lazy_distances", "distance_moments", "reference_moments",
           "write_distance_blocks", "open_distance_blocks", "similarity_features"]

logger = logging.getLogger(__name__)

# Rows whose distance block (a few MB at |S| = 256) stays in cache while its moments are taken.
_SLAB_ROWS = 4096


@dataclass
class DistanceBlocks:
    """A finished ``similarity/<name>`` stage.

    Attributes
    ----------
    path : pathlib.Path
        The stage's group.
    distances : dask.array.Array of shape (n_samples, n_modalities * n_references)
        Lazily read from the store; columns are modality-major.
    references : ndarray
    modalities : list of dict
    mu, sigma : ndarray of shape (n_modalities, n_references)
        Moments over all rows written.
    fingerprint : str
    """

    path: Path
    distances: da.Array
    references: np.ndarray
    modalities: list
    mu: np.ndarray
    sigma: np.ndarray
    fingerprint: str


def lazy_distances(X, references, modalities, *, parallel=True):
    """Distance blocks of every chunk of ``X`` to ``references``, as a lazy Dask array.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, ...)
    references : ndarray of shape (n_references, ...)
    modalities : list of dict
        Parsed (:func:`~dimbsvm.features.modalities.parse_modalities`).
    parallel : bool, default=True
        DTW's OpenMP threads inside each task (its C loop holds the GIL, so
        threads of a Dask worker would not run it in parallel).

    Returns
    -------
    dask.array.Array of shape (n_samples, n_modalities * n_references), float64
    """
    X = row_chunked(X)
    S = np.asarray(references, dtype=np.float64)
    width = len(modalities) * S.shape[0]
    return da.map_blocks(_distance_chunk, X, references=S, modalities=modalities, parallel=parallel,
                         chunks=(X.chunks[0], (width,)), drop_axis=list(range(2, X.ndim)) or None,
                         dtype=np.float64, meta=np.empty((0, 0)))


def distance_moments(D, *, mask=None, client=None):
    """Mean and population standard deviation of each column of a chunked matrix.

    Each chunk gives ``[count, mean, M2]`` (two passes within the chunk); the
    chunks are merged with Chan's pairwise update in a fixed tree, so the
    result does not depend on the workers.

    Parameters
    ----------
    D : dask.array.Array of shape (n_samples, n_columns)
    mask : array-like of bool, shape (n_samples,), default=None
        Rows to include (e.g. the training rows of a fold).
    client : distributed.Client, default=None
        Defaults to the current client, else Dask's threaded scheduler.

    Returns
    -------
    mu, sigma : ndarray of shape (n_columns,)

    Examples
    --------
    >>> import dask.array as da, numpy as np
    >>> D = np.arange(12.0).reshape(6, 2)
    >>> mu, sigma = distance_moments(da.from_array(D, chunks=(4, 2)))
    >>> bool(np.allclose(mu, D.mean(0)) and np.allclose(sigma, D.std(0)))
    True
    """
    D = da.asarray(D).rechunk({1: -1})
    args = [D]
    if mask is not None:
        mask = da.asarray(mask).astype(bool)
        if mask.shape != (D.shape[0],):
            raise DataError(f"mask must have one entry per row ({D.shape[0]}), got shape {mask.shape}")
        args.append(mask.rechunk((D.chunks[0],))[:, None])
    n_blocks = D.numblocks[0]
    parts = da.map_blocks(block_moments, *args, chunks=((3,) * n_blocks, (D.shape[1],)),
                          dtype=np.float64, meta=np.empty((0, 0)))
    (stacked,) = compute(parts, client=client)
    return mean_and_spread(merge_moments(np.split(stacked, n_blocks)))


def reference_moments(X, references, modalities, *, parallel=True, client=None):
    """Mean and spread of the distance of every row of ``X`` to each reference.

    The fused form of ``distance_moments(lazy_distances(...))`` used to fit
    on Dask input: each task takes its chunk in slabs of a few thousand rows,
    computes their distances and partial moments and drops them, so no task
    holds even its own chunk's whole distance block.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, ...)
    references : ndarray of shape (n_references, ...)
    modalities : list of dict
        Parsed (:func:`~dimbsvm.features.modalities.parse_modalities`).
    parallel : bool, default=True
        DTW's OpenMP threads inside each task.
    client : distributed.Client, default=None

    Returns
    -------
    mu, sigma : ndarray of shape (n_modalities * n_references,)
        Columns modality-major, as in :func:`lazy_distances`.
    """
    X = row_chunked(X)
    S = np.asarray(references, dtype=np.float64)
    n_blocks, width = X.numblocks[0], len(modalities) * S.shape[0]
    parts = da.map_blocks(_chunk_moments, X, references=S, modalities=modalities, parallel=parallel,
                          chunks=((3,) * n_blocks, (width,)), drop_axis=list(range(2, X.ndim)) or None,
                          dtype=np.float64, meta=np.empty((0, 0)))
    (stacked,) = compute(parts, client=client)
    return mean_and_spread(merge_moments(np.split(stacked, n_blocks)))


def write_distance_blocks(X, references, modalities, store=None, name="default", *,
                          dtype="float64", fingerprint=None, parallel=True, client=None):
    """Compute dist(X_chunk, S) chunk by chunk into stage ``similarity/<name>``.

    The moments of every column come from the same pass. A finished stage
    with the same fingerprint is reused.

    Parameters
    ----------
    X : dask.array.Array, ndarray, or path of a dimbsvm store
        Rows, 2-D or 3-D (time series). A path uses the store's ``X``.
    references : ndarray of shape (n_references, ...)
    modalities : str, dict or list
        A ``distances`` specification or its parsed form
        (:mod:`dimbsvm.features.modalities`).
    store : str or path, default=None
        The store to write the stage into; defaults to ``X`` when ``X`` is a
        store path.
    name : str, default="default"
    dtype : {"float64", "float32"}, default="float64"
        Storage type of the distances. ``float32`` halves the disk space and
        the write time (compression dominates it) at a relative rounding of
        about 6e-8; the moments are taken from the float64 distances either way.
    fingerprint : str, default=None
        Identity of inputs and parameters; derived when not given (see
        :mod:`dimbsvm.store.stages`; pass one for resuming across processes).
    parallel : bool, default=True
        DTW's OpenMP threads inside each task.
    client : distributed.Client, default=None

    Returns
    -------
    DistanceBlocks

    Examples
    --------
    >>> import tempfile, os, numpy as np
    >>> from dimbsvm.store import ingest
    >>> X = np.random.default_rng(0).normal(size=(50, 3))
    >>> path = os.path.join(tempfile.mkdtemp(), "s.zarr")
    >>> _ = ingest((X, np.arange(50) % 2), path, chunk_rows=20)
    >>> blocks = write_distance_blocks(path, X[:4], "euclidean", name="demo")
    >>> blocks.distances.shape, blocks.distances.chunks[0], blocks.mu.shape
    ((50, 4), (20, 20, 10), (1, 4))
    """
    if dtype not in ("float64", "float32"):
        raise DataError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    store_path, X, source = resolve_input(X, store)
    S = np.asarray(references, dtype=np.float64)
    mods = _parsed(modalities, X.shape[1:])
    stage = f"similarity/{name}"
    fingerprint = fingerprint or stage_fingerprint("distances", source, S, {"modalities": mods,
                                                                           "dtype": dtype})
    if stage_is_complete(store_path, stage, fingerprint):
        logger.info("stage %s of %s is finished for this input; reusing it", stage, store_path)
        return open_distance_blocks(store_path, name)

    X = row_chunked(X)
    n, m, width = X.shape[0], S.shape[0], len(mods) * S.shape[0]
    group = open_stage(store_path, stage, fingerprint,
                       meta={"kind": "distances", "modalities": mods, "n_rows": n, "n_references": m})
    write_small(group, "references", S)
    target = create_checksummed_array(group, "distances", shape=(n, width), dtype=dtype,
                                      chunks=(X.chunks[0][0], width))
    n_blocks = X.numblocks[0]
    parts = da.map_blocks(_write_distance_chunk, X, target=target, references=S, modalities=mods,
                          parallel=parallel, chunks=((3,) * n_blocks, (width,)),
                          drop_axis=list(range(2, X.ndim)) or None, dtype=np.float64,
                          meta=np.empty((0, 0)))
    (stacked,) = compute(parts, client=client)
    mu, sigma = mean_and_spread(merge_moments(np.split(stacked, n_blocks)))
    write_small(group, "mu", mu.reshape(len(mods), m))
    write_small(group, "sigma", sigma.reshape(len(mods), m))
    finish_stage(group)  # last: the stage counts as done only now
    logger.info("wrote %d x %d distance blocks to %s/%s", n, width, store_path, stage)
    return open_distance_blocks(store_path, name)


def open_distance_blocks(store, name="default"):
    """Open a finished ``similarity/<name>`` stage.

    Raises
    ------
    StoreError
        If the stage is missing or was not finished.
    """
    group, meta = open_finished_stage(store, f"similarity/{name}")
    return DistanceBlocks(path=Path(store) / "similarity" / name,
                          distances=da.from_zarr(group["distances"]),
                          references=group["references"][...], modalities=meta["modalities"],
                          mu=group["mu"][...], sigma=group["sigma"][...],
                          fingerprint=meta["fingerprint"])


def similarity_features(blocks, mu=None, sigma=None):
    """Lazy similarity features (eq. (10)) from stored distance blocks.

    Parameters
    ----------
    blocks : DistanceBlocks
    mu, sigma : ndarray of shape (n_modalities, n_references), default=None
        Moments to normalise with, e.g. a fitted
        :class:`~dimbsvm.features.SimilarityFeatures`' ``mu_`` and
        ``sigma_`` or :func:`distance_moments` over a fold's training rows;
        by default the stage's own (over all its rows).

    Returns
    -------
    dask.array.Array of shape (n_samples, n_modalities * n_references)
    """
    mu = blocks.mu if mu is None else np.asarray(mu, dtype=np.float64).reshape(blocks.mu.shape)
    sigma = blocks.sigma if sigma is None else np.asarray(sigma, dtype=np.float64).reshape(mu.shape)
    check_spread(mu, sigma, blocks.modalities)
    return blocks.distances.map_blocks(fisher_vectors, mu=mu, sigma=sigma, dtype=np.float64)


def _distance_chunk(block, *, references, modalities, parallel):
    return modality_distances(block, references, modalities, parallel=parallel)


def _chunk_moments(block, *, references, modalities, parallel):
    slabs = (block[i:i + _SLAB_ROWS] for i in range(0, block.shape[0], _SLAB_ROWS))
    return merge_moments(
        block_moments(modality_distances(slab, references, modalities, parallel=parallel),
                      overwrite=True)  # the slab's distances are not needed afterwards
        for slab in slabs)


def _write_distance_chunk(block, *, target, references, modalities, parallel, block_info=None):
    start, stop = block_info[0]["array-location"][0]
    D = modality_distances(block, references, modalities, parallel=parallel)
    target[start:stop] = D.astype(target.dtype, copy=False)  # one whole Zarr chunk: this task owns it
    return block_moments(D, overwrite=True)  # D is written and not needed any more


def _parsed(modalities, input_shape):
    if isinstance(modalities, list) and modalities and all(
            isinstance(m, dict) and {"name", "metric", "columns", "channels"} <= set(m)
            for m in modalities):
        return modalities
    return parse_modalities(modalities, input_shape)

