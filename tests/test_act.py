"""ACT: conformal kernels against direct computations, the rounds, errors, scikit-learn checks."""

import logging

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from sklearn.datasets import make_classification
from sklearn.svm import SVC
from sklearn.utils.estimator_checks import parametrize_with_checks

from dimbsvm.exceptions import DataError
from dimbsvm.features.kernels import kernel_block
from dimbsvm.svm import _conformal as cf
from dimbsvm.svm import act as act_module
from dimbsvm.svm.act import ACTClassifier
from dimbsvm.svm.ensemble import EnsembleOTHRClassifier


def _imbalanced(n_samples=240, weight=0.85, seed=0, n_features=4):
    X, y = make_classification(n_samples=n_samples, n_features=n_features, n_informative=min(3, n_features),
                               n_redundant=0, weights=[weight], class_sep=0.8, random_state=seed)
    X = (X - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0))  # the paper's [0, 1] scaling
    return X, y


# --- numeric kernels ----------------------------------------------------------------------------


def test_feature_space_distances_equal_explicit_feature_maps():
    rng = np.random.RandomState(0)
    X, Y = rng.normal(size=(7, 3)), rng.normal(size=(5, 3))
    # linear kernel: phi(x) = x
    assert np.allclose(cf.feature_space_sq_distances(X @ X.T), cdist(X, X, "sqeuclidean"))
    block = cf.feature_space_sq_distances(X @ Y.T, (X * X).sum(1), (Y * Y).sum(1))
    assert np.allclose(block, cdist(X, Y, "sqeuclidean"))
    # homogeneous quadratic kernel (x . y)^2: phi(x) = vec(x x^T)
    phi = np.einsum("ni,nj->nij", X, X).reshape(len(X), -1)
    assert np.allclose(cf.feature_space_sq_distances((X @ X.T) ** 2), cdist(phi, phi, "sqeuclidean"))


def _tau2_brute_force(sq, minority):
    """Eq. 14 written out: a loop over centres and their neighbours."""
    n = len(minority)
    tau2, fallback = np.zeros(n), 0
    for k in range(n):
        others = [np.sqrt(sq[k, i]) for i in range(n) if i != k]
        radius = (min(others) + max(others)) / 2
        inside = [sq[k, i] for i in range(n)
                  if i != k and minority[i] != minority[k] and np.sqrt(sq[k, i]) < radius]
        if inside:
            tau2[k] = sum(inside) / len(inside)
        else:
            fallback += 1
            tau2[k] = min(sq[k, i] for i in range(n) if minority[i] != minority[k])
    return tau2, fallback


@pytest.mark.parametrize("seed", range(5))
def test_tau2_matches_brute_force(seed):
    rng = np.random.RandomState(seed)
    X = rng.uniform(size=(9, 2))
    minority = rng.rand(9) < 0.4
    minority[:2] = [True, False]
    K = kernel_block(X, X, "rbf", gamma=2.0)
    sq = cf.feature_space_sq_distances(K)
    tau2, n_fallback = cf.adaptive_tau2(sq, minority)
    expected, expected_fallback = _tau2_brute_force(sq, minority)
    assert np.allclose(tau2, expected) and n_fallback == expected_fallback


def test_tau2_hand_checked_case():
    # centres on a line at 0 (minority), 1, 2, 10 (majority); distances compared with M_k
    x = np.array([0.0, 1.0, 2.0, 10.0])
    tau2, n_fallback = cf.adaptive_tau2((x[:, None] - x) ** 2, np.array([True, False, False, False]))
    # 0: M = (1 + 10) / 2 -> majority at 1 and 2 inside -> (1 + 4) / 2
    # 1: M = (1 + 9) / 2 -> minority at distance 1 -> 1;  2: M = 4.5 -> 4
    # 10: M = (8 + 10) / 2 = 9 < 10 -> fallback, nearest minority: 100
    assert tau2.tolist() == [2.5, 1.0, 4.0, 100.0] and n_fallback == 1
    # duplicate rows of opposite classes: tau2 is floored, never 0
    tau2, _ = cf.adaptive_tau2(np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]]),
                               np.array([True, False, False]))
    assert (tau2 > 0).all()


def test_eta_scaling_widens_minority_and_narrows_majority():
    minority = np.array([True, True, False, False, False, False, False, False])  # |SV+| = 2, |SV-| = 6
    tau2 = np.arange(1.0, 9.0)
    scaled, eta_p, eta_n = cf.eta_scaling(tau2, minority)
    assert eta_p == 3.0 and eta_n == pytest.approx(1 / 3)
    assert np.allclose(scaled[minority], 3.0 * tau2[minority])  # eq. 16
    assert np.allclose(scaled[~minority], tau2[~minority] / 3.0)  # eq. 17
    with pytest.raises(ValueError, match="both classes"):
        cf.eta_scaling(tau2, np.zeros(8, bool))


def test_ct_tau2_ignores_classes():
    x = np.array([0.0, 1.0, 3.0, 7.0])
    sq = (x[:, None] - x) ** 2
    assert np.allclose(cf.nearest_neighbour_tau2(sq, 2), [(1 + 9) / 2, (1 + 4) / 2, (4 + 9) / 2, (16 + 36) / 2])


@pytest.mark.parametrize("norm", [1, 2])
def test_conformal_factor_is_the_direct_sum(norm):
    rng = np.random.RandomState(1)
    X, centres, tau2 = rng.uniform(size=(6, 3)), rng.uniform(size=(4, 3)), rng.uniform(0.1, 1, 4)
    direct = [sum(np.exp(-np.sum(np.abs(x - c) ** norm) / t) for c, t in zip(centres, tau2)) for x in X]
    D = cf.conformal_factor(cf.input_space_distances(X, centres, norm), tau2)
    assert np.allclose(D, direct)
    assert np.allclose(cf.ConformalTransform(centres, tau2, norm, 0.5).factor(X), 0.5 * D)


def test_conformal_kernel_is_psd_and_equals_d_d_k():
    rng = np.random.RandomState(2)
    X = rng.uniform(size=(40, 3))
    K = kernel_block(X, X, "laplacian", gamma=1.0)
    D = cf.conformal_factor(cf.input_space_distances(X, X[:5], 1), np.full(5, 0.3))
    K_tilde = cf.conformal_kernel(K, D)
    assert np.allclose(K_tilde, np.diag(D) @ K @ np.diag(D))
    assert np.linalg.eigvalsh(K_tilde).min() >= -1e-10
    cf.check_positive_kernel(K_tilde)


def test_fitted_kernel_is_psd_and_finite():
    X, y = _imbalanced()
    clf = ACTClassifier(max_iter=3, tol=None, random_state=0).fit(X, y)  # tol=None: run every round
    assert len(clf.transforms_) == clf.best_round_
    K_tilde = cf.conformal_kernel(kernel_block(X, X, "rbf", gamma=clf.gamma_), clf.conformal_factor(X))
    assert np.isfinite(K_tilde).all()
    assert np.linalg.eigvalsh(K_tilde).min() >= -1e-10 * np.abs(K_tilde).max()


# --- the estimator ------------------------------------------------------------------------------


def _metric_factor(clf, x, h=1e-4):
    """Mean of the diagonal Riemannian metric of K~ at x, by finite differences (eq. 9)."""
    def k(a, b):
        a, b = a[None, :], b[None, :]
        return (clf.conformal_factor(a) * clf.conformal_factor(b)
                * kernel_block(a, b, "rbf", gamma=clf.gamma_))[0, 0]
    values = []
    for i in range(x.size):
        step = np.zeros_like(x)
        step[i] = h
        values.append((k(x + step, x + step) - 2 * k(x, x + step) + k(x, x)) / h**2)
    return float(np.mean(values))


@pytest.mark.parametrize("params", [
    {}, {"variant": "act_input"}, {"variant": "ct"}, {"conformal_distance": "feature"},
    {"conformal_norm": 1}, {"conformal_scale": "sum"},
])
def test_transformation_magnifies_around_support_vectors(monkeypatch, params):
    rng = np.random.RandomState(0)  # majority below y = 0.45, minority above y = 0.55
    X = np.vstack([np.column_stack([rng.uniform(0, 1, 160), rng.uniform(0, 0.45, 160)]),
                   np.column_stack([rng.uniform(0, 1, 30), rng.uniform(0.55, 1, 30)])])
    y = np.r_[np.zeros(160, int), np.ones(30, int)]
    _scripted_g_means(monkeypatch, [0.5, 0.9])  # keep round 1 whatever the validation says
    clf = ACTClassifier(max_iter=1, tol=None, refit=False, random_state=0,
                        **{"conformal_scale": "trace", **params}).fit(X, y)
    assert clf.best_round_ == 1
    centres = clf.transforms_[0].centers
    far = X[np.abs(X[:, 1] - 0.5) > 0.35][:20]  # far from the boundary
    D = clf.conformal_factor
    assert D(centres).mean() > 1.1 * D(far).mean()  # D is largest near the support vectors
    near_metric = np.mean([_metric_factor(clf, c) for c in centres[:20]])
    far_metric = np.mean([_metric_factor(clf, x) for x in far])
    assert near_metric > 1.2 * far_metric  # the published property: magnification near the boundary


@pytest.mark.parametrize("params", [
    {}, {"conformal_scale": "trace"}, {"conformal_distance": "feature"},
    {"conformal_distance": "feature", "cumulative": False, "conformal_norm": 1},
])
def test_decision_function_is_the_svc_on_the_transformed_kernel(monkeypatch, params):
    X, y = _imbalanced(seed=4)
    _scripted_g_means(monkeypatch, [0.1, 0.2, 0.3])  # keep round 2
    labels = np.where(y == 1, "rare", "common")  # minority is classes_[1] == "rare"
    X_test, _ = _imbalanced(seed=5)
    clf = ACTClassifier(max_iter=2, tol=None, random_state=0, **params).fit(X, labels)
    assert clf.pos_label_ == "rare" and clf.best_round_ == 2 and len(clf.transforms_) == 2
    K = kernel_block(X, X, "rbf", gamma=clf.gamma_)
    svc = SVC(kernel="precomputed").fit(cf.conformal_kernel(K, clf.conformal_factor(X)), labels)
    K_test = cf.conformal_kernel(kernel_block(X_test, X, "rbf", gamma=clf.gamma_),
                                 clf.conformal_factor(X_test), clf.conformal_factor(X))
    assert np.allclose(clf.decision_function(X_test), svc.decision_function(K_test), atol=1e-8)
    assert (clf.predict(X_test) == svc.predict(K_test)).all()
    # labels of any dtype; the minority found from counts even when it sorts first
    monkeypatch.undo()
    flipped = np.where(y == 1, "a_rare", "b_common")
    clf = ACTClassifier(max_iter=1, random_state=0).fit(X, flipped)
    assert clf.pos_label_ == "a_rare" and list(clf.classes_) == ["a_rare", "b_common"]
    assert ((clf.decision_function(X) > 0) == (clf.predict(X) == "b_common")).all()


def test_validation_rows_come_from_fit_only_and_copies_stay_together():
    X, y = _imbalanced(seed=6)
    X_test_a, _ = _imbalanced(seed=7)
    X_test_b = X_test_a[::-1] + 5.0
    a = ACTClassifier(max_iter=2, refit=False, random_state=0).fit(X, y)
    b = ACTClassifier(max_iter=2, refit=False, random_state=0).fit(X, y)
    a.predict(X_test_a), b.predict(X_test_b)  # the test data differ: nothing fitted changes
    assert a.rounds_ == b.rounds_ and np.array_equal(a.dual_coef_, b.dual_coef_)
    val = a.validation_indices_
    assert a.validation_ == "holdout" and val.max() < len(X)
    assert not np.isin(a.support_, val).any()  # the kept model never trained on validation rows
    assert abs(val.size / len(X) - 0.25) < 0.05 and y[val].sum() > 0
    bag = np.random.RandomState(0).randint(0, len(X), len(X))  # a bootstrap bag with copies
    c = ACTClassifier(max_iter=1, random_state=0).fit(X[bag], y[bag])
    in_val = np.zeros(len(X), bool)
    in_val[bag[c.validation_indices_]] = True
    trained = np.setdiff1d(np.arange(len(bag)), c.validation_indices_)
    assert not in_val[bag[trained]].any()


def _scripted_g_means(monkeypatch, values):
    calls = iter(values)
    monkeypatch.setattr(act_module, "g_mean", lambda y_true, y_pred, **_: next(calls))


def test_stopping_keeps_the_best_round(monkeypatch):
    X, y = _imbalanced(seed=8)
    _scripted_g_means(monkeypatch, [0.5, 0.7, 0.6])
    clf = ACTClassifier(max_iter=10, refit=False, random_state=0).fit(X, y)
    assert [r["validation_g_mean"] for r in clf.rounds_] == [0.5, 0.7, 0.6]
    assert clf.best_round_ == 1 and clf.stop_reason_ == "no improvement"
    assert len(clf.transforms_) == 1  # the model of round 1, not the last one
    assert all(r["n_support"] == r["n_support_minority"] + r["n_support_majority"] for r in clf.rounds_)
    _scripted_g_means(monkeypatch, [0.5, 0.6, 0.7, 0.8])
    clf = ACTClassifier(max_iter=3, random_state=0).fit(X, y)
    assert clf.best_round_ == 3 and clf.stop_reason_ == "max_iter" and len(clf.transforms_) == 3
    _scripted_g_means(monkeypatch, [0.5, 0.5005])  # a gain below tol stops the rounds
    clf = ACTClassifier(max_iter=5, tol=1e-3, random_state=0).fit(X, y)
    assert len(clf.rounds_) == 2 and clf.stop_reason_ == "no improvement"
    _scripted_g_means(monkeypatch, [0.5, 0.5])  # a tie keeps the earlier (untransformed) round
    clf = ACTClassifier(max_iter=5, random_state=0).fit(X, y)
    assert clf.best_round_ == 0 and clf.transforms_ == []
    assert np.allclose(clf.conformal_factor(X), 1.0)


def test_numerical_behaviour_is_recorded(caplog):
    X, y = _imbalanced(seed=9)
    literal = ACTClassifier(max_iter=3, tol=None, refit=False, random_state=0).fit(X, y)
    scales = [r["kernel_scale"] for r in literal.rounds_]
    assert scales[0] == 1.0 and scales[-1] > 100 * scales[1] > 100  # the kernel grows ~|SV|^2 a round
    neutral = ACTClassifier(max_iter=3, tol=None, conformal_scale="trace", random_state=0).fit(X, y)
    assert np.allclose([r["kernel_scale"] for r in neutral.rounds_], 1.0)
    iterations = [r["solver_iterations"] for r in literal.rounds_]
    assert iterations[-1] > 3 * iterations[0]  # and LIBSVM needs ever more iterations
    bound = 2 * iterations[0]
    with caplog.at_level(logging.WARNING, logger="dimbsvm.svm.act"):
        bounded = ACTClassifier(max_iter=3, tol=None, solver_max_iter=bound, random_state=0).fit(X, y)
    assert bounded.rounds_[0]["converged"] and not bounded.rounds_[-1]["converged"]
    assert bounded.stop_reason_ == "solver bound" and bounded.rounds_[-1]["solver_iterations"] <= bound
    assert f"solver_max_iter={bound}" in caplog.text


@pytest.mark.parametrize("params", [
    {"variant": "act_input"}, {"variant": "ct"}, {"conformal_norm": 1}, {"cumulative": False},
    {"conformal_scale": "mean"}, {"kernel": "laplacian"}, {"stopping_metric": "error"},
    {"class_weight": "balanced", "conformal_scale": "trace"},
])
def test_options_fit_and_predict(params):
    X, y = _imbalanced(seed=10)
    clf = ACTClassifier(max_iter=2, random_state=0, **params).fit(X, y)
    assert np.isfinite(clf.decision_function(X)).all() and set(clf.predict(X)) <= {0, 1}
    if params.get("variant") == "ct":
        assert clf.rounds_[1]["eta_p"] == 1.0  # no class scaling in Wu & Amari's transformation


def test_clear_errors():
    X, y = _imbalanced(n_samples=120)
    with pytest.raises(ValueError, match="Only binary classification"):
        ACTClassifier().fit(X, np.arange(120) % 3)
    with pytest.raises(ValueError, match="2 classes; got 1 class"):
        ACTClassifier().fit(X, np.zeros(120))
    X_nan = X.copy()
    X_nan[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ACTClassifier().fit(X_nan, y)
    with pytest.raises(DataError, match=r"120 rows exceed max_kernel_size=100.*EnsembleOTHRClassifier"):
        ACTClassifier(max_kernel_size=100).fit(X, y)
    with pytest.raises(DataError, match="not positive"):
        ACTClassifier(kernel=lambda A, B: -cdist(A, B)).fit(X, y)
    with pytest.raises(ValueError, match="too few support vectors to adapt"):
        cf.adaptive_tau2(np.ones((3, 3)), np.zeros(3, bool))
    with pytest.raises(ValueError, match="too few support vectors to adapt"):
        cf.nearest_neighbour_tau2(np.zeros((1, 1)))


def test_too_small_a_class_is_judged_on_training_rows(caplog):
    X, y = _imbalanced(n_samples=60)
    y[:] = 0
    y[:1] = 1  # one minority row: it cannot be held out
    with caplog.at_level(logging.WARNING, logger="dimbsvm.svm.act"):
        clf = ACTClassifier(max_iter=1, random_state=0).fit(X, y)
    assert clf.validation_ == "train" and clf.validation_indices_.size == 0
    assert "too small to hold out" in caplog.text


def test_ensemble_bags_act_within_the_kernel_bound():
    X, y = _imbalanced(n_samples=300, seed=11)
    base = ACTClassifier(max_iter=2, max_kernel_size=150)
    with pytest.raises(DataError, match="max_kernel_size"):
        ACTClassifier(max_kernel_size=150).fit(X, y)
    ensemble = EnsembleOTHRClassifier(base, n_estimators=3, bootstrap="stratified", max_samples=150,
                                      random_state=0).fit(X, y)
    assert all(len(member.transforms_) <= 2 for member in ensemble.estimators_)
    assert {member.random_state for member in ensemble.estimators_} == set(ensemble.seeds_.tolist())
    assert set(ensemble.predict(X)) <= {0, 1}


#: Weighting a row is not repeating it in ACT: the conformal transformation's neighbourhood widths are means over
#: the support vectors (a repeated support vector counts once per copy), and gamma="scale" reads the rows'
#: unweighted variance. Tested instead: round 0 is scikit-learn's weighted SVC, and the rounds are judged by the
#: weighted validation G-mean (test_weights_reach_every_rounds_svc_and_its_judgement).
_WEIGHTS_ARE_NOT_REPEATS = {"check_sample_weight_equivalence_on_dense_data": (
    "the conformal transformation averages over support vectors, so a repeated row weighs in its copies; "
    "see _WEIGHTS_ARE_NOT_REPEATS")}


@parametrize_with_checks([ACTClassifier(max_iter=2), ACTClassifier(max_iter=1, variant="ct"),
                          ACTClassifier(max_iter=1, conformal_distance="feature", conformal_scale="trace")],
                         expected_failed_checks=lambda estimator: _WEIGHTS_ARE_NOT_REPEATS)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_weights_reach_every_rounds_svc_and_its_judgement():
    from sklearn.metrics import recall_score

    X, y = _imbalanced(n_samples=200, seed=4)
    weights = np.random.RandomState(4).uniform(0.0, 3.0, size=len(y))
    # round 0 alone, refitted on every row: scikit-learn's own weighted RBF SVC
    act = ACTClassifier(max_iter=0, random_state=0).fit(X, y, sample_weight=weights)
    svc = SVC(kernel="rbf", gamma=act.gamma_).fit(X, y, sample_weight=weights)
    np.testing.assert_allclose(act.decision_function(X), svc.decision_function(X), atol=1e-6)
    # each round is judged by the weighted G-mean of its validation rows; round 0's model is the weighted SVC of
    # the other rows
    val = act.validation_indices_
    train = np.setdiff1d(np.arange(len(y)), val)
    on_train = SVC(kernel="rbf", gamma=act.gamma_).fit(X[train], y[train], sample_weight=weights[train])
    predicted = on_train.predict(X[val])
    expected = np.sqrt(recall_score(y[val], predicted, pos_label=1, sample_weight=weights[val])
                       * recall_score(y[val], predicted, pos_label=0, sample_weight=weights[val]))
    assert act.rounds_[0]["validation_g_mean"] == pytest.approx(expected, abs=1e-12)
    assert act.rounds_[0]["validation_error"] == pytest.approx(
        np.average(predicted != y[val], weights=weights[val]), abs=1e-12)
    # weights of one are no weights, over several rounds
    plain, ones = (ACTClassifier(max_iter=2, random_state=0).fit(X, y, sample_weight=w) for w in (None, np.ones(200)))
    np.testing.assert_array_equal(plain.decision_function(X), ones.decision_function(X))
    assert plain.rounds_ == ones.rounds_
    unweighted = ACTClassifier(max_iter=0, random_state=0).fit(X, y)
    assert not np.allclose(unweighted.decision_function(X), act.decision_function(X), atol=1e-3)
    with pytest.raises(ValueError, match="[Nn]egative"):
        ACTClassifier().fit(X, y, sample_weight=-weights)
