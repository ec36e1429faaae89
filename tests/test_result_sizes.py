"""Dask counts what dimbsvm's task results hold: the arrays inside its result dataclasses and fitted estimators.

The truth is the arrays' own ``nbytes``; without the rules a worker counted a few dozen bytes for each.
"""

import numpy as np
import pytest
from dask.sizeof import sizeof
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MaxAbsScaler
from sklearn.svm import LinearSVC

from dimbsvm.model_selection.fold_result import FoldPredictions, FoldResult
from dimbsvm.parallel.policy import run_task
from dimbsvm.parallel.result_sizes import register


def _fitted(n_features):
    rng = np.random.default_rng(0)
    return LinearSVC(random_state=0).fit(rng.random((60, n_features)), np.r_[np.zeros(30), np.ones(30)])


def test_a_result_counts_its_arrays_and_an_estimator_every_attribute():
    register()
    rows, y_pred, score = np.arange(50_000), np.zeros(50_000, dtype=np.int8), np.ones(50_000)
    predictions = FoldPredictions(rows, y_pred, score)
    arrays = rows.nbytes + y_pred.nbytes + score.nbytes
    assert arrays <= sizeof(predictions) <= arrays + 2_000
    model = _fitted(20_000)
    # every attribute, not a sample of ten (a fitted LinearSVC has more): the same size every time
    sizes = {sizeof(model) for _ in range(20)}
    assert len(sizes) == 1 and model.coef_.nbytes <= sizes.pop() <= model.coef_.nbytes + 20_000
    result = FoldResult(record={"g_mean": 0.5}, model=make_pipeline(MaxAbsScaler(), model), predictions=predictions)
    assert sizeof(result) >= arrays + model.coef_.nbytes


@pytest.mark.slow
def test_a_worker_counts_the_results_it_keeps():
    """A real worker process: its managed memory is the kept results' arrays, not a few dozen bytes each."""
    from distributed import Client, LocalCluster

    n = 400_000
    rows, score = np.arange(n), np.linspace(-1, 1, n)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        kept = client.submit(run_task, FoldPredictions, {"rows": rows, "y_pred": rows > 5, "score": score},
                             pure=False)
        model = client.submit(run_task, LinearSVC(random_state=0).fit,
                              {"X": np.random.default_rng(0).random((60, 50_000)), "y": np.r_[np.zeros(30), np.ones(30)]},
                              pure=False)
        fitted = model.result()
        assert kept.result().rows.size == n
        [held] = client.run(lambda dask_worker: dask_worker.state.nbytes).values()
    truth = rows.nbytes + n + score.nbytes + fitted.coef_.nbytes  # (a bool a row)
    assert truth <= held <= truth + 50_000
