"""Tests of dimbsvm.graph.knn: exact against brute force, pynndescent recall."""

import numpy as np
import pytest
import scipy.sparse as sp

from dimbsvm.graph.knn import nearest_neighbors


def _brute_force(X_index, X_query, k):
    distances = np.sqrt(((X_query[:, None, :] - X_index[None, :, :]) ** 2).sum(axis=2))
    order = np.argsort(distances, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(distances, order, axis=1)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("k", [1, 5, 40])
def test_exact_matches_brute_force(k, sparse):
    rng = np.random.RandomState(0)
    X_index, X_query = rng.normal(size=(40, 4)), rng.normal(size=(15, 4))
    expected_indices, expected_distances = _brute_force(X_index, X_query, k)
    if sparse:
        X_index, X_query = sp.csr_matrix(X_index), sp.csr_matrix(X_query)
    indices, distances = nearest_neighbors(X_index, X_query, k, method="exact")
    assert indices.shape == distances.shape == (15, k)
    assert indices.dtype == np.int64
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_allclose(distances, expected_distances, rtol=1e-10, atol=1e-12)


def test_auto_is_exact_for_small_index():
    rng = np.random.RandomState(1)
    X_index, X_query = rng.rand(50, 3), rng.rand(7, 3)
    auto = nearest_neighbors(X_index, X_query, 3)
    exact = nearest_neighbors(X_index, X_query, 3, method="exact")
    np.testing.assert_array_equal(auto[0], exact[0])


def test_empty_query():
    indices, distances = nearest_neighbors(np.zeros((3, 2)), np.zeros((0, 2)), 2)
    assert indices.shape == distances.shape == (0, 2)


@pytest.mark.parametrize("n_neighbors", [0, 6, 2.0, True])
def test_bad_n_neighbors(n_neighbors):
    with pytest.raises(ValueError, match=r"n_neighbors must be an integer in \[1, 5\]"):
        nearest_neighbors(np.zeros((5, 2)), np.zeros((1, 2)), n_neighbors)


def test_bad_method_and_features():
    with pytest.raises(ValueError, match="method must be one of"):
        nearest_neighbors(np.zeros((5, 2)), np.zeros((1, 2)), 1, method="annoy")
    with pytest.raises(ValueError, match="X_query has 3 features but X_index has 2"):
        nearest_neighbors(np.zeros((5, 2)), np.zeros((1, 3)), 1)


def test_pynndescent_recall():
    # The first NN-descent build compiles numba code: this test takes ~30 s once.
    rng = np.random.RandomState(0)
    X_index, X_query = rng.normal(size=(1500, 8)), rng.normal(size=(200, 8))
    k = 10
    approx, approx_distances = nearest_neighbors(
        X_index, X_query, k, method="pynndescent", random_state=0
    )
    exact, _ = nearest_neighbors(X_index, X_query, k, method="exact")
    assert approx.shape == (200, k)
    recall = np.mean([np.intersect1d(a, e).size / k for a, e in zip(approx, exact)])
    assert recall >= 0.9
    assert np.all(np.diff(approx_distances, axis=1) >= -1e-6)
    true = np.linalg.norm(X_query[:, None, :] - X_index[approx], axis=2)
    np.testing.assert_allclose(approx_distances, true, rtol=1e-4)
