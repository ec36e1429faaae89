"""scikit-learn's metadata routing through OTHR, THR and the ensemble, against the same fits done by hand.

The truths: OTHR's out-of-fold margins from ``GroupKFold`` splits made by hand, the base estimators fitted by
scikit-learn with the weights they asked for, and scikit-learn's own routing errors where it refuses.
"""

import numpy as np
import pytest
import sklearn
from sklearn.datasets import make_classification
from sklearn.exceptions import UnsetMetadataPassedError
from sklearn.model_selection import GroupKFold
from sklearn.svm import SVC, LinearSVC

from dimbsvm.svm import EnsembleOTHRClassifier, OTHRClassifier, THRClassifier


@pytest.fixture
def routing():
    with sklearn.config_context(enable_metadata_routing=True):
        yield


def _data(seed=0, n_samples=300):
    X, y = make_classification(n_samples=n_samples, n_features=5, weights=[0.85], flip_y=0.03, random_state=seed)
    rng = np.random.RandomState(seed)
    return X, y, rng.uniform(0.2, 3.0, size=n_samples), np.arange(n_samples) % 12


def test_groups_reach_othrs_splitter_and_weights_its_base(routing):
    X, y, weights, groups = _data(0)
    routed = OTHRClassifier(SVC(gamma=0.5).set_fit_request(sample_weight=True), cv=GroupKFold(3)).fit(
        X, y, sample_weight=weights, groups=groups)
    with sklearn.config_context(enable_metadata_routing=False):
        by_hand = OTHRClassifier(SVC(gamma=0.5), cv=list(GroupKFold(3).split(X, y == 1, groups))).fit(
            X, y, sample_weight=weights)
    assert routed.threshold_ == by_hand.threshold_
    np.testing.assert_array_equal(routed.candidates_["theta"], by_hand.candidates_["theta"])
    reference = SVC(gamma=0.5).fit(X, y, sample_weight=weights)
    np.testing.assert_allclose(routed.estimator_.decision_function(X), reference.decision_function(X), atol=1e-10)
    # other splits than the groups': the groups did reach the splitter
    ungrouped = OTHRClassifier(SVC(gamma=0.5), cv=3).fit(X, y)
    assert not np.array_equal(routed.candidates_["theta"], ungrouped.candidates_["theta"])


def test_a_base_that_declines_the_weights_is_fitted_without_them_and_the_threshold_still_counts_them(routing):
    X, y, weights, _ = _data(1)
    model = OTHRClassifier(SVC(gamma=0.5).set_fit_request(sample_weight=False), margins="train",
                           candidates="midpoints").fit(X, y, sample_weight=weights)
    np.testing.assert_allclose(model.estimator_.decision_function(X),
                               SVC(gamma=0.5).fit(X, y).decision_function(X), atol=1e-10)
    with sklearn.config_context(enable_metadata_routing=False):
        unweighted_search = OTHRClassifier(SVC(gamma=0.5), margins="train", candidates="midpoints").fit(X, y)
    assert model.threshold_ != unweighted_search.threshold_


def test_the_default_base_asks_for_the_weights(routing):
    X, y, weights, _ = _data(2)
    for model in (OTHRClassifier(margins="train"), THRClassifier()):
        model.fit(X, y, sample_weight=weights)
        np.testing.assert_allclose(model.estimator_.decision_function(X),
                                   SVC().fit(X, y, sample_weight=weights).decision_function(X), atol=1e-10)


def test_scikit_learns_refusals_stand(routing):
    X, y, weights, groups = _data(3)
    # a base that neither asked for nor declined the weights: scikit-learn's own error
    with pytest.raises(UnsetMetadataPassedError, match="sample_weight"):
        OTHRClassifier(SVC()).fit(X, y, sample_weight=weights)
    # groups nobody asked for (an integer cv's stratified folds take none)
    with pytest.raises(TypeError, match="groups"):
        OTHRClassifier(SVC().set_fit_request(sample_weight=True), cv=3).fit(X, y, groups=groups)


def test_without_routing_extra_fit_parameters_are_refused_in_one_line():
    X, y, weights, groups = _data(4, n_samples=120)
    for model in (OTHRClassifier(), THRClassifier(), EnsembleOTHRClassifier(n_estimators=2)):
        with pytest.raises(ValueError, match=f"^{type(model).__name__}.fit was given groups: parameters other than "
                                             r"sample_weight are routed only with sklearn.set_config\("):
            model.fit(X, y, groups=groups)


@pytest.mark.parametrize("n_jobs", [None, 2])
def test_groups_and_weights_reach_the_ensembles_othr_members(routing, n_jobs):
    X, y, weights, groups = _data(5, n_samples=240)
    member = OTHRClassifier(LinearSVC(random_state=0).set_fit_request(sample_weight=True), cv=GroupKFold(2),
                            tolerance=0.0).set_fit_request(sample_weight=True)
    ensemble = EnsembleOTHRClassifier(member, n_estimators=3, max_samples=150, threshold="member",
                                      random_state=0, n_jobs=n_jobs).fit(X, y, sample_weight=weights, groups=groups)
    plan = sklearn.base.clone(ensemble).plan_members(y)
    for fitted, seed, spec in zip(ensemble.estimators_, plan.seeds, plan.members):
        bag = spec.draw_bag(y, seed).bag
        alone = sklearn.base.clone(member).set_params(random_state=int(seed), estimator__random_state=int(seed))
        alone.fit(X[bag], y[bag], sample_weight=weights[bag], groups=groups[bag])
        assert fitted.threshold_ == alone.threshold_
        np.testing.assert_array_equal(fitted.decision_function(X), alone.decision_function(X))


def test_the_ensemble_with_weights_routed_equals_it_without_routing():
    X, y, weights, _ = _data(6, n_samples=240)
    make = lambda: EnsembleOTHRClassifier(LinearSVC(random_state=0), n_estimators=3, random_state=0)  # noqa: E731
    plain = make().fit(X, y, sample_weight=weights)
    with sklearn.config_context(enable_metadata_routing=True):
        routed = EnsembleOTHRClassifier(LinearSVC(random_state=0).set_fit_request(sample_weight=True), n_estimators=3,
                                        random_state=0).fit(X, y, sample_weight=weights)
    np.testing.assert_array_equal(plain.decision_function(X), routed.decision_function(X))
