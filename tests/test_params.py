"""dimbsvm's own parameter checks (dimbsvm/_params.py) against scikit-learn's private ones on the same input.

The estimators no longer import scikit-learn's private API; these tests
import it only as the reference their behaviour is compared with (skipped
where a release no longer has it).
"""

from numbers import Integral, Real

import numpy as np
import pytest
from sklearn import config_context, get_config
from sklearn.base import BaseEstimator
from sklearn.model_selection import StratifiedKFold

from dimbsvm import _params as ours

reference = pytest.importorskip("sklearn.utils._param_validation", reason="scikit-learn's private reference is gone")
sklearn_validation = pytest.importorskip("sklearn.utils.validation")

# (our constraint, scikit-learn's), for constraint kinds the estimators declare
CONSTRAINTS = [
    (ours.Interval(Integral, 1, None, closed="left"), reference.Interval(Integral, 1, None, closed="left")),
    (ours.Interval(Real, 0, 1, closed="both"), reference.Interval(Real, 0, 1, closed="both")),
    (ours.Interval(Real, 0, None, closed="neither"), reference.Interval(Real, 0, None, closed="neither")),
    (ours.Interval(ours.RealNotInt, 0, 1, closed="right"), reference.Interval(reference.RealNotInt, 0, 1,
                                                                              closed="right")),
    (ours.Interval(Integral, -1, 5, closed="neither"), reference.Interval(Integral, -1, 5, closed="neither")),
    (ours.StrOptions({"rbf", "linear"}), reference.StrOptions({"rbf", "linear"})),
    (ours.HasMethods(["fit", "decision_function"]), reference.HasMethods(["fit", "decision_function"])),
    (None, None), ("boolean", "boolean"), ("random_state", "random_state"), ("array-like", "array-like"),
    ("cv_object", "cv_object"), (dict, dict), (str, str), (Real, Real), (callable, callable),
]
VALUES = [0, 1, 2, 5, -1, 0.0, 0.5, 1.0, 1.5, np.float32(0.5), np.int64(3), float("nan"), float("inf"), True, False,
          np.bool_(True), None, "rbf", "linear", "poly", "", {}, {"a": 1}, [1, 2], (1, 2), np.array([0.1, 0.2]),
          np.random.RandomState(0), 2**32, StratifiedKFold(3), BaseEstimator(), len, object()]


@pytest.mark.parametrize("constraint", range(len(CONSTRAINTS)))
def test_each_constraint_accepts_what_scikit_learns_accepts(constraint):
    mine, theirs = CONSTRAINTS[constraint]
    for value in VALUES:
        accepted = True
        try:
            reference.validate_parameter_constraints({"p": [theirs]}, {"p": value}, caller_name="E")
        except reference.InvalidParameterError:
            accepted = False
        if accepted:
            ours.validate_parameter_constraints({"p": [mine]}, {"p": value}, caller_name="E")
        else:
            with pytest.raises(ours.InvalidParameterError, match="The 'p' parameter of E must be"):
                ours.validate_parameter_constraints({"p": [mine]}, {"p": value}, caller_name="E")


@pytest.mark.parametrize("constraints, value", [
    ([reference.Interval(Integral, 1, None, closed="left")], 0),
    ([reference.Interval(Real, 0, 1, closed="both")], 2.0),
    ([reference.StrOptions({"a", "b"})], "c"),
    ([reference.HasMethods(["fit", "predict"])], 3),
    ([dict, None], "x"),
    ([reference.Interval(Integral, 2, None, closed="left"), None], 1),
])
def test_messages_are_scikit_learns(constraints, value):
    translated = [_ours(c) for c in constraints]
    with pytest.raises(reference.InvalidParameterError) as theirs:
        reference.validate_parameter_constraints({"p": constraints}, {"p": value}, caller_name="E")
    with pytest.raises(ours.InvalidParameterError) as mine:
        ours.validate_parameter_constraints({"p": translated}, {"p": value}, caller_name="E")
    assert _sets_sorted(str(mine.value)) == _sets_sorted(str(theirs.value))  # (scikit-learn lists a set unsorted)
    assert isinstance(mine.value, ValueError) and isinstance(mine.value, TypeError)


def _sets_sorted(message):
    import re

    return re.sub(r"\{([^}]*)\}", lambda m: "{" + ", ".join(sorted(m.group(1).split(", "))) + "}", message)


def _ours(constraint):
    if isinstance(constraint, reference.Interval):
        kind = ours.RealNotInt if constraint.type is reference.RealNotInt else constraint.type
        return ours.Interval(kind, constraint.left, constraint.right, closed=constraint.closed)
    if isinstance(constraint, reference.StrOptions):
        return ours.StrOptions(constraint.options)
    if isinstance(constraint, reference.HasMethods):
        return ours.HasMethods(constraint.methods)
    return constraint


class _Checked(ours.ValidatedParams, BaseEstimator):
    _parameter_constraints = {"C": [ours.Interval(Real, 0, None, closed="neither")], "client": "no_validation"}

    def __init__(self, C=1.0, client=None):
        self.C, self.client = C, client

    @ours.fit_context(prefer_skip_nested_validation=True)
    def fit(self, X=None, y=None):
        self.nested_skipped_ = get_config()["skip_parameter_validation"]
        return self


def test_fit_checks_first_and_lets_nested_fits_skip_theirs_as_scikit_learn_does():
    with pytest.raises(ours.InvalidParameterError, match="'C' parameter of _Checked"):
        _Checked(C=-1).fit()
    assert _Checked(client=object()).fit().nested_skipped_  # "no_validation": anything goes
    with config_context(skip_parameter_validation=True):  # scikit-learn's public setting turns the check off
        assert _Checked(C=-1).fit().nested_skipped_
    assert not get_config()["skip_parameter_validation"]


@pytest.mark.parametrize("weights", [None, 2, 0.5, [1, 2, 3], np.array([1.0, 0.0, 2.5], dtype=np.float32),
                                     np.array([1, 2, 3], dtype=np.int8)])
def test_sample_weight_is_scikit_learns(weights):
    X = np.zeros((3, 2))
    mine = ours.check_sample_weight(weights, X, ensure_non_negative=True)
    theirs = sklearn_validation._check_sample_weight(weights, X, ensure_non_negative=True)
    np.testing.assert_array_equal(mine, theirs)
    assert mine.dtype.kind == "f" and (mine.dtype == theirs.dtype or np.isscalar(weights))


@pytest.mark.parametrize("weights, match", [([1, -1, 2], "Negative values"), ([1, 2], "shape"),
                                            ([[1, 2, 3]], "1D"), ([1, np.nan, 2], "NaN")])
def test_bad_sample_weight_is_refused_as_scikit_learn_refuses_it(weights, match):
    X = np.zeros((3, 2))
    with pytest.raises(ValueError):
        sklearn_validation._check_sample_weight(weights, X, ensure_non_negative=True)
    with pytest.raises(ValueError, match=match):
        ours.check_sample_weight(weights, X, ensure_non_negative=True)


def test_no_module_of_dimbsvm_imports_scikit_learns_private_api():
    import ast
    import pathlib

    import dimbsvm

    offenders = []
    for path in pathlib.Path(dimbsvm.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                     [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            imported = [alias.name for alias in node.names] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                if name.startswith("sklearn") and (any(part.startswith("_") for part in name.split("."))
                                                   or any(item.startswith("_") for item in imported)):
                    offenders.append(f"{path.name}: {name} {imported}")
    assert offenders == []


def test_declared_parameters_are_checked_through_nested_estimators_and_skipped_where_none_are_declared():
    from sklearn.svm import SVC

    from dimbsvm.svm import EnsembleOTHRClassifier

    class Undeclared(BaseEstimator):  # (as LightGBM's estimators: no constraints, checked when fitted)
        def __init__(self, depth=-5):
            self.depth = depth

    ours.check_declared_params(Undeclared())
    ours.check_declared_params(EnsembleOTHRClassifier(SVC(C=1.0)))
    with pytest.raises(ours.InvalidParameterError, match="'C' parameter of SVC"):
        ours.check_declared_params(EnsembleOTHRClassifier(SVC(C=-1.0)))  # the member's, as scikit-learn says it
    with pytest.raises(ours.InvalidParameterError, match="'n_estimators' parameter of EnsembleOTHRClassifier"):
        ours.check_declared_params(EnsembleOTHRClassifier(n_estimators=0))
