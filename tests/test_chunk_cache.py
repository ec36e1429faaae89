"""The store's decoded-chunk cache: reads through it equal the store's, and it never serves another store's numbers."""

import numpy as np
import pytest

from dimbsvm.exceptions import StoreError
from dimbsvm.store import StoreRows, ingest, open_store
from dimbsvm.store import chunk_cache
from dimbsvm.store.chunk_cache import ChunkCache, cache_budget
from dimbsvm.store.fingerprints import content_fingerprint


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    """Each test starts with an empty process cache (and leaves none behind)."""
    monkeypatch.setattr(chunk_cache, "_CACHE", None)
    yield
    monkeypatch.setattr(chunk_cache, "_CACHE", None)


def _rows(path):
    """A job's handle on the store: with its content fingerprint, so reads go through the cache."""
    stored = open_store(path)
    return StoreRows(stored.path, stored.X.shape, content_fingerprint(stored.meta))


def test_least_recently_used_chunks_leave_first_within_the_byte_budget():
    cache = ChunkCache(max_bytes=240)
    for key in "abc":
        cache.put(key, np.zeros(10))  # 80 bytes each: full
    assert cache.get("a") is not None  # "a" used: "b" is now the oldest
    cache.put("d", np.zeros(10))
    assert cache.get("b") is None and all(cache.get(k) is not None for k in "acd")
    assert cache.nbytes == 240
    cache.put("e", np.zeros(40))  # larger than the budget: not kept, nothing evicted for it
    assert cache.get("e") is None and cache.nbytes == 240
    cache.put("a", np.zeros(20))  # replacing a key counts its bytes once; room for it: "c", now the oldest, goes
    assert cache.nbytes == 240 and cache.get("a").size == 20 and cache.get("c") is None and cache.get("d") is not None
    with pytest.raises(ValueError):
        cache.get("a")[0] = 1.0  # kept chunks are read-only


def test_releasing_a_store_drops_its_chunks_only():
    cache = chunk_cache.process_cache()
    for key in [("a.zarr", "f1", 0), ("a.zarr", "f1", 1), ("a.zarr", "f2", 0), ("b.zarr", "f1", 0)]:
        cache.put(key, np.zeros(4))
    assert chunk_cache.release_store("a.zarr", "f1") == 64
    assert cache.get(("a.zarr", "f1", 0)) is None and cache.get(("a.zarr", "f2", 0)) is not None
    assert cache.get(("b.zarr", "f1", 0)) is not None and cache.nbytes == 64


def test_a_chunk_the_process_has_no_room_for_is_not_kept():
    asked = []
    cache = ChunkCache(max_bytes=1000, has_room=lambda nbytes: asked.append(nbytes) or len(asked) < 2)
    cache.put("a", np.zeros(10))
    cache.put("b", np.zeros(20))  # refused: the process is near its limit
    assert asked == [80, 160] and cache.get("a") is not None and cache.get("b") is None and cache.nbytes == 80


def _on_a_threaded_worker(func, memory_limit, *args):
    """``func(*args)`` as a task on a worker thread of this process with ``memory_limit`` (Dask's own reactions to
    the limit off: a worker paused past 80 % of it, as this test process is, would never run the task)."""
    import dask
    from distributed import Client, LocalCluster

    no_reactions = {f"distributed.worker.memory.{name}": False for name in ("target", "spill", "pause", "terminate")}
    with dask.config.set(no_reactions), LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                                    memory_limit=memory_limit, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        return client.submit(func, *args, pure=False).result(timeout=60)


def _read_through_the_cache(path):
    _rows(path)[np.arange(40)]
    cache = chunk_cache.process_cache()
    return cache.max_bytes, cache.nbytes, cache.misses


def test_a_worker_near_its_memory_limit_decodes_without_keeping(tmp_path):
    """A worker whose resident memory is past half its limit (this test process's, shared by a threaded worker,
    is far past 64 MiB) keeps no chunk: its tasks keep the headroom they were sized for."""
    X = np.random.default_rng(6).normal(size=(40, 2))
    path = tmp_path / "s.zarr"
    ingest((X, np.arange(40) % 2), path, chunk_rows=20)
    budget, kept, misses = _on_a_threaded_worker(_read_through_the_cache, "64 MiB", path)
    assert budget == int(chunk_cache.CACHE_SHARE * 64 * 2**20) and kept == 0 and misses == 2


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cached_reads_equal_the_stored_rows_for_every_kind_of_index(tmp_path, dtype):
    X = np.random.default_rng(2).normal(size=(70, 3)).astype(dtype)
    path = tmp_path / "s.zarr"
    ingest((X, np.arange(70) % 2), path, chunk_rows=20, dtype=dtype)
    cached, plain = _rows(path), StoreRows(path, X.shape)
    assert cached.fingerprint and not plain.fingerprint
    indexes = [np.arange(20, 40), np.arange(15, 70), np.arange(0, 1), np.array([5, 6, 8]), np.array([9, 8, 7]),
               np.array([3, 3, 4]), np.array([0, 0, 2]), np.array([41, 2, 41, 69, 0]), np.arange(20, 40, dtype=np.int32),
               np.arange(70) < 30, np.arange(70) % 3 == 0]
    for _ in range(2):  # the first pass reads the chunks, the second is served from the cache
        for index in indexes:
            for as_dtype in (np.float64, None):
                block = cached.take(index, dtype=as_dtype)
                assert block.dtype == (np.dtype(dtype) if as_dtype is None else np.float64)
                np.testing.assert_array_equal(block, X[index])
                assert block.tobytes() == plain.take(index, dtype=as_dtype).tobytes()
    assert chunk_cache.process_cache().nbytes == X.nbytes  # every chunk kept once
    with pytest.raises(IndexError):  # past the last row: an error, not a short read
        cached[np.arange(65, 75)]


def test_a_read_is_a_copy_the_caller_may_change(tmp_path):
    X = np.arange(60.0).reshape(20, 3)
    path = tmp_path / "s.zarr"
    ingest((X, np.arange(20) % 2), path, chunk_rows=10)
    rows = _rows(path)
    for index in (np.arange(0, 10), np.array([4, 2])):
        block = rows[index]
        block[:] = -1.0
        np.testing.assert_array_equal(rows[index], X[index])


def test_chunks_are_read_once_and_a_rebuilt_store_is_read_again(tmp_path):
    X = np.random.default_rng(4).normal(size=(60, 3))
    path = tmp_path / "s.zarr"
    ingest((X, np.arange(60) % 2), path, chunk_rows=20)
    rows = _rows(path)
    np.testing.assert_array_equal(rows[np.arange(60)], X)
    (path / "X" / "c" / "1" / "0").unlink()  # a second read of chunk 1 would fail: it is not read again
    np.testing.assert_array_equal(rows[np.array([25, 21])], X[[25, 21]])
    # other numbers in the same place: another fingerprint, so nothing cached is served for them
    other = X + 1.0
    ingest((other, np.arange(60) % 2), path, chunk_rows=20, overwrite=True)
    rebuilt = _rows(path)
    assert rebuilt.fingerprint != rows.fingerprint
    np.testing.assert_array_equal(rebuilt[np.array([25, 21, 3])], other[[25, 21, 3]])


def test_no_cache_when_its_share_is_zero_or_the_store_has_no_fingerprint(tmp_path, monkeypatch):
    X = np.random.default_rng(5).normal(size=(40, 2))
    path = tmp_path / "s.zarr"
    ingest((X, np.arange(40) % 2), path, chunk_rows=20)
    monkeypatch.setenv("DIMBSVM_CHUNK_CACHE_SHARE", "0")
    assert cache_budget() == 0
    rows = _rows(path)
    rows[np.arange(40)]
    (path / "X" / "c" / "0" / "0").unlink()
    with pytest.raises(StoreError, match=r"chunk 0 of X \(rows 0..19\) is missing on disk"):
        rows[np.array([3])]


def test_a_worker_sizes_its_cache_by_its_memory_limit():
    budget = _on_a_threaded_worker(cache_budget, "1 GiB")  # run as a task, on the worker
    assert budget == int(chunk_cache.CACHE_SHARE * 2**30)
    import psutil

    assert cache_budget() == int(chunk_cache.CACHE_SHARE * psutil.virtual_memory().total)  # not on a worker


@pytest.mark.parametrize("where", ["in-process", "distributed"])
def test_a_store_job_gives_the_same_records_with_and_without_the_cache_and_leaves_no_chunks(
        tmp_path, monkeypatch, where, request):
    """The chunk tasks of an ensemble job (ranges and bags, out-of-bag margins, scoring) read through the cache;
    every fold's record and the final model's predictions equal the uncached run's, and the job's end drops
    its chunks."""
    from dimbsvm.datasets import make_imbalanced
    from dimbsvm.jobs import validate_job
    from dimbsvm.jobs.runner import run_job

    client = request.getfixturevalue("client") if where == "distributed" else None
    X, y = make_imbalanced(n_samples=3000, n_features=4, minority_fraction=0.1, random_state=3)
    path = tmp_path / "data.zarr"
    ingest((np.asarray(X), np.asarray(y)), path, chunk_rows=250)
    job = validate_job({"name": "cached", "data": {"source": str(path)}, "preprocessing": {"scaler": "minmax"},
                        "estimator": {"name": "ensemble_othr",
                                      "params": {"estimator": "linear_svc", "n_estimators": 4, "max_samples": 400,
                                                 "smoothing": None, "random_state": 0}},
                        "cv": {"n_splits": 3, "random_state": 0}, "metrics": ["g_mean", "auc"]})
    kept = []
    real_put = ChunkCache.put
    monkeypatch.setattr(ChunkCache, "put", lambda self, key, chunk: (kept.append(key), real_put(self, key, chunk)))
    cached = run_job(job, client, out=tmp_path / "cached", progress=False)
    assert {key[2] for key in kept} == set(range(12))  # every chunk went through the cache
    assert chunk_cache.process_cache().nbytes == 0  # and was dropped at the job's end
    monkeypatch.setenv("DIMBSVM_CHUNK_CACHE_SHARE", "0")
    monkeypatch.setattr(chunk_cache, "_CACHE", None)
    kept.clear()
    plain = run_job(job, client, out=tmp_path / "plain", progress=False)
    assert not kept
    untimed = [{k: v for k, v in record.items() if "time" not in k} for record in cached.folds]
    assert untimed == [{k: v for k, v in record.items() if "time" not in k} for record in plain.folds]
    from dimbsvm.artifacts import load_artifact

    X_check = np.asarray(X)[:500]
    np.testing.assert_array_equal(load_artifact(tmp_path / "cached" / "model")[0].decision_function(X_check),
                                  load_artifact(tmp_path / "plain" / "model")[0].decision_function(X_check))
