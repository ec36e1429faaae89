"""EnSVM-OTHR (dimbsvm.svm.ensemble): the vote, the shared threshold, probabilities, any number of workers, param_grid."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression
from sklearn.svm import SVC, LinearSVC

from dimbsvm.metrics import g_mean
from dimbsvm.svm import (
    EnsembleOTHRClassifier,
    fit_member,
)
from dimbsvm.svm.ensemble import PAPER_PARAMS as ENSEMBLE_PAPER
from dimbsvm.svm.ensemble import pooled_oob_margins
from dimbsvm.svm.threshold import (
    othr_threshold,
)
from svm_cases import imbalanced as _imbalanced


# --- EnSVM-OTHR --------------------------------------------------------------------------


def test_ensemble_paper_setting_and_vote():
    X, y = _imbalanced(2, n_samples=150)
    ensemble = EnsembleOTHRClassifier(n_estimators=7, random_state=0, **ENSEMBLE_PAPER).fit(X, y)
    assert ensemble.get_params()["bootstrap"] == "plain"
    assert not hasattr(ensemble, "threshold_")
    assert len(ensemble.members_) == len(ensemble.estimators_) == 7
    assert all(member.margins == "train" for member in ensemble.members_)
    shifted = ensemble.optimal_thresholds_ != 0
    ratio = ensemble.thresholds_ / np.where(shifted, ensemble.optimal_thresholds_, 1.0)
    assert shifted.any()
    assert np.all(np.abs(ratio[shifted] - 1) <= 0.1)  # eq. 25
    assert len(set(ratio[shifted])) == shifted.sum()  # one perturbation per member
    margins = np.stack([member.shifted_margin(X) for member in ensemble.members_])
    np.testing.assert_allclose(ensemble.decision_function(X), margins.mean(axis=0))
    votes = (margins > 0).sum(axis=0)
    np.testing.assert_array_equal(ensemble.predict(X), (2 * votes >= 7).astype(int))


def test_ensemble_vote_tie_goes_to_minority():
    X, y = _imbalanced(2)
    ensemble = EnsembleOTHRClassifier(n_estimators=2, random_state=1, **ENSEMBLE_PAPER).fit(X, y)
    votes = np.stack([member.shifted_margin(X) > 0 for member in ensemble.members_]).sum(axis=0)
    assert (votes == 1).any()
    np.testing.assert_array_equal(ensemble.predict(X)[votes == 1], 1)


def test_members_are_rebuilt_from_seeds():
    X, y = _imbalanced(2)
    ensemble = EnsembleOTHRClassifier(n_estimators=3, random_state=0, **ENSEMBLE_PAPER).fit(X, y)
    member = fit_member(X, y, int(ensemble.seeds_[1]), pos_label=1)
    assert member.threshold == ensemble.thresholds_[1]
    np.testing.assert_array_equal(
        member.estimator.support_, ensemble.estimators_[1].support_
    )


@pytest.mark.parametrize(
    "params",
    [
        dict(bootstrap="stratified", threshold="member", member_margins="oob"),
        dict(bootstrap="balanced", threshold="member", member_margins="cv", cv=3),
        dict(bootstrap="plain", threshold="member", class_weight="balanced", objective="f_measure"),
        dict(bootstrap="balanced", threshold="member", max_samples=0.5, perturbation=0.0),
        dict(bootstrap="stratified", threshold="member", max_samples=40, tolerance=0.01),
        dict(bootstrap="balanced", candidates="othr", smoothing=None),
        dict(bootstrap="plain", objective="g_f_mean", min_precision=0.3),
        dict(class_weight="balanced", smoothing=0.2, tolerance=0.0),
    ],
)
def test_ensemble_refinements(params):
    X, y = _imbalanced(7, n_samples=150)
    ensemble = EnsembleOTHRClassifier(n_estimators=4, random_state=0, **params).fit(X, y)
    again = EnsembleOTHRClassifier(n_estimators=4, random_state=0, **params).fit(X, y)
    np.testing.assert_array_equal(ensemble.thresholds_, again.thresholds_)
    assert g_mean(y, ensemble.predict(X)) > 0.5
    if params.get("perturbation") == 0.0:
        np.testing.assert_array_equal(ensemble.thresholds_, ensemble.optimal_thresholds_)
    if "class_weight" in params:
        assert ensemble.estimators_[0].class_weight == "balanced"
    if "member_margins" in params:
        assert {member.margins for member in ensemble.members_} == {params["member_margins"]}


def test_pooled_threshold_is_searched_on_pooled_out_of_bag_margins():
    X, y = _imbalanced(7, n_samples=160)
    ensemble = EnsembleOTHRClassifier(n_estimators=6, random_state=0).fit(X, y)
    assert ensemble.threshold == "pooled_oob" and ensemble.threshold_margins_ == "oob"
    np.testing.assert_array_equal(ensemble.thresholds_, ensemble.threshold_)
    assert {member.margins for member in ensemble.members_} == {"pooled_oob"}
    assert all(member.oob_rows is None for member in ensemble.members_)  # dropped after pooling
    # rebuild the members from their seeds and pool their out-of-bag margins independently
    params = dict(pos_label=1, bootstrap="stratified", margins="none", perturbation=0.0)
    rebuilt = [fit_member(X, y, int(seed), keep_oob=True, **params) for seed in ensemble.seeds_]
    total, count = np.zeros(y.size), np.zeros(y.size)
    for member in rebuilt:
        margins = member.estimator.decision_function(X)
        in_bag = np.isin(np.arange(y.size), member.oob_rows, invert=True)
        total += np.where(in_bag, 0.0, margins)
        count += ~in_bag
        np.testing.assert_allclose(member.oob_margins, margins[member.oob_rows])
    pooled, counts = pooled_oob_margins(rebuilt, y.size)
    np.testing.assert_array_equal(counts, count)
    covered = count > 0
    np.testing.assert_allclose(pooled[covered], total[covered] / count[covered])
    assert np.isnan(pooled[~covered]).all()
    theta, table = othr_threshold(
        X[covered], y[covered], pooled[covered], candidates="midpoints", smoothing="silverman",
        tolerance=0.005,
    )
    assert ensemble.threshold_ == theta
    np.testing.assert_array_equal(ensemble.candidates_["theta"], table["theta"])
    # prediction is the sign of the shifted mean margin, which decision_function is
    mean = np.mean([m.estimator.decision_function(X) for m in rebuilt], axis=0)
    np.testing.assert_allclose(ensemble.decision_function(X), mean + theta)
    np.testing.assert_array_equal(ensemble.predict(X), (mean + theta > 0).astype(int))


def test_pooled_threshold_with_eq23_candidates_names_training_rows():
    X, y = _imbalanced(4, n_samples=150)
    ensemble = EnsembleOTHRClassifier(
        n_estimators=5, candidates="othr", smoothing=None, tolerance=0.0, random_state=1
    ).fit(X, y)
    table = ensemble.candidates_
    rows = table["sample"][1:]
    assert rows.size and np.all(y[rows] == 1) and np.all(y[table["neighbour"][1:]] == 0)
    assert ensemble.threshold_ in table["theta"]


def test_pooled_threshold_falls_back_to_train_margins(caplog):
    # A single minority row is in every stratified bag: no out-of-bag minority row.
    rng = np.random.RandomState(0)
    X = rng.normal(size=(30, 2))
    y = np.zeros(30, dtype=int)
    y[0] = 1
    X[0] += 2
    with caplog.at_level("WARNING", logger="dimbsvm.svm.ensemble"):
        ensemble = EnsembleOTHRClassifier(n_estimators=3, random_state=0).fit(X, y)
    assert ensemble.threshold_margins_ == "train"
    assert "searched on the mean margins of all training rows" in caplog.text
    assert {member.margins for member in ensemble.members_} == {"pooled_train"}


def test_refitting_in_member_mode_drops_the_shared_threshold():
    X, y = _imbalanced(2)
    ensemble = EnsembleOTHRClassifier(n_estimators=3, random_state=0).fit(X, y)
    assert hasattr(ensemble, "threshold_")
    ensemble.set_params(threshold="member").fit(X, y)
    assert not hasattr(ensemble, "threshold_") and not hasattr(ensemble, "candidates_")




def test_class_weight_needs_a_base_that_has_it():
    X, y = _imbalanced(0)
    with pytest.raises(ValueError, match="class_weight='balanced' needs a base estimator"):
        EnsembleOTHRClassifier(LinearDiscriminantAnalysis(), class_weight="balanced").fit(X, y)
    EnsembleOTHRClassifier(LogisticRegression(), n_estimators=2, class_weight="balanced").fit(X, y)


def _fitted_on(client, X, y, **params):
    ensemble = EnsembleOTHRClassifier(n_estimators=6, random_state=3, client=client, **params)
    return ensemble.fit(X, y)


def _assert_identical(a, b, X):
    np.testing.assert_array_equal(a.seeds_, b.seeds_)
    assert getattr(a, "threshold_", None) == getattr(b, "threshold_", None)
    np.testing.assert_array_equal(a.thresholds_, b.thresholds_)
    np.testing.assert_array_equal(a.optimal_thresholds_, b.optimal_thresholds_)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))


@pytest.mark.filterwarnings("ignore:Port 8787 is already in use")
@pytest.mark.parametrize(
    "params",
    [dict(bootstrap="stratified", threshold="member", member_margins="oob"), dict(),
     dict(param_grid={"C": [0.5, 4.0], "gamma": [0.5, "scale"]}, screen_members=2, screen_survivors=2,
          top_candidates=1)],
    ids=["member-oob", "defaults-pooled-oob", "screened-grid"],
)
@pytest.mark.parametrize("n_workers,processes", [(1, False), (2, False), (2, True)])
def test_ensemble_identical_on_any_number_of_workers(n_workers, processes, params):
    distributed = pytest.importorskip("distributed")
    X, y = _imbalanced(8, n_samples=120)
    in_process = _fitted_on(None, X, y, **params)
    with distributed.LocalCluster(
        n_workers=n_workers, threads_per_worker=1, processes=processes, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        on_cluster = _fitted_on(client, X, y, **params)
        # the active client is found without being passed
        active = _fitted_on(None, X, y, **params)
        if not processes:
            # fitted inside a task: members are fitted in that task, not submitted from it, nor handed to
            # processes (n_jobs is the cluster's to give)
            inside = client.submit(_fitted_on, None, X, y, n_jobs=2, **params).result(timeout=60)
            _assert_identical(in_process, inside, X)
        restored = pickle.loads(pickle.dumps(on_cluster))
        assert on_cluster.client is client and restored.client is None
        assert clone(on_cluster).client is client
    _assert_identical(in_process, on_cluster, X)
    _assert_identical(in_process, active, X)
    _assert_identical(in_process, restored, X)




@pytest.mark.parametrize(
    "params",
    [dict(), dict(bootstrap="stratified", threshold="member", member_margins="oob", estimator=LinearSVC()),
     dict(param_grid={"C": [0.5, 4.0], "gamma": [0.5, "scale"]}, screen_members=2, screen_survivors=2,
          top_candidates=1)],
    ids=["defaults-pooled-oob", "member-oob-liblinear", "screened-grid"],
)
def test_ensemble_identical_for_any_n_jobs(params):
    X, y = _imbalanced(8, n_samples=160)
    in_order = _fitted_on(None, X, y, **params)
    for n_jobs in (2, -1):
        on_processes = _fitted_on(None, X, y, n_jobs=n_jobs, **params)
        _assert_identical(in_order, on_processes, X)
        assert on_processes.n_jobs == n_jobs


def test_n_jobs_must_be_a_non_zero_integer():
    X, y = _imbalanced(0)
    with pytest.raises(ValueError, match="n_jobs must be None or a non-zero integer"):
        EnsembleOTHRClassifier(n_estimators=2, n_jobs=0).fit(X, y)
    with pytest.raises(ValueError, match="'n_jobs' parameter"):
        EnsembleOTHRClassifier(n_estimators=2, n_jobs=1.5).fit(X, y)


def test_pooled_threshold_with_thinned_candidates_stays_close():
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=3000, weights=[0.9], random_state=0)
    full = EnsembleOTHRClassifier(n_estimators=3, max_candidates=None, random_state=0).fit(X, y)
    thin = EnsembleOTHRClassifier(n_estimators=3, max_candidates=200, random_state=0).fit(X, y)
    assert full.candidates_["theta"].size > 2000 and thin.candidates_["theta"].size <= 200
    # every kept candidate scores exactly as in the full table
    common = np.isin(full.candidates_["theta"], thin.candidates_["theta"])
    np.testing.assert_allclose(np.sort(full.candidates_["score"][common]), np.sort(thin.candidates_["score"]))




def test_ensemble_probabilities_are_calibrated_like_calibratedclassifiercv():
    """Platt on the pooled out-of-bag margins (one fit) against CalibratedClassifierCV (5 more fits), held out."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.metrics import log_loss

    X, y = make_classification(n_samples=4000, n_features=8, weights=[0.9], class_sep=0.8, flip_y=0.02,
                               random_state=0)
    train, test = slice(0, 2000), slice(2000, None)
    ours = EnsembleOTHRClassifier(n_estimators=10, probability=True, random_state=0).fit(X[train], y[train])
    reference = CalibratedClassifierCV(EnsembleOTHRClassifier(n_estimators=10, random_state=0), method="sigmoid",
                                       cv=5).fit(X[train], y[train])
    proba = ours.predict_proba(X[test])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert log_loss(y[test], proba) <= 1.05 * log_loss(y[test], reference.predict_proba(X[test])) + 0.005
    assert abs(proba[:, 1].mean() - y[test].mean()) < 0.02  # the minority's share, not the 0.5 of a shifted cut
    # the probability grows with the decision value (same ranking, so the same ROC-AUC)
    order = np.argsort(ours.decision_function(X[test]))
    assert np.all(np.diff(proba[order, 1]) >= 0)




# --- EnsembleOTHRClassifier(param_grid=...): settings ranked on out-of-bag margins -------------------------

GRID = {"C": [0.1, 1.0, 10.0], "gamma": [0.5, "scale"]}


def _by_hand_oob_auc(X, y, seeds, setting):
    """ROC-AUC of the pooled out-of-bag margins of members fitted one by one with ``fit_member``."""
    from sklearn.metrics import roc_auc_score

    total, count = np.zeros(len(y)), np.zeros(len(y))
    for seed in seeds:
        member = fit_member(X, y, int(seed), pos_label=1, estimator=SVC(**setting), bootstrap="stratified",
                            margins="none", perturbation=0.0, keep_oob=True)
        total[member.oob_rows] += member.oob_margins
        count[member.oob_rows] += 1
    seen = count > 0
    return roc_auc_score(y[seen], total[seen] / count[seen])


def test_grid_keeps_the_settings_of_best_out_of_bag_auc_computed_by_hand():
    X, y = make_classification(n_samples=400, n_features=6, weights=[0.88], flip_y=0.03, random_state=5)
    model = EnsembleOTHRClassifier(n_estimators=4, param_grid=GRID, top_candidates=2, random_state=1).fit(X, y)
    seeds = np.random.RandomState(1).randint(np.iinfo(np.int32).max, size=4)
    by_hand = [(_by_hand_oob_auc(X, y, seeds, setting), setting)
               for setting in [{"C": c, "gamma": g} for c in GRID["C"] for g in GRID["gamma"]]]
    np.testing.assert_allclose(model.search_results_["oob_auc"], [auc for auc, _ in by_hand], rtol=1e-12)
    best_two = [setting for _, setting in sorted(by_hand, key=lambda t: -t[0])[:2]]
    assert model.best_params_ == best_two
    assert len(model.members_) == 8 and model.search_results_["kept"].sum() == 2
    assert {m.estimator.C for m in model.members_} == {s["C"] for s in best_two}


def test_a_grid_of_one_setting_is_the_plain_ensemble_on_another_scale():
    X, y = make_classification(n_samples=500, n_features=5, weights=[0.9], flip_y=0.03, random_state=6)
    plain = EnsembleOTHRClassifier(SVC(C=2.0), n_estimators=4, random_state=0).fit(X[:350], y[:350])
    grid = EnsembleOTHRClassifier(n_estimators=4, param_grid={"C": [2.0]}, random_state=0).fit(X[:350], y[:350])
    np.testing.assert_array_equal(grid.predict(X[350:]), plain.predict(X[350:]))
    ratio = grid.decision_function(X[350:]) / plain.decision_function(X[350:])
    np.testing.assert_allclose(ratio, 1.0 / grid.search_results_["oob_spread"][0], rtol=1e-9)


def test_grid_is_refused_where_it_cannot_work():
    X, y = _imbalanced(0, n_samples=200)
    with pytest.raises(ValueError, match="'degree_of_freedom', not parameter"):
        EnsembleOTHRClassifier(n_estimators=2, param_grid={"degree_of_freedom": [1]}).fit(X, y)
    with pytest.raises(ValueError, match="needs threshold='pooled_oob'"):
        EnsembleOTHRClassifier(n_estimators=2, param_grid={"C": [1.0]}, threshold="member").fit(X, y)


def test_screening_gives_the_best_screened_settings_all_their_members():
    """Successive halving against brute force: every setting's members fitted by hand, ranked on the first two."""
    X, y = make_classification(n_samples=400, n_features=6, weights=[0.88], flip_y=0.03, random_state=5)
    settings = [{"C": c, "gamma": g} for c in GRID["C"] for g in GRID["gamma"]]
    seeds = np.random.RandomState(1).randint(np.iinfo(np.int32).max, size=4)
    screen = np.array([_by_hand_oob_auc(X, y, seeds[:2], s) for s in settings])
    survivors = np.argsort(-screen, kind="stable")[:3]
    full = {i: _by_hand_oob_auc(X, y, seeds, settings[i]) for i in survivors}
    kept = sorted(full, key=lambda i: -full[i])[:2]

    model = EnsembleOTHRClassifier(n_estimators=4, param_grid=GRID, top_candidates=2, screen_members=2,
                                   screen_survivors=3, random_state=1).fit(X, y)
    results = model.search_results_
    np.testing.assert_allclose(results["screen_oob_auc"], screen, rtol=1e-12)
    np.testing.assert_array_equal(np.flatnonzero(results["survived"]), np.sort(survivors))
    np.testing.assert_allclose(results["oob_auc"][survivors], [full[i] for i in survivors], rtol=1e-12)
    assert np.isnan(results["oob_auc"][~results["survived"]]).all()
    assert model.best_params_ == [settings[i] for i in kept]
    # the same model as the unscreened ensemble over the survivors alone: same bags, same members
    unscreened = EnsembleOTHRClassifier(n_estimators=4, param_grid=[{k: [v] for k, v in settings[i].items()}
                                                                    for i in survivors],
                                        top_candidates=2, random_state=1).fit(X, y)
    np.testing.assert_array_equal(model.decision_function(X), unscreened.decision_function(X))
    assert model.threshold_ == unscreened.threshold_


def test_screening_fits_fewer_members_and_is_fitted_whole(monkeypatch):
    X, y = make_classification(n_samples=300, n_features=5, weights=[0.9], flip_y=0.03, random_state=7)
    # counted in the plan the fit runs, so that it holds on a client a previous test left active too
    from dimbsvm.fold_data import one_fold

    fits = []
    real = one_fold.run_plan

    def counting(plan, **how):
        for task in plan.tasks:
            args = task.kwargs
            fits.append(len(args["parts"]) if "parts" in args else len(args["positions"]) if "positions" in args
                        else 1 if "part" in args else 0)
        return real(plan, **how)

    monkeypatch.setattr(one_fold, "run_plan", counting)
    model = EnsembleOTHRClassifier(n_estimators=5, param_grid=GRID, screen_members=2, screen_survivors=2,
                                   random_state=0)
    model.fit(X, y)
    assert sum(fits) == model.n_member_fits() == 6 * 2 + 2 * 3
    assert not model.plans_members_up_front()
    with pytest.raises(ValueError, match="cannot be planned before fit"):
        clone(model).plan_members(y)
    # screening that screens nothing is the plain grid, planned up front
    for params in (dict(screen_members=5), dict(screen_survivors=6)):
        plain = clone(model).set_params(**params)
        assert plain.plans_members_up_front() and plain.n_member_fits() == 30
        np.testing.assert_array_equal(plain.fit(X, y).decision_function(X),
                                      clone(model).set_params(screen_members=None).fit(X, y).decision_function(X))


def test_recommended_is_an_unfitted_grid_ensemble_that_fits_with_and_without_a_client():
    from dimbsvm import recommended
    from dimbsvm.recommended import RECOMMENDED_GRID

    model = recommended(random_state=0)
    assert model.param_grid == RECOMMENDED_GRID and not hasattr(model, "members_")
    X, y = make_classification(n_samples=300, n_features=5, weights=[0.9], flip_y=0.03, random_state=7)
    fitted = model.set_params(n_estimators=2).fit(X, y)
    assert len(fitted.members_) == 2 * fitted.top_candidates and len(fitted.search_results_["oob_auc"]) == 32
    assert {m.estimator.class_weight for m in fitted.members_} <= {None, "balanced"}
