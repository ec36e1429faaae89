"""What the binary classifiers of :mod:`dimbsvm.svm` share: validation, margins, prediction.

* :class:`_ShiftedMarginClassifier` -- the base of the threshold-moving
  classifiers (:class:`~dimbsvm.svm.othr.OTHRClassifier`,
  :class:`~dimbsvm.svm.othr.THRClassifier`,
  :class:`~dimbsvm.svm.ensemble.EnsembleOTHRClassifier`): training-data checks,
  the minority (positive) class, ``decision_function`` and ``predict`` from
  the shifted margin ``h(x) + theta`` (eqs. 17 and 24 of the OTHR paper).
* :class:`_SignedScoreClassifier` -- ``predict`` from ``decision_function``
  for the classifiers whose scores are positive towards ``classes_[1]``
  (:class:`~dimbsvm.svm.hpc.HPCClassifier`, :class:`~dimbsvm.svm.act.ACTClassifier`).
* Helpers on arrays and fitted estimators: :func:`binary_classes`,
  :func:`positive_label`, :func:`margin_sign`, :func:`signed_margins`,
  :func:`out_of_fold_margins`, :func:`stratified_folds`,
  :func:`fit_base_estimator`, :func:`default_estimator`.
"""

from __future__ import annotations

import numpy as np
from sklearn import get_config
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.model_selection import StratifiedKFold
from sklearn.svm import SVC, LinearSVC
from sklearn.utils import get_tags
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from dimbsvm._params import ValidatedParams
from dimbsvm.svm.routing import check_takes_weights, fit_router, routing_enabled, rows_of
from dimbsvm._validation import in_memory_sparse
from dimbsvm._counts import ClassCounts, unique_counts
from dimbsvm.svm.calibration import platt_probability
from dimbsvm.svm.scaled_defaults import LARGE_N, large_n_estimator, log_scaled

__all__ = [
    "binary_classes",
    "default_estimator",
    "fit_base_estimator",
    "margin_sign",
    "out_of_fold_margins",
    "positive_label",
    "signed_margins",
    "stratified_folds",
]


def default_estimator():
    """The base SVM of the paper and of dimbsvm's benchmarks.

    Returns
    -------
    estimator : SVC
        ``SVC(kernel="rbf", C=1.0, gamma="scale")``, unfitted.
    """
    return SVC(kernel="rbf", C=1.0, gamma="scale")


class _ShiftedMarginClassifier(ValidatedParams, ClassifierMixin, BaseEstimator):
    """Shared validation, prediction and tags of the threshold-moving classifiers.

    Subclasses set ``classes_``, ``pos_label_`` (via
    :meth:`_validate_training_data`) and implement :meth:`_shifted_margin`,
    the margin after the shift, positive on the minority side.

    ``estimator=None`` stands for :func:`default_estimator` in parameter
    search too: ``get_params(deep=True)`` lists its parameters
    (``estimator__C``, ...), and ``set_params(estimator__C=...)`` first puts
    a fresh default in place (never a shared object: ``None`` stays the
    constructor's default), so ``GridSearchCV`` over ``estimator__C`` works
    on ``OTHRClassifier()`` as on ``OTHRClassifier(SVC())``.
    """

    def get_params(self, deep=True):
        params = super().get_params(deep=deep)
        if deep and "estimator" in params and params["estimator"] is None:
            params.update({f"estimator__{key}": value
                           for key, value in default_estimator().get_params(deep=True).items()})
        return params

    def set_params(self, **params):
        if getattr(self, "estimator", False) is None and "estimator" not in params \
                and any(key.startswith("estimator__") for key in params):
            self.estimator = default_estimator()
        return super().set_params(**params)

    def get_metadata_routing(self):
        """How ``fit``'s metadata is routed (scikit-learn's metadata routing; see :mod:`dimbsvm.svm.routing`).

        The classifier consumes ``sample_weight`` itself (its threshold
        objective) and routes ``fit``'s metadata to the base estimator's
        ``fit`` (``estimator=None``: the default SVM, which asks for
        ``sample_weight``), and OTHR's to its splitter's ``split``.

        Returns
        -------
        routing : sklearn.utils.metadata_routing.MetadataRouter
        """
        estimator = self.estimator
        if estimator is None:
            estimator = default_estimator()
            if routing_enabled():
                estimator.set_fit_request(sample_weight=True)
        return fit_router(self, estimator, self._routed_splitter())

    def _routed_splitter(self):
        """The splitter ``fit`` routes ``split``'s metadata to (``None``: none)."""
        return None

    def _scaled_defaults(self, n_samples, n_minority):
        """``estimator=None`` is :func:`~dimbsvm.svm.scaled_defaults.large_n_estimator` above ``LARGE_N`` rows."""
        if self.estimator is None and n_samples > LARGE_N:
            return {"estimator": large_n_estimator()}
        return {}

    def _resolve_defaults(self, n_samples, n_minority):
        """Set and log ``scaled_defaults_``, the defaults replaced for this many rows, and return it."""
        self.scaled_defaults_ = self._scaled_defaults(int(n_samples), int(n_minority))
        log_scaled(self, int(n_samples), self.scaled_defaults_)
        return self.scaled_defaults_

    def _validate_training_data(self, X, y):
        X, y = validate_data(self, in_memory_sparse(X), y, accept_sparse="csr")
        classes, counts = binary_classes(y, type(self).__name__)
        self.classes_ = classes
        self.pos_label_ = positive_label(classes, counts, self.pos_label)
        return X, y, y == self.pos_label_

    def _validate_X(self, X):
        check_is_fitted(self)
        return validate_data(self, in_memory_sparse(X), accept_sparse="csr", reset=False)

    def _shifted_margin(self, X):
        raise NotImplementedError

    def _platt_probabilities(self, X):
        """Platt's sigmoid (fitted ``platt_``) of the shifted margin, one column per class in ``classes_`` order."""
        check_is_fitted(self, "platt_")
        positive = platt_probability(self._shifted_margin(self._validate_X(X)), *self.platt_)
        proba = np.empty((positive.size, 2))
        pos_index = int(np.flatnonzero(self.classes_ == self.pos_label_)[0])
        proba[:, pos_index], proba[:, 1 - pos_index] = positive, 1.0 - positive
        return proba

    def decision_function(self, X):
        """Shifted margin, oriented as scikit-learn expects.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,)
            Positive values mean ``classes_[1]``, as for every scikit-learn
            binary classifier (so ``roc_auc`` scorers work). When the minority
            class is ``classes_[1]`` -- the usual case, e.g. labels {0, 1} with
            1 the minority -- this is ``h(x) + theta`` of the paper; otherwise
            it is its negation.
        """
        return self._oriented(self._shifted_margin(self._validate_X(X)))

    def predict(self, X):
        """Predict class labels: ``pos_label_`` where the shifted margin is > 0.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        return self._label(self._shifted_margin(self._validate_X(X)) > 0)

    def predict_and_decision(self, X):
        """``(predict(X), decision_function(X))`` from one computation of the shifted margin.

        Scoring a fold needs both; an ensemble of kernel members computed every
        member's margins twice for them.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        scores : ndarray of shape (n_samples,)
            As :meth:`decision_function`.
        """
        margin = self._shifted_margin(self._validate_X(X))
        return self._label(margin > 0), self._oriented(margin)

    def _oriented(self, margin):
        """The shifted margin oriented towards ``classes_[1]``, as :meth:`decision_function` returns it."""
        return margin if self.pos_label_ == self.classes_[1] else -margin

    def _label(self, is_positive):
        pos_index = int(np.flatnonzero(self.classes_ == self.pos_label_)[0])
        return self.classes_[np.where(is_positive, pos_index, 1 - pos_index)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        estimator = getattr(self, "estimator", None)
        tags.input_tags.sparse = (
            True if estimator is None else get_tags(estimator).input_tags.sparse
        )
        return tags


class _SignedScoreClassifier(ValidatedParams, ClassifierMixin, BaseEstimator):
    """``predict`` from a ``decision_function`` that is positive towards ``classes_[1]``.

    Subclasses set ``classes_`` (two classes) and implement
    ``decision_function``; a lazy (Dask) score array is computed here, where
    the labels are needed. Binary, dense input only.
    """

    def predict(self, X):
        """Class labels: ``classes_[1]`` where the decision function is positive.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        return self.predict_and_decision(X)[0]

    def predict_and_decision(self, X):
        """``(predict(X), decision_function(X))`` from one computation of the decision function.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        scores : ndarray of shape (n_samples,)
            As :meth:`decision_function`, computed (not a Dask array).
        """
        scores = self.decision_function(X)  # checks that the model is fitted
        if hasattr(scores, "compute"):  # a Dask array: the labels need the values
            scores = self._compute_scores(scores)
        return self.classes_[(scores > 0).astype(int)], scores

    def _compute_scores(self, scores):
        return scores.compute()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.input_tags.sparse = False
        return tags


def binary_classes(y, name):
    """The two classes of ``y`` and their counts, or a clear error.

    Parameters
    ----------
    y : ndarray of shape (n_samples,) or ClassCounts
    name : str
        The estimator named in error messages.

    Returns
    -------
    classes, counts : ndarray of shape (2,)

    Raises
    ------
    ValueError
        If ``y`` is continuous, has one class, or more than two.
    """
    if not isinstance(y, ClassCounts):  # (labels known by their counts are counted as they are)
        y = np.asarray(y)
        if y.ndim != 1 or y.dtype.kind not in "iu":  # 1-d integers are class labels; the rest is checked
            check_classification_targets(y)
    classes, counts = unique_counts(y)
    if classes.size > 2:
        raise ValueError(
            f"Only binary classification is supported. {name} got {classes.size} classes "
            f"(the type of the target is 'multiclass'); wrap it in "
            f"sklearn.multiclass.OneVsRestClassifier for multi-class problems."
        )
    if classes.size < 2:
        raise ValueError(
            f"{name} needs samples of 2 classes; got 1 class ({classes[0]!r})."
        )
    return classes, counts


def positive_label(classes, counts, pos_label):
    """The minority (positive) class: ``pos_label`` or the least frequent class.

    On a tie the positive class is ``classes[1]``, scikit-learn's usual positive class.
    """
    if pos_label is None:
        return classes[0] if counts[0] < counts[1] else classes[1]
    matches = [label for label in classes if label == pos_label]
    if not matches:
        raise ValueError(
            f"pos_label={pos_label!r} is not one of the training classes {classes.tolist()}."
        )
    return matches[0]


def stratified_folds(n_splits, random_state_param, random_state):
    """``StratifiedKFold``: shuffled by ``random_state`` unless the parameter was ``None``.

    With ``random_state=None`` the folds follow row order, as scikit-learn's
    ``cv=5`` does, so a default estimator is deterministic.
    """
    if random_state_param is None:
        return StratifiedKFold(n_splits=n_splits)
    return StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=random_state)


def fit_base_estimator(estimator, X, y, sample_weight=None, *, owner="the classifier", fit_params=None):
    """Clone ``estimator`` (``None``: :func:`default_estimator`) and fit it.

    ``sample_weight`` is passed to the base estimator's ``fit``; one that does
    not take it is refused with a ``TypeError`` naming both estimators, not
    silently fitted unweighted. ``fit_params``: further keyword arguments of
    its ``fit``, already routed (:mod:`dimbsvm.svm.routing`).
    """
    base = default_estimator() if estimator is None else clone(estimator)
    params = dict(fit_params or {})
    if sample_weight is not None:
        check_takes_weights(base, owner=owner)
        params["sample_weight"] = sample_weight
    return base.fit(X, y, **params)


def margin_sign(estimator, pos_label, classes):
    """+1 if ``estimator.decision_function`` is positive towards ``pos_label``, else -1.

    A binary ``decision_function`` is positive towards ``estimator.classes_[1]``;
    without ``classes_`` the sorted training ``classes`` are assumed.
    """
    estimator_classes = getattr(estimator, "classes_", classes)
    return 1.0 if estimator_classes[1] == pos_label else -1.0


def signed_margins(estimator, X, sign):
    """``sign * estimator.decision_function(X)`` as a 1-D float array.

    For a fitted linear classifier (scikit-learn's ``LinearClassifierMixin``
    decision function: ``LinearSVC``, ``LogisticRegression``, ...) and a dense
    float64 array that its validation would pass unchanged, the margins are
    computed as that function computes them (``X @ coef_.T + intercept_``, the
    same operation, so bit for bit the same values) without the validation:
    an ensemble scores every member on every cache-sized piece of every chunk,
    and the validation cost 3x the product on 8,192 x 32 pieces
    (``benchmarks/scaling_notes.md``).
    """
    if _is_plain_linear_call(estimator, X):
        margins = X @ estimator.coef_.T + estimator.intercept_
        return sign * margins[:, 0]
    margins = np.asarray(estimator.decision_function(X), dtype=np.float64)
    if margins.ndim == 2 and margins.shape[1] == 1:
        margins = margins[:, 0]
    if margins.ndim != 1:
        raise ValueError(
            f"The base estimator's decision_function returned shape {margins.shape}; "
            "a binary classifier must return one margin per sample."
        )
    return sign * margins


def _is_plain_linear_call(estimator, X) -> bool:
    """Whether ``estimator.decision_function(X)`` would only compute ``X @ coef_.T + intercept_`` on ``X`` as given.

    True for scikit-learn's own linear decision function with a binary
    ``coef_`` of the fitted width, fitted without feature names, and a 2-D
    float64 numpy array of that width whose values may be assumed finite
    (scikit-learn's ``assume_finite`` set, or checked here); anything else
    goes through ``decision_function`` and its checks and errors.
    """
    if _LINEAR_DECISION is None or getattr(type(estimator), "decision_function", None) is not _LINEAR_DECISION:
        return False
    coef = getattr(estimator, "coef_", None)
    if (type(X) is not np.ndarray or X.ndim != 2 or X.dtype != np.float64 or not isinstance(coef, np.ndarray)
            or coef.ndim != 2 or coef.shape != (1, X.shape[1]) or coef.dtype != np.float64
            or getattr(estimator, "n_features_in_", None) != X.shape[1]
            or hasattr(estimator, "feature_names_in_")):
        return False
    return bool(get_config()["assume_finite"] or np.isfinite(X).all())


#: scikit-learn's linear classifiers' shared ``decision_function`` (``X @ coef_.T + intercept_``), found on a
#: public class: an estimator whose class has this very function scores by it.
_LINEAR_DECISION = getattr(LinearSVC, "decision_function", None)


def out_of_fold_margins(estimator, X, y, pos_label, classes, splits, sample_weight=None, fit_params=None):
    """Signed margins of every sample from a clone fitted without it.

    Parameters
    ----------
    estimator : estimator object
        Template, cloned once per fold.
    X, y : training data
    pos_label, classes
        As in :func:`margin_sign`.
    splits : iterable of (train, test) index arrays
        Every sample must be in exactly one ``test``; every ``train`` must hold
        both classes.
    sample_weight : ndarray of shape (n_samples,), default=None
        Passed, restricted to each ``train``, to every fold's ``fit``.
    fit_params : dict, default=None
        Routed keyword arguments of every fold's ``fit``, row-aligned ones
        restricted to its ``train`` (:func:`~dimbsvm.svm.routing.rows_of`).

    Returns
    -------
    margins : ndarray of shape (n_samples,)
    """
    margins = np.full(X.shape[0], np.nan)
    for train, test in splits:
        params = {} if fit_params is None else rows_of(fit_params, train, X.shape[0])
        if sample_weight is not None:
            params["sample_weight"] = sample_weight[train]
        fold = clone(estimator).fit(X[train], y[train], **params)
        margins[test] = signed_margins(fold, X[test], margin_sign(fold, pos_label, classes))
    missing = np.flatnonzero(np.isnan(margins))
    if missing.size:
        raise ValueError(f"the cross-validation folds left {missing.size} row(s) out of every test fold "
                         f"(first: {missing[:5].tolist()}); out-of-fold margins need each row in one test fold.")
    return margins
