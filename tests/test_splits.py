"""The fast stratified split against scikit-learn's ``StratifiedKFold(shuffle=True)``, the independent truth."""

import warnings

import numpy as np
import pytest
from sklearn.model_selection import StratifiedKFold

from dimbsvm.model_selection.bodies import fold_rows
from dimbsvm.model_selection.splits import fold_indices, repeat_splits, stratified_test_folds


def _sklearn(y, n_splits, seed):
    return list(StratifiedKFold(n_splits, shuffle=True, random_state=seed).split(np.zeros(len(y)), y))


def _outcome(split, y, n_splits, seed):
    """``(folds or error message, warning messages)`` of one split."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = split(y, n_splits, seed)
        except ValueError as exc:
            result = str(exc)
    return result, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def _assert_same(y, n_splits, seed):
    expected, expected_warnings = _outcome(_sklearn, y, n_splits, seed)
    got, got_warnings = _outcome(lambda y, k, s: repeat_splits(y, n_splits=k, seed=s), y, n_splits, seed)
    assert got_warnings == expected_warnings
    if isinstance(expected, str):
        assert got == expected
        return
    assert len(got) == len(expected) == n_splits
    for (train, test), (train_sk, test_sk) in zip(got, expected):
        assert train.dtype == train_sk.dtype and test.dtype == test_sk.dtype
        np.testing.assert_array_equal(train, train_sk)
        np.testing.assert_array_equal(test, test_sk)


def _random_labels(rng):
    n = int(rng.integers(2, 2500))
    n_classes = int(rng.integers(1, 12))
    weights = rng.dirichlet(np.full(n_classes, rng.uniform(0.1, 3.0)))  # some classes tiny or absent
    codes = rng.choice(n_classes, size=n, p=weights)
    values = rng.permutation(40)[:n_classes] - 8  # classes first appear in any order, negative values too
    return values[codes]


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int8, np.uint16, np.float64, np.float32])
def test_random_labels_split_as_scikit_learn(dtype):
    rng = np.random.default_rng(int(np.dtype(dtype).num))
    for _ in range(120):
        y = _random_labels(rng)
        if np.dtype(dtype).kind == "u":
            y = y - y.min()
        _assert_same(y.astype(dtype), int(rng.integers(2, 8)), int(rng.integers(0, 2**31 - 1)))


@pytest.mark.parametrize("n", [10, 11, 13, 997, 10_001])
@pytest.mark.parametrize("n_splits", [2, 3, 5, 10])
def test_binary_imbalanced_labels_any_length(n, n_splits):
    rng = np.random.default_rng(n * n_splits)
    y = (rng.random(n) < 0.1).astype(np.int32)
    y[rng.choice(n, n_splits, replace=False)] = 1  # enough minority rows for every fold
    assert stratified_test_folds(y, n_splits=n_splits, seed=0) is not None  # the fast path, not scikit-learn's
    for seed in (0, 1, 7, 123456):
        _assert_same(y, n_splits, seed)
        _assert_same(1 - y, n_splits, seed)  # the other class first


def test_many_classes_take_the_grouped_path():
    rng = np.random.default_rng(5)
    for n_classes in (5, 30, 300):
        y = rng.integers(0, n_classes, 5000) * 3 + 1000
        for seed in (0, 3):
            _assert_same(y, 5, seed)
    y = np.repeat(np.arange(70_000), 2)[rng.permutation(140_000)]  # codes past 16 bits
    _assert_same(y, 2, 0)


def test_labels_scikit_learn_handles_itself():
    """Strings, objects, fractional floats, lists, wide ranges: scikit-learn's own split, same folds."""
    rng = np.random.default_rng(2)
    codes = rng.integers(0, 3, 400)
    cases = [
        np.array(["b", "a", "c"])[codes],  # str
        np.array(["no", "yes", "maybe"], dtype=object)[codes],
        np.array([0.5, 1.25, -3.0])[codes],  # fractional floats
        list(np.array(["x", "y", "z"])[codes]),
        np.array([0, 10**9, -(10**9)])[codes],  # wider than the bincount range
        np.array([True, False, True])[codes],
        np.array([2.0**60, 1.0, 0.0])[codes],  # past float's exact integers
    ]
    for y in cases:
        assert stratified_test_folds(y, n_splits=3, seed=0) is None or np.asarray(y).dtype == bool
        for seed in (0, 9):
            _assert_same(y, 3, seed)


def test_scikit_learn_errors_and_warnings():
    y = np.array([0] * 10 + [1] * 2)
    _assert_same(y, 3, 0)  # warns: the least populated class has 2 members
    _assert_same(np.array([0, 0, 1, 1, 2]), 3, 0)  # every class smaller than n_splits: ValueError
    _assert_same(np.array([0, 1]), 3, 0)  # more folds than rows
    _assert_same(np.zeros(12, dtype=int), 3, 0)  # one class: scikit-learn splits it
    with pytest.raises(ValueError, match="at least one train/test split"):
        repeat_splits(y, n_splits=1, seed=0)
    with pytest.raises(ValueError, match="must be of Integral type"):
        repeat_splits(y, n_splits=2.5, seed=0)
    with pytest.raises(ValueError, match="Input y contains NaN"):
        repeat_splits(np.array([0.0, 1.0, np.nan, 1.0, 0.0, 1.0]), n_splits=2, seed=0)
    with pytest.raises(ValueError, match="Supported target types"):
        repeat_splits(np.linspace(0, 1, 20), n_splits=2, seed=0)


def test_random_state_objects_are_drawn_from_as_scikit_learn_does():
    y = np.random.default_rng(0).integers(0, 2, 300)
    ours, theirs = np.random.RandomState(4), np.random.RandomState(4)
    for _ in range(3):  # the same state advances the same way
        got = repeat_splits(y, n_splits=4, seed=ours)
        expected = _sklearn(y, 4, theirs)
        for (a, b), (c, d) in zip(got, expected):
            np.testing.assert_array_equal(a, c)
            np.testing.assert_array_equal(b, d)
    assert ours.randint(1 << 30) == theirs.randint(1 << 30)


def test_shuffle_draws_do_not_depend_on_the_dtype():
    """The fast path shuffles int8 fold numbers where scikit-learn shuffles int64: the same permutation."""
    for n in (1, 2, 17, 1000, 65_537):
        base = np.arange(n) % 7
        small, wide = base.astype(np.int8), base.astype(np.int64)
        np.random.RandomState(n).shuffle(small)
        np.random.RandomState(n).shuffle(wide)
        np.testing.assert_array_equal(small, wide)


def test_one_fold_and_the_rows_task_match_the_whole_split():
    rng = np.random.default_rng(8)
    y = (rng.random(5000) < 0.2).astype(np.int64)
    expected = _sklearn(y, 5, 11)
    for fold in range(5):
        train, test = fold_indices(y, n_splits=5, seed=11, fold=fold)
        np.testing.assert_array_equal(train, expected[fold][0])
        np.testing.assert_array_equal(test, expected[fold][1])
        rows = fold_rows(y, n_splits=5, seed=11, fold=fold)
        np.testing.assert_array_equal(rows.train, expected[fold][0])
        np.testing.assert_array_equal(rows.test, expected[fold][1])
    with pytest.raises(ValueError, match="fold 5 does not exist"):
        fold_indices(y, n_splits=5, seed=11, fold=5)
