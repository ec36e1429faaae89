"""Sparse stores (issue 52): svmlight files and scipy.sparse matrices kept as CSR chunks, read back exactly.

The truth is scikit-learn's own reader (:func:`sklearn.datasets.load_svmlight_file`
over the whole file) and the matrices themselves.
"""

from __future__ import annotations

import pickle
import shutil

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from dimbsvm.datasets._labels import encode_labels
from dimbsvm.exceptions import DataError, StoreError
from dimbsvm.store import find_damage, ingest, open_store, verify_store
from dimbsvm.store.fingerprints import content_fingerprint
from dimbsvm.store.sources.svmlight import resolve_svmlight_source
from dimbsvm.store.sparse_rows import SparseStoreRows, store_rows


def _text_like(n_rows, n_features, seed=0, per_row=6):
    """Rows of a few values each at Zipf-distributed columns, and imbalanced -1/+1 labels."""
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(n_rows), per_row)
    columns = np.minimum(rng.zipf(1.3, size=rows.size) - 1, n_features - 1)
    X = sp.csr_matrix((np.round(rng.random(rows.size), 3) + 0.001, (rows, columns)), shape=(n_rows, n_features))
    y = np.where(rng.random(n_rows) < 0.12, 1, -1)
    return X, y


@pytest.fixture
def svm_file(tmp_path):
    X, y = _text_like(3000, 500)
    path = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)  # one-based, as LIBSVM writes
    return path


def test_svmlight_ingest_reads_what_scikit_learn_reads(tmp_path, svm_file):
    stored = ingest(svm_file, tmp_path / "s.zarr", chunk_rows=700)
    X_ref, y_ref = load_svmlight_file(str(svm_file))
    codes, class_map = encode_labels(y_ref, source="ref")
    assert stored.meta["sparse"] == "csr" and stored.meta["class_map"] == class_map
    assert stored.X.shape == X_ref.shape and stored.meta["nnz"] == X_ref.nnz
    assert stored.X.chunks[0] == (700, 700, 700, 700, 200) and sum(stored.meta["chunk_nnz"]) == X_ref.nnz
    back = stored.to_dataset()
    assert sp.isspmatrix_csr(back.X) and (back.X != X_ref).nnz == 0
    np.testing.assert_array_equal(back.y, codes)
    assert stored.meta["class_counts"] == {str(k): int(c) for k, c in zip(*np.unique(codes, return_counts=True))}
    assert stored.meta["nonfinite_rows"] == {"rows": 3000, "nan": 0, "inf": 0}
    assert find_damage(stored.path) is None
    # the same file again: the store is found and reused
    assert ingest(svm_file, tmp_path / "s.zarr", chunk_rows=700).meta["fingerprint"] == stored.meta["fingerprint"]


def test_blocks_agree_on_the_index_base(tmp_path):
    # Index 0 appears only in the last lines: scikit-learn's "auto" over the whole file reads it zero-based; a
    # guess per block would shift the first blocks' columns by one.
    lines = [f"{1 if i % 9 == 0 else -1} {1 + i % 5}:1.5 {7 + i % 3}:2 # row {i}" for i in range(400)]
    lines += ["1 0:3 4:1", "-1 qid:3 0:1 2:2", ""]
    path = tmp_path / "zero.svm"
    path.write_text("\n".join(lines))
    X, y, _, meta = resolve_svmlight_source(str(path), blocksize=512)  # many blocks
    X_ref, y_ref = load_svmlight_file(str(path))
    assert meta["zero_based"] and X.numblocks[0] > 5
    assert (X.compute() != X_ref).nnz == 0 and X.shape == X_ref.shape
    np.testing.assert_array_equal(y.compute(), encode_labels(y_ref, source="ref")[0])


def test_several_files_and_a_given_feature_count(tmp_path):
    for i in range(3):
        dump_svmlight_file(*_text_like(400, 80, seed=i), str(tmp_path / f"part-{i}.svm"), zero_based=True)
    stored = ingest(str(tmp_path / "part-*.svm"), tmp_path / "all.zarr", n_features=120)
    X_all = sp.vstack([load_svmlight_file(str(tmp_path / f"part-{i}.svm"), n_features=120, zero_based=True)[0]
                       for i in range(3)]).tocsr()
    assert stored.X.shape == (1200, 120) and (stored.to_dataset().X != X_all).nnz == 0
    with pytest.raises(DataError, match="beyond the 10 features given"):
        ingest(str(tmp_path / "part-*.svm"), tmp_path / "narrow.zarr", n_features=10)
    assert not (tmp_path / "narrow.zarr").exists()


def test_a_bad_line_is_one_line_naming_the_file(tmp_path):
    path = tmp_path / "bad.svm"
    path.write_text("1 1:2\n-1 x:y\n")
    with pytest.raises(DataError, match=r"bad.svm: not a readable svmlight file"):
        ingest(path, tmp_path / "bad.zarr")
    assert not (tmp_path / "bad.zarr").exists()


@pytest.mark.parametrize("kind", ["scipy", "dask", "float32"])
def test_sparse_arrays_are_stored_sparse(tmp_path, kind):
    X, y = _text_like(2500, 300, seed=3)
    y = (y == 1).astype(np.int64)
    source = X
    if kind == "dask":
        source = da.from_array(X, chunks=(900, -1), asarray=False, meta=sp.csr_matrix((0, 300)))
    stored = ingest((source, y), tmp_path / "a.zarr", chunk_rows=600, dtype="float32" if kind == "float32" else None)
    back = stored.to_dataset().X
    expected = X.astype(np.float32).astype(np.float64) if kind == "float32" else X
    assert stored.meta["sparse"] == "csr" and stored.X.dtype.name == ("float32" if kind == "float32" else "float64")
    assert (back != expected).nnz == 0 and stored.meta["nnz"] == X.nnz
    assert stored.meta["feature_names"] == []  # made-up names are not stored


def test_nonfinite_values_are_counted_by_row():
    from dimbsvm.store.sparse import sparse_nonfinite_rows
    from dimbsvm.store.finite import nonfinite_rows

    rng = np.random.default_rng(1)
    dense = np.where(rng.random((200, 30)) < 0.1, rng.normal(size=(200, 30)), 0.0)
    dense[rng.integers(0, 200, 7), rng.integers(0, 30, 7)] = np.nan
    dense[rng.integers(0, 200, 5), rng.integers(0, 30, 5)] = -np.inf
    np.testing.assert_array_equal(sparse_nonfinite_rows(sp.csr_matrix(dense)), nonfinite_rows(dense))


def test_damage_is_named_never_read_as_zeros(tmp_path, svm_file):
    stored = ingest(svm_file, tmp_path / "s.zarr", chunk_rows=700)
    shutil.rmtree(tmp_path / "s.zarr" / "X" / "2" / "indices" / "c")
    assert find_damage(stored.path, checksums=False) == "chunk 2 of X (rows 1400..2099): its indices values are " \
                                                         "missing on disk"
    with pytest.raises(StoreError, match="the indices array of chunk 2 of X is missing on disk"):
        open_store(stored.path).to_dataset()
    with pytest.raises(StoreError, match="rebuild it"):
        verify_store(stored.path)
    # a flipped byte fails the chunk's checksum
    stored = ingest(svm_file, tmp_path / "t.zarr", chunk_rows=700)
    chunk_file = tmp_path / "t.zarr" / "X" / "1" / "data" / "c" / "0"
    raw = bytearray(chunk_file.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    chunk_file.write_bytes(bytes(raw))
    assert find_damage(stored.path, checksums=False) is None
    assert "chunk 1 of X (rows 700..1399): the data array" in find_damage(stored.path)
    # the damaged store is rebuilt on request, never silently reused
    with pytest.raises(StoreError, match="damaged"):
        ingest(svm_file, tmp_path / "t.zarr", chunk_rows=700, verify=True)
    ingest(svm_file, tmp_path / "t.zarr", chunk_rows=700, verify=True, overwrite=True)
    assert find_damage(stored.path) is None


@pytest.mark.parametrize("cached", [False, True])
def test_row_handle_takes_rows_as_csr_indexing_does(tmp_path, svm_file, cached):
    stored = ingest(svm_file, tmp_path / "s.zarr", chunk_rows=700)
    truth = stored.to_dataset().X
    rows = store_rows(stored.path, stored.X.shape, stored.meta, content_fingerprint(stored.meta) if cached else "")
    assert isinstance(rows, SparseStoreRows) and rows.block_rows == 700
    rows = pickle.loads(pickle.dumps(rows))  # as a task receives it
    rng = np.random.default_rng(0)
    for index in (np.arange(700, 1400), rng.integers(0, 3000, 900), np.array([2999, 0, 0, 1500]),
                  np.array([], dtype=np.int64), rng.random(3000) < 0.3):
        for _ in range(2):  # the second read comes from the chunk cache where there is one
            got = rows[index]
            assert sp.isspmatrix_csr(got) and got.shape == truth[index].shape and (got != truth[index]).nnz == 0
    assert rows.take(np.arange(3), dtype=np.float32).dtype == np.float32


def test_lazy_reads_stay_lazy_and_chunked(tmp_path, svm_file):
    stored = ingest(svm_file, tmp_path / "s.zarr", chunk_rows=700)
    assert isinstance(stored.X._meta, sp.csr_matrix)
    block = stored.X.blocks[3].compute(scheduler="synchronous")
    assert sp.isspmatrix_csr(block) and (block != stored.to_dataset().X[2100:2800]).nnz == 0
    assert dask.compute(stored.y.sum())[0] == int(stored.meta["class_counts"]["1"])


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_max_abs_scaler_merged_from_chunk_ranges_is_the_one_fitted_on_all_rows(sparse):
    from sklearn.preprocessing import MaxAbsScaler

    from dimbsvm.fold_data.spans import block_range
    from dimbsvm.model_selection.chunk_bodies import prepare_from_ranges

    X, _ = _text_like(1000, 300, seed=5)
    X = X.multiply(np.where(np.arange(300) % 3 == 0, -1.0, 1.0)).tocsr()  # negative columns too
    X = X if sparse else X.toarray()
    ranges = [block_range(X[start:start + 128]) for start in range(0, 1000, 128)]
    assert sp.issparse(ranges[0][0]) == sparse
    merged = prepare_from_ranges(ranges, scaler="maxabs").steps[0]
    direct = MaxAbsScaler().fit(X)
    for attr in ("max_abs_", "scale_", "n_samples_seen_"):
        np.testing.assert_array_equal(getattr(merged, attr), getattr(direct, attr))
    transformed = merged.transform(X)
    np.testing.assert_array_equal(transformed.toarray() if sparse else transformed,
                                  direct.transform(X).toarray() if sparse else direct.transform(X))


def test_compressed_files_are_one_block_each_and_read_alike(tmp_path, svm_file):
    import gzip

    (tmp_path / "train.svm.gz").write_bytes(gzip.compress(svm_file.read_bytes()))
    packed = ingest(tmp_path / "train.svm.gz", tmp_path / "gz.zarr", chunk_rows=700)
    plain = ingest(svm_file, tmp_path / "plain.zarr", chunk_rows=700)
    assert (packed.to_dataset().X != plain.to_dataset().X).nnz == 0
    np.testing.assert_array_equal(packed.to_dataset().y, plain.to_dataset().y)
