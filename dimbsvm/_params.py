"""Constructor parameters declared and checked, scikit-learn style, without scikit-learn's private API.

An estimator lists what each parameter may be in ``_parameter_constraints``
(``{name: [constraint, ...]}``), as scikit-learn's own estimators do, and
derives from :class:`ValidatedParams`; :func:`fit_context` checks them when
``fit`` is called. A constraint is one of:

* :class:`Interval` - a number of a type (``Integral``, ``Real`` or
  :class:`RealNotInt`) between two bounds;
* :class:`StrOptions` - one of a set of strings;
* :class:`HasMethods` - an object with these methods;
* ``None``, ``"boolean"``, ``"random_state"``, ``"array-like"``, ``"cv_object"``
  (scikit-learn's ``cv`` values), ``callable``, or a type (an instance of it).

``"no_validation"`` in place of the list leaves a parameter unchecked.

Scikit-learn's own machinery for this (``sklearn.utils._param_validation``,
``sklearn.base._fit_context``) is private and changes without deprecation;
this module is dimbsvm's own, with the same messages and the same
``skip_parameter_validation`` setting (a public key of ``sklearn.set_config``).
No Dask, no I/O.
"""

from __future__ import annotations

import functools
from numbers import Integral, Real

import numpy as np
from sklearn import config_context, get_config

from ._doc_links import DocLinked

__all__ = ["HasMethods", "Interval", "InvalidParameterError", "RealNotInt", "StrOptions", "ValidatedParams",
           "check_declared_params", "check_sample_weight", "fit_context", "validate_parameter_constraints"]


class InvalidParameterError(ValueError, TypeError):
    """A constructor parameter of the wrong type or value (both a ``ValueError`` and a ``TypeError``,
    as scikit-learn's own)."""


class RealNotInt(Real):
    """The type of a Python float (``np.float64`` too), not an int: as scikit-learn's, other NumPy floats are not.

    Examples
    --------
    >>> isinstance(0.5, RealNotInt), isinstance(1, RealNotInt)
    (True, False)
    """


RealNotInt.register(float)


class Interval:
    """Numbers of ``type`` between ``left`` and ``right`` (``None``: unbounded), ``closed`` at
    ``"left"``, ``"right"``, ``"both"`` or ``"neither"``.

    Examples
    --------
    >>> Interval(Integral, 1, None, closed="left").is_satisfied_by(3)
    True
    >>> str(Interval(Real, 0, 1, closed="neither"))
    'a float in the range (0.0, 1.0)'
    """

    def __init__(self, type, left, right, *, closed):
        if type not in (Integral, Real, RealNotInt):
            raise ValueError(f"an Interval is over Integral, Real or RealNotInt, not {type!r}")
        if closed not in ("left", "right", "both", "neither"):
            raise ValueError(f"closed must be 'left', 'right', 'both' or 'neither', not {closed!r}")
        self.type, self.left, self.right, self.closed = type, left, right, closed

    def is_satisfied_by(self, value) -> bool:
        # (as scikit-learn's: booleans are numbers, and a missing bound is an infinity, closed or not)
        if not isinstance(value, self.type):
            return False
        low = -np.inf if self.left is None else self.left
        high = np.inf if self.right is None else self.right
        above = value >= low if self.closed in ("left", "both") else value > low
        below = value <= high if self.closed in ("right", "both") else value < high
        return bool(above and below)

    def __str__(self):
        kind = "an int" if self.type is Integral else "a float"
        bound = (lambda b: b) if self.type is Integral else float
        low = "-inf" if self.left is None else bound(self.left)
        high = "inf" if self.right is None else bound(self.right)
        opening = "[" if self.left is not None and self.closed in ("left", "both") else "("
        closing = "]" if self.right is not None and self.closed in ("right", "both") else ")"
        return f"{kind} in the range {opening}{low}, {high}{closing}"


class StrOptions:
    """One of the strings ``options``.

    Examples
    --------
    >>> str(StrOptions({"b", "a"}))
    "a str among {'a', 'b'}"
    """

    def __init__(self, options):
        self.options = set(options)

    def is_satisfied_by(self, value) -> bool:
        return isinstance(value, str) and value in self.options

    def __str__(self):
        return "a str among {" + ", ".join(repr(option) for option in sorted(self.options)) + "}"


class HasMethods:
    """An object with every one of ``methods`` (callable attributes).

    Examples
    --------
    >>> str(HasMethods(["fit", "predict"]))
    "an object implementing 'fit' and 'predict'"
    """

    def __init__(self, methods):
        self.methods = [methods] if isinstance(methods, str) else list(methods)

    def is_satisfied_by(self, value) -> bool:
        return all(callable(getattr(value, method, None)) for method in self.methods)

    def __str__(self):
        names = [repr(method) for method in self.methods]
        return "an object implementing " + (names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and "
                                            + names[-1])


def _satisfies(constraint, value) -> bool:
    if constraint is None:
        return value is None
    if constraint == "boolean":
        return isinstance(value, (bool, np.bool_))
    if constraint == "random_state":
        return value is None or isinstance(value, np.random.RandomState) or (isinstance(value, Integral)
                                                                             and 0 <= value <= 2**32 - 1)
    if constraint == "array-like":
        return (hasattr(value, "__len__") or hasattr(value, "shape") or hasattr(value, "__array__")) \
            and not np.isscalar(value)
    if constraint == "cv_object":  # a number of folds, a splitter, or an iterable of (train, test) splits
        return ((isinstance(value, Integral) and not isinstance(value, bool) and value >= 2)
                or (callable(getattr(value, "split", None)) and callable(getattr(value, "get_n_splits", None)))
                or (hasattr(value, "__iter__") and not isinstance(value, str)) or value is None)
    if constraint is callable:
        return callable(value)
    if isinstance(constraint, type):
        return isinstance(value, constraint)
    return constraint.is_satisfied_by(value)


def _describe(constraint) -> str:
    if constraint is None:
        return "None"
    if constraint == "boolean":
        return "an instance of 'bool'"
    if constraint == "random_state":
        return "an int in the range [0, 4294967295], an instance of 'numpy.random.RandomState'"
    if constraint == "array-like":
        return "an array-like"
    if constraint == "cv_object":
        return "an int in the range [2, inf), an object implementing 'split' and 'get_n_splits', an iterable"
    if constraint is callable:
        return "a callable"
    if isinstance(constraint, type):
        return f"an instance of {constraint.__qualname__!r}"
    return str(constraint)


def validate_parameter_constraints(constraints: dict, params: dict, caller_name: str) -> None:
    """Raise :class:`InvalidParameterError` for the first of ``params`` that meets none of its constraints.

    Parameters without constraints are not checked.

    Examples
    --------
    >>> validate_parameter_constraints({"C": [Interval(Real, 0, None, closed="neither")]}, {"C": -1.0}, "SVM")
    Traceback (most recent call last):
    ...
    dimbsvm._params.InvalidParameterError: The 'C' parameter of SVM must be a float in the range (0.0, inf). Got -1.0 instead.
    """
    for name, value in params.items():
        allowed = constraints.get(name)
        if allowed is None or allowed == "no_validation" or any(_satisfies(constraint, value) for constraint in allowed):
            continue
        shown = [_describe(constraint) for constraint in allowed if constraint is not None]
        if None in allowed:
            shown.append("None")
        text = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]
        raise InvalidParameterError(f"The {name!r} parameter of {caller_name} must be {text}. Got {value!r} "
                                    "instead.")


class ValidatedParams(DocLinked):
    """Mixin: ``_validate_params()`` checks the constructor parameters against ``_parameter_constraints``
    (and scikit-learn's HTML display links to the estimator's documentation page, :class:`DocLinked`)."""

    _parameter_constraints: dict = {}

    def _validate_params(self):
        validate_parameter_constraints(self._parameter_constraints, self.get_params(deep=False),
                                       type(self).__name__)


def check_declared_params(estimator) -> None:
    """Check the declared parameters of ``estimator`` and of every estimator among its parameters.

    dimbsvm's estimators are checked against their ``_parameter_constraints``
    here. Scikit-learn's own estimators are checked by their own method where
    they have one and declare constraints (a private method: where a release
    drops it, they are checked when fitted, as estimators that declare none,
    such as LightGBM's, always are). Raises
    :class:`InvalidParameterError` naming the parameter.
    """
    for value in [estimator, *estimator.get_params(deep=True).values()]:
        if isinstance(value, ValidatedParams):
            value._validate_params()
        elif (hasattr(value, "get_params") and callable(getattr(value, "_validate_params", None))
              and getattr(value, "_parameter_constraints", None) is not None):  # (LightGBM's declare none)
            try:
                value._validate_params()
            except (ValueError, TypeError) as exc:
                raise InvalidParameterError(str(exc)) from exc


def fit_context(*, prefer_skip_nested_validation: bool):
    """Decorator of ``fit``: the parameters are checked first (unless ``skip_parameter_validation`` is set), and
    with ``prefer_skip_nested_validation`` the estimators ``fit`` calls skip theirs (they are built from checked
    parameters)."""

    def decorate(fit):
        @functools.wraps(fit)
        def checked_fit(estimator, *args, **kwargs):
            skip = get_config()["skip_parameter_validation"]
            if not skip:
                estimator._validate_params()
            with config_context(skip_parameter_validation=prefer_skip_nested_validation or skip):
                return fit(estimator, *args, **kwargs)

        return checked_fit

    return decorate


def check_sample_weight(sample_weight, X, *, ensure_non_negative: bool = False) -> np.ndarray:
    """``sample_weight`` as a float array of one weight per row of ``X`` (``None``: every weight 1).

    A scalar is every row's weight; the weights must be finite and, with
    ``ensure_non_negative``, at least 0.

    Examples
    --------
    >>> check_sample_weight(None, np.zeros((3, 2))).tolist(), check_sample_weight(2, np.zeros((2, 1))).tolist()
    ([1.0, 1.0, 1.0], [2.0, 2.0])
    """
    n_samples = X.shape[0]
    if sample_weight is None:
        return np.ones(n_samples)
    if isinstance(sample_weight, Real) and not isinstance(sample_weight, (bool, np.bool_)):
        weights = np.full(n_samples, sample_weight, dtype=np.float64)
    else:
        weights = np.asarray(sample_weight)
        if weights.dtype.kind not in "biuf":
            raise ValueError(f"sample_weight must be numbers, not {weights.dtype} values")
        if weights.dtype not in (np.float32, np.float64):
            weights = weights.astype(np.float64)
        if weights.ndim != 1:
            raise ValueError("Sample weights must be 1D array or scalar")
        if weights.shape != (n_samples,):
            raise ValueError(f"sample_weight.shape == {weights.shape}, expected {(n_samples,)}!")
    if not np.isfinite(weights).all():
        raise ValueError("Input sample_weight contains NaN or infinity.")
    if ensure_non_negative and (weights < 0).any():
        raise ValueError("Negative values in data passed to `sample_weight`")
    return weights
