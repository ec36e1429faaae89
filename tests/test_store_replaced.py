"""A job reads one version of its data (issue 50, item 1): a store replaced under a reader is refused, never mixed.

``dimbsvm ingest --overwrite`` swaps a new store in at the path while a job
may be reading it. The truth: the rows and labels a handle gives are the
ones of the store it was made for (compared with the generated arrays), or
the read fails with one line naming the replacement.
"""

from __future__ import annotations

import numpy as np
import pytest

from dimbsvm.exceptions import StoreError
from dimbsvm.jobs import validate_job
from dimbsvm.jobs.data import load_job_data
from dimbsvm.store import ingest

REPLACED = "was replaced while this job read it"


def _data(seed, n=400):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (rng.random(n) < 0.2).astype(np.int64)
    y[:2] = [0, 1]
    return X, y


@pytest.fixture
def no_chunk_cache(monkeypatch):
    monkeypatch.setenv("DIMBSVM_CHUNK_CACHE_SHARE", "0")


def test_rows_and_labels_of_a_replaced_store_are_refused(tmp_path, no_chunk_cache):
    path = tmp_path / "data.zarr"
    X_old, y_old = _data(0)
    ingest((X_old, y_old), path, chunk_rows=50)
    data = load_job_data(str(path))
    rows, labels = data.X, data.X.labels()
    assert np.array_equal(rows[np.arange(100)], X_old[:100])  # the version it was made for: read

    X_new, y_new = _data(1)
    ingest((X_new, y_new), path, chunk_rows=50, overwrite=True)
    for read in (lambda: rows[np.arange(100, 200)], lambda: rows.take(np.array([5, 390])),
                 lambda: labels.values()):
        with pytest.raises(StoreError, match=REPLACED) as caught:
            read()
        assert "\n" not in str(caught.value)
    # a handle made for the new store reads it
    fresh = load_job_data(str(path)).X
    assert np.array_equal(fresh[np.arange(100, 200)], X_new[100:200])


def test_the_same_source_ingested_again_is_no_replacement(tmp_path, no_chunk_cache):
    # the same numbers in other chunks: the rows a handle reads are still the ones it was made for
    path = tmp_path / "data.zarr"
    X, y = _data(0)
    ingest((X, y), path, chunk_rows=50)
    rows = load_job_data(str(path)).X
    ingest((X, y), path, chunk_rows=80, overwrite=True)
    assert np.array_equal(rows[np.arange(400)], X)


def test_a_job_whose_store_is_replaced_fails_in_one_line(tmp_path, no_chunk_cache):
    """The store swapped between the run's plan and its tasks: the run fails; no record of either version."""
    from dimbsvm.jobs.runner import execute_run, plan_run

    path = tmp_path / "data.zarr"
    ingest(_data(0), path, chunk_rows=50)
    job = validate_job({"name": "swap", "data": {"source": str(path)}, "estimator": {"name": "othr"},
                        "cv": {"n_splits": 2, "n_repeats": 1}})
    data = load_job_data(str(path))
    plan = plan_run(job, data, tmp_path / "run", data_fingerprint="old")
    ingest(_data(1), path, chunk_rows=50, overwrite=True)
    with pytest.raises(StoreError, match=REPLACED):
        execute_run(plan, None, progress=False)
    assert not (tmp_path / "run").exists()
