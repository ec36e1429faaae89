"""EnSVM-OTHR: bagged SVM-OTHR members, with one shared or per-member perturbed shifts.

:class:`EnsembleOTHRClassifier` draws one seed per member up front, hands one
:func:`~dimbsvm.svm.members.fit_member` call per member to the engine (in
this process, or as Dask tasks when a ``distributed`` client is given or
active), and combines the members: one shift shared by all, searched on their
pooled out-of-bag margins, or the paper's perturbed shift per member and a
majority vote. Each member is rebuilt from its seed alone, so the fitted
ensemble is the same whatever runs it. Member fitting lives in
:mod:`dimbsvm.svm.members` (its names are re-exported here), the shared
shift's search in :mod:`dimbsvm.svm.shared_threshold`.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import replace
from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context, clone
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import HasMethods, Interval, RealNotInt, StrOptions
from sklearn.utils.metaestimators import available_if

from dimbsvm._counts import ClassCounts
from dimbsvm.parallel import ClientParamMixin, current_client, map_tasks
from dimbsvm.parallel.policy import in_order_threads
from dimbsvm.graph.knn import KNN_METHODS
from dimbsvm.svm._base import (
    _ShiftedMarginClassifier,
    binary_classes,
    default_estimator,
    positive_label,
)
from dimbsvm.svm.bagging import BOOTSTRAPS, draw_bag
from dimbsvm.svm.calibration import platt_fit
from dimbsvm.svm.grid_members import (
    ScreeningPlan,
    candidate_settings,
    keep_best_settings,
    screen_survivors,
    screened_search_results,
)
# Re-exported: models saved by dimbsvm 0.1.0 name ``dimbsvm.svm.ensemble.OTHRMember``
# (skops stores the module path), and code imported fit_member from here.
from dimbsvm.svm.members import MEMBER_MARGINS, MemberPlan, MemberSpec, OTHRMember, fit_member, pooled_oob_margins
from dimbsvm.svm.othr import SEARCH_CONSTRAINTS
from dimbsvm.svm.scaled_defaults import LARGE_N
from dimbsvm.svm.shared_threshold import search_shared_shift, with_shared_shift

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

_MAX_SEED = np.iinfo(np.int32).max


class EnsembleOTHRClassifier(ClientParamMixin, _ShiftedMarginClassifier):
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

    Members are fitted as Dask tasks when ``client`` is given or a
    ``distributed`` client is active (not from inside a Dask task): ``X`` and
    ``y`` are sent once and each task calls :func:`fit_member` with its seed
    (:func:`dimbsvm.parallel.map_tasks`). Otherwise they are
    fitted in-process, one after the other. The pooled search runs once, after all
    members, on the client. Seeds are drawn once from ``random_state``, so
    the fitted ensemble is identical either way and for any number of workers.

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
    objective : {"g_mean", "f_measure", "g_f_mean"}, default="g_mean"
        The criterion the shift maximises (see :class:`OTHRClassifier`).
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

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y):
        """Fit the members, as Dask tasks when a client is available, then the shift.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Two classes, of any label type.

        Returns
        -------
        self : EnsembleOTHRClassifier
            The fitted ensemble.
        """
        X, y, positive = self._validate_training_data(X, y)
        self._resolve_bags(positive.size, int(np.count_nonzero(positive)))
        # Members run on the given or current client, one task each (X and y sent once),
        # else on n_jobs processes or here, one after the other.
        client = current_client(self.client)
        # In this process BLAS gets one thread, as a job run here and a one-thread worker do: a second
        # thread only spins on the members' small products (same results, a third more CPU).
        with in_order_threads() if client is None else contextlib.nullcontext():
            if self._screens():
                return self._fit_screened(X, y, positive, client)
            seeds, specs = self._member_tasks()
            members = _fit_members(X, y, seeds, specs, client, self.n_jobs)
            self.seeds_ = seeds
            return self._set_members(X, positive, members)

    def _fit_screened(self, X, y, positive, client):
        """Successive halving in two rounds: a few members for every setting, all of them for the best."""
        plan = self._screening_plan()
        screened = _fit_members(X, y, *zip(*plan.first_round()), client, self.n_jobs)
        screen = screen_survivors(plan.settings, screened, positive, plan.n_survivors)
        added = _fit_members(X, y, *zip(*plan.second_round(screen.survivors)), client, self.n_jobs)
        return self._assemble_screened(X, positive, plan, screened, added, screen)

    def plan_screening(self, y) -> ScreeningPlan:
        """What :meth:`fit` does in its two rounds, from the labels alone (with ``screen_members``).

        For drivers that fit members elsewhere (the fold engine): fit
        ``plan.first_round()``, screen them with ``screen =
        screen_survivors(plan.settings, screened, y == pos_label_, plan.n_survivors)``,
        fit ``plan.second_round(screen.survivors)``, then :meth:`fit_from_screened`;
        this gives the ensemble ``fit(X, y)`` gives.

        Raises
        ------
        ValueError
            Without screening (:meth:`plans_members_up_front`: use :meth:`plan_members`).
        """
        self._validate_params()
        self._resolve_bags(*self._class_sizes(y))
        if not self._screens():
            raise ValueError("this ensemble does not screen its settings: its members are planned up front "
                             "(plan_members)")
        return self._screening_plan()

    def fit_from_screened(self, X, y, plan, screened, added, screen):
        """Finish fitting from the members of :meth:`plan_screening`'s two rounds.

        Parameters
        ----------
        X : ndarray or row handle of shape (n_samples, n_features)
            The training rows (read only when the shared shift needs rows).
        y : array-like of shape (n_samples,)
        plan : ScreeningPlan
        screened, added : list of OTHRMember
            The members of ``plan.first_round()`` and of
            ``plan.second_round(screen.survivors)``, in order.
        screen : Screen
            :func:`~dimbsvm.svm.grid_members.screen_survivors` of ``screened``.

        Returns
        -------
        self : EnsembleOTHRClassifier
        """
        positive = self._prepare_assembly(X, y)
        return self._assemble_screened(X, positive, plan, list(screened), list(added), screen)

    def _screening_plan(self) -> ScreeningPlan:
        seeds, settings, specs = self._grid_specs()
        return ScreeningPlan(seeds, settings, tuple(specs), int(self.screen_members), int(self.screen_survivors))

    def _assemble_screened(self, X, positive, plan, screened, added, screen):
        survivors = screen.survivors
        self.seeds_ = np.tile(plan.seeds, len(survivors))
        self._set_members(X, positive, plan.survivor_members(screened, added, survivors),
                          settings=[plan.settings[i] for i in survivors])
        self.search_results_ = screened_search_results(plan.settings, screen, self.search_results_)
        return self

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

    def plans_members_up_front(self) -> bool:
        """Whether every member is known from the labels alone (:meth:`plan_members`).

        ``False`` when ``screen_members`` screens the settings: which
        settings get the second round's members depends on the first round's
        out-of-bag margins (:meth:`plan_screening`).
        """
        return not self._screens()

    def plan_members(self, y):
        """What :meth:`fit` would hand each member, from the labels alone.

        For drivers that fit members elsewhere (a job fans out one task per
        (repeat, fold, member)): ``plan.members[i].fit(X, y, plan.seeds[i])``
        for each member, then :meth:`fit_from_members` with ``plan.seeds``,
        gives the same ensemble as ``fit(X, y)``.

        Parameters
        ----------
        y : array-like of shape (n_samples,) or ClassCounts
            Training labels, two classes, or their counts alone (the members
            are planned from the counts: a driver need not hold the labels).

        Returns
        -------
        plan : MemberPlan
            One seed per member, drawn from ``random_state`` as :meth:`fit` does
            (with ``param_grid``: the same seeds for every setting, setting by
            setting), and each member's :class:`~dimbsvm.svm.members.MemberSpec`.
        """
        self._validate_params()
        self._resolve_bags(*self._class_sizes(y))
        if self._screens():
            raise ValueError("screen_members chooses the second round's settings on the first round's out-of-bag "
                             "margins: the members cannot be planned before fit (plans_members_up_front() is False)")
        seeds, specs = self._member_tasks()
        return MemberPlan(np.asarray(seeds), tuple(specs))

    def pools_out_of_bag(self) -> bool:
        """Whether the out-of-bag margins can be pooled over all members at once (a shared shift, no grid)."""
        return self.threshold == "pooled_oob" and self.param_grid is None

    def fit_from_members(self, X, y, members, seeds, *, pooled_margins=None, shared_shift=None):
        """Finish fitting from members fitted by :func:`fit_member` (see :meth:`plan_members`).

        Parameters
        ----------
        X : ndarray or row handle of shape (n_samples, n_features)
            The training rows the members drew from (preprocessed). Read only
            when the shared shift needs rows: ``candidates="othr"`` or no
            usable out-of-bag rows. A handle is read a block at a time.
        y : array-like of shape (n_samples,) or ClassCounts
            The labels, or with ``shared_shift`` (and no ``param_grid``)
            their :class:`~dimbsvm._counts.ClassCounts`: nothing then is read
            row by row.
        members : list of OTHRMember
            In seed order.
        seeds : ndarray of int
            The seeds the members were fitted with (with ``param_grid``: one
            per (setting, member), setting by setting, as :meth:`plan_members`
            returns them).
        pooled_margins : tuple of ndarray, default=None
            ``(margins, counts)`` as :func:`pooled_oob_margins` returns them,
            computed by the caller (members fitted with ``keep_oob="bag"``);
            by default they are pooled from the members' ``oob_margins``.
            A third entry may give ``np.argsort(margins, kind="stable")``
            (NaN last), which the shared search then checks and uses instead
            of sorting the margins itself.
        shared_shift : SharedShift, default=None
            The shared shift already searched by the caller on the pooled
            out-of-bag margins, exactly as the search here would find it
            (:mod:`dimbsvm.svm.range_threshold`, without ``probability``, which
            needs the margins); it is set instead of searching.

        Returns
        -------
        self : EnsembleOTHRClassifier
        """
        if isinstance(y, ClassCounts) and (shared_shift is None or self.param_grid is not None):
            raise ValueError("members are assembled from class counts only with the shared shift searched "
                             "already and no param_grid: the labels are needed")
        positive = self._prepare_assembly(X, y)
        self.seeds_ = np.asarray(seeds)
        return self._set_members(X, positive, list(members), pooled_margins, shared_shift)

    def _prepare_assembly(self, X, y):
        """Classes, bag size and feature count for assembling members fitted elsewhere; the minority rows
        (``None`` for labels given by their :class:`~dimbsvm._counts.ClassCounts`)."""
        if isinstance(y, ClassCounts):
            positive = None
            self._resolve_bags(*self._class_sizes(y))
        else:
            positive = self._set_classes(y)
            self._resolve_bags(positive.size, int(np.count_nonzero(positive)))
        self.n_features_in_ = int(X.shape[1])
        return positive

    def _scaled_defaults(self, n_samples, n_minority):
        """``max_samples="auto"``: bags of ``LARGE_N`` rows once ``None``'s bag would be larger."""
        if self.max_samples != "auto":
            return {}
        default_bag = 2 * n_minority if self.bootstrap == "balanced" else n_samples
        return {"max_samples": LARGE_N} if default_bag > LARGE_N else {}

    def _resolve_bags(self, n_samples, n_minority):
        """Set ``max_samples_`` (and ``scaled_defaults_``) for training labels of these sizes."""
        scaled = self._resolve_defaults(int(n_samples), int(n_minority))
        self.max_samples_ = scaled.get("max_samples", None if self.max_samples == "auto" else self.max_samples)

    def _set_classes(self, y):
        y = np.asarray(y)
        self._learn_classes(y)
        return y == self.pos_label_

    def _learn_classes(self, y):
        """Set ``classes_`` and ``pos_label_`` from labels or their :class:`~dimbsvm._counts.ClassCounts`;
        the classes and their counts."""
        classes, counts = binary_classes(y, type(self).__name__)
        self.classes_ = classes
        self.pos_label_ = positive_label(classes, counts, self.pos_label)
        return classes, counts

    def _class_sizes(self, y):
        """Set ``classes_`` and ``pos_label_``; ``(n_samples, n_minority)`` of the labels (or their counts)."""
        classes, counts = self._learn_classes(y if isinstance(y, ClassCounts) else np.asarray(y))
        return int(counts.sum()), int(counts[classes == self.pos_label_][0])

    def _threshold_search(self):
        return dict(
            objective=self.objective,
            candidates=self.candidates,
            smoothing=self.smoothing,
            tolerance=self.tolerance,
            min_precision=self.min_precision,
        )

    def _member_tasks(self):
        """Seeds and :class:`MemberSpec` of every member to fit, in order."""
        seeds = check_random_state(self.random_state).randint(_MAX_SEED, size=self.n_estimators)
        if self.param_grid is None:
            return seeds, [self._member_params()] * len(seeds)
        seeds, _, specs = self._grid_specs(seeds)
        return np.tile(seeds, len(specs)), [spec for spec in specs for _ in seeds]

    def _grid_specs(self, seeds=None):
        """The members' seeds, ``param_grid``'s settings and one :class:`MemberSpec` per setting."""
        if self.threshold != "pooled_oob":
            raise ValueError("param_grid ranks settings on pooled out-of-bag margins: it needs "
                             f"threshold='pooled_oob', got threshold={self.threshold!r}")
        if seeds is None:
            seeds = check_random_state(self.random_state).randint(_MAX_SEED, size=self.n_estimators)
        base = self._member_params()
        settings = candidate_settings(self.param_grid, base.estimator)
        return seeds, settings, [replace(base, estimator=clone(base.estimator).set_params(**s)) for s in settings]

    def _member_params(self):
        """The :class:`MemberSpec` shared by every member (all but the seed)."""
        estimator = default_estimator() if self.estimator is None else clone(self.estimator)
        if self.class_weight is not None:
            if "class_weight" not in estimator.get_params():
                raise ValueError(
                    f"class_weight={self.class_weight!r} needs a base estimator with a "
                    f"class_weight parameter; {type(estimator).__name__} has none."
                )
            estimator.set_params(class_weight=self.class_weight)
        pooled = self.threshold == "pooled_oob"
        return MemberSpec(
            pos_label=self.pos_label_,
            estimator=estimator,
            bootstrap=self.bootstrap,
            max_samples=self.max_samples_,
            margins="none" if pooled else self.member_margins,
            cv=self.cv,
            perturbation=0.0 if pooled else self.perturbation,
            n_neighbors=self.n_neighbors,
            knn_method=self.knn_method,
            max_bag_draws=self.max_bag_draws,
            keep_oob=pooled,
            **self._threshold_search(),
        )

    def _set_members(self, X, positive, members, pooled_margins=None, shared_shift=None, settings=None):
        """Finish fitting from fitted members: the shared shift (if pooled) and the attributes.

        ``settings``: the grid settings the members belong to, setting by
        setting (default: all of ``param_grid``'s).
        """
        if self.probability and self.threshold != "pooled_oob":
            raise ValueError("probability=True calibrates the pooled out-of-bag margins: it needs "
                             f"threshold='pooled_oob', got threshold={self.threshold!r}")
        for stale in ("threshold_", "candidates_", "threshold_margins_", "platt_", "best_params_",
                      "search_results_"):
            self.__dict__.pop(stale, None)
        if self.param_grid is not None:
            if pooled_margins is not None:  # pooled over every setting's members: no ranking possible
                raise ValueError("param_grid ranks each setting on its own members' out-of-bag margins; "
                                 "margins pooled over all members cannot be used (pools_out_of_bag() is False)")
            members = self._keep_best_settings(positive, members, settings)
        self._pooled = self.threshold == "pooled_oob"
        if self._pooled:
            members = self._fit_shared_threshold(X, positive, members, self._threshold_search(),
                                                 pooled_margins, shared_shift)
        self.members_ = members
        self.estimators_ = [member.estimator for member in self.members_]
        self.thresholds_ = np.array([member.threshold for member in self.members_])
        self.optimal_thresholds_ = np.array(
            [member.optimal_threshold for member in self.members_]
        )
        return self

    def _keep_best_settings(self, positive, members, settings=None):
        """The members of the ``top_candidates`` settings of best out-of-bag ROC-AUC, on one scale."""
        if settings is None:
            settings = candidate_settings(self.param_grid, self._member_params().estimator)
        kept, members, self.search_results_ = keep_best_settings(settings, members, positive, self.top_candidates)
        self.best_params_ = [settings[i] for i in kept]
        per_setting = len(self.seeds_) // len(settings)
        self.seeds_ = np.concatenate([self.seeds_[i * per_setting:(i + 1) * per_setting] for i in kept])
        return members

    def _fit_shared_threshold(self, X, positive, members, search, pooled_margins=None, shift=None):
        """Search one shift on the pooled out-of-bag margins (unless given); set it in every member."""
        if shift is None:
            shift = search_shared_shift(X, positive, members, search, pooled_margins=pooled_margins,
                                        n_neighbors=self.n_neighbors, knn_method=self.knn_method,
                                        random_state=int(self.seeds_[0]), max_candidates=self.max_candidates)
        elif self.probability:
            raise ValueError("probability=True calibrates on the pooled margins: the shift is searched here")
        self.threshold_margins_, self.threshold_, self.candidates_ = shift.margins_used, shift.theta, shift.table
        if self.probability:
            if self.threshold_margins_ != "oob":  # the training rows' own margins would make it overconfident
                raise ValueError("probability=True needs out-of-bag rows of both classes to calibrate on; "
                                 "these members' bags left none of one class out (use more rows or members)")
            # the shifted margin decision_function returns, on the rows each member did not see
            self.platt_ = platt_fit(shift.margins + self.threshold_, positive[shift.rows])
        return with_shared_shift(members, self.threshold_, "pooled_" + self.threshold_margins_)

    def n_member_fits(self, n_settings=None) -> int:
        """How many members a fit fits: ``n_estimators`` per setting, fewer with ``screen_members``.

        ``n_settings``: the settings of ``param_grid`` (counted here when not given).
        """
        if self.param_grid is None:
            return int(self.n_estimators)
        if n_settings is None:
            n_settings = self._n_settings()
        if not self._screens(n_settings):
            return int(self.n_estimators) * n_settings
        return int(self.screen_members) * n_settings + (self.n_estimators - self.screen_members) * self.screen_survivors

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


def _fit_members(X, y, seeds, specs, client, n_jobs) -> list:
    """``fit_member`` for every (seed, spec): one task each on ``client``, else on ``n_jobs`` processes or here."""
    if client is not None:
        logger.info("fitting %d members on %s", len(seeds), client)
    return list(map_tasks(fit_member, [dict(seed=int(seed), **spec.options()) for seed, spec in zip(seeds, specs)],
                          client=client, shared={"X": X, "y": y}, label="ensemble members", n_jobs=n_jobs))
