"""A fold's out-of-bag margin runs kept on disk in the run's partial directory, read back a slice at a time.

The shared threshold's range tasks each take a slice of every chunk's sorted
run of pooled out-of-bag margins
(:mod:`dimbsvm.model_selection.threshold_tasks`). Held as task results, every
range task would receive every whole run: all the fold's training rows in one
task, 17 bytes a row. Where a task's process reaches the run directory, the
task that sorts a chunk's run writes it here instead and returns a
:class:`SpilledRun` naming its files; a range task then maps them and
copies only its slice. A worker that does not reach the directory (another
machine) keeps its runs in memory as before. The driver removes a fold's
runs when the fold has finished, and the directory when the run closes; all
of it lies in the run's own partial directory.
"""

from __future__ import annotations

import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._locks import atomic_file

__all__ = ["RUNS_DIR", "SpilledRun", "ThresholdRunDirectory"]

#: The partial run directory's folder of spilled runs (removed when the run closes).
RUNS_DIR = "threshold-runs"

#: The arrays of a run, one file each: a field of a record array is strided, and a binary search of a strided
#: array copies it whole (every page of the run), where a range task must touch only its slice.
_FIELDS = {"values": np.float64, "rows": np.int64, "positive": np.bool_}


class SpilledRun:
    """A chunk's sorted run (:class:`~dimbsvm.svm.range_threshold.SortedRun`) kept in files, mapped when read.

    ``values``, ``rows`` and ``positive`` are read-only maps of the
    contiguous arrays: a binary search or a slice of them reads only its
    pages. Pickled, it is the files' common prefix and the length.
    """

    def __init__(self, prefix: str, size: int):
        self.prefix, self.size = str(prefix), int(size)

    def _array(self, name):
        # mapped afresh at each use, never kept on this object: a worker holds it as a task's result, and a kept
        # map would keep every page its readers touched resident in the worker for as long as the run lives
        path = f"{self.prefix}-{name}.npy"
        mapped = np.load(path, mmap_mode="r") if self.size else np.empty(0, dtype=_FIELDS[name])
        if mapped.dtype != _FIELDS[name] or mapped.shape != (self.size,):
            raise ValueError(f"{path} holds {mapped.shape} of {mapped.dtype}, not the {self.size} rows of "
                             "the run written there")
        return mapped

    @property
    def values(self) -> np.ndarray:
        return self._array("values")

    @property
    def rows(self) -> np.ndarray:
        return self._array("rows")

    @property
    def positive(self) -> np.ndarray:
        return self._array("positive")

    def __getstate__(self):
        return {"prefix": self.prefix, "size": self.size}

    def __setstate__(self, state):
        self.__init__(state["prefix"], state["size"])

    def __repr__(self):
        return f"SpilledRun({self.prefix!r}, size={self.size})"


@dataclass(frozen=True)
class ThresholdRunDirectory:
    """Where the tasks of a run's folds write their sorted runs (:class:`~dimbsvm.model_selection.folds.RunSpill`).

    Whether a task's process reaches the directory is told by a marker the
    driver wrote there (:meth:`open`), as for the out-of-fold files.

    Attributes
    ----------
    directory : str
    token : str
        The marker's name: ``.tasks-write-<token>``.
    """

    directory: str
    token: str

    @classmethod
    def open(cls, directory) -> "ThresholdRunDirectory":
        """Create ``directory`` afresh with its marker (runs an interrupted run left there are removed first)."""
        shutil.rmtree(directory, ignore_errors=True)
        Path(directory).mkdir(parents=True)
        spill = cls(str(directory), secrets.token_hex(8))
        Path(spill.marker).touch()
        return spill

    @property
    def marker(self) -> str:
        return os.path.join(self.directory, f".tasks-write-{self.token}")

    def write(self, key, first: int, run) -> SpilledRun | None:
        """Keep fold ``key``'s run of the chunk whose first training row is ``first``; ``None`` where this
        process does not reach the directory (the caller keeps the run)."""
        if not os.path.exists(self.marker):
            return None
        folder = Path(self.directory) / _fold_name(key)
        folder.mkdir(exist_ok=True)
        prefix = folder / f"{int(first):012d}"
        for name, dtype in _FIELDS.items():
            # each file replaced whole (a retried task; a reader keeps the old one); the run is returned, and so
            # read, only once all its files are written
            with atomic_file(f"{prefix}-{name}.npy") as handle:
                np.save(handle, np.ascontiguousarray(getattr(run, name), dtype=dtype))
        return SpilledRun(str(prefix), run.values.size)

    def forget(self, key) -> None:
        """Remove fold ``key``'s runs (its threshold is searched)."""
        shutil.rmtree(Path(self.directory) / _fold_name(key), ignore_errors=True)

    def close(self) -> None:
        """Remove the directory with every run still in it."""
        shutil.rmtree(self.directory, ignore_errors=True)


def _fold_name(key) -> str:
    """A fold key as a folder name: ``(4, 1)`` -> ``"4-1"``."""
    return "-".join(str(part) for part in key)
