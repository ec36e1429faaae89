"""Stores on object storage: written, reused, refused and read back through a real S3 API server (issue 32)."""

from __future__ import annotations

import numpy as np
import pytest

from dimbsvm.exceptions import StoreError
from dimbsvm.store import StoreRows, find_damage, ingest, open_store, verify_store


def _data(seed=0, n=500):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 4)), (rng.random(n) < 0.2).astype(np.int64)


def test_store_round_trip(s3_bucket, tmp_path):
    url = f"s3://{s3_bucket}/data/s.zarr"
    X, y = _data()
    stored = ingest((X, y), url, chunk_rows=100)
    assert stored.path == url
    local = ingest((X, y), tmp_path / "s.zarr", chunk_rows=100)
    assert stored.meta["fingerprint"] == local.meta["fingerprint"]
    again = verify_store(url)  # every chunk present and passing its checksum
    np.testing.assert_array_equal(again.X.compute(), X)
    np.testing.assert_array_equal(again.y.compute(), y)
    rows = StoreRows(url, X.shape)  # what a task on a worker reads through
    np.testing.assert_array_equal(rows[np.array([3, 150, 499])], X[[3, 150, 499]])
    # the same source again: reused, not rewritten; in other chunks it would need a rebuild, which a URL never gets
    assert ingest((X, y), url, chunk_rows=100).meta == again.meta
    with pytest.raises(StoreError, match=r"chunked in 100 rows, not the 50 asked for; a store at a URL is never "
                                         r"replaced: ingest to a new URL"):
        ingest((X, y), url, chunk_rows=50, overwrite=True)


def test_missing_chunk_is_an_error_not_zeros(s3_bucket):
    import s3fs

    url = f"s3://{s3_bucket}/s.zarr"
    X, y = _data()
    ingest((X, y), url, chunk_rows=100)
    s3fs.S3FileSystem().rm(f"{s3_bucket}/s.zarr/X/c/2/0")
    assert find_damage(url, checksums=False) == "chunk 2 of X (rows 200..299) is missing on disk"
    with pytest.raises(StoreError, match=r"chunk 2 of X \(rows 200\.\.299\) is missing"):
        open_store(url).X.compute()


def test_urls_never_overwrite_or_mix(s3_bucket):
    import s3fs

    fs = s3fs.S3FileSystem()
    url = f"s3://{s3_bucket}/s.zarr"
    ingest(_data(0), url, chunk_rows=100)
    for overwrite in (False, True):
        with pytest.raises(StoreError, match="already holds another dataset.*never replaced: ingest to a new URL"):
            ingest(_data(1), url, chunk_rows=100, overwrite=overwrite)
    np.testing.assert_array_equal(open_store(url).X.compute(), _data(0)[0])
    fs.pipe_file(f"{s3_bucket}/notes/a.txt", b"mine")
    with pytest.raises(StoreError, match=r"holds objects that are not a dimbsvm store \(a\.txt\)"):
        ingest(_data(1), f"s3://{s3_bucket}/notes", overwrite=True)
    assert fs.cat_file(f"{s3_bucket}/notes/a.txt") == b"mine"
    # a store another writer has claimed (its zarr.json exists, not complete) is refused, not joined
    fs.pipe_file(f"{s3_bucket}/busy.zarr/zarr.json",
                 b'{"zarr_format": 3, "node_type": "group", "attributes": {"dimbsvm": {"complete": false, '
                 b'"writer": "host-a:17"}}}')
    advice = (r"is incomplete: an ingest is writing it, or one stopped part-way \(its writer: host-a:17\); if none "
              r"is running, delete it with your storage tools and ingest again")
    with pytest.raises(StoreError, match=advice):
        ingest(_data(1), f"s3://{s3_bucket}/busy.zarr")
    # a job (or predict) reading it gives the same advice; it said "ingest again", which ingest then refused
    with pytest.raises(StoreError, match=advice):
        open_store(f"s3://{s3_bucket}/busy.zarr")


def test_the_exclusive_create_refuses_a_second_writer(s3_bucket):
    from dimbsvm.store.placement import claim_url

    url = f"s3://{s3_bucket}/race.zarr"
    claim_url(url)
    with pytest.raises(StoreError, match="created by another writer meanwhile"):
        claim_url(url)


def test_a_job_on_an_s3_store_gives_the_local_store_records(s3_bucket, tmp_path):
    import json

    from dimbsvm.jobs import run_job, validate_job

    url = f"s3://{s3_bucket}/ecoli1.zarr"
    ingest("ecoli1", url, chunk_rows=100)
    ingest("ecoli1", tmp_path / "ecoli1.zarr", chunk_rows=100)
    folds = {}
    for name, source in (("s3", url), ("local", str(tmp_path / "ecoli1.zarr"))):
        job = validate_job({"name": name, "data": {"source": source}, "estimator": {"name": "svc_balanced"},
                            "cv": {"n_splits": 3}, "metrics": ["g_mean", "f_measure", "auc"],
                            "output": {"model": False}})
        run_job(job, None, out=tmp_path / f"run-{name}", progress=False)
        folds[name] = json.loads((tmp_path / f"run-{name}" / "metrics.json").read_text())["folds"]
    assert folds["s3"] == folds["local"]
    assert len(folds["s3"]) == 3


def test_csv_files_on_s3_are_ingested_as_the_same_files_are_locally(s3_bucket, tmp_path):
    """Blocks of CSV objects (plain and gzip, a header per file, a padded number past the guessed rows) via S3."""
    import gzip

    import s3fs

    from dimbsvm.store.sources import TabularSource
    from dimbsvm.store.sources._frames import CSV_GUESS_ROWS

    rng = np.random.default_rng(5)
    n = CSV_GUESS_ROWS + 1500
    colour = rng.choice(["red", "blue", "?"], n)
    cells = np.round(rng.normal(size=n), 6).astype(str)
    cells[CSV_GUESS_ROWS + 700] = " 2.5 "  # parsed by Python's float after the guessed rows: its block as text
    lines = [f"{i},{c},{colour[i]},{'pos' if i % 9 == 0 else 'neg'}\n" for i, c in enumerate(cells)]
    header = "uid,x,colour,class\n"
    parts = {"a.csv": ("\ufeff" + header + "".join(lines[:1200])).encode(),
             "b.csv": ("\n" + header + "".join(lines[1200:2000])).encode(),
             "c.csv.gz": gzip.compress((header + "".join(lines[2000:])).encode())}
    fs = s3fs.S3FileSystem()
    for name, data in parts.items():
        fs.pipe_file(f"{s3_bucket}/rows/{name}", data)
        (tmp_path / name).write_bytes(data)
    for pattern in ("*.csv", "*.csv.gz"):
        remote = ingest(TabularSource(f"s3://{s3_bucket}/rows/{pattern}", id="uid", blocksize=4_000),
                        tmp_path / f"remote{pattern[1:]}.zarr")
        local = ingest(TabularSource(str(tmp_path / pattern), id="uid"), tmp_path / f"local{pattern[1:]}.zarr")
        assert remote.X.compute().tobytes() == local.X.compute().tobytes()
        np.testing.assert_array_equal(remote.y.compute(), local.y.compute())
        assert remote.meta["feature_names"] == local.meta["feature_names"] == ["x", "colour=blue", "colour=red"]
        assert remote.meta["n_samples"] == (2000 if pattern == "*.csv" else n - 2000)
        assert remote.meta["partitions"] > 2 if pattern == "*.csv" else remote.meta["partitions"] == 1
    whole = np.concatenate([ingest(TabularSource(str(tmp_path / p), id="uid"), tmp_path / f"w{k}.zarr").X.compute()
                            for k, p in enumerate(("*.csv", "*.csv.gz"))])
    expected = np.array([float(c) for c in cells])  # the independent truth: Python's float of every cell
    assert whole[:, 0].tobytes() == expected.tobytes()


def test_svmlight_objects_become_a_sparse_store_on_s3_equal_to_the_local_one(s3_bucket, tmp_path):
    """svmlight objects (plain and gzip) read through S3 into a sparse store at a URL: the local store's rows."""
    import gzip

    import s3fs
    import scipy.sparse as sp
    from sklearn.datasets import dump_svmlight_file

    from dimbsvm.datasets import make_text_like
    from dimbsvm.store.sparse_rows import store_rows

    X, y = make_text_like(900, 3000, random_state=3)
    fs = s3fs.S3FileSystem()
    for part, rows in enumerate((slice(0, 500), slice(500, 900))):
        dump_svmlight_file(X[rows], y[rows], str(tmp_path / f"p{part}.svm"), zero_based=False)
        data = (tmp_path / f"p{part}.svm").read_bytes()
        fs.pipe_file(f"{s3_bucket}/text/p{part}.svm.gz", gzip.compress(data))
    url = f"s3://{s3_bucket}/stores/text.zarr"
    remote = ingest(f"s3://{s3_bucket}/text/p*.svm.gz", url, chunk_rows=200, n_features=3000)
    local = ingest(str(tmp_path / "p*.svm"), tmp_path / "text.zarr", chunk_rows=200, n_features=3000)
    assert remote.meta["sparse"] == "csr" and remote.meta["nnz"] == local.meta["nnz"] == X.nnz
    assert (verify_store(url).to_dataset().X != local.to_dataset().X).nnz == 0
    assert (local.to_dataset().X != sp.csr_matrix(X)).nnz == 0
    rows = store_rows(url, remote.X.shape, remote.meta)  # what a task reads through
    assert (rows[np.array([5, 450, 899])] != X[[5, 450, 899]]).nnz == 0
    fs.rm(f"{s3_bucket}/stores/text.zarr/X/3/data/c/0")
    assert find_damage(url, checksums=False) == "chunk 3 of X (rows 600..799): its data values are missing on disk"
