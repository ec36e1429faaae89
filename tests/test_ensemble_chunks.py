"""EnsembleOTHRClassifier.fit on a Dask array with a client: over the chunks, equal to the in-memory fit."""

import logging

import dask.array as da
import numpy as np
import pytest
from sklearn.svm import SVC, LinearSVC

from dimbsvm.datasets import make_imbalanced
from dimbsvm.svm import ensemble_chunks
from dimbsvm.svm.ensemble import PAPER_PARAMS, EnsembleOTHRClassifier


def _data(n=3_000, chunks=700, seed=0):
    X, y = make_imbalanced(n, n_features=6, minority_fraction=0.06, chunks=chunks, random_state=seed)
    return X, y


def _assert_same_fit(a, b, X):
    np.testing.assert_array_equal(a.seeds_, b.seeds_)
    np.testing.assert_array_equal(a.classes_, b.classes_)
    assert a.n_features_in_ == b.n_features_in_ and a.max_samples_ == b.max_samples_
    assert getattr(a, "threshold_", None) == getattr(b, "threshold_", None)
    np.testing.assert_array_equal(a.thresholds_, b.thresholds_)
    np.testing.assert_array_equal(a.optimal_thresholds_, b.optimal_thresholds_)
    assert [m.n_draws for m in a.members_] == [m.n_draws for m in b.members_]
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    if hasattr(a, "platt_"):
        np.testing.assert_array_equal(a.platt_, b.platt_)


@pytest.mark.parametrize("params", [
    dict(estimator=LinearSVC(), n_estimators=5, max_samples=600),  # the shared shift on pooled out-of-bag margins
    dict(estimator=SVC(), n_estimators=3, max_samples=500, bootstrap="balanced", probability=True),
    dict(estimator=LinearSVC(), n_estimators=4, **PAPER_PARAMS),  # plain bags, each member's own OTHR shift
    dict(estimator=LinearSVC(), n_estimators=3, threshold="member", member_margins="cv", max_samples=800),
], ids=["pooled-linear", "balanced-rbf-probability", "paper", "member-cv"])
def test_fit_over_chunks_equals_the_in_memory_fit(client, params, monkeypatch):
    X, y = _data()
    chunked_fits = []
    real = ensemble_chunks.fit_members_over_chunks
    monkeypatch.setattr(ensemble_chunks, "fit_members_over_chunks",
                        lambda *args: chunked_fits.append(1) or real(*args))
    over_chunks = EnsembleOTHRClassifier(random_state=2, client=client, **params).fit(X, y)
    in_memory = EnsembleOTHRClassifier(random_state=2, **params).fit(np.asarray(X), np.asarray(y))
    assert chunked_fits == [1]  # the Dask array was fitted over its chunks, not brought here
    _assert_same_fit(over_chunks, in_memory, np.asarray(X))


def test_fit_over_chunks_in_worker_processes_equals_the_in_memory_fit():
    distributed = pytest.importorskip("distributed")
    X, y = _data(n=2_400, chunks=500, seed=3)
    params = dict(n_estimators=4, max_samples=400, random_state=1)  # the default RBF members
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        over_chunks = EnsembleOTHRClassifier(client=client, **params).fit(X, y)
    _assert_same_fit(over_chunks, EnsembleOTHRClassifier(**params).fit(np.asarray(X), np.asarray(y)),
                     np.asarray(X))


def test_settings_that_need_every_rows_features_are_fitted_in_memory_with_a_warning(client, caplog):
    X, y = _data(n=1_200, chunks=400)
    params = dict(estimator=LinearSVC(), n_estimators=3, max_samples=300, candidates="othr", random_state=0)
    with caplog.at_level(logging.WARNING, logger="dimbsvm.svm.ensemble"):
        model = EnsembleOTHRClassifier(client=client, **params).fit(X, y)
    assert "candidates='othr' searches the shared shift among the features of every row" in caplog.text
    _assert_same_fit(model, EnsembleOTHRClassifier(**params).fit(np.asarray(X), np.asarray(y)), np.asarray(X))


def test_bad_chunks_are_refused_in_one_line(client):
    X, y = _data(n=1_200, chunks=400)
    X = np.asarray(X).copy()
    X[900, 2] = np.nan  # in the third chunk, in no bag of so few rows, perhaps: every row is checked
    with pytest.raises(ValueError, match=r"Input X contains NaN or infinity \(in chunk 2\)"):
        EnsembleOTHRClassifier(LinearSVC(), n_estimators=2, max_samples=100, threshold="member",
                               client=client).fit(da.from_array(X, chunks=(400, 6)), y)
    with pytest.raises(ValueError, match=r"inconsistent numbers of samples: \[1200, 1199\]"):
        EnsembleOTHRClassifier(client=client).fit(da.from_array(X, chunks=(400, 6)), np.asarray(y)[1:])
