"""A store is the old complete one or the new complete one, whatever kills its writer (issue 30).

Writers are real processes (forked from a server that imported dimbsvm once,
so each kill costs milliseconds, not an interpreter start) killed with
SIGKILL at many points of an ingest (of dense rows and of sparse ones), run two at a time into one path, and
run on a tmpfs too small for the new store. After each, the path is checked
against the data itself: the meta's fingerprint names one of the two
datasets and the rows read back are exactly that dataset's.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from dimbsvm.exceptions import StoreError
from dimbsvm.store import ingest, open_store, verify_store

N_ROWS, N_FEATURES, CHUNK_ROWS = 16_000, 8, 400


def _dataset(seed: int, sparse: bool = False):
    """Dataset ``seed``: dense rows, or (``sparse``) 4,000-column CSR rows of about 5 values each."""
    rng = np.random.default_rng(seed)
    if sparse:
        rows, columns = np.repeat(np.arange(N_ROWS), 5), rng.integers(0, 4000, size=5 * N_ROWS)
        X = sp.csr_matrix((rng.normal(size=rows.size), (rows, columns)), shape=(N_ROWS, 4000))
        return X, (rng.random(N_ROWS) < 0.1).astype(np.int64)
    return rng.normal(size=(N_ROWS, N_FEATURES)), (rng.random(N_ROWS) < 0.1).astype(np.int64)


def _ingest_seed(seed: int, path: str, sparse: bool = False) -> None:
    ingest(_dataset(seed, sparse), path, chunk_rows=CHUNK_ROWS, overwrite=True)


@pytest.fixture(scope="module")
def writers():
    """Processes forked from a server that has imported dimbsvm (no threads of the test process inherited)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["dimbsvm.store", "numpy"])
    return context


def _start(writers, seed, path, sparse=False):
    process = writers.Process(target=_ingest_seed, args=(seed, str(path), sparse))
    process.start()
    return process


def _which_dataset(path: Path, fingerprints: dict, sparse: bool = False) -> int:
    """The seed whose data the store at ``path`` holds, checked row for row; fails on anything else."""
    stored = verify_store(path)  # complete, every chunk present and passing its checksum
    seed = fingerprints.get(stored.meta["fingerprint"])
    assert seed is not None, f"store fingerprint {stored.meta['fingerprint'][:12]} names neither dataset"
    X, y = _dataset(seed, sparse)
    if sparse:
        assert (stored.to_dataset().X != X).nnz == 0
    else:
        np.testing.assert_array_equal(stored.X.compute(), X)
    np.testing.assert_array_equal(stored.y.compute(), y)
    return seed


def _fingerprints(tmp_path, sparse=False) -> dict:
    return {ingest(_dataset(seed, sparse), tmp_path / f"ref{seed}.zarr",
                   chunk_rows=CHUNK_ROWS).meta["fingerprint"]: seed for seed in (1, 2)}


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_killed_replacement_leaves_old_or_new(tmp_path, writers, sparse):
    fingerprints = _fingerprints(tmp_path, sparse)
    path = tmp_path / "s.zarr"
    _start(writers, 1, path, sparse).join()  # the first also starts the fork server
    start = time.perf_counter()
    _start(writers, 2, path, sparse).join()
    _start(writers, 1, path, sparse).join()
    whole = (time.perf_counter() - start) / 2  # a whole replacement
    assert _which_dataset(path, fingerprints, sparse) == 1

    seen = set()
    rng = np.random.default_rng(0)
    before = 1
    for attempt in range(24):
        if attempt >= 12 and len(seen) == 2:
            break
        seed = 3 - before  # the other dataset, so that every replacement changes the data
        fraction = rng.uniform(0, 1.2)
        if attempt >= 8 and len(seen) < 2:  # a loaded machine: aim at the outcome not yet seen
            fraction = rng.uniform(0, 0.2) if "old" not in seen else rng.uniform(1.5, 3.0)
        process = _start(writers, seed, path, sparse)
        time.sleep(fraction * whole)
        try:
            os.kill(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it had finished
        process.join()
        after = _which_dataset(path, fingerprints, sparse)
        assert after in (before, seed)
        seen.add("new" if after != before else "old")
        before = after
    # the kills landed both before and after the swap (otherwise the test proved half of its claim)
    assert seen == {"old", "new"}, seen
    # a finished ingest afterwards cleans the staging the killed ones left
    _start(writers, 1, path, sparse).join()
    assert _which_dataset(path, fingerprints, sparse) == 1
    assert not list(tmp_path.glob(".s.zarr.staging-*"))


def test_concurrent_ingests_are_serialised(tmp_path, writers):
    fingerprints = _fingerprints(tmp_path)
    for attempt in range(3):
        path = tmp_path / f"s{attempt}.zarr"
        processes = [_start(writers, seed, path) for seed in (1, 2)]
        for process in processes:
            process.join()
        assert [p.exitcode for p in processes] == [0, 0]
        assert _which_dataset(path, fingerprints) in (1, 2)
        assert not list(tmp_path.glob(f".s{attempt}.zarr.staging-*"))


def test_full_disk_keeps_the_old_store(small_tmpfs):
    small_disk = small_tmpfs("3m")
    path = small_disk / "s.zarr"
    rng = np.random.default_rng(3)
    small = (rng.normal(size=(2_000, 8)), np.arange(2_000) % 2)
    old = ingest(small, path, chunk_rows=500)
    large = (rng.normal(size=(60_000, 8)), np.arange(60_000) % 2)  # ~3.7 MB of incompressible numbers
    with pytest.raises(StoreError, match=rf"no space left on device while writing store {path}.*unchanged"):
        ingest(large, path, chunk_rows=5_000, overwrite=True)
    kept = verify_store(path)
    assert kept.meta["fingerprint"] == old.meta["fingerprint"]
    np.testing.assert_array_equal(kept.X.compute(), small[0])
    assert sorted(p.name for p in small_disk.iterdir()) == ["s.zarr"]  # no staging, no lock file


@pytest.mark.parametrize("overwrite", [False, True])
def test_foreign_directories_are_never_written(tmp_path, overwrite, monkeypatch):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("mine")
    data = (np.zeros((4, 2)), np.array([0, 1, 0, 1]))
    with pytest.raises(StoreError, match=r"notes is an existing directory that is not a dimbsvm store \(it holds "
                                         r"a.txt\)"):
        ingest(data, notes, overwrite=overwrite)
    assert [p.name for p in notes.iterdir()] == ["a.txt"]
    monkeypatch.chdir(notes)
    with pytest.raises(StoreError, match="is the current directory"):
        ingest(data, ".", overwrite=overwrite)
    a_file = tmp_path / "file.zarr"
    a_file.write_text("x")
    with pytest.raises(StoreError, match="existing file"):
        ingest(data, a_file, overwrite=overwrite)
    assert a_file.read_text() == "x"


def test_a_store_holding_foreign_files_is_not_replaced(tmp_path):
    path = tmp_path / "s.zarr"
    ingest((np.zeros((4, 2)), np.array([0, 1, 0, 1])), path)
    (path / "notes.txt").write_text("mine")
    # reused as it is: nothing is written
    assert ingest((np.zeros((4, 2)), np.array([0, 1, 0, 1])), path).X.shape == (4, 2)
    with pytest.raises(StoreError, match=r"also holds notes.txt, which dimbsvm did not write"):
        ingest((np.ones((4, 2)), np.array([0, 1, 0, 1])), path, overwrite=True)
    assert (path / "notes.txt").read_text() == "mine"
    assert open_store(path).X.compute().max() == 0


def test_an_empty_directory_becomes_the_store(tmp_path):
    path = tmp_path / "s.zarr"
    path.mkdir()
    assert ingest((np.ones((4, 2)), np.array([0, 1, 0, 1])), path).X.compute().min() == 1
