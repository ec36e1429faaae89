"""Defaults that scale (dimbsvm.svm.scaled_defaults): nothing changes up to LARGE_N training rows; above, the
documented replacements, each checked against the same estimator built with them explicitly."""

import logging

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.svm import SVC, LinearSVC

from dimbsvm.estimators import make_estimator
from dimbsvm.svm import EnsembleOTHRClassifier, OTHRClassifier, THRClassifier
from dimbsvm.svm.scaled_defaults import LARGE_N, scaled_defaults, with_scaled_defaults
from svm_cases import imbalanced

#: The base SVM the defaults stood for before they scaled, written out.
OLD_SVM = SVC(kernel="rbf", C=1.0, gamma="scale")


def _large(seed=0):
    """LARGE_N + 500 rows, 10 % minority: just above the threshold, majority below the exact kNN limit."""
    return make_classification(n_samples=LARGE_N + 500, n_features=6, n_informative=4, weights=[0.9],
                               flip_y=0.01, random_state=seed)


def _shown(scaled):
    """``scaled_defaults`` with estimators as their repr (estimators do not compare equal)."""
    return {name: repr(value) if hasattr(value, "get_params") else value for name, value in scaled.items()}


def _same_fit(a, b, X):
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


def test_the_threshold_is_above_every_keel_set_and_the_rule_switches_just_above_it():
    assert LARGE_N >= 3 * 5_500  # the largest KEEL sets have about 5,500 rows
    for estimator in (OTHRClassifier(), THRClassifier(), EnsembleOTHRClassifier()):
        assert scaled_defaults(estimator, LARGE_N, LARGE_N // 10) == {}
        assert with_scaled_defaults(estimator, LARGE_N) is estimator
    assert _shown(scaled_defaults(OTHRClassifier(), LARGE_N + 1)) == {"estimator": "LinearSVC()"}
    assert _shown(scaled_defaults(THRClassifier(), LARGE_N + 1)) == {"estimator": "LinearSVC()"}
    assert _shown(scaled_defaults(EnsembleOTHRClassifier(), LARGE_N + 1)) == {"estimator": "LinearSVC()",
                                                                             "max_samples": LARGE_N}
    # a balanced bag is twice the minority: capped only when that is above LARGE_N (the members: above LARGE_N rows)
    balanced = EnsembleOTHRClassifier(bootstrap="balanced")
    assert _shown(scaled_defaults(balanced, 10**6, LARGE_N // 2)) == {"estimator": "LinearSVC()"}
    assert _shown(scaled_defaults(balanced, 10**6, LARGE_N // 2 + 1)) == {"estimator": "LinearSVC()",
                                                                        "max_samples": LARGE_N}
    # param_grid's settings name the RBF default's parameters: its members stay RBF SVMs
    assert scaled_defaults(EnsembleOTHRClassifier(param_grid={"C": [1, 2]}), 10**6) == {"max_samples": LARGE_N}


@pytest.mark.parametrize("estimator", [
    OTHRClassifier(estimator=OLD_SVM), OTHRClassifier(estimator=LinearSVC(C=0.5)), THRClassifier(estimator=OLD_SVM),
    EnsembleOTHRClassifier(max_samples=None), EnsembleOTHRClassifier(max_samples=0.5),
    EnsembleOTHRClassifier(max_samples=50_000), EnsembleOTHRClassifier(estimator=LinearSVC()),
    # a base parameter set in a job makes the base an explicit RBF SVC (ensemble: its bags still cap)
    make_estimator("othr", {"estimator__C": 2.0}), make_estimator("thr", {"estimator__C": 2.0}),
])
def test_explicit_settings_are_never_replaced(estimator):
    scaled = scaled_defaults(estimator, 10**7, 10**5)
    if isinstance(estimator, EnsembleOTHRClassifier):  # what was left at its default is replaced, nothing else
        expected = ({"max_samples": LARGE_N} if estimator.max_samples == "auto" else {}) | (
            {"estimator": "LinearSVC()"} if estimator.estimator is None else {})
        assert _shown(scaled) == expected
    else:
        assert scaled == {}


@pytest.mark.parametrize("make, old", [
    (lambda: OTHRClassifier(), lambda: OTHRClassifier(estimator=OLD_SVM)),
    (lambda: THRClassifier(), lambda: THRClassifier(estimator=OLD_SVM)),
    (lambda: EnsembleOTHRClassifier(random_state=0),
     lambda: EnsembleOTHRClassifier(estimator=OLD_SVM, max_samples=None, random_state=0)),
    (lambda: EnsembleOTHRClassifier(bootstrap="balanced", random_state=1),
     lambda: EnsembleOTHRClassifier(estimator=OLD_SVM, bootstrap="balanced", max_samples=None, random_state=1)),
    # the registry's defaults, as jobs build them, against the registry's explicit SVC of before
    (lambda: make_estimator("othr"), lambda: OTHRClassifier(estimator=OLD_SVM)),
    (lambda: make_estimator("thr"), lambda: THRClassifier(estimator=OLD_SVM)),
    (lambda: make_estimator("ensemble_othr", {"random_state": 3}),
     lambda: EnsembleOTHRClassifier(estimator=OLD_SVM, max_samples=None, random_state=3)),
])
def test_below_the_threshold_the_default_is_the_old_configuration_bit_for_bit(make, old):
    X, y = imbalanced(4, n_samples=300)
    new, reference = make().fit(X, y), old().fit(X, y)
    assert new.scaled_defaults_ == {}
    _same_fit(new, reference, X)
    assert new.threshold_ == reference.threshold_
    assert type(new.estimators_[0] if hasattr(new, "estimators_") else new.estimator_) is SVC
    if isinstance(new, EnsembleOTHRClassifier):
        assert new.max_samples_ is None
        np.testing.assert_array_equal(new.seeds_, reference.seeds_)


def test_othr_and_thr_above_the_threshold_are_linear_svc_members_explicitly(caplog):
    X, y = _large()
    for Estimator in (THRClassifier, OTHRClassifier):
        with caplog.at_level(logging.INFO, logger="dimbsvm.svm.scaled_defaults"):
            default = Estimator().fit(X, y)
        assert _shown(default.scaled_defaults_) == {"estimator": "LinearSVC()"}
        assert type(default.estimator_) is LinearSVC
        assert default.get_params()["estimator"] is None  # the parameter itself is left as it was
        _same_fit(default, Estimator(estimator=LinearSVC()).fit(X, y), X)
        lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
        assert len(lines) == 1 and Estimator.__name__ in lines[0] and "estimator=LinearSVC()" in lines[0]
        caplog.clear()
    explicit = THRClassifier(estimator=LinearSVC(C=0.5)).fit(X, y)
    assert explicit.scaled_defaults_ == {} and explicit.estimator_.C == 0.5


def test_the_ensemble_above_the_threshold_draws_bags_of_large_n_rows_explicitly():
    X, y = _large(1)
    default = EnsembleOTHRClassifier(n_estimators=2, random_state=0).fit(X, y)
    assert _shown(default.scaled_defaults_) == {"estimator": "LinearSVC()", "max_samples": LARGE_N}
    assert default.max_samples_ == LARGE_N and default.get_params()["max_samples"] == "auto"
    assert default.get_params()["estimator"] is None
    assert all(type(e) is LinearSVC for e in default.estimators_)  # linear members above LARGE_N rows
    explicit = EnsembleOTHRClassifier(LinearSVC(), n_estimators=2, max_samples=20_000, random_state=0).fit(X, y)
    assert explicit.scaled_defaults_ == {}
    _same_fit(default, explicit, X)
    assert default.threshold_ == explicit.threshold_
    # each bag holds 20,000 rows, the classes in proportion: the rows no member saw are about e^-1 of n
    plan = clone(default).plan_members(y)
    assert {spec.max_samples for spec in plan.members} == {20_000}
    bag = plan.members[0].draw_bag(y, plan.seeds[0]).bag
    assert bag.size == 20_000 and abs((y[bag] == 1).mean() - (y == 1).mean()) < 1e-3


def test_an_explicit_bag_size_is_kept_above_the_threshold():
    X, y = _large(2)
    ensemble = EnsembleOTHRClassifier(LinearSVC(), n_estimators=2, max_samples=None, random_state=0)
    plan = ensemble.plan_members(y)
    assert ensemble.scaled_defaults_ == {} and ensemble.max_samples_ is None
    assert {spec.max_samples for spec in plan.members} == {None}
    assert plan.members[0].draw_bag(y, plan.seeds[0]).bag.size == y.size


def test_the_job_price_is_of_the_configuration_fit_will_use():
    from dimbsvm.jobs import JobData, validate_job
    from dimbsvm.jobs.plan_price import price_job

    def work(name, params, n):
        job = validate_job({"data": {"source": "yeast5"}, "estimator": {"name": name, "params": params},
                            "cv": {"n_splits": 3, "n_repeats": 1}})
        y = np.r_[np.zeros(n - n // 20), np.ones(n // 20)]
        return price_job(job, JobData(np.broadcast_to(np.zeros(1), (n, 32)), y, {"name": "priced"})).work

    small = 3_000  # every fit within LARGE_N: the old configuration
    assert work("ensemble_othr", {}, small) == pytest.approx(work("ensemble_othr", {"max_samples": None}, small))
    assert work("othr", {}, small) == pytest.approx(work("othr", {"estimator__C": 1.0}, small))
    big = 10**6
    assert work("ensemble_othr", {}, big) == pytest.approx(work("ensemble_othr", {"max_samples": LARGE_N}, big))
    assert work("othr", {}, big) == pytest.approx(work("othr", {"estimator": "linear_svc"}, big))
    assert work("othr", {}, big) < work("othr", {"estimator": "svc"}, big) / 100  # not priced as the RBF SVC


def test_a_job_above_the_threshold_caps_its_members_bags_as_the_explicit_setting_does(tmp_path):
    # the fold engine fits members from plan_members / fit_from_members: the same bags as max_samples=20000
    from dimbsvm.jobs import JobData, run_job, validate_job

    X, y = make_classification(n_samples=2 * LARGE_N + 4_000, n_features=6, weights=[0.9], random_state=3)
    records = {}
    for name, extra in (("default", {}), ("explicit", {"max_samples": LARGE_N}), ("uncapped", {"max_samples": None})):
        params = {"estimator": "linear_svc", "n_estimators": 2, "random_state": 0, **extra}
        job = validate_job({"name": name, "data": {"source": "unused"},
                            "estimator": {"name": "ensemble_othr", "params": params},
                            "cv": {"n_splits": 2, "n_repeats": 1, "random_state": 0}, "metrics": ["g_mean", "auc"]})
        result = run_job(job, None, out=tmp_path / name, progress=False,
                         data=JobData(X=X, y=y, meta={"name": "s"}))
        records[name] = result.folds
    assert all(fold["n_train"] > LARGE_N for fold in records["default"])
    assert records["default"] == records["explicit"]
    assert records["default"] != records["uncapped"]  # the bags' size shows in the records
