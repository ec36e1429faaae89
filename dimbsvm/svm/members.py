"""EnSVM-OTHR members: one bag, one base classifier, one shift, from arrays and a seed.

:func:`fit_member` fits one member from arrays, a seed and (optionally) the
rows it may draw from, and returns a small :class:`OTHRMember`. It is the unit
of work of :class:`~dimbsvm.svm.ensemble.EnsembleOTHRClassifier`, which hands
one call per member to the engine; it is a plain function (no Dask, no
client), so the same arguments give the same member wherever it runs. Bags
are drawn by :func:`dimbsvm.svm.bagging.draw_bag`; the shift is searched by
:func:`dimbsvm.svm.threshold.othr_threshold` on the member's own rows.
:func:`pooled_oob_margins` pools the members' out-of-bag margins for the
ensemble's shared shift.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from dataclasses import dataclass, fields, replace

import numpy as np
from sklearn import config_context
from sklearn.base import clone
from sklearn.model_selection import StratifiedGroupKFold

from dimbsvm.rows import map_row_blocks, take_rows
from dimbsvm.svm._base import (
    default_estimator,
    fit_base_estimator,
    margin_sign,
    out_of_fold_margins,
    signed_margins,
)
from dimbsvm.svm._native_rng import liblinear_guard
from dimbsvm.svm.bagging import draw_seeded_bag, set_random_states
from dimbsvm.svm.routing import rows_of
from dimbsvm.svm.threshold import othr_threshold

__all__ = ["MEMBER_MARGINS", "MemberPlan", "MemberSpec", "OTHRMember", "fit_member", "pooled_mean",
           "pooled_oob_margins"]

logger = logging.getLogger(__name__)

#: Where a member's threshold is searched: ``"train"`` (the paper), ``"oob"``,
#: ``"cv"``; ``"none"``: no search (``theta = 0``, the ensemble sets it).
MEMBER_MARGINS = ("train", "oob", "cv", "none")


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
        The shift the member applies: its perturbed shift
        ``theta' = theta_opt * (1 + perturbation * u)`` (eq. 25), or the
        ensemble's shared shift.
    optimal_threshold : float
        ``theta_opt``, the shift before perturbation.
    n_draws : int
        Bags drawn until one held both classes (1 = no redraw).
    margins : str
        The margins the shift was searched on: ``"train"``, ``"oob"``,
        ``"cv"`` (``"train"`` when the requested margins were not possible),
        ``"none"`` (no member search), or ``"pooled_oob"`` / ``"pooled_train"``
        (the ensemble's shared search).
    oob_rows, oob_margins : ndarray or None
        With ``fit_member(..., keep_oob=True)``: the out-of-bag rows and the
        member's signed margins on them (the ensemble pools them, then drops them).
    in_bag : ndarray or None
        With ``fit_member(..., keep_oob="bag")``: the distinct rows of the bag
        (numbered within ``rows``, sorted), so that the out-of-bag margins can
        be computed elsewhere, a chunk of rows for all members at once
        (:func:`dimbsvm.svm.pooled_oob.pooled_oob_block`).
    """

    estimator: object
    margin_sign: float
    threshold: float
    optimal_threshold: float
    n_draws: int
    margins: str
    oob_rows: object = None
    oob_margins: object = None
    in_bag: object = None

    def shifted_margin(self, X):
        """``h(x) + theta'``, positive on the minority side."""
        return signed_margins(self.estimator, X, self.margin_sign) + self.threshold


@dataclass(frozen=True)
class MemberSpec:
    """How one member is fitted: every argument of :func:`fit_member` but the data, rows, seed and bag.

    The ensemble plans one per member (:meth:`EnsembleOTHRClassifier.plan_members
    <dimbsvm.svm.ensemble.EnsembleOTHRClassifier.plan_members>`); a driver that
    fits members elsewhere calls :meth:`fit` (and :meth:`draw_bag` to draw a
    bag ahead of its member) and never reads the fields one by one. The
    attributes are :func:`fit_member`'s keyword arguments, with its defaults.
    """

    pos_label: object
    estimator: object = None
    bootstrap: str = "plain"
    max_samples: object = None
    margins: str = "train"
    cv: int = 5
    objective: str = "g_mean"
    candidates: str = "othr"
    smoothing: object = None
    tolerance: float = 0.0
    min_precision: float = 0.0
    perturbation: float = 0.1
    n_neighbors: int = 10
    knn_method: str = "auto"
    max_bag_draws: int = 20
    keep_oob: object = False

    def options(self) -> dict:
        """The fields as :func:`fit_member` keyword arguments (the estimator not copied)."""
        return {field.name: getattr(self, field.name) for field in fields(self)}

    def fit(self, X, y, seed, *, rows=None, drawn=None, sample_weight=None, fit_params=None) -> OTHRMember:
        """``fit_member(X, y, seed, rows=rows, drawn=drawn, sample_weight=sample_weight, fit_params=fit_params,
        **options)``."""
        return fit_member(X, y, int(seed), rows=rows, drawn=drawn, sample_weight=sample_weight,
                          fit_params=fit_params, **self.options())

    def draw_bag(self, y, seed, *, positive=None, classes=None):
        """The bag :meth:`fit` with this ``seed`` draws over labels ``y`` (a :class:`~dimbsvm.svm.bagging.DrawnBag`).

        ``positive`` (``y == pos_label``) and ``classes`` (the positions of
        the positive rows and of the others) where the caller has them: many
        members' bags drawn over one fold's labels from one pass over them
        (``y`` is then not read). ``classes`` alone, as two
        :class:`~dimbsvm.svm.bagging.RankRange`: a stratified or balanced bag
        of class ranks drawn from the class sizes.
        """
        if positive is None and classes is None:
            positive = np.asarray(np.asarray(y) == self.pos_label)
        return draw_seeded_bag(positive, int(seed), bootstrap=self.bootstrap, max_samples=self.max_samples,
                               max_draws=self.max_bag_draws, classes=classes)

    def keeping_bag_only(self) -> MemberSpec:
        """This spec with ``keep_oob="bag"``: the member returns its bag's rows, not out-of-bag margins."""
        return replace(self, keep_oob="bag")


@dataclass(frozen=True)
class MemberPlan:
    """An ensemble's members before fitting: ``seeds[i]`` and ``members[i]`` give member ``i``.

    Attributes
    ----------
    seeds : ndarray of int
    members : tuple of MemberSpec
    """

    seeds: np.ndarray
    members: tuple

    def __post_init__(self):
        if len(self.seeds) != len(self.members):
            raise ValueError(f"{len(self.seeds)} seeds for {len(self.members)} members")


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
    candidates="othr",
    smoothing=None,
    tolerance=0.0,
    min_precision=0.0,
    perturbation=0.1,
    n_neighbors=10,
    knn_method="auto",
    max_bag_draws=20,
    keep_oob=False,
    drawn=None,
    sample_weight=None,
    fit_params=None,
):
    """Fit one EnSVM-OTHR member from arrays and a seed.

    Draws a bag (:func:`~dimbsvm.svm.bagging.draw_bag`) of ``rows``, fits a
    clone of ``estimator`` on it, searches the OTHR shift ``theta_opt`` on the
    chosen margins and perturbs it: ``theta' = theta_opt * (1 + perturbation * u)``,
    ``u ~ U[-1, 1]`` (eq. 25). Everything random comes from ``seed``, so the
    same arguments give the same member wherever the function runs. The
    defaults are the paper's member.

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
        See :func:`~dimbsvm.svm.bagging.draw_bag`.
    margins : {"train", "oob", "cv", "none"}, default="train"
        ``"train"``: the bag's own margins (the paper). ``"oob"``: the margins
        of the rows not in the bag. ``"cv"``: out-of-fold margins of the bag
        (``cv`` stratified folds, copies of a row kept in one fold). Falls back
        to ``"train"`` when the out-of-bag rows miss a class or the bag has
        fewer than 2 distinct minority rows. ``"none"``: no search,
        ``theta_opt = 0`` (the ensemble's pooled search sets the shift).
    cv : int, default=5
        Folds for ``margins="cv"``.
    objective, candidates, smoothing, tolerance, min_precision
        See :func:`dimbsvm.svm.threshold.othr_threshold`.
    perturbation : float, default=0.1
        The paper's perturbation size (0 disables it).
    n_neighbors, knn_method
        See :func:`dimbsvm.svm.threshold.farther_majority_neighbours`.
    max_bag_draws : int, default=20
        See ``max_draws`` of :func:`~dimbsvm.svm.bagging.draw_bag`.
    keep_oob : bool or "bag", default=False
        ``True``: return the out-of-bag rows (numbered within ``rows``) and
        the member's signed margins on them as ``oob_rows`` and
        ``oob_margins``. ``"bag"``: return only the bag's distinct rows as
        ``in_bag`` (a few kilobytes instead of the margins of every other
        row), for a caller that computes the out-of-bag margins itself.
    drawn : DrawnBag, default=None
        The member's bag already drawn (:func:`~dimbsvm.svm.bagging.draw_seeded_bag`
        with this ``seed`` and these bag options over ``rows``' labels), so
        that it is not drawn twice: a balanced draw from millions of rows
        costs more than fitting a linear member on its bag. The member is the
        one it would draw itself.
    sample_weight : ndarray of shape (n_samples,), default=None
        One weight per row of ``X``. The bag's rows' weights (a row drawn
        twice counts twice) are passed to the base estimator's ``fit`` (a
        ``TypeError`` if it takes none) and to every out-of-fold fit, and the
        shift's objective counts the weights of the rows it is searched on.
        The bag is drawn from the unweighted rows.
    fit_params : dict, default=None
        Routed keyword arguments of the base estimator's ``fit``
        (:mod:`dimbsvm.svm.routing`; row-aligned values, one per row of ``X``,
        are cut to the bag): given, they are all the base gets
        (``sample_weight`` then only where routing put it there) and the fit
        runs with scikit-learn's metadata routing on, wherever it runs.

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
    routing = config_context(enable_metadata_routing=True) if fit_params is not None else nullcontext()
    with liblinear_guard(estimator), routing:
        return _fit_member(
            X, y, seed, pos_label=pos_label, rows=rows, estimator=estimator, bootstrap=bootstrap,
            max_samples=max_samples, margins=margins, cv=cv, objective=objective, candidates=candidates,
            smoothing=smoothing, tolerance=tolerance, min_precision=min_precision,
            perturbation=perturbation, n_neighbors=n_neighbors, knn_method=knn_method,
            max_bag_draws=max_bag_draws, keep_oob=keep_oob, drawn=drawn, sample_weight=sample_weight,
            fit_params=fit_params,
        )


def _fit_member(X, y, seed, *, pos_label, rows, estimator, bootstrap, max_samples, margins, cv, objective,
                candidates, smoothing, tolerance, min_precision, perturbation, n_neighbors, knn_method,
                max_bag_draws, keep_oob, drawn, sample_weight, fit_params):
    # The bag is drawn from the labels alone, so a handle on a store is asked
    # only for the bag's rows (and the out-of-bag rows a block at a time).
    # every row's label only where the member draws its bag or uses its out-of-bag rows; a bag drawn ahead
    # needs the labels of its own rows alone (not a pass over millions of a fold's labels per member, nor
    # an index array of them: ``X`` and ``y`` may then answer for the bag's rows only)
    every_label = drawn is None or keep_oob is True or margins == "oob"
    if rows is None and not every_label:
        n_rows, rows = len(y), _SameRows()
    else:
        rows = np.arange(len(y)) if rows is None else np.asarray(rows, dtype=np.int64)
        n_rows = rows.size
    if every_label:
        y = np.asarray(y)[rows]
        positive = np.asarray(y == pos_label)
    if drawn is None:
        drawn = draw_seeded_bag(positive, seed, bootstrap=bootstrap, max_samples=max_samples,
                                max_draws=max_bag_draws)
    elif (drawn.seed, drawn.n_rows) != (int(seed), n_rows):
        raise ValueError(f"member {seed} over {n_rows} rows was given the bag drawn for member "
                         f"{drawn.seed} over {drawn.n_rows} rows")
    bag, n_draws, random_state = drawn.bag, drawn.n_draws, drawn.generator()
    u = random_state.uniform(-1.0, 1.0)
    template = clone(default_estimator() if estimator is None else estimator)
    set_random_states(template, seed)
    y_bag = y[bag] if every_label else np.asarray(y[rows[bag]])
    X_bag, positive_bag = take_rows(X, rows[bag]), np.asarray(y_bag == pos_label)
    weights = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    bag_weights = None if weights is None else weights[rows[bag]]
    # the base's own keyword arguments: routed ones cut to the bag, or else the bag's weights
    base_params = None if fit_params is None else rows_of(fit_params, rows[bag], X.shape[0])
    fitted = fit_base_estimator(template, X_bag, y_bag, bag_weights if base_params is None else None,
                                owner="EnsembleOTHRClassifier", fit_params=base_params)
    sign = margin_sign(fitted, pos_label, np.unique(y_bag))

    oob_rows = oob_margins = None
    if keep_oob is True or margins == "oob":
        # int32 halves what a member returns when folds hold millions of rows
        index_type = np.int32 if n_rows < np.iinfo(np.int32).max else np.int64
        # a mask, not np.setdiff1d: the same sorted rows without sorting all n (which dominated a
        # default member's CPU at a million rows)
        in_bag = np.zeros(positive.size, dtype=bool)
        in_bag[bag] = True
        oob_rows = np.flatnonzero(~in_bag).astype(index_type)
        oob_margins = (
            map_row_blocks(lambda block: signed_margins(fitted, block, sign), X, rows[oob_rows])
            if oob_rows.size
            else np.empty(0)
        )

    theta_opt, used = 0.0, margins
    if margins != "none":
        used, X_eval, positive_eval, margins_eval = "train", X_bag, positive_bag, None
        weights_eval = bag_weights
        if margins == "oob":
            n_oob_positive = int(positive[oob_rows].sum())
            if 0 < n_oob_positive < oob_rows.size:
                used, positive_eval = "oob", positive[oob_rows]
                X_eval = take_rows(X, rows[oob_rows]) if candidates == "othr" else None
                margins_eval = oob_margins
                weights_eval = None if weights is None else weights[rows[oob_rows]]
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
                        template, X_bag, y_bag, pos_label, np.unique(y_bag), splits,
                        sample_weight=bag_weights if base_params is None else None, fit_params=base_params,
                    )
        if margins_eval is None:
            margins_eval = signed_margins(fitted, X_bag, sign)
        if used != margins:
            logger.debug(
                "member %d: no %s margins possible; searched on train margins", seed, margins
            )
        theta_opt, _ = othr_threshold(
            X_eval,
            positive_eval,
            margins_eval,
            objective=objective,
            candidates=candidates,
            smoothing=smoothing,
            tolerance=tolerance,
            min_precision=min_precision,
            n_neighbors=n_neighbors,
            method=knn_method,
            random_state=seed,
            sample_weight=weights_eval,
        )
    theta = theta_opt * (1.0 + perturbation * u)  # eq. 25
    return OTHRMember(
        estimator=fitted,
        margin_sign=sign,
        threshold=float(theta),
        optimal_threshold=float(theta_opt),
        n_draws=n_draws,
        margins=used,
        oob_rows=oob_rows if keep_oob is True else None,
        oob_margins=oob_margins if keep_oob is True else None,
        in_bag=np.unique(bag).astype(np.int32 if n_rows < np.iinfo(np.int32).max else np.int64)
        if keep_oob == "bag" else None,
    )


class _SameRows:
    """``rows[positions]`` is ``positions``: every row of the data, without an index array of them."""

    def __getitem__(self, positions):
        return positions


def pooled_oob_margins(members, n_samples):
    """Mean signed margin of every row over the members it is out of bag for.

    Parameters
    ----------
    members : sequence of OTHRMember
        Fitted with ``keep_oob=True``.
    n_samples : int

    Returns
    -------
    margins : ndarray of shape (n_samples,)
        NaN for rows that every member had in its bag.
    counts : ndarray of shape (n_samples,), dtype int64
        How many members each row was out of bag for.
    """
    total = np.zeros(n_samples)
    counts = np.zeros(n_samples, dtype=np.int64)
    for member in members:  # in member order: the same sums on any number of workers
        total[member.oob_rows] += member.oob_margins
        counts[member.oob_rows] += 1
    return pooled_mean(total, counts), counts


def pooled_mean(total, counts):
    """``total / counts`` per row, NaN where ``counts`` is 0 (a row every member had in its bag)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, total / np.maximum(counts, 1), np.nan)
