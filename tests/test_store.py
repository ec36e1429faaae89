"""Ingest -> open round trips on real Zarr stores on disk, and damaged stores."""

import logging

import dask.array as da
import numpy as np
import pytest
import zarr

from dimbsvm.datasets import load_keel, make_imbalanced
from dimbsvm.exceptions import StoreError
from dimbsvm.store import ingest, open_store, verify_store


def test_numpy_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(103, 4))
    y = (rng.random(103) < 0.2).astype(int)
    stored = ingest((X, y), tmp_path / "s.zarr", chunk_rows=25)
    assert stored.X.dtype == np.float32 and stored.X.chunks[0][:4] == (25, 25, 25, 25)
    np.testing.assert_array_equal(stored.X.compute(), X.astype(np.float32))
    np.testing.assert_array_equal(stored.y.compute(), y)
    assert stored.meta["complete"] is True
    assert stored.meta["class_counts"] == {"0": int((y == 0).sum()), "1": int(y.sum())}
    # the codec chain checksums every chunk
    codecs = zarr.open_array(str(tmp_path / "s.zarr" / "X")).metadata.codecs
    assert any(type(c).__name__ == "Crc32cCodec" for c in codecs)


def test_dask_ingest_streams_chunks_and_counts_classes(tmp_path):
    X, y = make_imbalanced(5_000, n_features=6, minority_fraction=0.05, chunks=1_000, random_state=3)
    stored = ingest((X, y), tmp_path / "syn.zarr", chunk_rows=700)
    np.testing.assert_array_equal(stored.X.compute(), X.compute().astype(np.float32))
    counts = np.bincount(y.compute())
    assert stored.meta["class_counts"] == {"0": int(counts[0]), "1": int(counts[1])}
    assert stored.X.chunks[0][0] == 700


def test_file_source_keeps_metadata_and_is_reused(tmp_path, caplog):
    path = tmp_path / "yeast5.zarr"
    stored = ingest("yeast5", path)
    expected = load_keel("yeast5")
    assert stored.meta["class_map"] == {"positive": 1, "negative": 0}
    assert stored.meta["feature_names"] == expected.feature_names
    np.testing.assert_allclose(stored.to_dataset().X, expected.X.astype(np.float32))
    first_chunk = path / "X" / "c" / "0" / "0"
    mtime = first_chunk.stat().st_mtime_ns
    with caplog.at_level(logging.INFO, logger="dimbsvm.store"):
        again = ingest("yeast5", path)
    assert "reusing" in caplog.text
    assert first_chunk.stat().st_mtime_ns == mtime
    assert again.meta["fingerprint"] == stored.meta["fingerprint"]


def test_other_source_needs_overwrite(tmp_path):
    path = tmp_path / "s.zarr"
    ingest((np.zeros((4, 2)), np.array([0, 1, 0, 1])), path)
    with pytest.raises(StoreError, match="overwrite=True"):
        ingest((np.ones((4, 2)), np.array([0, 1, 0, 1])), path)
    assert ingest((np.ones((4, 2)), np.array([0, 1, 0, 1])), path, overwrite=True).X.compute().min() == 1


def _failing_block(block, block_info=None):
    if block_info[0]["chunk-location"][0] == 2:
        raise RuntimeError("disk full while writing chunk 2")
    return block


def test_crashed_ingest_is_not_complete(tmp_path):
    X = da.map_blocks(_failing_block, da.ones((100, 3), chunks=(20, 3)), dtype=float)
    y = da.zeros(100, chunks=20, dtype=int)
    with pytest.raises(RuntimeError, match="disk full"):
        ingest((X, y), tmp_path / "s.zarr", chunk_rows=20)
    with pytest.raises(StoreError, match="incomplete"):
        open_store(tmp_path / "s.zarr")


def test_damaged_chunk_is_found(tmp_path):
    rng = np.random.default_rng(1)
    path = tmp_path / "s.zarr"
    ingest((rng.normal(size=(60, 3)), rng.integers(0, 2, 60)), path, chunk_rows=20)
    chunk = path / "X" / "c" / "1" / "0"
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF
    chunk.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=r"chunk 1 of X \(rows 20..39\) failed its checksum"):
        verify_store(path)
    with pytest.raises(StoreError, match="damaged chunk"):
        open_store(path).to_dataset()


def test_not_a_store(tmp_path):
    with pytest.raises(StoreError, match="not a dimbsvm store"):
        open_store(tmp_path)


def test_bad_arrays_are_rejected(tmp_path):
    with pytest.raises(StoreError, match="one label per row"):
        ingest((np.zeros((4, 2)), np.zeros(3, dtype=int)), tmp_path / "s.zarr")
    with pytest.raises(StoreError, match="integer labels"):
        ingest((np.zeros((4, 2)), np.array(["a", "b", "a", "b"])), tmp_path / "s.zarr")


def test_stage_marker_written_last(tmp_path):
    from dimbsvm.store import create_checksummed_array, finish_stage, open_stage, stage_is_complete

    path = tmp_path / "s.zarr"
    ingest((np.zeros((10, 2)), np.array([0, 1] * 5)), path)
    group = open_stage(path, "features/demo", "abc", {"k": 3})
    arr = create_checksummed_array(group, "values", shape=(10, 3), dtype="float32", chunks=(5, 3))
    arr[:5] = 1.0
    assert not stage_is_complete(path, "features/demo", "abc")  # half-written
    arr[5:] = 2.0
    finish_stage(group, {"recall": 0.99})
    assert stage_is_complete(path, "features/demo", "abc")
    assert not stage_is_complete(path, "features/demo", "other-fingerprint")
    assert not stage_is_complete(path, "features/missing", "abc")
