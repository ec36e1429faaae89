"""The threshold search of sorted runs cut into value ranges equals the serial search, bit for bit.

The truth is :func:`~dimbsvm.svm.shared_threshold.search_shared_shift` on the
pooled margins with their stable order, as the fold engine's single assemble
task runs it; the ranges run here in order (the task wiring is tested in
``tests/test_range_threshold_tasks.py``).
"""

import numpy as np
import pytest

from dimbsvm.svm import range_threshold as R
from dimbsvm.svm import smoothing as S
from dimbsvm.svm.ensemble import EnsembleOTHRClassifier
from dimbsvm.svm.shared_threshold import search_shared_shift


def _runs(margins, counts, positive, n_chunks):
    bounds = np.linspace(0, margins.size, n_chunks + 1).round().astype(int)
    return [R.sorted_run(a, margins[a:b], counts[a:b], np.argsort(margins[a:b], kind="stable"), positive[a:b])
            for a, b in zip(bounds[:-1], bounds[1:])]


def ranged_search(runs, n_rows, positive, search, *, n_ranges, max_candidates):
    """Every step of the ranged search in order: ``(mode, theta, table)``."""
    plan = R.plan_ranges([R.run_digest(run) for run in runs], smoothing=search["smoothing"], n_ranges=n_ranges)
    blocks = [R.range_block(runs, plan, i) for i in range(n_ranges)]
    summaries = [R.range_summary(block, plan) for block in blocks]
    picks = [R.pick_ranks(block, summaries, plan, i, max_candidates=max_candidates) for i, block in enumerate(blocks)]
    if plan.gather:
        shift = search_shared_shift(None, positive, [], search, pooled_margins=R.whole_margins(picks, n_rows),
                                    max_candidates=max_candidates)
        return "gather", shift.theta, shift.table
    theta, table = R.searched_shift(summaries, picks, plan, objective=search["objective"],
                                    tolerance=search["tolerance"], min_precision=search["min_precision"],
                                    max_candidates=max_candidates)
    return "ranges", theta, table


def _serial(margins, counts, positive, search, max_candidates):
    scored = np.isnan(margins[counts > 0]).any()
    pooled = (margins, counts) if scored else (margins, counts, np.argsort(margins, kind="stable"))
    shift = search_shared_shift(None, positive, [], search, pooled_margins=pooled, max_candidates=max_candidates)
    return shift.theta, shift.table


def assert_same_search(margins, positive, *, counts=None, n_chunks=7, n_ranges=5, max_candidates=100_000, **search):
    """The ranged search's result is the serial one's, bytes included; returns how it ran."""
    counts = np.ones(margins.size, dtype=np.int64) if counts is None else counts
    search = {**EnsembleOTHRClassifier()._threshold_search(), **search}
    margins = np.where(counts > 0, margins, np.nan)
    runs = _runs(margins, counts, positive, n_chunks)
    theta, table = _serial(margins, counts, positive, search, max_candidates)
    mode, ranged_theta, ranged_table = ranged_search(runs, margins.size, positive, search, n_ranges=n_ranges,
                                                     max_candidates=max_candidates)
    assert np.float64(ranged_theta).tobytes() == np.float64(theta).tobytes()
    assert list(ranged_table) == list(table)
    for column in table:
        assert ranged_table[column].dtype == table[column].dtype, column
        assert ranged_table[column].tobytes() == table[column].tobytes(), column
    return mode


def _problem(seed, n, share=0.02, decimals=None):
    rng = np.random.default_rng(seed)
    positive = rng.random(n) < share
    margins = rng.normal(size=n) + np.where(positive, 0.5, -1.0)
    return (margins if decimals is None else np.round(margins, decimals)), positive


SEARCHES = [{}, dict(smoothing=None), dict(smoothing=0.2, tolerance=0.0), dict(tolerance=0.0, min_precision=0.2),
            dict(objective="f_measure"), dict(objective="g_f_mean", tolerance=0.05),
            dict(objective={"fn": 20.0, "fp": 1.0}), dict(objective={"fn": 5.0, "fp": 1.0}, smoothing=0.2)]


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("n", [500, 60_000])
@pytest.mark.parametrize("decimals", [None, 2])
@pytest.mark.parametrize("max_candidates", [100_000, 300])
def test_ranges_equal_the_serial_search(search, n, decimals, max_candidates):
    margins, positive = _problem(n, n, decimals=decimals)
    assert assert_same_search(margins, positive, max_candidates=max_candidates, **search) == "ranges"


def test_the_binned_counts_are_used_and_equal():
    """Above the work budget the negatives' smoothed counts come from the ranges' grid sums."""
    margins, positive = _problem(3, 200_000)
    assert 200_000 * 8191 > S.MAX_EXACT_SMOOTHING
    assert assert_same_search(margins, positive, n_chunks=40, n_ranges=33) == "ranges"
    weights = []
    runs = _runs(margins, np.ones(margins.size, dtype=np.int64), positive, 40)
    plan = R.plan_ranges([R.run_digest(run) for run in runs], smoothing="silverman", n_ranges=33)
    assert plan.cuts.size >= 20  # the grid cuts: margins of one grid point never in two ranges
    for cut in plan.cuts:
        below = np.nextafter(cut, -np.inf)
        assert np.floor((cut - plan.low) / plan.delta) == np.floor((below - plan.low) / plan.delta) + 1
    for i in range(plan.n_ranges):
        weights.append(R.range_summary(R.range_block(runs, plan, i), plan).bins)
    negatives = np.sort(margins[~positive])
    expected = S.grid_weights(negatives, negatives[0], plan.delta, plan.n_grid)
    assert S.added_bins([w for w in weights if w is not None], plan.n_grid).tobytes() == expected.tobytes()


@pytest.mark.parametrize("search", [{}, dict(smoothing=None), dict(smoothing=None, tolerance=0.0)])
def test_signed_zeros_and_ties(search):
    rng = np.random.default_rng(1)
    positive = rng.random(40_000) < 0.03
    margins = np.round(rng.normal(size=40_000), 1)
    margins[::7], margins[3::7] = 0.0, -0.0  # one group whose value is its first row's
    assert assert_same_search(margins, positive, n_chunks=13, n_ranges=9, **search) == "ranges"
    assert assert_same_search(margins, positive, max_candidates=20, **search) == "ranges"


def test_midpoints_at_zero():
    """Margins symmetric about 0: midpoints of exactly 0.0 and -0.0 besides theta = 0."""
    rng = np.random.default_rng(2)
    positive = rng.random(40_000) < 0.03
    margins = rng.normal(size=40_000)
    margins[20_000:] = -margins[:20_000]
    for search in ({}, dict(smoothing=None)):
        assert assert_same_search(margins, positive, max_candidates=5000, **search) == "ranges"


@pytest.mark.parametrize("max_candidates", [39_999, 40_000, 40_001, 8193, 8192, 8191, 2])
def test_more_candidates_than_the_thinning_keeps(max_candidates):
    rng = np.random.default_rng(3)
    positive = rng.random(40_000) < 0.03
    margins = rng.normal(size=40_000)
    for search in ({}, dict(smoothing=None)):
        assert assert_same_search(margins, positive, max_candidates=max_candidates, **search) == "ranges"


def test_very_few_positives():
    rng = np.random.default_rng(4)
    two = np.zeros(40_000, dtype=bool)
    two[[5, 30_000]] = True
    assert assert_same_search(rng.normal(size=40_000), two) == "ranges"
    one = np.zeros(40_000, dtype=bool)
    one[777] = True
    # one positive has no spread: the serial rule takes all margins' spread, so the ranges gather them
    assert assert_same_search(rng.normal(size=40_000), one) == "gather"
    assert assert_same_search(rng.normal(size=40_000), one, smoothing=None) == "ranges"
    tied = np.zeros(40_000, dtype=bool)
    tied[[5, 9]] = True
    margins = rng.normal(size=40_000)
    margins[[5, 9]] = 0.25
    assert assert_same_search(margins, tied) == "gather"


def test_unscored_rows_and_nan_margins():
    rng = np.random.default_rng(5)
    positive = rng.random(40_000) < 0.03
    counts = rng.integers(0, 3, 40_000)  # a third of the rows in every member's bag: not searched
    assert assert_same_search(rng.normal(size=40_000) - 1 + positive, positive, counts=counts) == "ranges"
    assert assert_same_search(rng.normal(size=40_000), positive, counts=counts, max_candidates=999) == "ranges"
    with_nan = rng.normal(size=40_000)
    with_nan[[10, 20_000]] = np.nan  # scored rows with a NaN margin: gathered, and both searches fail alike
    with pytest.raises(ValueError) as serial_error:
        _serial(with_nan, np.ones(40_000, dtype=np.int64), positive,
                EnsembleOTHRClassifier()._threshold_search(), 100_000)
    with pytest.raises(ValueError, match=str(serial_error.value)):
        ranged_search(_runs(with_nan, np.ones(40_000, dtype=np.int64), positive, 7), 40_000, positive,
                      EnsembleOTHRClassifier()._threshold_search(), n_ranges=5, max_candidates=100_000)


def test_extreme_values():
    rng = np.random.default_rng(6)
    positive = rng.random(40_000) < 0.03
    assert assert_same_search(rng.normal(size=40_000) * 1e307, positive, smoothing=None) == "ranges"
    assert assert_same_search(rng.integers(-5, 5, 40_000) * 5e-324, positive, smoothing=None) == "ranges"
    few = rng.integers(0, 3, 40_000).astype(float)
    assert assert_same_search(few, positive) == "ranges"
    assert assert_same_search(np.full(40_000, 0.5), positive, smoothing=None) == "ranges"
    assert assert_same_search(np.full(40_000, 0.5), positive) == "gather"


def test_more_ranges_and_chunks_than_margins():
    rng = np.random.default_rng(7)
    assert assert_same_search(rng.normal(size=300), rng.random(300) < 0.1, n_chunks=100, n_ranges=64) == "ranges"
    assert assert_same_search(rng.normal(size=300), rng.random(300) < 0.1, n_chunks=1, n_ranges=1) == "ranges"


@pytest.mark.parametrize("seed", range(8))
def test_random_problems(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(50, 150_000))
    positive = rng.random(n) < rng.uniform(0.001, 0.2)
    margins = rng.normal(size=n) * rng.uniform(0.1, 3) + positive * rng.uniform(0, 2)
    if seed % 3 == 0:
        margins = np.round(margins, int(rng.integers(0, 4)))
    search = SEARCHES[seed % len(SEARCHES)]
    assert_same_search(margins, positive, n_chunks=int(rng.integers(1, 70)), n_ranges=int(rng.integers(1, 70)),
                       max_candidates=int(rng.choice([100_000, 1000, 50])), **search)
