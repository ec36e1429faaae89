"""ACT on class-balanced bags: ACT's kernel stays bounded however many rows there are.

:class:`~dimbsvm.svm.ACTClassifier` needs the kernel of all its training rows
(``max_kernel_size`` bounds them). :class:`BaggedACTClassifier` fits
``n_estimators`` ACT members, each on a bag of at most ``max_samples`` rows
drawn without replacement, half from the minority class where it has them
(under-bagging), and scores a row by the members' mean decision value.

In a job the members fan out as tasks of the fold engine's plan through its
hook (:meth:`BaggedACTClassifier.plan_fold_fit`, :mod:`dimbsvm.fold_data.context`):
one task draws every member's bag from the fold's training labels, one task
per member reads its bag's rows (over a store, only the chunks that hold
them) and fits, and one task assembles the members. The fitted model is the
one :meth:`BaggedACTClassifier.fit` gives on the fold's prepared rows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from numbers import Integral

import numpy as np
from sklearn.base import clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .._params import HasMethods, Interval, check_sample_weight, fit_context
from .._validation import refuse_sparse
from ..fold_data.context import FoldContext, FoldFit
from ..fold_data.one_fold import fit_as_one_fold
from ..fold_data.prepared import training_data
from ..rows import take_rows
from ._base import _SignedScoreClassifier, binary_classes, positive_label
from .act import ACTClassifier
from .parts import Part
from .task_costs import FoldCosts

__all__ = ["BaggedACTClassifier", "FoldBags", "draw_bags"]


@dataclass(frozen=True)
class FoldBags:
    """Every member's bag of one training set: positions among its rows, increasing.

    Attributes
    ----------
    classes : ndarray
        The two classes, increasing.
    pos_label : object
        The minority class.
    seeds : ndarray of int
        One per member.
    positions : list of ndarray of int64
        Per member, the positions of its bag's rows among the training rows.
    labels : list of ndarray
        Per member, its bag's labels (a member task then reads no label).
    """

    classes: np.ndarray
    pos_label: object
    seeds: np.ndarray
    positions: list
    labels: list


def draw_bags(y, *, n_estimators: int, max_samples: int, random_state) -> FoldBags:
    """Every member's class-balanced bag of the training labels ``y``.

    Member ``i`` draws, with ``RandomState(seeds[i])`` and without
    replacement, ``min(n_minority, max_samples // 2)`` minority rows and as
    many majority rows as fill the bag to ``max_samples`` (all of them if
    there are fewer).

    Examples
    --------
    >>> bags = draw_bags(np.array([0] * 8 + [1] * 2), n_estimators=2, max_samples=6, random_state=0)
    >>> [p.size for p in bags.positions], int(bags.pos_label)
    ([6, 6], 1)
    >>> all(set(p[-2:]) == {8, 9} for p in bags.positions)  # every bag holds both minority rows
    True
    """
    y = np.asarray(y)
    classes, counts = binary_classes(y, "BaggedACTClassifier")
    pos_label = positive_label(classes, counts, None)
    minority, majority = np.flatnonzero(y == pos_label), np.flatnonzero(y != pos_label)
    seeds = check_random_state(random_state).randint(np.iinfo(np.int32).max, size=n_estimators)
    n_min = min(minority.size, max_samples // 2)
    n_maj = min(majority.size, max_samples - n_min)
    positions = []
    for seed in seeds:
        rng = np.random.RandomState(seed)
        drawn = np.concatenate([rng.choice(minority, n_min, replace=False), rng.choice(majority, n_maj, replace=False)])
        positions.append(np.sort(drawn).astype(np.int64))
    return FoldBags(classes, pos_label, seeds, positions, [y[p] for p in positions])


def _fit_member(estimator, X_bag, y_bag, seed, sample_weight=None):
    """One ACT member on its bag, seeded (its validation split) by the member's seed; the bag's weights passed on."""
    member = clone(estimator)
    if "random_state" in member.get_params():
        member.set_params(random_state=int(seed))
    return member.fit(X_bag, y_bag) if sample_weight is None else member.fit(X_bag, y_bag, sample_weight=sample_weight)


class BaggedACTClassifier(_SignedScoreClassifier):
    """ACT members on class-balanced bags, averaged: ACT beyond the rows one kernel holds.

    Parameters
    ----------
    estimator : estimator, default=None
        The member, cloned for each bag; ``None`` means ``ACTClassifier()``.
        Its ``random_state`` is set to the member's seed.
    n_estimators : int, default=10
        Members.
    max_samples : int, default=2000
        Rows per bag at most (half from the minority class where it has
        them); keep it at most the member's ``max_kernel_size``.
    random_state : int, RandomState or None, default=None
        Draws the members' seeds.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
    pos_label_ : object
        The minority class.
    estimators_ : list of estimator
        The fitted members.
    bags_ : list of ndarray
        Each member's bag: positions among the training rows.
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> X, y = make_classification(n_samples=400, weights=[0.9], random_state=0)
    >>> model = BaggedACTClassifier(n_estimators=3, max_samples=100, random_state=0).fit(X, y)
    >>> len(model.estimators_), model.predict(X[:3]).shape
    (3, (3,))
    """

    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "decision_function"]), None],
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "max_samples": [Interval(Integral, 2, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, estimator=None, n_estimators=10, max_samples=2000, random_state=None):
        self.estimator, self.n_estimators = estimator, n_estimators
        self.max_samples, self.random_state = max_samples, random_state

    def _member(self):
        return ACTClassifier() if self.estimator is None else self.estimator

    def _bags(self, y) -> FoldBags:
        return draw_bags(y, n_estimators=self.n_estimators, max_samples=self.max_samples,
                         random_state=self.random_state)

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit every member on its bag, in this process, by the plan a job's fold runs (:meth:`plan_fold_fit`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data, finite, dense.
        y : array-like of shape (n_samples,)
            Two classes.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative row weights: each member is fitted with its bag's
            weights (:meth:`ACTClassifier.fit <dimbsvm.svm.ACTClassifier.fit>`);
            the bags are drawn from the unweighted rows.

        Returns
        -------
        self : BaggedACTClassifier
        """
        refuse_sparse(self, X)
        X, y = validate_data(self, X, y, dtype=np.float64)
        if sample_weight is not None:
            sample_weight = check_sample_weight(sample_weight, X, ensure_non_negative=True)
        return fit_as_one_fold(self, X, y, label="bagged ACT members", sample_weight=sample_weight)

    def _set_members(self, bags: FoldBags, members):
        self.classes_, self.pos_label_ = bags.classes, bags.pos_label
        self.estimators_, self.bags_ = list(members), list(bags.positions)
        self.n_features_in_ = members[0].n_features_in_
        return self

    def decision_function(self, X):
        """The members' mean decision value; positive values mean ``classes_[1]``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        refuse_sparse(self, X)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        total = np.zeros(X.shape[0])
        for member in self.estimators_:  # in member order: the same sum on every machine
            total += member.decision_function(X)
        return total / len(self.estimators_)

    def plan_fold_fit(self, context: FoldContext) -> FoldFit:
        """The fold engine's hook: a bag task, one task per member, an assembly (see the module).

        Parameters
        ----------
        context : FoldContext

        Returns
        -------
        FoldFit
        """
        self._validate_params()  # (a job plans the fold without calling fit)
        plan = context.plan
        prepared, rows = context.prepare(), context.rows()
        bag_rows = min(self.max_samples, context.n_train)
        costs = FoldCosts.of(self._member(), [Part(0)], n_train=bag_rows, n_test=context.n_test,
                             n_minority=bag_rows // 2, n_feature_stages=context.n_feature_stages)
        costs = replace(costs, n_parts=self.n_estimators)
        common = dict(X=context.X, y=context.y, prepared=prepared, rows=rows)
        if context.sample_weight is not None:  # (arrays in memory only)
            common["sample_weight"] = context.sample_weight
        bags = plan.add(fold_bags, dict(y=context.y, rows=rows, estimator=self), name="bag", priority=10)
        members = [plan.add(fit_bag_member, dict(common, bags=bags, index=i, estimator=self), name="member",
                            cost=costs.part())
                   for i in range(self.n_estimators)]
        fitted = plan.add(assemble_bagged, dict(bags=bags, members=members, estimator=self), name="assemble",
                          gathers=True)
        return FoldFit(prepared, fitted, by_chunk=False, costs=costs)


def fold_bags(y, rows, *, estimator: BaggedACTClassifier) -> FoldBags:
    """Task body: every member's bag of the fold, drawn from its training labels (as ``fit`` draws them)."""
    return estimator._bags(np.asarray(y)[rows.train])


def fit_bag_member(X, y, prepared, rows, bags: FoldBags, *, index: int, estimator: BaggedACTClassifier,
                   sample_weight=None):
    """Task body: ``(fitted member, seconds)`` of member ``index``, reading only its bag's rows.

    ``sample_weight``: one weight per row of ``X`` (arrays in memory); the bag's are the member's.
    """
    start = time.perf_counter()
    X_train, _, train = training_data(X, y, prepared, rows)
    positions = bags.positions[index]
    # the prepared training rows in memory, or rows read (and prepared) as they are taken: over a store,
    # only the chunks holding the bag
    X_bag = X_train[positions] if train is None else take_rows(X_train, train[positions])
    bag_weights = None if sample_weight is None else np.asarray(sample_weight)[rows.train[positions]]
    member = _fit_member(estimator._member(), np.asarray(X_bag, dtype=np.float64), bags.labels[index],
                         bags.seeds[index], bag_weights)
    return member, time.perf_counter() - start


def assemble_bagged(bags: FoldBags, members, *, estimator: BaggedACTClassifier):
    """Task body: ``(fitted BaggedACTClassifier, seconds of its members)``."""
    fitted = clone(estimator)._set_members(bags, [member for member, _ in members])
    return fitted, sum(seconds for _, seconds in members)
