"""kNN graphs kept in a store: the finished stage, and the task bodies both builds share.

- :class:`KNNGraph` / :func:`open_knn_graph` - a finished ``knn`` stage, read lazily.
- :func:`exact_chunk_task` - exact neighbours of the recall sample within one chunk of rows.
- :func:`merge_exact_parts` - the exact k nearest other rows of the sample from the chunks' answers.
- :func:`task_stats` - where a task ran and its peak memory, for the stage meta.

Stage layout (see :mod:`dimbsvm.store.stages`)::

    store.zarr/knn/   indices (n x k, int64), distances (n x k, float64)
                      meta: fingerprint, parameters, strategy, recall, timings, peak memory

Plain functions on paths and arrays: the builds that submit them are in
:mod:`dimbsvm.model_selection.graph_build`.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from numbers import Integral
from pathlib import Path

import dask.array as da
import numpy as np
from sklearn import config_context
from sklearn.neighbors import NearestNeighbors
from sklearn.utils import check_random_state

from ..store import open_array, open_finished_stage
from .knn import drop_self

__all__ = ["KNNGraph", "check_n_neighbors", "exact_chunk_task", "float_dtype", "jsonable", "merge_exact_parts",
           "open_knn_graph", "peaks", "seed_of", "task_stats"]


@dataclass
class KNNGraph:
    """A finished ``knn`` stage.

    Attributes
    ----------
    path : pathlib.Path
        The stage's group.
    indices : dask.array.Array of shape (n_samples, n_neighbors), int64
        Lazily read from the store; row ``i`` never contains ``i``.
    distances : dask.array.Array of shape (n_samples, n_neighbors), float64
    meta : dict
        Parameters, ``strategy``, ``recall`` (``None`` when not measured),
        ``timings`` (seconds per step) and ``peak_rss_bytes`` per worker.
    """

    path: Path
    indices: da.Array
    distances: da.Array
    meta: dict


def open_knn_graph(store, stage="knn") -> KNNGraph:
    """A finished kNN stage of a store (:class:`KNNGraph`); ``StoreError`` if absent or incomplete."""
    group, meta = open_finished_stage(store, stage)
    return KNNGraph(Path(store) / stage, da.from_zarr(group["indices"]), da.from_zarr(group["distances"]), meta)


def check_n_neighbors(k, n):
    """Raise the ValueError of a ``n_neighbors`` that is not an integer in ``[1, n - 1]``."""
    if isinstance(k, bool) or not isinstance(k, Integral) or not 1 <= k < n:
        raise ValueError(f"n_neighbors must be an integer smaller than the number of rows "
                         f"(n_samples = {n}); got {k!r}")


def seed_of(random_state):
    """One int32 seed drawn from ``random_state``."""
    return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))


def jsonable(random_state):
    """``random_state`` as it goes into a stage's meta (ints as they are, generators by repr)."""
    return random_state if random_state is None or isinstance(random_state, Integral) else repr(random_state)


def float_dtype(dtype):
    """float64 stays float64; everything else is indexed as float32 (what pynndescent computes in)."""
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


def task_stats():
    """``{"worker": "host:pid", "peak_rss": bytes}`` of the process running the task.

    Named by host and process id rather than by Dask worker address, so that
    task bodies do not depend on the scheduler.
    """
    from ..environment import peak_rss_bytes

    return {"worker": f"{socket.gethostname()}:{os.getpid()}", "peak_rss": peak_rss_bytes()}


def peaks(stats):
    """Peak resident memory per worker over the tasks' reports (:func:`task_stats`)."""
    peak = {}
    for stat in stats:
        peak[stat["worker"]] = max(peak.get(stat["worker"], 0), stat["peak_rss"])
    return peak


def exact_chunk_task(*, rows_path, start, stop, sample, k, metric):
    """Task body: the exact k + 1 nearest rows of ``start:stop`` to each sampled row."""
    block = open_array(rows_path)[start:stop]
    with config_context(working_memory=64):  # bounds the sample-by-chunk distance slabs
        dist, ind = NearestNeighbors(n_neighbors=min(k + 1, stop - start), metric=metric,
                                     algorithm="brute").fit(block).kneighbors(sample)
    return ind + start, dist


def merge_exact_parts(parts, rows, k):
    """The exact k nearest other rows of the sampled ``rows`` from :func:`exact_chunk_task` answers."""
    ind = np.concatenate([p[0] for p in parts], axis=1)
    dist = np.concatenate([p[1] for p in parts], axis=1)
    order = np.lexsort((ind, dist), axis=-1)[:, :k + 1]
    return drop_self(np.take_along_axis(ind, order, axis=1), np.take_along_axis(dist, order, axis=1), rows)[0]
