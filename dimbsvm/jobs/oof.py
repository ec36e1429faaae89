"""Out-of-fold predictions of a run: one plain-array file per (repeat, fold).

Every cross-validation fold predicts its test rows once; over a repeat, every
row of the data is a test row exactly once. A run keeps those predictions in
``oof/seed<seed>-fold<fold>.npz`` (numpy's own format, readable without
dimbsvm), each holding

``row``
    the dataset row numbers of the fold's test rows;
``y_true``, ``y_pred``
    the true and predicted label codes (the data's ``class_map`` names them);
``score``
    the positive-class score (the decision value, or the probability where
    the estimator has no decision function): larger means more positive;
``proba`` (optional)
    the positive class's predicted probability, in files of folds whose
    model has probabilities and whose writer passed them (the report draws
    a reliability diagram and gives the Brier score from it);
``summary_*`` (optional)
    what the report draws of the fold (:class:`dimbsvm.report.fold_summary.FoldSummary`,
    counts of a size independent of the fold's rows), for the positive class
    ``summary_pos_label``: the report reads these alone
    (:func:`load_fold_summaries`), not the rows.

One file per fold, written when the fold finishes (before its record, so a
fold recorded as finished has its predictions), keeps a resumed run's
predictions and the memory of the process that writes them bounded by one
fold. The task that scores a fold writes its file where it can reach the run
directory (:class:`FoldPredictionWriter`), else the driver does.

A fold of a store scored a chunk at a time is written a chunk at a time: the
task that scores each chunk writes its rows to
``oof/seed<seed>-fold<fold>.parts/<first>.npz`` (the same arrays, ``first``
the position of the chunk's first row among the fold's test rows), and the
fold's file, written last, holds its summary and ``part_first`` /
``part_rows``, the parts it is made of (so a fold's file still means the
fold's predictions are complete, and parts an interrupted attempt left are
ignored). No process then holds the fold's rows. :func:`load_oof` gathers
them.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._locks import atomic_file

__all__ = ["OOF_DIR", "FoldPredictionWriter", "fold_parts_path", "fold_predictions_path", "load_fold_summaries",
           "load_oof", "save_fold_predictions"]

#: The run directory's subdirectory of out-of-fold predictions.
OOF_DIR = "oof"

#: The prefix of a fold file's summary arrays.
_SUMMARY = "summary_"

_NAME = re.compile(r"seed(-?\d+)-fold(\d+)\.npz$")

#: The columns of every fold (and of every part of one).
_COLUMNS = ("row", "y_true", "y_pred", "score")


def fold_predictions_path(directory, key) -> Path:
    """The file of fold ``key = (seed, fold)`` under ``directory``."""
    seed, fold = key
    return Path(directory) / f"seed{int(seed)}-fold{int(fold)}.npz"


def fold_parts_path(directory, key) -> Path:
    """The directory of fold ``key``'s parts, one file per scored chunk, under ``directory``."""
    seed, fold = key
    return Path(directory) / f"seed{int(seed)}-fold{int(fold)}.parts"


def save_fold_predictions(directory, key, rows, y_true, y_pred, score, proba=None, pos_label=None,
                          summary=None) -> Path:
    """Write one fold's test-row predictions atomically; return the file's path.

    ``proba``, the positive class's probability, is written only when given
    (files without it are as before); the fold's summary for the report
    (``summary_*``) where ``pos_label``, the positive class's code, is:
    ``summary`` where the caller made it (merged from the fold's chunks),
    else made here from the rows.
    """
    Path(directory).mkdir(parents=True, exist_ok=True)
    path = fold_predictions_path(directory, key)
    arrays = _columns(key, rows, y_true, y_pred, score, proba)
    if pos_label is not None:
        from ..report.fold_summary import FoldSummary

        if summary is None:
            summary = FoldSummary.of(arrays["y_true"], arrays["y_pred"], arrays["score"], pos_label,
                                     arrays.get("proba"))
        arrays |= summary.to_arrays(_SUMMARY) | {f"{_SUMMARY}pos_label": np.array(pos_label)}
    with atomic_file(path) as handle:  # a temporary name of this writer's own, on disk before the rename
        np.savez(handle, **arrays)
    return path


def _columns(key, rows, y_true, y_pred, score, proba) -> dict:
    """The arrays of a fold's (or a part's) file, checked to be of one length."""
    arrays = {"row": np.asarray(rows, dtype=np.int64), "y_true": np.asarray(y_true), "y_pred": np.asarray(y_pred),
              "score": np.asarray(score, dtype=np.float64)}
    if proba is not None:
        arrays["proba"] = np.asarray(proba, dtype=np.float64)
    lengths = {name: len(values) for name, values in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"out-of-fold arrays of fold {key} differ in length: {lengths}")
    return arrays


@dataclass(frozen=True)
class FoldPredictionWriter:
    """The tasks that score a fold write its out-of-fold file themselves, where they can reach the directory.

    A run's driver then receives each fold's record, not its test rows'
    predictions (:class:`~dimbsvm.model_selection.folds.PredictionSink`).
    Whether a task's process reaches the directory is told by a marker file
    the driver wrote there (:meth:`open`): a worker on another machine, where
    the same path does not exist or is another directory, finds no marker
    and hands the predictions back as before.

    Attributes
    ----------
    directory : str
        The run's ``oof`` directory (in its partial directory).
    token : str
        The marker's name: ``.tasks-write-<token>``.
    """

    directory: str
    token: str
    pos_label: int | None = None

    @classmethod
    def open(cls, directory, pos_label=None) -> "FoldPredictionWriter":
        """Create ``directory`` and its marker: a writer for this run's tasks (``pos_label``: summaries for it).

        Markers an interrupted run left there are removed first (the run
        directory is claimed by this process: no other writer uses them).
        """
        Path(directory).mkdir(parents=True, exist_ok=True)
        for stale in Path(directory).glob(".tasks-write-*"):
            stale.unlink(missing_ok=True)
        writer = cls(str(directory), secrets.token_hex(8), pos_label)
        Path(writer.marker).touch()
        return writer

    @property
    def marker(self) -> str:
        return os.path.join(self.directory, f".tasks-write-{self.token}")

    def close(self) -> None:
        """Remove the marker (the run directory keeps only the fold files)."""
        Path(self.marker).unlink(missing_ok=True)

    def reaches(self) -> bool:
        """Whether this process sees the run's directory (the marker the driver wrote)."""
        return os.path.exists(self.marker)

    def write_part(self, key, first, rows, y_true, y_pred, score, proba) -> bool:
        """Write one chunk's test rows of fold ``key`` (``first``: the position of its first among the fold's
        test rows) as a part of the fold, if this process reaches the directory; whether it did."""
        if not self.reaches():
            return False
        arrays = _columns(key, rows, y_true, y_pred, score, proba)
        parts = fold_parts_path(self.directory, key)
        parts.mkdir(exist_ok=True)
        with atomic_file(parts / f"{int(first):012d}.npz") as handle:
            np.savez(handle, **arrays)
        return True

    def finish_parts(self, key, firsts, lengths, summaries) -> bool:
        """Write fold ``key``'s file over its parts (:meth:`write_part`) with the fold's merged summary."""
        if not self.reaches():
            return False
        arrays = {"part_first": np.asarray(firsts, dtype=np.int64), "part_rows": np.asarray(lengths, dtype=np.int64)}
        if summaries and self.pos_label is not None:
            from ..report.fold_summary import merge_summaries

            arrays |= merge_summaries(summaries).thinned().to_arrays(_SUMMARY)
            arrays[f"{_SUMMARY}pos_label"] = np.array(self.pos_label)
        with atomic_file(fold_predictions_path(self.directory, key)) as handle:
            np.savez(handle, **arrays)
        return True

    def __call__(self, key, rows, y_true, y_pred, score, proba, summaries=None) -> bool:
        if not self.reaches():  # not the driver's directory where this task runs
            return False
        summary = None
        if summaries and self.pos_label is not None:
            from ..report.fold_summary import merge_summaries

            summary = merge_summaries(summaries).thinned()
        save_fold_predictions(self.directory, key, rows, y_true, y_pred, score, proba, self.pos_label,
                              summary=summary)
        return True

    def summarise(self, y_true, y_pred, score, proba):
        """One chunk's :class:`~dimbsvm.report.fold_summary.FoldSummary`, made where it is scored (None without
        a positive class)."""
        if self.pos_label is None:
            return None
        from ..report.fold_summary import FoldSummary

        return FoldSummary.of(y_true, y_pred, score, self.pos_label, proba)


def _fold_files(run_dir) -> list:
    """``[((seed, fold), path)]`` of a run directory's out-of-fold files, in order; an error where there are none."""
    directory = Path(run_dir) / OOF_DIR
    files = sorted((tuple(map(int, _NAME.search(p.name).groups())), p)
                   for p in directory.glob("seed*-fold*.npz") if _NAME.search(p.name))
    if not files:
        raise FileNotFoundError(f"{run_dir} has no out-of-fold predictions ({OOF_DIR}/seed*-fold*.npz)")
    return files


def load_fold_summaries(run_dir, pos_label) -> dict:
    """Each fold's summary of its out-of-fold predictions, for the report: ``{(seed, fold): FoldSummary}``.

    A fold file's ``summary_*`` arrays are read alone (a ``.npz`` member is
    read only when asked for); a file written without them, or for another
    positive class, is summarised from its rows, one fold at a time.
    Raises ``FileNotFoundError`` as :func:`load_oof` does.
    """
    from ..report.fold_summary import FoldSummary

    summaries = {}
    for key, path in _fold_files(run_dir):
        with np.load(path) as saved:
            label = f"{_SUMMARY}pos_label"
            if label in saved.files and saved[label] == pos_label:
                summaries[key] = FoldSummary.from_arrays({name: saved[name] for name in saved.files
                                                          if name.startswith(_SUMMARY) and name != label}, _SUMMARY)
            else:
                columns = _fold_columns(path, saved)
                summaries[key] = FoldSummary.of(columns["y_true"], columns["y_pred"], columns["score"], pos_label,
                                                columns.get("proba"))
    return summaries


def load_oof(run_dir) -> dict:
    """The out-of-fold predictions of a run directory, every fold's rows concatenated.

    Parameters
    ----------
    run_dir : path
        A run directory written by ``dimbsvm run`` (its ``oof/`` files).

    Returns
    -------
    dict of ndarray
        ``seed``, ``fold``, ``row``, ``y_true``, ``y_pred``, ``score``, all
        of one length, ordered by (seed, fold) then row; and ``proba`` when
        every fold's file holds it.

    Raises
    ------
    FileNotFoundError
        If the run directory has no out-of-fold predictions (a run written
        before they were saved).
    """
    # every file's (or part's) lengths and dtypes first, read from the .npy headers alone: the columns are then
    # filled in place, so that the peak is the result, not the result and every file's arrays beside it
    pieces = [(key, piece) for key, path in _fold_files(run_dir) for piece in _row_files(path)]
    layouts = [_npz_layout(piece) for _, piece in pieces]
    names = list(_COLUMNS)
    if all("proba" in layout for layout in layouts):  # some fold (or every one) without: no probabilities to show
        names.append("proba")
    total = sum(layout["row"][0] for layout in layouts)
    columns = {"seed": np.empty(total, dtype=np.int64), "fold": np.empty(total, dtype=np.int64)}
    for name in names:
        columns[name] = np.empty(total, dtype=np.result_type(*[layout[name][1] for layout in layouts]))
    start = 0
    for ((seed, fold), piece), layout in zip(pieces, layouts):
        stop = start + layout["row"][0]
        columns["seed"][start:stop], columns["fold"][start:stop] = seed, fold
        with np.load(piece) as saved:
            for name in names:
                columns[name][start:stop] = saved[name]
        start = stop
    return columns


def _row_files(path) -> list:
    """The files holding a fold's rows, in order: its parts where its file lists them, else the file itself."""
    with np.load(path) as saved:
        if "part_first" not in saved.files:
            return [path]
        firsts, lengths = saved["part_first"], saved["part_rows"]
    parts = fold_parts_path(Path(path).parent, tuple(map(int, _NAME.search(Path(path).name).groups())))
    files = [parts / f"{int(first):012d}.npz" for first in firsts]
    for file, length in zip(files, lengths):
        if not file.exists() or _npz_layout(file)["row"][0] != length:
            raise FileNotFoundError(f"{path} lists part {file.name} of {int(length)} rows, which is missing or "
                                    "of another length: the run directory was changed after the run")
    return files


def _fold_columns(path, saved) -> dict:
    """A fold's columns, read from its file (``saved``, open) or its parts."""
    if "part_first" not in saved.files:
        return {name: saved[name] for name in (*_COLUMNS, "proba") if name in saved.files}
    read = []
    for piece in _row_files(path):
        with np.load(piece) as part:
            read.append({name: part[name] for name in part.files})
    return {name: np.concatenate([part[name] for part in read]) for name in read[0] if all(name in p for p in read)}


def _npz_layout(path) -> dict:
    """``{array name: (length, dtype)}`` of a fold's ``.npz`` file, from the headers of its arrays."""
    import zipfile

    from numpy.lib import format as npy

    readers = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}
    layout = {}
    with zipfile.ZipFile(path) as archive:
        for member in archive.namelist():
            with archive.open(member) as handle:
                version = npy.read_magic(handle)
                if version in readers:
                    shape, _, dtype = readers[version](handle)
                else:  # a header version numpy writes only for unusual field names: read the array itself
                    array = npy.read_array(handle)
                    shape, dtype = array.shape, array.dtype
            layout[member.removesuffix(".npy")] = (int(shape[0]) if shape else 0, dtype)
    return layout
