"""A store's folds planned from per-chunk counts (issue 49, item 1): the driver holds no fold's rows.

The truth is the folds of the labels in memory (:func:`repeat_splits`,
itself tested row by row against its definition in ``test_splits.py``),
counted per chunk here with plain numpy, and
the same job run on the same data held in memory, whose folds are index
arrays as before.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from dimbsvm._counts import ClassCounts
from dimbsvm.datasets import load_keel
from dimbsvm.jobs import run_job, validate_job
from dimbsvm.jobs.data import JobData, load_job_data
from dimbsvm.model_selection.folds import FoldLayout
from dimbsvm.fold_data.spans import chunk_spans
from dimbsvm.model_selection.splits import chunk_class_counts, chunk_fold_counts, repeat_splits
from dimbsvm.store import StoreRows, ingest
from dimbsvm.svm import EnsembleOTHRClassifier


def _counted(y, n_splits, seed, block_rows):
    """``counts[chunk, fold, class]`` of the in-memory folds, counted row by row."""
    classes = np.unique(y)
    n_chunks = -(-len(y) // block_rows)
    counts = np.zeros((n_chunks, n_splits, classes.size), dtype=np.int64)
    for fold, (_, test) in enumerate(repeat_splits(y, n_splits=n_splits, seed=seed)):
        for row in test:
            counts[row // block_rows, fold, np.searchsorted(classes, y[row])] += 1
    return classes, counts


@pytest.mark.parametrize("n, weights, n_splits, block_rows, seed", [
    (97, (0.9, 0.1), 2, 10, 0), (500, (0.7, 0.2, 0.1), 5, 33, 3), (64, (0.5, 0.5), 4, 64, 1),
    (1000, (0.99, 0.01), 3, 7, 11)])
def test_chunk_fold_counts_are_those_of_the_folds_in_memory(n, weights, n_splits, block_rows, seed):
    rng = np.random.default_rng(seed)
    y = rng.choice(len(weights), size=n, p=weights) + 2  # codes not starting at 0
    y[:len(weights)] = np.arange(len(weights))[::-1] + 2  # every class present, the last one seen first
    classes, counts = chunk_fold_counts(y, n_splits=n_splits, seed=seed, block_rows=block_rows)
    expected_classes, expected = _counted(y, n_splits, seed, block_rows)
    assert classes.tolist() == expected_classes.tolist()
    assert np.array_equal(counts, expected)
    every_classes, every = chunk_class_counts(y, block_rows=block_rows)
    assert np.array_equal(every_classes, classes) and np.array_equal(every, counts.sum(axis=1))


def test_chunk_fold_counts_of_labels_of_a_wide_range():
    rng = np.random.default_rng(0)
    y = np.where(rng.random(300) < 0.2, 2**40, -3)
    classes, counts = chunk_fold_counts(y, n_splits=3, seed=5, block_rows=40)
    assert np.array_equal(counts, _counted(y, 3, 5, 40)[1])


@pytest.mark.parametrize("block_rows", [3, 25, 1000])
def test_a_layout_gives_the_chunks_counts_and_classes_of_its_folds_rows(block_rows):
    rng = np.random.default_rng(1)
    y = (rng.random(200) < 0.15).astype(np.int64)
    classes, counts = chunk_fold_counts(y, n_splits=4, seed=2, block_rows=block_rows)
    for fold, (train, test) in enumerate(repeat_splits(y, n_splits=4, seed=2)):
        layout = FoldLayout.of_repeat(classes, counts, fold=fold, block_rows=block_rows)
        assert layout.spans("train") == chunk_spans(train, block_rows)
        assert layout.spans("test") == chunk_spans(test, block_rows)
        assert (layout.n_train, layout.n_test) == (len(train), len(test))
        held = layout.train_counts()
        assert held.classes.tolist() == [0, 1] and held.counts.tolist() == np.bincount(y[train]).tolist()
    every = FoldLayout.of_repeat(classes, counts, fold=None, block_rows=block_rows)
    assert every.n_test == 0 and every.spans("test") == [] and every.n_train == len(y)


@pytest.mark.parametrize("params", [dict(n_estimators=4, random_state=3),
                                    dict(n_estimators=3, bootstrap="balanced", max_samples="auto", random_state=1),
                                    dict(n_estimators=3, bootstrap="balanced", max_samples=0.5, pos_label=0,
                                         random_state=2)])
@pytest.mark.parametrize("n_minority", [40, 150_000])  # 300,000 balanced rows: above LARGE_N, bags scaled
def test_members_planned_from_class_counts_equal_those_planned_from_the_labels(params, n_minority):
    y = np.zeros(2 * n_minority + 7, dtype=np.int64)
    y[::2][:n_minority] = 1
    from_labels = EnsembleOTHRClassifier(**params)
    from_counts = EnsembleOTHRClassifier(**params)
    a = from_labels.plan_members(y)
    b = from_counts.plan_members(ClassCounts.of([0, 1], np.bincount(y)))
    assert np.array_equal(a.seeds, b.seeds)
    assert [repr(m) for m in a.members] == [repr(m) for m in b.members]
    for name in ("classes_", "pos_label_", "max_samples_"):
        assert np.array_equal(getattr(from_labels, name), getattr(from_counts, name)), name


def _job(source, *, estimator, n_splits=5, positive=None, metrics=("g_mean", "f_measure", "auc")):
    data = {"source": str(source)}
    if positive is not None:
        data["positive"] = positive
    return validate_job({"name": "planned", "data": data, "estimator": estimator,
                         "cv": {"n_splits": n_splits, "n_repeats": 2, "random_state": 4}, "metrics": list(metrics)})


def _without_times(records):
    return [{k: v for k, v in record.items() if not k.endswith("_time")} for record in records]


def _out_of_fold(run_dir, pos_label=1):
    """``[((seed, fold), arrays)]``: each fold's rows (from its file or its parts) and its summary's arrays."""
    from dimbsvm.jobs.oof import load_fold_summaries, load_oof

    columns = load_oof(run_dir)
    summaries = load_fold_summaries(run_dir, pos_label)
    folds = []
    for key, summary in sorted(summaries.items()):
        mine = (columns["seed"] == key[0]) & (columns["fold"] == key[1])
        arrays = {name: values[mine] for name, values in columns.items() if name not in ("seed", "fold")}
        folds.append((key, arrays | summary.to_arrays("summary_")))
    return folds


@pytest.mark.parametrize("estimator", [
    {"name": "othr"},
    {"name": "ensemble_othr", "params": {"estimator": "linear_svc", "n_estimators": 4, "bootstrap": "balanced",
                                         "max_samples": 40}}], ids=["othr", "ensemble"])
def test_a_store_job_planned_from_counts_equals_the_in_memory_job(scheduler, tmp_path, estimator):
    from dimbsvm.jobs.runner import plan_run

    data = load_keel("ecoli1")  # 336 rows, 77 minority
    store_path = tmp_path / "ecoli1.zarr"
    ingest((data.X, data.y), store_path, chunk_rows=9)  # 38 chunks: some hold no test row of some fold
    job = _job(store_path, estimator=estimator)
    stored = load_job_data(str(store_path))
    assert isinstance(stored.X, StoreRows)

    plan = plan_run(job, stored, tmp_path / "planned", data_fingerprint="x")
    assert all(spec.train is None and spec.test is None for spec in plan.todo)  # no fold's rows in the driver
    classes, counts = chunk_fold_counts(data.y, n_splits=5, seed=4, block_rows=9)
    assert (counts.sum(axis=2) == 0).any()  # the plan skips chunks without rows of a fold, as index arrays do

    from_store = run_job(job, scheduler, out=tmp_path / "store-run", progress=False, data=stored)
    in_memory = run_job(job, scheduler, out=tmp_path / "memory-run", progress=False,
                        data=JobData(X=np.asarray(stored.X[np.arange(len(data.y))]), y=data.y,
                                     meta=dict(stored.meta)))
    assert _without_times(from_store.folds) == _without_times(in_memory.folds)
    for (name_a, a), (name_b, b) in zip(_out_of_fold(from_store.run_dir), _out_of_fold(in_memory.run_dir)):
        assert name_a == name_b and a.keys() == b.keys()
        for key in a:
            if a[key].dtype.kind == "f":  # a store's test rows are scored chunk by chunk: the last bits may differ
                np.testing.assert_allclose(a[key], b[key], rtol=0, atol=1e-12)
            else:
                assert np.array_equal(a[key], b[key]), (name_a, key)


def _given_and_planned(tmp_path, estimator, client, *, scaler="minmax"):
    """The fold engine's results over an ecoli1 store of 9-row chunks, for 5 folds and a final model given as rows
    and the same planned from counts: ``(given, planned, data, stored)``."""
    from dataclasses import replace

    from dimbsvm.jobs.runner import fold_setup
    from dimbsvm.model_selection.folds import FoldSpec, run_folds
    from dimbsvm.model_selection.splits import repeat_splits

    data = load_keel("ecoli1")
    store_path = tmp_path / "ecoli1.zarr"
    ingest((data.X, data.y), store_path, chunk_rows=9)
    stored = load_job_data(str(store_path))
    setup = replace(fold_setup(_job(store_path, estimator=estimator), 1, keep_predictions=True), scaler=scaler)
    split = {"n_splits": 5, "seed": 4}
    as_rows = [FoldSpec((4, fold), train, test, split=dict(split, fold=fold))
               for fold, (train, test) in enumerate(repeat_splits(data.y, n_splits=5, seed=4))]
    as_rows.append(FoldSpec(("final",), np.arange(len(data.y)), np.empty(0, dtype=np.int64),
                            split=dict(split, seed=None, fold=None)))
    by_counts = [FoldSpec(spec.key, None, None, split=spec.split) for spec in as_rows]
    labels = stored.X.labels()
    given, _ = run_folds(setup, stored.X, stored.y, as_rows, client=client, task_labels=labels)
    planned, _ = run_folds(setup, stored.X, stored.y, by_counts, client=client, task_labels=labels)
    return given, planned, data, stored


@pytest.mark.parametrize("estimator, scaler", [
    ({"name": "othr"}, "minmax"),
    ({"name": "ensemble_othr", "params": {"estimator": "linear_svc", "n_estimators": 4, "bootstrap": "balanced",
                                          "max_samples": 40}}, "minmax"),
    ({"name": "ensemble_othr", "params": {"estimator": "linear_svc", "n_estimators": 3, "bootstrap": "stratified",
                                          "max_samples": 0.3}}, "none"),
    ({"name": "ensemble_othr", "params": {"estimator": "linear_svc", "n_estimators": 3, "bootstrap": "plain",
                                          "max_samples": 60}}, "minmax")], ids=["othr", "ensemble", "stratified-unscaled", "plain"])
def test_folds_planned_from_counts_give_the_results_of_folds_given_as_rows(scheduler, tmp_path, estimator, scaler):
    """The fold engine over a store: the same records, predictions and models, bit for bit, whether the driver
    hands it each fold's index arrays or only the split it computes the counts of (an ensemble's stratified
    and balanced bags then drawn from the class counts and found by rank in the chunks; plain bags over the
    fold's labels)."""

    given, planned, data, stored = _given_and_planned(tmp_path, estimator, scheduler, scaler=scaler)
    for a, b in zip(given[:-1], planned[:-1]):
        assert _without_times([a.record]) == _without_times([b.record])
        for key in ("rows", "y_pred", "score"):
            assert np.array_equal(getattr(a.predictions, key), getattr(b.predictions, key)), key
    final_a, final_b = given[-1].model, planned[-1].model
    X = np.asarray(stored.X[np.arange(len(data.y))])
    assert np.array_equal(final_a.decision_function(X), final_b.decision_function(X))


def test_a_store_coded_otherwise_than_the_job_is_scored_in_the_jobs_codes(tmp_path):
    """``data.positive`` naming the class a store codes 0: its tasks read the labels in the job's codes.

    (Before, the tasks read the store's own codes and scored the other class
    as positive: an F-measure of 0.48 instead of 0.97 on yeast5, silently.)
    """
    data = load_keel("yeast5")
    store_path = tmp_path / "yeast5.zarr"
    ingest(data, store_path, chunk_rows=200)  # its class map: {negative: 0, positive: 1}
    assert json.loads(json.dumps(load_job_data(str(store_path)).meta["class_map"])) == {"negative": 0, "positive": 1}
    estimator = {"name": "othr"}
    from_store = run_job(_job(store_path, estimator=estimator, n_splits=3, positive="negative"), None,
                         out=tmp_path / "store-run", progress=False)
    from_file = run_job(_job("yeast5", estimator=estimator, n_splits=3, positive="negative"), None,
                        out=tmp_path / "file-run", progress=False)
    assert _without_times(from_store.folds) == _without_times(from_file.folds)
    # the truth by name: the F-measure of 'negative' (1440 of 1484 rows) from the out-of-fold predictions
    from sklearn.metrics import f1_score

    for name, oof in _out_of_fold(from_store.run_dir):
        is_negative = data.y[oof["row"]] == data.class_map["negative"]
        assert np.array_equal(oof["y_true"] == 1, is_negative)
        fold = [r for r in from_store.folds if (r["seed"], r["fold"]) == name][0]
        assert fold["f_measure"] == pytest.approx(f1_score(is_negative, oof["y_pred"] == 1))
        assert fold["f_measure"] > 0.9



def test_a_fold_assigned_by_its_repeat_gives_the_folds_rows_and_pickles_one_byte_a_row():
    import pickle

    from dimbsvm.model_selection.bodies import assigned_rows, every_row, fold_assignment

    rng = np.random.default_rng(3)
    y = (rng.random(10_000) < 0.05).astype(np.int64)
    assignment = fold_assignment(y, n_splits=3, seed=7)
    for fold, (train, test) in enumerate(repeat_splits(y, n_splits=3, seed=7)):
        rows = assigned_rows(assignment, fold=fold)
        assert np.array_equal(rows.train, train) and np.array_equal(rows.test, test)
        shipped = pickle.dumps(rows)  # after its index arrays were built here: they stay here
        assert len(shipped) < 1.1 * assignment.nbytes < 0.2 * (train.nbytes + test.nbytes)
        assert np.array_equal(pickle.loads(shipped).train, train)
    every = every_row(y)
    assert np.array_equal(every.train, np.arange(len(y))) and every.test.size == 0 and len(pickle.dumps(every)) < 200


def test_the_folds_of_a_stores_repeat_share_one_assignment_task(tmp_path):
    from dimbsvm.estimators import make_estimator
    from dimbsvm.model_selection.folds import FoldSetup, FoldSpec, add_fold
    from dimbsvm.parallel import TaskPlan

    data = load_keel("ecoli1")
    ingest((data.X, data.y), tmp_path / "ecoli1.zarr", chunk_rows=50)
    rows = load_job_data(str(tmp_path / "ecoli1.zarr")).X
    plan, assignments = TaskPlan(), {}
    X_ref, y_ref = plan.share(rows), plan.share(rows.labels())
    setup = FoldSetup(make_estimator("othr", {}), 1, metrics=("g_mean",))
    for seed in (0, 1):
        for fold in range(3):
            spec = FoldSpec((seed, fold), None, None, split={"n_splits": 3, "seed": seed, "fold": fold},
                            layout=FoldLayout.of_repeat(*chunk_fold_counts(data.y, n_splits=3, seed=seed,
                                                                           block_rows=50), fold=fold, block_rows=50))
            add_fold(plan, spec, setup, X=X_ref, y=y_ref, labels=None, block_rows=50, assignments=assignments)
    names = [task.name for task in plan.tasks]
    n_chunks = -(-len(data.y) // 50)
    assert names.count("assignment") == 2 and names.count("rows") == 6 and names.count("folds") == 2 * n_chunks


@pytest.mark.parametrize("positive", ["positive", "negative"])  # 'negative': coded otherwise than the store
def test_the_driver_of_a_store_job_reads_no_label(tmp_path, monkeypatch, positive):
    """A store job on worker processes: this process never reads the store's labels (issue 49, item 1).

    Reading them here is made to fail (the workers, processes of their own, read them as before); the run's
    records equal those of the same job on the same data in memory.
    """
    from distributed import Client, LocalCluster

    import dimbsvm.jobs.data as job_data
    from dimbsvm.store.rows import StoreLabels

    monkeypatch.setattr(job_data, "SCAN_BYTES", 0)  # as a large store is opened: its labels left in the store

    data = load_keel("ecoli1")
    store_path = tmp_path / "ecoli1.zarr"
    ingest(data, store_path, chunk_rows=40)
    estimator = {"name": "ensemble_othr", "params": {"estimator": "linear_svc", "n_estimators": 3,
                                                     "bootstrap": "balanced", "max_samples": 40}}
    job = _job(store_path, estimator=estimator, n_splits=3, positive=positive)
    stored = load_job_data(str(store_path))
    assert isinstance(stored.y, StoreLabels)
    in_memory = run_job(job, None, out=tmp_path / "memory-run", progress=False,
                        data=JobData(X=np.asarray(stored.X[np.arange(len(data.y))]), y=data.y,
                                     meta=dict(stored.meta)))
    assert in_memory.summary["f_measure"]["mean"] > (0.8 if positive == "negative" else 0.5)

    def read_here(self):
        raise AssertionError("the driver read the store's labels")

    monkeypatch.setattr(StoreLabels, "values", read_here)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        from_store = run_job(job, client, out=tmp_path / "store-run", progress=False)
    assert _without_times(from_store.folds) == _without_times(in_memory.folds)
    assert from_store.summary == in_memory.summary


def test_a_searched_store_job_equals_the_searched_job_in_memory(scheduler, tmp_path):
    """A search over a store: its outer folds' rows come from the repeat's fold assignment where the tasks run;
    the records (the chosen parameters too) equal those of the same job on the data in memory."""
    data = load_keel("ecoli1")
    store_path = tmp_path / "ecoli1.zarr"
    ingest((data.X, data.y), store_path, chunk_rows=50)
    job = validate_job({"name": "searched", "data": {"source": str(store_path)}, "estimator": {"name": "svc_balanced"},
                        "cv": {"n_splits": 3, "n_repeats": 1, "random_state": 2}, "metrics": ["g_mean"],
                        "search": {"params": {"C": [0.5, 4.0]}, "cv": 2}})
    stored = load_job_data(str(store_path))
    from_store = run_job(job, scheduler, out=tmp_path / "store-run", progress=False, data=stored)
    in_memory = run_job(job, scheduler, out=tmp_path / "memory-run", progress=False,
                        data=JobData(X=np.asarray(stored.X[np.arange(len(data.y))]), y=data.y,
                                     meta=dict(stored.meta)))
    assert _without_times(from_store.folds) == _without_times(in_memory.folds)
    assert {r["params"]["C"] for r in from_store.folds} <= {0.5, 4.0}


def _row_arrays(value, found, seen=None):
    """Every ndarray reachable from ``value`` (containers, objects' attributes), by shape."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return found
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        found.append(value.shape)
    elif isinstance(value, dict):
        for item in value.values():
            _row_arrays(item, found, seen)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _row_arrays(item, found, seen)
    elif hasattr(value, "__dict__"):
        for item in vars(value).values():
            _row_arrays(item, found, seen)
    return found


@pytest.mark.parametrize("tasks_write", [True, False])
def test_the_client_of_a_store_job_receives_no_array_with_a_row_dimension(tmp_path, monkeypatch, tasks_write):
    """Everything the job's client gathers from the cluster, searched for arrays: none as long as a fold's test rows
    (issue 49's invariant). Where the tasks cannot write the out-of-fold files (``tasks_write=False``), the
    predictions handed back are found: the check sees what it looks for."""
    from distributed import Client, LocalCluster

    import dimbsvm.jobs.data as job_data
    from dimbsvm.jobs.oof import FoldPredictionWriter

    monkeypatch.setattr(job_data, "SCAN_BYTES", 0)  # as a large store is opened: its labels left in the store
    if not tasks_write:  # the marker removed as soon as it is written: as a worker on another machine sees it
        opened = FoldPredictionWriter.open

        def unreachable(*args, **kwargs):
            writer = opened(*args, **kwargs)
            writer.close()
            return writer

        monkeypatch.setattr(FoldPredictionWriter, "open", unreachable)
    data = load_keel("ecoli1")
    ingest(data, tmp_path / "ecoli1.zarr", chunk_rows=40)
    # a candidate table, bags and chunks all smaller than a fold: rows would stand out
    job = _job(tmp_path / "ecoli1.zarr", n_splits=3, estimator={
        "name": "ensemble_othr", "params": {"estimator": "linear_svc", "n_estimators": 3, "bootstrap": "balanced",
                                            "max_samples": 40, "max_candidates": 50}})
    received = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        gather = client._gather

        async def counted(*args, **kwargs):
            value = await gather(*args, **kwargs)
            _row_arrays(value, received)
            return value

        client._gather = counted
        result = run_job(job, client, out=tmp_path / "run", progress=False)
    smallest_fold = min(record["n_test"] for record in result.folds)
    longest = max(max(shape, default=0) for shape in received)
    assert received and result.summary["g_mean"]["mean"] > 0.5
    if tasks_write:
        assert longest < smallest_fold, f"the client received an array of {longest} rows"
    else:
        assert longest >= smallest_fold


@pytest.mark.parametrize("chunk_rows", [7, 50, 333])
def test_a_stores_fold_assignment_made_a_chunk_at_a_time_is_the_in_memory_one(tmp_path, chunk_rows):
    """Each chunk's folds from its first ranks, joined: the folds of the labels in memory, for any chunking."""
    from dimbsvm.model_selection.folds import FoldSpec, layouts_of
    from dimbsvm.model_selection.fold_layout import store_fold_rows
    from dimbsvm.parallel import TaskPlan, run_plan
    from dimbsvm.store.rows import StoreLabels

    data = load_keel("ecoli1")
    store = tmp_path / "ecoli1.zarr"
    ingest((data.X, data.y), store, chunk_rows=chunk_rows)
    handle = StoreLabels(store, len(data.y), counts={int(k): int(c) for k, c in zip(*np.unique(data.y,
                                                                                                 return_counts=True))})
    specs = [FoldSpec((4, f), None, None, split={"n_splits": 5, "seed": 4, "fold": f}) for f in range(5)]
    laid = layouts_of(specs, handle, block_rows=chunk_rows, client=None, retries=0)
    plan, assignments = TaskPlan(), {}
    y_ref = plan.share(handle)
    refs = [store_fold_rows(plan, y_ref, spec.split, assignments, spec.layout) for spec in laid]
    for ref in refs:
        plan.tasks[ref.id].watch = True
    results = run_plan(plan, client=None, retries=0)
    for (train, test), ref, spec in zip(repeat_splits(data.y, n_splits=5, seed=4), refs, laid):
        rows = results[ref.id]
        assert np.array_equal(rows.train, train) and np.array_equal(rows.test, test)
        assert (spec.layout.n_train, spec.layout.n_test) == (len(train), len(test))


def test_a_fold_known_by_counts_whose_threshold_search_takes_every_margin_reads_its_rows_there(tmp_path,
                                                                                                monkeypatch):
    """Where the range tasks hand the shared threshold back to the serial search (its input whole), the assemble
    task of a fold known by its counts computes the fold's rows from the labels: the same records and models as
    folds given as rows, with the same fallback."""
    from dataclasses import replace

    from dimbsvm.svm import range_threshold

    planned_ranges = range_threshold.plan_ranges
    gathered = []

    def gathering(digests, **options):
        plan = planned_ranges(digests, **options)
        gathered.append(plan)
        return replace(plan, gather=True, cuts=np.empty(0))

    monkeypatch.setattr(range_threshold, "plan_ranges", gathering)
    estimator = {"name": "ensemble_othr", "params": {"estimator": "linear_svc", "n_estimators": 4,
                                                     "bootstrap": "balanced", "max_samples": 40}}
    given, planned, data, stored = _given_and_planned(tmp_path, estimator, None)
    assert len(gathered) == 2 * len(given)  # every fold's search fell back, both times
    for a, b in zip(given[:-1], planned[:-1]):
        assert _without_times([a.record]) == _without_times([b.record])
    X = np.asarray(stored.X[np.arange(len(data.y))])
    assert np.array_equal(given[-1].model.decision_function(X), planned[-1].model.decision_function(X))


@pytest.mark.parametrize("with_test_rows", [True, False], ids=["cv-fold", "final-model"])
def test_no_task_of_a_fold_known_by_counts_reads_every_label_or_builds_its_index_arrays(tmp_path, monkeypatch,
                                                                                        with_test_rows):
    """An ensemble of balanced bags over a store, its threshold searched by range tasks: every task reads its own
    chunk's labels (never the whole column) and no task builds the fold's index arrays, so a worker's memory
    follows the chunks and the bags, not the rows."""
    from dimbsvm.jobs.runner import fold_setup
    from dimbsvm.model_selection import bodies, splits
    from dimbsvm.model_selection.folds import FoldSpec, run_folds
    from dimbsvm.store.rows import StoreLabels

    data = load_keel("ecoli1")
    store_path = tmp_path / "ecoli1.zarr"
    ingest((data.X, data.y), store_path, chunk_rows=9)
    stored = load_job_data(str(store_path))
    estimator = {"name": "ensemble_othr", "params": {"estimator": "linear_svc", "n_estimators": 4,
                                                     "bootstrap": "balanced", "max_samples": 40}}
    setup = fold_setup(_job(store_path, estimator=estimator), 1, keep_predictions=True)
    split = {"n_splits": 5, "seed": 4, "fold": 2} if with_test_rows else {"n_splits": 5, "seed": None, "fold": None}
    spec = FoldSpec((4, 2) if with_test_rows else ("final",), None, None, split=split)
    # as a job over a large store holds them: a handle that knows its class counts
    labels = StoreLabels(stored.X.path, len(data.y), stored.meta["fingerprint"], counts=stored.meta["class_counts"])

    def refused(*args, **kwargs):
        raise AssertionError("a task read every label or built a fold's index arrays")

    monkeypatch.setattr(StoreLabels, "values", refused)
    monkeypatch.setattr(splits, "fold_of_rows", refused)
    for name in ("fold_rows", "fold_assignment", "assigned_rows", "every_row"):
        monkeypatch.setattr(bodies, name, refused)
    [result], _ = run_folds(setup, stored.X, labels, [spec], client=None, task_labels=labels)
    assert (result.record is not None) == with_test_rows and (result.model is not None) != with_test_rows
