"""Decoded chunks of a store's features, kept in each process while memory allows.

A store job passes over the same chunks many times: every fold reads its
training rows for the scaler and the members' bags, again for the members'
out-of-bag margins, and its test rows for scoring; the final model reads them
all again. Decoding a chunk (decompression and checksum) costs more than the
arithmetic of any of those passes, so each process keeps the chunks it has
decoded, least recently used first out, within a share of its memory limit,
and only while the process's resident memory leaves its tasks room. A store
larger than that share is read as before, chunk by chunk.

Chunks are keyed by the store's path and its content fingerprint, so a store
rebuilt from other data is read again. Cached chunks are read-only; readers
get copies. A job drops its store's chunks when it ends (:func:`release_store`),
so a worker of a shared cluster does not hold them between jobs.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict

import numpy as np

from ..parallel.policy import worker_memory_limit

__all__ = ["CACHE_SHARE", "RESIDENT_SHARE", "ChunkCache", "cache_budget", "memory_limit", "process_cache",
           "release_store"]

logger = logging.getLogger(__name__)

#: Share of the process's memory limit (a Dask worker's, else the machine's) the cache may hold.
#: ``DIMBSVM_CHUNK_CACHE_SHARE`` overrides it; 0 turns the cache off.
CACHE_SHARE = 0.25
#: A chunk is kept only while the process's resident memory is below this share of its limit: tasks
#: sized to a small worker's limit keep their headroom (Dask pauses a worker at 80 %).
RESIDENT_SHARE = 0.5


class ChunkCache:
    """Decoded chunks by key, least recently used evicted first, at most ``max_bytes`` in all.

    Parameters
    ----------
    max_bytes : int
        The most bytes of chunks held; a chunk larger than this is not kept.
    has_room : callable, default=None
        ``has_room(nbytes)``: whether the process can spare ``nbytes`` more
        (e.g. its resident memory against its limit); a chunk it refuses is
        not kept. ``None``: only ``max_bytes`` counts.

    Examples
    --------
    >>> cache = ChunkCache(max_bytes=100)
    >>> cache.put("a", np.zeros(10))  # 80 bytes
    >>> cache.get("a").flags.writeable
    False
    >>> cache.put("b", np.zeros(5))  # 40 more: "a" goes
    >>> cache.get("a") is None, cache.nbytes
    (True, 40)
    """

    def __init__(self, max_bytes: int, has_room=None):
        self.max_bytes = int(max_bytes)
        self.has_room = has_room
        self.nbytes = 0
        self.hits = self.misses = 0  # lookups answered and not, since the process started
        self._chunks: OrderedDict = OrderedDict()
        self._lock = threading.Lock()  # a worker may run several tasks on threads

    def get(self, key):
        """The chunk under ``key`` (read-only), or ``None``."""
        with self._lock:
            chunk = self._chunks.get(key)
            if chunk is None:
                self.misses += 1
            else:
                self.hits += 1
                self._chunks.move_to_end(key)
            return chunk

    def put(self, key, chunk: np.ndarray) -> None:
        """Keep ``chunk`` under ``key`` (made read-only), evicting the least recently used to make room."""
        if chunk.nbytes > self.max_bytes or (self.has_room is not None and not self.has_room(chunk.nbytes)):
            return
        chunk.setflags(write=False)
        with self._lock:
            old = self._chunks.pop(key, None)
            if old is not None:
                self.nbytes -= old.nbytes
            while self._chunks and self.nbytes + chunk.nbytes > self.max_bytes:
                _, evicted = self._chunks.popitem(last=False)
                self.nbytes -= evicted.nbytes
            self._chunks[key] = chunk
            self.nbytes += chunk.nbytes

    def discard(self, prefix: tuple) -> int:
        """Drop every chunk whose key starts with ``prefix``; the bytes freed."""
        with self._lock:
            keys = [key for key in self._chunks if key[:len(prefix)] == prefix]
            freed = sum(self._chunks.pop(key).nbytes for key in keys)
            self.nbytes -= freed
            return freed


def memory_limit() -> int:
    """This process's memory limit: a Dask worker's ``memory_limit``, else (or without one) the machine's memory."""
    limit = worker_memory_limit()
    if not limit:
        import psutil

        limit = psutil.virtual_memory().total
    return int(limit)


def cache_budget() -> int:
    """Bytes this process's cache may hold: :data:`CACHE_SHARE` of its :func:`memory_limit`."""
    share = float(os.environ.get("DIMBSVM_CHUNK_CACHE_SHARE", CACHE_SHARE))
    return int(share * memory_limit()) if share > 0 else 0


def _below_resident_share(limit: int):
    """``has_room`` for :class:`ChunkCache`: resident memory plus the chunk below :data:`RESIDENT_SHARE` of ``limit``."""
    import psutil

    process = psutil.Process()

    def has_room(nbytes: int) -> bool:
        return process.memory_info().rss + nbytes <= RESIDENT_SHARE * limit

    return has_room


_CACHE: ChunkCache | None = None
_CACHE_LOCK = threading.Lock()


def process_cache() -> ChunkCache:
    """This process's chunk cache, sized by :func:`cache_budget` when first used."""
    global _CACHE
    with _CACHE_LOCK:
        if _CACHE is None:
            _CACHE = ChunkCache(cache_budget(), has_room=_below_resident_share(memory_limit()))
            logger.debug("store chunk cache: up to %.0f MiB", _CACHE.max_bytes / 2**20)
        return _CACHE


def release_store(path: str, fingerprint: str) -> int:
    """Drop this process's cached chunks of one store (a job's end); the bytes freed.

    Chunks are keyed ``(path, fingerprint, chunk)`` (:class:`~dimbsvm.store.StoreRows`).
    """
    return _CACHE.discard((str(path), str(fingerprint))) if _CACHE is not None else 0
