"""EnSVM-OTHR members and their bags (dimbsvm.svm.members, dimbsvm.svm.bagging)."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from dimbsvm.svm import (
    EnsembleOTHRClassifier,
)
from dimbsvm.svm.ensemble import draw_bag
from svm_cases import imbalanced as _imbalanced


def test_default_member_searches_no_neighbours(monkeypatch):
    # threshold="pooled_oob" (the default) hands members margins="none": no neighbour search
    # anywhere in a member; the shared midpoint search needs none either.
    from dimbsvm.graph import knn

    def refuse(self, X):
        raise AssertionError("a neighbour index was built")

    monkeypatch.setattr(knn.KNNIndex, "fit", refuse)
    monkeypatch.setattr(knn, "NearestNeighbors", None)
    X, y = _imbalanced(3, n_samples=200)
    ensemble = EnsembleOTHRClassifier(LogisticRegression(), n_estimators=4, random_state=0).fit(X, y)
    assert {member.margins for member in ensemble.members_} == {"pooled_oob"}


def test_paper_member_searches_its_own_bag_only(monkeypatch):
    from dimbsvm.graph import knn
    from dimbsvm.svm.members import fit_member

    fits = []
    fit = knn.KNNIndex.fit

    def recorded(self, X):
        fits.append(np.asarray(X).copy())
        return fit(self, X)

    monkeypatch.setattr(knn.KNNIndex, "fit", recorded)
    X, y = _imbalanced(4, n_samples=600, weight=0.9)
    rows = np.arange(100, 600)  # e.g. a fold's training rows
    member = fit_member(X, y, 11, pos_label=1, rows=rows, estimator=LogisticRegression(),
                        bootstrap="balanced", max_samples=60, margins="train", candidates="othr",
                        keep_oob=False)
    assert member.margins == "train" and len(fits) <= 2
    # what was indexed are the bag's majority rows: 30 rows drawn from rows, none from outside
    bag_rows = {tuple(r) for r in X[rows][y[rows] == 0]}
    for indexed in fits:
        assert indexed.shape[0] == 30
        assert {tuple(r) for r in indexed} <= bag_rows




def test_bag_sizes():
    positive = np.array([True] * 10 + [False] * 90)
    rng = np.random.RandomState(0)
    bag, _ = draw_bag(positive, rng, bootstrap="stratified")
    assert bag.size == 100 and positive[bag].sum() == 10
    bag, _ = draw_bag(positive, rng, bootstrap="balanced")
    assert bag.size == 20 and positive[bag].sum() == 10
    assert np.unique(bag[~positive[bag]]).size == 10  # majority drawn without replacement
    bag, _ = draw_bag(positive, rng, bootstrap="plain", max_samples=0.5)
    assert bag.size == 50
    bag, _ = draw_bag(positive, rng, bootstrap="balanced", max_samples=8)
    assert bag.size == 8 and positive[bag].sum() == 4


@pytest.mark.parametrize("bootstrap, max_samples", [("plain", None), ("stratified", 0.5), ("balanced", 30)])
def test_a_bag_drawn_ahead_gives_the_member_it_draws_itself(bootstrap, max_samples):
    # The fold engine draws each member's bag in a task of its own and hands it to the member task;
    # the member must be the one that draws its own bag, perturbation (drawn after the bag) included.
    from dimbsvm.svm.bagging import draw_seeded_bag
    from dimbsvm.svm.members import fit_member

    X, y = _imbalanced(3)
    rows = np.arange(10, len(y))  # a fold's training rows
    options = dict(pos_label=1, rows=rows, bootstrap=bootstrap, max_samples=max_samples, perturbation=0.5,
                   keep_oob="bag")
    perturbed = []
    for seed in (3, 5, 7, 11):
        itself = fit_member(X, y, seed, **options)
        perturbed.append(itself.threshold != itself.optimal_threshold)
        drawn = draw_seeded_bag(y[rows] == 1, seed, bootstrap=bootstrap, max_samples=max_samples)
        ahead = fit_member(X, y, seed, **options, drawn=drawn)
        again = fit_member(X, y, seed, **options, drawn=drawn)  # the bag is not used up (a retried task)
        for member in (ahead, again):
            assert member.threshold == itself.threshold
            np.testing.assert_array_equal(member.in_bag, itself.in_bag)
            np.testing.assert_array_equal(member.estimator.support_vectors_, itself.estimator.support_vectors_)
    assert any(perturbed)  # the generator's state after the bag mattered
    with pytest.raises(ValueError, match="bag drawn for member 11"):
        fit_member(X, y, 3, **options, drawn=drawn)


def test_balanced_bags_of_smaller_data_are_drawn_as_before():
    # up to PERMUTED_POPULATION majority rows the majority is sampled by RandomState.choice (a
    # permutation), as before the rejection sampler: the same bags and the same generator state after
    positive = np.zeros(5000, dtype=bool)
    positive[::50] = True
    for seed in range(4):
        rng, legacy = np.random.RandomState(seed), np.random.RandomState(seed)
        bag, _ = draw_bag(positive, rng, bootstrap="balanced", max_samples=400)
        minority, majority = np.flatnonzero(positive), np.flatnonzero(~positive)
        expected = np.concatenate([minority[legacy.randint(0, minority.size, size=200)],
                                   legacy.choice(majority, size=200, replace=False)])
        np.testing.assert_array_equal(bag, expected)
        assert rng.uniform() == legacy.uniform()


def test_sampling_without_replacement_by_rejection_is_uniform():
    from scipy.stats import chisquare

    from dimbsvm._sampling import sample_without_replacement

    rng = np.random.RandomState(0)
    # the rejection path (permuted_up_to=0) on 6 rows, 2 drawn: each of the 30 ordered pairs has probability 1/30
    pairs = np.array([sample_without_replacement(6, 2, rng, permuted_up_to=0) for _ in range(30_000)])
    assert np.all(pairs[:, 0] != pairs[:, 1])
    observed = np.bincount(pairs[:, 0] * 6 + pairs[:, 1], minlength=36)
    assert np.all(observed[np.arange(6) * 7] == 0)  # (i, i) never
    assert chisquare(np.delete(observed, np.arange(6) * 7)).pvalue > 1e-3
    whole = sample_without_replacement(50, 50, rng, permuted_up_to=0)  # the whole population, every row once
    np.testing.assert_array_equal(np.sort(whole), np.arange(50))
    with pytest.raises(ValueError, match="cannot draw 7 distinct rows out of 6"):
        sample_without_replacement(6, 7, rng)


def test_a_balanced_bag_from_millions_of_majority_rows_holds_distinct_majority_rows():
    from dimbsvm.svm.bagging import PERMUTED_POPULATION

    positive = np.zeros(PERMUTED_POPULATION + 1000, dtype=bool)
    positive[::1000] = True
    bag, _ = draw_bag(positive, np.random.RandomState(0), bootstrap="balanced", max_samples=20_000)
    majority_rows = bag[~positive[bag]]
    assert bag.size == 20_000 and majority_rows.size == 10_000 and np.unique(majority_rows).size == 10_000


def test_bags_without_minority_are_redrawn():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(200, 3))
    y = np.zeros(200, dtype=int)
    y[:2] = 1
    X[:2] += 3
    ensemble = EnsembleOTHRClassifier(
        n_estimators=5, bootstrap="plain", max_samples=20, max_bag_draws=500, random_state=0
    ).fit(X, y)
    n_draws = [member.n_draws for member in ensemble.members_]
    assert max(n_draws) > 1
    for member in ensemble.members_:
        np.testing.assert_array_equal(member.estimator.classes_, [0, 1])


def test_redraws_exhausted():
    X, y = _imbalanced(0)
    with pytest.raises(ValueError, match="No bag of 1 rows .* held both classes in 3 attempts"):
        EnsembleOTHRClassifier(
            n_estimators=2, bootstrap="plain", max_samples=1, max_bag_draws=3
        ).fit(X, y)


@pytest.mark.parametrize("bootstrap", ["plain", "stratified", "balanced"])
@pytest.mark.parametrize("max_samples", [None, 0.3, 1.0, 7, 100, 999])
@pytest.mark.parametrize(("n", "n_minority"), [(1000, 50), (37, 5), (5000, 2400)])
def test_bag_rows_is_the_size_of_the_bag_drawn(bootstrap, max_samples, n, n_minority):
    from dimbsvm.svm.bagging import bag_rows

    positive = np.zeros(n, dtype=bool)
    positive[:n_minority] = True
    for seed in range(3):
        try:
            bag, _ = draw_bag(positive, np.random.RandomState(seed), bootstrap=bootstrap, max_samples=max_samples)
        except ValueError:  # a plain bag of 7 rows may miss the minority every time
            continue
        assert len(bag) == bag_rows(n, n_minority, bootstrap=bootstrap, max_samples=max_samples)


@pytest.mark.parametrize("bootstrap", ["stratified", "balanced"])
@pytest.mark.parametrize("max_samples", [None, 0.5, 30, 400])
@pytest.mark.parametrize("n, n_minority", [(200, 20), (60, 45), (3000, 7)])
def test_a_bag_of_class_ranks_maps_to_the_bag_drawn_over_the_labels(bootstrap, max_samples, n, n_minority):
    # a bag drawn from the class sizes alone, its ranks then mapped to rows (the minority's r-th row for
    # rank r, the majority's r-th for rank n_minority + r), is the bag drawn over the labels, and the
    # generator is left in the same state (the member's perturbation is drawn from it next)
    from dimbsvm.svm.bagging import RankRange, draw_seeded_bag

    positive = np.zeros(n, dtype=bool)
    positive[np.random.RandomState(n).choice(n, n_minority, replace=False)] = True
    minority, majority = np.flatnonzero(positive), np.flatnonzero(~positive)
    for seed in range(5):
        by_labels = draw_seeded_bag(positive, seed, bootstrap=bootstrap, max_samples=max_samples)
        by_ranks = draw_seeded_bag(None, seed, bootstrap=bootstrap, max_samples=max_samples,
                                   classes=(RankRange(0, n_minority), RankRange(n_minority, n - n_minority)))
        rows = np.concatenate([minority, majority])[by_ranks.bag]
        assert np.array_equal(rows, by_labels.bag) and by_ranks.n_rows == n
        assert by_ranks.generator().uniform() == by_labels.generator().uniform()


def test_a_plain_bag_needs_every_rows_class():
    from dimbsvm.svm.bagging import RankRange

    with pytest.raises(ValueError, match="plain bag needs every row's class"):
        draw_bag(None, np.random.RandomState(0), classes=(RankRange(0, 2), RankRange(2, 5)))
    with pytest.raises(IndexError, match="ranks outside"):
        RankRange(3, 4)[np.array([4])]
