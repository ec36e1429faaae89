"""``EnsembleOTHRClassifier.fit(X, y, sample_weight)`` against scikit-learn and brute force.

The truths: each member is scikit-learn's weighted fit of its bag; every threshold is the cut of best
weighted G-mean among every cut of its margins, scored by ``recall_score(sample_weight=...)``; the
calibration is scikit-learn's weighted Platt fit; the settings are ranked by the weighted
``roc_auc_score``; weights of 1 are no weights, bit for bit.
"""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.datasets import make_classification
from sklearn.metrics import recall_score, roc_auc_score
from sklearn.svm import SVC, LinearSVC

from dimbsvm.svm import EnsembleOTHRClassifier

#: The threshold searches of these tests: every cut between two distinct margins, best weighted G-mean exactly.
EXACT_SEARCH = dict(candidates="midpoints", smoothing=None, tolerance=0.0, objective="g_mean")


def _data(seed=0, n_samples=400):
    X, y = make_classification(n_samples=n_samples, n_features=6, weights=[0.85], flip_y=0.05, class_sep=0.7,
                               random_state=seed)
    weights = np.random.RandomState(seed).uniform(0.2, 3.0, size=n_samples)
    weights[y == 1] *= 2.5  # the minority weighs more: the weighted optimum moves
    return X, y, weights


def _weighted_g_mean(positive, margins, theta, weights):
    predicted = margins + theta > 0
    return np.sqrt(recall_score(positive, predicted, sample_weight=weights, zero_division=0.0)
                   * recall_score(~positive, ~predicted, sample_weight=weights, zero_division=0.0))


def _best_cut(positive, margins, weights):
    """The best weighted G-mean over every cut of ``margins`` (and no shift), by brute force."""
    values = np.unique(margins)
    thetas = np.concatenate([[0.0], -(values[:-1] + values[1:]) / 2, [-values[0] + 1.0, -values[-1] - 1.0]])
    return max(_weighted_g_mean(positive, margins, theta, weights) for theta in thetas)


def _bags(ensemble, y):
    """Each member's bag (row numbers, repeats kept), drawn as the ensemble draws it."""
    plan = clone(ensemble).plan_members(y)
    return [spec.draw_bag(y, seed).bag for seed, spec in zip(plan.seeds, plan.members)]


def _pooled_out_of_bag_margins(ensemble, X, y):
    """Every row's mean signed margin over the members that did not draw it; NaN where all did."""
    total, count = np.zeros(len(y)), np.zeros(len(y))
    for member, bag in zip(ensemble.members_, _bags(ensemble, y)):
        out = np.setdiff1d(np.arange(len(y)), bag)
        total[out] += member.margin_sign * member.estimator.decision_function(X[out])
        count[out] += 1
    with np.errstate(invalid="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


@pytest.mark.parametrize("base", [LinearSVC(random_state=0), SVC(gamma=0.5)], ids=["linear", "rbf"])
def test_each_member_is_scikit_learns_weighted_fit_of_its_bag(base):
    X, y, weights = _data(1)
    ensemble = EnsembleOTHRClassifier(base, n_estimators=4, max_samples=200, random_state=3).fit(
        X, y, sample_weight=weights)
    plan = clone(ensemble).plan_members(y)
    for member, bag, seed in zip(ensemble.members_, _bags(ensemble, y), plan.seeds):
        reference = clone(base)
        if "random_state" in reference.get_params():
            reference.set_params(random_state=int(seed))
        reference.fit(X[bag], y[bag], sample_weight=weights[bag])
        np.testing.assert_allclose(member.estimator.decision_function(X), reference.decision_function(X),
                                   rtol=1e-10, atol=1e-10)
    unweighted = EnsembleOTHRClassifier(base, n_estimators=4, max_samples=200, random_state=3).fit(X, y)
    assert not np.allclose(unweighted.members_[0].estimator.decision_function(X),
                           ensemble.members_[0].estimator.decision_function(X))


def test_the_shared_shift_is_the_best_weighted_g_mean_of_the_pooled_out_of_bag_margins():
    from sklearn.calibration import _sigmoid_calibration  # scikit-learn's own (weighted) Platt fit: the oracle

    X, y, weights = _data(2)
    params = dict(n_estimators=6, max_samples=150, random_state=0, probability=True, **EXACT_SEARCH)
    ensemble = EnsembleOTHRClassifier(LinearSVC(), **params).fit(X, y, sample_weight=weights)
    assert ensemble.threshold_margins_ == "oob"
    margins = _pooled_out_of_bag_margins(ensemble, X, y)
    scored = ~np.isnan(margins)
    positive, margins, w = (y == 1)[scored], margins[scored], weights[scored]
    best = _best_cut(positive, margins, w)
    assert _weighted_g_mean(positive, margins, ensemble.threshold_, w) == pytest.approx(best, abs=1e-12)
    a, b = _sigmoid_calibration(margins + ensemble.threshold_, positive.astype(int), w)
    assert ensemble.platt_ == pytest.approx((a, b), rel=1e-4, abs=1e-6)
    # the unweighted ensemble's shift is not the weighted optimum here: the weights count
    unweighted = EnsembleOTHRClassifier(LinearSVC(), **params).fit(X, y)
    assert _weighted_g_mean(positive, margins, unweighted.threshold_, w) < best


@pytest.mark.parametrize("member_margins", ["train", "oob"])
def test_each_members_own_shift_is_the_best_weighted_g_mean_of_its_margins(member_margins):
    X, y, weights = _data(3)
    ensemble = EnsembleOTHRClassifier(LinearSVC(), n_estimators=4, max_samples=200, random_state=1,
                                      threshold="member", member_margins=member_margins, perturbation=0.0,
                                      **EXACT_SEARCH).fit(X, y, sample_weight=weights)
    for member, bag in zip(ensemble.members_, _bags(ensemble, y)):
        rows = bag if member.margins == "train" else np.setdiff1d(np.arange(len(y)), bag)
        assert member.margins == member_margins
        margins = member.margin_sign * member.estimator.decision_function(X[rows])
        positive = y[rows] == 1
        assert _weighted_g_mean(positive, margins, member.optimal_threshold, weights[rows]) == pytest.approx(
            _best_cut(positive, margins, weights[rows]), abs=1e-12)


def test_param_grid_ranks_settings_by_the_weighted_out_of_bag_roc_auc():
    X, y, weights = _data(4)
    grid = {"C": [0.01, 1.0, 100.0]}
    ensemble = EnsembleOTHRClassifier(LinearSVC(), n_estimators=3, max_samples=150, random_state=2,
                                      param_grid=grid, top_candidates=3).fit(X, y, sample_weight=weights)
    for setting, auc in zip(ensemble.search_results_["params"], ensemble.search_results_["oob_auc"]):
        alone = EnsembleOTHRClassifier(LinearSVC(C=setting["C"]), n_estimators=3, max_samples=150,
                                       random_state=2).fit(X, y, sample_weight=weights)
        margins = _pooled_out_of_bag_margins(alone, X, y)
        scored = ~np.isnan(margins)
        assert auc == pytest.approx(roc_auc_score(y[scored], margins[scored], sample_weight=weights[scored]),
                                    rel=1e-12)


@pytest.mark.parametrize("params", [
    dict(),
    dict(threshold="member", member_margins="cv"),
    dict(param_grid={"C": [0.5, 4.0, 8.0]}, screen_members=2, screen_survivors=2, top_candidates=1),
], ids=["pooled", "member-cv", "screened-grid"])
def test_weights_of_one_are_no_weights(params):
    X, y, _ = _data(5, n_samples=240)
    make = lambda: EnsembleOTHRClassifier(n_estimators=4, random_state=0, **params)  # noqa: E731
    plain, ones = make().fit(X, y), make().fit(X, y, sample_weight=np.ones(len(y)))
    np.testing.assert_array_equal(plain.decision_function(X), ones.decision_function(X))
    np.testing.assert_array_equal(plain.thresholds_, ones.thresholds_)


def test_weighted_members_are_the_same_on_processes():
    X, y, weights = _data(6, n_samples=300)
    here = EnsembleOTHRClassifier(n_estimators=4, random_state=0).fit(X, y, sample_weight=weights)
    apart = EnsembleOTHRClassifier(n_estimators=4, random_state=0, n_jobs=2).fit(X, y, sample_weight=weights)
    np.testing.assert_array_equal(here.decision_function(X), apart.decision_function(X))


def test_a_dask_array_with_weights_is_fitted_in_memory_and_said_so(client, caplog):
    da = pytest.importorskip("dask.array")
    X, y, weights = _data(7, n_samples=300)
    here = EnsembleOTHRClassifier(LinearSVC(), n_estimators=3, random_state=0, candidates="midpoints").fit(
        X, y, sample_weight=weights)
    with caplog.at_level("WARNING", logger="dimbsvm.svm.ensemble"):
        chunked = EnsembleOTHRClassifier(LinearSVC(), n_estimators=3, random_state=0, candidates="midpoints",
                                         client=client).fit(da.from_array(X, chunks=100), y,
                                                            sample_weight=da.from_array(weights, chunks=100))
    assert "computed into this process (sample_weight)" in caplog.text
    np.testing.assert_array_equal(here.decision_function(X), chunked.decision_function(X))


class _NoWeights(ClassifierMixin, BaseEstimator):
    def fit(self, X, y):
        self.classes_ = np.unique(y)
        self.coef_ = np.ones(X.shape[1])
        return self

    def decision_function(self, X):
        return X @ self.coef_


def test_weights_are_refused_by_name_where_they_cannot_go():
    X, y, weights = _data(8, n_samples=120)
    with pytest.raises(TypeError, match="EnsembleOTHRClassifier was given sample_weight, but its base estimator "
                                        "_NoWeights does not accept sample_weight in fit"):
        EnsembleOTHRClassifier(_NoWeights(), n_estimators=2).fit(X, y, sample_weight=weights)
    with pytest.raises(ValueError, match="[Nn]egative"):
        EnsembleOTHRClassifier(n_estimators=2).fit(X, y, sample_weight=-weights)
    with pytest.raises(ValueError, match=r"sample_weight.shape == \(3,\), expected \(120,\)"):
        EnsembleOTHRClassifier(n_estimators=2).fit(X, y, sample_weight=weights[:3])
