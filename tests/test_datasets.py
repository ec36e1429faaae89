"""Tests of dimbsvm.datasets: readers, the registry and the synthetic generator."""

from __future__ import annotations

import json
import logging
import time

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

from dimbsvm.datasets import (
    Dataset,
    bundled_names,
    list_available,
    load,
    load_agnostic,
    load_csv,
    load_keel,
    load_npz,
    load_svmlight,
    load_ts,
    make_imbalanced,
    shared_datasets_dir,
)
from dimbsvm.exceptions import DataError

BUNDLED = ["abalone19", "ecoli1", "glass6", "haberman", "new_thyroid1", "yeast5"]


@pytest.fixture(scope="module")
def shared():
    path = shared_datasets_dir()
    if path is None:
        pytest.skip("../shared/datasets not found: set DIMBSVM_SHARED_DATASETS to run")
    return path


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


KEEL_HEADER = (
    "@relation toy\n"
    "@attribute Sex {M, F, I}\n"
    "@attribute Length real [0.0, 1.0]\n"
    "@attribute Rings integer[1,29]\n"
    "@attribute Class  {positive, negative}\n"
)


# --- bundled KEEL data ---------------------------------------------------------------------


def test_bundled_names():
    assert bundled_names() == BUNDLED
    assert list_available()["bundled"] == BUNDLED


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_file_loads(name):
    ds = load_keel(name)
    assert isinstance(ds, Dataset)
    assert ds.X.dtype == np.float64 and ds.X.shape[1] == len(ds.feature_names)
    assert ds.class_map == {"negative": 0, "positive": 1}
    assert 0 < ds.y.sum() < len(ds.y) / 2
    assert ds.name == name
    json.dumps(ds.meta())


def test_yeast5():
    ds = load("yeast5")
    assert ds.X.shape == (1484, 8)
    assert int(ds.y.sum()) == 44
    assert ds.nominal_columns == []
    assert not np.isnan(ds.X).any()


def test_abalone19_one_hot_sex():
    ds = load_keel("abalone19")
    assert ds.X.shape == (4174, 10)
    assert ds.feature_names[:4] == ["Sex=M", "Sex=F", "Sex=I", "Length"]
    assert ds.nominal_columns == ["Sex"]
    np.testing.assert_array_equal(ds.X[:, :3].sum(axis=1), 1.0)
    assert ds.X[0, :3].tolist() == [1.0, 0.0, 0.0]  # first row is "M"
    assert int(ds.y.sum()) == 32


def test_load_keel_by_path_and_dat_suffix():
    by_name = load_keel("haberman")
    by_path = load(by_name.source)
    by_suffixed_name = load_keel("haberman.dat")
    np.testing.assert_array_equal(by_name.X, by_path.X)
    np.testing.assert_array_equal(by_name.y, by_suffixed_name.y)


# --- KEEL parsing on hand-written files -----------------------------------------------------


def test_keel_missing_values_and_one_hot(tmp_path):
    path = write(
        tmp_path,
        "toy.dat",
        KEEL_HEADER
        + "@data\nM, 0.5, 3, negative\n?, <null>, 4,positive\n I ,?, <null> , negative\n",
    )
    ds = load_keel(path)
    assert ds.feature_names == ["Sex=M", "Sex=F", "Sex=I", "Length", "Rings"]
    expected = [
        [1, 0, 0, 0.5, 3],
        [0, 0, 0, np.nan, 4],
        [0, 0, 1, np.nan, np.nan],
    ]
    np.testing.assert_array_equal(ds.X, expected)
    assert ds.y.tolist() == [0, 1, 0]


def test_keel_inputs_outputs_class_not_last(tmp_path):
    path = write(
        tmp_path,
        "io.dat",
        "@relation io\n"
        "@attribute Class {a, b, c}\n"
        "@attribute 'my x' real [0, 9]\n"
        "@attribute Unused real [0, 9]\n"
        "@attribute Z integer [0, 9]\n"
        "@inputs Z, 'my x'\n"
        "@outputs Class\n"
        "@data\n"
        "c, 1, 2, 3\n"
        "a, 4, 5, 6\n",
    )
    ds = load_keel(path)
    assert ds.feature_names == ["my x", "Z"]  # declaration order, Unused dropped
    np.testing.assert_array_equal(ds.X, [[1, 3], [4, 6]])
    assert ds.class_map == {"a": 0, "b": 1, "c": 2}  # > 2 classes: declared order
    assert ds.y.tolist() == [2, 0]


def test_keel_binary_minority_rule(tmp_path):
    rows = "1, yes\n2, no\n3, no\n"
    path = write(tmp_path, "b.dat", "@attribute x real\n@attribute C {no, yes}\n@data\n" + rows)
    ds = load_keel(path)
    assert ds.class_map == {"no": 0, "yes": 1}
    assert ds.y.tolist() == [1, 0, 0]
    # Tie: the second declared class is 1.
    tie = write(tmp_path, "t.dat", "@attribute x real\n@attribute C {u, v}\n@data\n1,v\n2,u\n")
    assert load_keel(tie).class_map == {"u": 0, "v": 1}


@pytest.mark.parametrize(
    "text, match",
    [
        (KEEL_HEADER.replace("real [0.0, 1.0]", "float"), r"line 3: cannot parse attribute"),
        (KEEL_HEADER, r"no @data line"),
        (KEEL_HEADER + "M, 0.5, 3, negative\n", r"line 6: expected a header line .* or @data"),
        (KEEL_HEADER + "@outputs Klass\n@data\nM,1,1,negative\n", r"line 6: @outputs.*'Klass'"),
        (KEEL_HEADER + "@data\nM,1,1,negative\nX, 1, 1, positive\n", r"line 8: column 'Sex'.*'X'"),
        (KEEL_HEADER + "@data\nM,1,1,negative\nM,1,negative\n", r"line 8: expected 4 .*got 3"),
        (KEEL_HEADER + "@data\nM,1,1,negative\nM,abc,1,positive\n", r"line 8: column 'Length'"),
        (KEEL_HEADER + "@data\nM,1,1,maybe\n", r"line 7: class column 'Class'.*'maybe'"),
        (KEEL_HEADER + "@data\n", r"no data rows"),
        ("just some text\n", r"line 1: expected a header line"),
        ("@data\n1,2\n", r"no @attribute lines"),
    ],
)
def test_keel_errors(tmp_path, text, match):
    path = write(tmp_path, "bad.dat", text)
    with pytest.raises(DataError, match=match) as info:
        load_keel(path)
    assert "bad.dat" in str(info.value)


def test_keel_missing_file_and_unknown_name(tmp_path):
    with pytest.raises(DataError, match=r"nope\.dat: file not found"):
        load_keel(tmp_path / "nope.dat")
    with pytest.raises(DataError, match=r"bundled datasets are \['abalone19'"):
        load_keel("no-such-dataset")


# --- shared KEEL, CSV, agnostic, time series -------------------------------------------------


def test_ecoli_positive_majority_warns(shared, caplog):
    with caplog.at_level(logging.WARNING):
        ds = load_keel("ecoli-0_vs_1")  # not bundled: found in the shared folder
    assert ds.class_map["positive"] == 1
    assert int(ds.y.sum()) == 143 and len(ds.y) == 220
    assert "not the minority" in caplog.text and "ecoli-0_vs_1" in caplog.text


def test_bundled_file_does_not_warn(caplog):
    with caplog.at_level(logging.WARNING):
        load_keel("yeast5")
    assert "not the minority" not in caplog.text


def test_shared_keel_nominal_inputs(shared):
    ds = load(shared / "keel" / "imbalanced" / "car-good.dat")
    assert ds.X.shape == (1728, 21)
    assert ds.nominal_columns[0] == "Buying"
    assert ds.feature_names[:4] == ["Buying=vhigh", "Buying=high", "Buying=med", "Buying=low"]
    assert int(ds.y.sum()) == 69


def test_csv_nominal_multiclass(shared):
    ds = load_csv(shared / "keel" / "multiclass" / "splice.csv")
    assert ds.X.shape[0] == 3190
    assert len(ds.nominal_columns) == 60
    assert "x0=A" in ds.feature_names
    assert ds.class_map == {"EI": 0, "IE": 1, "N": 2}
    np.testing.assert_array_equal(np.bincount(ds.y), [767, 768, 1655])


def test_csv_tic_tac_toe(shared, caplog):
    with caplog.at_level(logging.WARNING):
        ds = load(shared / "keel" / "multiclass" / "tic-tac-toe.csv")
    assert ds.X.shape == (958, 27)
    assert ds.feature_names[:3] == ["x0=b", "x0=o", "x0=x"]
    assert ds.class_map == {"negative": 0, "positive": 1}
    assert "not the minority" in caplog.text


def test_csv_numeric_labels_minority(shared):
    ds = load_csv(shared / "keel" / "multiclass" / "german.csv")
    assert ds.X.shape == (1000, 61)
    assert ds.class_map == {"1": 0, "2": 1}
    assert int(ds.y.sum()) == 300


@pytest.fixture(scope="module")
def sylva(shared):
    return load_agnostic(shared / "agnostic" / "sylva")


def test_agnostic_sylva(sylva):
    assert sylva.X.shape == (13086, 216)
    assert int(sylva.y.sum()) == 805
    assert sylva.class_map == {"-1": 0, "1": 1}
    assert sylva.name == "sylva"


def test_agnostic_ada_by_file_and_dispatch(shared):
    ds = load(shared / "agnostic" / "ada")
    assert ds.X.shape == (4147, 48)
    assert int(ds.y.sum()) == 1029
    by_file = load(shared / "agnostic" / "ada" / "ada_train.data")
    np.testing.assert_array_equal(ds.X, by_file.X)


def test_ts_gunpoint_univariate(shared):
    ds = load(shared / "ucr" / "GunPoint_TRAIN.ts")
    assert ds.X.shape == (50, 1, 150)
    assert ds.class_map == {"1": 0, "2": 1}
    assert not np.isnan(ds.X).any()


def test_ts_basic_motions_multivariate(shared):
    ds = load_ts(shared / "ucr" / "BasicMotions_TRAIN.ts")
    assert ds.X.shape == (40, 6, 100)
    assert list(ds.class_map) == ["Standing", "Running", "Walking", "Badminton"]
    np.testing.assert_array_equal(np.bincount(ds.y), [10, 10, 10, 10])
    assert ds.feature_names == [f"dim_{c}" for c in range(6)]


def test_ts_japanese_vowels_unequal_length(shared):
    ds = load_ts(shared / "ucr" / "JapaneseVowels_TRAIN.ts")
    assert ds.X.shape[:2] == (270, 12)
    assert ds.X.shape[2] == 26  # the longest training series
    lengths = (~np.isnan(ds.X[:, 0, :])).sum(axis=1)
    assert lengths.min() < 26
    # Padding is on the right only: each series is a NaN-free prefix.
    for case, n in zip(ds.X, lengths):
        assert not np.isnan(case[:, :n]).any() and np.isnan(case[:, n:]).all()


def test_list_available_shared(shared):
    shared_lists = list_available()["shared"]
    assert set(shared_lists) == {"keel/imbalanced", "keel/multiclass", "agnostic", "ucr"}
    assert "yeast5" in shared_lists["keel/imbalanced"]
    assert "sylva" in shared_lists["agnostic"]
    assert "GunPoint_TRAIN" in shared_lists["ucr"]


# --- round trips and small readers -----------------------------------------------------------


def test_svmlight_round_trip(tmp_path):
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    X[X < 0] = 0.0
    labels = np.where(np.arange(30) < 5, 1, -1)
    dump_svmlight_file(X, labels, str(tmp_path / "d.svm"))
    ds = load_svmlight(tmp_path / "d.svm")
    assert sp.isspmatrix_csr(ds.X) and ds.X.nnz == np.count_nonzero(X)  # kept sparse
    np.testing.assert_allclose(ds.X.toarray(), X)
    np.testing.assert_array_equal(load_svmlight(tmp_path / "d.svm", dense=True).X, ds.X.toarray())
    np.testing.assert_array_equal(ds.to_dense().X, ds.X.toarray())
    (tmp_path / "d.txt").write_bytes((tmp_path / "d.svm").read_bytes())
    assert (load(tmp_path / "d.txt").X != ds.X).nnz == 0  # .txt dispatches too
    assert ds.class_map == {"-1": 0, "1": 1}
    np.testing.assert_array_equal(ds.y, labels == 1)
    wide = load_svmlight(tmp_path / "d.svm", n_features=10)
    assert wide.X.shape == (30, 10) and (wide.X[:, :4] != ds.X).nnz == 0
    with pytest.raises(DataError, match="not a readable svmlight file"):
        load_svmlight(tmp_path / "d.svm", n_features=2)


def test_npz_round_trip(tmp_path):
    X = np.arange(12, dtype=float).reshape(4, 3)
    np.savez(tmp_path / "d.npz", X=X, y=np.array(["big", "big", "small", "big"]),
             feature_names=np.array(["a", "b", "c"]))
    ds = load(tmp_path / "d.npz")
    np.testing.assert_array_equal(ds.X, X)
    assert ds.feature_names == ["a", "b", "c"]
    assert ds.class_map == {"big": 0, "small": 1}
    assert ds.y.tolist() == [0, 0, 1, 0]


def test_npz_errors(tmp_path):
    np.savez(tmp_path / "nok.npz", X=np.eye(2))
    with pytest.raises(DataError, match=r"nok\.npz: missing array\(s\) \['y'\]"):
        load_npz(tmp_path / "nok.npz")
    np.savez(tmp_path / "len.npz", X=np.eye(2), y=np.array([1, 2, 3]))
    with pytest.raises(DataError, match=r"one label per row"):
        load_npz(tmp_path / "len.npz")


def test_csv_mostly_numeric_column_is_an_error_not_a_category(tmp_path):
    # 101 rows, one typo: silently one-hot encoding the column would turn 3 features into 101
    rows = "\n".join(f"{i},{'abc' if i == 40 else i * 0.5},{i % 2}" for i in range(101))
    path = write(tmp_path, "typo.csv", "a,b,class\n" + rows + "\n")
    with pytest.raises(DataError, match=r"column 'b' holds numbers except in 1 cell\(s\) \(line 42: 'abc'\)"):
        load_csv(path)
    # declared nominal, the same column is one-hot encoded on purpose
    ds = load_csv(path, nominal=["b"])
    assert ds.nominal_columns == ["b"] and ds.X.shape == (101, 1 + 101)
    # missing markers and non-numeric-throughout columns keep their meaning
    path = write(tmp_path, "ok.csv", "a,colour,class\n1,red,x\n?,blue,y\n,red,x\n")
    ds = load_csv(path)
    assert ds.feature_names == ["a", "colour=blue", "colour=red"]
    assert np.isnan(ds.X[1:, 0]).all()


def test_csv_target_and_multiclass_order(tmp_path):
    path = write(tmp_path, "t.csv", "label,x0\n10,1\n9,2\n10,3\n2,4\n")
    ds = load_csv(path, target="label")
    assert ds.feature_names == ["x0"]
    assert ds.class_map == {"2": 0, "9": 1, "10": 2}  # numeric sort, not text sort
    assert ds.y.tolist() == [2, 1, 2, 0]


@pytest.mark.parametrize("name", ["label", "Label", "TARGET", "class"])
def test_csv_label_named_column_is_the_target_not_the_last_column(tmp_path, name):
    """A column named as a label is the label wherever it stands; the last column is a feature (issue 50, item 2)."""
    path = write(tmp_path, "t.csv", f"x0,{name},x1\n1,yes,5\n2,no,6\n3,no,7\n")
    ds = load_csv(path)
    named = load_csv(path, target=name)  # the truth: the column named explicitly
    assert ds.feature_names == named.feature_names == ["x0", "x1"]
    assert ds.class_map == named.class_map == {"no": 0, "yes": 1}
    assert np.array_equal(ds.X, named.X) and np.array_equal(ds.y, named.y)
    # a model's features read without names: the same column dropped
    from dimbsvm.datasets import load_csv_features

    assert load_csv_features(path, n_features=2).tolist() == ds.X.tolist()


def test_csv_without_a_label_named_column_takes_the_last_and_two_label_names_are_refused(tmp_path):
    assert load_csv(write(tmp_path, "last.csv", "x0,y\n1,a\n2,b\n")).feature_names == ["x0"]
    with pytest.raises(DataError, match=r"columns \['label', 'Target'\] could each be the label"):
        load_csv(write(tmp_path, "two.csv", "label,x0,Target\n1,2,a\n2,3,b\n"))


@pytest.mark.parametrize(
    "text, kwargs, match",
    [
        ("a,b,class\n1,2,x\n1,2\n", {}, r"line 3: expected 3 values .*got 2"),
        ("", {}, r"empty file"),
        ("a,b,c\n1,2,x\n", {"target": "y"}, r"no target column 'y'"),
        ("a,class\n", {}, r"no data rows"),
        ("a,class\n1,x\n2,?\n", {}, r"line 3: missing label"),
        ("a,b,class\n1,2,x\n1.5,abc,y\n2,3,x\n", {},
         r"column 'b' holds numbers except in 1 cell\(s\) \(line 3: 'abc'\).*declare the column nominal"),
        ("a,class\n1,x\n2,y\n", {"nominal": ["z"]}, r"nominal column\(s\) \['z'\] are not in the header"),
    ],
)
def test_csv_errors(tmp_path, text, kwargs, match):
    path = write(tmp_path, "bad.csv", text)
    with pytest.raises(DataError, match=match):
        load_csv(path, **kwargs)


def test_agnostic_errors(tmp_path):
    write(tmp_path, "toy_train.data", "1 2\n3 4\n")
    write(tmp_path, "toy_train.labels", "1\n")
    with pytest.raises(DataError, match=r"2 data rows but toy_train\.labels has 1 labels"):
        load_agnostic(tmp_path)
    write(tmp_path, "toy_train.data", "1 2\n3\n")
    write(tmp_path, "toy_train.labels", "1\n-1\n")
    with pytest.raises(DataError, match=r"toy_train\.data, line 2: expected 2 values"):
        load_agnostic(tmp_path / "toy_train.data")


TS_HEADER = (
    "# comment\n@problemName toy\n@timeStamps false\n@univariate false\n@dimensions 2\n"
    "@equalLength true\n@seriesLength 2\n@classLabel true a b\n@data\n"
)


@pytest.mark.parametrize(
    "body, match",
    [
        ("1,2:3,4:c\n", r"line 10: class label 'c'"),
        ("1,2:a\n", r"line 10: expected 2 channel\(s\), got 1"),
        ("1,2:3,x:a\n", r"line 10, channel 1: 'x' is not a number"),
        ("1,2:3,4:a\n1,2,3:3,4,5:b\n", r"@seriesLength 2 but|@equalLength true"),
    ],
)
def test_ts_errors(tmp_path, body, match):
    path = write(tmp_path, "bad.ts", TS_HEADER + body)
    with pytest.raises(DataError, match=match):
        load_ts(path)


def test_ts_unsupported_headers(tmp_path):
    path = write(tmp_path, "stamps.ts", TS_HEADER.replace("@timeStamps false", "@timeStamps true"))
    with pytest.raises(DataError, match=r"line 3: @timeStamps true is not supported"):
        load_ts(path)
    path = write(tmp_path, "nolabel.ts", "@problemName x\n@classLabel false\n@data\n1,2\n")
    with pytest.raises(DataError, match=r"unlabelled data is not supported"):
        load_ts(path)


def test_ts_missing_values_are_nan(tmp_path):
    path = write(tmp_path, "m.ts", TS_HEADER + "1,?:3,4:b\n")
    ds = load_ts(path)
    np.testing.assert_array_equal(ds.X, [[[1, np.nan], [3, 4]]])


# --- dispatch and locating data ---------------------------------------------------------------


def test_load_unknown_extension_and_missing_files(tmp_path):
    path = write(tmp_path, "data.xlsx", "x")
    accepted = r"unknown file type '\.xlsx'; accepted suffixes are .*'\.csv'"
    with pytest.raises(DataError, match=accepted):
        load(path)
    with pytest.raises(DataError, match=r"missing\.csv: file not found"):
        load(tmp_path / "missing.csv")
    with pytest.raises(DataError, match=r"missing\.ts: file not found"):
        load(tmp_path / "missing.ts")
    with pytest.raises(DataError, match=r"without a \*_train\.data file"):
        load(tmp_path)


def test_shared_datasets_dir_env(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("DIMBSVM_SHARED_DATASETS", str(tmp_path))
    assert shared_datasets_dir() == tmp_path.resolve()
    assert list_available()["shared"] == {
        "keel/imbalanced": [], "keel/multiclass": [], "agnostic": [], "ucr": []
    }
    monkeypatch.setenv("DIMBSVM_SHARED_DATASETS", str(tmp_path / "absent"))
    with caplog.at_level(logging.WARNING):
        assert shared_datasets_dir() is None
    assert "not a directory" in caplog.text
    assert list_available()["shared"] == {}


# --- synthetic generator ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def synthetic_reference():
    X, y = make_imbalanced(12_345, n_features=6, minority_fraction=0.1, chunks=1000,
                           random_state=42)
    return X.compute(), y.compute()


@pytest.mark.parametrize("chunks", [777, 5000, 12_345])
def test_make_imbalanced_chunking_does_not_change_values(synthetic_reference, chunks):
    X, y = make_imbalanced(12_345, n_features=6, minority_fraction=0.1, chunks=chunks,
                           random_state=42)
    assert X.chunks[0][0] == chunks
    np.testing.assert_array_equal(X.compute(), synthetic_reference[0])
    np.testing.assert_array_equal(y.compute(), synthetic_reference[1])


def test_make_imbalanced_dtypes_and_fraction(synthetic_reference):
    X, y = synthetic_reference
    assert X.dtype == np.float32 and X.shape == (12_345, 6)
    assert y.dtype == np.int8 and set(np.unique(y)) == {0, 1}
    # Binomial(12345, 0.1): standard deviation ~33 rows.
    assert abs(int(y.sum()) - 1234.5) < 5 * 33


def test_make_imbalanced_prefix_and_seeds(synthetic_reference):
    X_small, y_small = make_imbalanced(5000, n_features=6, minority_fraction=0.1,
                                       chunks=999, random_state=42)
    np.testing.assert_array_equal(X_small.compute(), synthetic_reference[0][:5000])
    np.testing.assert_array_equal(y_small.compute(), synthetic_reference[1][:5000])
    X_other, _ = make_imbalanced(5000, n_features=6, minority_fraction=0.1, random_state=43)
    assert not np.array_equal(X_other.compute(), synthetic_reference[0][:5000])
    # random_state=None draws one seed: the same arrays compute to the same values.
    X_none, _ = make_imbalanced(100, random_state=None)
    np.testing.assert_array_equal(X_none.compute(), X_none.compute())


def test_make_imbalanced_is_lazy():
    start = time.perf_counter()
    X, y = make_imbalanced(10**9, chunks=10**5, random_state=0)  # 128 GB if materialised
    assert time.perf_counter() - start < 5
    assert isinstance(X, da.Array) and isinstance(y, da.Array)
    assert X.shape == (10**9, 32) and y.shape == (10**9,)
    # Only the chunks asked for are generated.
    assert X[:3].compute().shape == (3, 32)
    assert y[-2:].compute().shape == (2,)


def test_make_imbalanced_learnable_but_overlapping():
    from sklearn.svm import LinearSVC

    from dimbsvm.metrics import g_mean

    X, y = make_imbalanced(40_000, n_features=16, minority_fraction=0.05, random_state=7)
    X, y = X.compute(), y.compute()
    model = LinearSVC(class_weight="balanced").fit(X[:20_000], y[:20_000])
    score = g_mean(y[20_000:], model.predict(X[20_000:]))
    assert 0.7 < score < 0.95


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_samples": 0}, r"'n_samples' parameter .* \[1, inf\)\. Got 0"),
        ({"n_samples": 10, "minority_fraction": 1.0}, r"'minority_fraction'.*\(0, 1\)"),
        ({"n_samples": 10, "minority_fraction": 0}, r"'minority_fraction'"),
        ({"n_samples": 10, "chunks": 0}, r"'chunks' parameter"),
        ({"n_samples": 10, "n_features": 0}, r"'n_features' parameter"),
        ({"n_samples": 10, "random_state": -1}, r"'random_state' parameter"),
        ({"n_samples": 2.5}, r"'n_samples' parameter"),
    ],
)
def test_make_imbalanced_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_imbalanced(**kwargs)


def test_continuous_target_is_not_a_class_label(tmp_path):
    from dimbsvm.datasets import load_csv

    path = tmp_path / "regression.csv"
    path.write_text("x0,price\n" + "".join(f"{i},{i * 0.37:.2f}\n" for i in range(40)))
    with pytest.raises(DataError, match=r"target column 'price': the target is continuous \(40 distinct numbers, "
                                        r"39 of them not whole, e\.g\. 0\.37, 0\.74, 1\.11\), not a class label"):
        load_csv(path)
    whole = tmp_path / "whole.csv"  # whole numbers are class codes, as before
    whole.write_text("x0,class\n" + "".join(f"{i},{i % 3}.0\n" for i in range(12)))
    assert load_csv(whole).class_map == {"0": 0, "1": 1, "2": 2}


def test_csv_features_for_prediction_with_and_without_a_label(tmp_path):
    from dimbsvm.datasets import load_csv_features

    unlabelled = tmp_path / "new.csv"
    unlabelled.write_text("a,b,c\n1,2,3\n4,5,6\n")
    np.testing.assert_array_equal(load_csv_features(unlabelled, n_features=3), [[1, 2, 3], [4, 5, 6]])
    labelled = tmp_path / "labelled.csv"
    labelled.write_text("a,class,b,c\n1,x,2,3\n4,y,5,6\n")
    np.testing.assert_array_equal(load_csv_features(labelled, n_features=3), [[1, 2, 3], [4, 5, 6]])
    # by name, in the model's order, nominal indicators rebuilt, extra columns ignored
    named = tmp_path / "named.csv"
    named.write_text("colour,b,a,extra\nred,2,1,z\nblue,5,4,z\n")
    X = load_csv_features(named, n_features=4, feature_names=["a", "b", "colour=blue", "colour=red"])
    np.testing.assert_array_equal(X, [[1, 2, 0, 1], [4, 5, 1, 0]])
    with pytest.raises(DataError, match=r"has 2 columns; the model needs 3 feature columns"):
        load_csv_features(_two_columns(tmp_path), n_features=3)
    with pytest.raises(DataError, match=r"feature column\(s\) \['d'\] the model was trained on are not in the header"):
        load_csv_features(named, n_features=3, feature_names=["a", "b", "d"])


def _two_columns(tmp_path):
    path = tmp_path / "two.csv"
    path.write_text("a,b\n1,2\n")
    return path


@pytest.mark.parametrize("reader, text", [
    ("csv", "x0,x1,class\n1,2,n\u00e9gatif\n2,3,positif\n3,1,n\u00e9gatif\n"),
    ("keel", "@relation r\n@attribute x0 real [0.0, 9.0]\n@attribute class {n\u00e9gatif, positif}\n@inputs x0\n"
             "@outputs class\n@data\n1, n\u00e9gatif\n2, positif\n")])
def test_a_latin1_file_is_refused_in_one_line_not_decoded_with_replacement_characters(tmp_path, reader, text):
    """Issue 50, item 2: 'n\u00e9gatif' saved as latin-1 used to become 'n\ufffdgatif' in the class map, silently."""
    from dimbsvm.datasets import load

    suffix, line = {"csv": (".csv", 2), "keel": (".dat", 3)}[reader]
    path = tmp_path / f"data{suffix}"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(DataError, match=rf"data\{suffix}, line {line}: not UTF-8 text \(byte 0xe9 at column \d+\); "
                                        r"save it as UTF-8") as caught:
        load(path)
    assert "\n" not in str(caught.value)
    path.write_bytes(text.encode("utf-8"))  # the same text as UTF-8: read, names as written
    assert "n\u00e9gatif" in load(path).class_map
