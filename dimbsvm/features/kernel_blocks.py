"""Distance and kernel blocks against a reference set, chunk by chunk, kept in the store.

For data beyond one process, every function here works on a Dask array chunked
by rows (or on a dimbsvm store, whose ``X`` is one). A task computes the block
of one chunk against the small reference set S and writes the rows it owns,
whole Zarr chunks aligned with the Dask chunks, so no process ever holds the
n x |S| matrix and a rerun of a task writes the same bytes. The moments of
each reference's distances come from per-chunk partial moments merged with
Chan's pairwise update (:mod:`dimbsvm.features.moments`) in the same pass.

Stages (see :func:`dimbsvm.store.open_stage`)::

    store.zarr/similarity/<name>/   distances (n x K|S|), references, mu, sigma (K x |S|)
    store.zarr/kernel/<name>/       K (n x |S|), landmarks, K_SS, normalization (|S| x |S|)
    store.zarr/nystroem/<name>/     features (n x |S|)

A stage whose fingerprint (inputs and parameters) matches a finished one is
reused, not recomputed. The fingerprint of a store's ``X`` is the store's
source fingerprint; for other Dask arrays it is the array's Dask name, which
is stable for a given graph but not across processes for every source: pass
``fingerprint=`` when a job must find its stage again after a restart.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import zarr

from ..exceptions import DataError, StoreError
from ..store import create_checksummed_array, finish_stage, open_stage, open_store, stage_is_complete
from .kernels import KERNELS, kernel_block, nystroem_normalization, resolve_gamma
from .modalities import modality_distances, parse_modalities
from .moments import block_moments, check_spread, fisher_vectors, mean_and_spread, merge_moments

__all__ = [
    "DistanceBlocks", "KernelBlocks", "row_chunked", "lazy_distances", "distance_moments",
    "write_distance_blocks", "open_distance_blocks", "similarity_features",
    "write_kernel_blocks", "open_kernel_blocks", "nystroem_features", "write_nystroem_features",
]

logger = logging.getLogger(__name__)

_ATTR = "dimbsvm"  # the attribute key dimbsvm.store writes its meta under


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


def row_chunked(X):
    """``X`` as a Dask array chunked along rows only, in equal chunks (the last may be shorter).

    Equal chunks let each task own whole Zarr chunks of the arrays written
    from it. A path is opened as a dimbsvm store and its ``X`` returned.
    """
    if isinstance(X, (str, Path)):
        X = open_store(X).X
    X = da.asarray(X)
    if X.ndim not in (2, 3):
        raise DataError(f"expected rows as a 2-D (n, n_features) or 3-D (n, channels, length) array, "
                        f"got shape {X.shape}")
    rows = X.chunks[0]
    regular = all(c == rows[0] for c in rows[:-1]) and rows[-1] <= rows[0]
    return X.rechunk({0: rows[0] if regular else max(rows), **{a: -1 for a in range(1, X.ndim)}})


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
    (stacked,) = compute_on_client(parts, client=client)
    return mean_and_spread(merge_moments(np.split(stacked, n_blocks)))


def write_distance_blocks(X, references, modalities, store=None, name="default", *,
                          fingerprint=None, parallel=True, client=None):
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
    fingerprint : str, default=None
        Identity of inputs and parameters; derived when not given (see the
        module notes).
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
    store_path, X, source = _resolve_input(X, store)
    S = np.asarray(references, dtype=np.float64)
    mods = _parsed(modalities, X.shape[1:])
    stage = f"similarity/{name}"
    fingerprint = fingerprint or _fingerprint("distances", source, S, mods)
    if stage_is_complete(store_path, stage, fingerprint):
        logger.info("stage %s of %s is finished for this input; reusing it", stage, store_path)
        return open_distance_blocks(store_path, name)

    X = row_chunked(X)
    n, m, width = X.shape[0], S.shape[0], len(mods) * S.shape[0]
    group = open_stage(store_path, stage, fingerprint,
                       meta={"kind": "distances", "modalities": mods, "n_rows": n, "n_references": m})
    _write_small(group, "references", S)
    target = create_checksummed_array(group, "distances", shape=(n, width), dtype="float64",
                                      chunks=(X.chunks[0][0], width))
    n_blocks = X.numblocks[0]
    parts = da.map_blocks(_write_distance_chunk, X, target=target, references=S, modalities=mods,
                          parallel=parallel, chunks=((3,) * n_blocks, (width,)),
                          drop_axis=list(range(2, X.ndim)) or None, dtype=np.float64,
                          meta=np.empty((0, 0)))
    (stacked,) = compute_on_client(parts, client=client)
    mu, sigma = mean_and_spread(merge_moments(np.split(stacked, n_blocks)))
    _write_small(group, "mu", mu.reshape(len(mods), m))
    _write_small(group, "sigma", sigma.reshape(len(mods), m))
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
    group, meta = _open_finished(store, f"similarity/{name}")
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
    store_path, X, source = _resolve_input(X, store)
    if X.ndim != 2:
        raise DataError(f"kernel blocks need 2-D rows (n, n_features), got shape {X.shape}")
    S = np.asarray(landmarks, dtype=np.float64)
    gamma = None if kernel == "linear" else resolve_gamma(gamma, X.shape[1])
    stage = f"kernel/{name}"
    fingerprint = fingerprint or _fingerprint("kernel", source, S, {"kernel": kernel, "gamma": gamma})
    if stage_is_complete(store_path, stage, fingerprint):
        logger.info("stage %s of %s is finished for this input; reusing it", stage, store_path)
        return open_kernel_blocks(store_path, name)

    X = row_chunked(X)
    K_SS = kernel_block(S, S, kernel, gamma=gamma)
    group = open_stage(store_path, stage, fingerprint,
                       meta={"kind": "kernel", "kernel": kernel, "gamma": gamma, "n_rows": X.shape[0]})
    _write_small(group, "landmarks", S)
    _write_small(group, "K_SS", K_SS)
    _write_small(group, "normalization", nystroem_normalization(K_SS))
    target = create_checksummed_array(group, "K", shape=(X.shape[0], S.shape[0]), dtype="float64",
                                      chunks=(X.chunks[0][0], S.shape[0]))
    K = X.map_blocks(_kernel_chunk, landmarks=S, kernel=kernel, gamma=gamma,
                     chunks=(X.chunks[0], (S.shape[0],)), dtype=np.float64, meta=np.empty((0, 0)))
    compute_on_client(da.store(K, target, lock=False, compute=False), client=client)
    finish_stage(group)
    logger.info("wrote %d x %d %s kernel blocks to %s/%s", X.shape[0], S.shape[0], kernel,
                store_path, stage)
    return open_kernel_blocks(store_path, name)


def open_kernel_blocks(store, name="default"):
    """Open a finished ``kernel/<name>`` stage (``StoreError`` if unfinished)."""
    group, meta = _open_finished(store, f"kernel/{name}")
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
    fingerprint = _fingerprint("nystroem", blocks.fingerprint, blocks.normalization, {})
    if not stage_is_complete(store, stage, fingerprint):
        features = nystroem_features(blocks)
        group = open_stage(store, stage, fingerprint, meta={"kind": "nystroem"})
        target = create_checksummed_array(group, "features", shape=features.shape, dtype="float64",
                                          chunks=(features.chunks[0][0], features.shape[1]))
        compute_on_client(da.store(features, target, lock=False, compute=False), client=client)
        finish_stage(group)
    group, _ = _open_finished(store, stage)
    return da.from_zarr(group["features"])


def _distance_chunk(block, *, references, modalities, parallel):
    return modality_distances(block, references, modalities, parallel=parallel)


def _write_distance_chunk(block, *, target, references, modalities, parallel, block_info=None):
    start, stop = block_info[0]["array-location"][0]
    D = modality_distances(block, references, modalities, parallel=parallel)
    target[start:stop] = D  # exactly one Zarr chunk: this task owns it
    return block_moments(D, overwrite=True)  # D is written and not needed any more


def _kernel_chunk(block, *, landmarks, kernel, gamma):
    return kernel_block(block, landmarks, kernel, gamma=gamma)


def _right_multiply(block, *, matrix):
    return block @ matrix


def compute_on_client(*collections, client=None):
    """``dask.compute`` on the given or current ``distributed`` client, else in-process threads."""
    from ..distributed.client import current_client

    client = current_client(client)
    if client is not None:
        return client.compute(list(collections), sync=True)
    return dask.compute(*collections)


def _resolve_input(X, store):
    if isinstance(X, (str, Path)):
        stored = open_store(X)
        return Path(store or X), stored.X, stored.meta["fingerprint"]
    if store is None:
        raise StoreError("store is required when X is an array (pass the store path to write to)")
    X = da.asarray(X)
    return Path(store), X, X.name


def _parsed(modalities, input_shape):
    if isinstance(modalities, list) and modalities and all(
            isinstance(m, dict) and {"name", "metric", "columns", "channels"} <= set(m)
            for m in modalities):
        return modalities
    return parse_modalities(modalities, input_shape)


def _fingerprint(kind, source, array, params):
    digest = hashlib.sha256()
    digest.update(json.dumps([kind, source, params], sort_keys=True, default=str).encode())
    array = np.ascontiguousarray(array)
    digest.update(str((array.dtype, array.shape)).encode())
    digest.update(array.tobytes())
    return digest.hexdigest()


def _write_small(group, name, values):
    values = np.asarray(values, dtype=np.float64)
    arr = create_checksummed_array(group, name, shape=values.shape, dtype="float64",
                                   chunks=tuple(max(1, s) for s in values.shape))
    arr[...] = values


def _open_finished(store, stage):
    path = Path(store) / stage
    try:
        group = zarr.open_group(str(path), mode="r")
    except (FileNotFoundError, ValueError) as exc:
        raise StoreError(f"{path} is not a stage of a dimbsvm store: {exc}") from exc
    meta = dict(group.attrs.get(_ATTR) or {})
    if not meta.get("complete"):
        raise StoreError(f"stage {path} is incomplete (its completion marker is missing); "
                         "compute it again")
    return group, meta
