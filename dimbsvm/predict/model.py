"""A saved model that scores raw rows on its own: :class:`DimbsvmModel` and :func:`load_model`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..exceptions import DataError
from ..model_selection.scoring import positive_scores
from .encoding import InputEncoding, RowError, class_names

__all__ = ["DimbsvmModel", "load_model"]


class DimbsvmModel:
    """A fitted model with what it needs to score raw rows: its input columns, their encoding, its class names.

    Rows are a pandas DataFrame with the training columns (in any order; the
    label and the id columns may be there or not). Nominal columns are
    one-hot encoded over the *training* categories, exactly as training
    encoded them, and predictions are class names, not label codes.

    Parameters
    ----------
    estimator : estimator
        The fitted model (a scikit-learn pipeline or estimator) on encoded features.
    meta : dict
        The model's meta (see :func:`dimbsvm.artifacts.save_model` and
        :func:`dimbsvm.predict.prediction_meta`).

    Attributes
    ----------
    encoding : InputEncoding or None
        ``None`` for a model trained on unnamed features (scored by position).
    classes_ : ndarray of object
        Class names in the order of the estimator's ``classes_`` (the columns
        of :meth:`predict_proba`).
    positive_class : str
        The class that :meth:`decision` grows with.

    Examples
    --------
    >>> from sklearn.svm import SVC
    >>> rows = pd.DataFrame({"size": [1.0, 2.0, 3.0, 4.0], "colour": ["red", "blue", "red", "blue"]})
    >>> features = np.array([[1.0, 0.0, 1.0], [2.0, 1.0, 0.0], [3.0, 0.0, 1.0], [4.0, 1.0, 0.0]])
    >>> meta = {"feature_names": ["size", "colour=blue", "colour=red"], "nominal_columns": ["colour"],
    ...         "class_map": {"no": 0, "yes": 1}, "positive_label": 1}
    >>> model = DimbsvmModel(SVC(kernel="linear").fit(features, [1, 0, 1, 0]), meta)
    >>> model.predict(rows).tolist()
    ['yes', 'no', 'yes', 'no']
    """

    def __init__(self, estimator, meta: dict):
        self.estimator = estimator
        self.meta = dict(meta)
        self.encoding = InputEncoding.from_meta(meta) or InputEncoding.from_data_meta(meta)
        self._names = class_names(meta)
        self.pos_label = meta.get("positive_label")
        self.positive_class = self.class_name(self.pos_label)

    def __repr__(self) -> str:
        columns = len(self.encoding.input_columns) if self.encoding is not None else self.meta.get("n_features")
        return f"DimbsvmModel({type(self.estimator).__name__}, {columns} input columns, classes {list(self.classes_)})"

    @property
    def classes_(self) -> np.ndarray:
        return np.array([self.class_name(code) for code in self.estimator.classes_], dtype=object)

    @property
    def has_probability(self) -> bool:
        """Whether the estimator offers ``predict_proba`` (e.g. ``OTHRClassifier(probability=True)``)."""
        return hasattr(self.estimator, "predict_proba")

    @property
    def id_column(self) -> str | None:
        return self.encoding.id_column if self.encoding is not None else None

    def class_name(self, code) -> str:
        """The name of a label code (the code as text where the model records no names)."""
        return self._names.get(int(code), str(code)) if code is not None else None

    def features(self, X, *, source: str = "the rows", partition: int | None = None) -> np.ndarray:
        """Raw rows as the encoded features the estimator was fitted on.

        Parameters
        ----------
        X : pandas.DataFrame or array-like
            Raw rows. An array is taken as the features themselves, by
            position (a model with nominal columns needs a DataFrame).
        source : str
            The rows, as messages name them.
        partition : int, default=None
            The partition of a larger input the rows are: errors then name the
            row within it (:class:`~dimbsvm.predict.encoding.RowError`). By
            default rows are counted from 1 and errors are plain ``DataError``.

        Raises
        ------
        DataError
            Missing or unexpected columns, a cell that is not a finite number,
            a category not seen in training (see ``data.unknown_categories``).
        """
        if not isinstance(X, pd.DataFrame):
            return self._array_features(X, source)
        encoding = self.encoding or self._positional_encoding(X, source)
        try:
            return encoding.encode(X, source=source, partition=partition or 0)
        except RowError as exc:
            if partition is not None:
                raise
            raise exc.at(1) from None

    def _positional_encoding(self, frame: pd.DataFrame, source: str) -> InputEncoding:
        n_features = int(self.meta["n_features"])
        if len(frame.columns) != n_features:
            raise DataError(f"{source} has {len(frame.columns)} columns; the model was trained on {n_features} "
                            "unnamed features, taken by position")
        return InputEncoding(columns=tuple((str(c), None) for c in frame.columns))

    def _array_features(self, X, source: str) -> np.ndarray:
        # a scipy.sparse matrix stays sparse (CSR), as scikit-learn's SVMs take it
        X = sp.csr_matrix(X, dtype=np.float64) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
        if self.encoding is not None and self.encoding.has_nominal:
            raise DataError(f"{source}: the model one-hot encodes nominal columns; pass a pandas DataFrame with "
                            f"its input columns ({', '.join(self.encoding.input_columns)})")
        n_features = int(self.meta.get("n_features", X.shape[-1]))
        if X.ndim != 2 or X.shape[1] != n_features:
            raise DataError(f"{source} has shape {X.shape}; the model was trained on {n_features} features per row")
        return X

    def predict(self, X) -> np.ndarray:
        """The class name of each row.

        Returns
        -------
        y : ndarray of object (str), shape (n_rows,)
        """
        codes = self.estimator.predict(self.features(X))
        return np.array([self.class_name(code) for code in codes], dtype=object)

    def decision_function(self, X) -> np.ndarray:
        """The estimator's ``decision_function`` of the encoded rows (positive values: ``classes_[1]``)."""
        return self.estimator.decision_function(self.features(X))

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, columns in the order of :attr:`classes_`.

        Raises
        ------
        AttributeError
            The estimator has no probabilities (``has_probability`` is False).
        """
        if not self.has_probability:
            raise AttributeError(f"{type(self.estimator).__name__} has no predict_proba (train with probability=True)")
        return self.estimator.predict_proba(self.features(X))

    def decision(self, X) -> np.ndarray:
        """Scores that grow with the likelihood of :attr:`positive_class` (the ``decision`` column of outputs)."""
        return positive_scores(self.estimator, self.features(X), self.pos_label)

    def score_frame(self, frame: pd.DataFrame, *, source: str, partition: int = 0,
                    chunk_rows: int | None = None) -> pd.DataFrame:
        """The output rows of a partition: its ids (where the model has an id column and the rows have it),
        ``prediction`` (class name), ``decision`` and, with probabilities, ``proba_<positive class>``.

        Rows are scored ``chunk_rows`` at a time, which bounds the scoring's
        working memory within a large partition.
        """
        X = self.features(frame, source=source, partition=partition)
        chunk = max(1, int(chunk_rows or len(X) or 1))
        codes, scores, probability = [], [], []
        classes = list(self.estimator.classes_)
        for start in range(0, len(X), chunk):
            block = X[start:start + chunk]
            codes.append(np.asarray(self.estimator.predict(block)))
            scores.append(positive_scores(self.estimator, block, self.pos_label))
            if self.has_probability:
                probability.append(self.estimator.predict_proba(block)[:, classes.index(self.pos_label)])
        out = {}
        if self.id_column is not None and self.id_column in frame.columns:
            out[self.id_column] = frame[self.id_column].to_numpy()
        names = [self.class_name(c) for c in np.concatenate(codes)] if codes else []
        out["prediction"] = pd.array(names, dtype="string")
        out["decision"] = np.concatenate(scores) if scores else np.empty(0)
        if self.has_probability:
            out[self.probability_column] = np.concatenate(probability) if probability else np.empty(0)
        return pd.DataFrame(out)

    @property
    def probability_column(self) -> str:
        """The output column of the positive class's probability: ``proba_<class name>``."""
        return f"proba_{self.positive_class}"


def load_model(path) -> DimbsvmModel:
    """Load a saved model directory, ready to score raw rows.

    The directory's files are checked against its manifest and the model is
    rebuilt by skops from trusted types only (scikit-learn's and dimbsvm's
    own; see :func:`dimbsvm.estimators.trusted_types`).

    Parameters
    ----------
    path : str or path-like
        A model directory: a run directory's ``model/``, or a registry
        version's.

    Returns
    -------
    DimbsvmModel
        ``predict``, ``predict_proba`` and ``decision_function`` take a pandas
        DataFrame of raw rows with the training column names; ``predict``
        returns class names.

    Raises
    ------
    StoreError
        A file is missing or does not match the manifest, or the model asks
        for a type that is not trusted.
    """
    from ..artifacts import load_artifact

    estimator, meta = load_artifact(path)
    return DimbsvmModel(estimator, meta)
