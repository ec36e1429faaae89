"""The one registry of estimators and feature stages that jobs and benchmarks can name.

A job says ``estimator: {name: svc_balanced, params: {C: 10}}`` and
``features: [{name: similarity, params: {references: 50}}]``; this module turns
those into fresh scikit-learn objects. Methods register here and nowhere else,
and nothing in a job is ever imported or evaluated as code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from sklearn.base import BaseEstimator
from sklearn.svm import SVC, LinearSVC
from sklearn.utils._param_validation import InvalidParameterError

from .exceptions import JobSpecError

__all__ = [
    "register_estimator", "make_estimator", "estimator_names", "describe_estimators",
    "register_feature", "make_feature", "feature_names", "describe_features",
]


@dataclass(frozen=True)
class _Entry:
    factory: Callable[[], BaseEstimator]
    description: str


_REGISTRY: dict[str, _Entry] = {}
_FEATURES: dict[str, _Entry] = {}


def register_feature(name: str, factory: Callable[[], BaseEstimator], description: str) -> None:
    """Make a feature stage (a transformer) available to jobs under ``name``."""
    if name in _FEATURES:
        raise ValueError(f"feature stage {name!r} is already registered")
    _FEATURES[name] = _Entry(factory, description)


def feature_names() -> list[str]:
    """Feature stage names jobs may use, sorted."""
    return sorted(_FEATURES)


def describe_features() -> dict[str, str]:
    """``{name: description}`` for every registered feature stage."""
    return {name: _FEATURES[name].description for name in feature_names()}


def make_feature(name: str, params: dict | None = None) -> BaseEstimator:
    """A new feature stage from the registry with ``params`` set and validated.

    Examples
    --------
    >>> make_feature("similarity", {"references": 20})
    SimilarityFeatures(references=20)
    """
    return _build(_FEATURES, "feature stage", name, params)


def register_estimator(name: str, factory: Callable[[], BaseEstimator], description: str) -> None:
    """Make an estimator available to jobs under ``name``.

    Parameters
    ----------
    name : str
        The name used in job specs.
    factory : callable
        Returns a new, unfitted estimator with the registry's defaults.
    description : str
        One line shown by ``dimbsvm estimators`` and in error messages.
    """
    if name in _REGISTRY:
        raise ValueError(f"estimator {name!r} is already registered")
    _REGISTRY[name] = _Entry(factory, description)


def estimator_names() -> list[str]:
    """Names jobs may use, sorted."""
    return sorted(_REGISTRY)


def describe_estimators() -> dict[str, str]:
    """``{name: description}`` for every registered estimator."""
    return {name: _REGISTRY[name].description for name in estimator_names()}


def make_estimator(name: str, params: dict | None = None) -> BaseEstimator:
    """A new estimator from the registry with ``params`` set and validated.

    Parameters are checked against the estimator's declared constraints here,
    so a job with an impossible value fails before any work starts.

    Raises
    ------
    JobSpecError
        Unknown name, unknown parameter or invalid parameter value.

    Examples
    --------
    >>> make_estimator("svc", {"C": 10.0})
    SVC(C=10.0)
    """
    return _build(_REGISTRY, "estimator", name, params)


def _build(registry, kind, name, params):
    if name not in registry:
        raise JobSpecError(f"unknown {kind} {name!r}; accepted: {', '.join(sorted(registry))}")
    estimator = registry[name].factory()
    params = dict(params or {})
    base = params.pop("estimator", None)
    if base is not None:
        # a wrapper's base estimator is named from the registry (never an import path), then its
        # nested parameters (``estimator__C``) apply to it
        if "estimator" not in estimator.get_params(deep=False):
            raise JobSpecError(f"{kind} {name!r} has no base estimator to choose; drop 'estimator'")
        if not isinstance(base, str):
            raise JobSpecError(f"{kind} {name!r}: 'estimator' must be the name of a registered estimator "
                               f"({', '.join(sorted(_REGISTRY))}); got {base!r}")
        estimator.set_params(estimator=make_estimator(base))
    valid = estimator.get_params(deep=True)
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise JobSpecError(
            f"{kind} {name!r} has no parameter(s) {', '.join(unknown)}; "
            f"accepted: {', '.join(sorted(k for k in valid if '__' not in k))}")
    estimator.set_params(**params)
    try:
        estimator._validate_params()  # scikit-learn's declared constraints
    except InvalidParameterError as exc:
        raise JobSpecError(f"{kind} {name!r}: {exc}") from exc
    return estimator


register_estimator("svc", lambda: SVC(kernel="rbf", C=1.0, gamma="scale"),
                   "scikit-learn SVC (RBF kernel, C=1, gamma='scale')")
register_estimator("svc_balanced", lambda: SVC(kernel="rbf", C=1.0, gamma="scale", class_weight="balanced"),
                   "SVC with class_weight='balanced' (per-class C inversely proportional to class size)")
register_estimator("linear_svc", lambda: LinearSVC(C=1.0),
                   "scikit-learn LinearSVC (LIBLINEAR, squared hinge loss)")


def _similarity():
    from .features import SimilarityFeatures

    return SimilarityFeatures()


register_feature("similarity", _similarity,
                 "distances to a reference set, normalised per reference (Fisher similarity kernel, eq. 10)")


def _svm(**params):
    """The base SVM every method wraps unless a job says otherwise (``estimator__C`` etc.)."""
    return SVC(kernel="rbf", C=1.0, gamma="scale", **params)


def _othr():
    from .svm import OTHRClassifier

    return OTHRClassifier(estimator=_svm())


def _thr():
    from .svm import THRClassifier

    return THRClassifier(estimator=_svm())


def _ensemble_othr():
    from .svm import EnsembleOTHRClassifier

    return EnsembleOTHRClassifier(estimator=_svm())


register_estimator("othr", _othr, "SVM-OTHR: SVC with the threshold shift of best training G-mean (Yu et al.)")
register_estimator("thr", _thr, "SVM-THR: SVC shifted by Lin & Chen's closed form (OTHR paper eq. 16)")
register_estimator("ensemble_othr", _ensemble_othr, "EnSVM-OTHR: bagged OTHR members with perturbed shifts, "
                   "majority vote; members fan out as Dask tasks")


def _recommended():
    from .recommended import recommended

    model = recommended()
    return model.set_params(estimator=_svm())


register_estimator("recommended", _recommended, "the quality-first configuration (dimbsvm.recommended()): "
                   "EnSVM-OTHR over a (C, gamma, class_weight) grid, the 3 settings of best out-of-bag ROC-AUC averaged")


def _act():
    from .svm import ACTClassifier

    return ACTClassifier()


register_estimator("act", _act, "ACT: adaptive conformal transformation of the RBF kernel, rounds stopped on "
                   "an internal validation split (Wu & Chang)")


def _structural():
    from .features import StructuralFeatures

    return StructuralFeatures()


def _hik():
    from .features import HIKEncoder

    return HIKEncoder()


register_feature("structural", _structural,
                 "[x, weight * n(x)]: kNN neighbourhood vector over the training rows appended (structural "
                 "similarity); base: hik with weight: 10 gives the paper's hik+str")
register_feature("hik", _hik, "unary code of [0, 1] features in `levels` steps: a linear SVM on it is a "
                 "histogram-intersection-kernel SVM")


def _hpc():
    from .svm import HPCClassifier

    return HPCClassifier()


register_estimator("hpc", _hpc, "HPC-SVM: hinge SVM with hypergraph pairwise constraints (linear; rbf/laplacian "
                   "exact for small n, Nystroem above)")
