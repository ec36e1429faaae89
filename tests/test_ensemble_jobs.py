"""Ensemble jobs as (repeat, fold, member) tasks, against the ensemble fitted in one process.

The independent truth is :func:`dimbsvm.evaluation.evaluate_fold`: the whole
pipeline (scaler, feature stages, ``EnsembleOTHRClassifier.fit``) fitted on
the fold's training rows in one process. The fanned-out job must give the
same records to the last bit: same seeds, same bags, same rows.
"""

import json

import numpy as np
import pytest

from dimbsvm.datasets import make_imbalanced
from dimbsvm.estimators import make_estimator, make_feature
from dimbsvm.evaluation import evaluate_fold, positive_label
from dimbsvm.jobs import JobData, run_job, validate_job
from dimbsvm.jobs.artifacts import load_model, save_object
from dimbsvm.jobs.ensemble_folds import fit_fold_member, prepare_fold, run_ensemble_folds
from dimbsvm.rows import TransformedRows, map_row_blocks, take_rows
from dimbsvm.store import StoreRows, ingest

METRICS = ("g_mean", "f_measure", "auc")


@pytest.fixture(scope="module")
def small():
    X, y = make_imbalanced(n_samples=600, n_features=6, minority_fraction=0.08, random_state=2)
    return np.asarray(X), np.asarray(y)


def _reference(X, y, estimator, keys, *, n_splits, features=()):
    pos = positive_label(y)
    return [evaluate_fold(X, y, estimator=estimator, n_splits=n_splits, seed=s, fold=f, metrics=METRICS,
                          pos_label=pos, features=features) for s, f in keys]


def _same_records(actual, expected):
    for a, e in zip(actual, expected, strict=True):
        assert (a["seed"], a["fold"], a["n_train"], a["n_test"]) == (e["seed"], e["fold"], e["n_train"], e["n_test"])
        for name in METRICS + ("threshold",):
            assert a[name] == e[name], name
        assert a["member_thresholds"] == e["member_thresholds"]


def test_rows_helpers_match_numpy_indexing(tmp_path):
    X = np.arange(40.0).reshape(20, 2)
    rows = np.array([5, 1, 5, 19, 0])
    store = ingest((X.astype(np.float32), np.arange(20) % 2), tmp_path / "s.zarr", chunk_rows=3)
    handle = StoreRows(store.path, store.X.shape)
    assert handle.block_rows == 3
    np.testing.assert_array_equal(take_rows(handle, rows), X[rows])
    np.testing.assert_array_equal(map_row_blocks(lambda b: b.sum(axis=1), handle, rows), X[rows].sum(axis=1))
    scaled = TransformedRows(handle, None)
    np.testing.assert_array_equal(scaled[rows], X[rows])


def test_ensemble_job_equals_in_process_fit(client, small, tmp_path):
    X, y = small
    params = {"n_estimators": 3, "random_state": 5}
    job = validate_job({"name": "ens", "data": {"source": "unused"},
                        "estimator": {"name": "ensemble_othr", "params": params},
                        "cv": {"n_splits": 3, "n_repeats": 2, "random_state": 1}, "metrics": list(METRICS)})
    result = run_job(job, client, out=tmp_path / "run", progress=False, data=JobData(X=X, y=y, meta={"name": "s"}))
    keys = [(s, f) for s in (1, 2) for f in range(3)]
    _same_records(result.folds, _reference(X, y, make_estimator("ensemble_othr", params), keys, n_splits=3))
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert len(saved["folds"][0]["member_thresholds"]) == 3
    assert not list((tmp_path / "run" / "members").glob("*.skops")), "member files are removed once a fold is done"
    # the final model is the same ensemble fitted on every row
    model, _ = load_model(tmp_path / "run" / "model")
    direct = make_estimator("ensemble_othr", params)
    from sklearn.preprocessing import MinMaxScaler
    scaler = MinMaxScaler().fit(X)
    direct.fit(scaler.transform(X), y)
    np.testing.assert_array_equal(model.decision_function(X), direct.decision_function(scaler.transform(X)))


def test_feature_stages_run_once_per_fold_and_match(client, small):
    X, y = small
    estimator = make_estimator("ensemble_othr", {"n_estimators": 2, "random_state": 0,
                                                 "estimator": "linear_svc"})
    features = [make_feature("structural", {"n_neighbors": 5, "method": "exact"})]
    keys = [(0, 0), (0, 2)]
    records, reused = run_ensemble_folds(
        client, estimator=estimator, keys=keys, data=JobData(X=X, y=y, meta={}), n_splits=3, scaler="minmax",
        impute="none", features=features, metrics=METRICS, pos_label=positive_label(y), retries=0,
        member_dir=None, progress=False)
    assert reused == 0
    _same_records(records, _reference(X, y, estimator, keys, n_splits=3, features=features))


def test_store_rows_are_read_per_member_and_match(client, small, tmp_path):
    X, y = small
    store = ingest((X.astype(np.float32), y), tmp_path / "data.zarr", chunk_rows=64)
    X32 = X.astype(np.float32).astype(np.float64)  # what the store holds
    data = JobData(X=StoreRows(store.path, store.X.shape), y=y, meta={})
    estimator = make_estimator("ensemble_othr", {"n_estimators": 3, "random_state": 1})
    keys = [(3, 1), (4, 0)]
    records, _ = run_ensemble_folds(
        client, estimator=estimator, keys=keys, data=data, n_splits=4, scaler="minmax", impute="none",
        features=[], metrics=METRICS, pos_label=positive_label(y), retries=0, member_dir=None, progress=False)
    _same_records(records, _reference(X32, y, estimator, keys, n_splits=4))


def test_saved_members_are_reused_not_refitted(client, small, tmp_path):
    X, y = small
    estimator = make_estimator("ensemble_othr", {"n_estimators": 3, "random_state": 2})
    member_dir = tmp_path / "members"
    # an interrupted run left member 0 and 2 of fold (0, 1) behind
    seeds, params = estimator.__sklearn_clone__().plan_members(
        y[np.setdiff1d(np.arange(len(y)), _test_rows(y, 0, 1))])
    prepared = prepare_fold(X, y, seed=0, fold=1, n_splits=3, scaler="minmax", impute="none", features=[])
    for m in (0, 2):
        member = fit_fold_member(X, y, prepared, seed=0, fold=1, n_splits=3, member_seed=seeds[m], params=params)
        save_object(member, member_dir / f"seed0-fold1-member{m}.skops")
    records, reused = run_ensemble_folds(
        client, estimator=estimator, keys=[(0, 1)], data=JobData(X=X, y=y, meta={}), n_splits=3, scaler="minmax",
        impute="none", features=[], metrics=METRICS, pos_label=positive_label(y), retries=0,
        member_dir=member_dir, progress=False)
    assert reused == 2
    _same_records(records, _reference(X, y, estimator, [(0, 1)], n_splits=3))
    assert not list(member_dir.glob("*.skops"))


def _test_rows(y, seed, fold):
    from dimbsvm.evaluation import fold_indices

    return fold_indices(y, n_splits=3, seed=seed, fold=fold)[1]


def test_base_estimator_is_chosen_by_registry_name_only():
    from dimbsvm.exceptions import JobSpecError

    with pytest.raises(JobSpecError, match="unknown estimator 'os.system'"):
        make_estimator("ensemble_othr", {"estimator": "os.system"})
    with pytest.raises(JobSpecError, match="has no base estimator"):
        make_estimator("svc", {"estimator": "svc"})
    assert make_estimator("othr", {"estimator": "linear_svc", "estimator__C": 0.5}).estimator.C == 0.5
