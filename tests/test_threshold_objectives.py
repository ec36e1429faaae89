"""Threshold objectives beyond the named metrics (issue 54, item 7): a cost matrix and any function of the
confusion counts, as scikit-learn's ``TunedThresholdClassifierCV`` takes a scorer or a cost.

The truth is brute force with scikit-learn's own metrics: every candidate shift
applied to the margins, the predictions scored by ``confusion_matrix``,
``accuracy_score`` or ``balanced_accuracy_score``; the best candidate (ties: the
smallest ``|theta|``) must be the one the search chose.
"""

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import accuracy_score, balanced_accuracy_score, confusion_matrix

from dimbsvm import EnsembleOTHRClassifier, OTHRClassifier
from dimbsvm._params import InvalidParameterError
from dimbsvm.svm.threshold import best_threshold


def _problem(seed, n=400, share=0.1):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < share).astype(int)
    margins = np.round(rng.normal(size=n) + np.where(y == 1, 0.8, -0.9), 2)  # rounded: ties between candidates
    candidates = np.unique(np.concatenate([[0.0], -margins]))
    return y, margins, candidates


def _brute_force_best(y, margins, candidates, score):
    values = np.array([score(y, (margins + theta > 0).astype(int)) for theta in candidates])
    best = np.flatnonzero(values == values.max())
    return candidates[best[np.argmin(np.abs(candidates[best]))]], values.max()


def _cost(c_fn, c_fp):
    def negative_mean_cost(y, predicted):
        tn, fp, fn, tp = confusion_matrix(y, predicted, labels=[0, 1]).ravel()
        return -(c_fn * fn + c_fp * fp) / y.size
    return negative_mean_cost


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("costs", [(5.0, 1.0), (1.0, 3.0), (20.0, 0.0)])
def test_a_cost_matrix_objective_chooses_the_least_costly_shift(seed, costs):
    y, margins, candidates = _problem(seed)
    theta, table = best_threshold(y, margins, candidates, objective={"fn": costs[0], "fp": costs[1]})
    expected, best = _brute_force_best(y, margins, candidates, _cost(*costs))
    assert theta == expected
    assert table["score"].max() == pytest.approx(best, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 3])
def test_equal_costs_maximise_accuracy_and_a_function_of_counts_is_any_metric(seed):
    y, margins, candidates = _problem(seed)
    theta, _ = best_threshold(y, margins, candidates, objective={"fn": 1.0, "fp": 1.0})
    assert theta == _brute_force_best(y, margins, candidates, accuracy_score)[0]

    def balanced_accuracy(tp, fp, fn, tn):
        return (tp / (tp + fn) + tn / (tn + fp)) / 2

    theta, table = best_threshold(y, margins, candidates, objective=balanced_accuracy)
    expected, best = _brute_force_best(y, margins, candidates, balanced_accuracy_score)
    assert table["score"].max() == pytest.approx(best, abs=1e-12)
    chosen = balanced_accuracy_score(y, (margins + theta > 0).astype(int))
    assert chosen == pytest.approx(best, abs=1e-12) and abs(theta) <= abs(expected) + 1e-12


def test_estimators_take_a_cost_matrix_and_refuse_a_malformed_one_by_name():
    X, y = make_classification(400, 5, weights=[0.9], random_state=0)
    cheap_misses = OTHRClassifier(objective={"fn": 1.0, "fp": 1.0}).fit(X, y)
    costly_misses = OTHRClassifier(objective={"fn": 20.0, "fp": 1.0}).fit(X, y)
    # a costlier miss moves the shift towards the positive class: at least as many positive predictions
    assert costly_misses.predict(X).sum() >= cheap_misses.predict(X).sum()
    assert costly_misses.threshold_ >= cheap_misses.threshold_
    ensemble = EnsembleOTHRClassifier(n_estimators=3, random_state=0, objective={"fn": 20.0, "fp": 1.0}).fit(X, y)
    assert np.isfinite(ensemble.threshold_)
    for bad in ({"fn": -1.0, "fp": 1.0}, {"fn": 1.0}, {"fn": 0.0, "fp": 0.0}, "cost"):
        with pytest.raises(InvalidParameterError, match="The 'objective' parameter of OTHRClassifier must be"):
            OTHRClassifier(objective=bad).fit(X, y)


# --- scikit-learn scorers (TunedThresholdClassifierCV's ``scoring``) ---------------------------------------


def _label_metric(scorer):
    """The scorer applied to labels as scikit-learn applies it: on the real rows, through a fixed predictor."""
    from dimbsvm.svm.objectives import _FixedLabels

    def metric(y, predicted, sample_weight=None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            return scorer(_FixedLabels(), predicted[:, None], y, sample_weight=sample_weight)

    return metric


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("scoring", ["balanced_accuracy", "f1", "matthews_corrcoef", "jaccard", "precision",
                                     "accuracy", "recall", "fbeta2", "neg_zero_one", "f1 as a scorer object"])
def test_a_scorer_objective_chooses_the_shift_scikit_learn_scores_best(seed, scoring):
    from sklearn.metrics import fbeta_score, get_scorer, make_scorer, zero_one_loss

    # the names of COUNTED_SCORERS are computed from the counts directly; a scorer object always by calling it
    scorer = {"fbeta2": make_scorer(fbeta_score, beta=2),
              "neg_zero_one": make_scorer(zero_one_loss, greater_is_better=False),
              "f1 as a scorer object": get_scorer("f1")}.get(scoring, scoring)
    y, margins, candidates = _problem(seed)
    weights = np.random.default_rng(seed).uniform(0.2, 3.0, size=y.size)
    as_scorer = get_scorer(scorer) if isinstance(scorer, str) else scorer
    metric = _label_metric(as_scorer)
    for sample_weight in (None, weights):
        theta, table = best_threshold(y, margins, candidates, objective=scorer, sample_weight=sample_weight)
        values = np.array([metric(y, (margins + t > 0).astype(int), sample_weight) for t in candidates])
        # every candidate's score is scikit-learn's score of that candidate's predictions on the real rows
        np.testing.assert_allclose(table["score"], values, rtol=1e-9, atol=1e-12)
        assert metric(y, (margins + theta > 0).astype(int), sample_weight) == pytest.approx(values.max(), abs=1e-12)


def test_estimators_take_a_scorer_and_refuse_one_of_scores_by_name():
    from sklearn.metrics import get_scorer

    X, y = make_classification(400, 5, weights=[0.9], random_state=0)
    model = OTHRClassifier(objective="balanced_accuracy", candidates="midpoints", margins="train", tolerance=0.0,
                           smoothing=None).fit(X, y)
    margins = model.decision_function(X) - model.threshold_
    best = max(balanced_accuracy_score(y, (margins + t > 0).astype(int)) for t in model.candidates_["theta"])
    assert balanced_accuracy_score(y, model.predict(X)) == pytest.approx(best, abs=1e-12)
    assert EnsembleOTHRClassifier(n_estimators=3, random_state=0, objective="f1").fit(X, y).threshold_ is not None
    with pytest.raises(InvalidParameterError, match="The 'objective' parameter of OTHRClassifier must be"):
        OTHRClassifier(objective="roc_auc").fit(X, y)
    with pytest.raises(ValueError, match="scores decision values or probabilities, which moving the threshold does "
                                         "not change"):
        best_threshold([1, 0, 0], [0.5, -0.5, 0.1], [0.0], objective=get_scorer("average_precision"))
