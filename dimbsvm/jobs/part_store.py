"""A run's finished ensemble members, kept so that an interrupted run resumes without refitting them."""

from __future__ import annotations

from pathlib import Path

from ..artifacts import load_object, save_object

__all__ = ["PartDirectory"]


class PartDirectory:
    """The fold engine's :class:`~dimbsvm.model_selection.folds.PartStore` as a directory of skops files.

    One file per (fold, part) under ``directory`` (in the partial run
    directory); a fold's files are removed once its result is saved. Files
    are read back with the trust rules of a model (:func:`load_object`).

    Parameters
    ----------
    directory : path-like
    """

    def __init__(self, directory):
        self.directory = Path(directory)

    def __repr__(self) -> str:
        return str(self.directory)

    def path(self, key, index) -> Path:
        """The file of part ``index`` of fold ``key``."""
        name = "-".join(str(k) for k in key)
        return self.directory / f"{name}-part{index}.skops"

    def load(self, key, index):
        """The saved part, or ``None`` when it was not saved."""
        path = self.path(key, index)
        return load_object(path) if path.exists() else None

    def save(self, key, index, part) -> None:
        """Write a finished part (atomically)."""
        save_object(part, self.path(key, index))

    def forget(self, key) -> None:
        """Remove a fold's parts."""
        name = "-".join(str(k) for k in key)
        for path in self.directory.glob(f"{name}-part*.skops"):
            path.unlink(missing_ok=True)
