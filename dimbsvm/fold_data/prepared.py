"""A fold's rows and fitted preprocessing, and the data as the fold's estimator sees it.

The fold engine's prepare task makes a :class:`PreparedFold`
(:func:`~dimbsvm.model_selection.bodies.prepare_fold`); the tasks that fit a
fold's estimator, the engine's or an estimator's own
(:mod:`~dimbsvm.fold_data.context`), read their rows through
:func:`training_data` and :func:`row_view`. No Dask, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.pipeline import make_pipeline

from ..parallel.sized import SizedResult
from ..rows import TransformedRows

__all__ = ["FoldRows", "PreparedFold", "row_view", "training_data"]


@dataclass(frozen=True)
class FoldRows(SizedResult):
    """The rows of one fold: ``train`` (fitted on) and ``test`` (scored; empty for a final model)."""

    train: np.ndarray
    test: np.ndarray


@dataclass
class PreparedFold(SizedResult):
    """The fitted steps before the estimator, for one fold.

    Attributes
    ----------
    steps : list of transformers
        Imputer, scaler and feature stages, fitted on the training rows.
    train_features : array or None
        With feature stages: the training rows as the stages output them at
        fit time (``fit_transform``; e.g. structural features leave each
        training row out of its own neighbourhood). Without them, for a small
        in-memory fold: the training rows through ``steps``, once. ``None``
        otherwise: parts read raw rows and apply ``steps`` themselves.
    fit_time : float
        Seconds spent fitting the steps.
    stage : object or None
        A stored feature stage (:mod:`dimbsvm.model_selection.stages`): the
        estimator sees ``steps`` then the stage, looked up by row number
        (its ``row_view(X, steps, train_rows)``).
    """

    steps: list
    train_features: object
    fit_time: float
    stage: object = None

    def transformer(self):
        return make_pipeline(*self.steps) if self.steps else None


def row_view(X, prepared: PreparedFold, rows: FoldRows):
    """The data as the fold's estimator sees it, read by row number: steps applied (and a stored stage)."""
    if prepared.stage is not None:
        return prepared.stage.row_view(X, prepared.steps, rows.train)
    return TransformedRows(X, prepared.transformer())


def training_data(X, y, prepared: PreparedFold, rows: FoldRows):
    """``(X, y, rows)`` a part draws from: the stages' output, or raw rows transformed as they are read."""
    if prepared.train_features is not None:
        return prepared.train_features, np.asarray(y)[rows.train], None
    return row_view(X, prepared, rows), y, rows.train
