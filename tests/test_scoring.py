"""Predictions and scores of a fold's test rows from one pass of the model: the same arrays as asking twice."""

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import SVC

from dimbsvm.model_selection.scoring import positive_scores, predict_and_score_rows, predictions_and_scores
from dimbsvm.svm import ACTClassifier, EnsembleOTHRClassifier, HPCClassifier, OTHRClassifier, THRClassifier

from svm_cases import imbalanced

CLASSIFIERS = {
    "othr": lambda: OTHRClassifier(),
    "thr": lambda: THRClassifier(),
    "ensemble-pooled": lambda: EnsembleOTHRClassifier(n_estimators=5, random_state=0),
    "ensemble-vote": lambda: EnsembleOTHRClassifier(n_estimators=4, threshold="member", random_state=0),
    "act": lambda: ACTClassifier(max_iter=2, random_state=0),
    "hpc": lambda: HPCClassifier(random_state=0),
}


def _problem(labels):
    X, y = imbalanced(3, n_samples=120)
    return X, np.asarray(labels)[y]  # y == 1 is the minority


@pytest.mark.parametrize("labels", [(0, 1), (1, 0), ("b", "a")], ids=["minority-second", "minority-first", "str"])
@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
def test_predict_and_decision_is_predict_and_decision_function(name, labels):
    X, y = _problem(labels)
    clf = CLASSIFIERS[name]().fit(X, y)
    y_pred, decision = clf.predict_and_decision(X)
    np.testing.assert_array_equal(y_pred, clf.predict(X))
    np.testing.assert_array_equal(decision, clf.decision_function(X))
    assert len(set(y_pred)) == 2  # both classes predicted: a comparison that could differ


@pytest.mark.parametrize("labels", [(0, 1), (1, 0)], ids=["minority-second", "minority-first"])
@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
def test_pipeline_predictions_and_scores_equal_asking_twice(name, labels):
    X, y = _problem(labels)
    model = make_pipeline(MinMaxScaler(), CLASSIFIERS[name]()).fit(X, y)
    minority = labels[1]
    y_pred, scores = predictions_and_scores(model, X, minority)
    np.testing.assert_array_equal(y_pred, model.predict(X))
    np.testing.assert_array_equal(scores, positive_scores(model, X, minority))


def test_other_models_are_asked_twice():
    X, y = _problem((0, 1))
    model = make_pipeline(MinMaxScaler(), SVC()).fit(X, y)
    y_pred, scores = predictions_and_scores(model, X, 1)
    np.testing.assert_array_equal(y_pred, model.predict(X))
    np.testing.assert_array_equal(scores, model.decision_function(X))


def test_predict_and_score_rows_equals_the_model_on_those_rows():
    X, y = _problem((0, 1))
    model = make_pipeline(MinMaxScaler(), EnsembleOTHRClassifier(n_estimators=3, random_state=0)).fit(X, y)
    rows = np.arange(5, 100, 3)
    y_pred, scores, proba = predict_and_score_rows(model, X, rows, pos_label=1)
    np.testing.assert_array_equal(y_pred, model.predict(X[rows]))
    np.testing.assert_array_equal(scores, model.decision_function(X[rows]))
    assert proba is None
