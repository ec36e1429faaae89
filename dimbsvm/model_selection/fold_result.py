"""What a fold's tasks hand on: the assembled model, the out-of-fold predictions, the fold's result.

Values with named fields, so that a misspelled field fails where it is
read, not as a missing dictionary key somewhere later. A fold's record
stays a dictionary: its keys are the job's metric names, and it is written
as JSON as it is. No Dask here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..parallel.sized import SizedResult

__all__ = ["AssembledFold", "FoldPredictions", "FoldResult"]


@dataclass(frozen=True)
class FoldPredictions(SizedResult):
    """A fold's out-of-fold predictions, in test-row order.

    Attributes
    ----------
    rows : ndarray of int
        The test rows' numbers in the data.
    y_pred : ndarray
        Predicted labels.
    score : ndarray or None
        Positive-class scores (None where no metric or file needs them).
    proba : ndarray or None
        Probabilities, for a model with ``predict_proba``.
    y_true : ndarray or None
        The rows' labels, where the task that scored them read them (a
        store's chunk); None where the driver holds them.
    """

    rows: np.ndarray
    y_pred: np.ndarray
    score: np.ndarray | None
    proba: np.ndarray | None = None
    y_true: np.ndarray | None = None

    @classmethod
    def joined(cls, parts) -> FoldPredictions:
        """The predictions of consecutive parts (a fold's chunks, in order) as one.

        Examples
        --------
        >>> a = FoldPredictions(np.array([0, 1]), np.array([1, 0]), np.array([0.5, -1.0]))
        >>> b = FoldPredictions(np.array([5]), np.array([1]), np.array([2.0]))
        >>> FoldPredictions.joined([a, b]).rows.tolist(), FoldPredictions.joined([a, b]).proba
        ([0, 1, 5], None)
        """
        parts = list(parts)

        def join(name):
            values = [getattr(part, name) for part in parts]
            return None if any(value is None for value in values) else np.concatenate(values)

        return cls(join("rows"), join("y_pred"), join("score"), join("proba"), join("y_true"))


@dataclass(frozen=True)
class AssembledFold(SizedResult):
    """A store fold's model, assembled once from its parts, before its test rows are scored a chunk at a time.

    Attributes
    ----------
    model : Pipeline or None
        The fold's fitted pipeline (prepared steps, then the estimator);
        None with a stored stage that has no standalone steps.
    prepared : PreparedFold
        The fold's prepared steps.
    fit_time : float
        Seconds of preparing and fitting.
    thresholds : dict
        The fitted thresholds the fold's record keeps.
    final_alone : estimator or None
        The fitted estimator where there is no pipeline to hold it (kept
        once, so that its size is counted once).
    """

    model: object
    prepared: object
    fit_time: float
    thresholds: dict
    final_alone: object = None

    @property
    def final(self):
        """The fitted estimator alone: the pipeline's last step."""
        return self.final_alone if self.model is None else self.model[-1]


@dataclass
class FoldResult(SizedResult):
    """What a fold's finish task returns to the driver.

    Not frozen: the driver takes the predictions out once it has saved them
    (:meth:`take_predictions`), so that a run does not hold every fold's
    test rows until its end.

    Attributes
    ----------
    record : dict or None
        The fold's record (``seed``, ``fold``, ``n_train``, ``n_test``, the
        metrics, times, thresholds; a searched fold's ``params``); None for a
        model fitted without test rows.
    model : Pipeline or None
        The fitted model, when asked for or when there are no test rows.
    predictions : FoldPredictions or None
        The out-of-fold predictions, when kept and not written where the
        task ran (:class:`~dimbsvm.model_selection.folds.PredictionSink`).
    search : dict or None
        A searched fold's selection: the choice and every candidate's inner
        scores.
    """

    record: dict | None = None
    model: object = None
    predictions: FoldPredictions | None = None
    search: dict | None = None

    def take_predictions(self) -> FoldPredictions | None:
        """The predictions, left out of this result from now on."""
        predictions, self.predictions = self.predictions, None
        return predictions
