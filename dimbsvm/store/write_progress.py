"""A progress line while an ingest writes a local store: its chunk files counted as they appear.

The writes are one Dask graph (read, encode, write, count classes), computed
in this process's threads or on a cluster; rather than instrument either
scheduler, a thread counts the chunk files of ``X`` on disk once a second and,
once the ingest has run for :data:`QUIET_SECONDS`, draws
:class:`~dimbsvm.parallel.Progress` (``[####......] 40/98 chunks written``). A store at a URL is not watched (listing objects every second
would cost requests): its ingest prints its summary when done, as before.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ..parallel.progress import Progress

__all__ = ["ChunkProgress"]

#: Seconds between two counts of the chunk files.
EVERY = 1.0
#: An ingest shorter than this prints no progress line at all (the summary line says it is done).
QUIET_SECONDS = 3.0


class ChunkProgress:
    """Count the chunk files of a store's ``X`` being written at ``path`` while the block runs.

    Parameters
    ----------
    path : path-like or str
        The store being written (a URL: nothing is counted).
    total : int
        Its chunks of rows.
    sparse : bool
        A sparse store's chunk is a group ``X/<chunk>/`` whose ``data`` array
        is written last of its three; a dense one's a file ``X/c/<chunk>/0``.
    enabled : bool
    """

    def __init__(self, path, total: int, *, sparse: bool, enabled: bool):
        self.local = isinstance(path, Path)
        self.path, self.total, self.sparse = path, int(total), sparse
        self.enabled = enabled and self.local and self.total > 1
        self._stop = threading.Event()
        self._thread = None
        self._progress = None

    def written(self) -> int:
        """Chunks of ``X`` on disk now."""
        root = self.path / "X"
        if self.sparse:
            return sum(1 for _ in root.glob("*/data/c/*"))
        chunks = root / "c"
        return sum(1 for _ in chunks.iterdir()) if chunks.is_dir() else 0

    def __enter__(self):
        if self.enabled:
            self._thread = threading.Thread(target=self._watch, name="dimbsvm-ingest-progress", daemon=True)
            self._thread.start()
        return self

    def _watch(self) -> None:
        if self._stop.wait(QUIET_SECONDS):
            return  # done before a line was due
        self._progress = Progress(self.total, "chunks written")
        self._advance()
        while not self._stop.wait(EVERY):
            self._advance()

    def _advance(self) -> None:
        count = min(self.written(), self.total)
        if count > self._progress.done:
            self._progress.advance(count - self._progress.done)

    def __exit__(self, kind, value, traceback):
        if self._thread is None:
            return False
        self._stop.set()
        self._thread.join()
        if self._progress is not None:
            if kind is None:
                self._advance()  # the last chunks, and the final line
            self._progress.close()
        return False
