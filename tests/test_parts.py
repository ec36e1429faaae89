"""The contract between an estimator that fits in members and the fold engine (svm/parts.py).

The truth here is the estimator's own ``fit``: planning the members, fitting
each from its MemberSpec and assembling them must give the same model.
"""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.svm import SVC, LinearSVC

from dimbsvm.datasets import make_imbalanced
from dimbsvm.svm.parts import FitsInMembers, Part, parts_of
from dimbsvm.svm import EnsembleOTHRClassifier, MemberPlan, MemberSpec, OTHRClassifier


@pytest.fixture(scope="module")
def data():
    X, y = make_imbalanced(300, n_features=4, minority_fraction=0.15, random_state=3)
    return np.asarray(X), np.asarray(y)


ENSEMBLES = [
    EnsembleOTHRClassifier(n_estimators=4, random_state=0),
    EnsembleOTHRClassifier(LinearSVC(), n_estimators=3, threshold="pooled_oob", bootstrap="balanced",
                           random_state=1),
    EnsembleOTHRClassifier(n_estimators=2, threshold="pooled_oob", param_grid={"C": [0.5, 4.0]},
                           top_candidates=1, random_state=2),
]


@pytest.mark.parametrize("ensemble", ENSEMBLES, ids=["paper", "pooled-linear", "grid"])
def test_members_fitted_from_the_plan_assemble_into_what_fit_gives(data, ensemble):
    X, y = data
    plan = clone(ensemble).plan_members(y)
    assert isinstance(plan, MemberPlan) and all(isinstance(m, MemberSpec) for m in plan.members)
    members = [spec.fit(X, y, seed) for seed, spec in zip(plan.seeds, plan.members)]
    assembled = clone(ensemble).fit_from_members(X, y, members, plan.seeds)
    fitted = clone(ensemble).fit(X, y)
    np.testing.assert_array_equal(assembled.seeds_, fitted.seeds_)
    np.testing.assert_array_equal(assembled.decision_function(X), fitted.decision_function(X))
    np.testing.assert_array_equal(assembled.predict(X), fitted.predict(X))


def test_a_screening_ensemble_is_one_part(data):
    """Its second round depends on its first: it is planned in rounds (plan_screening), not as parts."""
    _, y = data
    screened = EnsembleOTHRClassifier(n_estimators=3, param_grid={"C": [0.5, 4.0, 8.0]}, screen_members=1,
                                      screen_survivors=2)
    assert isinstance(screened, FitsInMembers)
    assert parts_of(screened, y) == ([Part(0)], None)
    with pytest.raises(ValueError, match="cannot be planned before fit"):
        clone(screened).plan_members(y)
    plan = clone(screened).plan_screening(y)
    assert len(plan.first_round()) == 3 and len(plan.second_round([2, 0])) == 4
    parts, seeds = parts_of(screened.set_params(screen_members=None), y)
    assert len(parts) == 9 and len(seeds) == 9


def test_a_bag_drawn_ahead_is_the_bag_the_member_draws(data):
    X, y = data
    plan = EnsembleOTHRClassifier(n_estimators=2, bootstrap="balanced", random_state=4).plan_members(y)
    rows = np.arange(40, 300)  # a fold's training rows: the bag is drawn over their labels
    for seed, spec in zip(plan.seeds, plan.members):
        alone = spec.fit(X, y, seed, rows=rows)
        ahead = spec.fit(X, y, seed, rows=rows, drawn=spec.draw_bag(y[rows], seed))
        assert (alone.threshold, alone.n_draws) == (ahead.threshold, ahead.n_draws)
        np.testing.assert_array_equal(alone.estimator.dual_coef_, ahead.estimator.dual_coef_)
        with pytest.raises(ValueError, match="was given the bag drawn for member"):
            spec.fit(X, y, seed + 1, rows=rows, drawn=spec.draw_bag(y[rows], seed))


def test_keeping_the_bag_only_returns_the_bag_rows_instead_of_margins(data):
    X, y = data
    plan = EnsembleOTHRClassifier(n_estimators=1, threshold="pooled_oob", random_state=0).plan_members(y)
    spec, seed = plan.members[0], plan.seeds[0]
    full, bag_only = spec.fit(X, y, seed), spec.keeping_bag_only().fit(X, y, seed)
    assert full.oob_margins is not None and bag_only.oob_margins is None
    # the out-of-bag rows of one are exactly the rows not in the other's bag
    np.testing.assert_array_equal(np.setdiff1d(np.arange(len(y)), bag_only.in_bag), full.oob_rows)


def test_only_an_ensemble_is_fitted_in_members(data):
    _, y = data
    assert isinstance(EnsembleOTHRClassifier(), FitsInMembers)
    for whole in (SVC(), OTHRClassifier()):
        assert not isinstance(whole, FitsInMembers)
        assert parts_of(whole, y) == ([Part(0)], None)
    parts, seeds = parts_of(EnsembleOTHRClassifier(n_estimators=3, random_state=5), y)
    assert [p.index for p in parts] == [0, 1, 2] and [p.seed for p in parts] == seeds.tolist()
    assert len(set(seeds.tolist())) == 3


def test_a_plan_with_unequal_seeds_and_members_is_refused():
    with pytest.raises(ValueError, match="2 seeds for 1 members"):
        MemberPlan(np.array([1, 2]), (MemberSpec(pos_label=1),))
