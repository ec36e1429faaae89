"""LIBLINEAR's process-global generator: which fits take the lock, and fold fits in threads."""

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sklearn.datasets import make_classification
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import SVC, LinearSVC

from dimbsvm.model_selection.folds import FoldSetup, FoldSpec, run_folds
from dimbsvm.model_selection.splits import repeat_splits
from dimbsvm.svm._native_rng import fit_guard, uses_liblinear
from dimbsvm.svm.ensemble import EnsembleOTHRClassifier
from dimbsvm.svm.hpc import HPCClassifier
from dimbsvm.svm.othr import OTHRClassifier

DEADLOCK_SECONDS = 120


@pytest.mark.parametrize("estimator, expected", [
    (LinearSVC(), True),
    (make_pipeline(MinMaxScaler(), LinearSVC()), True),
    (OTHRClassifier(LinearSVC()), True),
    (make_pipeline(MinMaxScaler(), EnsembleOTHRClassifier(LinearSVC())), True),
    (HPCClassifier(), True),
    (HPCClassifier(solver="sgd"), False),
    (SVC(), False),
    (make_pipeline(MinMaxScaler(), OTHRClassifier(SVC())), False),
])
def test_which_estimators_use_liblinear(estimator, expected):
    assert uses_liblinear(estimator) is expected


def evaluate_fold(X, y, *, estimator, n_splits, seed, fold, metrics=("g_mean",), client=None):
    """One fold through the fold engine, in this thread (no client) or on ``client``."""
    train, test = repeat_splits(y, n_splits=n_splits, seed=seed)[fold]
    setup = FoldSetup(estimator, 1, scaler="minmax", impute="none", metrics=metrics)
    [result], _ = run_folds(setup, X, y, [FoldSpec((seed, fold), train, test)], client=client)
    return result.record


def _fold_records(X, y, n_threads):
    """Every fold of 4 seeds of a LinearSVC job, fitted by n_threads threads at once."""
    calls = [(seed, fold) for seed in range(2) for fold in range(4)]
    # the dual solver visits coordinates in LIBLINEAR's random order; stopped at max_iter,
    # the result depends on that order (the primal solver, dual="auto" here, draws nothing)
    estimator = LinearSVC(C=10.0, dual=True, max_iter=300, random_state=0)
    with ThreadPoolExecutor(n_threads) as pool:
        return list(pool.map(lambda c: evaluate_fold(
            X, y, estimator=estimator, n_splits=4, seed=c[0], fold=c[1],
            metrics=("g_mean", "auc")), calls))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_fold_fits_in_threads_equal_sequential_fits():
    """Without the lock the threads' fits interleave on one generator and differ (checked)."""
    X, y = make_classification(n_samples=5000, n_features=50, n_informative=10, weights=[0.9],
                               flip_y=0.1, random_state=0)
    sequential = _fold_records(X, y, 1)
    assert _fold_records(X, y, 4) == sequential


def test_fit_guard_leaves_ensembles_to_lock_their_members():
    plain = make_pipeline(MinMaxScaler(), LinearSVC())
    ensemble = make_pipeline(MinMaxScaler(), EnsembleOTHRClassifier(LinearSVC()))
    assert fit_guard(plain) is not fit_guard(ensemble)
    assert isinstance(fit_guard(ensemble), contextlib.nullcontext)
    assert not isinstance(fit_guard(plain), contextlib.nullcontext)


def test_ensemble_fold_on_an_in_process_cluster_does_not_deadlock(client):
    """Members run on the cluster's threads in this process, each taking the lock.

    Were the fold's whole fit to hold the lock too, the members would wait for it forever.
    """
    X, y = make_classification(n_samples=300, n_features=5, weights=[0.8], random_state=0)
    estimator = EnsembleOTHRClassifier(LinearSVC(), n_estimators=3, random_state=0)
    records = []
    fold = threading.Thread(target=lambda: records.append(evaluate_fold(
        X, y, estimator=estimator, n_splits=3, seed=0, fold=0, client=client)), daemon=True)  # a daemon: a
    fold.start()                                                # deadlocked one cannot block exit
    fold.join(timeout=DEADLOCK_SECONDS)
    assert not fold.is_alive(), "the fold's fit is still waiting: deadlock"
    assert 0.0 <= records[0]["g_mean"] <= 1.0
