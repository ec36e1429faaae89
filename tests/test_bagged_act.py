"""BaggedACTClassifier: ACT members on class-balanced bags, and its members fanned out through the fold engine's hook.

Truths: each member is the plain ``ACTClassifier`` fitted on its bag's rows;
a fold of a job over a store (members as tasks, each reading its bag's rows
from the store) gives the record of the sequential reference
(``reference_fold``: the estimator's own in-memory ``fit`` in a scikit-learn
pipeline); a job's saved model is ``fit`` on the min-max scaled rows.
"""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.preprocessing import MinMaxScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from dimbsvm.datasets import make_imbalanced
from dimbsvm.estimators import make_estimator
from dimbsvm.fold_data.context import PlansFoldFit
from dimbsvm.jobs import JobData, run_job, validate_job
from dimbsvm.artifacts import load_artifact
from dimbsvm.model_selection.folds import FoldSetup, FoldSpec, add_fold, run_folds
from dimbsvm.model_selection.splits import minority_class, repeat_splits
from dimbsvm.parallel import TaskPlan
from dimbsvm.store import StoreRows, ingest
from dimbsvm.svm import ACTClassifier, BaggedACTClassifier

METRICS = ("g_mean", "f_measure", "auc")
MEMBER = ACTClassifier(max_iter=2)


@pytest.fixture(scope="module")
def small():
    X, y = make_imbalanced(n_samples=500, n_features=5, minority_fraction=0.1, random_state=3)
    return np.asarray(X), np.asarray(y)


def test_bags_are_class_balanced_draws_without_replacement(small):
    _, y = small
    model = BaggedACTClassifier(MEMBER, n_estimators=4, max_samples=80, random_state=0)
    bags = model._bags(y)
    n_min = int((y == bags.pos_label).sum())
    assert bags.pos_label == minority_class(y)
    for positions, labels in zip(bags.positions, bags.labels):
        assert positions.size == 80 and np.unique(positions).size == 80  # no row twice
        assert int((y[positions] == bags.pos_label).sum()) == min(n_min, 40)
        np.testing.assert_array_equal(labels, y[positions])
    assert len({tuple(p) for p in bags.positions}) == 4  # each member its own draw


def test_members_are_act_fitted_on_their_bags(small):
    X, y = small
    model = BaggedACTClassifier(MEMBER, n_estimators=3, max_samples=100, random_state=1).fit(X, y)
    total = np.zeros(len(y))
    for member, positions, seed in zip(model.estimators_, model.bags_, model._bags(y).seeds):
        direct = clone(MEMBER).set_params(random_state=int(seed)).fit(X[positions], y[positions])
        np.testing.assert_array_equal(member.decision_function(X), direct.decision_function(X))
        total += direct.decision_function(X)
    np.testing.assert_allclose(model.decision_function(X), total / 3, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(model.predict(X), model.classes_[(model.decision_function(X) > 0).astype(int)])


def test_bad_parameters_are_named():
    X, y = make_imbalanced(n_samples=60, n_features=3, minority_fraction=0.2, random_state=0)
    with pytest.raises(ValueError, match="max_samples"):
        BaggedACTClassifier(max_samples=1).fit(X, y)
    with pytest.raises(ValueError, match="n_estimators"):
        BaggedACTClassifier(n_estimators=0).fit(X, y)


def test_a_store_fold_fans_members_out_through_the_hook(small, tmp_path):
    X, y = small
    assert isinstance(BaggedACTClassifier(), PlansFoldFit)
    store = ingest((X.astype(np.float32), y), tmp_path / "data.zarr", chunk_rows=64)
    train, test = repeat_splits(y, n_splits=3, seed=0)[0]
    plan = TaskPlan()
    setup = FoldSetup(BaggedACTClassifier(MEMBER, n_estimators=3, max_samples=60, random_state=0), minority_class(y),
                      metrics=METRICS)
    add_fold(plan, FoldSpec((0, 0), train, test), setup, X=plan.share(StoreRows(store.path, store.X.shape)),
             y=plan.share(y), labels=y, block_rows=64)
    names = [task.name for task in plan.tasks]
    assert (names.count("bag"), names.count("member"), names.count("assemble")) == (1, 3, 1)


def test_store_folds_equal_the_sequential_reference(scheduler, small, sequential_fold, tmp_path):
    X, y = small
    store = ingest((X.astype(np.float32), y), tmp_path / "data.zarr", chunk_rows=64)
    X32 = X.astype(np.float32).astype(np.float64)  # what the store holds
    estimator = BaggedACTClassifier(MEMBER, n_estimators=3, max_samples=60, random_state=4)
    keys = [(0, 1), (2, 0)]
    splits = {seed: repeat_splits(y, n_splits=3, seed=seed) for seed in (0, 2)}
    specs = [FoldSpec((s, f), *splits[s][f]) for s, f in keys]
    setup = FoldSetup(estimator, minority_class(y), scaler="minmax", impute="none", metrics=METRICS)
    results, _ = run_folds(setup, StoreRows(store.path, store.X.shape), y, specs, client=scheduler, retries=0)
    for (s, f), result in zip(keys, results):
        expected = sequential_fold(X32, y, estimator, n_splits=3, seed=s, fold=f)
        for name in METRICS:
            assert result.record[name] == pytest.approx(expected[name], rel=1e-12, abs=1e-12), name


def test_a_job_saves_the_model_fit_gives(client, small, tmp_path):
    X, y = small
    params = {"n_estimators": 2, "max_samples": 80, "random_state": 3}
    job = validate_job({"name": "bagged", "data": {"source": "unused"},
                        "estimator": {"name": "bagged_act", "params": params},
                        "cv": {"n_splits": 3, "n_repeats": 1, "random_state": 0}, "metrics": list(METRICS)})
    run_job(job, client, out=tmp_path / "run", progress=False, data=JobData(X=X, y=y, meta={"name": "s"}))
    model, _ = load_artifact(tmp_path / "run" / "model")
    scaled = MinMaxScaler().fit_transform(X)
    direct = make_estimator("bagged_act", params).fit(scaled, y)
    np.testing.assert_array_equal(model.decision_function(X), direct.decision_function(scaled))


@parametrize_with_checks([BaggedACTClassifier(ACTClassifier(max_iter=1), n_estimators=2, max_samples=40,
                                              random_state=0)],
                         expected_failed_checks=lambda estimator: {"check_sample_weight_equivalence_on_dense_data": (
                             "bags are drawn from the rows, not the weights, and an ACT member does not take a "
                             "weight as a repeat either (test_act.py's _WEIGHTS_ARE_NOT_REPEATS)")})
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_each_member_is_act_fitted_on_its_bag_with_the_bags_weights():
    X, y = make_imbalanced(300, n_features=3, minority_fraction=0.2, random_state=2)
    X = MinMaxScaler().fit_transform(X)
    weights = np.random.RandomState(2).uniform(0.1, 3.0, size=len(y))
    bagged = BaggedACTClassifier(ACTClassifier(max_iter=1), n_estimators=3, max_samples=80, random_state=0).fit(
        X, y, sample_weight=weights)
    for member, bag in zip(bagged.estimators_, bagged.bags_):
        alone = ACTClassifier(max_iter=1, random_state=member.random_state).fit(X[bag], y[bag],
                                                                                sample_weight=weights[bag])
        np.testing.assert_array_equal(member.decision_function(X), alone.decision_function(X))
    unweighted = BaggedACTClassifier(ACTClassifier(max_iter=1), n_estimators=3, max_samples=80,
                                     random_state=0).fit(X, y)
    assert not np.allclose(unweighted.decision_function(X), bagged.decision_function(X))
