"""EnSVM-OTHR: bagged SVM-OTHR members with a perturbed shift and a majority vote.

:func:`fit_member` fits one member from arrays, a seed and (optionally) the
rows it may draw from, and returns a small :class:`OTHRMember`. It is the unit
of work: :class:`EnsembleOTHRClassifier` calls it in-process, or submits one
Dask task per member when a ``distributed`` client is given or active. Seeds
are drawn once, up front, and each member is rebuilt from its seed alone, so
the fitted ensemble is the same whatever runs it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context, clone
from sklearn.model_selection import StratifiedGroupKFold
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import HasMethods, Interval, RealNotInt, StrOptions

from dimbsvm.graph.knn import KNN_METHODS
from dimbsvm.svm.othr import (
    _ShiftedMarginClassifier,
    default_estimator,
    margin_sign,
    out_of_fold_margins,
    signed_margins,
)
from dimbsvm.svm.threshold import OBJECTIVES, othr_threshold

__all__ = [
    "BOOTSTRAPS",
    "MEMBER_MARGINS",
    "EnsembleOTHRClassifier",
    "OTHRMember",
    "draw_bag",
    "fit_member",
]

logger = logging.getLogger(__name__)

#: How a bag is drawn: ``"plain"`` (the paper), ``"stratified"``, ``"balanced"``.
BOOTSTRAPS = ("plain", "stratified", "balanced")

#: Where a member's threshold is searched: ``"train"`` (the paper), ``"oob"``, ``"cv"``.
MEMBER_MARGINS = ("train", "oob", "cv")

_MAX_SEED = np.iinfo(np.int32).max


@dataclass(frozen=True)
class OTHRMember:
    """One fitted member of an :class:`EnsembleOTHRClassifier`.

    Attributes
    ----------
    estimator : estimator object
        The base classifier fitted on the member's bag.
    margin_sign : float
        +1 or -1: the sign that makes ``estimator.decision_function`` positive
        on the minority side.
    threshold : float
        The perturbed shift ``theta' = theta_opt * (1 + perturbation * u)`` (eq. 25).
    optimal_threshold : float
        ``theta_opt``, the member's OTHR shift before perturbation.
    n_draws : int
        Bags drawn until one held both classes (1 = no redraw).
    margins : str
        The margins the shift was searched on: ``"train"``, ``"oob"`` or
        ``"cv"`` (``"train"`` when the requested margins were not possible).
    """

    estimator: object
    margin_sign: float
    threshold: float
    optimal_threshold: float
    n_draws: int
    margins: str

    def shifted_margin(self, X):
        """``h(x) + theta'``, positive on the minority side."""
        return signed_margins(self.estimator, X, self.margin_sign) + self.threshold


def draw_bag(positive, random_state, *, bootstrap="plain", max_samples=None, max_draws=20):
    """Draw one bag of row numbers that holds both classes.

    Parameters
    ----------
    positive : ndarray of bool of shape (n_samples,)
        True for minority rows.
    random_state : RandomState
        Consumed in a fixed order, so a seed gives one bag.
    bootstrap : {"plain", "stratified", "balanced"}, default="plain"
        ``"plain"``: rows drawn with replacement regardless of class (the
        paper); a bag that misses a class is redrawn. ``"stratified"``: each
        class bootstrapped separately, keeping the class counts.
        ``"balanced"``: the minority bootstrapped and as many majority rows
        drawn without replacement (with replacement if there are too few), so
        every bag is balanced and small.
    max_samples : int, float or None, default=None
        Bag size. ``None``: ``n_samples`` (plain), the class counts
        (stratified), twice the minority count (balanced). A float in (0, 1]
        scales that size (per class for stratified and balanced). An int is
        the total bag size (split across classes in proportion for
        stratified, in halves for balanced).
    max_draws : int, default=20
        Attempts before giving up (only ``"plain"`` can miss a class).

    Returns
    -------
    bag : ndarray of shape (n_bag,), dtype int64
        Row numbers, possibly repeated.
    n_draws : int
        Attempts used.

    Raises
    ------
    ValueError
        If ``max_draws`` bags all missed a class, or ``positive`` lacks a class.

    Examples
    --------
    >>> import numpy as np
    >>> positive = np.array([True, True, False, False, False, False])
    >>> bag, n_draws = draw_bag(positive, np.random.RandomState(0), bootstrap="balanced")
    >>> positive[bag].tolist()
    [True, True, False, False]
    """
    positive = np.asarray(positive, dtype=bool)
    minority, majority = np.flatnonzero(positive), np.flatnonzero(~positive)
    n_samples, n_minority = positive.size, minority.size
    if n_minority == 0 or n_minority == n_samples:
        raise ValueError("Bags need training rows of both classes.")
    if bootstrap == "plain":
        if isinstance(max_samples, Integral):
            size = int(max_samples)
        else:
            size = _scaled(max_samples, n_samples)
        for attempt in range(1, max_draws + 1):
            bag = random_state.randint(0, n_samples, size=size).astype(np.int64)
            n_positive = int(positive[bag].sum())
            if 0 < n_positive < size:
                return bag, attempt
            logger.debug(
                "bag %d of %d rows has %d minority rows; redrawing", attempt, size, n_positive
            )
        raise ValueError(
            f"No bag of {size} rows drawn with bootstrap='plain' held both classes in "
            f"{max_draws} attempts ({n_minority} minority rows of {n_samples}); use "
            "bootstrap='stratified' or 'balanced', a larger max_samples, or more max_bag_draws."
        )
    if bootstrap == "stratified":
        if isinstance(max_samples, Integral):
            n_pos = max(1, round(max_samples * n_minority / n_samples))
            sizes = (n_pos, max(1, max_samples - n_pos))
        else:
            sizes = (_scaled(max_samples, n_minority), _scaled(max_samples, majority.size))
        from_minority = minority[random_state.randint(0, n_minority, size=sizes[0])]
        from_majority = majority[random_state.randint(0, majority.size, size=sizes[1])]
        return np.concatenate([from_minority, from_majority]), 1
    if bootstrap == "balanced":
        if isinstance(max_samples, Integral):
            size = max(1, max_samples // 2)
        else:
            size = _scaled(max_samples, n_minority)
        from_minority = minority[random_state.randint(0, n_minority, size=size)]
        replace = size > majority.size
        from_majority = random_state.choice(majority, size=size, replace=replace)
        return np.concatenate([from_minority, from_majority]).astype(np.int64), 1
    raise ValueError(f"bootstrap must be one of {BOOTSTRAPS}; got {bootstrap!r}.")


def _scaled(max_samples, default):
    """A bag (or per-class) size: ``default``, or ``default`` scaled by a float."""
    if max_samples is None:
        return default
    return max(1, round(float(max_samples) * default))


def fit_member(
    X,
    y,
    seed,
    *,
    pos_label,
    rows=None,
    estimator=None,
    bootstrap="plain",
    max_samples=None,
    margins="train",
    cv=5,
    objective="g_mean",
    perturbation=0.1,
    n_neighbors=10,
    knn_method="auto",
    max_bag_draws=20,
):
    """Fit one EnSVM-OTHR member from arrays and a seed.

    Draws a bag (:func:`draw_bag`) of ``rows``, fits a clone of ``estimator``
    on it, searches the OTHR shift ``theta_opt`` on the chosen margins and
    perturbs it: ``theta' = theta_opt * (1 + perturbation * u)``,
    ``u ~ U[-1, 1]`` (eq. 25). Everything random comes from ``seed``, so the
    same arguments give the same member wherever the function runs.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        Validated training data (possibly more rows than the member may use).
    y : ndarray of shape (n_samples,)
        Labels, two classes.
    seed : int
        The member's seed.
    pos_label : object
        The minority (positive) class.
    rows : ndarray of int, default=None
        Rows of ``X`` the member draws from (e.g. a CV fold's training rows);
        ``None`` means all.
    estimator : estimator object, default=None
        Base classifier template, cloned; every ``random_state`` parameter of
        the clone is set to ``seed``. ``None``: :func:`default_estimator`.
    bootstrap, max_samples
        See :func:`draw_bag`.
    margins : {"train", "oob", "cv"}, default="train"
        ``"train"``: the bag's own margins (the paper). ``"oob"``: the margins
        of the rows not in the bag. ``"cv"``: out-of-fold margins of the bag
        (``cv`` stratified folds, copies of a row kept in one fold). Falls back
        to ``"train"`` when the out-of-bag rows miss a class or the bag has
        fewer than 2 distinct minority rows.
    cv : int, default=5
        Folds for ``margins="cv"``.
    objective : {"g_mean", "f_measure"}, default="g_mean"
    perturbation : float, default=0.1
        The paper's perturbation size (0 disables it).
    n_neighbors, knn_method
        See :func:`dimbsvm.svm.threshold.farther_majority_neighbours`.
    max_bag_draws : int, default=20
        See ``max_draws`` of :func:`draw_bag`.

    Returns
    -------
    member : OTHRMember

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> X, y = make_classification(n_samples=100, weights=[0.8], random_state=0)
    >>> member = fit_member(X, y, 7, pos_label=1)
    >>> member.n_draws, member.margins
    (1, 'train')
    """
    random_state = np.random.RandomState(seed)
    if rows is not None:
        X, y = X[rows], y[rows]
    positive = np.asarray(y == pos_label)
    bag, n_draws = draw_bag(
        positive,
        random_state,
        bootstrap=bootstrap,
        max_samples=max_samples,
        max_draws=max_bag_draws,
    )
    u = random_state.uniform(-1.0, 1.0)
    template = clone(default_estimator() if estimator is None else estimator)
    _set_random_states(template, seed)
    X_bag, y_bag, positive_bag = X[bag], y[bag], positive[bag]
    fitted = clone(template).fit(X_bag, y_bag)
    sign = margin_sign(fitted, pos_label, np.unique(y_bag))

    used, X_eval, positive_eval, margins_eval = "train", X_bag, positive_bag, None
    if margins == "oob":
        out_of_bag = np.setdiff1d(np.arange(positive.size), bag)
        n_oob_positive = int(positive[out_of_bag].sum())
        if 0 < n_oob_positive < out_of_bag.size:
            used, X_eval, positive_eval = "oob", X[out_of_bag], positive[out_of_bag]
            margins_eval = signed_margins(fitted, X_eval, sign)
    elif margins == "cv":
        n_distinct = np.unique(bag[positive_bag]).size
        if n_distinct >= 2:
            folds = StratifiedGroupKFold(
                n_splits=min(cv, n_distinct), shuffle=True, random_state=seed
            )
            splits = list(folds.split(X_bag, y_bag, groups=bag))
            if all(0 < positive_bag[train].sum() < train.size for train, _ in splits):
                used = "cv"
                margins_eval = out_of_fold_margins(
                    template, X_bag, y_bag, pos_label, np.unique(y_bag), splits
                )
    if margins_eval is None:
        margins_eval = signed_margins(fitted, X_bag, sign)
    if used != margins:
        logger.debug("member %d: no %s margins possible; searched on train margins", seed, margins)

    theta_opt, _ = othr_threshold(
        X_eval,
        positive_eval,
        margins_eval,
        objective=objective,
        n_neighbors=n_neighbors,
        method=knn_method,
        random_state=seed,
    )
    theta = theta_opt * (1.0 + perturbation * u)  # eq. 25
    return OTHRMember(
        estimator=fitted,
        margin_sign=sign,
        threshold=float(theta),
        optimal_threshold=float(theta_opt),
        n_draws=n_draws,
        margins=used,
    )


def _set_random_states(estimator, seed):
    """Set every ``random_state`` parameter of ``estimator`` (nested ones too) to ``seed``."""
    names = [
        name
        for name in estimator.get_params(deep=True)
        if name == "random_state" or name.endswith("__random_state")
    ]
    if names:
        estimator.set_params(**dict.fromkeys(names, int(seed)))


def _client_for(client):
    """The client to fan out on: ``client``, else the active one, else None.

    Inside a Dask task (e.g. an ensemble fitted within a job's fold task) the
    members are fitted in-process: submitting tasks from a task and waiting
    for them can starve a worker of threads.
    """
    if client is None and _inside_dask_task():
        return None
    from dimbsvm.distributed.client import current_client

    return current_client(client)


def _inside_dask_task():
    try:
        from distributed import get_worker

        get_worker()
    except (ImportError, ValueError):
        return False
    return True


class EnsembleOTHRClassifier(_ShiftedMarginClassifier):
    """EnSVM-OTHR: bagging of SVM-OTHR members with a perturbed shift.

    Each member draws a bag, fits the base classifier on it, searches its OTHR
    shift ``theta_opt`` (see :class:`OTHRClassifier`) and perturbs it to
    ``theta' = theta_opt * (1 + perturbation * u)``, ``u ~ U[-1, 1]`` per
    member (eq. 25). ``predict`` is the members' majority vote, ties going to
    the minority class; ``decision_function`` is the mean shifted margin (so
    ROC-AUC is available) and can disagree with the vote near the boundary.

    **The paper's exact algorithm** is ``bootstrap="plain"``,
    ``member_margins="train"``, ``perturbation=0.1``, ``objective="g_mean"``,
    ``class_weight=None`` -- the current defaults. The other settings are
    refinements for where the literal algorithm is weak (plain bags of very
    imbalanced data hold few minority rows, and a threshold tuned on the
    rows the SVM was trained on is optimistic); the recommended
    combination will become the default once benchmarked.

    Members are fitted as Dask tasks when ``client`` is given or a
    ``distributed`` client is active (:func:`dimbsvm.distributed.current_client`;
    not from inside a Dask task): ``X`` and ``y`` are scattered once and each
    task calls :func:`fit_member` with its seed (a failed task is retried, see
    :func:`dimbsvm.distributed.run_tasks`). Otherwise they are fitted
    in-process, one after the other.
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
        Relative size of the random perturbation of each member's shift (eq. 25).
    bootstrap : {"plain", "stratified", "balanced"}, default="plain"
        How bags are drawn (see :func:`draw_bag`): rows with replacement
        (the paper; a bag missing a class is redrawn), per class with
        replacement keeping the class counts, or balanced (minority
        bootstrapped, as many majority rows drawn without replacement).
    max_samples : int, float or None, default=None
        Bag size (see :func:`draw_bag`).
    member_margins : {"train", "oob", "cv"}, default="train"
        Where each member's threshold is searched: its bag (the paper), its
        out-of-bag rows, or out-of-fold margins within its bag.
    cv : int, default=5
        Folds for ``member_margins="cv"``.
    objective : {"g_mean", "f_measure"}, default="g_mean"
        The criterion each member's threshold maximises.
    class_weight : dict, "balanced" or None, default=None
        Set as the base classifier's ``class_weight`` (which it must have),
        computed per bag; ``None`` leaves the base classifier as given.
    pos_label : int, float, bool or str, default=None
        The minority (positive) class; ``None`` takes the least frequent
        training class (``classes_[1]`` on a tie).
    n_neighbors : int, default=10
        First-round neighbours of the threshold search (work, not result).
    knn_method : {"auto", "exact", "pynndescent"}, default="auto"
        Neighbour search method; ``"pynndescent"`` is approximate.
    max_bag_draws : int, default=20
        Attempts to draw a bag holding both classes before a ``ValueError``.
    random_state : int, RandomState instance or None, default=None
        Draws the members' seeds.
    client : distributed.Client or None, default=None
        Client to fit members on; ``None`` uses the active client if any. It
        is kept only as this parameter (the members hold no reference to it)
        and is dropped when the model is pickled.

    Attributes
    ----------
    members_ : list of OTHRMember
        The fitted members (base classifier, sign, shifts, draws).
    estimators_ : list of estimator objects
        The members' fitted base classifiers.
    thresholds_ : ndarray of shape (n_estimators,)
        Perturbed shifts ``theta'`` of the members.
    optimal_thresholds_ : ndarray of shape (n_estimators,)
        Their shifts ``theta_opt`` before perturbation.
    seeds_ : ndarray of shape (n_estimators,)
        The members' seeds; ``fit_member(X, y, seed, ...)`` rebuilds a member.
    classes_ : ndarray of shape (2,)
        The class labels.
    pos_label_ : object
        The minority (positive) class.
    n_features_in_ : int
        Number of features seen during fit.

    See Also
    --------
    OTHRClassifier : A single member without bagging or perturbation.

    Notes
    -----
    Binary only: a multi-class target raises ``ValueError``; wrap the
    classifier in :class:`sklearn.multiclass.OneVsRestClassifier`.

    The perturbation is relative to ``theta_opt``. When the base SVM
    collapses onto the majority class (nearly all training margins at -1, as
    on KEEL abalone19 with ``C=1``), ``theta_opt`` lies in a very narrow gap
    of the margins and a +-10 % perturbation moves every member out of it, so
    members predict all rows minority or none; ``perturbation=0`` avoids this.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> X, y = make_classification(n_samples=200, weights=[0.9], random_state=0)
    >>> ensemble = EnsembleOTHRClassifier(n_estimators=5, random_state=0).fit(X, y)
    >>> ensemble.thresholds_.shape
    (5,)
    >>> ensemble.predict(X[:3])
    array([0, 0, 0])
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "decision_function"]), None],
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "perturbation": [Interval(Real, 0, 1, closed="both")],
        "bootstrap": [StrOptions(set(BOOTSTRAPS))],
        "max_samples": [
            None,
            Interval(Integral, 1, None, closed="left"),
            Interval(RealNotInt, 0, 1, closed="right"),
        ],
        "member_margins": [StrOptions(set(MEMBER_MARGINS))],
        "cv": [Interval(Integral, 2, None, closed="left")],
        "objective": [StrOptions(set(OBJECTIVES))],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "pos_label": [Real, str, "boolean", None],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "knn_method": [StrOptions(set(KNN_METHODS))],
        "max_bag_draws": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "client": "no_validation",
    }

    def __init__(
        self,
        estimator=None,
        n_estimators=10,
        *,
        perturbation=0.1,
        bootstrap="plain",
        max_samples=None,
        member_margins="train",
        cv=5,
        objective="g_mean",
        class_weight=None,
        pos_label=None,
        n_neighbors=10,
        knn_method="auto",
        max_bag_draws=20,
        random_state=None,
        client=None,
    ):
        self.estimator = estimator
        self.n_estimators = n_estimators
        self.perturbation = perturbation
        self.bootstrap = bootstrap
        self.max_samples = max_samples
        self.member_margins = member_margins
        self.cv = cv
        self.objective = objective
        self.class_weight = class_weight
        self.pos_label = pos_label
        self.n_neighbors = n_neighbors
        self.knn_method = knn_method
        self.max_bag_draws = max_bag_draws
        self.random_state = random_state
        self.client = client

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y):
        """Fit the members, as Dask tasks when a client is available.

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
        X, y, _ = self._validate_training_data(X, y)
        estimator = default_estimator() if self.estimator is None else clone(self.estimator)
        if self.class_weight is not None:
            if "class_weight" not in estimator.get_params():
                raise ValueError(
                    f"class_weight={self.class_weight!r} needs a base estimator with a "
                    f"class_weight parameter; {type(estimator).__name__} has none."
                )
            estimator.set_params(class_weight=self.class_weight)
        self.seeds_ = check_random_state(self.random_state).randint(
            _MAX_SEED, size=self.n_estimators
        )
        member_params = dict(
            pos_label=self.pos_label_,
            estimator=estimator,
            bootstrap=self.bootstrap,
            max_samples=self.max_samples,
            margins=self.member_margins,
            cv=self.cv,
            objective=self.objective,
            perturbation=self.perturbation,
            n_neighbors=self.n_neighbors,
            knn_method=self.knn_method,
            max_bag_draws=self.max_bag_draws,
        )
        client = _client_for(self.client)
        if client is None:
            members = [fit_member(X, y, int(seed), **member_params) for seed in self.seeds_]
        else:
            from dimbsvm.distributed.fanout import run_tasks

            logger.info("fitting %d members on %s", self.n_estimators, client)
            # X and y are scattered once; each task gets a seed and the small parameters.
            members = run_tasks(
                client,
                fit_member,
                [dict(seed=int(seed), **member_params) for seed in self.seeds_],
                shared={"X": X, "y": y},
                progress=False,
                label="ensemble members",
            )
        self.members_ = list(members)
        self.estimators_ = [member.estimator for member in self.members_]
        self.thresholds_ = np.array([member.threshold for member in self.members_])
        self.optimal_thresholds_ = np.array(
            [member.optimal_threshold for member in self.members_]
        )
        return self

    def _member_margins(self, X):
        return np.stack([member.shifted_margin(X) for member in self.members_])

    def _shifted_margin(self, X):
        return self._member_margins(X).mean(axis=0)

    def predict(self, X):
        """Majority vote of the members; a tied vote goes to the minority class.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        votes = (self._member_margins(self._validate_X(X)) > 0).sum(axis=0)
        return self._label(2 * votes >= len(self.members_))

    def __getstate__(self):
        # A client holds sockets and an event loop: never pickle it.
        state = dict(super().__getstate__())
        state["client"] = None
        return state

    def __sklearn_clone__(self):
        if self.client is None:
            return super().__sklearn_clone__()
        # clone() would deep-copy the client (it cannot be copied): share it instead.
        params = self.get_params(deep=False)
        client = params.pop("client")
        new = type(self)(**{name: clone(value, safe=False) for name, value in params.items()})
        new.client = client
        return new
