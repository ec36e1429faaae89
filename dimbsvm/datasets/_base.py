"""The container every reader returns."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np


@dataclass
class Dataset:
    """Features, labels and what is known about them.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features), or (n_samples, n_channels, length)
        Features as float64; nominal columns are already one-hot encoded.
        Time series (``load_ts``) are 3-D. svmlight files are read into a
        ``scipy.sparse.csr_matrix`` (:meth:`to_dense` densifies).
    y : ndarray of shape (n_samples,)
        Integer labels. Binary data: the minority (KEEL ``positive``) class is 1.
    feature_names : list of str
        One name per column of ``X`` (after encoding), e.g. ``"Sex=M"``.
    nominal_columns : list of str
        Names of the source columns that were nominal and were one-hot encoded.
    class_map : dict
        Source class label (as a string) -> integer label in ``y``.
    name : str
        Short dataset name (file stem).
    source : str
        Path the data was read from, or a description of the generator.
    named_columns : bool, default=True
        Whether ``feature_names`` came with the data (a header, attribute
        names, an ``.npz`` ``feature_names`` array), even where they read
        ``x0, x1, ...``; ``False`` where the format has none and the reader
        made them up (svmlight, an ``.npz`` without names): prediction then
        matches columns by position, never by those names.
    """

    X: np.ndarray
    y: np.ndarray
    feature_names: list[str]
    nominal_columns: list[str] = field(default_factory=list)
    class_map: dict[str, int] = field(default_factory=dict)
    name: str = ""
    source: str = ""
    named_columns: bool = True

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    def to_dense(self) -> "Dataset":
        """This dataset with a dense ``X`` (itself when ``X`` is already dense)."""
        if not hasattr(self.X, "toarray"):
            return self
        return replace(self, X=np.asarray(self.X.toarray(), dtype=np.float64))

    def meta(self) -> dict:
        """JSON-serialisable metadata (everything except the arrays)."""
        labels, counts = np.unique(self.y, return_counts=True)
        return {
            "name": self.name,
            "source": self.source,
            "n_samples": self.n_samples,
            "shape": list(self.X.shape),
            "feature_names": list(self.feature_names),
            "named_columns": bool(self.named_columns),
            "nominal_columns": list(self.nominal_columns),
            "class_map": {str(k): int(v) for k, v in self.class_map.items()},
            "class_counts": {str(int(k)): int(c) for k, c in zip(labels, counts)},
        }
