"""dimbsvm's folds against a brute-force reading of their definition, and the properties a CV split must have.

The reference below walks the rows one at a time with Python integers: each
class's rows by rank, cut into blocks, each row keyed by SplitMix64 of its
rank, the block's rows dealt to the folds in key order from a fold hashed
from the block's number. The library computes the same with numpy, a class
and a run of rows at a time.
"""

import warnings

import numpy as np
import pytest
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.svm import LinearSVC

from dimbsvm.model_selection.bodies import fold_rows
from dimbsvm.model_selection.splits import (FOLD_BLOCK, StratifiedBlockKFold, chunk_class_counts, chunk_fold_counts,
                                            fold_indices, fold_of_rows, folds_of_codes, repeat_splits)

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def _mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def _draw(seed, n_splits, klass, salt, counter):
    stream = _mix((_mix((_mix(seed & MASK) + n_splits) & MASK) + 2 * klass + salt) & MASK)
    return _mix((stream + (counter + 1) * GOLDEN) & MASK)


def _reference(y, n_splits, seed):
    """The definition, row by row."""
    classes = sorted(set(np.asarray(y).tolist()))
    block = n_splits * -(-FOLD_BLOCK // n_splits)
    folds = [None] * len(y)
    for k, value in enumerate(classes):
        rows = [i for i, label in enumerate(np.asarray(y).tolist()) if label == value]
        for b in range(0, len(rows), block):
            members = rows[b:b + block]
            ranked = sorted(range(len(members)), key=lambda j: (_draw(seed, n_splits, k, 0, b + j), j))
            first = _draw(seed, n_splits, k, 1, b // block) % n_splits
            for rank, j in enumerate(ranked):
                folds[members[j]] = (rank + first) % n_splits
    return np.array(folds)


def _random_labels(rng, n_max=2500):
    n = int(rng.integers(12, n_max))
    n_classes = int(rng.integers(2, 9))
    codes = rng.choice(n_classes, size=n, p=rng.dirichlet(np.full(n_classes, 1.5)))
    values = rng.permutation(40)[:n_classes] - 8  # negative values too
    return values[codes]


def _quiet(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # classes smaller than the folds: warned, still split
        return function(*args, **kwargs)


def test_the_folds_are_their_definition_row_by_row():
    rng = np.random.default_rng(0)
    for _ in range(12):
        y = _random_labels(rng)
        n_splits, seed = int(rng.integers(2, 8)), int(rng.integers(0, 2**40))
        np.testing.assert_array_equal(_quiet(fold_of_rows, y, n_splits=n_splits, seed=seed),
                                      _reference(y, n_splits, seed))
    y = (rng.random(5 * FOLD_BLOCK + 77) < 0.7).astype(np.int64)  # several whole blocks and a partial one
    np.testing.assert_array_equal(fold_of_rows(y, n_splits=3, seed=9), _reference(y, 3, 9))


def test_a_large_class_computed_a_slice_of_blocks_at_a_time_gives_the_same_folds(monkeypatch):
    from dimbsvm.model_selection import splits

    y = (np.random.default_rng(5).random(7 * FOLD_BLOCK + 300) < 0.8).astype(np.int64)
    monkeypatch.setattr(splits, "RANKS_AT_ONCE", 1)  # one block of a class at a time
    np.testing.assert_array_equal(fold_of_rows(y, n_splits=4, seed=2), _reference(y, 4, 2))


@pytest.mark.parametrize("n_splits", [2, 3, 5, 10])
def test_each_class_is_spread_over_the_folds_within_one_row(n_splits):
    rng = np.random.default_rng(n_splits)
    for n in (n_splits, 13, 997, 3 * FOLD_BLOCK + 5, 20_011):
        y = (rng.random(n) < 0.1).astype(np.int32)
        y[rng.choice(n, min(n, n_splits), replace=False)] = 1
        for seed in (0, 1, 123456):
            folds = _quiet(fold_of_rows, y, n_splits=n_splits, seed=seed)
            for value in np.unique(y):
                per_fold = np.bincount(folds[y == value], minlength=n_splits)
                assert per_fold.max() - per_fold.min() <= 1, (n, seed, per_fold)


def test_the_folds_do_not_depend_on_how_the_rows_are_chunked():
    rng = np.random.default_rng(3)
    y = rng.choice(4, size=40_000, p=[0.6, 0.3, 0.07, 0.03])
    classes, totals = np.unique(y, return_counts=True)
    whole = fold_of_rows(y, n_splits=5, seed=17)
    for _ in range(5):
        cuts = np.sort(rng.choice(np.arange(1, y.size), size=int(rng.integers(1, 60)), replace=False))
        parts, seen = [], np.zeros(classes.size, dtype=np.int64)
        for chunk in np.split(y, cuts):
            parts.append(folds_of_codes(chunk, seen, totals, n_splits=5, seed=17))
            seen += np.bincount(chunk, minlength=classes.size)
        np.testing.assert_array_equal(np.concatenate(parts), whole)
    for block_rows in (1000, 4096, 39_999):  # the counts per chunk are those of the rows
        counted_classes, counts = chunk_fold_counts(y, n_splits=5, seed=17, block_rows=block_rows)
        for c in range(counts.shape[0]):
            rows = slice(c * block_rows, (c + 1) * block_rows)
            for f in range(5):
                expected = np.bincount(y[rows][whole[rows] == f], minlength=classes.size)
                np.testing.assert_array_equal(counts[c, f], expected)
        np.testing.assert_array_equal(chunk_class_counts(y, block_rows=block_rows)[1], counts.sum(axis=1))


def test_a_row_lands_in_each_fold_about_as_often_over_seeds():
    """The first row of a class of 10 over 5 folds: each fold a fifth of 4,000 seeds; two rows share one 1/9."""
    y = np.zeros(10, dtype=int)
    folds = np.array([fold_of_rows(y, n_splits=5, seed=s) for s in range(4000)])
    share = np.bincount(folds[:, 0], minlength=5) / 4000
    assert np.all(np.abs(share - 0.2) < 0.03), share  # 0.03 is about 4.7 standard errors
    together = np.mean(folds[:, 0] == folds[:, 1])
    assert abs(together - 1 / 9) < 0.025, together


def test_seeds_and_label_values_change_the_folds_as_they_should():
    y = np.random.default_rng(1).integers(0, 2, 600)
    assert not np.array_equal(fold_of_rows(y, n_splits=5, seed=0), fold_of_rows(y, n_splits=5, seed=1))
    # the folds follow the classes' order, not their values: any increasing relabelling keeps them
    np.testing.assert_array_equal(fold_of_rows(y, n_splits=5, seed=4), fold_of_rows(y * 7 - 3, n_splits=5, seed=4))
    names = np.array(["neg", "pos"])[y]
    np.testing.assert_array_equal(fold_of_rows(y, n_splits=5, seed=4), fold_of_rows(names, n_splits=5, seed=4))
    np.testing.assert_array_equal(fold_of_rows(y, n_splits=5, seed=4),
                                  fold_of_rows(y.astype(float), n_splits=5, seed=4))


def test_scikit_learn_errors_and_warnings():
    def messages(y, n_splits):
        outcome = []
        for split in (lambda: list(StratifiedKFold(n_splits, shuffle=True, random_state=0).split(y, y)),
                      lambda: repeat_splits(y, n_splits=n_splits, seed=0)):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    split()
                    error = None
                except ValueError as exc:
                    error = str(exc)
            outcome.append((error, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]))
        return outcome

    for y, n_splits in [(np.array([0] * 10 + [1] * 2), 3), (np.array([0, 0, 1, 1, 2]), 3), (np.array([0, 1]), 3)]:
        ours, theirs = messages(y, n_splits)
        assert ours == theirs
    with pytest.raises(ValueError, match="at least one train/test split"):
        repeat_splits(np.array([0, 1] * 6), n_splits=1, seed=0)
    with pytest.raises(ValueError, match="must be of Integral type"):
        repeat_splits(np.array([0, 1] * 6), n_splits=2.5, seed=0)
    with pytest.raises(ValueError, match="Input y contains NaN"):
        repeat_splits(np.array([0.0, 1.0, np.nan, 1.0, 0.0, 1.0]), n_splits=2, seed=0)
    with pytest.raises(ValueError, match="Supported target types"):
        repeat_splits(np.linspace(0, 1, 20), n_splits=2, seed=0)


def test_random_state_objects_give_one_integer_seed():
    y = np.random.default_rng(0).integers(0, 2, 300)
    first = repeat_splits(y, n_splits=4, seed=np.random.RandomState(4))
    again = repeat_splits(y, n_splits=4, seed=np.random.RandomState(4))
    for (a, b), (c, d) in zip(first, again):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)


def test_one_fold_the_rows_task_and_the_splitter_match_the_whole_split():
    rng = np.random.default_rng(8)
    y = (rng.random(5000) < 0.2).astype(np.int64)
    expected = repeat_splits(y, n_splits=5, seed=11)
    by_splitter = list(StratifiedBlockKFold(5, random_state=11).split(np.zeros((5000, 1)), y))
    for fold in range(5):
        train, test = fold_indices(y, n_splits=5, seed=11, fold=fold)
        rows = fold_rows(y, n_splits=5, seed=11, fold=fold)
        for got in ((train, test), (rows.train, rows.test), by_splitter[fold]):
            np.testing.assert_array_equal(got[0], expected[fold][0])
            np.testing.assert_array_equal(got[1], expected[fold][1])
        np.testing.assert_array_equal(np.sort(np.concatenate([train, test])), np.arange(5000))
    with pytest.raises(ValueError, match="fold 5 does not exist"):
        fold_indices(y, n_splits=5, seed=11, fold=5)


def test_scikit_learn_takes_the_splitter():
    rng = np.random.default_rng(2)
    X, y = rng.normal(size=(300, 4)), (rng.random(300) < 0.3).astype(int)
    X[y == 1] += 1.0
    cv = StratifiedBlockKFold(3, random_state=5)
    assert cv.get_n_splits() == 3 and repr(cv) == "StratifiedBlockKFold(n_splits=3, random_state=5)"
    got = cross_val_score(LinearSVC(), X, y, cv=cv, scoring="balanced_accuracy")
    by_hand = []
    for train, test in repeat_splits(y, n_splits=3, seed=5):
        from sklearn.metrics import balanced_accuracy_score

        by_hand.append(balanced_accuracy_score(y[test], LinearSVC().fit(X[train], y[train]).predict(X[test])))
    np.testing.assert_allclose(got, by_hand)
