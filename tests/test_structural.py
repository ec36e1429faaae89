"""Tests of StructuralFeatures ([x, lambda * n(x)]) and HIKEncoder (histogram intersection codes)."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import LinearSVC
from sklearn.utils.estimator_checks import parametrize_with_checks

from dimbsvm import HIKEncoder, OTHRClassifier, StructuralFeatures
from dimbsvm.estimators import make_feature
from dimbsvm.features.hik import histogram_intersection, quantize
from dimbsvm.metrics import g_mean

_ORDER = ("transform of the training matrix is its training representation (each row without itself); "
          "a reordered or partial copy is new rows, which list their identical training row")


@parametrize_with_checks(
    # k=3: the checks fit on as few as 10 rows, where the paper's k=10 is impossible
    [StructuralFeatures(n_neighbors=3), HIKEncoder()],
    expected_failed_checks=lambda est: {
        "check_methods_sample_order_invariance": _ORDER,
        "check_methods_subset_invariance": _ORDER,
    } if isinstance(est, StructuralFeatures) else {},
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _exact_neighbors(X_index, X_query, k, exclude_self=False):
    D = ((X_query[:, None, :] - X_index[None, :, :]) ** 2).sum(axis=2)
    if exclude_self:
        np.fill_diagonal(D, np.inf)
    return np.argsort(D, axis=1, kind="stable")[:, :k]


def _indicator(neighbors, n_columns):
    out = np.zeros((len(neighbors), n_columns))
    np.put_along_axis(out, neighbors, 1.0, axis=1)
    return out


# --- HIK ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("sparse", [False, True])
def test_hik_dot_products_equal_the_intersection_kernel(sparse):
    rng = np.random.RandomState(0)
    A, B = rng.rand(30, 5), rng.rand(20, 5)
    A[0], A[1, :2], B[3] = 0.0, 1.0, 0.995  # the ends of the range and a half-way rounding case
    A[rng.rand(*A.shape) < 0.3] = 0.0  # zeros, so the sparse path stores fewer entries
    encoder = HIKEncoder(levels=100).fit(A)
    UA = encoder.transform(sp.csr_matrix(A) if sparse else A)
    UB = encoder.transform(B)
    assert sp.isspmatrix_csr(UA) and UA.shape == (30, 500) and UB.shape == (20, 500)
    qa, qb = quantize(A, 100), quantize(B, 100)
    assert UA.nnz == qa.sum()
    np.testing.assert_array_equal((UA @ UB.T).toarray(), histogram_intersection(qa, qb))
    np.testing.assert_array_equal((UA @ UA.T).toarray(), histogram_intersection(qa, qa))


def test_hik_out_of_range_values_are_clipped_or_rejected():
    X = np.array([[-0.2, 0.5], [1.3, 0.5]])
    codes = HIKEncoder(levels=10).fit_transform(X).toarray()
    np.testing.assert_array_equal(codes.sum(axis=1), [0 + 5, 10 + 5])
    with pytest.raises(ValueError, match=r"value -0.2 at position \(0, 0\) is outside \[0, 1\]"):
        HIKEncoder(levels=10, clip=False).fit(X)
    encoder = HIKEncoder(levels=10, clip=False).fit(X[:, 1:] * 0 + 0.5)
    with pytest.raises(ValueError, match="outside"):
        encoder.transform(np.array([[1.5]]))
    with pytest.raises(ValueError, match="NaN"):
        HIKEncoder().fit_transform(np.array([[np.nan]]))


def test_hik_feature_count_mismatch():
    encoder = HIKEncoder().fit(np.random.rand(5, 3))
    with pytest.raises(ValueError, match="3 features"):
        encoder.transform(np.random.rand(2, 4))


# --- StructuralFeatures ------------------------------------------------------------------------

def test_training_rows_exclude_themselves_and_transform_matches_fit_transform():
    rng = np.random.RandomState(1)
    X = rng.normal(size=(40, 3))
    features = StructuralFeatures(n_neighbors=4, weight=2.0)
    A = features.fit_transform(X)
    assert sp.isspmatrix_csr(A) and A.shape == (40, 3 + 40) == (40, features.n_features_out_)
    np.testing.assert_allclose(A[:, :3].toarray(), X)
    N = A[:, 3:].toarray()
    expected = _indicator(_exact_neighbors(X, X, 4, exclude_self=True), 40) * 2.0
    np.testing.assert_array_equal(N, expected)
    assert np.all(np.diag(N) == 0)
    np.testing.assert_array_equal(features.transform(X).toarray(), A.toarray())


def test_new_rows_search_the_training_rows():
    rng = np.random.RandomState(2)
    X, new = rng.normal(size=(50, 4)), rng.normal(size=(7, 4))
    features = StructuralFeatures(n_neighbors=5).fit(X)
    N = features.transform(new)[:, 4:].toarray()
    np.testing.assert_array_equal(N, _indicator(_exact_neighbors(X, new, 5), 50))
    # a part of the training matrix is new rows: each row lists its identical training row
    part = features.transform(X[:10])[:, 4:].toarray()
    assert np.all(part[np.arange(10), np.arange(10)] == 1.0)


def test_sparse_input_and_output_shapes():
    X = sp.random(30, 6, density=0.4, format="csr", random_state=0)
    A = StructuralFeatures(n_neighbors=3).fit_transform(X)
    assert A.shape == (30, 36) and A.nnz == X.nnz + 30 * 3
    np.testing.assert_array_equal(A[:, :6].toarray(), X.toarray())


def test_normalizations():
    rng = np.random.RandomState(3)
    X = rng.normal(size=(60, 2))
    k = 4
    plain = StructuralFeatures(n_neighbors=k).fit_transform(X)[:, 2:].toarray()
    l2 = StructuralFeatures(n_neighbors=k, normalize="l2").fit_transform(X)[:, 2:].toarray()
    np.testing.assert_allclose(np.linalg.norm(l2, axis=1), 1.0)
    np.testing.assert_allclose(l2, plain / np.sqrt(k))
    degree = StructuralFeatures(n_neighbors=k, normalize="degree").fit(X)
    in_degree = plain.sum(axis=0)
    np.testing.assert_allclose(degree.column_scale_, np.sqrt(k / np.maximum(in_degree, 1)))
    np.testing.assert_allclose(degree.transform(X)[:, 2:].toarray(), plain * degree.column_scale_)


def test_hik_plus_structural_kernel_is_hik_plus_weighted_shared_neighbours():
    rng = np.random.RandomState(4)
    X = rng.rand(25, 3)
    features = StructuralFeatures(n_neighbors=3, weight=10.0, base="hik", levels=20)
    A = features.fit_transform(X)
    assert A.shape == (25, 3 * 20 + 25)
    q = quantize(X, 20)
    N = _indicator(features.train_neighbors_, 25)
    np.testing.assert_allclose((A @ A.T).toarray(), histogram_intersection(q, q) + 100.0 * (N @ N.T))


def test_fit_errors():
    X = np.random.RandomState(5).rand(5, 2)
    with pytest.raises(ValueError, match=r"n_neighbors=5 must be smaller than the number of training rows "
                                         r"\(n_samples = 5\)"):
        StructuralFeatures(n_neighbors=5).fit(X)
    with pytest.raises(ValueError, match="unknown metric 'nope'; pynndescent knows"):
        StructuralFeatures(n_neighbors=2, metric="nope").fit(X)
    features = StructuralFeatures(n_neighbors=2).fit(X)
    with pytest.raises(ValueError, match="2 features"):
        features.transform(np.zeros((1, 3)))
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        features.transform(bad)


def _imbalanced(n=300, seed=0):
    rng = np.random.RandomState(seed)
    y = (rng.rand(n) < 0.15).astype(int)
    X = rng.normal(size=(n, 4)) + 1.5 * y[:, None]
    return X, y


@pytest.mark.parametrize("classifier", [
    LinearSVC(class_weight="balanced"),
    OTHRClassifier(estimator=LinearSVC()),
])
def test_pipeline_composes_with_linear_svm_and_othr(classifier):
    X, y = _imbalanced()
    X_train, y_train, X_test, y_test = X[:200], y[:200], X[200:], y[200:]
    model = make_pipeline(MinMaxScaler(), StructuralFeatures(n_neighbors=5), classifier).fit(X_train, y_train)
    assert model[-1].n_features_in_ == 4 + 200
    y_pred = model.predict(X_test)
    assert y_pred.shape == (100,)
    assert g_mean(y_test, y_pred) > 0.5
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.predict(X_test), y_pred)


def test_registry_builds_structural_and_hik_stages():
    stage = make_feature("structural", {"base": "hik", "weight": 10.0, "n_neighbors": 5})
    assert isinstance(stage, StructuralFeatures) and stage.base == "hik" and stage.weight == 10.0
    assert make_feature("hik", {"levels": 50}).levels == 50
    from dimbsvm.exceptions import JobSpecError

    with pytest.raises(JobSpecError, match="normalize"):
        make_feature("structural", {"normalize": "max"})


def test_job_spec_accepts_structural_features_before_othr():
    from dimbsvm.jobs import validate_job

    job = validate_job({
        "data": {"source": "yeast5"},
        "features": [{"name": "structural", "params": {"n_neighbors": 10, "weight": 1.0, "method": "exact"}}],
        "estimator": {"name": "ensemble_othr"},
    })
    assert job.features[0].name == "structural"
