"""The fold engine (prepare / part / finish tasks) against an independent sequential reference.

The truth is ``reference_fold`` (tests/conftest.py): an explicit stratified
split and a scikit-learn pipeline fitted in one process, scored directly. An
ensemble fanned out as member tasks must give the same records to the last
bit for the thresholds (same seeds, same bags, same rows), and the same
metrics.
"""

import json

import numpy as np
import pytest

from dimbsvm.datasets import make_imbalanced
from dimbsvm.estimators import make_estimator, make_feature
from dimbsvm.jobs import JobData, run_job, validate_job
from dimbsvm.artifacts import load_artifact
from dimbsvm.jobs.part_store import PartDirectory
from dimbsvm.model_selection.folds import FoldSetup, FoldSpec, run_folds
from dimbsvm.model_selection.splits import minority_class, repeat_splits
from dimbsvm.rows import TransformedRows, map_row_blocks, take_rows
from dimbsvm.store import StoreRows, ingest

METRICS = ("g_mean", "f_measure", "auc")


@pytest.fixture(scope="module")
def small():
    X, y = make_imbalanced(n_samples=600, n_features=6, minority_fraction=0.08, random_state=2)
    return np.asarray(X), np.asarray(y)


def _same_records(actual, expected):
    for a, e in zip(actual, expected, strict=True):
        assert (a["seed"], a["fold"], a["n_train"], a["n_test"]) == (e["seed"], e["fold"], e["n_train"], e["n_test"])
        for name in METRICS:
            assert a[name] == pytest.approx(e[name], rel=1e-12, abs=1e-12), name
        for name in ("threshold", "member_thresholds"):
            assert a.get(name) == e.get(name), name


def _specs(y, keys, n_splits):
    splits = {seed: repeat_splits(y, n_splits=n_splits, seed=seed) for seed in {s for s, _ in keys}}
    return [FoldSpec((s, f), *splits[s][f]) for s, f in keys]


def _run(estimator, X, y, keys, *, n_splits, client, features=(), part_store=None):
    setup = FoldSetup(estimator, minority_class(y), scaler="minmax", impute="none", features=features,
                      metrics=METRICS, part_store=part_store)
    results, reused = run_folds(setup, X, y, _specs(y, keys, n_splits), client=client, retries=0)
    return [r.record for r in results], reused


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


#: A small recommended() ensemble: 2 settings x 2 members, the best setting kept.
SMALL_GRID = {"n_estimators": 2, "param_grid": {"C": [0.5, 5.0], "gamma": ["scale"]}, "top_candidates": 1,
              "random_state": 3}


#: The same with screening: 4 settings x 2 members first, the best 2 settings get a third.
SCREENED_GRID = {"n_estimators": 3, "param_grid": {"C": [0.5, 5.0], "gamma": [0.5, "scale"]}, "top_candidates": 1,
                 "screen_members": 2, "screen_survivors": 2, "random_state": 3}


@pytest.mark.parametrize("name, params", [
    ("ensemble_othr", {"n_estimators": 3, "random_state": 5}),
    ("recommended", SMALL_GRID),
    ("recommended", SCREENED_GRID),
    ("svc_balanced", {}),
    ("othr", {"estimator": "linear_svc"}),
])
def test_folds_equal_the_sequential_reference(scheduler, small, sequential_fold, name, params):
    X, y = small
    keys = [(1, 0), (1, 2), (2, 1)]
    records, reused = _run(make_estimator(name, params), X, y, keys, n_splits=3, client=scheduler)
    assert reused == 0
    _same_records(records, [sequential_fold(X, y, make_estimator(name, params), n_splits=3, seed=s, fold=f)
                            for s, f in keys])


def test_ensemble_job_equals_sequential_reference(client, small, sequential_fold, tmp_path):
    X, y = small
    params = {"n_estimators": 3, "random_state": 5}
    job = validate_job({"name": "ens", "data": {"source": "unused"},
                        "estimator": {"name": "ensemble_othr", "params": params},
                        "cv": {"n_splits": 3, "n_repeats": 2, "random_state": 1}, "metrics": list(METRICS)})
    result = run_job(job, client, out=tmp_path / "run", progress=False, data=JobData(X=X, y=y, meta={"name": "s"}))
    keys = [(s, f) for s in (1, 2) for f in range(3)]
    _same_records(result.folds, [sequential_fold(X, y, make_estimator("ensemble_othr", params), n_splits=3,
                                                 seed=s, fold=f) for s, f in keys])
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert len(saved["folds"][0]["member_thresholds"]) == 3
    assert not list((tmp_path / "run" / "members").glob("*.skops")), "part files are removed once a fold is done"
    # the final model is the same ensemble fitted on every row
    model, _ = load_artifact(tmp_path / "run" / "model")
    direct = make_estimator("ensemble_othr", params)
    from sklearn.preprocessing import MinMaxScaler
    scaler = MinMaxScaler().fit(X)
    direct.fit(scaler.transform(X), y)
    np.testing.assert_array_equal(model.decision_function(X), direct.decision_function(scaler.transform(X)))


def test_feature_stages_run_once_per_fold_and_match(scheduler, small, sequential_fold):
    X, y = small
    estimator = make_estimator("ensemble_othr", {"n_estimators": 2, "random_state": 0, "estimator": "linear_svc"})
    features = [make_feature("structural", {"n_neighbors": 5, "method": "exact"})]
    keys = [(0, 0), (0, 2)]
    records, _ = _run(estimator, X, y, keys, n_splits=3, client=scheduler, features=features)
    _same_records(records, [sequential_fold(X, y, estimator, n_splits=3, seed=s, fold=f, features=features)
                            for s, f in keys])


@pytest.mark.parametrize("name, params", [("ensemble_othr", {"n_estimators": 3, "random_state": 1}),
                                          ("recommended", SMALL_GRID), ("recommended", SCREENED_GRID),
                                          ("svc_balanced", {})])
def test_store_rows_are_read_per_member_and_match(scheduler, small, sequential_fold, tmp_path, name, params):
    X, y = small
    store = ingest((X.astype(np.float32), y), tmp_path / "data.zarr", chunk_rows=64)
    X32 = X.astype(np.float32).astype(np.float64)  # what the store holds
    estimator = make_estimator(name, params)
    keys = [(3, 1), (4, 0)]
    records, _ = _run(estimator, StoreRows(store.path, store.X.shape), y, keys, n_splits=4, client=scheduler)
    _same_records(records, [sequential_fold(X32, y, estimator, n_splits=4, seed=s, fold=f) for s, f in keys])


@pytest.mark.parametrize("name, params, oob_tasks, scaler", [("svc_balanced", {}, False, "minmax"),
                                                             ("ensemble_othr", {"n_estimators": 3}, True, "minmax"),
                                                             ("ensemble_othr", {"n_estimators": 3}, True, "none")])
def test_a_store_fold_is_cut_into_chunk_tasks(small, tmp_path, name, params, oob_tasks, scaler):
    """Scaler statistics, out-of-bag pooling and test scoring run as one task per stored chunk; the scaler is exact."""
    from sklearn.preprocessing import MinMaxScaler

    from dimbsvm.parallel import TaskPlan, run_plan
    from dimbsvm.fold_data.prepared import FoldRows
    from dimbsvm.model_selection.chunk_bodies import minmax_block_range, prepare_from_ranges
    from dimbsvm.model_selection.folds import add_fold

    X, y = small
    store = ingest((X.astype(np.float32), y), tmp_path / "data.zarr", chunk_rows=64)
    rows = StoreRows(store.path, store.X.shape)
    [spec] = _specs(y, [(0, 0)], 3)
    plan = TaskPlan()
    setup = FoldSetup(make_estimator(name, params), 1, scaler=scaler, impute="none", metrics=METRICS)
    finish, _, _ = add_fold(plan, spec, setup, X=plan.share(rows), y=plan.share(y), labels=y, block_rows=64)
    names = [task.name for task in plan.tasks]
    n_chunks = -(-len(y) // 64)
    assert names.count("score") == n_chunks  # every chunk holds test rows
    assert names.count("oob") == (n_chunks if oob_tasks else 0)
    # one read per training chunk before the members: its scaler statistics and/or the members' bag rows
    merged = scaler == "minmax"
    assert names.count("range") == (n_chunks if merged and not oob_tasks else 0)
    assert names.count("read") == (n_chunks if merged and oob_tasks else 0)
    assert names.count("gather") == (n_chunks if oob_tasks and not merged else 0)
    assert run_plan(plan)[finish.id].record["n_test"] == len(spec.test)
    if not merged:
        return
    # the merged scaler is the scaler fitted on all training rows at once
    X32 = X.astype(np.float32).astype(np.float64)
    fold = FoldRows(spec.train, spec.test)
    ranges = [minmax_block_range(rows, rows=fold, span=(64 * c, 64 * (c + 1))) for c in range(n_chunks)]
    merged = prepare_from_ranges(ranges, scaler="minmax").steps[0]
    direct = MinMaxScaler().fit(X32[spec.train])
    for attr in ("data_min_", "data_max_", "scale_", "min_", "n_samples_seen_"):
        np.testing.assert_array_equal(getattr(merged, attr), getattr(direct, attr))


def test_out_of_bag_pooling_still_rejects_a_nan_row(small):
    # the chunk is checked for NaN once for all members; a NaN row left out of the bags must still fail
    # as every member's own check failed, not pool a NaN margin into the threshold search
    from dimbsvm.fold_data.prepared import FoldRows, PreparedFold
    from dimbsvm.svm.pooled_oob import pooled_oob_block
    from dimbsvm.svm.members import fit_member

    X, y = small
    fold = FoldRows(np.arange(len(y)), np.empty(0, dtype=np.int64))
    member = fit_member(X, y, 0, pos_label=1, bootstrap="balanced", max_samples=20, keep_oob="bag")
    prepared = PreparedFold(steps=[], train_features=None, fit_time=0.0)
    chunk = pooled_oob_block(X, prepared, fold, [(member, 0.0)], span=(0, 64))
    out_of_bag = np.setdiff1d(np.arange(64), member.in_bag)
    assert chunk.first == 0
    np.testing.assert_array_equal(chunk.counts, np.isin(np.arange(64), out_of_bag))
    np.testing.assert_allclose(chunk.margins[out_of_bag],
                               member.estimator.decision_function(X[out_of_bag]) * member.margin_sign)
    assert np.isnan(chunk.margins[member.in_bag[member.in_bag < 64]]).all()
    np.testing.assert_array_equal(chunk.order, np.argsort(chunk.margins, kind="stable"))
    X = X.copy()
    X[out_of_bag[0], 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        pooled_oob_block(X, prepared, fold, [(member, 0.0)], span=(0, 64))


def test_out_of_bag_pooling_in_cache_sized_pieces_equals_the_members_margins(monkeypatch):
    # each member's margins are computed a cache-sized piece of the chunk at a time; the pooled mean must
    # be the members' own margins on the whole chunk, summed in member order (to the last bit)
    from dimbsvm import rows as row_helpers
    from dimbsvm.fold_data.prepared import FoldRows, PreparedFold
    from dimbsvm.svm.pooled_oob import pooled_oob_block
    from dimbsvm.svm.members import fit_member

    X, y = make_imbalanced(n_samples=5000, n_features=6, minority_fraction=0.1, random_state=4)
    X, y = np.asarray(X), np.asarray(y)
    fold = FoldRows(np.arange(len(y)), np.empty(0, dtype=np.int64))
    members = [fit_member(X, y, seed, pos_label=1, bootstrap="balanced", max_samples=400, keep_oob="bag")
               for seed in (1, 2, 3)]
    monkeypatch.setattr(row_helpers, "CACHE_BLOCK_BYTES", 1)  # pieces of the smallest size, 1024 rows
    assert len(row_helpers.cache_blocks(X[:3500])) == 4
    chunk = pooled_oob_block(X, PreparedFold(steps=[], train_features=None, fit_time=0.0), fold,
                             [(m, 0.0) for m in members], span=(500, 4000))
    rows = np.arange(500, 4000)
    total, counts = np.zeros(rows.size), np.zeros(rows.size, dtype=np.int64)
    for member in members:
        out = ~np.isin(rows, member.in_bag)
        total[out] += (member.margin_sign * member.estimator.decision_function(X[rows]))[out]
        counts[out] += 1
    assert chunk.first == 500 and counts.min() == 0 < counts.max()
    np.testing.assert_array_equal(chunk.counts, counts)
    with np.errstate(invalid="ignore", divide="ignore"):
        np.testing.assert_array_equal(chunk.margins, np.where(counts > 0, total / np.maximum(counts, 1), np.nan))


def test_a_chunks_out_of_bag_mask_equals_set_membership():
    from dimbsvm.svm.pooled_oob import _outside

    rng = np.random.RandomState(0)
    in_bag = np.unique(rng.randint(0, 1000, size=300))
    for first, stop in [(0, 64), (100, 400), (960, 1000), (5, 5)]:
        np.testing.assert_array_equal(_outside(in_bag, first, stop), ~np.isin(np.arange(first, stop), in_bag))


def test_saved_parts_are_reused_not_refitted(client, small, sequential_fold, tmp_path):
    from dimbsvm.fold_data.prepared import FoldRows
    from dimbsvm.model_selection.bodies import prepare_fold
    from dimbsvm.svm.parts import fit_part
    from dimbsvm.svm.parts import parts_of

    X, y = small
    estimator = make_estimator("ensemble_othr", {"n_estimators": 3, "random_state": 2})
    store = PartDirectory(tmp_path / "members")
    # an interrupted run left members 0 and 2 of fold (0, 1) behind
    [spec] = _specs(y, [(0, 1)], 3)
    rows = FoldRows(spec.train, spec.test)
    parts, _ = parts_of(estimator, y[spec.train])
    prepared = prepare_fold(X, y, rows, scaler="minmax", impute="none", features=[])
    for m in (0, 2):
        store.save(spec.key, m, fit_part(X, y, prepared, rows, estimator=estimator, part=parts[m]))
    records, reused = _run(estimator, X, y, [(0, 1)], n_splits=3, client=client, part_store=store)
    assert reused == 2
    _same_records(records, [sequential_fold(X, y, estimator, n_splits=3, seed=0, fold=1)])
    assert not list((tmp_path / "members").glob("*.skops"))


def test_a_small_in_memory_fold_is_preprocessed_once_and_its_members_are_the_row_views(small, monkeypatch):
    # below PREPROCESSED_ONCE_BYTES the prepare task scales the fold's training rows once and members slice
    # them; the truth is the same members fitted on rows scaled as they are read (the path above the cap)
    import dimbsvm.model_selection.bodies as bodies
    from dimbsvm.fold_data.prepared import FoldRows, training_data
    from dimbsvm.model_selection.bodies import prepare_fold
    from dimbsvm.svm.parts import fit_part
    from dimbsvm.svm.parts import parts_of

    X, y = small
    estimator = make_estimator("ensemble_othr", {"n_estimators": 3, "random_state": 2})
    [spec] = _specs(y, [(0, 1)], 3)
    rows = FoldRows(spec.train, spec.test)
    parts, _ = parts_of(estimator, y[spec.train])
    once = prepare_fold(X, y, rows, scaler="minmax", impute="none", features=[])
    X_once, y_once, train_once = training_data(X, y, once, rows)
    assert isinstance(X_once, np.ndarray) and train_once is None
    np.testing.assert_array_equal(y_once, y[spec.train])
    monkeypatch.setattr(bodies, "PREPROCESSED_ONCE_BYTES", X.shape[1] * 8 * len(spec.train) - 1)  # one row too many
    read = prepare_fold(X, y, rows, scaler="minmax", impute="none", features=[])
    X_read, _, train_read = training_data(X, y, read, rows)
    assert isinstance(X_read, TransformedRows) and np.array_equal(train_read, spec.train)
    np.testing.assert_array_equal(X_once, X_read[spec.train])
    for part in parts:
        (a, _), (b, _) = (fit_part(X, y, prepared, rows, estimator=estimator, part=part) for prepared in (once, read))
        assert a.threshold == b.threshold and a.oob_margins is not None  # the pooled search's margins
        np.testing.assert_array_equal(a.oob_rows, b.oob_rows)
        np.testing.assert_array_equal(a.oob_margins, b.oob_margins)
        np.testing.assert_array_equal(a.estimator.dual_coef_, b.estimator.dual_coef_)  # RBF SVC members
        np.testing.assert_array_equal(a.estimator.support_, b.estimator.support_)


@pytest.mark.parametrize("member_task_rows, member_tasks, batch_tasks", [(1, 4, 0), (1200, 0, 2)])
def test_retrain_fans_ensemble_members_out(client, small, tmp_path, monkeypatch, member_task_rows, member_tasks,
                                           batch_tasks):
    # one task per member once a member's rows are worth a task; below, members batched per task
    # (MEMBER_TASK_ROWS of 1200 on 401-600 training rows: two members per task, so two tasks)
    from distributed import get_task_stream

    import dimbsvm.svm.ensemble_fold as ensemble_fold
    from dimbsvm.jobs.retrain import retrain

    monkeypatch.setattr(ensemble_fold, "MEMBER_TASK_ROWS", member_task_rows)
    X, y = small
    job = validate_job({"name": "ens", "data": {"source": "unused"},
                        "estimator": {"name": "ensemble_othr", "params": {"n_estimators": 4, "random_state": 0}}})
    with get_task_stream(client) as stream:
        outcome = retrain(job, client, tmp_path / "registry", job_text="", data=JobData(X=X, y=y, meta={}))
    keys = [str(task["key"]) for task in stream.data]
    assert sum(key.startswith("member-") for key in keys) == member_tasks
    assert sum(key.startswith("members-") for key in keys) == batch_tasks
    assert outcome.promoted


def test_base_estimator_is_chosen_by_registry_name_only():
    from dimbsvm.exceptions import JobSpecError

    with pytest.raises(JobSpecError, match="unknown estimator 'os.system'"):
        make_estimator("ensemble_othr", {"estimator": "os.system"})
    with pytest.raises(JobSpecError, match="has no base estimator"):
        make_estimator("svc", {"estimator": "svc"})
    assert make_estimator("othr", {"estimator": "linear_svc", "estimator__C": 0.5}).estimator.C == 0.5


@pytest.mark.parametrize("searched", [False, True], ids=["plain", "searched"])
def test_a_store_job_sends_no_row_arrays_in_the_graph(tmp_path, graph_array_sizes, searched):
    """Over a store, labels and fold rows (a search's inner folds too) reach the tasks as a handle and as tasks,
    never as arrays."""
    from dimbsvm.parallel import TaskPlan
    from dimbsvm.model_selection.folds import add_fold
    from dimbsvm.model_selection.search import Search, candidate_params

    X, y = make_imbalanced(n_samples=5000, n_features=4, minority_fraction=0.1, random_state=0)
    X, y = np.asarray(X), np.asarray(y)
    store = ingest((X, y), tmp_path / "data.zarr", chunk_rows=500)
    rows = StoreRows(store.path, store.X.shape)
    plan = TaskPlan()
    X_ref, y_ref = plan.share(rows), plan.share(rows.labels())
    search = Search(candidate_params({"estimator__C": [1, 10]}), n_splits=3) if searched else None
    for fold, (train, test) in enumerate(repeat_splits(y, n_splits=2, seed=0)):
        setup = FoldSetup(make_estimator("ensemble_othr", {"n_estimators": 2}), 1, scaler="minmax", impute="none",
                          metrics=METRICS, search=search)
        add_fold(plan, FoldSpec((0, fold), train, test, split={"n_splits": 2, "seed": 0, "fold": fold}), setup,
                 X=X_ref, y=y_ref, labels=y, block_rows=500)

    sizes = graph_array_sizes(plan)
    assert sizes and max(sizes) < 100  # seeds and spans only; 5,000 labels and 2,500-row folds stay out
    if searched:  # 2,500-row training folds: one task per (outer fold, inner fold, candidate), members in turn
        assert sum(task.name == "inner-score" for task in plan.tasks) == 2 * 3 * 2
        assert not any(task.name == "inner-fit" for task in plan.tasks)


def _write_graph_stage(store_path, indices, stage="stages/test-graph"):
    from dimbsvm.store import create_checksummed_array, finish_stage, open_stage

    group = open_stage(store_path, stage, "test-fingerprint")
    create_checksummed_array(group, "indices", shape=indices.shape, dtype="int64", chunks=(64, indices.shape[1]))[:] \
        = indices
    finish_stage(group)
    return str(store_path / stage)


@pytest.mark.parametrize("name, params", [("linear_svc", {}),
                                          ("ensemble_othr", {"estimator": "linear_svc", "n_estimators": 3,
                                                             "random_state": 0})])
def test_stored_structural_stage_equals_exact_per_fold_graph(scheduler, tmp_path, name, params):
    """With every other row stored, the fold's filtered neighbours are exactly its kNN graph, and the fold's
    record equals a sequential fit on [fold-scaled x, n(x)] built from exact per-fold neighbours."""
    import scipy.sparse as sp
    from sklearn.base import clone
    from sklearn.neighbors import NearestNeighbors
    from sklearn.preprocessing import MinMaxScaler

    from sklearn.metrics import roc_auc_score

    from dimbsvm.metrics import g_mean
    from dimbsvm.model_selection.stages import StoredStructural

    X, y = make_imbalanced(n_samples=300, n_features=4, minority_fraction=0.1, random_state=4)
    X, y = np.asarray(X), np.asarray(y)
    store = ingest((X, y), tmp_path / "data.zarr", chunk_rows=64)
    global_scaled = MinMaxScaler().fit_transform(X)
    all_neighbours = NearestNeighbors(n_neighbors=len(X)).fit(global_scaled).kneighbors(
        global_scaled, return_distance=False)[:, 1:]  # every other row, nearest first (no exact ties here)
    stage = StoredStructural(_write_graph_stage(tmp_path / "data.zarr", all_neighbours), n_neighbors=5,
                             weight=1.0, base="linear", levels=100, normalize="none")
    keys = [(0, 0), (0, 2)]
    specs = _specs(y, keys, 3)
    setup = FoldSetup(make_estimator(name, params), 1, scaler="minmax", impute="none", metrics=("g_mean", "auc"),
                      stage=stage)
    results, _ = run_folds(setup, StoreRows(store.path, store.X.shape), y, specs, client=scheduler, retries=0)
    for spec, result in zip(specs, results):
        train, test = spec.train, spec.test
        index = NearestNeighbors(n_neighbors=6).fit(global_scaled[train])
        train_nb = index.kneighbors(global_scaled[train], return_distance=False)[:, 1:]  # self excluded
        test_nb = index.kneighbors(global_scaled[test], n_neighbors=5, return_distance=False)
        scaler = MinMaxScaler().fit(X[train])

        def features(rows, neighbours, train=train, scaler=scaler):
            indicator = sp.csr_matrix((np.ones(neighbours.size), neighbours.ravel(),
                                       np.arange(0, neighbours.size + 1, 5)), shape=(len(rows), len(train)))
            return sp.hstack([sp.csr_matrix(scaler.transform(X[rows])), indicator], format="csr")

        model = clone(make_estimator(name, params)).fit(features(train, train_nb), y[train])
        X_test = features(test, test_nb)
        assert result.record["g_mean"] == pytest.approx(g_mean(y[test], model.predict(X_test)), rel=1e-12)
        assert result.record["auc"] == pytest.approx(
            roc_auc_score(y[test] == 1, model.decision_function(X_test)), rel=1e-12)


def test_job_with_stored_structural_stage_builds_once_and_reuses(client, tmp_path, caplog):
    """The kNN graph is written into the store once; a second run reuses it (log line, marker) with the same
    records, and so does a run that recomputes it after the stage is deleted."""
    import logging
    import shutil

    from dimbsvm.store import stage_is_complete
    from dimbsvm.store.stages import read_meta

    X, y = make_imbalanced(n_samples=1500, n_features=5, minority_fraction=0.1, random_state=1)
    path = tmp_path / "data.zarr"
    ingest((np.asarray(X), np.asarray(y)), path, chunk_rows=250)
    job = validate_job({"name": "stored", "data": {"source": str(path)},
                        "features": [{"name": "structural", "params": {"n_neighbors": 5}, "stored": True,
                                      "k_store": 15}],
                        "estimator": {"name": "linear_svc"}, "cv": {"n_splits": 3, "random_state": 0},
                        "metrics": ["g_mean", "auc"], "output": {"model": False}})
    with caplog.at_level(logging.INFO, logger="dimbsvm"):
        first = run_job(job, client, out=tmp_path / "run1", progress=False)
    assert "building stored stage" in caplog.text
    [stage] = list((path / "stages").iterdir())
    assert stage_is_complete(path, f"stages/{stage.name}", read_meta(stage)["fingerprint"])
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="dimbsvm"):
        second = run_job(job, client, out=tmp_path / "run2", progress=False)
    assert "reused" in caplog.text and "building stored stage" not in caplog.text
    assert second.folds == first.folds
    shutil.rmtree(stage)
    third = run_job(job, client, out=tmp_path / "run3", progress=False)
    assert third.folds == first.folds
    assert 0.5 < first.summary["auc"]["mean"] <= 1.0


def test_stored_stage_needs_a_store_and_no_final_model():
    from dimbsvm.exceptions import JobSpecError

    base = {"data": {"source": "yeast5"}, "estimator": {"name": "linear_svc"},
            "features": [{"name": "structural", "stored": True}]}
    with pytest.raises(JobSpecError, match="set output.model: false"):
        validate_job(base)
    with pytest.raises(JobSpecError, match="only similarity and structural can be stored"):
        validate_job(dict(base, features=[{"name": "hik", "stored": True}], output={"model": False}))
    with pytest.raises(JobSpecError, match="reference_selection 'stratified' would use the labels of test rows"):
        validate_job(dict(base, features=[{"name": "similarity", "stored": True,
                                           "params": {"reference_selection": "stratified"}}]))
    with pytest.raises(JobSpecError, match="k_store' applies to a stored stage"):
        validate_job(dict(base, features=[{"name": "structural", "k_store": 20}]))
    from dimbsvm.exceptions import DataError
    from dimbsvm.jobs import check_job_data, load_job_data

    job = validate_job(dict(base, output={"model": False}))
    with pytest.raises(DataError, match="stored feature stage is kept in a dimbsvm Zarr store"):
        check_job_data(load_job_data("yeast5"), job)


def test_job_with_stored_similarity_stage_equals_reference_and_reuses(client, tmp_path, caplog):
    """Stored distances to references drawn from all rows: each fold's features are (mu - d) / sigma with
    the fold's training moments; equal to a sequential computation; a second run reuses the stage; the final
    model scores new rows as the folds did."""
    import logging

    from sklearn.base import clone
    from sklearn.metrics import roc_auc_score
    from sklearn.preprocessing import MinMaxScaler

    from dimbsvm.jobs import load_artifact

    X, y = make_imbalanced(n_samples=1200, n_features=5, minority_fraction=0.1, random_state=2)
    X, y = np.asarray(X), np.asarray(y)
    path = tmp_path / "data.zarr"
    ingest((X, y), path, chunk_rows=200)
    job = validate_job({"name": "sim", "data": {"source": str(path)},
                        "features": [{"name": "similarity", "params": {"references": 20, "random_state": 3},
                                      "stored": True}],
                        "estimator": {"name": "linear_svc"}, "cv": {"n_splits": 3, "random_state": 0},
                        "metrics": ["g_mean", "auc"]})
    with caplog.at_level(logging.INFO, logger="dimbsvm"):
        first = run_job(job, client, out=tmp_path / "run1", progress=False)
    assert "building stored stage similarity/" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="dimbsvm"):
        second = run_job(job, client, out=tmp_path / "run2", progress=False)
    assert "reused" in caplog.text and "building stored stage" not in caplog.text
    assert second.folds == first.folds

    # the sequential truth: references drawn as documented, distances in the all-rows scaling
    scaled = MinMaxScaler().fit_transform(X)
    S = scaled[np.sort(np.random.default_rng(3).choice(len(X), size=20, replace=False))]
    D = np.sqrt(((scaled[:, None, :] - S[None, :, :]) ** 2).sum(axis=2))
    for record, (train, test) in zip(first.folds, repeat_splits(y, n_splits=3, seed=0)):
        mu, sigma = D[train].mean(axis=0), D[train].std(axis=0)
        model = clone(make_estimator("linear_svc", {})).fit((mu - D[train]) / sigma, y[train])
        scores = model.decision_function((mu - D[test]) / sigma)
        assert record["auc"] == pytest.approx(roc_auc_score(y[test] == 1, scores), rel=1e-9)
    final, _ = load_artifact(tmp_path / "run1" / "model")  # a standalone model: raw rows in, like predict
    mu, sigma = D.mean(axis=0), D.std(axis=0)
    direct = clone(make_estimator("linear_svc", {})).fit((mu - D) / sigma, y)
    # (the moments merged chunk by chunk differ from numpy's in the last bits; LIBLINEAR's solution
    # moves within its tolerance)
    np.testing.assert_allclose(final.decision_function(X[:50]), direct.decision_function(((mu - D) / sigma)[:50]),
                               atol=1e-5)


@pytest.mark.parametrize("in_store", [False, True], ids=["in-memory", "store"])
def test_out_of_fold_probabilities_equal_the_fold_pipelines_predict_proba(small, tmp_path, in_store):
    """keep_predictions returns each test row's positive-class probability, as the fold's plain pipeline gives it."""
    from sklearn.base import clone
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler

    X, y = small
    estimator = make_estimator("ensemble_othr", {"n_estimators": 3, "probability": True, "random_state": 1})
    data = X
    if in_store:  # chunked: the test rows are scored one task per stored chunk (the store holds float32)
        X = X.astype(np.float32).astype(np.float64)
        store = ingest((X.astype(np.float32), y), tmp_path / "p.zarr", chunk_rows=100)
        data = StoreRows(store.path, store.X.shape)
    setup = FoldSetup(estimator, minority_class(y), scaler="minmax", impute="none", metrics=METRICS,
                      keep_predictions=True)
    [spec] = _specs(y, [(0, 1)], 3)
    [result], _ = run_folds(setup, data, y, [spec], client=None, retries=0)
    reference = make_pipeline(MinMaxScaler(), clone(estimator)).fit(X[spec.train], y[spec.train])
    positive = list(reference.classes_).index(minority_class(y))
    np.testing.assert_allclose(result.predictions.proba, reference.predict_proba(X[spec.test])[:, positive],
                               rtol=0, atol=1e-12)
    # a model without probabilities keeps none
    setup = FoldSetup(make_estimator("svc_balanced", {}), minority_class(y), metrics=METRICS, keep_predictions=True)
    [result], _ = run_folds(setup, data, y, [spec], client=None, retries=0)
    assert result.predictions.proba is None


def test_small_folds_batch_their_members_and_give_the_same_records(small, sequential_fold):
    # a fold of 400 training rows: members_per_task(400) = 50, so 120 members are 3 tasks, not 120;
    # the record equals the sequential reference, as without batches
    from dimbsvm.model_selection.folds import add_fold
    from dimbsvm.svm.ensemble_fold import MEMBER_TASK_ROWS, members_per_task
    from dimbsvm.parallel import TaskPlan, run_plan

    X, y = small
    estimator = make_estimator("ensemble_othr", {"n_estimators": 120, "random_state": 4})
    [spec] = _specs(y, [(0, 0)], 3)
    plan = TaskPlan()
    setup = FoldSetup(estimator, minority_class(y), scaler="minmax", impute="none", metrics=METRICS)
    finish, _, _ = add_fold(plan, spec, setup, X=plan.share(X), y=plan.share(y), labels=y)
    names = [task.name for task in plan.tasks]
    # 600 rows in 3 stratified folds: 400 training rows, give or take one per class
    assert abs(len(spec.train) - 400) <= 2 and members_per_task(len(spec.train)) == MEMBER_TASK_ROWS // 400 == 50
    assert names.count("members") == 3 and "member" not in names
    _same_records([run_plan(plan)[finish.id].record],
                  [sequential_fold(X, y, estimator, n_splits=3, seed=0, fold=0)])


@pytest.mark.parametrize("store", [False, True], ids=["in-memory-batched", "store-one-task-per-member"])
def test_a_screening_ensemble_fits_its_two_rounds_as_member_tasks(small, sequential_fold, tmp_path, store):
    """Round one's members, one screening task, round two's members (settings read from it), one assembly."""
    from dimbsvm.model_selection.folds import add_fold
    from dimbsvm.parallel import TaskPlan, run_plan

    X, y = small
    estimator = make_estimator("recommended", SCREENED_GRID)
    [spec] = _specs(y, [(0, 1)], 3)
    data = X
    if store:
        stored = ingest((X.astype(np.float32), y), tmp_path / "data.zarr", chunk_rows=64)
        data, X = StoreRows(stored.path, stored.X.shape), X.astype(np.float32).astype(np.float64)
    plan = TaskPlan()
    setup = FoldSetup(estimator, minority_class(y), scaler="minmax", impute="none", metrics=METRICS)
    finish, _, _ = add_fold(plan, spec, setup, X=plan.share(data), y=plan.share(y), labels=y,
                            block_rows=64 if store else None)
    names = [task.name for task in plan.tasks]
    assert names.count("screen") == 1 and names.count("ensemble") == 1
    n_first, n_added = 4 * 2, 2 * 1  # 4 settings x 2 screening members; 2 survivors x 1 more
    if store:
        assert names.count("member") == n_first + n_added
    else:  # a fold of 400 rows: each round's members are one batch
        assert names.count("members") == 2 and "member" not in names
    _same_records([run_plan(plan)[finish.id].record],
                  [sequential_fold(X, y, estimator, n_splits=3, seed=0, fold=1)])
