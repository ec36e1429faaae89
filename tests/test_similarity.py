"""Similarity (Fisher) kernel features, distances and kernel blocks (issue 5)."""

import doctest
import importlib
import math

import dask.array as da
import numpy as np
import pytest
import zarr
from scipy.spatial.distance import cityblock, cosine, euclidean, hamming, jensenshannon
from sklearn.kernel_approximation import Nystroem
from sklearn.metrics.pairwise import laplacian_kernel, linear_kernel, rbf_kernel
from sklearn.utils.estimator_checks import parametrize_with_checks

from dimbsvm.exceptions import DataError, StoreError
from dimbsvm.features import (
    SimilarityFeatures,
    distance_moments,
    kernel_block,
    nystroem_features,
    open_distance_blocks,
    pairwise_distances_to,
    similarity_features,
    write_distance_blocks,
    write_kernel_blocks,
    write_nystroem_features,
)
from dimbsvm.features.moments import block_moments, combine_moments, merge_moments
from dimbsvm.features.references import stratified_counts
from dimbsvm.store import ingest

# ---------------------------------------------------------------------------------------------
# tiny data


def _table(n=60, seed=0):
    """Three numeric columns and a one-hot nominal attribute with three levels."""
    rng = np.random.default_rng(seed)
    return np.hstack([rng.normal(size=(n, 3)), np.eye(3)[rng.integers(0, 3, n)]])


def _series(n=24, channels=3, length=16, seed=0, ragged=True):
    """Random walks; with ``ragged`` the first rows are shorter and NaN-padded like load_ts."""
    rng = np.random.default_rng(seed)
    X = np.cumsum(rng.normal(size=(n, channels, length)), axis=2)
    if ragged:
        X[:3, :, length - 4:] = np.nan
    return X


def _dtw_by_hand(a, b):
    """Textbook DTW: squared point cost, min over three predecessors, root at the end.

    ``a`` and ``b`` are (length,) or (length, channels); the independent truth
    the library is checked against.
    """
    a = np.asarray(a, dtype=float).reshape(len(a), -1)
    b = np.asarray(b, dtype=float).reshape(len(b), -1)
    acc = np.full((len(a) + 1, len(b) + 1), np.inf)
    acc[0, 0] = 0.0
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = float(((a[i - 1] - b[j - 1]) ** 2).sum())
            acc[i, j] = cost + min(acc[i - 1, j - 1], acc[i - 1, j], acc[i, j - 1])
    return math.sqrt(acc[-1, -1])


# ---------------------------------------------------------------------------------------------
# eq. (10)


def test_phi_equals_eq10_computed_with_loops():
    X = _table(40)[:, :3]
    X_test = _table(7, seed=1)[:, :3]
    sim = SimilarityFeatures(references=6, random_state=3).fit(X)
    S = sim.references_
    np.testing.assert_array_equal(S, X[sim.reference_indices_])

    expected = np.empty((len(X_test), len(S)))
    for i, s in enumerate(S):
        d_train = [euclidean(x, s) for x in X]
        mu = sum(d_train) / len(d_train)
        sigma = math.sqrt(sum((mu - d) ** 2 for d in d_train) / len(d_train))  # eq. (10) denominator
        for r, x in enumerate(X_test):
            expected[r, i] = (mu - euclidean(x, s)) / sigma
    np.testing.assert_allclose(sim.transform(X_test), expected, rtol=1e-12, atol=1e-12)


def test_fit_transform_equals_fit_then_transform():
    X = _table(50)
    sim = SimilarityFeatures(references=0.2, distances=["euclidean", "cosine"], random_state=0)
    np.testing.assert_allclose(sim.fit_transform(X), sim.transform(X), rtol=0, atol=1e-12)


def test_per_modality_blocks_are_single_modality_features():
    X = _table(60)
    spec = [{"metric": "euclidean", "columns": [0, 1, 2]},
            {"metric": "hamming", "columns": [3, 4, 5]},
            "manhattan"]
    multi = SimilarityFeatures(references=8, distances=spec, random_state=5).fit(X)
    F = multi.transform(X)
    assert F.shape == (60, 24)
    assert multi.mu_.shape == multi.sigma_.shape == (3, 8)
    assert [m["name"] for m in multi.modalities_] == ["euclidean[0:3]", "hamming[3:6]", "manhattan"]
    parts = [X[:, :3], X[:, 3:], X]
    for k, (metric, part) in enumerate(zip(["euclidean", "hamming", "manhattan"], parts)):
        single = SimilarityFeatures(references=8, distances=metric, random_state=5).fit(part)
        np.testing.assert_array_equal(single.reference_indices_, multi.reference_indices_)
        np.testing.assert_allclose(F[:, 8 * k:8 * (k + 1)], single.transform(part), atol=1e-12)
    names = multi.get_feature_names_out()
    assert len(names) == 24 and names[8] == "hamming[3:6]_s0"


def test_series_channel_modalities_and_multivariate_dtw():
    X = _series()
    per_channel = SimilarityFeatures(references=1.0, random_state=0,
                                     distances=[{"metric": "dtw", "channel": c} for c in range(3)])
    F = per_channel.fit_transform(X)
    assert F.shape == (24, 72)
    np.testing.assert_array_equal(per_channel.reference_indices_, np.arange(24))
    for c in range(3):
        single = SimilarityFeatures(references=1.0, distances="dtw").fit(X[:, c, :])
        np.testing.assert_allclose(F[:, 24 * c:24 * (c + 1)], single.transform(X[:, c, :]), atol=1e-10)
    multi = SimilarityFeatures(references=5, distances="dtw", random_state=0).fit(X)
    D = pairwise_distances_to(X[:4], multi.references_, "dtw")
    for r in range(4):
        for i, idx in enumerate(multi.reference_indices_):
            a, b = X[r], X[idx]
            a, b = a[:, ~np.isnan(a[0])], b[:, ~np.isnan(b[0])]
            assert D[r, i] == pytest.approx(_dtw_by_hand(a.T, b.T), rel=1e-12)


# ---------------------------------------------------------------------------------------------
# distances


def test_dtw_against_a_hand_computed_case():
    a, b = [0.0, 2.0, 1.0], [1.0, 2.0, 0.0, 1.0]
    # Accumulated squared costs by hand (rows a, columns b):
    #   1 5 5 6 / 2 1 5 6 / 2 2 2 2  -> DTW = sqrt(2)
    assert _dtw_by_hand(a, b) == pytest.approx(math.sqrt(2))
    D = pairwise_distances_to(np.array([a]), np.array([b]), "dtw")
    assert D[0, 0] == pytest.approx(math.sqrt(2), rel=1e-12)
    # NaN right-padding (as load_ts pads) means "shorter series", not a value.
    padded = np.array([[0.0, 2.0, 1.0, np.nan]])
    assert pairwise_distances_to(padded, np.array([b]), "dtw")[0, 0] == pytest.approx(math.sqrt(2))
    # Two channels, one warping path: costs add over channels (dependent DTW).
    a2 = np.array([[[0.0, 2.0, 1.0], [1.0, 1.0, 0.0]]])
    b2 = np.array([[[1.0, 2.0, 0.0, 1.0], [1.0, 0.0, 0.0, 2.0]]])
    got = pairwise_distances_to(a2, b2, "dtw")[0, 0]
    assert got == pytest.approx(_dtw_by_hand(a2[0].T, b2[0].T), rel=1e-12)


def test_dtw_window_and_parallel_agree_with_reference_loop():
    X = _series(10, channels=1, length=12, ragged=False)[:, 0]
    D = pairwise_distances_to(X, X[:3], "dtw", parallel=False)
    for r in range(10):
        for i in range(3):
            assert D[r, i] == pytest.approx(_dtw_by_hand(X[r], X[i]), rel=1e-12)
    np.testing.assert_allclose(pairwise_distances_to(X, X[:3], "dtw", parallel=True), D)
    banded = pairwise_distances_to(X, X[:3], "dtw", window=1)
    assert (banded >= D - 1e-12).all()  # a narrower band can only cost more


def test_jensenshannon_matches_scipy():
    rng = np.random.default_rng(0)
    P, Q = rng.random((6, 5)) * 3, rng.random((4, 5))
    P[0, 1] = 0.0
    D = pairwise_distances_to(P, Q, "jensenshannon")
    D2 = pairwise_distances_to(P, Q, "jensenshannon", base=2)
    for r in range(6):
        for i in range(4):
            assert D[r, i] == pytest.approx(jensenshannon(P[r], Q[i]), abs=1e-12)
            assert D2[r, i] == pytest.approx(jensenshannon(P[r], Q[i], base=2), abs=1e-12)


@pytest.mark.parametrize("metric, reference", [("euclidean", euclidean), ("manhattan", cityblock),
                                               ("cosine", cosine), ("hamming", hamming)])
def test_tabular_metrics_match_scipy(metric, reference):
    X = _table(8)
    D = pairwise_distances_to(X, X[:3], metric)
    for r in range(8):
        for i in range(3):
            assert D[r, i] == pytest.approx(reference(X[r], X[i]), abs=1e-12)


def test_euclidean_keeps_precision_for_near_points_far_from_the_origin():
    x = np.full((1, 32), 1000.0)
    s = x + 1e-6
    assert pairwise_distances_to(x, s)[0, 0] == pytest.approx(np.sqrt(32) * 1e-6, rel=1e-6)
    assert pairwise_distances_to(x, x)[0, 0] == 0.0


# ---------------------------------------------------------------------------------------------
# errors


def test_zero_spread_names_reference_and_modality():
    X = _table(30)
    X[:, 2] = 7.0  # a constant column: every row is at distance 0 of every reference
    sim = SimilarityFeatures(references=4, random_state=0,
                             distances=["euclidean", {"metric": "euclidean", "columns": [2]}])
    with pytest.raises(DataError, match=r"reference 0 \(training row \d+\) has sigma = 0 for "
                                        r"modality 1 \('euclidean\[2:3\]'"):
        sim.fit(X)


def test_jensenshannon_rejects_negative_values_and_empty_rows():
    with pytest.raises(DataError, match="non-negative.*row 1 of X"):
        pairwise_distances_to(np.array([[1.0, 2.0], [1.0, -0.5]]), np.ones((1, 2)), "jensenshannon")
    with pytest.raises(DataError, match="positive sum.*row 0 of S"):
        pairwise_distances_to(np.ones((1, 2)), np.zeros((1, 2)), "jensenshannon")
    with pytest.raises(DataError, match="non-negative"):
        SimilarityFeatures(references=2, distances="jensenshannon").fit(_table(10))


def test_unequal_length_series_need_dtw():
    X = _series()
    with pytest.raises(DataError, match="equal length.*'dtw'"):
        SimilarityFeatures(references=3, distances="euclidean").fit(X)
    with pytest.raises(DataError, match="equal length"):
        pairwise_distances_to(X[:, 0], X[:2, 0], "manhattan")
    holed = X.copy()
    holed[5, 1, 3] = np.nan
    with pytest.raises(DataError, match="series 5 .*missing value before its end"):
        pairwise_distances_to(holed, X[:2], "dtw")
    ragged = X.copy()
    ragged[6, 0, -2:] = np.nan
    with pytest.raises(DataError, match="series 6 has channels of different lengths"):
        pairwise_distances_to(ragged, X[:2], "dtw")


def test_more_references_than_training_rows_uses_all_rows():
    X = _table(20)
    with pytest.warns(UserWarning, match="asks for 50 reference rows but the training data has only 20; using all 20"):
        clipped = SimilarityFeatures(references=50, random_state=0).fit(X)
    every = SimilarityFeatures(references=1.0, random_state=0).fit(X)  # the fraction 1.0: every row, no warning
    assert sorted(clipped.reference_indices_) == list(range(20))
    np.testing.assert_allclose(np.sort(clipped.transform(X), axis=1), np.sort(every.transform(X), axis=1))


def test_transform_rejects_other_shapes():
    sim = SimilarityFeatures(references=3, random_state=0).fit(_table(20))
    with pytest.raises(ValueError, match="X has 5 features, but SimilarityFeatures is expecting 6"):
        sim.transform(_table(20)[:, :5])
    series = SimilarityFeatures(references=3, distances="dtw", random_state=0).fit(_series())
    with pytest.raises(DataError, match=r"rows of shape \(3, 10\).*fitted on rows of shape \(3, 16\)"):
        series.transform(_series()[:, :, :10])
    with pytest.raises(DataError, match="rows of shape"):
        series.transform(_series(channels=2))
    with pytest.raises(DataError, match="rows of shape"):
        series.transform(da.from_array(_series(length=12)))


@pytest.mark.parametrize("spec, X, message", [
    ({"metric": "dtw", "channel": 0}, _table(10), "channels need 3-D series"),
    ({"metric": "euclidean", "columns": [9]}, _table(10), "column 9 is out of range"),
    ({"metric": "euclidean", "columns": [0, 1]}, _series(), "use 'channel' or 'channels'"),
    ({"metric": "soft-dtw"}, _table(10), "unknown metric 'soft-dtw'"),
    ({"metric": "dtw", "lag": 3}, _series(), "unknown key"),
    ({"metric": "euclidean", "window": 3}, _table(10), "'window' applies to 'dtw' only"),
])
def test_bad_modalities(spec, X, message):
    with pytest.raises(DataError, match=message):
        SimilarityFeatures(references=2, distances=[spec]).fit(X)


def test_selection_errors():
    X = _table(20)
    with pytest.raises(DataError, match="needs the class labels y"):
        SimilarityFeatures(references=4, reference_selection="stratified").fit(X)
    with pytest.raises(DataError, match="at least one reference per class"):
        SimilarityFeatures(references=1, reference_selection="stratified").fit(X, np.arange(20) % 2)
    with pytest.raises(DataError, match="'hamming'"):
        SimilarityFeatures(references=3, reference_selection="kmeans",
                           distances=[{"metric": "hamming", "columns": [3, 4, 5]}]).fit(X)
    with pytest.raises(DataError, match="explicit references must be rows shaped like"):
        SimilarityFeatures(references=np.zeros((2, 4))).fit(X)
    with pytest.raises(ValueError, match="'reference_selection' parameter"):
        SimilarityFeatures(reference_selection="farthest").fit(X)


# ---------------------------------------------------------------------------------------------
# reference selection


def test_reference_choices():
    X = _table(100)
    y = (np.arange(100) < 10).astype(int)
    strat = SimilarityFeatures(references=20, reference_selection="stratified", random_state=0)
    strat.fit(X, y)
    assert np.bincount(y[strat.reference_indices_]).tolist() == [18, 2]
    assert stratified_counts([0, 1, 2], [990, 9, 1], 10) == {0: 8, 1: 1, 2: 1}
    every = SimilarityFeatures(references=1.0).fit(X)
    np.testing.assert_array_equal(every.reference_indices_, np.arange(100))
    centres = SimilarityFeatures(references=4, reference_selection="kmeans", random_state=0,
                                 distances=[{"metric": "euclidean", "columns": [0, 1, 2]}]).fit(X)
    assert centres.reference_indices_ is None and centres.references_.shape == (4, 6)
    explicit = SimilarityFeatures(references=X[:3] + 0.5).fit(X)
    np.testing.assert_array_equal(explicit.references_, X[:3] + 0.5)
    a = SimilarityFeatures(references=5, random_state=1).fit(X).reference_indices_
    b = SimilarityFeatures(references=5, random_state=1).fit(X).reference_indices_
    np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------------
# chunked moments and Dask input


@pytest.mark.parametrize("chunk", [7, 33, 250])
@pytest.mark.parametrize("selection", ["random", "stratified"])
def test_dask_fit_equals_in_memory_fit(chunk, selection):
    X = _table(250)
    y = (np.arange(250) % 9 == 0).astype(int)
    params = dict(references=12, reference_selection=selection, random_state=4,
                  distances=["euclidean", {"metric": "hamming", "columns": [3, 4, 5]}])
    memory = SimilarityFeatures(**params).fit(X, y)
    lazy = SimilarityFeatures(**params).fit(da.from_array(X, chunks=(chunk, 6)),
                                            da.from_array(y, chunks=chunk))
    np.testing.assert_array_equal(lazy.reference_indices_, memory.reference_indices_)
    np.testing.assert_allclose(lazy.mu_, memory.mu_, rtol=1e-13)
    np.testing.assert_allclose(lazy.sigma_, memory.sigma_, rtol=1e-12)
    phi = lazy.transform(da.from_array(X, chunks=(chunk, 6)))
    assert isinstance(phi, da.Array) and phi.chunks[0] == da.from_array(X, chunks=chunk).chunks[0]
    np.testing.assert_allclose(phi.compute(), memory.transform(X), atol=1e-11)


@pytest.mark.parametrize("chunk", [5, 11])
def test_dask_fit_of_ragged_series(chunk):
    X = _series()
    spec = [{"metric": "dtw", "channel": 0}, "dtw"]
    memory = SimilarityFeatures(references=6, distances=spec, random_state=0).fit(X)
    lazy = SimilarityFeatures(references=6, distances=spec, random_state=0).fit(
        da.from_array(X, chunks=(chunk, 3, 16)))
    np.testing.assert_allclose(lazy.mu_, memory.mu_, rtol=1e-12)
    np.testing.assert_allclose(lazy.sigma_, memory.sigma_, rtol=1e-12)


def test_dask_kmeans_uses_one_pass_of_minibatch_kmeans():
    X = _table(300)[:, :3]
    sim = SimilarityFeatures(references=5, reference_selection="kmeans", random_state=0)
    sim.fit(da.from_array(X, chunks=40))
    assert sim.references_.shape == (5, 3) and sim.reference_indices_ is None
    assert np.isfinite(sim.transform(X)).all()


def test_moments_merge_is_stable_and_masked():
    rng = np.random.default_rng(0)
    D = 1e8 + rng.normal(size=(1000, 3))  # large mean, unit spread
    exact_sigma = (D - 1e8).std(axis=0)  # the subtraction is exact here (Sterbenz)
    parts = [block_moments(D[i:i + 97]) for i in range(0, 1000, 97)]
    count, mean, m2 = merge_moments(parts)
    assert count[0] == 1000
    np.testing.assert_allclose(mean, D.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(np.sqrt(m2 / count), exact_sigma, rtol=1e-7)
    # What the merge avoids: sum and sum of squares cancel catastrophically at this offset.
    naive = np.sqrt(np.abs((D**2).mean(axis=0) - D.mean(axis=0) ** 2))
    assert np.abs(naive - exact_sigma).max() > 1e-3
    mask = rng.random(1000) < 0.3
    mu, sigma = distance_moments(da.from_array(D, chunks=(128, 3)), mask=mask)
    np.testing.assert_allclose(mu, D[mask].mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(sigma, (D[mask] - 1e8).std(axis=0), rtol=1e-7)
    empty = block_moments(D[:0])
    np.testing.assert_array_equal(combine_moments(empty, parts[0]), parts[0])


# ---------------------------------------------------------------------------------------------
# the store


@pytest.fixture
def stored(tmp_path):
    X = _table(130)
    y = (np.arange(130) % 5 == 0).astype(int)
    path = tmp_path / "s.zarr"
    ingest((X, y), path, chunk_rows=32)
    return path, X, y  # the store keeps the array's float64


def test_stored_distance_blocks_equal_in_memory(stored, monkeypatch):
    path, X, _ = stored
    spec = ["euclidean", {"metric": "hamming", "columns": [3, 4, 5]}]
    sim = SimilarityFeatures(references=9, distances=spec, random_state=2).fit(X)
    blocks = write_distance_blocks(path, sim.references_, spec, name="t")
    assert blocks.distances.chunks[0] == (32, 32, 32, 32, 2)
    group = zarr.open_group(str(path / "similarity" / "t"), mode="r")
    assert group["distances"].chunks == (32, 18)  # one Zarr chunk per task
    from dimbsvm.features.modalities import modality_distances
    np.testing.assert_array_equal(blocks.distances.compute(),
                                  modality_distances(X, sim.references_, sim.modalities_))
    np.testing.assert_allclose(blocks.mu, sim.mu_, rtol=1e-13)
    np.testing.assert_allclose(blocks.sigma, sim.sigma_, rtol=1e-12)
    np.testing.assert_allclose(similarity_features(blocks, sim.mu_, sim.sigma_).compute(),
                               sim.transform(X), atol=1e-12)

    # A finished stage with the same inputs is reused, not recomputed.
    def refuse(*args, **kwargs):
        raise AssertionError("recomputed a finished stage")

    monkeypatch.setattr("dimbsvm.features.distance_blocks.modality_distances", refuse)
    again = write_distance_blocks(path, sim.references_, spec, name="t")
    assert again.fingerprint == blocks.fingerprint


def test_unfinished_stage_is_not_opened(stored):
    path, X, _ = stored
    write_distance_blocks(path, X[:2], "euclidean", name="u")
    group = zarr.open_group(str(path / "similarity" / "u"), mode="r+")
    meta = dict(group.attrs["dimbsvm"])
    group.attrs["dimbsvm"] = dict(meta, complete=False)  # as if the writer died before the marker
    with pytest.raises(StoreError, match="incomplete"):
        open_distance_blocks(path, "u")
    with pytest.raises(StoreError, match="store is required"):
        write_distance_blocks(da.from_array(X), X[:2], "euclidean")


def test_distance_blocks_on_a_distributed_client(stored, client, tmp_path):
    path, X, y = stored
    lazy_X = da.from_array(X, chunks=(40, 6))
    blocks = write_distance_blocks(lazy_X, X[:5], "manhattan", store=path, name="c", client=client)
    np.testing.assert_array_equal(blocks.distances.compute(), pairwise_distances_to(X, X[:5], "manhattan"))
    sim = SimilarityFeatures(references=5, reference_selection="stratified", random_state=0)
    sim.fit(lazy_X, da.from_array(y, chunks=40))  # picks up the current client
    memory = SimilarityFeatures(references=5, reference_selection="stratified", random_state=0).fit(X, y)
    np.testing.assert_allclose(sim.sigma_, memory.sigma_, rtol=1e-12)


@pytest.mark.parametrize("selection", ["stratified", "kmeans"])
def test_the_given_client_is_resolved_once_and_runs_every_pass(client, selection, monkeypatch):
    import dimbsvm.features.distance_blocks as blocks_module
    import dimbsvm.features.similarity as similarity_module

    X = _table(n=160, seed=4)
    y = (X[:, 0] > 0.5).astype(int)
    resolved, seen = [], []
    resolve, compute, blocks_compute = (similarity_module.current_client, similarity_module.compute,
                                        blocks_module.compute)

    def counted(given):
        resolved.append(given)
        return resolve(given)

    def recording(target):
        def record(*collections, client=None):
            seen.append(client)
            return target(*collections, client=client)
        return record

    monkeypatch.setattr(similarity_module, "current_client", counted)
    monkeypatch.setattr(similarity_module, "compute", recording(compute))
    monkeypatch.setattr(blocks_module, "compute", recording(blocks_compute))
    sim = SimilarityFeatures(references=5, reference_selection=selection, random_state=0, client=client)
    sim.fit(da.from_array(X, chunks=(40, X.shape[1])), da.from_array(y, chunks=40))
    assert resolved == [client]
    assert seen and all(c is client for c in seen)
    memory = SimilarityFeatures(references=5, reference_selection=selection, random_state=0).fit(X, y)
    if selection == "stratified":  # k-means takes other steps on chunks than on the whole table
        np.testing.assert_allclose(sim.sigma_, memory.sigma_, rtol=1e-12)


def test_client_is_dropped_by_pickle_and_shared_by_clone():
    import pickle
    import threading

    from sklearn.base import clone

    unpicklable = threading.Lock()  # stands for a client: sockets and an event loop
    sim = SimilarityFeatures(references=3, client=unpicklable)
    assert clone(sim).client is unpicklable
    assert pickle.loads(pickle.dumps(sim)).client is None
    assert pickle.loads(pickle.dumps(sim)).get_params()["references"] == 3


# ---------------------------------------------------------------------------------------------
# kernel blocks and Nystroem


@pytest.mark.parametrize("kernel, reference", [("rbf", rbf_kernel), ("laplacian", laplacian_kernel),
                                               ("linear", linear_kernel)])
def test_kernel_block_matches_sklearn(kernel, reference):
    X = _table(20)
    expected = reference(X, X[:4]) if kernel == "linear" else reference(X, X[:4], gamma=0.3)
    np.testing.assert_allclose(kernel_block(X, X[:4], kernel, gamma=0.3), expected, atol=1e-12)


def test_nystroem_from_stored_blocks_matches_sklearn(stored):
    path, X, _ = stored
    reference = Nystroem(kernel="rbf", gamma=0.2, n_components=12, random_state=0).fit(X)
    blocks = write_kernel_blocks(path, reference.components_, name="k", kernel="rbf", gamma=0.2)
    np.testing.assert_allclose(blocks.K.compute(), rbf_kernel(X, reference.components_, gamma=0.2),
                               atol=1e-12)
    features = nystroem_features(blocks)
    assert features.chunks[0] == blocks.K.chunks[0]
    np.testing.assert_allclose(features.compute(), reference.transform(X), atol=1e-8)
    stored_features = write_nystroem_features(blocks, path, name="k")
    np.testing.assert_allclose(stored_features.compute(), reference.transform(X), atol=1e-8)


# ---------------------------------------------------------------------------------------------
# scikit-learn conventions

@parametrize_with_checks(
    [SimilarityFeatures(references=0.5, random_state=0),
     SimilarityFeatures(references=3, distances=["euclidean", "manhattan"], random_state=0),
     SimilarityFeatures(random_state=0)],  # the default references=100: more than the checks' rows, clipped
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("module", ["distances", "modalities", "moments", "references", "kernels",
                                    "distance_blocks", "kernel_blocks", "similarity"])
def test_docstring_examples(module):
    # pytest's testpaths is tests/, so run the library's doctests from here too.
    mod = importlib.import_module(f"dimbsvm.features.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


def test_float32_distance_blocks(stored):
    path, X, _ = stored
    blocks = write_distance_blocks(path, X[:6], "euclidean", name="f32", dtype="float32")
    assert blocks.distances.dtype == np.float32
    exact = pairwise_distances_to(X, X[:6])
    np.testing.assert_allclose(blocks.distances.compute(), exact, rtol=1e-6)
    np.testing.assert_allclose(blocks.mu.ravel(), exact.mean(axis=0), rtol=1e-13)  # from float64
    np.testing.assert_allclose(blocks.sigma.ravel(), exact.std(axis=0), rtol=1e-12)


def test_reference_moments_merge_slabs_within_a_chunk(monkeypatch):
    from dimbsvm.features import reference_moments
    from dimbsvm.features.modalities import parse_modalities

    monkeypatch.setattr("dimbsvm.features.distance_blocks._SLAB_ROWS", 10)  # several slabs per chunk
    X = _table(95)
    modalities = parse_modalities(["euclidean", "cosine"], (6,))
    mu, sigma = reference_moments(da.from_array(X, chunks=(40, 6)), X[:4], modalities)
    D = np.hstack([pairwise_distances_to(X, X[:4]), pairwise_distances_to(X, X[:4], "cosine")])
    np.testing.assert_allclose(mu, D.mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(sigma, D.std(axis=0), rtol=1e-12)
