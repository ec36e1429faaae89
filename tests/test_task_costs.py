"""Task costs from sizes: the expected out-of-bag rows against drawn bags, and the solver each fit will use."""

import numpy as np
import pytest
from sklearn.svm import SVC, LinearSVC

from dimbsvm.svm.parts import parts_of
from dimbsvm._counts import minority_count
from dimbsvm.svm.task_costs import KERNEL_FIT_SECONDS, LINEAR_FIT_SECONDS, TASK_SECONDS, FoldCosts
from dimbsvm.svm import EnsembleOTHRClassifier, OTHRClassifier
from dimbsvm.svm.bagging import draw_bag
from dimbsvm.svm.scaled_defaults import LARGE_N


@pytest.mark.parametrize("bootstrap", ["plain", "stratified"])
def test_expected_out_of_bag_rows_match_the_bags_the_members_draw(bootstrap):
    y = np.r_[np.zeros(4750, dtype=int), np.ones(250, dtype=int)]
    estimator = EnsembleOTHRClassifier(bootstrap=bootstrap, n_estimators=20, random_state=0)
    parts, _ = parts_of(estimator, y)
    costs = FoldCosts.of(estimator, parts, n_train=len(y), n_test=0, n_minority=minority_count(y))
    drawn = [len(y) - np.unique(draw_bag(y == 1, np.random.RandomState(seed), bootstrap=bootstrap)[0]).size
             for seed in range(20)]
    assert costs.part_oob_rows == pytest.approx(np.mean(drawn), rel=0.02)  # n * exp(-bag / n), by simulation


def test_a_fit_is_priced_with_the_solver_it_will_use_at_its_size():
    small, large = 5_000, 2 * LARGE_N
    # OTHR's threshold rule fits its 5 inner folds for out-of-fold margins, then the model on every row
    assert (OTHRClassifier().margins, OTHRClassifier().cv) == ("cv", 5)
    inner = 4 * small // 5
    for n, seconds_per_row_fit, row_fits in ((small, KERNEL_FIT_SECONDS, (small * small + 5 * inner * inner) / 100),
                                             (large, LINEAR_FIT_SECONDS, large + 5 * 4 * large // 5)):  # LinearSVC
        costs = FoldCosts.of(OTHRClassifier(), parts_of(OTHRClassifier(), np.zeros(n))[0], n_train=n, n_test=0,
                             n_minority=n // 20)
        assert costs.part() == pytest.approx(TASK_SECONDS + seconds_per_row_fit * row_fits)
    plain = FoldCosts.of(OTHRClassifier(margins="train"), [parts_of(OTHRClassifier(), np.zeros(small))[0][0]],
                         n_train=small, n_test=0, n_minority=250)
    assert plain.part() == pytest.approx(TASK_SECONDS + KERNEL_FIT_SECONDS * small * small / 100)
    linear = FoldCosts.of(LinearSVC(), parts_of(LinearSVC(), np.zeros(small))[0], n_train=small, n_test=0,
                          n_minority=250)
    kernel = FoldCosts.of(SVC(), parts_of(SVC(), np.zeros(small))[0], n_train=small, n_test=0, n_minority=250)
    assert kernel.part() > 10 * linear.part()


def test_an_ensembles_finish_prices_every_member_scoring_every_test_row():
    y = np.r_[np.zeros(1900, dtype=int), np.ones(100, dtype=int)]
    estimator = EnsembleOTHRClassifier(n_estimators=7, smoothing=None, random_state=0)
    parts, _ = parts_of(estimator, y)
    with_tests = FoldCosts.of(estimator, parts, n_train=len(y), n_test=1000, n_minority=100)
    without = FoldCosts.of(estimator, parts, n_train=len(y), n_test=0, n_minority=100)
    assert with_tests.finish() - without.finish() == pytest.approx(1000 * 7 * with_tests.part_score_row)
