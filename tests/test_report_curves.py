"""The report's ROC and precision-recall curves from sorted scores are scikit-learn's, bit for bit."""

import numpy as np
import pytest
from sklearn.metrics import precision_recall_curve, roc_curve

from dimbsvm.report.curves import precision_recall_from_sorted, roc_from_sorted


def _cases():
    rng = np.random.default_rng(11)
    yield "distinct", rng.normal(size=3_000), rng.random(3_000) < 0.05
    yield "ties", np.round(rng.normal(size=3_000), 1), rng.random(3_000) < 0.2
    yield "few values", rng.integers(0, 4, 500).astype(float), rng.random(500) < 0.5
    zeros = rng.permutation(np.concatenate([np.zeros(40), -np.zeros(40), rng.normal(size=200)]))
    yield "signed zeros", zeros, rng.random(zeros.size) < 0.3
    yield "one row each", np.array([0.5, -0.5]), np.array([True, False])
    yield "all equal", np.ones(50), np.arange(50) % 7 == 0
    yield "float32", rng.normal(size=1_000).astype(np.float32), rng.random(1_000) < 0.1
    yield "no positives", rng.normal(size=100), np.zeros(100, bool)
    yield "only positives", rng.normal(size=100), np.ones(100, bool)


@pytest.mark.parametrize("name,score,positive", list(_cases()), ids=[c[0] for c in _cases()])
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
@pytest.mark.filterwarnings("ignore:No positive class found")
def test_curves_from_sorted_scores_are_scikit_learns(name, score, positive):
    order = np.argsort(score, kind="stable")  # as the report sorts each repeat's rows
    for ours, theirs in ((roc_from_sorted(score[order], positive[order]), roc_curve(positive, score)),
                         (precision_recall_from_sorted(score[order], positive[order]),
                          precision_recall_curve(positive, score))):
        for mine, truth in zip(ours, theirs):
            assert mine.dtype == truth.dtype
            # bit for bit: the same values, NaN where scikit-learn has NaN, the same sign of zero
            np.testing.assert_array_equal(mine, truth)
            np.testing.assert_array_equal(np.signbit(mine), np.signbit(truth))
