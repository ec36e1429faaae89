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
    assert stored.X.dtype == np.float64 and stored.X.chunks[0][:4] == (25, 25, 25, 25)  # an array keeps its dtype
    np.testing.assert_array_equal(stored.X.compute(), X)
    np.testing.assert_array_equal(stored.y.compute(), y)
    assert stored.meta["complete"] is True
    assert stored.meta["class_counts"] == {"0": int((y == 0).sum()), "1": int(y.sum())}
    # the codec chain checksums every chunk
    codecs = zarr.open_array(str(tmp_path / "s.zarr" / "X")).metadata.codecs
    assert any(type(c).__name__ == "Crc32cCodec" for c in codecs)


def test_dask_ingest_streams_chunks_and_counts_classes(tmp_path):
    X, y = make_imbalanced(5_000, n_features=6, minority_fraction=0.05, chunks=1_000, random_state=3)
    stored = ingest((X, y), tmp_path / "syn.zarr", chunk_rows=700)
    assert stored.X.dtype == np.float32  # make_imbalanced's float32 stays float32
    np.testing.assert_array_equal(stored.X.compute(), X.compute())
    counts = np.bincount(y.compute())
    assert stored.meta["class_counts"] == {"0": int(counts[0]), "1": int(counts[1])}
    assert stored.X.chunks[0][0] == 700


def test_file_source_keeps_metadata_and_is_reused(tmp_path, caplog):
    path = tmp_path / "yeast5.zarr"
    stored = ingest("yeast5", path)
    expected = load_keel("yeast5")
    assert stored.meta["class_map"] == {"positive": 1, "negative": 0}
    assert stored.meta["feature_names"] == expected.feature_names
    np.testing.assert_array_equal(stored.to_dataset().X, expected.X)  # a file is stored as float64
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


def test_crashed_ingest_leaves_nothing(tmp_path):
    # the store is written beside its path and moved there only when complete
    X = da.map_blocks(_failing_block, da.ones((100, 3), chunks=(20, 3)), dtype=float)
    y = da.zeros(100, chunks=20, dtype=int)
    with pytest.raises(RuntimeError, match="disk full"):
        ingest((X, y), tmp_path / "s.zarr", chunk_rows=20)
    with pytest.raises(StoreError, match="does not exist"):
        open_store(tmp_path / "s.zarr")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no staging, no lock file


def test_incomplete_store_is_refused(tmp_path):
    # a store whose completion marker is missing (an ingest by a dimbsvm that wrote in place)
    path = tmp_path / "s.zarr"
    ingest((np.zeros((4, 2)), np.array([0, 1, 0, 1])), path)
    group = zarr.open_group(str(path), mode="r+")
    group.attrs["dimbsvm"] = dict(group.attrs["dimbsvm"], complete=False)
    with pytest.raises(StoreError, match="incomplete"):
        open_store(path)


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
    from dimbsvm.store import StoreRows, content_fingerprint
    from dimbsvm.store.stages import read_meta

    with pytest.raises(StoreError, match="damaged chunk"):
        StoreRows(path, (60, 3))[np.arange(20, 40)]
    # read through this process's chunk cache (a job's handle): the same error, and the chunk is not kept
    cached = StoreRows(path, (60, 3), content_fingerprint(read_meta(path)))
    cached[np.arange(0, 20)]  # an intact chunk still reads
    with pytest.raises(StoreError, match=r"chunk 1 of X \(rows 20..39\) failed its checksum"):
        cached[np.array([30, 5])]
    from dimbsvm.store.chunk_cache import process_cache

    assert process_cache().get((str(path), cached.fingerprint, 1)) is None


def test_contiguous_and_scattered_rows_read_the_same(tmp_path):
    from dimbsvm.store import StoreRows

    X = np.random.default_rng(2).normal(size=(70, 3))
    path = tmp_path / "s.zarr"
    ingest((X, np.arange(70) % 2), path, chunk_rows=20)
    rows = StoreRows(path, X.shape)
    for index in [np.arange(20, 40), np.arange(15, 70), np.arange(0, 1), np.array([5, 6, 8]), np.array([9, 8, 7]),
                  np.array([3, 3, 4]), np.arange(20, 40, dtype=np.int32), np.arange(70) < 30]:
        block = rows[index]
        assert block.dtype == np.float64
        np.testing.assert_array_equal(block, X[index])
    with pytest.raises(IndexError):  # past the last row: an error, not a short read
        rows[np.arange(65, 75)]


def test_rows_read_as_stored_are_the_same_values(tmp_path):
    """``take(rows, dtype=None)`` reads a float32 store as float32; converted, the values are ``rows[...]``'s."""
    from dimbsvm.store import StoreRows

    X = np.random.default_rng(3).normal(size=(70, 3)).astype(np.float32)
    ingest((X, np.arange(70) % 2), tmp_path / "s.zarr", chunk_rows=20, dtype="float32")
    rows = StoreRows(tmp_path / "s.zarr", X.shape)
    for index in [np.arange(20, 40), np.array([9, 8, 7, 40]), np.arange(70) < 30]:
        stored = rows.take(index, dtype=None)
        assert stored.dtype == np.float32
        np.testing.assert_array_equal(stored, X[index])
        assert stored.astype(np.float64).tobytes() == rows[index].tobytes()


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


def _store_with_zero_chunks(path):
    """60 rows in 20-row chunks whose second X chunk and first y chunk are all zeros."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(60, 3))
    X[20:40] = 0.0
    y = np.array([0] * 20 + [1, 0] * 20)
    return ingest((X, y), path, chunk_rows=20), X, y


def test_every_chunk_is_written_even_all_zero_ones(tmp_path):
    path = tmp_path / "s.zarr"
    _store_with_zero_chunks(path)
    assert (path / "X" / "c" / "1" / "0").is_file() and (path / "y" / "c" / "0").is_file()
    verify_store(path)


def test_missing_chunk_is_an_error_not_zeros(tmp_path):
    from dimbsvm.store import StoreRows

    path = tmp_path / "s.zarr"
    stored, X, y = _store_with_zero_chunks(path)
    (path / "X" / "c" / "2" / "0").unlink()
    message = r"chunk 2 of X \(rows 40..59\) is missing on disk"
    with pytest.raises(StoreError, match=message):
        verify_store(path)
    with pytest.raises(StoreError, match=message):
        open_store(path).X.compute()
    with pytest.raises(StoreError, match=message):
        open_store(path).to_dataset()
    rows = StoreRows(path, stored.X.shape)
    np.testing.assert_array_equal(rows[np.arange(0, 40)], X[:40])  # intact chunks still read
    with pytest.raises(StoreError, match=message):
        rows[np.array([3, 45])]
    with pytest.raises(StoreError, match=message):  # a contiguous run of rows is read as a slice
        rows[np.arange(35, 50)]
    # re-ingesting the same source over the damaged store says so; --overwrite rebuilds it
    with pytest.raises(StoreError, match=r"holds this source, but it is damaged: chunk 2 of X \(rows 40..59\) "
                                         r"is missing on disk; pass overwrite=True"):
        ingest((X, y), path, chunk_rows=20)
    rebuilt = ingest((X, y), path, chunk_rows=20, overwrite=True)
    np.testing.assert_array_equal(rebuilt.X.compute(), X)
    verify_store(path)


def test_missing_label_chunk_fails_a_job(tmp_path, client):
    from dimbsvm.jobs import run_job, validate_job

    path = tmp_path / "s.zarr"
    ingest("yeast5", path, chunk_rows=250)
    (path / "y" / "c" / "2").unlink()
    job = validate_job({"data": {"source": str(path)}, "estimator": {"name": "svc_balanced"}})
    with pytest.raises(StoreError, match=r"chunk 2 of y \(rows 500..749\) is missing on disk"):
        run_job(job, client, out=tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_missing_feature_chunk_fails_a_job(tmp_path, client):
    from dimbsvm.jobs import run_job, validate_job

    path = tmp_path / "s.zarr"
    ingest("yeast5", path, chunk_rows=250)
    (path / "X" / "c" / "3" / "0").unlink()
    job = validate_job({"data": {"source": str(path)}, "estimator": {"name": "svc_balanced"},
                        "execution": {"retries": 0}})
    with pytest.raises(StoreError, match=r"chunk 3 of X \(rows 750..999\) is missing on disk"):
        run_job(job, client, out=tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_chunking_change_needs_overwrite(tmp_path):
    path = tmp_path / "s.zarr"
    X, y = np.arange(40.0).reshape(20, 2), np.array([0, 1] * 10)
    ingest((X, y), path, chunk_rows=5)
    with pytest.raises(StoreError, match=r"chunked in 5 rows, not the 10 asked for"):
        ingest((X, y), path, chunk_rows=10)
    assert ingest((X, y), path, chunk_rows=10, overwrite=True).X.chunks[0][0] == 10


def test_older_store_format_is_refused_and_rebuilt(tmp_path):
    from dimbsvm.store.stages import ATTR

    path = tmp_path / "s.zarr"
    X, y = np.arange(40.0).reshape(20, 2), np.array([0, 1] * 10)
    ingest((X, y), path, chunk_rows=5)
    group = zarr.open_group(str(path), mode="r+")
    group.attrs[ATTR] = dict(group.attrs[ATTR], store_format=1)
    with pytest.raises(StoreError, match=r"older dimbsvm \(store format 1\).*--overwrite"):
        open_store(path)
    assert ingest((X, y), path, chunk_rows=5).meta["store_format"] == 2  # same source: rebuilt


def test_file_precision_is_kept_unless_float32_is_asked_for(tmp_path):
    """A CSV value needing more than float32's ~7 digits reads back exactly; float32 is opt-in and recorded."""
    src = tmp_path / "precise.csv"
    src.write_text("x0,x1,class\n" + "".join(f"{123456789.123 + i},{i},{'a' if i % 4 else 'b'}\n" for i in range(12)))
    stored = ingest(src, tmp_path / "p64.zarr")
    assert stored.meta["dtype"] == "float64" and stored.X.dtype == np.float64
    assert stored.X[0, 0].compute() == 123456789.123
    small = ingest(src, tmp_path / "p32.zarr", dtype="float32")
    assert small.meta["dtype"] == "float32" and small.X[0, 0].compute() == np.float32(123456792.0)
    # reused as it is without a dtype; another dtype is refused, then rebuilt with overwrite
    assert ingest(src, tmp_path / "p32.zarr").X.dtype == np.float32
    with pytest.raises(StoreError, match="holds float32 features, not the float64 asked for.*overwrite"):
        ingest(src, tmp_path / "p32.zarr", dtype="float64")
    assert ingest(src, tmp_path / "p32.zarr", dtype="float64", overwrite=True).X[0, 0].compute() == 123456789.123
    with pytest.raises(StoreError, match="dtype must be one of float64, float32"):
        ingest(src, tmp_path / "p16.zarr", dtype="float16")


def test_an_lz4_store_reads_the_same_values_and_is_kept_as_asked(tmp_path, caplog):
    """Compression changes the bytes on disk, never the values; a store compressed otherwise is not reused silently."""
    X, y = make_imbalanced(3000, n_features=5, minority_fraction=0.1, random_state=0)
    X = np.round(np.asarray(X), 2)  # few distinct values: zstd keeps them smaller
    zstd = ingest((X, y), tmp_path / "z.zarr", chunk_rows=700)
    lz4 = ingest((X, y), tmp_path / "l.zarr", chunk_rows=700, compression="lz4", verify=True)
    assert zstd.meta["compression"] == "zstd" and lz4.meta["compression"] == "lz4"
    codecs = zarr.open_array(tmp_path / "l.zarr" / "X", mode="r").metadata.codecs
    assert [type(c).__name__ for c in codecs] == ["BytesCodec", "BloscCodec", "Crc32cCodec"]
    assert np.asarray(lz4.X).tobytes() == np.asarray(zstd.X).tobytes() == X.tobytes()
    np.testing.assert_array_equal(np.asarray(lz4.y), np.asarray(zstd.y))

    def disk(path):
        return sum(f.stat().st_size for f in (path / "X").rglob("*") if f.is_file())

    assert disk(tmp_path / "z.zarr") < disk(tmp_path / "l.zarr")  # the trade: zstd is smaller here
    first_chunk = tmp_path / "l.zarr" / "X" / "c" / "0" / "0"
    mtime = first_chunk.stat().st_mtime_ns
    with caplog.at_level(logging.INFO, logger="dimbsvm.store"):
        assert ingest((X, y), tmp_path / "l.zarr").meta["compression"] == "lz4"  # not asked: reused as it is
    assert "reusing it" in caplog.text and first_chunk.stat().st_mtime_ns == mtime
    with pytest.raises(StoreError, match="compressed with lz4, not the zstd asked for"):
        ingest((X, y), tmp_path / "l.zarr", compression="zstd")
    assert ingest((X, y), tmp_path / "l.zarr", compression="zstd", overwrite=True).meta["compression"] == "zstd"
    with pytest.raises(StoreError, match="compression must be one of zstd, lz4"):
        ingest((X, y), tmp_path / "x.zarr", compression="gzip")


def test_write_blocks_cover_whole_chunks_and_cross_source_blocks_only_a_chunk_at_a_time():
    """Brute force over random source cuts: the properties that make lock-free writes safe and local."""
    from dimbsvm.store.layout import MAX_CHUNK_BYTES, _write_blocks

    rng = np.random.default_rng(0)
    for _ in range(300):
        source = tuple(int(v) for v in rng.integers(0, 60, rng.integers(1, 8)))
        n = sum(source)
        chunk, row_bytes = int(rng.integers(1, 25)), int(rng.choice([8, 2**20, 3 * 2**20]))
        blocks = _write_blocks(source, chunk, row_bytes)
        assert sum(blocks) == n
        edges = np.concatenate([[0], np.cumsum(blocks)])
        assert all(e % chunk == 0 for e in edges[:-1]) and (n == 0 or edges[-1] == n)  # whole chunks only
        per_block = chunk * max(1, MAX_CHUNK_BYTES // (chunk * row_bytes))
        assert max(blocks) <= per_block
        cuts = np.cumsum(source)
        for low, high in zip(edges, edges[1:]):
            crossed = [c for c in cuts if low < c < high]
            assert not crossed or high - low <= chunk, (source, chunk, blocks)  # only a straddling chunk spans two


@pytest.mark.parametrize("sparse", [False, True])
def test_ingest_shows_the_chunks_written_when_asked_and_nothing_otherwise(tmp_path, monkeypatch, capsys, sparse):
    """The progress line counts the chunk files on disk (issue 51: a long ingest printed nothing); an ingest
    shorter than the quiet time prints none (here the quiet time is set to zero to see the line)."""
    import scipy.sparse as sp

    from dimbsvm.store import write_progress

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 4))
    X = sp.csr_matrix(np.where(X > 1.0, X, 0.0)) if sparse else X
    y = (rng.random(1000) < 0.2).astype(int)
    ingest((X, y), tmp_path / "quiet.zarr", chunk_rows=100, progress=True)  # well under the quiet time
    assert "chunks written" not in capsys.readouterr().err
    monkeypatch.setattr(write_progress, "QUIET_SECONDS", 0.0)
    ingest((X, y), tmp_path / "off.zarr", chunk_rows=100)
    assert capsys.readouterr().err == ""
    ingest((X, y), tmp_path / "shown.zarr", chunk_rows=100, progress=True)
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("[##############################] 10/10 "
                                                                       "chunks written")
