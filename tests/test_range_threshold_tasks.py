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
from dimbsvm.model_selection import folds
from dimbsvm.svm import ensemble_fold, threshold_tasks
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
    monkeypatch.setattr(ensemble_fold, "RANGED_THRESHOLD", ranged)
    monkeypatch.setattr(threshold_tasks, "ROWS_PER_RANGE", 300)  # several ranges of these few rows
    train, test = repeat_splits(y, n_splits=3, seed=1)[0]
    specs = [FoldSpec((1, 0), train, test, keep_model=True), FoldSpec(("final",), np.arange(y.size), test[:0])]
    setup = FoldSetup(make_estimator("ensemble_othr", params), minority_class(y), scaler="minmax", impute="none",
                      metrics=METRICS)
    results, _ = run_folds(setup, rows, y, specs, client=client, retries=0)
    return results


def _assert_same_models(ranged, serial):
    assert ranged[0].record == serial[0].record
    for a, b in zip(ranged, serial, strict=True):
        first, second = a.model[-1], b.model[-1]
        assert np.float64(first.threshold_).tobytes() == np.float64(second.threshold_).tobytes()
        assert first.threshold_margins_ == second.threshold_margins_ == "oob"
        assert list(first.candidates_) == list(second.candidates_)
        for column in second.candidates_:
            assert first.candidates_[column].dtype == second.candidates_[column].dtype, column
            assert first.candidates_[column].tobytes() == second.candidates_[column].tobytes(), column
        assert first.thresholds_.tobytes() == second.thresholds_.tobytes()


PARAMS = [{"n_estimators": 3, "random_state": 5},
          {"n_estimators": 2, "random_state": 6, "smoothing": None, "max_candidates": 40},
          {"n_estimators": 2, "random_state": 7, "objective": "f_measure", "tolerance": 0.0, "min_precision": 0.3},
          {"n_estimators": 2, "random_state": 8, "objective": {"fn": 9.0, "fp": 1.0}}]


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
    smoothing = threshold_tasks.ranges._smoothing
    count_from_grid = smoothing.count_from_grid
    monkeypatch.setattr(smoothing, "count_from_grid", lambda *a, **k: binned.append(1) or count_from_grid(*a, **k))
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


def _spilling(tmp_path):
    """A run spill whose writes are counted (in this process: the tasks run here)."""
    from dimbsvm.jobs.threshold_runs import ThresholdRunDirectory

    class Counted(ThresholdRunDirectory):
        writes = []

        def write(self, key, first, run):
            spilled = super().write(key, first, run)
            type(self).writes.append(spilled)
            return spilled

    return Counted.open(tmp_path / "runs")


@pytest.mark.parametrize("params", PARAMS[:2])
def test_runs_kept_on_disk_give_the_models_of_runs_held_in_memory(stored, monkeypatch, tmp_path, params):
    """The range tasks reading slices of runs kept in files give the serial search's models bit for bit; each
    fold's runs are removed when it finishes, and closing the spill removes the directory."""
    rows, y = stored
    spill = _spilling(tmp_path)
    forgotten = []
    forget = type(spill).forget
    monkeypatch.setattr(type(spill), "forget", lambda self, key: (forgotten.append(key), forget(self, key)))
    monkeypatch.setattr(folds.FoldSetup, "__post_init__", _with_spill(folds.FoldSetup.__post_init__, spill))
    spilled = _fit(rows, y, params, None, monkeypatch, ranged=True)
    monkeypatch.undo()
    serial = _fit(rows, y, params, None, monkeypatch, ranged=False)
    _assert_same_models(spilled, serial)
    n_chunks = -(-y.size // 256)
    assert len(spill.writes) == 2 * n_chunks and all(w is not None and w.size > 0 for w in spill.writes)
    assert sorted(map(str, forgotten)) == sorted(map(str, [(1, 0), ("final",)]))
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [f".tasks-write-{spill.token}"]  # only the marker
    spill.close()
    assert not (tmp_path / "runs").exists()


def _with_spill(post_init, spill):
    def post_init_with_spill(self):
        post_init(self)
        object.__setattr__(self, "run_spill", spill)
    return post_init_with_spill


def test_a_spilled_run_reads_back_as_written_pickles_small_and_slices_as_the_run(tmp_path):
    import pickle

    from dimbsvm.jobs.threshold_runs import ThresholdRunDirectory
    from dimbsvm.svm import range_threshold as ranges

    rng = np.random.default_rng(0)
    margins = rng.normal(size=5000).round(2)  # ties
    positive = rng.random(5000) < 0.1
    counts = (rng.random(5000) < 0.9).astype(np.int64)
    run = ranges.sorted_run(700, margins, counts, np.argsort(margins, kind="stable"), positive)
    spill = ThresholdRunDirectory.open(tmp_path / "runs")
    spilled = pickle.loads(pickle.dumps(spill.write((2, 1), 700, run)))
    assert len(pickle.dumps(spilled)) < 300
    for name in ("values", "rows", "positive"):
        assert np.array_equal(getattr(spilled, name), getattr(run, name)), name
    plan = ranges.RangePlan(False, np.quantile(margins, [0.25, 0.5, 0.75]), np.sort(margins[positive]),
                            int(positive.sum()), int((~positive).sum()))
    for index in range(4):
        a, b = ranges.range_block([spilled], plan, index), ranges.range_block([run], plan, index)
        assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("values", "rows", "positive", "starts"))
    # a process that does not see the driver's marker (another machine) keeps its runs
    (tmp_path / "runs" / f".tasks-write-{spill.token}").unlink()
    assert spill.write((2, 1), 0, run) is None
