"""SVM-OTHR and SVM-THR (dimbsvm.svm.othr), what the classifiers share (dimbsvm.svm._base, calibration), and scikit-learn's estimator checks of all three."""

import numpy as np
import pytest
import sklearn
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier
from sklearn.naive_bayes import GaussianNB
from sklearn.svm import SVC
from sklearn.utils.estimator_checks import parametrize_with_checks

from dimbsvm.svm import (
    EnsembleOTHRClassifier,
    OTHRClassifier,
    THRClassifier,
)
from dimbsvm.svm.ensemble import PAPER_PARAMS as ENSEMBLE_PAPER
from dimbsvm.svm.othr import PAPER_PARAMS as OTHR_PAPER
from dimbsvm.svm.threshold import (
    thr_shift,
)
from svm_cases import imbalanced as _imbalanced


def test_othr_defaults_are_deterministic_and_not_the_paper():
    X, y = _imbalanced(3, n_samples=150)
    clf = OTHRClassifier()
    assert {k: clf.get_params()[k] for k in OTHR_PAPER} != OTHR_PAPER
    first, second = clone(clf).fit(X, y), clone(clf).fit(X, y)
    assert first.threshold_ == second.threshold_  # random_state=None: folds in row order
    shuffled = OTHRClassifier(random_state=0).fit(X, y)
    assert shuffled.threshold_ == OTHRClassifier(random_state=0).fit(X, y).threshold_


def test_tolerance_prefers_a_smaller_shift():
    X, y = _imbalanced(5, n_samples=200)
    exact = OTHRClassifier(margins="train", tolerance=0.0).fit(X, y)
    loose = OTHRClassifier(margins="train", tolerance=0.05).fit(X, y)
    assert abs(loose.threshold_) <= abs(exact.threshold_)
    best = exact.candidates_["g_mean"].max()
    row = loose.candidates_["theta"] == loose.threshold_
    assert loose.candidates_["g_mean"][row][0] >= 0.95 * best


def test_thr_equals_closed_form():
    X, y = _imbalanced(0, n_samples=120, weight=0.85)
    clf = THRClassifier().fit(X, y)
    n_pos, n_neg = int((y == 1).sum()), int((y == 0).sum())
    assert n_pos < n_neg
    assert clf.threshold_ == (n_neg - n_pos) / (n_pos + n_neg + 2)
    assert thr_shift(n_pos, n_neg) == clf.threshold_
    base = clf.estimator_.decision_function(X)
    np.testing.assert_allclose(clf.decision_function(X), base + clf.threshold_)
    np.testing.assert_array_equal(clf.predict(X), (base + clf.threshold_ > 0).astype(int))


@pytest.mark.parametrize("Estimator", [OTHRClassifier, THRClassifier])
@pytest.mark.parametrize(
    "labels",
    [("neg", "pos"), (-1, 1), (7, 3), (True, False), ("b", "a")],
    ids=["str", "pm1", "minority-first", "bool", "str-minority-first"],
)
def test_labels_of_any_dtype(Estimator, labels):
    X, y01 = _imbalanced(3)
    majority, minority = labels
    y = np.where(y01 == 1, minority, majority)
    # The reference sorts its labels as y does, so that the SVM solves the same problem.
    minority_first = minority < majority
    reference_labels = (1, 0) if minority_first else (0, 1)
    y_reference = np.where(y01 == 1, reference_labels[1], reference_labels[0])
    reference = Estimator().fit(X, y_reference)
    clf = Estimator().fit(X, y)
    assert clf.pos_label_ == minority
    assert reference.pos_label_ == reference_labels[1]
    assert clf.classes_.tolist() == sorted(labels)
    assert clf.threshold_ == reference.threshold_
    mapping = {reference_labels[0]: majority, reference_labels[1]: minority}
    expected = np.array([mapping[label] for label in reference.predict(X)])
    np.testing.assert_array_equal(clf.predict(X), expected)
    # decision_function follows scikit-learn: positive means classes_[1]
    np.testing.assert_array_equal(clf.decision_function(X), reference.decision_function(X))
    np.testing.assert_array_equal(
        clf.classes_[(clf.decision_function(X) > 0).astype(int)], clf.predict(X)
    )
    # the minority side is positive in the shifted margin, whatever the label order
    shifted = clf._shifted_margin(X)
    np.testing.assert_array_equal(clf.predict(X) == minority, shifted > 0)
    if minority_first:
        # same problem with the other label order: equal up to the SVM solver's tolerance
        assert clf.threshold_ == pytest.approx(Estimator().fit(X, y01).threshold_, rel=1e-2)


def test_pos_label_and_minority_from_counts():
    X, y = _imbalanced(4)
    y = np.where(y == 1, "rare", "common")
    assert OTHRClassifier().fit(X, y).pos_label_ == "rare"
    forced = OTHRClassifier(pos_label="common").fit(X, y)
    assert forced.pos_label_ == "common"
    assert forced.candidates_["sample"][1:].size == 0 or np.all(
        y[forced.candidates_["sample"][1:]] == "common"
    )
    with pytest.raises(ValueError, match="pos_label='other' is not one of the training classes"):
        OTHRClassifier(pos_label="other").fit(X, y)
    # a tie in the counts: classes_[1] is positive
    balanced = np.array([0, 1] * 20)
    assert THRClassifier().fit(np.random.RandomState(0).rand(40, 2), balanced).pos_label_ == 1


def test_cv_margins():
    X, y = _imbalanced(6, n_samples=150)
    train = OTHRClassifier(margins="train").fit(X, y)
    cv = OTHRClassifier(margins="cv", cv=4, random_state=0).fit(X, y)
    again = OTHRClassifier(margins="cv", cv=4, random_state=0).fit(X, y)
    assert cv.threshold_ == again.threshold_
    np.testing.assert_array_equal(train.estimator_.dual_coef_, cv.estimator_.dual_coef_)
    assert cv.threshold_ >= 0.0
    with pytest.raises(ValueError, match="margins='cv' needs at least 2 minority samples"):
        OTHRClassifier(margins="cv").fit(X[:20], np.array([1] + [0] * 19))


def test_one_vs_rest_for_multiclass():
    X, y = make_classification(n_samples=150, n_classes=3, n_informative=3, random_state=0)
    model = OneVsRestClassifier(OTHRClassifier()).fit(X, y)
    assert model.predict(X).shape == (150,)


ALL = [OTHRClassifier, THRClassifier, EnsembleOTHRClassifier]


@pytest.mark.parametrize("Estimator", ALL)
def test_estimator_without_decision_function(Estimator):
    X, y = _imbalanced(0)
    with pytest.raises(ValueError, match="'decision_function'.*GaussianNB"):
        Estimator(GaussianNB()).fit(X, y)


@pytest.mark.parametrize("Estimator", ALL)
def test_multiclass_error(Estimator):
    X, y = make_classification(n_samples=60, n_classes=3, n_informative=3, random_state=0)
    message = "Only binary classification is supported.*OneVsRestClassifier"
    with pytest.raises(ValueError, match=message):
        Estimator().fit(X, y)


@pytest.mark.parametrize("Estimator", ALL)
def test_nan_and_one_class_errors(Estimator):
    X, y = _imbalanced(0)
    X_nan = X.copy()
    X_nan[3, 1] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        Estimator().fit(X_nan, y)
    with pytest.raises(ValueError, match="needs samples of 2 classes; got 1 class"):
        Estimator().fit(X, np.zeros_like(y))
    fitted = Estimator().fit(X, y)
    with pytest.raises(ValueError, match="Input X contains NaN"):
        fitted.predict(X_nan)




# --- scikit-learn's estimator checks -----------------------------------------------------


#: A base SVM for which weighting a row equals repeating it to the check's tolerance: a fixed gamma
#: (gamma="scale" reads the unweighted feature variance) and a solver tolerance far below the check's.
EXACT_WEIGHT_SVC = SVC(gamma=1.0, tol=1e-10)


#: scikit-learn before 1.7 draws this check's data otherwise: repeating its rows by its weights changes which
#: class has fewer rows, and OTHR takes the minority by rows (its weights do not count), so the two fits shift
#: towards different classes. From 1.7 on the check passes.
_OLD_WEIGHT_CHECK = tuple(int(part) for part in sklearn.__version__.split(".")[:2]) < (1, 7)


def _expected_failed_checks(estimator):
    if not isinstance(estimator, EnsembleOTHRClassifier):
        base = estimator.estimator
        if _OLD_WEIGHT_CHECK:
            reason = "scikit-learn < 1.7's weight-equivalence data change the minority class by rows (see above)"
            return {"check_sample_weight_equivalence_on_dense_data": reason,
                    "check_sample_weight_equivalence_on_sparse_data": reason}
        if base is None or (isinstance(base, SVC) and base.tol > 1e-8):
            reason = ("the default base SVC(gamma='scale') computes gamma from the unweighted feature "
                      "variance and stops at tol=1e-3, so it is not exactly weight-equivalent itself "
                      "(scikit-learn marks SVC so); the same check passes with SVC(gamma=1.0, tol=1e-10)")
            return {"check_sample_weight_equivalence_on_dense_data": reason,
                    "check_sample_weight_equivalence_on_sparse_data": reason}
        return {}
    bags = ("the members' bags are drawn from the rows, not from the weights (a repeated row can be drawn more "
            "often than its weight says, a row of weight 0 still takes a place in a bag), so weighting a row is not "
            "repeating it; what the weights do is tested in test_ensemble_weights.py")
    failures = {"check_sample_weight_equivalence_on_dense_data": bags}
    if not _OLD_WEIGHT_CHECK:  # (scikit-learn < 1.7's sparse variant does not fit these ensembles: it passes)
        failures["check_sample_weight_equivalence_on_sparse_data"] = bags
    if estimator.threshold != "member":
        failures["check_class_weight_classifiers"] = (
            "the shared threshold is searched for the best G-mean after the members are "
            "fitted, which by design undoes the extreme class_weight this check sets"
        )
    else:
        reason = (
            "predict is the members' majority vote and decision_function their mean "
            "shifted margin (EnSVM-OTHR as designed); near the boundary the two can disagree"
        )
        failures |= {
            "check_classifiers_train": reason,
            "check_classifiers_train(readonly_memmap=True)": reason,
            "check_classifiers_train(readonly_memmap=True,X_dtype=float32)": reason,
        }
    return failures


@parametrize_with_checks(
    [
        OTHRClassifier(),
        OTHRClassifier(**OTHR_PAPER),
        OTHRClassifier(candidates="midpoints", smoothing="silverman", objective="g_f_mean"),
        THRClassifier(),
        # sample_weight: the base's fit and the threshold objective's counts
        THRClassifier(EXACT_WEIGHT_SVC),
        OTHRClassifier(EXACT_WEIGHT_SVC),
        OTHRClassifier(LogisticRegression(tol=1e-12), candidates="midpoints", smoothing="silverman",
                       probability=True),
        OTHRClassifier(probability=True),
        EnsembleOTHRClassifier(n_estimators=3),
        EnsembleOTHRClassifier(n_estimators=3, **ENSEMBLE_PAPER),
        EnsembleOTHRClassifier(n_estimators=3, probability=True),
        EnsembleOTHRClassifier(n_estimators=2, param_grid={"C": [0.5, 4.0]}, top_candidates=1),
        EnsembleOTHRClassifier(n_estimators=3, param_grid={"C": [0.5, 4.0, 8.0]}, top_candidates=1,
                               screen_members=2, screen_survivors=2),
    ],
    expected_failed_checks=_expected_failed_checks,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)




@pytest.mark.parametrize("make", [lambda: OTHRClassifier(), lambda: THRClassifier(),
                                  lambda: EnsembleOTHRClassifier(n_estimators=3, random_state=0)])
def test_nested_search_over_the_default_estimator(make):
    """``estimator=None`` is searchable like the explicit default: same scores, no shared default mutated."""
    from sklearn.model_selection import GridSearchCV

    from dimbsvm.svm._base import default_estimator

    X, y = make_classification(n_samples=240, weights=[0.85], random_state=0)
    grid = {"estimator__C": [0.1, 10.0]}
    implicit = GridSearchCV(make(), grid, cv=3, scoring="roc_auc").fit(X, y)
    explicit = GridSearchCV(make().set_params(estimator=default_estimator()), grid, cv=3, scoring="roc_auc").fit(X, y)
    np.testing.assert_array_equal(implicit.cv_results_["mean_test_score"], explicit.cv_results_["mean_test_score"])
    assert implicit.best_estimator_.estimator.C == implicit.best_params_["estimator__C"]
    assert make().estimator is None  # the constructor's default was not touched
    assert make().get_params()["estimator__C"] == default_estimator().C




@pytest.mark.parametrize("scale", [1.0, 80.0])
def test_platt_fit_equals_scikit_learns_sigmoid_calibration(scale):
    from sklearn.calibration import _sigmoid_calibration  # scikit-learn's own Platt fit: the oracle

    from dimbsvm.svm.calibration import platt_fit

    rng = np.random.RandomState(3)
    positive = rng.rand(600) < 0.12
    scores = scale * (1.3 * positive + rng.normal(size=600))
    a, b = platt_fit(scores, positive)
    a_ref, b_ref = _sigmoid_calibration(scores, positive.astype(int))
    assert a == pytest.approx(a_ref, rel=1e-4) and b == pytest.approx(b_ref, rel=1e-4, abs=1e-6)




def test_probability_is_refused_where_it_could_not_be_honest():
    X, y = _imbalanced(0, n_samples=200)
    assert not hasattr(EnsembleOTHRClassifier(n_estimators=3).fit(X, y), "predict_proba")
    with pytest.raises(ValueError, match="needs threshold='pooled_oob'"):
        EnsembleOTHRClassifier(n_estimators=3, threshold="member", probability=True).fit(X, y)


def test_othr_probabilities_equal_calibratedclassifiercv_on_the_same_folds():
    """Platt on OTHR's out-of-fold margins is CalibratedClassifierCV(ensemble=False): same folds, same sigmoid."""
    from sklearn.calibration import CalibratedClassifierCV

    X, y = make_classification(n_samples=1500, n_features=6, weights=[0.85], class_sep=0.8, flip_y=0.02,
                               random_state=1)
    ours = OTHRClassifier(probability=True).fit(X[:1000], y[:1000])  # cv=5 unshuffled, as cv=5 below
    # Platt's b absorbs OTHR's shift, so the same margins up to a constant give the same probabilities
    reference = CalibratedClassifierCV(SVC(), method="sigmoid", cv=5, ensemble=False).fit(X[:1000], y[:1000])
    np.testing.assert_allclose(ours.predict_proba(X[1000:]), reference.predict_proba(X[1000:]), atol=2e-4)
    assert ours.predict_proba(X[:5]).shape == (5, 2)
    with pytest.raises(ValueError, match="needs margins='cv'"):
        OTHRClassifier(margins="train", probability=True).fit(X, y)
    assert not hasattr(OTHRClassifier().fit(X, y), "predict_proba")
    assert not hasattr(THRClassifier().fit(X, y), "predict_proba")




def test_sample_weight_reaches_the_base_estimator_or_is_refused_by_name():
    X, y = _imbalanced(0, n_samples=200)
    weights = np.where(y == 1, 5.0, 1.0)
    weighted = OTHRClassifier(SVC(gamma=1.0)).fit(X, y, sample_weight=weights)
    by_class = OTHRClassifier(SVC(gamma=1.0, class_weight={0: 1.0, 1: 5.0})).fit(X, y)
    # per-row weights of 5 on the minority are the class weight of 5: the same SVM underneath
    np.testing.assert_allclose(weighted.estimator_.decision_function(X), by_class.estimator_.decision_function(X),
                               atol=1e-6)
    for model in (OTHRClassifier(LinearDiscriminantAnalysis()), THRClassifier(LinearDiscriminantAnalysis())):
        with pytest.raises(TypeError, match=f"{type(model).__name__} was given sample_weight, but its base "
                                            "estimator LinearDiscriminantAnalysis does not accept"):
            model.fit(X, y, sample_weight=weights)
    with pytest.raises(ValueError, match="[Nn]egative"):
        THRClassifier().fit(X, y, sample_weight=-weights)




# --- signed_margins: linear members without scikit-learn's per-call validation --------------------------------


def _linear_models():
    from sklearn.linear_model import LogisticRegression, SGDClassifier
    from sklearn.svm import LinearSVC

    rng = np.random.RandomState(0)
    X = rng.normal(size=(600, 7))
    y = (X[:, 0] + 0.3 * rng.normal(size=600) > 0.8).astype(int)
    return X, y, [LinearSVC(dual=False).fit(X, y), LogisticRegression().fit(X, y),
                  SGDClassifier(random_state=0).fit(X, y)]


@pytest.mark.parametrize("assume_finite", [False, True])
def test_signed_margins_of_linear_models_equal_their_decision_function_bit_for_bit(assume_finite):
    from sklearn import config_context

    from dimbsvm.svm._base import _is_plain_linear_call, signed_margins

    X, _, models = _linear_models()
    rows = np.random.RandomState(1).normal(size=(333, 7))
    for model in models:
        assert _is_plain_linear_call(model, rows)
        with config_context(assume_finite=assume_finite):
            for sign in (1.0, -1.0):
                got = signed_margins(model, rows, sign)
                assert got.shape == (333,) and got.dtype == np.float64
                assert got.tobytes() == (sign * model.decision_function(rows)).tobytes()


def test_signed_margins_leave_other_inputs_to_decision_function_and_its_errors():
    import scipy.sparse as sp
    from sklearn.svm import SVC

    from dimbsvm.svm._base import _is_plain_linear_call, signed_margins

    X, y, [svc, *_] = _linear_models()
    rows = X[:50].copy()
    for other in (rows.astype(np.float32), sp.csr_matrix(rows), rows[:, :6], rows.tolist()):
        assert not _is_plain_linear_call(svc, other)
    np.testing.assert_array_equal(signed_margins(svc, sp.csr_matrix(rows), 1.0),
                                  svc.decision_function(sp.csr_matrix(rows)))
    with pytest.raises(ValueError, match="features"):
        signed_margins(svc, rows[:, :6], 1.0)
    bad = rows.copy()
    bad[3, 2] = np.nan
    assert not _is_plain_linear_call(svc, bad)
    with pytest.raises(ValueError, match="NaN"):
        signed_margins(svc, bad, 1.0)
    from sklearn.linear_model import RidgeClassifier

    # SVC has a decision_function of its own; RidgeClassifier's binary coef_ is 1-D: both left to scikit-learn
    for own in (SVC(kernel="linear").fit(X, y), RidgeClassifier().fit(X, y)):
        assert not _is_plain_linear_call(own, rows)
        np.testing.assert_array_equal(signed_margins(own, rows, -1.0), -own.decision_function(rows))
    pandas = pytest.importorskip("pandas")
    named = type(svc)(dual=False).fit(pandas.DataFrame(X, columns=[f"f{i}" for i in range(7)]), y)
    assert not _is_plain_linear_call(named, rows)  # decision_function warns about the missing names: kept
