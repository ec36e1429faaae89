"""Tests of dimbsvm.graph: exact against brute force, pynndescent recall, the fitted index, the sharded build."""

import logging
import pickle
import time

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

from dimbsvm.exceptions import DataError, StoreError
from dimbsvm.graph import KNNIndex, open_knn_graph, sample_recall, sharded, warm_up
from dimbsvm.graph.knn import drop_self, nearest_neighbors
from dimbsvm.model_selection.graph_build import knn_graph


def _brute_force(X_index, X_query, k):
    distances = np.sqrt(((X_query[:, None, :] - X_index[None, :, :]) ** 2).sum(axis=2))
    order = np.argsort(distances, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(distances, order, axis=1)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("k", [1, 5, 40])
def test_exact_matches_brute_force(k, sparse):
    rng = np.random.RandomState(0)
    X_index, X_query = rng.normal(size=(40, 4)), rng.normal(size=(15, 4))
    expected_indices, expected_distances = _brute_force(X_index, X_query, k)
    if sparse:
        X_index, X_query = sp.csr_matrix(X_index), sp.csr_matrix(X_query)
    indices, distances = nearest_neighbors(X_index, X_query, k, method="exact")
    assert indices.shape == distances.shape == (15, k)
    assert indices.dtype == np.int64
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_allclose(distances, expected_distances, rtol=1e-10, atol=1e-12)


def test_auto_is_exact_for_small_index():
    rng = np.random.RandomState(1)
    X_index, X_query = rng.rand(50, 3), rng.rand(7, 3)
    auto = nearest_neighbors(X_index, X_query, 3)
    exact = nearest_neighbors(X_index, X_query, 3, method="exact")
    np.testing.assert_array_equal(auto[0], exact[0])


def test_empty_query():
    indices, distances = nearest_neighbors(np.zeros((3, 2)), np.zeros((0, 2)), 2)
    assert indices.shape == distances.shape == (0, 2)


@pytest.mark.parametrize("n_neighbors", [0, 6, 2.0, True])
def test_bad_n_neighbors(n_neighbors):
    with pytest.raises(ValueError, match=r"n_neighbors must be an integer in \[1, 5\]"):
        nearest_neighbors(np.zeros((5, 2)), np.zeros((1, 2)), n_neighbors)


def test_bad_method_and_features():
    with pytest.raises(ValueError, match="method must be one of"):
        nearest_neighbors(np.zeros((5, 2)), np.zeros((1, 2)), 1, method="annoy")
    with pytest.raises(ValueError, match="X_query has 3 features but X_index has 2"):
        nearest_neighbors(np.zeros((5, 2)), np.zeros((1, 3)), 1)


def test_pynndescent_recall():
    # The first NN-descent build compiles numba code: this test takes ~30 s once.
    rng = np.random.RandomState(0)
    X_index, X_query = rng.normal(size=(1500, 8)), rng.normal(size=(200, 8))
    k = 10
    approx, approx_distances = nearest_neighbors(
        X_index, X_query, k, method="pynndescent", random_state=0
    )
    exact, _ = nearest_neighbors(X_index, X_query, k, method="exact")
    assert approx.shape == (200, k)
    recall = np.mean([np.intersect1d(a, e).size / k for a, e in zip(approx, exact)])
    assert recall >= 0.9
    assert np.all(np.diff(approx_distances, axis=1) >= -1e-6)
    true = np.linalg.norm(X_query[:, None, :] - X_index[approx], axis=2)
    np.testing.assert_allclose(approx_distances, true, rtol=1e-4)


# --- kNN graphs, the fitted index, the sharded build (issue 6) ------------------------------------



def _clustered(n, d=8, centers=20, seed=0):
    rng = np.random.RandomState(seed)
    means = rng.normal(scale=4.0, size=(centers, d))
    return (means[rng.randint(centers, size=n)] + rng.normal(size=(n, d))).astype(np.float32)


def _exact_graph(X, k):
    """Brute-force k nearest other rows (float64 arithmetic)."""
    X = np.asarray(X, dtype=np.float64)
    D = ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2)
    np.fill_diagonal(D, np.inf)
    order = np.argsort(D, axis=1, kind="stable")[:, :k]
    return order, np.sqrt(np.take_along_axis(D, order, axis=1))


def _recall(found, exact):
    return np.mean([np.intersect1d(f, e).size / exact.shape[1] for f, e in zip(found, exact)])


@pytest.fixture(scope="module")
def warm():
    """One numba compilation of pynndescent for the whole module (~25 s in a fresh process)."""
    warm_up()


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(processes=False, n_workers=2, threads_per_worker=1,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        yield c


def test_knn_graph_exact_excludes_self():
    X = np.random.RandomState(0).normal(size=(60, 3))
    indices, distances = knn_graph(X, 4, method="exact")
    expected, expected_distances = _exact_graph(X, 4)
    np.testing.assert_array_equal(indices, expected)
    np.testing.assert_allclose(distances, expected_distances, rtol=1e-10)
    assert not (indices == np.arange(60)[:, None]).any()


def test_duplicates_are_neighbours_but_self_is_not():
    X = np.array([[0.0], [0.0], [5.0], [9.0]])
    indices, distances = knn_graph(X, 1, method="exact")
    np.testing.assert_array_equal(indices[:2, 0], [1, 0])
    assert distances[0, 0] == distances[1, 0] == 0.0


def test_drop_self_removes_own_entry_or_the_farthest():
    indices = np.array([[3, 0, 1], [0, 2, 3]])
    kept, _ = drop_self(indices, indices * 1.0, np.array([0, 1]))
    np.testing.assert_array_equal(kept, [[3, 1], [0, 2]])


def test_approximate_graph_recall_and_self_exclusion(warm, caplog):
    X = _clustered(3000)
    exact, _ = _exact_graph(X, 10)
    with caplog.at_level(logging.INFO, logger="dimbsvm.model_selection.graph_build"):
        indices, distances = knn_graph(X, 10, method="pynndescent", build_neighbors=25, random_state=0)
    assert indices.shape == distances.shape == (3000, 10)
    assert not (indices == np.arange(3000)[:, None]).any()
    assert _recall(indices, exact) >= 0.95
    assert np.all(np.diff(distances, axis=1) >= -1e-5)
    assert "recall" in caplog.text
    # the sampled recall agrees with the full one on its rows
    recall, rows = sample_recall(X, indices, sample_size=500)
    assert recall == pytest.approx(_recall(indices[rows], exact[rows]))


def test_fitted_index_answers_new_rows_and_survives_pickling(warm):
    X, new = np.split(_clustered(2700, seed=1), [2500])  # new rows from the same clusters
    index = KNNIndex(10, method="pynndescent", random_state=0).fit(X)
    assert index.method_ == "pynndescent" and index.build_neighbors_ == 25
    exact, _ = nearest_neighbors(X, new, 10, method="exact")
    found, _ = index.query(new)
    assert _recall(found, exact) >= 0.9
    restored = pickle.loads(pickle.dumps(index))
    np.testing.assert_array_equal(restored.query(new, 10)[0], found)


def test_narrow_build_width_still_returns_k_neighbours(warm):
    X = _clustered(1200, seed=3)
    indices, _ = KNNIndex(10, method="pynndescent", build_neighbors=6, random_state=0).fit(X).neighbor_graph()
    assert indices.shape == (1200, 10)
    assert not (indices == np.arange(1200)[:, None]).any()


def test_graph_errors():
    X = np.random.RandomState(0).rand(5, 2)
    with pytest.raises(ValueError, match=r"smaller than the number of rows \(n_samples = 5\)"):
        knn_graph(X, 5)
    bad = X.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        knn_graph(bad, 2)
    with pytest.raises(ValueError, match="unknown metric 'eucliden'; pynndescent knows: .*euclidean"):
        knn_graph(X, 2, metric="eucliden")
    with pytest.raises(ValueError, match="not to scikit-learn's exact search"):
        knn_graph(X, 2, metric="wasserstein", method="exact")
    index = KNNIndex(2).fit(X)
    with pytest.raises(ValueError, match="X has 3 features, but the index was fitted on 2 features"):
        index.query(np.zeros((1, 3)))
    with pytest.raises(ValueError, match=r"n_neighbors must be an integer in \[1, 5\]"):
        index.query(X, 6)
    with pytest.raises(ValueError, match="not fitted"):
        KNNIndex().query(X)


@pytest.mark.parametrize("use_client", [False, True])
def test_sharded_exact_equals_single_index(tmp_path, use_client, request):
    client = request.getfixturevalue("client") if use_client else None
    X = np.random.RandomState(4).normal(size=(1000, 6))
    # 3 shards of 3 chunks of 111 rows; the 1-row tail chunk joins the last shard
    indices, distances = knn_graph(da.from_array(X, chunks=(111, 6)), 7, method="exact", store=tmp_path / "s.zarr",
                                   shard_rows=333, client=client, strategy="sharded")
    assert isinstance(indices, da.Array)
    expected, expected_distances = _exact_graph(X, 7)
    np.testing.assert_array_equal(indices.compute(), expected)
    np.testing.assert_allclose(distances.compute(), expected_distances, rtol=1e-10)
    meta = open_knn_graph(tmp_path / "s.zarr").meta
    assert meta["n_shards"] == 3 and meta["recall"] is None
    assert not any(name.startswith("_") for name in __import__("zarr").open_group(str(tmp_path / "s.zarr/knn")))


def test_sharded_pynndescent_recall_in_meta(tmp_path, client, warm):
    from dimbsvm.store import ingest

    X = _clustered(6000, seed=5)
    ingest((X, np.zeros(6000, dtype=np.int32)), tmp_path / "c.zarr", chunk_rows=1000)
    indices, _ = knn_graph(str(tmp_path / "c.zarr"), 10, method="pynndescent", shard_rows=2000, strategy="sharded",
                           random_state=0, recall_sample=500)
    graph = open_knn_graph(tmp_path / "c.zarr")
    assert graph.meta["shard_methods"] == ["pynndescent"] * 3
    assert graph.meta["recall"] >= 0.95 and graph.meta["recall_rows"] == 500
    assert set(graph.meta["timings"]) >= {"check", "warm_up", "shards", "merge", "recall"}
    assert all(v > 0 for v in graph.meta["peak_rss_bytes"].values())
    exact, _ = _exact_graph(X[:800], 10)  # rows 0..799: compare where the exact answer is cheap
    full_exact = nearest_neighbors(X, X[:800], 11, method="exact")[0]
    exact = drop_self(full_exact, full_exact * 1.0, np.arange(800))[0]
    assert _recall(indices[:800].compute(), exact) >= 0.95


def test_stored_graph_is_reused(tmp_path):
    X = da.from_array(np.random.RandomState(6).rand(400, 3), chunks=(100, 3))
    knn_graph(X, 5, method="exact", store=tmp_path / "s.zarr", random_state=0)
    marker = tmp_path / "s.zarr" / "knn" / "zarr.json"
    before = (marker.stat().st_mtime_ns, open_knn_graph(tmp_path / "s.zarr").meta)
    time.sleep(0.01)
    knn_graph(X, 5, method="exact", store=tmp_path / "s.zarr", random_state=0)
    assert (marker.stat().st_mtime_ns, open_knn_graph(tmp_path / "s.zarr").meta) == before
    knn_graph(X, 6, method="exact", store=tmp_path / "s.zarr", random_state=0)  # new parameters: rebuilt
    assert open_knn_graph(tmp_path / "s.zarr").meta["n_neighbors"] == 6


def _counting_shard_task(*, log, **kwargs):
    with open(log, "a") as handle:  # a file, not a list: tasks may run on pickled copies
        handle.write(f"{kwargs['shard']}\n")
    return _REAL_SHARD_TASK(**kwargs)


def _failing_merge_task(**kwargs):
    raise RuntimeError("worker lost")


_REAL_SHARD_TASK = sharded._shard_task


def test_interrupted_build_resumes_without_rebuilding_shards(tmp_path, monkeypatch):
    import functools

    X = da.from_array(np.random.RandomState(7).rand(300, 3), chunks=(50, 3))
    log = tmp_path / "shards.log"
    real_merge = sharded._merge_task
    monkeypatch.setattr(sharded, "_shard_task", functools.partial(_counting_shard_task, log=str(log)))
    monkeypatch.setattr(sharded, "_merge_task", _failing_merge_task)
    with pytest.raises(RuntimeError, match="worker lost"):
        knn_graph(X, 4, method="exact", store=tmp_path / "s.zarr", shard_rows=100, random_state=0,
                  strategy="sharded")
    with pytest.raises(StoreError, match="incomplete"):
        open_knn_graph(tmp_path / "s.zarr")
    assert sorted(log.read_text().split()) == ["0", "1", "2"]
    monkeypatch.setattr(sharded, "_merge_task", real_merge)
    indices, _ = knn_graph(X, 4, method="exact", store=tmp_path / "s.zarr", shard_rows=100, random_state=0,
                  strategy="sharded")
    assert sorted(log.read_text().split()) == ["0", "1", "2"]  # no shard built again
    np.testing.assert_array_equal(indices.compute(), _exact_graph(X.compute(), 4)[0])


def test_sharded_rejects_nan_before_any_task(tmp_path):
    X = np.random.RandomState(8).rand(200, 3)
    X[150, 2] = np.inf
    with pytest.raises(DataError, match="first in row 150"):
        knn_graph(da.from_array(X, chunks=(50, 3)), 3, store=tmp_path / "s.zarr")
    assert not (tmp_path / "s.zarr" / "knn").exists()


# --- memory-bounded steps of the sharded build (issue 6, worker memory below the data size) ----------------


def test_merge_task_equals_global_top_k_with_ties(tmp_path):
    """Shard-by-shard merging gives the global top k, ties broken by row number, for any shard count."""
    import zarr

    rng = np.random.RandomState(9)
    n_shards, rows, k = 4, 30, 5
    group = zarr.open_group(str(tmp_path / "stage"), mode="w", zarr_format=3)
    # disjoint candidate rows per shard; distances drawn from few values, so ties abound
    ind = np.stack([rng.permutation(np.arange(s * 1000, s * 1000 + 1000))[:rows * k].reshape(rows, k)
                    for s in range(n_shards)])
    dist = rng.randint(0, 4, size=ind.shape).astype(np.float64)
    group.create_array("_candidate_indices", data=ind, chunks=(1, 10, k))
    group.create_array("_candidate_distances", data=dist, chunks=(1, 10, k))
    group.create_array("indices", shape=(rows, k), dtype="int64", chunks=(10, k))
    group.create_array("distances", shape=(rows, k), dtype="float64", chunks=(10, k))
    for start in range(0, rows, 10):
        sharded._merge_task(stage_path=str(tmp_path / "stage"), start=start, stop=start + 10, k=k)
    flat_ind = np.moveaxis(ind, 0, 1).reshape(rows, -1)
    flat_dist = np.moveaxis(dist, 0, 1).reshape(rows, -1)
    order = np.lexsort((flat_ind, flat_dist), axis=-1)[:, :k]
    np.testing.assert_array_equal(group["indices"][:], np.take_along_axis(flat_ind, order, axis=1))
    np.testing.assert_array_equal(group["distances"][:], np.take_along_axis(flat_dist, order, axis=1))


def test_neighbor_graph_in_blocks_matches_one_block(warm, monkeypatch):
    from dimbsvm.graph import knn as knn_module

    X = _clustered(2500, seed=11)
    index = KNNIndex(10, method="pynndescent", random_state=0).fit(X)
    whole = index.neighbor_graph(10)
    monkeypatch.setattr(knn_module, "_GRAPH_BLOCK", 97)  # many blocks, the last one short
    blocked = index.neighbor_graph(10)
    np.testing.assert_array_equal(blocked[0], whole[0])
    np.testing.assert_array_equal(blocked[1], whole[1])
    assert blocked[0].dtype == np.int64 and blocked[1].dtype == np.float64
    assert not (blocked[0] == np.arange(2500)[:, None]).any()
    assert _recall(blocked[0], _exact_graph(X, 10)[0]) >= 0.95
    # the distances are the true ones of the listed rows
    true = np.linalg.norm(X[:, None, :].astype(np.float64) - X[blocked[0]], axis=2)
    np.testing.assert_allclose(blocked[1], true, rtol=1e-4)


def test_float64_rows_are_indexed_once_in_float32(warm):
    """pynndescent computes in float32: float64 input gives the float32 input's graph, with one copy of the rows."""
    X = _clustered(2000, seed=12)
    from_64 = KNNIndex(10, method="pynndescent", random_state=0).fit(X.astype(np.float64))
    from_32 = KNNIndex(10, method="pynndescent", random_state=0).fit(X)
    np.testing.assert_array_equal(from_64.neighbor_graph()[0], from_32.neighbor_graph()[0])
    assert from_64._X.dtype == np.float32
    new = X[:50] + 0.01
    np.testing.assert_array_equal(from_64.query(new.astype(np.float64))[0], from_32.query(new)[0])
    exact_index = KNNIndex(3, method="exact").fit(X.astype(np.float64))
    assert exact_index._X.dtype == np.float64  # the exact search keeps the rows as given


def test_index_pickled_with_a_wide_graph_copy_still_answers(warm):
    """Indexes pickled before the graph stayed in pynndescent's arrays carried ``_graph``; it is still used."""
    X = _clustered(1500, seed=13)
    index = KNNIndex(5, method="pynndescent", random_state=0).fit(X)
    expected = index.neighbor_graph(5)
    indices, distances = index._nnd.neighbor_graph
    index._graph = (indices.astype(np.int64), distances.astype(np.float64))
    restored = pickle.loads(pickle.dumps(index))
    np.testing.assert_array_equal(restored.neighbor_graph(5)[0], expected[0])


def test_shard_stats_count_queries_and_cpu(tmp_path):
    X = np.random.RandomState(14).normal(size=(600, 4))
    knn_graph(da.from_array(X, chunks=(100, 4)), 5, method="exact", store=tmp_path / "s.zarr", shard_rows=200,
              strategy="sharded")
    times = open_knn_graph(tmp_path / "s.zarr").meta["shard_times"]
    assert [t["rows"] for t in times] == [200, 200, 200]
    assert sum(t["queried_rows"] for t in times) == 600 * 3 - 600  # every row against every other shard
    assert all(t["build_cpu"] >= 0 and t["query_cpu"] >= 0 for t in times)


def test_knn_scale_summary_reads_result_files(tmp_path):
    import json

    from benchmarks import knn_scale

    single = {"stage": "single", "variant": "default", "tag": None, "n": 1000, "d": 8, "k": 10,
              "exact_sample_rows": 200, "exact_sample_s": 0.5, "exact_sample_cpu_s": 0.4, "exact_extrapolated_s": 2.5,
              "widths": [{"build_neighbors": 25, "build_s": 1.25, "build_cpu_s": 1.0, "recall": 0.97,
                          "speedup_vs_exact": 2.0}], "peak_rss_mib": 600.0, "command": "cmd-single",
              "date": "2026-01-01T00:00:00+00:00"}
    sharded_run = {"stage": "sharded", "variant": "default", "tag": "limit", "n": 1000, "d": 8, "k": 10,
                   "memory_limit": "1KiB", "memory_limit_bytes": 1024, "data_bytes": 32000, "shard_rows": 500,
                   "shard_rows_used": 500, "build_neighbors": 25, "n_shards": 2, "total_s": 9.0,
                   "timings": {"check": 1.0, "shards": 5.0, "merge": 1.0, "recall": 2.0},
                   "shard_times": [{"shard": s, "rows": 500, "build": 1.0, "build_cpu": 0.5, "query": 2.0,
                                    "query_cpu": 1.5, "queried_rows": 500} for s in range(2)],
                   "recall": 0.96, "recall_rows": 200, "recall_fixed_sample": 0.955,
                   "peak_worker_rss_mib": {"a": 700.0, "b": 710.0}, "dask_peak_memory_mib": {"a": 690.0},
                   "paused": False, "workers_seen": 2, "command": "cmd-sharded", "date": "2026-01-02T00:00:00+00:00"}
    (tmp_path / "single-default-1000-d8.json").write_text(json.dumps(single))
    (tmp_path / "sharded-default-1000-d8-limit.json").write_text(json.dumps(sharded_run))
    summary = knn_scale.summarize(tmp_path, command="cmd-summary")
    assert summary["kind"] == "knn_scale" and summary["command"] == ["cmd-sharded", "cmd-single", "cmd-summary"]
    assert summary["commands_rebuilt"] == 0
    assert summary["single"][0]["exact"]["extrapolated"] is True
    row = summary["sharded"][0]
    assert row["data_over_memory_limit"] == pytest.approx(32000 / 1024) and row["peak_worker_rss_mib"] == 710.0
    assert row["shard_query_cpu_s"] == 3.0 and row["queried_rows"] == 1000
    (comparison,) = summary["comparisons"]
    assert comparison["difference"] == pytest.approx(0.955 - 0.97) and comparison["same_sample_rows"]
    assert comparison["sharded_at_least_single_minus_0_02"]
    text = knn_scale.render_markdown(json.loads(json.dumps(summary)))
    assert "| 1,000 | 8 | 25 | default-limit | 0.9700 | 0.9550 | -0.0150 | yes | 31.25 | 710 |" in text
