"""An ensemble over a store searches its shared threshold with range tasks: the same fitted model, bit for bit.

The truth is the same fold engine with the range tasks switched off
(``RANGED_THRESHOLD = False``): every chunk's margins gathered in one
assemble task and searched by :func:`~dimbsvm.svm.shared_threshold.search_shared_shift`,
whose own equality with the sorting search is tested in ``tests/test_margin_order.py``.
"""

import dataclasses

import numpy as np
import pytest

from dimbsvm.datasets import make_imbalanced
from dimbsvm.estimators import make_estimator
from dimbsvm.model_selection import folds, threshold_tasks
from dimbsvm.model_selection.folds import FoldSetup, FoldSpec, run_folds
from dimbsvm.model_selection.splits import minority_class, repeat_splits
from dimbsvm.store import StoreRows, ingest

METRICS = ("g_mean", "f_measure", "auc")


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    X, y = make_imbalanced(n_samples=3000, n_features=5, minority_fraction=0.05, random_state=4)
    X, y = np.asarray(X), np.asarray(y)
    store = ingest((X.astype(np.float32), y), tmp_path_factory.mktemp("thr") / "data.zarr", chunk_rows=256)
    return StoreRows(store.path, store.X.shape), y


def _fit(rows, y, params, client, monkeypatch, *, ranged):
    monkeypatch.setattr(folds, "RANGED_THRESHOLD", ranged)
    monkeypatch.setattr(threshold_tasks, "ROWS_PER_RANGE", 300)  # several ranges of these few rows
    train, test = repeat_splits(y, n_splits=3, seed=1)[0]
    specs = [FoldSpec((1, 0), train, test, keep_model=True), FoldSpec(("final",), np.arange(y.size), test[:0])]
    setup = FoldSetup(make_estimator("ensemble_othr", params), minority_class(y), scaler="minmax", impute="none",
                      metrics=METRICS)
    results, _ = run_folds(setup, rows, y, specs, client=client, retries=0)
    return results


def _assert_same_models(ranged, serial):
    assert ranged[0]["record"] == serial[0]["record"]
    for a, b in zip(ranged, serial, strict=True):
        first, second = a["model"][-1], b["model"][-1]
        assert np.float64(first.threshold_).tobytes() == np.float64(second.threshold_).tobytes()
        assert first.threshold_margins_ == second.threshold_margins_ == "oob"
        assert list(first.candidates_) == list(second.candidates_)
        for column in second.candidates_:
            assert first.candidates_[column].dtype == second.candidates_[column].dtype, column
            assert first.candidates_[column].tobytes() == second.candidates_[column].tobytes(), column
        assert first.thresholds_.tobytes() == second.thresholds_.tobytes()


PARAMS = [{"n_estimators": 3, "random_state": 5},
          {"n_estimators": 2, "random_state": 6, "smoothing": None, "max_candidates": 40},
          {"n_estimators": 2, "random_state": 7, "objective": "f_measure", "tolerance": 0.0, "min_precision": 0.3}]


def _counting_searches(monkeypatch):
    searched_shift, calls = threshold_tasks.ranges.searched_shift, []

    def counted(*args, **kwargs):
        calls.append(1)
        return searched_shift(*args, **kwargs)

    monkeypatch.setattr(threshold_tasks.ranges, "searched_shift", counted)
    return calls


@pytest.mark.parametrize("params", PARAMS)
def test_range_tasks_give_the_serial_model(scheduler, stored, monkeypatch, params):
    rows, y = stored
    calls = _counting_searches(monkeypatch)
    ranged = _fit(rows, y, params, scheduler, monkeypatch, ranged=True)
    assert len(calls) == 2  # the fold and the final model, both searched from ranges
    serial = _fit(rows, y, params, scheduler, monkeypatch, ranged=False)
    assert len(calls) == 2
    _assert_same_models(ranged, serial)


def test_binned_counts_from_range_tasks(client, monkeypatch, tmp_path):
    """Enough negatives for the binned smoothed counts: the grid sums come from the range tasks."""
    X, y = make_imbalanced(n_samples=40_000, n_features=4, minority_fraction=0.02, random_state=8)
    store = ingest((np.asarray(X, dtype=np.float32), np.asarray(y)), tmp_path / "big.zarr", chunk_rows=4096)
    rows, y = StoreRows(store.path, store.X.shape), np.asarray(y)
    params = {"n_estimators": 2, "random_state": 9, "estimator": "linear_svc"}
    calls, binned = _counting_searches(monkeypatch), []
    threshold = threshold_tasks.ranges._threshold
    count_from_grid = threshold._count_from_grid
    monkeypatch.setattr(threshold, "_count_from_grid", lambda *a, **k: binned.append(1) or count_from_grid(*a, **k))
    ranged = _fit(rows, y, params, client, monkeypatch, ranged=True)
    assert len(calls) == 2 and len(binned) == 2
    _assert_same_models(ranged, _fit(rows, y, params, client, monkeypatch, ranged=False))


def test_a_gathered_search_gives_the_serial_model(client, stored, monkeypatch):
    """Inputs the ranges do not cover are gathered from them and searched serially, with the same result."""
    from dimbsvm.svm import range_threshold

    plan_ranges = range_threshold.plan_ranges
    calls = []

    def gathered(*args, **kwargs):
        calls.append(1)
        return dataclasses.replace(plan_ranges(*args, **kwargs), gather=True)

    monkeypatch.setattr(threshold_tasks.ranges, "plan_ranges", gathered)
    rows, y = stored
    ranged = _fit(rows, y, PARAMS[0], client, monkeypatch, ranged=True)
    assert calls
    monkeypatch.setattr(threshold_tasks.ranges, "plan_ranges", plan_ranges)
    _assert_same_models(ranged, _fit(rows, y, PARAMS[0], client, monkeypatch, ranged=False))


def test_the_plan_has_range_tasks_and_no_gathering_assemble(stored, monkeypatch):
    from dimbsvm.parallel import TaskPlan

    monkeypatch.setattr(threshold_tasks, "ROWS_PER_RANGE", 100)  # one range per chunk
    rows, y = stored
    train, test = repeat_splits(y, n_splits=3, seed=1)[0]
    n_chunks = -(-y.size // 256)
    for params, expected in ((PARAMS[0], True), ({**PARAMS[0], "candidates": "othr"}, False),
                             ({**PARAMS[0], "probability": True}, False)):
        plan = TaskPlan()
        setup = FoldSetup(make_estimator("ensemble_othr", params), 1, metrics=METRICS)
        folds.add_fold(plan, FoldSpec((1, 0), train, test), setup, X=plan.share(rows), y=plan.share(y), labels=y,
                       block_rows=256)
        names = [task.name for task in plan.tasks]
        assert names.count("oob") == n_chunks
        assert names.count("thr_range") == (n_chunks if expected else 0)
        assert names.count("thr_pick") == names.count("thr_summary") == names.count("thr_range")
        [assemble] = [task for task in plan.tasks if task.name == "assemble"]
        assert (assemble.kwargs["pooled"] is None) == expected
