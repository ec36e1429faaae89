"""What a fold's chunk tasks keep on disk in the run's partial directory for other tasks to read a slice of.

Two kinds of chunk results are read in slices by many tasks of the fold:

- the shared threshold's range tasks each take a slice of every chunk's
  sorted run of pooled out-of-bag margins
  (:mod:`dimbsvm.svm.threshold_tasks`). Held as task results,
  every range task would receive every whole run: all the fold's training
  rows in one task, 17 bytes a row. The task that sorts a chunk's run writes
  it here instead and returns a :class:`SpilledRun` naming its files; a
  range task maps them and copies only its slice;
- each member of an ensemble fits on its bag rows, which every chunk's read
  cuts out for all members at once
  (:func:`dimbsvm.svm.counted_bags.gather_counted_block`). Held
  as task results, each worker running a member would receive every
  member's rows of every chunk: the transfers grow with the workers. The
  read writes them here and returns :class:`SpilledPieces`; a member reads
  only its own rows.

- a chunk's read also carries its rows' range for the fold's scaler, held
  as long as the read (until the fold's members have fitted). A sparse
  chunk's range has an entry for every column its rows touch, so every
  chunk of every fold held at once grows with the rows; one of
  :data:`SPILLED_RANGE_BYTES` or more is written here and read back by the
  prepare task (:class:`SpilledRange`).

This happens where a task's process reaches the run directory; a worker that
does not (another machine) keeps its results in memory as before. The driver
removes a fold's files when the fold has finished, and the directory when
the run closes; all of it lies in the run's own partial directory. They are
scratch, not flushed to disk: a run resumed after a crash starts the
directory afresh.
"""

from __future__ import annotations

import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .._locks import atomic_file

__all__ = ["RUNS_DIR", "SPILLED_RANGE_BYTES", "SpilledPieces", "SpilledRange", "SpilledRun", "ThresholdRunDirectory"]

#: The partial run directory's folder of spilled runs (removed when the run closes).
RUNS_DIR = "threshold-runs"

#: A chunk's range (its rows' per-column extremes) of this many bytes or more is written to disk by the read that
#: carries it (a few hundred columns' dense range stays in memory).
SPILLED_RANGE_BYTES = 64 * 1024

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


class SpilledPieces:
    """Every member's bag rows in one chunk (a list of
    :class:`~dimbsvm.svm.counted_bags.CountedPiece`, in member order) kept in one file.

    The file holds each member's piece in turn, its ranks, positions, rows
    and labels one after the other, so ``pieces[i]`` is one read of member
    ``i``'s bytes. Pickled, it is the file's path, each member's row count
    and the fields' types.
    """

    fields = ("ranks", "positions", "rows", "labels")

    def __init__(self, path: str, counts, layout):
        self.path, self.counts = str(path), tuple(int(c) for c in counts)
        self.layout = tuple((str(dtype), tuple(int(d) for d in shape)) for dtype, shape in layout)

    @classmethod
    def write(cls, path, pieces) -> "SpilledPieces":
        """Write ``pieces`` to ``path`` whole (a reader keeps any older file) and return what stands for them."""
        first = pieces[0]
        layout = [(getattr(first, name).dtype.str, getattr(first, name).shape[1:]) for name in cls.fields]
        with atomic_file(path, durable=False) as handle:
            for piece in pieces:
                for name, (dtype, _) in zip(cls.fields, layout, strict=True):
                    handle.write(np.ascontiguousarray(getattr(piece, name), dtype=dtype).data)
        return cls(path, [piece.ranks.size for piece in pieces], layout)

    def _row_bytes(self) -> int:
        return sum(np.dtype(dtype).itemsize * int(np.prod(shape)) for dtype, shape in self.layout)

    def __len__(self):
        return len(self.counts)

    def __getitem__(self, index):
        from ..svm.counted_bags import CountedPiece

        row_bytes, n = self._row_bytes(), self.counts[index]
        buffer = bytearray(n * row_bytes)
        with open(self.path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size != sum(self.counts) * row_bytes:
                raise ValueError(f"{self.path} holds {size} bytes, not the {sum(self.counts)} rows written there")
            handle.seek(sum(self.counts[:index]) * row_bytes)
            handle.readinto(buffer)
        arrays, offset = {}, 0
        for name, (dtype, shape) in zip(self.fields, self.layout, strict=True):
            count = n * int(np.prod(shape))
            arrays[name] = np.frombuffer(buffer, dtype=dtype, count=count, offset=offset).reshape(n, *shape)
            offset += count * np.dtype(dtype).itemsize
        return CountedPiece(**arrays)

    def __getstate__(self):
        return {"path": self.path, "counts": self.counts, "layout": self.layout}

    def __setstate__(self, state):
        self.__init__(state["path"], state["counts"], state["layout"])

    def __repr__(self):
        return f"SpilledPieces({self.path!r}, members={len(self)}, rows={sum(self.counts)})"


class SpilledRange:
    """A chunk's range as :func:`~dimbsvm.fold_data.spans.block_range` gives it, kept in one ``.npz`` file.

    Pickled, it is the file's path; :meth:`read` gives the range back
    (``(low, high, n_rows)``, ``low`` and ``high`` CSR rows or arrays as
    they were written).
    """

    def __init__(self, path: str):
        self.path = str(path)

    @classmethod
    def write(cls, path, chunk_range) -> "SpilledRange":
        """Write ``chunk_range`` to ``path`` whole (a reader keeps any older file) and return what stands for it."""
        low, high, n_rows = chunk_range
        arrays = {"n_rows": np.int64(n_rows), "sparse": np.bool_(sp.issparse(low))}
        for name, extreme in (("low", low), ("high", high)):
            if sp.issparse(extreme):
                extreme = sp.csr_matrix(extreme)
                arrays.update({f"{name}_data": extreme.data, f"{name}_indices": extreme.indices,
                               f"{name}_indptr": extreme.indptr, f"{name}_shape": np.asarray(extreme.shape)})
            else:
                arrays[name] = np.asarray(extreme)
        with atomic_file(path, durable=False) as handle:
            np.savez(handle, **arrays)
        return cls(path)

    def read(self):
        """``(low, high, n_rows)`` as written."""
        with np.load(self.path) as stored:
            def extreme(name):
                if not bool(stored["sparse"]):
                    return stored[name]
                return sp.csr_matrix((stored[f"{name}_data"], stored[f"{name}_indices"], stored[f"{name}_indptr"]),
                                     shape=tuple(stored[f"{name}_shape"]))

            return extreme("low"), extreme("high"), int(stored["n_rows"])

    def __getstate__(self):
        return {"path": self.path}

    def __setstate__(self, state):
        self.__init__(state["path"])

    def __repr__(self):
        return f"SpilledRange({self.path!r})"


@dataclass(frozen=True)
class ThresholdRunDirectory:
    """Where the tasks of a run's folds write their sorted runs (:class:`~dimbsvm.fold_data.context.RunSpill`).

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
            with atomic_file(f"{prefix}-{name}.npy", durable=False) as handle:
                np.save(handle, np.ascontiguousarray(getattr(run, name), dtype=dtype))
        return SpilledRun(str(prefix), run.values.size)

    def write_pieces(self, key, first: int, pieces) -> SpilledPieces | None:
        """Keep fold ``key``'s bag rows of the chunk whose first training row is ``first`` (``pieces``: a list of
        :class:`~dimbsvm.svm.counted_bags.CountedPiece`, one a member); ``None`` where this process
        does not reach the directory, where the chunk holds no bag row, where its labels are Python objects or
        its rows sparse (the caller keeps the pieces)."""
        sizes = [piece.ranks.size for piece in pieces]
        if not sum(sizes) or not os.path.exists(self.marker) or any(p.labels.dtype.hasobject for p in pieces) \
                or any(sp.issparse(p.rows) for p in pieces):
            return None
        folder = Path(self.directory) / _fold_name(key)
        folder.mkdir(exist_ok=True)
        return SpilledPieces.write(str(folder / f"bags-{int(first):012d}.bin"), pieces)

    def write_range(self, key, first: int, chunk_range) -> SpilledRange | None:
        """Keep fold ``key``'s range of the chunk whose first training row is ``first`` (as
        :func:`~dimbsvm.fold_data.spans.block_range` gives it); ``None`` where it is smaller than
        :data:`SPILLED_RANGE_BYTES` or this process does not reach the directory (the caller keeps it)."""
        if _range_bytes(chunk_range) < SPILLED_RANGE_BYTES or not os.path.exists(self.marker):
            return None
        folder = Path(self.directory) / _fold_name(key)
        folder.mkdir(exist_ok=True)
        return SpilledRange.write(str(folder / f"range-{int(first):012d}.npz"), chunk_range)

    def forget(self, key) -> None:
        """Remove fold ``key``'s runs, bag rows and ranges (the fold has finished)."""
        shutil.rmtree(Path(self.directory) / _fold_name(key), ignore_errors=True)

    def close(self) -> None:
        """Remove the directory with every run still in it."""
        shutil.rmtree(self.directory, ignore_errors=True)


def _fold_name(key) -> str:
    """A fold key as a folder name: ``(4, 1)`` -> ``"4-1"``."""
    return "-".join(str(part) for part in key)


def _range_bytes(chunk_range) -> int:
    """The bytes a chunk's range holds (its two extremes; a CSR row's stored values and indices)."""
    low, high, _ = chunk_range
    return sum(e.data.nbytes + e.indices.nbytes + e.indptr.nbytes if sp.issparse(e) else np.asarray(e).nbytes
               for e in (low, high))
