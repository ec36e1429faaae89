"""LIBLINEAR's process-global generator: which fits take the lock, and fold fits in threads."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from sklearn.datasets import make_classification
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import SVC, LinearSVC

from dimbsvm.evaluation import evaluate_fold
from dimbsvm.svm._native_rng import uses_liblinear
from dimbsvm.svm.ensemble import EnsembleOTHRClassifier
from dimbsvm.svm.hpc import HPCClassifier
from dimbsvm.svm.othr import OTHRClassifier


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
