"""An ensemble's bag rows kept on disk by the chunks' reads, each member reading only its own (issue 49, item 2).

The truth is the same pieces held in memory (what the reads returned before)
and the same job run with the pieces kept in memory: records and models equal
bit for bit.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from dimbsvm import load_model
from dimbsvm.datasets import load_keel
from dimbsvm.jobs import run_job, validate_job
from dimbsvm.jobs.data import load_job_data
from dimbsvm.jobs.threshold_runs import SpilledPieces, ThresholdRunDirectory
from dimbsvm.svm.counted_bags import CountedPiece
from dimbsvm.store import ingest


def _pieces(rng, sizes, n_features=5, dtype=np.float32, labels_dtype=np.int64):
    return [CountedPiece(np.sort(rng.choice(1000, size, replace=False)), rng.integers(0, 10**6, size),
                         rng.normal(size=(size, n_features)).astype(dtype),
                         rng.integers(0, 2, size).astype(labels_dtype)) for size in sizes]


def _recorded(monkeypatch, method: str) -> list:
    """``[(arguments, what it returned), ...]`` of every call of the run directory's ``method`` from now on."""
    calls, real = [], getattr(ThresholdRunDirectory, method)

    def recorded(self, *args):
        kept = real(self, *args)
        calls.append((args, kept))
        return kept

    monkeypatch.setattr(ThresholdRunDirectory, method, recorded)
    return calls


def _without_times(records):
    return [{k: v for k, v in record.items() if not k.endswith("_time")} for record in records]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_spilled_pieces_read_back_each_member_as_written_and_pickle_small(tmp_path, dtype):
    rng = np.random.default_rng(0)
    pieces = _pieces(rng, [7, 0, 130, 1, 0], dtype=dtype)  # members without rows in this chunk among them
    spill = ThresholdRunDirectory.open(tmp_path / "runs")
    kept = spill.write_pieces((3, 1), 500, pieces)
    assert isinstance(kept, SpilledPieces) and len(kept) == len(pieces)
    kept = pickle.loads(pickle.dumps(kept))
    assert len(pickle.dumps(kept)) < 400  # the handle travels, not the rows
    for index, piece in enumerate(pieces):
        read = kept[index]
        for name in SpilledPieces.fields:
            expected, got = getattr(piece, name), getattr(read, name)
            assert got.dtype == expected.dtype and got.shape == expected.shape, (index, name)
            assert np.array_equal(got, expected), (index, name)
            assert got.flags.writeable  # a member may scale its rows in place
    spill.forget((3, 1))
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [f".tasks-write-{spill.token}"]


def test_pieces_stay_in_memory_where_the_spill_cannot_take_them(tmp_path):
    rng = np.random.default_rng(1)
    spill = ThresholdRunDirectory.open(tmp_path / "runs")
    assert spill.write_pieces((0, 0), 0, _pieces(rng, [0, 0])) is None  # no bag row in the chunk
    assert spill.write_pieces((0, 0), 0, _pieces(rng, [3, 2], labels_dtype=object)) is None  # labels as objects
    (tmp_path / "runs" / f".tasks-write-{spill.token}").unlink()  # as a worker on another machine sees it
    assert spill.write_pieces((0, 0), 0, _pieces(rng, [3, 2])) is None


def test_a_truncated_pieces_file_is_an_error_not_other_rows(tmp_path):
    rng = np.random.default_rng(2)
    spill = ThresholdRunDirectory.open(tmp_path / "runs")
    kept = spill.write_pieces((1, 0), 0, _pieces(rng, [4, 6]))
    with open(kept.path, "r+b") as handle:
        handle.truncate(10)
    with pytest.raises(ValueError, match="holds 10 bytes"):
        kept[1]


def test_a_store_job_with_bag_rows_on_disk_equals_the_job_with_them_in_memory(tmp_path, monkeypatch):
    """Records and final models equal bit for bit; every fold's reads kept their pieces on disk, and nothing of
    them is left when the run has finished."""
    data = load_keel("ecoli1")  # 336 rows, 77 minority
    store = tmp_path / "ecoli1.zarr"
    ingest((data.X, data.y), store, chunk_rows=30)
    job = validate_job({"name": "pieces", "data": {"source": str(store)},
                        "estimator": {"name": "ensemble_othr", "params": {
                            "estimator": "linear_svc", "n_estimators": 4, "bootstrap": "balanced",
                            "max_samples": 40, "random_state": 3}},
                        "cv": {"n_splits": 3, "n_repeats": 1, "random_state": 4}, "metrics": ["g_mean", "auc"]})
    written = _recorded(monkeypatch, "write_pieces")
    on_disk = run_job(job, None, out=tmp_path / "on-disk", progress=False, data=load_job_data(str(store)))
    n_chunks = -(-len(data.y) // 30)
    assert len(written) == 4 * n_chunks  # 3 folds and the final model, every chunk holding training rows
    # kept on disk unless the chunk holds no bag row
    sizes = [sum(piece.ranks.size for piece in pieces) for (_, _, pieces), _ in written]
    assert all(isinstance(kept, SpilledPieces) == (size > 0) for (_, kept), size in zip(written, sizes))
    assert sum(size > 0 for size in sizes) > 0.9 * len(written)
    monkeypatch.setattr(ThresholdRunDirectory, "write_pieces", lambda self, key, first, pieces: None)
    in_memory = run_job(job, None, out=tmp_path / "in-memory", progress=False, data=load_job_data(str(store)))
    assert _without_times(on_disk.folds) == _without_times(in_memory.folds)
    a, b = (load_model(result.run_dir / "model").estimator[-1] for result in (on_disk, in_memory))
    assert np.float64(a.threshold_).tobytes() == np.float64(b.threshold_).tobytes()
    for first, second in zip(a.estimators_, b.estimators_, strict=True):
        assert first.coef_.tobytes() == second.coef_.tobytes()
    assert not any(path.suffix == ".bin" for path in tmp_path.rglob("*"))  # the partial directory too


# -- a chunk's range kept on disk by its read -------------------------------------------------------------------


def test_a_spilled_range_reads_back_as_written_and_small_ranges_stay(tmp_path):
    import scipy.sparse as sp

    from dimbsvm.fold_data.spans import block_range
    from dimbsvm.jobs.threshold_runs import SPILLED_RANGE_BYTES, SpilledRange

    rng = np.random.default_rng(5)
    spill = ThresholdRunDirectory.open(tmp_path / "runs")
    rows = sp.random(300, 40_000, density=0.01, format="csr", random_state=0)
    rows.data = rows.data * 5 - 1  # negative and positive stored values: both extremes have entries
    sparse = block_range(rows)
    dense = block_range(rng.normal(size=(50, 20_000)))
    small = block_range(rng.normal(size=(50, 8)))
    assert spill.write_range((0, 1), 0, small) is None  # 8 columns: held in memory
    for first, chunk_range in ((100, sparse), (200, dense)):
        kept = spill.write_range((0, 1), first, chunk_range)
        assert isinstance(kept, SpilledRange) and len(pickle.dumps(kept)) < 300
        low, high, n_rows = pickle.loads(pickle.dumps(kept)).read()
        assert n_rows == chunk_range[2]
        for got, expected in ((low, chunk_range[0]), (high, chunk_range[1])):
            assert sp.issparse(got) == sp.issparse(expected)
            if sp.issparse(expected):
                assert got.shape == expected.shape and (got != expected).nnz == 0
            else:
                assert np.array_equal(got, expected)
    assert SPILLED_RANGE_BYTES > small[0].nbytes + small[1].nbytes
    spill.forget((0, 1))
    assert not any(path.suffix == ".npz" for path in (tmp_path / "runs").rglob("*"))


def test_a_sparse_store_job_with_ranges_on_disk_equals_the_job_with_them_in_memory(tmp_path, monkeypatch):
    """The chunks' reads keep their sparse ranges on disk, the prepare tasks read them back: the same scalers,
    records and models as with the ranges held in memory."""
    import scipy.sparse as sp

    from dimbsvm.datasets import make_text_like
    from dimbsvm.jobs.threshold_runs import SpilledRange

    X, y = make_text_like(3_000, n_features=20_000, random_state=0)
    store = tmp_path / "text.zarr"
    ingest((sp.csr_matrix(X), y), store, chunk_rows=500)
    job = validate_job({"name": "ranges", "data": {"source": str(store)}, "preprocessing": {"scaler": "maxabs"},
                        "estimator": {"name": "ensemble_othr", "params": {
                            "estimator": "linear_svc", "n_estimators": 3, "bootstrap": "balanced",
                            "max_samples": 200, "random_state": 3}},
                        "cv": {"n_splits": 3, "n_repeats": 1, "random_state": 4}, "metrics": ["g_mean", "auc"]})
    written = _recorded(monkeypatch, "write_range")
    monkeypatch.setattr("dimbsvm.jobs.threshold_runs.SPILLED_RANGE_BYTES", 0)  # every chunk's, however small
    on_disk = run_job(job, None, out=tmp_path / "on-disk", progress=False, data=load_job_data(str(store)))
    assert len(written) == 4 * 6 and all(isinstance(kept, SpilledRange) for _, kept in written)
    monkeypatch.setattr(ThresholdRunDirectory, "write_range", lambda self, key, first, chunk_range: None)
    in_memory = run_job(job, None, out=tmp_path / "in-memory", progress=False, data=load_job_data(str(store)))
    assert _without_times(on_disk.folds) == _without_times(in_memory.folds)
    a, b = (load_model(result.run_dir / "model").estimator for result in (on_disk, in_memory))
    assert a[0].max_abs_.tobytes() == b[0].max_abs_.tobytes()
    for first, second in zip(a[-1].estimators_, b[-1].estimators_, strict=True):
        assert first.coef_.tobytes() == second.coef_.tobytes()
    assert not any(path.suffix == ".npz" for path in (tmp_path / "on-disk").rglob("range-*"))
