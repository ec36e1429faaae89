"""SVM-OTHR and SVM-THR: move a binary classifier's decision threshold.

Both wrap a classifier with a ``decision_function`` (by default an RBF
``SVC``), fit it, and add a shift ``theta`` to its margin (eqs. 17 and 24):

* :class:`OTHRClassifier` searches the shift that maximises the training
  G-mean among the paper's candidates (Fig. 3, eq. 23); by default on
  out-of-fold margins with a small tolerance (measured in
  ``benchmarks/othr_study.md``), and :data:`PAPER_PARAMS` gives the paper's exact search.
* :class:`THRClassifier` uses Lin & Chen's closed form (eq. 16).

The base class and the helpers they share with the other classifiers
(binary target checks, signed margins, out-of-fold margins) are in
:mod:`dimbsvm.svm._base`.
"""

from __future__ import annotations

import logging
from numbers import Integral, Real

import numpy as np
from sklearn.model_selection import check_cv
from sklearn.utils import check_random_state
from sklearn.utils.metaestimators import available_if

from dimbsvm._params import HasMethods, Interval, StrOptions, check_sample_weight, fit_context
from dimbsvm.graph.knn import KNN_METHODS
from dimbsvm.svm._base import (
    _ShiftedMarginClassifier,
    default_estimator,
    fit_base_estimator,
    margin_sign,
    out_of_fold_margins,
    signed_margins,
    stratified_folds,
)
from dimbsvm.svm._base import binary_classes, positive_label  # noqa: F401 - were imported from here
from dimbsvm.svm.calibration import platt_fit
from dimbsvm.svm.objectives import CostMatrix, ScorerName
from dimbsvm.svm.routing import route_fit
from dimbsvm.svm.threshold import (
    CANDIDATES,
    OBJECTIVES,
    SMOOTHINGS,
    othr_threshold,
    thr_shift,
)

__all__ = ["PAPER_PARAMS", "OTHRClassifier", "THRClassifier", "default_estimator"]

logger = logging.getLogger(__name__)

#: ``OTHRClassifier(**PAPER_PARAMS)`` is the paper's SVM-OTHR (Fig. 3): the
#: threshold of the highest G-mean on the training margins among the eq. 23
#: candidates, ties to the smallest ``|theta|``.
PAPER_PARAMS = {
    "margins": "train",
    "objective": "g_mean",
    "candidates": "othr",
    "smoothing": None,
    "tolerance": 0.0,
    "min_precision": 0.0,
}

#: Constraints shared by the threshold-search parameters of OTHR and EnSVM-OTHR.
SEARCH_CONSTRAINTS = {
    "objective": [StrOptions(set(OBJECTIVES)), ScorerName(), CostMatrix(), callable],
    "candidates": [StrOptions(set(CANDIDATES))],
    "smoothing": [StrOptions(set(SMOOTHINGS)), Interval(Real, 0, None, closed="neither"), None],
    "tolerance": [Interval(Real, 0, 1, closed="left")],
    "min_precision": [Interval(Real, 0, 1, closed="both")],
}


class THRClassifier(_ShiftedMarginClassifier):
    """SVM-THR: shift the margin by Lin & Chen's closed form (OTHR paper, eq. 16).

    The shift is ``theta = (N- - N+) / (N+ + N- + 2)`` with ``N+`` the number
    of minority (positive) and ``N-`` of majority training samples; a sample
    is predicted minority when ``h(x) + theta > 0`` (eq. 17). This is the
    baseline the OTHR paper compares with.

    Parameters
    ----------
    estimator : estimator object, default=None
        A binary classifier with ``fit`` and ``decision_function``; cloned
        before fitting. ``None`` means ``SVC(kernel="rbf", C=1.0, gamma="scale")``
        on up to ``LARGE_N`` (20,000) training rows and ``LinearSVC()`` above
        (:mod:`dimbsvm.svm.scaled_defaults`; recorded in ``scaled_defaults_``).
        Setting a parameter of the default (``estimator__C``) makes it an
        explicit ``SVC``, used at every size.
    pos_label : int, float, bool or str, default=None
        The minority (positive) class; ``None`` takes the least frequent
        training class (``classes_[1]`` on a tie).

    Attributes
    ----------
    estimator_ : estimator object
        The fitted base classifier.
    scaled_defaults_ : dict
        The defaults replaced for the size of the training data,
        ``{"estimator": LinearSVC()}`` above ``LARGE_N`` rows with
        ``estimator=None``; empty otherwise.
    classes_ : ndarray of shape (2,)
        The class labels.
    pos_label_ : object
        The minority (positive) class.
    threshold_ : float
        The shift added to the minority-side margin.
    n_features_in_ : int
        Number of features seen during fit.

    See Also
    --------
    OTHRClassifier : Searches the shift instead of using a closed form.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> X, y = make_classification(n_samples=200, weights=[0.9], random_state=0)
    >>> clf = THRClassifier().fit(X, y)
    >>> round(clf.threshold_, 4)
    0.7921
    >>> clf.pos_label_
    np.int64(1)
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "decision_function"]), None],
        "pos_label": [Real, str, "boolean", None],
    }

    def __init__(self, estimator=None, *, pos_label=None):
        self.estimator = estimator
        self.pos_label = pos_label

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, sample_weight=None, **fit_params):
        """Fit the base classifier and compute the eq. 16 shift.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Two classes, of any label type.
        sample_weight : array-like of shape (n_samples,), default=None
            Passed to the base estimator's ``fit`` (a ``TypeError`` if it
            takes none; with metadata routing, where it asks for it); N+ and
            N- of eq. 16 become the classes' weight sums.
        **fit_params : dict
            With ``sklearn.set_config(enable_metadata_routing=True)``, routed
            to the base estimator's ``fit`` where it asks for them
            (:mod:`dimbsvm.svm.routing`); refused without routing.

        Returns
        -------
        self : THRClassifier
            The fitted classifier.
        """
        X, y, positive = self._validate_training_data(X, y)
        if sample_weight is not None:
            sample_weight = check_sample_weight(sample_weight, X, ensure_non_negative=True)
        estimator = self._resolve_defaults(X.shape[0], positive.sum()).get("estimator", self.estimator)
        routed = route_fit(self, default_estimator() if estimator is None else estimator, sample_weight, fit_params)
        self.estimator_ = fit_base_estimator(estimator, X, y, owner="THRClassifier", fit_params=routed.estimator)
        self._margin_sign = margin_sign(self.estimator_, self.pos_label_, self.classes_)
        weights = np.ones(positive.size) if sample_weight is None else sample_weight
        n_pos, n_neg = weights[positive].sum(), weights[~positive].sum()
        self.threshold_ = float(thr_shift(n_pos, n_neg))
        return self

    def _shifted_margin(self, X):
        return signed_margins(self.estimator_, X, self._margin_sign) + self.threshold_


class OTHRClassifier(_ShiftedMarginClassifier):
    """SVM-OTHR: move the decision threshold to the best G-mean.

    The base classifier is fitted, then every misclassified minority sample
    ``x_i`` (margin ``h(x_i) < 0``) proposes the shift
    ``theta_i = -(h(x_i) + h(nx_i)) / 2`` (eq. 23), where ``nx_i`` is its
    nearest majority neighbour in input space among the majority samples
    farther on the majority side (``h(nx_i) < h(x_i)``). ``theta = 0`` is
    always a candidate. The candidate with the highest G-mean wins, and a
    sample is predicted minority when ``h(x) + theta > 0`` (eq. 24). A
    minority sample at or below every majority margin proposes nothing.

    **Defaults.** The paper scores the candidates on the margins of the
    training samples the SVM was fitted on, which are optimistic about the
    minority class. By default the margins are out-of-fold (``margins="cv"``,
    5 stratified folds; the final classifier is still fitted on all samples),
    and the smallest ``|theta|`` whose G-mean is within 1 % of the best wins
    (``tolerance=0.01``), which keeps the shift from moving far for a
    negligible training gain. The measurements behind these defaults are in
    ``benchmarks/othr_study.md``.

    **At scale.** Above ``LARGE_N`` (20,000) training rows ``estimator=None``
    is ``LinearSVC()``, whose fit grows linearly with the rows where the RBF
    ``SVC``'s grows about quadratically (:mod:`dimbsvm.svm.scaled_defaults`;
    recorded in ``scaled_defaults_``).

    **The paper's exact algorithm** is ``OTHRClassifier(**PAPER_PARAMS)``:
    ``margins="train"``, ``objective="g_mean"``, ``candidates="othr"``,
    ``smoothing=None``, ``tolerance=0.0``, ``min_precision=0.0`` (ties go to
    the smallest ``|theta|``).

    Parameters
    ----------
    estimator : estimator object, default=None
        A binary classifier with ``fit`` and ``decision_function``; cloned
        before fitting. ``None`` means ``SVC(kernel="rbf", C=1.0, gamma="scale")``
        on up to ``LARGE_N`` (20,000) training rows and ``LinearSVC()`` above
        (:mod:`dimbsvm.svm.scaled_defaults`; recorded in ``scaled_defaults_``).
        Setting a parameter of the default (``estimator__C``) makes it an
        explicit ``SVC``, used at every size.
        A class-weighted base such as ``SVC(class_weight="balanced")`` is a
        useful variant.
    pos_label : int, float, bool or str, default=None
        The minority (positive) class; ``None`` takes the least frequent
        training class (``classes_[1]`` on a tie).
    margins : {"train", "cv"}, default="cv"
        Where the threshold is searched: on the margins of the fitted
        classifier on its own training samples (the paper), or on
        out-of-fold margins from ``cv`` stratified folds, which are not
        optimistic about the minority class. With ``"cv"`` the final
        classifier is still fitted on all samples, and ``cv`` more
        classifiers are fitted on parts of them.
    cv : int, cross-validation generator or iterable, default=5
        Folds for ``margins="cv"``: a number of stratified folds (reduced to
        the number of minority samples if there are fewer), a splitter
        (``split(X, y)`` is given the minority mask as ``y``), or an iterable
        of ``(train, test)`` index arrays, as scikit-learn's ``cv``. Every row
        must be in exactly one test fold.
    objective : {"g_mean", "f_measure", "g_f_mean"}, dict or callable, default="g_mean"
        The criterion the threshold maximises: G-mean (the paper), the
        F-measure of the minority class, or ``sqrt(G-mean * F-measure)``; a
        cost matrix ``{"fn": c_fn, "fp": c_fp}`` (the mean cost of the errors
        is minimised); or a function ``f(tp=, fp=, fn=, tn=)`` of arrays of
        confusion counts, one value per candidate to maximise (any metric of
        the confusion matrix). See :mod:`dimbsvm.svm.objectives`.
    candidates : {"othr", "midpoints"}, default="othr"
        The paper's eq. 23 candidates, or every cut between two distinct
        margins (:func:`~dimbsvm.svm.threshold.midpoint_candidates`; no
        neighbour search).
    smoothing : {"silverman"}, float or None, default=None
        Maximise the objective of kernel-smoothed counts instead of the exact
        ones (see :func:`~dimbsvm.svm.threshold.best_threshold`);
        ``"silverman"`` sets the bandwidth from the minority margins.
    tolerance : float in [0, 1), default=0.01
        Candidates whose objective is within this fraction of the best count
        as best; the smallest ``|theta|`` among them wins. ``0`` is the paper.
    min_precision : float in [0, 1], default=0.0
        Leave out candidates whose training precision is below this floor
        (e.g. ``objective="g_mean", min_precision=0.3``: G-mean subject to a
        precision floor). If none reaches it, the most precise ones are kept.
    n_neighbors : int, default=10
        Majority neighbours fetched per sample in the first round of the
        nearest-neighbour search; the search widens by doubling where needed,
        so this changes the work, not the result.
    knn_method : {"auto", "exact", "pynndescent"}, default="auto"
        Search method of :func:`dimbsvm.graph.knn.nearest_neighbors`;
        ``"pynndescent"`` is approximate.
    random_state : int, RandomState instance or None, default=None
        Shuffles the folds of ``margins="cv"`` (``None``: folds in row order,
        as scikit-learn's ``cv=5``) and seeds an approximate neighbour search.
        The base estimator's own ``random_state`` is left alone.
    probability : bool, default=False
        Enable :meth:`predict_proba`: Platt's sigmoid (``platt_``) fitted on
        the out-of-fold shifted margins, the honest view of how the
        classifier scores rows it was not fitted on (needs ``margins="cv"``;
        the training rows' own margins would make it overconfident). It
        costs nothing more: the margins are those the threshold was searched on.

    Attributes
    ----------
    estimator_ : estimator object
        The fitted base classifier.
    scaled_defaults_ : dict
        The defaults replaced for the size of the training data,
        ``{"estimator": LinearSVC()}`` above ``LARGE_N`` rows with
        ``estimator=None``; empty otherwise.
    classes_ : ndarray of shape (2,)
        The class labels.
    pos_label_ : object
        The minority (positive) class.
    threshold_ : float
        The chosen shift, ``theta_opt``.
    platt_ : tuple of float
        With ``probability=True``: ``(a, b)`` of ``P = 1 / (1 + exp(a f + b))``,
        ``f`` the value of :meth:`decision_function` oriented to ``pos_label_``.
    candidates_ : dict of ndarray
        One entry per candidate (``pandas.DataFrame(clf.candidates_)`` shows
        it): ``theta``; ``sample`` and ``neighbour``, the training rows of
        ``x_i`` and ``nx_i`` (-1 for ``theta = 0``); the ``tpr``, ``tnr``,
        ``precision``, ``g_mean`` and ``f_measure`` the shift gives on the
        searched margins; and ``score``, the objective maximised.
    n_features_in_ : int
        Number of features seen during fit.

    See Also
    --------
    THRClassifier : The closed-form shift of Lin & Chen.
    EnsembleOTHRClassifier : Bagged OTHR members with a shared or perturbed shift.

    Notes
    -----
    OTHR is binary: a multi-class target raises ``ValueError``; wrap the
    classifier in :class:`sklearn.multiclass.OneVsRestClassifier` for
    multi-class problems.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> X, y = make_classification(n_samples=200, weights=[0.9], flip_y=0.05,
    ...                            random_state=0)
    >>> clf = OTHRClassifier().fit(X, y)
    >>> clf.threshold_ >= 0.0
    True
    >>> sorted(clf.candidates_)[:3]
    ['f_measure', 'g_mean', 'neighbour']
    >>> clf.predict(X[:3])
    array([0, 0, 0])
    >>> paper = OTHRClassifier(**PAPER_PARAMS).fit(X, y)
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "decision_function"]), None],
        "pos_label": [Real, str, "boolean", None],
        "margins": [StrOptions({"train", "cv"})],
        "cv": [Interval(Integral, 2, None, closed="left"), "cv_object"],
        **SEARCH_CONSTRAINTS,
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "knn_method": [StrOptions(set(KNN_METHODS))],
        "random_state": ["random_state"],
        "probability": ["boolean"],
    }

    def __init__(
        self,
        estimator=None,
        *,
        pos_label=None,
        margins="cv",
        cv=5,
        objective="g_mean",
        candidates="othr",
        smoothing=None,
        tolerance=0.01,
        min_precision=0.0,
        n_neighbors=10,
        knn_method="auto",
        random_state=None,
        probability=False,
    ):
        self.estimator = estimator
        self.pos_label = pos_label
        self.margins = margins
        self.cv = cv
        self.objective = objective
        self.candidates = candidates
        self.smoothing = smoothing
        self.tolerance = tolerance
        self.min_precision = min_precision
        self.n_neighbors = n_neighbors
        self.knn_method = knn_method
        self.random_state = random_state
        self.probability = probability

    def __setstate__(self, state):
        super().__setstate__({"probability": False, **state})  # saved before the parameter existed

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, sample_weight=None, **fit_params):
        """Fit the base classifier and search the threshold shift.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Two classes, of any label type.
        sample_weight : array-like of shape (n_samples,), default=None
            Passed to the base estimator's ``fit`` and to every out-of-fold
            fit (a ``TypeError`` if the base takes none), and to the threshold
            objective, whose confusion counts become weight sums. The
            candidates and the folds come from the unweighted rows. With
            metadata routing, the base estimator's fits get it where they ask
            for it; the objective always counts it.
        **fit_params : dict
            With ``sklearn.set_config(enable_metadata_routing=True)``, routed
            to the base estimator's ``fit`` (every out-of-fold fit gets its
            training rows' part) and, with ``margins="cv"``, to ``cv``'s
            ``split`` (``groups`` for a group splitter) where they ask for
            them (:mod:`dimbsvm.svm.routing`); refused without routing.

        Returns
        -------
        self : OTHRClassifier
            The fitted classifier.
        """
        X, y, positive = self._validate_training_data(X, y)
        if self.probability and self.margins != "cv":
            raise ValueError("probability=True calibrates on out-of-fold margins: it needs margins='cv'; "
                             f"got margins={self.margins!r}.")
        if sample_weight is not None:
            sample_weight = check_sample_weight(sample_weight, X, ensure_non_negative=True)
        random_state = check_random_state(self.random_state)
        estimator = self._resolve_defaults(X.shape[0], positive.sum()).get("estimator", self.estimator)
        routed = route_fit(self, default_estimator() if estimator is None else estimator, sample_weight, fit_params)
        self.estimator_ = fit_base_estimator(estimator, X, y, owner="OTHRClassifier", fit_params=routed.estimator)
        self._margin_sign = margin_sign(self.estimator_, self.pos_label_, self.classes_)
        if self.margins == "train":
            margins = signed_margins(self.estimator_, X, self._margin_sign)
        else:
            n_minority = int(positive.sum())
            if n_minority < 2:
                raise ValueError(
                    f"margins='cv' needs at least 2 minority samples; got {n_minority}."
                )
            margins = out_of_fold_margins(
                self.estimator_, X, y, self.pos_label_, self.classes_,
                self._margin_folds(X, positive, random_state, routed.splitter),
                fit_params=routed.estimator,
            )
        self.threshold_, self.candidates_ = othr_threshold(
            X,
            positive,
            margins,
            objective=self.objective,
            candidates=self.candidates,
            smoothing=self.smoothing,
            tolerance=self.tolerance,
            min_precision=self.min_precision,
            n_neighbors=self.n_neighbors,
            method=self.knn_method,
            random_state=random_state,
            sample_weight=sample_weight,
        )
        if self.probability:
            self.platt_ = platt_fit(margins + self.threshold_, positive, sample_weight)
        logger.debug(
            "OTHR threshold %.6g chosen among %d candidates",
            self.threshold_,
            self.candidates_["theta"].size,
        )
        return self

    def _margin_folds(self, X, positive, random_state, split_params=None):
        if isinstance(self.cv, Integral):
            n_splits = min(self.cv, int(positive.sum()))
            # stratified on the minority mask: the same folds whatever the labels are called
            return stratified_folds(n_splits, self.random_state, random_state).split(X, positive)
        if hasattr(self.cv, "split"):
            return self.cv.split(X, positive, **(split_params or {}))
        return list(self.cv)

    def _routed_splitter(self):
        return check_cv(self.cv, classifier=True) if self.margins == "cv" else None

    def _shifted_margin(self, X):
        return signed_margins(self.estimator_, X, self._margin_sign) + self.threshold_  # eq. 24

    @available_if(lambda self: self.probability)
    def predict_proba(self, X):
        """Class probabilities (``classes_`` order): Platt's sigmoid of ``decision_function``.

        Only with ``probability=True``; fitted on the out-of-fold margins. As
        with ``SVC(probability=True)``, ``predict`` keeps its own rule (the
        tuned shift), so ``argmax(predict_proba)`` and ``predict`` can differ.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, 2)
        """
        return self._platt_probabilities(X)
