"""EnSVM-OTHR: bagged SVM-OTHR members, with one shared or per-member perturbed shifts.

:class:`EnsembleOTHRClassifier` draws one seed per member up front, hands one
:func:`~dimbsvm.svm.members.fit_member` call per member to the engine (in
this process, or as Dask tasks when a ``distributed`` client is given or
active), and combines the members: one shift shared by all, searched on their
pooled out-of-bag margins, or the paper's perturbed shift per member and a
majority vote. Each member is rebuilt from its seed alone, so the fitted
ensemble is the same whatever runs it. Member fitting lives in
:mod:`dimbsvm.svm.members` (its names are re-exported here), the planning of
members from labels or counts in :mod:`dimbsvm.svm.ensemble_plan`, the shared
shift's search in :mod:`dimbsvm.svm.shared_threshold`.
"""

from __future__ import annotations

import contextlib
import logging
from numbers import Integral, Real

import numpy as np
from dask.base import is_dask_collection
from sklearn.base import clone
from sklearn.utils.metaestimators import available_if

from dimbsvm._params import HasMethods, Interval, RealNotInt, StrOptions, check_sample_weight, fit_context
from dimbsvm.parallel import ClientParamMixin, current_client, effective_n_jobs
from dimbsvm.parallel.policy import in_order_threads
from dimbsvm.graph.knn import KNN_METHODS
from dimbsvm.svm._base import (
    _ShiftedMarginClassifier,
    default_estimator,
)
from dimbsvm.svm.bagging import BOOTSTRAPS, draw_bag
from dimbsvm.svm.ensemble_chunks import chunked_fit_unsupported, fit_over_chunks
from dimbsvm.svm.ensemble_plan import MemberPlanning
from dimbsvm.svm.grid_members import candidate_settings
# Re-exported: models saved by dimbsvm 0.1.0 name ``dimbsvm.svm.ensemble.OTHRMember``
# (skops stores the module path), and code imported fit_member from here.
from dimbsvm.svm.members import MEMBER_MARGINS, OTHRMember, fit_member, pooled_oob_margins
from dimbsvm.svm.othr import SEARCH_CONSTRAINTS
from dimbsvm.svm.routing import route_fit, routing_enabled

__all__ = [
    "BOOTSTRAPS",
    "MEMBER_MARGINS",
    "PAPER_PARAMS",
    "THRESHOLDS",
    "EnsembleOTHRClassifier",
    "OTHRMember",
    "draw_bag",
    "fit_member",
    "pooled_oob_margins",
]

logger = logging.getLogger(__name__)

#: How the ensemble thresholds: one shift per member and a majority vote (the
#: paper), or one shift shared by all, searched on pooled out-of-bag margins.
THRESHOLDS = ("member", "pooled_oob")

#: ``EnsembleOTHRClassifier(**PAPER_PARAMS)`` is the paper's EnSVM-OTHR (Fig. 5):
#: plain bootstrap bags, each member's OTHR shift searched on its own bag and
#: perturbed by +-10 %, majority vote.
PAPER_PARAMS = {
    "bootstrap": "plain",
    "max_samples": None,
    "threshold": "member",
    "member_margins": "train",
    "perturbation": 0.1,
    "objective": "g_mean",
    "candidates": "othr",
    "smoothing": None,
    "tolerance": 0.0,
    "min_precision": 0.0,
    "class_weight": None,
}


class EnsembleOTHRClassifier(ClientParamMixin, MemberPlanning, _ShiftedMarginClassifier):
    """EnSVM-OTHR: bagging of SVM-OTHR members.

    Each member draws a bag and fits the base classifier on it. Then either

    * ``threshold="pooled_oob"`` (the default): one shift ``theta`` is shared
      by all members, searched (as :class:`OTHRClassifier` searches, with the
      objective, candidates, smoothing and tolerance below) on the pooled
      out-of-bag margins: for each training row, the mean margin of the
      members that did not see it, an honest estimate of the ensemble's
      mean margin on new rows. ``predict`` is the sign of the shifted mean
      margin ``mean_m h_m(x) + theta``, which is also ``decision_function``; or
    * ``threshold="member"`` (the paper): each member searches its own OTHR
      shift ``theta_opt`` (on the margins ``member_margins``) and perturbs it
      to ``theta' = theta_opt * (1 + perturbation * u)``, ``u ~ U[-1, 1]``
      (eq. 25); ``predict`` is the members' majority vote, ties going to the
      minority class, and ``decision_function`` the mean shifted margin,
      which can disagree with the vote near the boundary.

    **Defaults.** Stratified bootstrap bags (every bag keeps the class
    counts), one shift on the pooled out-of-bag margins, chosen on every cut
    between two margins by a kernel-smoothed G-mean (Silverman bandwidth),
    taking the smallest ``|theta|`` within 0.5 % of the best. Why these, with
    the measurements against the paper's algorithm and the peers, is in
    ``benchmarks/othr_study.md``.

    **At scale.** Bags are as large as the training set up to ``LARGE_N``
    (20,000) training rows; above, ``max_samples="auto"`` draws bags of
    20,000 rows, so each member's fit and out-of-bag scoring stop growing
    faster than the rows (:mod:`dimbsvm.svm.scaled_defaults`; the bag size
    used is ``max_samples_``, the replacement ``scaled_defaults_``).

    **The paper's exact algorithm** is ``EnsembleOTHRClassifier(**PAPER_PARAMS)``:
    ``bootstrap="plain"``, ``threshold="member"``, ``member_margins="train"``,
    ``perturbation=0.1``, ``objective="g_mean"``, ``candidates="othr"``,
    ``smoothing=None``, ``tolerance=0.0``, ``class_weight=None``.

    ``fit`` runs the plan of tasks a job's fold runs (the fold engine's
    hook, :mod:`dimbsvm.svm.ensemble_fold`, run by :mod:`dimbsvm.fold_data.one_fold`): the members (a few per task on
    small data), with ``screen_members`` its two rounds, then the assembly.
    The tasks run on ``client`` when it is given or a ``distributed`` client
    is active (not from inside a Dask task; ``X`` and ``y`` are sent once),
    else on ``n_jobs`` processes, else in this process, one after the other.
    Seeds are drawn once from ``random_state``, so the fitted ensemble is
    identical either way and for any number of workers.

    Parameters
    ----------
    estimator : estimator object, default=None
        A binary classifier with ``fit`` and ``decision_function``; cloned per
        member, its ``random_state`` parameters set from the member's seed.
        ``None`` means ``SVC(kernel="rbf", C=1.0, gamma="scale")``.
    n_estimators : int, default=10
        Number of members.
    perturbation : float, default=0.1
        Relative size of the random perturbation of each member's shift
        (eq. 25); used only with ``threshold="member"`` (a shared shift is
        not perturbed).
    bootstrap : {"plain", "stratified", "balanced"}, default="stratified"
        How bags are drawn (see :func:`~dimbsvm.svm.bagging.draw_bag`): rows
        with replacement (the paper; a bag missing a class is redrawn), per
        class with replacement keeping the class counts, or balanced
        (minority bootstrapped, as many majority rows drawn without replacement).
    max_samples : "auto", int, float or None, default="auto"
        Bag size (see :func:`~dimbsvm.svm.bagging.draw_bag`). ``None``: the
        training set's size (``bootstrap="balanced"``: twice the minority).
        ``"auto"``: ``None`` while that bag has at most ``LARGE_N`` (20,000)
        rows, else ``LARGE_N`` (bags of 20,000 rows, split across the classes
        as an int ``max_samples`` is), so the members' fits and out-of-bag
        scoring stop growing with the rows
        (:mod:`dimbsvm.svm.scaled_defaults`). The value used is
        ``max_samples_``.
    threshold : {"pooled_oob", "member"}, default="pooled_oob"
        One shift shared by the members, searched on their pooled out-of-bag
        margins, or one perturbed shift per member and a majority vote (the paper).
    member_margins : {"train", "oob", "cv"}, default="train"
        With ``threshold="member"``: where each member's shift is searched,
        its bag (the paper), its out-of-bag rows, or out-of-fold margins
        within its bag.
    cv : int, default=5
        Folds for ``member_margins="cv"``.
    objective : {"g_mean", "f_measure", "g_f_mean"}, dict or callable, default="g_mean"
        The criterion the shift maximises: a name, a cost matrix
        ``{"fn": c_fn, "fp": c_fp}`` or a function of the confusion counts
        (see :class:`OTHRClassifier`).
    candidates : {"othr", "midpoints"}, default="midpoints"
        The paper's eq. 23 candidates or every cut between two distinct margins.
    smoothing : {"silverman"}, float or None, default="silverman"
        Maximise the objective of kernel-smoothed counts
        (:func:`~dimbsvm.svm.threshold.best_threshold`); ``None``: exact counts.
    tolerance : float in [0, 1), default=0.005
        Candidates within this fraction of the best objective count as best;
        the smallest ``|theta|`` among them wins.
    min_precision : float in [0, 1], default=0.0
        Precision floor of the candidates (see :class:`OTHRClassifier`).
    class_weight : dict, "balanced" or None, default=None
        Set as the base classifier's ``class_weight`` (which it must have),
        computed per bag; ``None`` leaves the base classifier as given.
    pos_label : int, float, bool or str, default=None
        The minority (positive) class; ``None`` takes the least frequent
        training class (``classes_[1]`` on a tie).
    n_neighbors : int, default=10
        First-round neighbours of the eq. 23 candidate search (work, not result).
    knn_method : {"auto", "exact", "pynndescent"}, default="auto"
        Neighbour search method; ``"pynndescent"`` is approximate.
    max_bag_draws : int, default=20
        Attempts to draw a bag holding both classes before a ``ValueError``.
    max_candidates : int or None, default=100_000
        With ``threshold="pooled_oob"``: score at most this many candidate
        shifts, evenly spaced in sorted order
        (:func:`~dimbsvm.svm.threshold.thin_candidates`). Below 100,000
        out-of-bag rows nothing is thinned; above, it bounds the memory of
        the search and of ``candidates_``. ``None`` scores every cut.
    random_state : int, RandomState instance or None, default=None
        Draws the members' seeds.
    probability : bool, default=False
        Enable :meth:`predict_proba`: Platt's sigmoid (``platt_``) fitted on
        the pooled out-of-bag shifted margins (needs ``threshold="pooled_oob"``).
    param_grid : dict or list of dicts, default=None
        Settings of the base estimator to choose among (``ParameterGrid``
        keys are its parameters, e.g. ``{"C": [1, 10], "gamma": [0.3, 1]}``).
        ``n_estimators`` members are fitted per setting, all settings on the
        same bags; settings are ranked by the ROC-AUC of their pooled
        out-of-bag margins and the members of the ``top_candidates`` best are
        kept, their margins divided by their out-of-bag spread so they average
        on one scale (:mod:`dimbsvm.svm.grid_members`). No inner CV: every
        fit is a member. Needs ``threshold="pooled_oob"``.
    top_candidates : int, default=3
        With ``param_grid``: how many settings the ensemble keeps (at most all).
    screen_members : int or None, default=None
        With ``param_grid``: successive halving in two rounds. Every setting
        first gets ``screen_members`` members (on the first seeds); only the
        ``screen_survivors`` settings whose pooled out-of-bag margins rank
        the training rows best get all ``n_estimators`` members (the same
        bags as without screening), and ``top_candidates`` are kept among
        them. ``None`` (or at least ``n_estimators``) fits every member of
        every setting. The members of the second round depend on the first:
        a driver plans them with :meth:`plan_screening`, not :meth:`plan_members`.
    screen_survivors : int, default=6
        With ``screen_members``: how many settings get all their members.
    client : distributed.Client or None, default=None
        Client to fit members on; ``None`` uses the active client if any. It
        is kept only as this parameter (the members hold no reference to it)
        and is dropped when the model is pickled.
    n_jobs : int, default=None
        Without a client: the processes that fit the members, as
        scikit-learn counts them (``None``: one, in this process; ``-1``:
        every core). Processes, not threads: LIBLINEAR's generator is shared
        by a process's threads. The fitted ensemble is the same for any
        ``n_jobs``. Ignored when members run on a client.

    Attributes
    ----------
    members_ : list of OTHRMember
        The fitted members (base classifier, sign, shifts, draws).
    estimators_ : list of estimator objects
        The members' fitted base classifiers.
    thresholds_ : ndarray of shape (n_estimators,)
        The shifts the members apply (all equal to ``threshold_`` with
        ``threshold="pooled_oob"``).
    optimal_thresholds_ : ndarray of shape (n_estimators,)
        Their shifts before perturbation.
    threshold_ : float
        With ``threshold="pooled_oob"``: the shared shift.
    platt_ : tuple of float
        With ``probability=True``: ``(a, b)`` of ``P = 1 / (1 + exp(a f + b))``.
    candidates_ : dict of ndarray
        With ``threshold="pooled_oob"``: the candidate table of the shared
        search (as :attr:`OTHRClassifier.candidates_`; rows are training rows).
    best_params_ : list of dict
        With ``param_grid``: the kept settings, best out-of-bag ROC-AUC first.
    search_results_ : dict of ndarray
        With ``param_grid``: ``params``, ``oob_auc``, ``oob_spread`` and
        ``kept`` for every setting, in grid order; with ``screen_members``
        also ``screen_oob_auc`` (of the first round's members) and
        ``survived``, and ``oob_auc`` and ``oob_spread`` are NaN for the
        settings that did not survive the screening.
    threshold_margins_ : str
        With ``threshold="pooled_oob"``: ``"oob"``, or ``"train"`` when the
        out-of-bag rows missed a class and the mean margins of all training
        rows were searched instead.
    seeds_ : ndarray of shape (n_estimators,)
        The members' seeds; ``fit_member(X, y, seed, ...)`` rebuilds a member.
    max_samples_ : int, float or None
        The bag size the members were drawn with: ``max_samples`` resolved.
    scaled_defaults_ : dict
        The defaults replaced for the size of the training data,
        ``{"max_samples": LARGE_N}`` when ``max_samples="auto"`` capped the
        bags; empty otherwise.
    classes_ : ndarray of shape (2,)
        The class labels.
    pos_label_ : object
        The minority (positive) class.
    n_features_in_ : int
        Number of features seen during fit.

    See Also
    --------
    OTHRClassifier : A single member without bagging.

    Notes
    -----
    Binary only: a multi-class target raises ``ValueError``; wrap the
    classifier in :class:`sklearn.multiclass.OneVsRestClassifier`.

    With ``threshold="member"`` the perturbation is relative to ``theta_opt``.
    When the base SVM collapses onto the majority class (nearly all training
    margins at -1, as on KEEL abalone19 with ``C=1``), ``theta_opt`` lies in
    a very narrow gap of the margins and a +-10 % perturbation moves every
    member out of it, so members predict all rows minority or none;
    ``perturbation=0`` avoids this.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> X, y = make_classification(n_samples=200, weights=[0.9], random_state=0)
    >>> ensemble = EnsembleOTHRClassifier(n_estimators=5, random_state=0).fit(X, y)
    >>> ensemble.thresholds_.shape
    (5,)
    >>> bool(np.all(ensemble.thresholds_ == ensemble.threshold_))
    True
    >>> ensemble.predict(X[:3])
    array([0, 0, 0])
    >>> paper = EnsembleOTHRClassifier(n_estimators=5, random_state=0, **PAPER_PARAMS).fit(X, y)
    """

    #: Members are fitted as tasks, each under the LIBLINEAR lock (``fit_member``); see
    #: :func:`dimbsvm.svm._native_rng.fit_guard`.
    _locks_liblinear_per_task = True

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "decision_function"]), None],
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "perturbation": [Interval(Real, 0, 1, closed="both")],
        "bootstrap": [StrOptions(set(BOOTSTRAPS))],
        "max_samples": [
            StrOptions({"auto"}),
            None,
            Interval(Integral, 1, None, closed="left"),
            Interval(RealNotInt, 0, 1, closed="right"),
        ],
        "threshold": [StrOptions(set(THRESHOLDS))],
        "member_margins": [StrOptions({"train", "oob", "cv"})],
        "cv": [Interval(Integral, 2, None, closed="left")],
        **SEARCH_CONSTRAINTS,
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "pos_label": [Real, str, "boolean", None],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "knn_method": [StrOptions(set(KNN_METHODS))],
        "max_bag_draws": [Interval(Integral, 1, None, closed="left")],
        "max_candidates": [Interval(Integral, 2, None, closed="left"), None],
        "random_state": ["random_state"],
        "probability": ["boolean"],
        "param_grid": [dict, list, None],
        "top_candidates": [Interval(Integral, 1, None, closed="left")],
        "screen_members": [Interval(Integral, 1, None, closed="left"), None],
        "screen_survivors": [Interval(Integral, 1, None, closed="left")],
        "client": "no_validation",
        "n_jobs": [Integral, None],
    }

    def __init__(
        self,
        estimator=None,
        n_estimators=10,
        *,
        perturbation=0.1,
        bootstrap="stratified",
        max_samples="auto",
        threshold="pooled_oob",
        member_margins="train",
        cv=5,
        objective="g_mean",
        candidates="midpoints",
        smoothing="silverman",
        tolerance=0.005,
        min_precision=0.0,
        class_weight=None,
        pos_label=None,
        n_neighbors=10,
        knn_method="auto",
        max_bag_draws=20,
        max_candidates=100_000,
        random_state=None,
        probability=False,
        param_grid=None,
        top_candidates=3,
        screen_members=None,
        screen_survivors=6,
        client=None,
        n_jobs=None,
    ):
        self.estimator = estimator
        self.n_estimators = n_estimators
        self.perturbation = perturbation
        self.bootstrap = bootstrap
        self.max_samples = max_samples
        self.threshold = threshold
        self.member_margins = member_margins
        self.cv = cv
        self.objective = objective
        self.candidates = candidates
        self.smoothing = smoothing
        self.tolerance = tolerance
        self.min_precision = min_precision
        self.class_weight = class_weight
        self.pos_label = pos_label
        self.n_neighbors = n_neighbors
        self.knn_method = knn_method
        self.max_bag_draws = max_bag_draws
        self.max_candidates = max_candidates
        self.random_state = random_state
        self.probability = probability
        self.param_grid = param_grid
        self.top_candidates = top_candidates
        self.screen_members = screen_members
        self.screen_survivors = screen_survivors
        self.client = client
        self.n_jobs = n_jobs

    def __setstate__(self, state):
        # models saved before these parameters existed
        super().__setstate__({"probability": False, "param_grid": None, "top_candidates": 3, "screen_members": None,
                              "screen_survivors": 6, "n_jobs": None, **state})

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, sample_weight=None, **fit_params):
        """Fit the members, as Dask tasks when a client is available, then the shift.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask.array.Array} of shape (n_samples, n_features)
            Training data. A Dask array with a client is fitted over its
            chunks on the workers, never brought into this process
            (:mod:`dimbsvm.svm.ensemble_chunks`; the same ensemble as fitted in
            memory).
        y : array-like of shape (n_samples,)
            Two classes, of any label type (a Dask array is brought here).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative row weights. Each member's base estimator is fitted
            with its bag's weights (a row drawn twice counts twice; a
            ``TypeError`` if the base takes none), and every threshold
            objective (the members' and the shared one) counts the weights of
            the rows it is searched on, as :class:`OTHRClassifier` does; so
            does ``probability=True``'s calibration. The bags are drawn from
            the unweighted rows. ``param_grid``'s settings are ranked by the
            weighted out-of-bag ROC-AUC. A Dask array ``X`` is then computed
            into this process. With metadata routing, the members' base
            estimators get it where they ask for it; the ensemble's own
            objectives always count it.
        **fit_params : dict
            With ``sklearn.set_config(enable_metadata_routing=True)``, routed
            to the members' base estimator's ``fit`` where it asks for them,
            row-aligned ones cut to each member's bag (``groups`` reaches an
            :class:`OTHRClassifier` member's group splitter this way;
            :mod:`dimbsvm.svm.routing`); refused without routing.

        Returns
        -------
        self : EnsembleOTHRClassifier
            The fitted ensemble.
        """
        effective_n_jobs(self.n_jobs)  # refused wherever the members run: a client's workers, processes or here
        base = default_estimator() if self.estimator is None else self.estimator
        routed = route_fit(self, base, sample_weight, fit_params)  # refused here, before any member task
        routes = routing_enabled()
        client = current_client(self.client)
        if client is not None and is_dask_collection(X) and hasattr(X, "chunks"):  # a Dask array
            unsupported = ("sample_weight" if sample_weight is not None else
                           "fit parameters" if fit_params else chunked_fit_unsupported(self))
            if unsupported is None:
                return fit_over_chunks(self, X, y, client)
            logger.warning("EnsembleOTHRClassifier: the Dask array is computed into this process (%s)", unsupported)
        X, y, positive = self._validate_training_data(X, y)
        if sample_weight is not None:
            sample_weight = check_sample_weight(
                sample_weight.compute() if is_dask_collection(sample_weight) else sample_weight, X,
                ensure_non_negative=True)
        self._resolve_bags(positive.size, int(np.count_nonzero(positive)))
        from dimbsvm.fold_data.one_fold import fit_as_one_fold

        # The members are tasks of the plan a job's fold runs (the estimator's fold hook; with screening, its two
        # rounds). In this process BLAS gets one thread, as a job run here and a one-thread worker do: a second
        # thread only spins on the members' small products (same results, a third more CPU).
        with in_order_threads() if client is None else contextlib.nullcontext():
            return fit_as_one_fold(self, X, y, client=client, n_jobs=self.n_jobs, label="ensemble members",
                                   sample_weight=sample_weight, fit_params=routed.estimator if routes else None)

    def _screens(self, n_settings=None) -> bool:
        """Whether ``fit`` screens the settings first (``screen_members`` takes effect).

        ``n_settings``: the settings of ``param_grid`` (counted here when not given).
        """
        if self.param_grid is None or self.screen_members is None or self.screen_members >= self.n_estimators:
            return False
        return self.screen_survivors < (self._n_settings() if n_settings is None else n_settings)

    def _n_settings(self) -> int:
        base = default_estimator() if self.estimator is None else clone(self.estimator)
        return len(candidate_settings(self.param_grid, base))

    @available_if(lambda self: self.probability)
    def predict_proba(self, X):
        """Class probabilities (``classes_`` order): Platt's sigmoid of ``decision_function``.

        Only with ``probability=True``; fitted on the out-of-bag rows. As
        with ``SVC(probability=True)``, ``predict`` keeps its own rule (the
        tuned shift, where the minority's probability is usually below 0.5),
        so ``argmax(predict_proba)`` and ``predict`` can differ by design.
        """
        return self._platt_probabilities(X)

    def _member_margins(self, X):
        return np.stack([member.shifted_margin(X) for member in self.members_])

    def _shifted_margin(self, X):
        return self._member_margins(X).mean(axis=0)

    def predict(self, X):
        """Predict class labels: the sign of the shifted mean margin, or the members' vote.

        With ``threshold="pooled_oob"``, ``pos_label_`` where the mean shifted
        margin is > 0 (``decision_function`` agrees). With ``threshold="member"``,
        the members' majority vote; a tied vote goes to the minority class.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        return self._predicted(self._member_margins(self._validate_X(X)))

    def predict_and_decision(self, X):
        """``(predict(X), decision_function(X))`` from one pass of every member over ``X``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        scores : ndarray of shape (n_samples,)
            As :meth:`decision_function`.
        """
        margins = self._member_margins(self._validate_X(X))
        return self._predicted(margins), self._oriented(margins.mean(axis=0))

    def _predicted(self, margins):
        """The labels :meth:`predict` gives for the members' shifted margins (one row per member)."""
        if getattr(self, "_pooled", False):
            return self._label(margins.mean(axis=0) > 0)
        votes = (margins > 0).sum(axis=0)
        return self._label(2 * votes >= len(self.members_))
