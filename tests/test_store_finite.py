"""A store records its rows holding NaN/inf when written; a job's check trusts the record instead of reading."""

import json
import re

import dask.array as da
import numpy as np
import pandas as pd
import pytest

from dimbsvm.exceptions import DataError, StoreError
from dimbsvm.jobs import data as job_data
from dimbsvm.jobs import check_job_data, load_job_data, validate_job
from dimbsvm.store import StoreRows, ingest, open_store
from dimbsvm.store.finite import META_KEY, nonfinite_rows


def _truth(X):
    """Rows holding NaN, rows holding +-inf: counted directly, cell by cell."""
    rows = np.asarray(X).reshape(len(X), int(np.prod(np.shape(X)[1:])))
    return int(np.isnan(rows).any(axis=1).sum()), int(np.isinf(rows).any(axis=1).sum())


def _data(n=400, d=5, seed=0, nan=(), inf=()):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    for i, j in nan:
        X[i, j] = np.nan
    for i, j, sign in inf:
        X[i, j] = sign * np.inf
    y = (rng.random(n) < 0.25).astype(np.int32)
    y[:10] = 1
    return X, y


def _job(store, **changes):
    return validate_job({"data": {"source": str(store)}, "estimator": {"name": "svc_balanced"},
                         "cv": {"n_splits": 3}, **changes})


def _drop_record(path):
    meta_file = path / "zarr.json"
    meta = json.loads(meta_file.read_text())
    del meta["attributes"]["dimbsvm"][META_KEY]
    meta_file.write_text(json.dumps(meta))


def _flip_every_chunk(path):
    for chunk in (path / "X" / "c").rglob("*"):
        if chunk.is_file():
            blob = bytearray(chunk.read_bytes())
            blob[len(blob) // 2] ^= 0xFF
            chunk.write_bytes(bytes(blob))


@pytest.fixture
def record_used(monkeypatch):
    """Trust the record for stores of any size (the check scans small stores whatever they record)."""
    monkeypatch.setattr(job_data, "SCAN_BYTES", 0)


def test_kernel_counts_rows_as_a_cell_by_cell_scan():
    rng = np.random.default_rng(1)
    for dtype in (np.float64, np.float32):
        for shape in ((300, 7), (50, 4, 6), (0, 3), (5, 1)):
            X = rng.normal(size=shape).astype(dtype)
            flat = X.reshape(-1)
            if flat.size:
                cells = rng.choice(flat.size, size=min(flat.size, 40), replace=False)
                flat[cells[:15]] = np.nan
                flat[cells[15:25]] = np.inf
                flat[cells[25:30]] = -np.inf
                flat[cells[30:]] = np.finfo(dtype).max  # rows whose sums overflow, all values finite
            assert nonfinite_rows(X).tolist() == list(_truth(X))


@pytest.mark.parametrize("source", ["numpy", "dask", "float32", "dataframe"])
def test_every_writer_records_the_rows_it_wrote(tmp_path, source):
    X, y = _data(nan=[(3, 1), (3, 2), (250, 0)], inf=[(7, 4, 1), (250, 1, -1), (399, 0, 1)])
    X[11, :] = 1e300  # float32 stores it as inf: the record counts what is stored
    if source == "numpy":
        stored = ingest((X, y), tmp_path / "s.zarr", chunk_rows=64)
    elif source == "dask":
        stored = ingest((da.from_array(X, chunks=90), da.from_array(y, chunks=90)), tmp_path / "s.zarr",
                        chunk_rows=64)
    elif source == "float32":
        stored = ingest((X, y), tmp_path / "s.zarr", chunk_rows=64, dtype="float32")
    else:
        frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])]).assign(label=y)
        stored = ingest(frame, tmp_path / "s.zarr", chunk_rows=64, target="label")
    nan_rows, inf_rows = _truth(stored.X.compute())
    assert stored.meta[META_KEY] == {"rows": len(y), "nan": nan_rows, "inf": inf_rows}
    assert (nan_rows, inf_rows) == ((2, 4) if source == "float32" else (2, 3))
    assert open_store(tmp_path / "s.zarr").meta[META_KEY] == stored.meta[META_KEY]  # on disk, with the marker


def test_a_csv_ingest_records_its_rows(tmp_path):
    X, y = _data(nan=[(5, 0)], inf=[(9, 1, -1)])
    csv = tmp_path / "d.csv"
    pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])]).assign(label=y).to_csv(csv, index=False)
    stored = ingest(csv, tmp_path / "s.zarr", target="label")
    assert stored.meta[META_KEY] == {"rows": len(y), "nan": 1, "inf": 1}


def _message(store, job):
    with pytest.raises(DataError) as caught:
        check_job_data(load_job_data(str(store)), job)
    return str(caught.value)


@pytest.mark.parametrize("bad, impute", [("nan", "none"), ("inf", "none"), ("inf", "mean"), ("both", "none")])
def test_bad_values_are_refused_with_the_same_message(tmp_path, record_used, bad, impute):
    nan = [(40, 3), (41, 0)] if bad in ("nan", "both") else []
    inf = [(77, 2, -1)] if bad in ("inf", "both") else []
    X, y = _data(nan=nan, inf=inf)
    recorded, bare = tmp_path / "recorded.zarr", tmp_path / "bare.zarr"
    ingest((X, y), recorded, chunk_rows=64)
    ingest((X, y), bare, chunk_rows=64)
    _drop_record(bare)
    job = _job(recorded, preprocessing={"impute": impute})
    message = _message(recorded, job)
    assert message.replace("recorded.zarr", "bare.zarr") == _message(bare, _job(bare, preprocessing={"impute": impute}))
    expected = {"nan": r"2 row\(s\) with missing values \(NaN\), first in row 40, column 3 \(x3\); set preprocessing",
                "inf": r"infinite value in row 77, column 2 \(x2\); remove or clip it",
                "both": r"infinite value in row 77, column 2"}[bad]
    assert re.search(expected, message) and "\n" not in message


def test_a_clean_store_is_accepted_without_reading_its_chunks(tmp_path, record_used):
    X, y = _data()
    path = tmp_path / "s.zarr"
    ingest((X, y), path, chunk_rows=64)
    _flip_every_chunk(path)  # any read of X now fails its checksum
    check_job_data(load_job_data(str(path)), _job(path))
    # NaN rows recorded, imputed by the job: accepted without a read too
    X_nan, _ = _data(nan=[(5, 1)])
    nan_path = tmp_path / "nan.zarr"
    ingest((X_nan, y), nan_path, chunk_rows=64)
    _flip_every_chunk(nan_path)
    check_job_data(load_job_data(str(nan_path)), _job(nan_path, preprocessing={"impute": "median"}))
    # the same store without the record is read, and its damage found, as before
    _drop_record(path)
    with pytest.raises(StoreError, match=r"chunk 0 of X \(rows 0..63\) failed its checksum"):
        check_job_data(load_job_data(str(path)), _job(path))


def test_a_missing_chunk_is_still_found_up_front(tmp_path, record_used):
    X, y = _data()
    path = tmp_path / "s.zarr"
    ingest((X, y), path, chunk_rows=64)
    (path / "X" / "c" / "2" / "0").unlink()
    with pytest.raises(StoreError, match=r"chunk 2 of X \(rows 128..191\) is missing on disk, so the store is "
                                         r"damaged"):
        check_job_data(load_job_data(str(path)), _job(path))


def test_small_stores_are_still_scanned(tmp_path):
    """Under SCAN_BYTES the check reads the chunks whatever the record says: damage fails before any task."""
    X, y = _data()
    path = tmp_path / "s.zarr"
    ingest((X, y), path, chunk_rows=64)
    _flip_every_chunk(path)
    with pytest.raises(StoreError, match=r"failed its checksum"):
        check_job_data(load_job_data(str(path)), _job(path))


def test_a_store_without_the_record_is_scanned(tmp_path, record_used, monkeypatch):
    X, y = _data(nan=[(100, 4)])
    path = tmp_path / "s.zarr"
    ingest((X, y), path, chunk_rows=64)
    _drop_record(path)
    scans, real = [], da.compute  # the check's scan is one dask.array.compute over the store
    monkeypatch.setattr(da, "compute", lambda *a, **k: scans.append(1) or real(*a, **k))
    with pytest.raises(DataError, match=r"1 row\(s\) with missing values \(NaN\), first in row 100, column 4"):
        check_job_data(load_job_data(str(path)), _job(path))
    assert len(scans) == 1
    check_job_data(load_job_data(str(path)), _job(path, preprocessing={"impute": "mean"}))
    assert len(scans) == 2  # scanned again: no record to trust


def test_a_task_names_the_damaged_chunk_it_meets(tmp_path):
    X, y = _data()
    path = tmp_path / "s.zarr"
    ingest((X, y), path, chunk_rows=64)
    chunk = path / "X" / "c" / "3" / "0"
    blob = bytearray(chunk.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    chunk.write_bytes(bytes(blob))
    rows = StoreRows(path, X.shape)
    np.testing.assert_array_equal(rows[np.arange(0, 150)], X[:150])
    for index in (np.array([5, 200, 390]), np.arange(190, 260)):
        with pytest.raises(StoreError, match=rf"store {path} has a damaged chunk: chunk 3 of X \(rows 192..255\) failed its checksum: "
                                             r".*; rebuild it with `dimbsvm ingest SOURCE .* --overwrite`"):
            rows[index]

