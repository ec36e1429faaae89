"""A run's finished ensemble members, kept so that an interrupted run resumes without refitting them."""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..artifacts import load_object, save_object

__all__ = ["PartDirectory"]


class PartDirectory:
    """The fold engine's :class:`~dimbsvm.fold_data.context.PartStore` as a directory of skops files.

    One file per (fold, part) under ``directory`` (in the partial run
    directory); a fold's files are removed once its result is saved. Files
    are read back with the trust rules of a model (:func:`load_object`).

    Parameters
    ----------
    directory : path-like
    background : bool, default=False
        Write and remove files in a thread of their own, in the order they
        were asked for, so that the run does not wait on them: skops'
        encoding of a member is Python work that overlaps the next member's
        fit (LIBLINEAR and LIBSVM train without the interpreter lock).
        :meth:`load` and :meth:`flush` wait for every write asked for before
        them; a write that failed is raised by the next of them, or by
        :meth:`save` or :meth:`forget`. A crash loses at most the writes not
        yet done, each of which is whole or absent (written to a temporary
        name, then renamed): the resumed run refits those parts.
    """

    def __init__(self, directory, *, background=False):
        self.directory = Path(directory)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dimbsvm-parts") if background else None
        self._pending = deque()  # futures of the writes asked for, oldest first (one thread: done in order)

    def __repr__(self) -> str:
        return str(self.directory)

    def path(self, key, index) -> Path:
        """The file of part ``index`` of fold ``key``."""
        name = "-".join(str(k) for k in key)
        return self.directory / f"{name}-part{index}.skops"

    def load(self, key, index):
        """The saved part, or ``None`` when it was not saved."""
        self.flush()
        path = self.path(key, index)
        return load_object(path) if path.exists() else None

    def save(self, key, index, part) -> None:
        """Write a finished part (atomically)."""
        self._do(save_object, part, self.path(key, index))

    def forget(self, key) -> None:
        """Remove a fold's parts."""
        self._do(self._remove, key)

    def flush(self) -> None:
        """Wait until every save and forget asked for has reached the directory; raise the first that failed."""
        failed = None
        while self._pending:
            error = self._pending.popleft().exception()
            failed = failed or error
        if failed is not None:
            raise failed

    def close(self) -> None:
        """:meth:`flush`, then end the writing thread (a later write runs in the caller's thread)."""
        try:
            self.flush()
        finally:
            if self._writer is not None:
                self._writer.shutdown(wait=True)
                self._writer = None

    def _do(self, func, *args) -> None:
        if self._writer is None:
            func(*args)
            return
        while self._pending and self._pending[0].done():
            error = self._pending.popleft().exception()
            if error is not None:  # a write failed: said now, not at the run's end
                raise error
        self._pending.append(self._writer.submit(func, *args))

    def _remove(self, key) -> None:
        name = "-".join(str(k) for k in key)
        for path in self.directory.glob(f"{name}-part*.skops"):
            path.unlink(missing_ok=True)
