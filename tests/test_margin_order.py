"""A known sort order of the margins stands in for sorting them, and only the exact stable order is accepted.

The truth is numpy's own ``argsort(kind="stable")`` and the searches run
without an order.
"""

import numpy as np
import pytest

from dimbsvm.svm.margin_order import StableOrder, merged_stable_order, stable_order
from dimbsvm.svm.threshold import best_threshold, midpoint_candidates, othr_threshold


def _tied_margins(seed, n=3000):
    rng = np.random.RandomState(seed)
    return np.round(rng.normal(size=n), 2), rng.rand(n) < 0.1  # many equal margins


def test_only_the_stable_order_is_accepted():
    margins, _ = _tied_margins(0)
    order = np.argsort(margins, kind="stable")
    assert isinstance(stable_order(margins, order), StableOrder)
    tie = np.flatnonzero(margins[order][1:] == margins[order][:-1])[0]
    unstable = order.copy()
    unstable[[tie, tie + 1]] = unstable[[tie + 1, tie]]  # still sorted, ties not in row order
    repeated = order.copy()
    repeated[tie + 1] = repeated[tie]
    for wrong in (unstable, repeated, order[::-1], order[:-1], order + 1, order.astype(float), np.argsort(-margins)):
        with pytest.raises(ValueError, match="not the stable sort order"):
            stable_order(margins, wrong)
    with pytest.raises(ValueError, match="not the stable sort order"):
        stable_order(np.array([1.0, np.nan]), np.array([0, 1]))


def test_sorted_runs_merge_into_the_stable_order():
    margins, _ = _tied_margins(1)
    bounds = [0, 700, 701, 1500, 3000]
    runs = []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        local = np.argsort(margins[start:stop], kind="stable")
        runs.append((start + local, margins[start:stop][local]))
    np.testing.assert_array_equal(merged_stable_order(runs), np.argsort(margins, kind="stable"))
    with_nan = margins.copy()
    with_nan[[3, 900]] = np.nan  # rows no member scored sort last, in row order
    runs = [(start + np.argsort(with_nan[start:stop], kind="stable"),
             np.sort(with_nan[start:stop], kind="stable")) for start, stop in zip(bounds[:-1], bounds[1:])]
    np.testing.assert_array_equal(merged_stable_order(runs), np.argsort(with_nan, kind="stable"))


def _distinct_margins(seed, n=3000):
    rng = np.random.RandomState(seed)
    return rng.normal(size=n), rng.rand(n) < 0.1


def _signed_zero_margins(seed, n=3000):
    margins, positive = _tied_margins(seed, n)
    margins[::7] = 0.0
    margins[3::7] = -0.0  # equal to 0.0: one group whose value is its first row's
    return margins, positive


@pytest.mark.parametrize("make", [_tied_margins, _distinct_margins, _signed_zero_margins])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [None, "silverman"])
def test_a_search_given_the_order_equals_the_search_that_sorts(weighted, smoothing, make):
    margins, positive = make(2)
    weights = np.random.RandomState(3).rand(margins.size) if weighted else None
    order = np.argsort(margins, kind="stable")
    theta, table = othr_threshold(None, positive, margins, candidates="midpoints", smoothing=smoothing,
                                  sample_weight=weights, max_candidates=500)
    given, given_table = othr_threshold(None, positive, margins, candidates="midpoints", smoothing=smoothing,
                                        sample_weight=weights, max_candidates=500, order=order)
    assert given == theta
    assert table.keys() == given_table.keys()
    for column in table:
        np.testing.assert_array_equal(given_table[column], table[column], err_msg=column)
    candidates = midpoint_candidates(margins)
    for given_order in (order, stable_order(margins, order)):  # the order alone, or checked with its sorted margins
        for expected, actual in zip(candidates, midpoint_candidates(margins, given_order)):
            assert actual.tobytes() == expected.tobytes()  # (bytes: the sign of a zero counts)
    values, first = np.unique(margins, return_index=True)  # the truth of the distinct values and their first rows
    assert np.array_equal(candidates[0][1:], -(values[::-1][1:] + values[::-1][:-1]) / 2)
    _, plain = best_threshold(positive, margins, candidates[0], sample_weight=weights)
    _, ordered = best_threshold(positive, margins, candidates[0], sample_weight=weights, order=order)
    for column in plain:
        np.testing.assert_array_equal(ordered[column], plain[column], err_msg=column)


def test_a_wrong_order_stops_the_search():
    margins, positive = _tied_margins(4)
    with pytest.raises(ValueError, match="not the stable sort order"):
        othr_threshold(None, positive, margins, candidates="midpoints", order=np.argsort(margins)[::-1])


@pytest.mark.parametrize("unscored", [0, 40])
def test_the_shared_search_given_pooled_margins_and_their_order_equals_the_one_that_sorts(unscored):
    """Pooled margins with their merged order (every row scored, or some rows without a margin)."""
    from dimbsvm.svm.ensemble import EnsembleOTHRClassifier
    from dimbsvm.svm.shared_threshold import search_shared_shift

    margins, positive = _tied_margins(5)
    counts = np.full(margins.size, 3, dtype=np.int64)
    counts[np.random.RandomState(6).choice(margins.size, unscored, replace=False)] = 0
    margins = np.where(counts > 0, margins, np.nan)
    search = EnsembleOTHRClassifier()._threshold_search()
    plain = search_shared_shift(None, positive, [], search, pooled_margins=(margins, counts), max_candidates=300)
    given = search_shared_shift(None, positive, [], search, max_candidates=300,
                                pooled_margins=(margins, counts, np.argsort(margins, kind="stable")))
    assert given.theta == plain.theta and np.array_equal(given.rows, plain.rows)
    for column in plain.table:
        np.testing.assert_array_equal(given.table[column], plain.table[column], err_msg=column)


def test_weighted_counts_stay_within_their_totals():
    """A cut above every positive margin has TP = 0 exactly, not a rounding error below it (NaN G-mean before)."""
    margins, positive = _signed_zero_margins(2)
    weights = np.random.RandomState(3).rand(margins.size)
    candidates = midpoint_candidates(margins)[0]
    with np.errstate(invalid="raise"):
        _, table = best_threshold(positive, margins, candidates, sample_weight=weights)
    assert np.isfinite(table["g_mean"]).all()
    assert table["tpr"].min() == 0.0 and table["tpr"].max() <= 1.0 and table["tnr"].max() <= 1.0
    below_all = candidates < -margins[positive].max()  # every positive margin is at or below the cut
    assert below_all.any() and (table["tpr"][below_all] == 0.0).all() and (table["g_mean"][below_all] == 0.0).all()
