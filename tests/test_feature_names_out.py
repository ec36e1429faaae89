"""get_feature_names_out and pandas output (set_output) of StructuralFeatures and HIKEncoder."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import LinearSVC
from sklearn.utils import estimator_checks

from dimbsvm import HIKEncoder, StructuralFeatures

_COLUMNS = ["age", "dose", "weight"]


def _data(n=40, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.rand(n, len(_COLUMNS))
    y = (X[:, 0] + 0.3 * rng.rand(n) > 0.9).astype(int)
    return X, y


_TRANSFORMERS = {
    "hik": lambda **kw: HIKEncoder(levels=4, **kw),
    "structural": lambda **kw: StructuralFeatures(n_neighbors=3, **kw),
    "structural-hik": lambda **kw: StructuralFeatures(n_neighbors=3, base="hik", levels=4, weight=2.0, **kw),
}


def _expected_names(kind, input_names, n_train):
    hik = [f"{name}_hik{j}" for name in input_names for j in range(1, 5)]
    neighbours = [f"structuralfeatures_neighbor{i}" for i in range(n_train)]
    return {"hik": hik, "structural": [*input_names, *neighbours], "structural-hik": [*hik, *neighbours]}[kind]


@pytest.mark.parametrize("kind", sorted(_TRANSFORMERS))
def test_names_count_and_order(kind):
    X, _ = _data()
    transformer = _TRANSFORMERS[kind]().fit(X)
    names = transformer.get_feature_names_out()
    assert isinstance(names, np.ndarray) and names.dtype == object
    assert len(names) == transformer.transform(X).shape[1] == transformer.transform(X[:5]).shape[1]
    assert names.tolist() == _expected_names(kind, ["x0", "x1", "x2"], len(X))
    if isinstance(transformer, StructuralFeatures):
        assert len(names) == transformer.n_features_out_
    # from a DataFrame: its column names, and the same names when given explicitly
    frame = pd.DataFrame(X, columns=_COLUMNS)
    fitted = _TRANSFORMERS[kind]().fit(frame)
    assert fitted.get_feature_names_out().tolist() == _expected_names(kind, _COLUMNS, len(X))
    assert fitted.get_feature_names_out(_COLUMNS).tolist() == fitted.get_feature_names_out().tolist()
    with pytest.raises(ValueError, match="input_features is not equal to feature_names_in_"):
        fitted.get_feature_names_out(["a", "b", "c"])
    with pytest.raises(ValueError, match="input_features should have length equal"):
        transformer.get_feature_names_out(["a", "b"])


def test_hik_names_say_which_level_each_column_codes():
    # column <feature>_hik<j> is 1 where round(v * levels) >= j
    encoder = HIKEncoder(levels=4, sparse_output=False).set_output(transform="pandas")
    out = encoder.fit_transform(pd.DataFrame({"v": [0.0, 0.3, 0.5, 1.0]}))
    levels = np.floor(np.array([0.0, 0.3, 0.5, 1.0]) * 4 + 0.5)
    for j in range(1, 5):
        np.testing.assert_array_equal(out[f"v_hik{j}"].to_numpy(), (levels >= j).astype(float))


def test_structural_neighbour_columns_name_the_training_rows():
    X = np.array([[0.0], [0.1], [0.2], [1.0], [1.1]])
    features = StructuralFeatures(n_neighbors=1, sparse_output=False).set_output(transform="pandas").fit(X)
    row = features.transform(np.array([[1.02]]))  # its nearest training row is row 3
    assert row.columns[(row.to_numpy()[0] != 0)].tolist() == ["x0", "structuralfeatures_neighbor3"]


@pytest.mark.parametrize("kind", sorted(_TRANSFORMERS))
def test_sparse_output_false_is_the_dense_default_output(kind):
    X, _ = _data()
    sparse = _TRANSFORMERS[kind]().fit(X)
    dense = _TRANSFORMERS[kind](sparse_output=False).fit(X)
    for rows in (X, X[:7]):
        expected = sparse.transform(rows)
        assert sp.issparse(expected)
        out = dense.transform(rows)
        assert isinstance(out, np.ndarray)
        np.testing.assert_array_equal(out, expected.toarray())
    np.testing.assert_array_equal(dense.fit_transform(X), sparse.fit_transform(X).toarray())


@pytest.mark.parametrize("kind", sorted(_TRANSFORMERS))
def test_set_output_pandas(kind):
    X, _ = _data()
    frame = pd.DataFrame(X, columns=_COLUMNS, index=[f"r{i}" for i in range(len(X))])
    plain = _TRANSFORMERS[kind](sparse_output=False).fit(frame)
    transformer = _TRANSFORMERS[kind](sparse_output=False).set_output(transform="pandas")
    out = transformer.fit_transform(frame)
    assert isinstance(out, pd.DataFrame)
    assert out.columns.tolist() == transformer.get_feature_names_out().tolist()
    assert out.index.tolist() == frame.index.tolist()
    np.testing.assert_array_equal(out.to_numpy(), plain.transform(frame))
    new_rows = transformer.transform(frame.iloc[:6])
    assert isinstance(new_rows, pd.DataFrame) and new_rows.columns.tolist() == out.columns.tolist()
    np.testing.assert_array_equal(new_rows.to_numpy(), plain.transform(frame.iloc[:6]))
    # from an ndarray: x0, x1, ... names
    out = _TRANSFORMERS[kind](sparse_output=False).set_output(transform="pandas").fit_transform(X)
    assert out.columns.tolist() == _expected_names(kind, ["x0", "x1", "x2"], len(X))


@pytest.mark.parametrize("kind", sorted(_TRANSFORMERS))
def test_sparse_output_refuses_pandas_output_with_sklearns_message(kind):
    X, _ = _data()
    with pytest.raises(ValueError, match="The transformer outputs a scipy sparse matrix"):
        _TRANSFORMERS[kind]().set_output(transform="pandas").fit_transform(X)


@pytest.mark.parametrize("kind", sorted(_TRANSFORMERS))
def test_in_a_pipeline_with_set_output(kind):
    X, y = _data()
    frame = pd.DataFrame(X * 10 - 3, columns=_COLUMNS)  # MinMaxScaler brings it back to [0, 1]
    def steps():
        return [("scale", MinMaxScaler()), ("features", _TRANSFORMERS[kind](sparse_output=False))]

    features = Pipeline(steps()).set_output(transform="pandas")
    out = features.fit_transform(frame)
    assert isinstance(out, pd.DataFrame)
    assert out.columns.tolist() == features.get_feature_names_out().tolist()
    assert out.columns.tolist() == _expected_names(kind, _COLUMNS, len(X))
    np.testing.assert_array_equal(out.to_numpy(), Pipeline(steps()).fit(frame).transform(frame))
    # and with a classifier after it: the SVM is fitted on the named columns
    model = Pipeline([*steps(), ("svm", LinearSVC(class_weight="balanced"))]).set_output(transform="pandas")
    model.fit(frame, y)
    assert model["svm"].feature_names_in_.tolist() == out.columns.tolist()
    reference = Pipeline([*steps(), ("svm", LinearSVC(class_weight="balanced"))]).fit(frame, y)
    np.testing.assert_array_equal(model.predict(frame.iloc[:10]), reference.predict(frame.iloc[:10]))


# the checks themselves fit on a DataFrame and transform an ndarray (and the reverse)
@pytest.mark.filterwarnings("ignore:X (does not have valid|has) feature names:UserWarning")
@pytest.mark.parametrize("sparse_output", [True, False])
@pytest.mark.parametrize("kind", sorted(_TRANSFORMERS))
@pytest.mark.parametrize("check", [
    # scikit-learn's checks of feature names and set_output (public functions of sklearn.utils.estimator_checks
    # that parametrize_with_checks does not yield)
    "check_get_feature_names_out_error",
    "check_transformer_get_feature_names_out",
    "check_transformer_get_feature_names_out_pandas",
    "check_set_output_transform",
    "check_set_output_transform_pandas",
    "check_global_output_transform_pandas",
])
def test_sklearn_feature_name_and_set_output_checks(check, kind, sparse_output):
    transformer = _TRANSFORMERS[kind](sparse_output=sparse_output)
    getattr(estimator_checks, check)(type(transformer).__name__, transformer)


@pytest.mark.parametrize("kind", sorted(_TRANSFORMERS))
def test_a_model_saved_before_sparse_output_existed_loads_with_sparse_output(kind, tmp_path):
    import skops.io as sio

    X, _ = _data()
    transformer = _TRANSFORMERS[kind]().fit(X)
    expected = transformer.transform(X[:5])
    del transformer.sparse_output  # as an earlier dimbsvm wrote it: the state has no such key
    sio.dump(transformer, tmp_path / "model.skops")
    loaded = sio.load(tmp_path / "model.skops", trusted=sio.get_untrusted_types(file=tmp_path / "model.skops"))
    assert loaded.sparse_output is True
    out = loaded.transform(X[:5])
    assert sp.issparse(out)
    np.testing.assert_array_equal(out.toarray(), expected.toarray())
    assert loaded.get_feature_names_out().tolist() == transformer.get_feature_names_out().tolist()
