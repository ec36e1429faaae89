"""Choosing the reference set S from training rows, in memory or chunk by chunk.

Random and stratified choices rank rows by a key that depends only on the
seed and the row's position: ``key(i) = splitmix64(seed, i)``. A random choice
of ``k`` rows is the ``k`` smallest keys; a stratified one is the ``k_c``
smallest keys within each class ``c``. Because a key never depends on how
the rows are chunked, a Dask array gives exactly the rows an in-memory array
gives, and each chunk can shortlist its own candidates (its ``k`` smallest
keys) without any process holding all ``n`` rows.
"""

from __future__ import annotations

import numpy as np

from .._splitmix import GOLDEN, splitmix64
from ..exceptions import DataError

__all__ = ["row_keys", "stratified_counts", "choose_rows", "choose_rows_chunked"]

def row_keys(seed, start, stop):
    """Pseudo-random 64-bit keys of rows ``start .. stop - 1`` for one seed.

    Examples
    --------
    >>> row_keys(0, 0, 4).tolist() == row_keys(0, 0, 10)[:4].tolist()
    True
    """
    return _hash(seed, np.arange(start, stop, dtype=np.uint64))


def _hash(seed, rows):
    """splitmix64 of ``seed * golden + row``: distinct keys in practice, no chunking dependence."""
    with np.errstate(over="ignore"):  # the state wraps around in uint64 arithmetic
        return splitmix64(np.asarray(rows, dtype=np.uint64) + np.uint64(seed) * np.uint64(GOLDEN))


def stratified_counts(classes, counts, k):
    """How many references each class gets: proportional, at least one each.

    Largest-remainder rounding of ``k * n_c / n``, raised to one for every
    class and capped at the class size.

    Parameters
    ----------
    classes : array of labels
    counts : array of int, rows per class
    k : int, total number of references

    Returns
    -------
    dict label -> int

    Examples
    --------
    >>> stratified_counts([0, 1], [95, 5], 10)
    {0: 9, 1: 1}
    >>> stratified_counts([0, 1], [999, 1], 10)
    {0: 9, 1: 1}
    """
    counts = np.asarray(counts, dtype=np.int64)
    if k < len(counts):
        raise DataError(f"stratified reference selection needs at least one reference per class: "
                        f"{len(counts)} classes but references={k}")
    quota = k * counts / counts.sum()
    take = np.minimum(np.maximum(np.floor(quota).astype(np.int64), 1), counts)
    while take.sum() < k:  # give the rest to the classes furthest below their quota
        room = np.where(take < counts, quota - take, -np.inf)
        take[np.argmax(room)] += 1
    while take.sum() > k:  # the floor of one overshot: take back from the most over-served
        over = np.where(take > 1, take - quota, -np.inf)
        take[np.argmax(over)] -= 1
    return {c.item() if hasattr(c, "item") else c: int(t) for c, t in zip(classes, take)}


def choose_rows(n, k, *, seed, y=None):
    """Row indices of the references for in-memory data (sorted).

    Parameters
    ----------
    n : int
        Number of training rows.
    k : int
        Number of references, ``1 <= k <= n``.
    seed : int
    y : array of shape (n,), default=None
        Labels: when given, the choice is stratified by class.

    Returns
    -------
    ndarray of int64, shape (k,)
    """
    keys = row_keys(seed, 0, n)
    if y is None:
        return np.sort(np.argsort(keys, kind="stable")[:k])
    y = np.asarray(y)
    classes, counts = np.unique(y, return_counts=True)
    per_class = stratified_counts(classes, counts, k)
    chosen = []
    for c, take in per_class.items():
        rows = np.flatnonzero(y == c)
        chosen.append(rows[np.argsort(keys[rows], kind="stable")[:take]])
    return np.sort(np.concatenate(chosen))


def choose_rows_chunked(row_chunks, k, *, seed, y=None, compute):
    """Row indices of the references for row-chunked (Dask) data.

    Each chunk shortlists its ``k`` smallest keys (per class when ``y`` is
    given); the shortlists are merged and cut to ``k``. Only ``y`` is read.

    Parameters
    ----------
    row_chunks : tuple of int
        Rows per chunk (``X.chunks[0]``).
    k : int
    seed : int
    y : dask.array.Array of shape (n,), default=None
        Labels, chunked like the rows; stratifies the choice.
    compute : callable
        ``compute(*collections) -> results`` (the caller's scheduler).

    Returns
    -------
    ndarray of int64, shape (k,)
        Equal to :func:`choose_rows` on the same rows, seed and labels.
    """
    import dask
    import dask.array as da

    offsets = np.cumsum((0, *row_chunks)).tolist()
    if y is None:
        # The keys need no data at all: shortlist per chunk, merge.
        tasks = [dask.delayed(_shortlist)(seed, start, stop, k)
                 for start, stop in zip(offsets[:-1], offsets[1:])]
        rows = np.concatenate(compute(*tasks))
        return np.sort(rows[np.argsort(_hash(seed, rows), kind="stable")[:k]])
    y = da.asarray(y).rechunk((tuple(row_chunks),))
    labels, counts = compute(*da.unique(y, return_counts=True))
    per_class = stratified_counts(labels, counts, k)
    tasks = [dask.delayed(_class_shortlists)(block, start, seed, per_class)
             for block, start in zip(y.to_delayed().ravel(), offsets[:-1])]
    shortlists = compute(*tasks)
    chosen = []
    for c, take in per_class.items():
        rows = np.concatenate([s[c] for s in shortlists])
        chosen.append(rows[np.argsort(_hash(seed, rows), kind="stable")[:take]])
    return np.sort(np.concatenate(chosen))


def _shortlist(seed, start, stop, k):
    keys = row_keys(seed, start, stop)
    take = min(k, stop - start)
    return start + np.argsort(keys, kind="stable")[:take]


def _class_shortlists(y_block, start, seed, per_class):
    keys = row_keys(seed, start, start + len(y_block))
    out = {}
    for c, take in per_class.items():
        rows = np.flatnonzero(y_block == c)
        out[c] = start + rows[np.argsort(keys[rows], kind="stable")[:take]]
    return out
