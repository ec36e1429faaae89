"""A picklable handle on a store's features that reads only the rows asked for."""

from __future__ import annotations

import numpy as np

from ..exceptions import StoreError

__all__ = ["StoreLabels", "StoreRows", "check_version"]

# Labels each process has read, by store path and fingerprint: every task on a worker shares one copy.
_LABELS: dict = {}


class StoreRows:
    """A picklable handle on a store's features that reads only the rows asked for.

    Tasks receive this instead of the data: it carries the store path, and
    each process opens the array the first time it reads. It supports
    ``rows[index_array]`` and ``len(rows)`` and ``shape``, which is all the
    fold and member code needs. Reads go through the checked store: a missing
    chunk raises :class:`~dimbsvm.exceptions.StoreError`, never zeros.

    With a ``fingerprint`` (the store's content fingerprint), each process
    keeps the chunks it decodes in its :func:`~dimbsvm.store.chunk_cache.process_cache`,
    so the passes of a job over the same chunks decode each once per process.

    Parameters
    ----------
    path : str or path
    shape : tuple
        The features' shape.
    fingerprint : str, default=""
        The store's content fingerprint; ``""``: chunks are not cached.
    """

    fingerprint = ""  # (a handle pickled before it had one)

    def __init__(self, path, shape, fingerprint=""):
        self.path = str(path)
        self.shape = tuple(shape)
        self.fingerprint = str(fingerprint)
        self._array = None

    def __len__(self):
        return self.shape[0]

    @property
    def block_rows(self) -> int:
        """Rows per stored chunk: the natural amount to read at once."""
        return int(self._open().chunks[0])

    def _open(self):
        if self._array is None:
            from ._zarr import open_group  # Zarr imported where a store is read, not by its importers

            self._array = open_group(self.path, mode="r")["X"]
        return self._array

    def __getitem__(self, rows):
        return self.take(rows)

    def take(self, rows, dtype=np.float64):
        """Rows ``rows`` (integer or boolean index) as ``dtype``; ``None``: as stored (no conversion).

        ``rows[index]`` is ``take(index)``. A task that only looks at the
        values (a range, a gather) reads them as stored: a float32 store's
        block is half the bytes, and converting later gives the same values.
        """
        self._open()
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        cache = self._cache()
        if cache is not None and rows.ndim == 1 and rows.dtype.kind in "iu" and rows.size \
                and rows.min() >= 0 and rows.max() < self.shape[0]:
            return self._take_cached(rows, dtype, cache)
        try:
            if _is_contiguous(rows) and rows[-1] < self._array.shape[0]:  # e.g. a chunk: a slice is twice as fast
                block = np.asarray(self._array[int(rows[0]):int(rows[-1]) + 1], dtype=dtype)
                self._check_version()
                return block
            # zarr reads the chunks these rows touch; sorting keeps that sequential
            order = np.argsort(rows, kind="stable")
            block = self._array.get_orthogonal_selection((rows[order],))
        except StoreError:
            raise
        except ValueError as exc:  # a failed checksum
            raise StoreError(self._damage(rows, exc)) from exc
        self._check_version()
        out = np.empty_like(block, dtype=dtype or block.dtype)
        out[order] = block
        return out

    def _check_version(self):
        """Refuse rows read from a store that is no longer the one the handle was made for.

        A store replaced at its path (``dimbsvm ingest --overwrite``) while a
        job reads it would otherwise give the job's tasks a mix of the old
        and the new rows. Checked after every read from disk: a read that
        met the new store's chunks finds the new store's meta after it (the
        two are swapped in at once). Cached chunks were read and checked
        before.
        """
        if self.fingerprint:
            check_version(self.path, self.fingerprint)

    def _cache(self):
        """This process's chunk cache, or ``None`` (no fingerprint to key it by, or a cache of no bytes)."""
        if not self.fingerprint:
            return None
        from .chunk_cache import process_cache

        cache = process_cache()
        return cache if cache.max_bytes > 0 else None

    def _take_cached(self, rows, dtype, cache):
        """``take`` through the chunk cache: each chunk the rows touch decoded once per process, then kept."""
        step = int(self._array.chunks[0])
        ordered = bool(np.all(rows[1:] >= rows[:-1]))
        distinct = ordered and bool(np.all(rows[1:] > rows[:-1]))  # a run of distinct sorted rows may be a slice
        order = None if ordered else np.argsort(rows, kind="stable")
        sorted_rows = rows if ordered else rows[order]
        first, last = int(sorted_rows[0]) // step, int(sorted_rows[-1]) // step
        bounds = np.searchsorted(sorted_rows, np.arange(first, last + 2) * step)
        pieces = []
        for chunk, lo, hi in zip(range(first, last + 1), bounds[:-1], bounds[1:]):
            if hi > lo:
                block = self._chunk(chunk, step, cache)
                wanted = sorted_rows[lo:hi] - chunk * step
                contiguous = distinct and int(wanted[-1]) - int(wanted[0]) == hi - lo - 1
                pieces.append(block[int(wanted[0]):int(wanted[-1]) + 1] if contiguous else block[wanted])
        out = np.empty((rows.size, *self.shape[1:]), dtype=dtype or pieces[0].dtype)  # a copy: chunks stay as read
        if not ordered:
            out[order] = np.concatenate(pieces)
        elif len(pieces) > 1:
            np.concatenate(pieces, out=out, casting="unsafe")
        else:
            np.copyto(out, pieces[0], casting="unsafe")
        return out

    def _chunk(self, chunk, step, cache):
        """Chunk ``chunk`` of X, decoded: from the cache, or read (checked) and kept there."""
        key = (self.path, self.fingerprint, chunk)
        block = cache.get(key)
        if block is None:
            start = chunk * step
            try:
                block = np.asarray(self._array[start:start + step])
            except StoreError:
                raise
            except ValueError as exc:  # a failed checksum
                raise StoreError(self._damage(np.array([start]), exc)) from exc  # (one row names its chunk)
            self._check_version()
            cache.put(key, block)
        return block

    def _damage(self, rows, exc: BaseException) -> str:
        """The error for a failed read of ``rows``: the first of their chunks that fails its checksum, named.

        A job's check no longer reads every chunk of a large store that
        records its values finite, so a damaged chunk may be met here first;
        the message names it as :func:`~dimbsvm.store.find_damage` does. Only
        the chunks these rows touch are read again.
        """
        step, n_rows = int(self._array.chunks[0]), int(self._array.shape[0])
        for chunk in np.unique(np.asarray(rows, dtype=np.int64) // step).tolist():
            start = chunk * step
            try:
                self._array[start:start + step]
            except ValueError as chunk_exc:
                return (f"store {self.path} has a damaged chunk: chunk {chunk} of X (rows {start}.."
                        f"{min(start + step, n_rows) - 1}) failed its checksum: {chunk_exc}; rebuild it with "
                        f"`dimbsvm ingest SOURCE {self.path} --overwrite`")
        return f"store {self.path} has a damaged chunk: {exc}"

    def labels(self, class_map: dict | None = None) -> "StoreLabels":
        """A handle on the same store's labels, coded as ``class_map`` (class name -> code) codes them.

        A job may code the classes otherwise than the store does (its
        ``data.positive``, a champion's coding): its tasks must then read the
        labels in the job's codes, as its driver counts them.
        """
        from .stages import read_meta

        meta = read_meta(self.path) or {}
        stored = meta.get("class_map") or {}
        codes = None
        if class_map and stored and any(class_map.get(name, code) != code for name, code in stored.items()):
            codes = {int(code): int(class_map[name]) for name, code in stored.items() if name in class_map}
        return StoreLabels(self.path, self.shape[0], meta.get("fingerprint", ""), codes=codes)

    def __getstate__(self):
        return {"path": self.path, "shape": self.shape, "fingerprint": self.fingerprint, "_array": None}

    def __repr__(self):
        return f"StoreRows({self.path!r}, shape={self.shape})"


def check_version(path, fingerprint: str, *, content: bool = True) -> None:
    """Raise :class:`~dimbsvm.exceptions.StoreError` if the store at ``path`` no longer holds ``fingerprint``.

    ``content``: ``fingerprint`` is the store's content fingerprint (its
    source's and its dtype, :func:`~dimbsvm.store.content_fingerprint`), else
    its source's alone (what the labels depend on).
    """
    from .fingerprints import content_fingerprint
    from .location import is_url
    from .stages import read_meta

    if is_url(path):  # a store at a URL is never replaced (store.placement): nothing to check
        return
    try:
        meta = read_meta(path) or {}
    except StoreError:
        meta = {}
    now = content_fingerprint(meta) if content else meta.get("fingerprint") or ""
    if now != fingerprint:
        raise StoreError(f"store {path} was replaced while this job read it (it held {fingerprint[:12] or 'nothing'}"
                         f", now {now[:12] or 'nothing'}): no result mixes the two; run the job again on the "
                         "store as it is now")


def _is_contiguous(rows) -> bool:
    """Whether ``rows`` are ``first, first + 1, ..., last`` (non-negative integers)."""
    if rows.ndim != 1 or rows.size == 0 or rows.dtype.kind not in "iu" or rows[0] < 0:
        return False
    return int(rows[-1]) - int(rows[0]) == rows.size - 1 and bool(np.all(rows[1:] > rows[:-1]))


class StoreLabels:
    """A picklable handle on a store's labels: a task graph carries the path, not the labels.

    The first use in a process reads ``y`` (checked: a missing chunk raises)
    and keeps it for every later task of that process. It behaves as the
    label array: ``len``, ``shape``, indexing and ``np.asarray``.

    Parameters
    ----------
    path : str or path
        The store.
    n_rows : int
    fingerprint : str
        The store's source fingerprint: a rebuilt store is read again.
    codes : dict, default=None
        ``{stored code: code}``: the labels as a job codes them, where it
        codes the classes otherwise than the store (every stored code named).
    counts : dict, default=None
        ``{stored code: rows}``, the store's record of its classes: the handle
        then counts its classes without reading the labels
        (:meth:`counted_classes`), so a driver holds none of them.
    """

    codes = None  # (a handle pickled before it had them)
    counts = None

    def __init__(self, path, n_rows, fingerprint="", codes=None, counts=None):
        self.path = str(path)
        self.shape = (int(n_rows),)
        self.fingerprint = str(fingerprint)
        self.codes = None if not codes else {int(k): int(v) for k, v in sorted(codes.items())}
        self.counts = None if counts is None else {int(k): int(v) for k, v in counts.items() if int(v)}

    def counted_classes(self):
        """``(classes, counts)`` as :func:`numpy.unique` would count the labels, from the store's record, or
        ``None`` where the handle has none (then the labels are read and counted)."""
        if self.counts is None:
            return None
        by_code = {}
        for code, rows in self.counts.items():
            code = code if self.codes is None else self.codes[code]
            by_code[code] = by_code.get(code, 0) + rows
        classes = np.array(sorted(by_code), dtype=np.int64)
        return classes, np.array([by_code[c] for c in classes.tolist()], dtype=np.int64)

    def recoded(self, codes: dict) -> "StoreLabels":
        """The same labels with each of this handle's codes replaced by ``codes[code]``."""
        stored = {code: code for code in self.counts} if self.codes is None and self.counts else self.codes
        if stored is None:
            raise ValueError("a handle without its class counts is recoded from its store's class map")
        composed = {old: int(codes[new]) for old, new in stored.items()}
        return StoreLabels(self.path, self.shape[0], self.fingerprint, codes=composed, counts=self.counts)

    def __len__(self):
        return self.shape[0]

    def _cache_keys(self) -> tuple:
        """``(key, stored_key)`` of this process's cache: the labels as coded, and as stored."""
        stored_key = (self.path, self.fingerprint)
        return (stored_key if self.codes is None else (*stored_key, tuple(self.codes.items()))), stored_key

    def values(self) -> np.ndarray:
        key, stored_key = self._cache_keys()
        if key not in _LABELS:
            if stored_key not in _LABELS:
                values = self._read(slice(None))
                values.setflags(write=False)  # shared by every task of this process
                _LABELS[stored_key] = values
            if key != stored_key:
                _LABELS[key] = _recoded(_LABELS[stored_key], self.codes)
                _LABELS[key].setflags(write=False)
        return _LABELS[key]

    def span(self, start: int, stop: int) -> np.ndarray:
        """Labels ``start`` up to ``stop``: only the stored chunks holding them are read (a task over one
        chunk), unless this process holds every label already."""
        if any(key in _LABELS for key in self._cache_keys()):
            return self.values()[start:stop]
        values = self._read(slice(int(start), int(stop)))
        return values if self.codes is None else _recoded(values, self.codes)

    def _read(self, rows: slice) -> np.ndarray:
        """The stored labels ``rows``, checked against the store the handle was made for."""
        try:
            from ._zarr import open_group

            values = np.asarray(open_group(self.path, mode="r")["y"][rows])
        except StoreError:
            raise
        except ValueError as exc:  # a failed checksum
            raise StoreError(f"store {self.path}: the labels have a damaged chunk: {exc}") from exc
        if self.fingerprint:  # the labels of the store the handle was made for, not of its replacement
            check_version(self.path, self.fingerprint, content=False)
        return values

    def __array__(self, dtype=None, copy=None):
        values = self.values()
        return values if dtype is None else values.astype(dtype)

    def __getitem__(self, rows):
        return self.values()[rows]

    def __repr__(self):
        return f"StoreLabels({self.path!r}, n_rows={self.shape[0]})"


def _recoded(stored: np.ndarray, codes: dict) -> np.ndarray:
    """``stored`` with each stored code replaced by ``codes[code]`` (a code not named is an error)."""
    found = np.unique(stored)
    missing = [int(code) for code in found if int(code) not in codes]
    if missing:
        raise StoreError(f"the store's labels hold codes {missing} that the job's classes do not name")
    lookup = np.zeros(int(found.max()) + 1 if found.size else 1, dtype=stored.dtype)
    for code, new in codes.items():
        if code < lookup.size:
            lookup[code] = new
    return lookup[stored]
