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


def test_knn_scale_summary_medians_and_comparison(tmp_path):
    import json

    from benchmarks import knn_scale

    common = {"n": 1000, "d": 8, "k": 10, "tag": "", "error": None, "command": "cmd", "date": "2026-01-01"}
    for repeat, (wall, cpu) in enumerate([(10.0, 20.0), (12.0, 22.0), (11.0, 30.0)]):
        (tmp_path / f"single-{repeat}.json").write_text(json.dumps(dict(
            common, stage="single", repeat=repeat, build_neighbors=25, wall_s=wall, cpu_s=cpu, recall=0.96,
            peak_rss_mib=500.0)))
    (tmp_path / "part-0.json").write_text(json.dumps(dict(
        common, stage="partitioned", repeat=0, workers=2, build_neighbors=25, wall_s=5.5, cpu_s=33.0, recall=0.97,
        peak_worker_rss_mib=250.0, rounds=0)))
    (tmp_path / "part-1.json").write_text(json.dumps(dict(
        common, stage="partitioned", repeat=1, workers=2, build_neighbors=25, error="timed out")))
    summary = knn_scale.summarize(tmp_path, command="cmd-summary")
    single = next(r for r in summary["runs"] if r["stage"] == "single")
    assert single["repeats"] == 3 and single["wall_s"] == 11.0 and single["cpu_s"] == 22.0  # medians
    part = next(r for r in summary["runs"] if r["stage"] == "partitioned")
    assert part["repeats"] == 1 and part["failed"] == ["timed out"]
    (comparison,) = summary["comparisons"]
    assert comparison["cpu_ratio"] == pytest.approx(1.5) and not comparison["single_at_least_equal_recall"]
    text = knn_scale.render_markdown(json.loads(json.dumps(summary)))
    assert "| partitioned | 1,000 | 2 | 0.9700 | 25 | min(60, width) | 0.9600 | no | 1.50 | 0.50 | 0.50 |" in text
    assert "10^6" not in text and "by partition graph" not in text  # n = 1000; no run records its method

    # The same width with more NN-descent candidates is a configuration of its own; the comparison takes the
    # cheapest single index at least as accurate, whatever its candidates.
    (tmp_path / "single-mc-0.json").write_text(json.dumps(dict(
        common, stage="single", repeat=0, build_neighbors=25, max_candidates=60, wall_s=14.0, cpu_s=30.0,
        recall=0.975, peak_rss_mib=500.0)))
    summary = knn_scale.summarize(tmp_path)
    assert sorted(str(r["max_candidates"]) for r in summary["runs"] if r["stage"] == "single") == ["60", "None"]
    (comparison,) = summary["comparisons"]
    assert comparison["single_max_candidates"] == 60 and comparison["single_at_least_equal_recall"]
    assert comparison["cpu_ratio"] == pytest.approx(1.1)
    assert "| partitioned | 1,000 | 2 | 0.9700 | 25 | 60 | 0.9750 | yes | 1.10 |" in knn_scale.render_markdown(summary)
    (tmp_path / "single-mc-0.json").unlink()

    # A run that records its partition graph gets a row in the per-step table and is no target's evidence.
    (tmp_path / "exact-0.json").write_text(json.dumps(dict(
        common, n=1_000_000, stage="partitioned", tag="exact", repeat=0, workers=2, build_neighbors=25, wall_s=9.0,
        cpu_s=18.0, recall=0.99, peak_worker_rss_mib=250.0, rounds=1, method="exact", n_partitions=40,
        stage_recalls=[0.9, 0.98], options={"overlap": 3, "max_partition_rows": 500, "refine": "neighbors"},
        stage_cpu_s={"route": 1.0, "partition": 2.0, "merge": 3.0, "refine": 4.0})))
    (tmp_path / "single-big.json").write_text(json.dumps(dict(
        common, n=1_000_000, stage="single", repeat=0, build_neighbors=25, wall_s=20.0, cpu_s=40.0, recall=0.995,
        peak_rss_mib=500.0)))
    summary = knn_scale.summarize(tmp_path)
    assert any(c["tag"] == "exact" for c in summary["comparisons"])  # compared, but not a target's evidence
    text = knn_scale.render_markdown(summary)
    assert ("| partitioned-exact | 1,000,000 | exact | 3 | 500 | 40 | neighbors x 1 | 0.9000 | 0.9900 | 9.0 "
            "| 1.0 | 2.0 | 3.0 | 4.0 |") in text
    assert "10^6" not in text


# --- the partitioned build (issue 16) -----------------------------------------------------------------------

from dimbsvm.graph import partitioned  # noqa: E402
from dimbsvm.graph.partition import (nearest_centroids, rank_buckets, top_k_candidates,  # noqa: E402
                                     boundary_radius)
from dimbsvm.model_selection.graph_build import build_partitioned_graph  # noqa: E402


@pytest.mark.parametrize("overlap", [1, 2, 5, 7])
def test_nearest_centroids_match_brute_force(overlap):
    rng = np.random.RandomState(20)
    block, centroids = rng.normal(size=(300, 5)), rng.normal(size=(7, 5))
    centroids[3] = centroids[1]  # an exact tie: the smaller centroid number first
    got = nearest_centroids(block, centroids, overlap)
    distances = ((block[:, None, :] - centroids[None]) ** 2).sum(axis=2)
    expected = np.lexsort((np.broadcast_to(np.arange(7), distances.shape), distances), axis=-1)[:, :overlap]
    if overlap < 7:  # rows whose cut falls inside the tie may keep either twin; compare the others
        tie_at_cut = np.isin(expected[:, -1], [1, 3])
        np.testing.assert_array_equal(got[~tie_at_cut], expected[~tie_at_cut])
    else:
        np.testing.assert_array_equal(got, expected)


def test_nearest_centroids_radius_skips_partitions_beyond_the_boundary():
    rng = np.random.RandomState(21)
    block, centroids = rng.normal(size=(400, 3)), rng.normal(size=(6, 3))
    radius = 0.3
    got = nearest_centroids(block, centroids, 3, radius=radius)
    full = nearest_centroids(block, centroids, 3)
    np.testing.assert_array_equal(got[:, 0], full[:, 0])
    for row, places in zip(range(len(block)), got):
        c1 = centroids[full[row, 0]]
        for j in range(1, 3):
            cj = centroids[full[row, j]]
            # distance of the row to the bisecting hyperplane of c1 and cj
            boundary = (np.sum((block[row] - cj) ** 2) - np.sum((block[row] - c1) ** 2)) / (2 * np.linalg.norm(cj - c1))
            assert places[j] == (full[row, j] if boundary <= radius else -1)


def _brute_top_k(ids, dists, k, exclude):
    out_i, out_d = np.full((len(ids), k), -1), np.full((len(ids), k), np.inf)
    for r in range(len(ids)):
        best = {}
        for i, d in zip(ids[r], dists[r]):
            if i >= 0 and i != exclude[r]:
                best[i] = min(d, best.get(i, np.inf))
        ranked = sorted(best.items(), key=lambda item: (item[1], item[0]))[:k]
        for j, (i, d) in enumerate(ranked):
            out_i[r, j], out_d[r, j] = i, d
    return out_i, out_d


def test_top_k_candidates_match_brute_force_in_any_column_order():
    rng = np.random.RandomState(22)
    ids = rng.randint(-1, 12, size=(60, 25))
    dists = rng.randint(0, 5, size=ids.shape).astype(float)  # few values: ties everywhere
    exclude = rng.randint(0, 12, size=60)
    expected = _brute_top_k(ids, dists, 6, exclude)
    for _ in range(3):
        columns = rng.permutation(25)
        got = top_k_candidates(ids[:, columns], dists[:, columns], 6, exclude=exclude)
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])


def test_rank_buckets_cover_every_rank_within_budget():
    for members, budget in [(10, 20), (100, 40), (1001, 100), (5000, 3000)]:
        pieces = rank_buckets(members, budget)
        assert all(hi - lo <= budget for lo, hi in pieces)
        covered = np.zeros(members, dtype=int)
        for lo, hi in pieces:
            covered[lo:hi] += 1
        assert covered.min() >= 1
        assert pieces[0][0] == 0 and pieces[-1][1] == members


def test_boundary_radius_is_a_kth_neighbour_distance():
    X = np.arange(20.0)[:, None]
    assert boundary_radius(X, 1, quantile=1.0) == 1.0
    assert boundary_radius(X, 3, quantile=1.0) == 3.0  # the end rows reach 3 away


def _exact_neighbours(X, k):
    from sklearn.neighbors import NearestNeighbors

    return NearestNeighbors(n_neighbors=k).fit(X).kneighbors(None)[1]  # sklearn leaves each row out


def test_partitioned_recall_on_clustered_data(tmp_path, warm):
    X = _clustered(8000, seed=23)
    graph = build_partitioned_graph(da.from_array(X, chunks=(1000, 8)), 10, store=tmp_path / "s.zarr",
                                    method="pynndescent", max_partition_rows=2500, random_state=0,
                                    recall_sample=500)
    assert graph.meta["n_partitions"] > 1 and graph.meta["recall"] >= 0.95
    indices = graph.indices.compute()
    assert not (indices == np.arange(8000)[:, None]).any()
    assert _recall(indices, _exact_neighbours(X, 10)) >= 0.95
    true = np.linalg.norm(X[:, None, :].astype(np.float64) - X[indices], axis=2)
    np.testing.assert_allclose(graph.distances.compute(), true, rtol=1e-4)


def test_partitions_covering_all_rows_give_the_exact_graph(tmp_path):
    X = np.random.RandomState(24).normal(size=(700, 5))
    graph = build_partitioned_graph(da.from_array(X, chunks=(100, 5)), 6, store=tmp_path / "s.zarr",
                                    method="exact", n_partitions=3, overlap=3, overlap_radius=None,
                                    max_partition_rows=700, random_state=0)
    expected, expected_distances = _exact_graph(X, 6)
    np.testing.assert_array_equal(graph.indices.compute(), expected)
    np.testing.assert_allclose(graph.distances.compute(), expected_distances, rtol=1e-10)
    assert graph.meta["partition_rows"] == [700, 700, 700] and graph.meta["recall"] == 1.0


def _reference_build(path, X, **options):
    options = dict(dict(n_partitions=4), **options)  # partitions over the budget: some are cut into pieces
    return build_partitioned_graph(da.from_array(X, chunks=(250, X.shape[1])), 5, store=path, method="exact",
                                   max_partition_rows=400, random_state=3, recall_sample=200, **options)


def test_partitioned_same_bytes_in_process_and_on_a_cluster(tmp_path, scheduler):
    X = _clustered(2000, d=6, seed=25)
    here = _reference_build(tmp_path / "here.zarr", X)
    there = _reference_build(tmp_path / "there.zarr", X, client=scheduler)
    assert here.meta["n_partitions"] > 1 and len(here.meta["partition_rows"]) > here.meta["n_partitions"]
    assert here.indices.compute().tobytes() == there.indices.compute().tobytes()
    assert here.distances.compute().tobytes() == there.distances.compute().tobytes()
    assert here.meta["fingerprint"] == there.meta["fingerprint"]
    # the recall sample's exact search, run beside the partitions on a cluster, finds the same
    assert here.meta["recalls"] == there.meta["recalls"] and len(here.meta["recalls"]) >= 1


def test_partitioned_stage_is_reused_and_other_parameters_rebuild(tmp_path, caplog):
    X = _clustered(1500, d=4, seed=26)
    _reference_build(tmp_path / "s.zarr", X)
    marker = tmp_path / "s.zarr" / "knn" / "zarr.json"
    before = (marker.stat().st_mtime_ns, open_knn_graph(tmp_path / "s.zarr").meta)
    time.sleep(0.01)
    with caplog.at_level(logging.INFO, logger="dimbsvm.model_selection.graph_build"):
        _reference_build(tmp_path / "s.zarr", X)
    assert "already built for these data and parameters; reusing it" in caplog.text
    assert (marker.stat().st_mtime_ns, open_knn_graph(tmp_path / "s.zarr").meta) == before
    _reference_build(tmp_path / "s.zarr", X, overlap=3)
    meta = open_knn_graph(tmp_path / "s.zarr").meta
    assert meta["overlap"] == 3 and meta["fingerprint"] != before[1]["fingerprint"]


def test_partition_budget_is_respected_when_one_cluster_dominates(tmp_path):
    rng = np.random.RandomState(27)
    X = np.concatenate([rng.normal(size=(2500, 3)), rng.normal(loc=30, size=(300, 3))])  # one big cluster
    graph = build_partitioned_graph(da.from_array(X, chunks=(400, 3)), 5, store=tmp_path / "s.zarr",
                                    method="exact", max_partition_rows=600, n_partitions=3, random_state=0,
                                    recall_sample=300, target_recall=None)
    held = graph.meta["partition_rows"]
    assert max(graph.meta["partition_sizes"]) > 600  # a partition had to be cut ...
    assert len(held) > 3 and max(held) <= 600  # ... and no task held more than its budget
    assert graph.meta["recall"] >= 0.9
    assert _recall(graph.indices.compute(), _exact_neighbours(X, 5)) >= 0.9


def _check_refined(graph, X):
    recalls = graph.meta["recalls"]
    assert graph.meta["rounds"] == 1 and len(recalls) == 2 and recalls[1] > recalls[0]
    assert graph.meta["recall"] == recalls[1]
    indices, distances = graph.indices.compute(), graph.distances.compute()
    assert not (indices == np.arange(len(X))[:, None]).any()
    true = np.linalg.norm(X[:, None, :].astype(np.float64) - X[indices], axis=2)
    np.testing.assert_allclose(distances, true, rtol=1e-4)
    assert np.all(np.diff(distances, axis=1) >= 0)


def test_rebuild_round_raises_recall_of_narrow_graphs(tmp_path, warm):
    # 32 dimensions: with the boundary-radius routing, an 8-d graph of width 11 already reaches 0.9996,
    # and there is nothing left for a round to raise (measured: 32-d width 10 gives 0.997 before the round).
    X = _clustered(4000, d=32, seed=28)
    graph = build_partitioned_graph(da.from_array(X, chunks=(500, 32)), 10, store=tmp_path / "s.zarr",
                                    method="pynndescent", build_neighbors=10, max_candidates=None,
                                    max_partition_rows=2000, random_state=0, recall_sample=500, target_recall=0.999,
                                    max_rounds=1)
    assert graph.meta["round_widths"] == [10, 13]
    _check_refined(graph, X)


def test_neighbours_of_neighbours_round_crosses_partitions(tmp_path):
    # One blob cut in 20, rows within 0.05 of a boundary in two partitions: many neighbours are across a
    # boundary, and the rows near it link the partitions' graphs.
    X = np.random.RandomState(28).normal(size=(3000, 4))
    graph = build_partitioned_graph(da.from_array(X, chunks=(500, 4)), 8, store=tmp_path / "s.zarr",
                                    method="exact", max_partition_rows=300, overlap_radius=0.05, random_state=0,
                                    recall_sample=500, target_recall=0.999, max_rounds=1, refine="neighbors")
    _check_refined(graph, X)


def _counting_partition_task(*, log, **kwargs):
    with open(log, "a") as handle:
        handle.write(f"{kwargs['partition']}-{kwargs['piece_number']}\n")
    return _REAL_PARTITION_TASK(**kwargs)


_REAL_PARTITION_TASK = partitioned.partition_task


def test_neighbours_refinement_skipped_with_a_warning_for_a_metric_it_does_not_know(tmp_path, caplog):
    X = np.random.RandomState(0).rand(2000, 4)
    with caplog.at_level(logging.WARNING, logger="dimbsvm.model_selection.graph_build"):
        graph = build_partitioned_graph(da.from_array(X, chunks=(500, 4)), 5, store=tmp_path / "s.zarr",
                                        metric="chebyshev", method="exact", refine="neighbors", target_recall=1.0,
                                        max_partition_rows=600, random_state=0, recall_sample=200)
    assert "does not know metric 'chebyshev'; not refining" in caplog.text
    assert graph.meta["rounds"] == 0 and graph.meta["recall"] < 1.0  # below target, and still not refined


def test_refinement_memory_check_takes_the_smallest_limit():
    from dimbsvm.model_selection.graph_build import check_refinement_memory

    check_refinement_memory(10**12, [])  # in-process: no limit known
    check_refinement_memory(10**12, [0, 0])  # workers without a limit
    check_refinement_memory(60, [100, 200])  # 60 % of the smallest
    for limits in ([100], [200, 100], [0, 100]):
        with pytest.raises(ValueError, match=r"refine='neighbors' .* more than 60% of the smallest worker memory"):
            check_refinement_memory(61, limits)


def test_neighbours_refinement_refused_before_any_partition_when_maps_exceed_worker_memory(tmp_path):
    import dask
    from distributed import Client, LocalCluster

    # 20,000 x 8 float32 rows, each in one or two partitions: 0.6-1.3 MB routed and 1.6 MB of graph (k = 5),
    # against workers of 1 MB
    # (their memory monitor off, so the tiny limit only informs the check).
    X = da.from_array(np.random.RandomState(3).rand(20000, 8).astype(np.float32), chunks=(5000, 8))
    off = {f"distributed.worker.memory.{key}": False for key in ("target", "spill", "pause", "terminate")}
    with dask.config.set(off), LocalCluster(n_workers=1, processes=False, memory_limit="1MB",
                                            dashboard_address=None) as cluster, Client(cluster) as client:
        with pytest.raises(ValueError, match=r"refine='neighbors' reads the routed rows and the graph \(0\.\d+ GiB\)"):
            build_partitioned_graph(X, 5, store=tmp_path / "s.zarr", refine="neighbors", max_partition_rows=5000,
                                    random_state=0, client=client)
        scratch = tmp_path / "s.zarr" / "knn" / partitioned.SCRATCH_DIR
        assert (scratch / "route").is_dir() and not (scratch / "part").exists()  # routed, nothing built
        graph = build_partitioned_graph(X, 5, store=tmp_path / "s.zarr", max_partition_rows=5000, random_state=0,
                                        client=client)  # the default refinement is not limited by it
    assert graph.meta["recall"] > 0.9



@pytest.mark.parametrize("method", ["exact", "pynndescent"])
def test_runs_of_small_partitions_built_by_one_task_give_the_same_graph(tmp_path, monkeypatch, method):
    # 40 partitions of ~200 members: with at least 4 tasks wanted they are built in runs, ~10 per task; with
    # 10^6 tasks wanted, one task each. Each partition's graph is the same either way (same members, same
    # seed), and a row's k best over a run are what the merge would keep of them.
    from dimbsvm.model_selection.graph_build import partitioned_build

    X = _clustered(4000, d=4, seed=41)

    def build(path, min_tasks):
        monkeypatch.setattr(partitioned_build, "GROUP_MIN_TASKS", min_tasks)
        return build_partitioned_graph(da.from_array(X, chunks=(500, 4)), 6, store=path, method=method,
                                       build_neighbors=8, max_partition_rows=400, random_state=5, recall_sample=300,
                                       target_recall=None)

    grouped, alone = build(tmp_path / "grouped.zarr", 4), build(tmp_path / "alone.zarr", 10**6)
    assert alone.meta["n_partitions"] == len(alone.meta["partition_rows"]) == 40  # one task per partition
    assert len(grouped.meta["partition_rows"]) <= 8  # runs of partitions, one task each
    assert grouped.meta["partition_methods"] == alone.meta["partition_methods"] == [method]
    assert grouped.indices.compute().tobytes() == alone.indices.compute().tobytes()
    assert grouped.distances.compute().tobytes() == alone.distances.compute().tobytes()
    if method == "exact":  # and both are the exact graph where every row's neighbours share its partitions
        assert grouped.meta["recall"] > 0.9


def test_nearest_centroids_in_row_blocks_are_the_brute_force_nearest(monkeypatch):
    from scipy.spatial.distance import cdist

    from dimbsvm.graph import partition

    rng = np.random.RandomState(43)
    X, C = rng.rand(3000, 6), rng.rand(500, 6)
    monkeypatch.setattr(partition, "SCORES_AT_ONCE", 7000)  # 14 rows a block
    assert np.array_equal(partition.nearest_centroids(X, C, 3), np.argsort(cdist(X, C), axis=1)[:, :3])


@pytest.mark.parametrize("n_cols", [1024, 1100, 6000])
@pytest.mark.parametrize("m", [1, 3])
def test_smallest_columns_of_many_are_those_of_a_full_sort(n_cols, m):
    from dimbsvm.graph.partition import smallest_columns

    scores = np.random.RandomState(n_cols + m).rand(200, n_cols)
    assert np.array_equal(smallest_columns(scores, m), np.sort(np.argsort(scores, axis=1)[:, :m], axis=1))


def test_merge_candidate_lists_keeps_each_rows_k_best_distinct_candidates():
    from dimbsvm.graph.partition import merge_candidate_lists

    rng = np.random.RandomState(44)
    n_rows, k = 30, 4
    lists = []
    for _ in range(5):
        rows = np.sort(rng.choice(n_rows, size=rng.randint(0, n_rows), replace=False))
        ids = rng.randint(-1, 12, size=(rows.size, k))  # repeated ids across lists, some padding
        lists.append((rows, ids, np.where(ids < 0, np.inf, rng.randint(0, 6, size=ids.shape) / 2.0)))
    ind, dist = merge_candidate_lists(lists, n_rows, k, exclude=np.full(n_rows, 3))
    for row in range(n_rows):  # brute force: every candidate of the row, the smallest distance per id
        best = {}
        for rows, ids, dists in lists:
            for i, d in zip(ids[rows == row].ravel(), dists[rows == row].ravel()):
                if i >= 0 and i != 3:
                    best[i] = min(d, best.get(i, np.inf))
        expected = sorted(best.items(), key=lambda item: (item[1], item[0]))[:k]
        expected += [(-1, np.inf)] * (k - len(expected))
        assert ind[row].tolist() == [i for i, _ in expected] and dist[row].tolist() == [d for _, d in expected]
    empty = merge_candidate_lists([], 0, k)
    assert empty[0].shape == (0, k) and empty[1].shape == (0, k)


def test_group_partitions_covers_each_partition_once_within_budget():
    from dimbsvm.graph.partition import group_partitions

    rng = np.random.RandomState(42)
    for _ in range(200):
        sizes = rng.randint(0, 30, size=rng.randint(1, 40))
        alone = rng.rand(sizes.size) < 0.2
        budget = int(rng.randint(1, 60))
        runs = group_partitions(sizes, budget, alone=alone)
        assert [p for first, stop in runs for p in range(first, stop)] == list(range(sizes.size))
        for first, stop in runs:
            assert stop - first == 1 or (sizes[first:stop].sum() <= budget and not alone[first:stop].any())


def test_interrupted_partitioned_build_resumes_without_rebuilding_partitions(tmp_path, monkeypatch):
    import functools

    X = _clustered(2000, d=4, seed=29)
    log = tmp_path / "parts.log"
    real_merge = partitioned.merge_task
    monkeypatch.setattr(partitioned, "partition_task", functools.partial(_counting_partition_task, log=str(log)))
    monkeypatch.setattr(partitioned, "merge_task", _failing_merge_task)
    with pytest.raises(RuntimeError, match="worker lost"):
        _reference_build(tmp_path / "s.zarr", X)
    with pytest.raises(StoreError, match="incomplete"):
        open_knn_graph(tmp_path / "s.zarr")
    first = sorted(log.read_text().split())
    monkeypatch.setattr(partitioned, "merge_task", real_merge)
    graph = _reference_build(tmp_path / "s.zarr", X)
    assert sorted(log.read_text().split()) == first  # no partition built again
    reference = _reference_build(tmp_path / "fresh.zarr", X)
    assert graph.indices.compute().tobytes() == reference.indices.compute().tobytes()
    assert not (tmp_path / "s.zarr" / "knn" / partitioned.SCRATCH_DIR).exists()


def _gaussian_recall(graph, X, k):
    from sklearn.neighbors import NearestNeighbors

    from dimbsvm.graph.knn import recall_of

    return recall_of(graph, NearestNeighbors().fit(X).kneighbors(X, k + 1)[1][:, 1:])


@pytest.mark.parametrize("seed", [0, 1])
def test_more_nndescent_candidates_find_more_true_neighbours(warm, seed):
    # Dong et al.'s sample size: with the candidates tied to a narrow width (8), NN-descent stops early on
    # 24-d Gaussian rows (measured 0.78-0.79 of the true 5 neighbours over 4 seeds); with 60 candidates
    # per row and iteration it finds 0.91 (against brute force here).
    X = np.random.RandomState(seed).normal(size=(4000, 24)).astype(np.float32)
    recalls = {mc: _gaussian_recall(KNNIndex(5, method="pynndescent", build_neighbors=8, max_candidates=mc,
                                             random_state=seed).fit(X).neighbor_graph(5)[0], X, 5)
               for mc in (None, 60)}
    assert recalls[60] > recalls[None] + 0.05


def test_partitioned_build_uses_its_max_candidates(tmp_path, warm):
    # The same rows and seeds (all in one partition, so routing adds nothing), the partition graph with
    # pynndescent's default candidates (the width, 8) and with the build's default (60): the second is
    # measured closer to brute force.
    from dimbsvm.graph.partitioned import DEFAULT_MAX_CANDIDATES

    X = np.random.RandomState(7).normal(size=(4000, 24)).astype(np.float32)
    graphs = {mc: build_partitioned_graph(da.from_array(X, chunks=(1000, 24)), 5, store=tmp_path / f"{mc}.zarr",
                                          method="pynndescent", build_neighbors=8, max_candidates=mc,
                                          max_partition_rows=4000, random_state=0, recall_sample=0)
              for mc in (None, DEFAULT_MAX_CANDIDATES)}
    assert graphs[None].meta["max_candidates"] is None and graphs[None].meta["n_partitions"] == 1
    assert graphs[DEFAULT_MAX_CANDIDATES].meta["max_candidates"] == DEFAULT_MAX_CANDIDATES == 60
    recalls = {mc: _gaussian_recall(graph.indices.compute(), X, 5) for mc, graph in graphs.items()}
    assert recalls[DEFAULT_MAX_CANDIDATES] > recalls[None] + 0.05


def test_index_records_the_candidates_it_used(warm):
    X = np.random.RandomState(0).rand(500, 4)
    fitted = lambda **kw: KNNIndex(3, **kw).fit(X).max_candidates_  # noqa: E731
    assert fitted(method="pynndescent", build_neighbors=8) == 8  # pynndescent's default: the width, at most 60
    assert fitted(method="pynndescent", build_neighbors=80) == 60
    assert fitted(method="pynndescent", build_neighbors=8, max_candidates=60) == 60
    assert fitted(method="exact", max_candidates=60) is None


@pytest.mark.parametrize("method", ["pynndescent", "exact"])
def test_index_rejects_bad_max_candidates(method):
    X = np.random.RandomState(0).rand(100, 3)
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="max_candidates must be an integer >= 1 or None"):
            KNNIndex(3, method=method, max_candidates=bad).fit(X)


def test_partitioned_parameter_errors(tmp_path):
    X = da.from_array(np.random.RandomState(30).rand(300, 3), chunks=(100, 3))
    for name, value, message in [("overlap", 0, r"'overlap' parameter .* int in the range \[1, inf\]. Got 0"),
                                 ("max_partition_rows", 3, r"'max_partition_rows' .* range \[7, inf\]"),
                                 ("target_recall", 1.5, r"'target_recall' .* \(0, 1\] or None. Got 1.5"),
                                 ("refine", "more", r"'refine' .* \('rebuild', 'neighbors'\). Got 'more'"),
                                 ("overlap_radius", -1.0, r"'overlap_radius' .* >= 0, 'auto' or None"),
                                 ("max_candidates", 0, r"'max_candidates' .* range \[1, inf\]. Got 0")]:
        with pytest.raises(ValueError, match=message):
            build_partitioned_graph(X, 5, store=tmp_path / "s.zarr", **{name: value})
    with pytest.raises(ValueError, match="'strategy' parameter of knn_graph must be one of"):
        knn_graph(X, 5, store=tmp_path / "s.zarr", strategy="tiles")
    with pytest.raises(ValueError, match="apply to a stored build"):
        knn_graph(np.zeros((10, 2)), 2, overlap=2)


def test_task_bodies_and_graph_modules_import_no_scheduler():
    """graph/ holds plain task bodies: nothing there imports distributed or dimbsvm's distributed layer."""
    import ast
    from pathlib import Path

    import dimbsvm.graph

    forbidden = ("distributed", "dask.distributed", "dimbsvm.distributed")
    for path in Path(dimbsvm.graph.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [("." * node.level) + (node.module or "")]
            else:
                continue
            for name in names:
                assert not name.startswith(forbidden) and "..distributed" not in name, (path.name, name)
            if isinstance(node, ast.ImportFrom):
                assert not {"get_client", "as_completed", "get_worker"} & {a.name for a in node.names}, path.name


def test_numba_cache_dir_plugin_sets_the_directory(tmp_path, monkeypatch):
    import numba

    from dimbsvm.distributed.warmup import NumbaCacheDir

    monkeypatch.setenv("NUMBA_CACHE_DIR", "unused")
    monkeypatch.setattr(numba.config, "CACHE_DIR", numba.config.CACHE_DIR)
    NumbaCacheDir(str(tmp_path)).setup(None)
    assert numba.config.CACHE_DIR == str(tmp_path)
    import os
    assert os.environ["NUMBA_CACHE_DIR"] == str(tmp_path)


def test_a_tiny_kmeans_cluster_does_not_starve_its_rows(tmp_path, monkeypatch):
    """Five far rows make a k-means centre of their own: with k=10 they would have 4 candidates.

    The centre is dropped (its predicted partition is under 4 (k + 1) rows), the five go to the
    next nearest partition, and their neighbours are the exact ones. Without the drop the build
    stops with the DataError that names the starved rows (the test of the test).
    """
    from dimbsvm.exceptions import DataError
    from dimbsvm.model_selection.graph_build import partitioned_build

    rng = np.random.RandomState(5)
    blobs = np.concatenate([rng.normal(loc=c, size=(1000, 3)) for c in (0.0, 12.0, 24.0)])
    far = rng.normal(loc=60.0, scale=0.1, size=(5, 3))
    X = np.concatenate([blobs, far])
    kwargs = dict(method="exact", n_partitions=4, overlap=1, random_state=0, recall_sample=0, target_recall=None)
    graph = build_partitioned_graph(da.from_array(X, chunks=(500, 3)), 10, store=tmp_path / "a.zarr", **kwargs)
    assert len(graph.meta["partition_sizes"]) == 3  # the far rows' centre was dropped
    exact = _exact_neighbours(X, 10)
    np.testing.assert_array_equal(np.sort(graph.indices.compute()[-5:], axis=1), np.sort(exact[-5:], axis=1))
    monkeypatch.setattr(partitioned_build, "MIN_PARTITION_FACTOR", 0)
    with pytest.raises(DataError, match="fewer than k=10 candidates"):
        build_partitioned_graph(da.from_array(X, chunks=(500, 3)), 10, store=tmp_path / "b.zarr", **kwargs)
