"""The one registry of estimators and feature stages that jobs and benchmarks can name.

A job says ``estimator: {name: svc_balanced, params: {C: 10}}`` and
``features: [{name: similarity, params: {references: 50}}]``; this module turns
those into fresh scikit-learn objects. Methods register here and nowhere else,
and nothing in a job is ever imported or evaluated as code.

Everything the job layer needs to know about a method is declared where it is
registered: the classes a saved model of it may contain (the types loading
trusts, :func:`trusted_types`), the fewest training rows its parameters need
(:func:`fold_rows_needed`), and, for a feature stage, whether it can be kept in
a store (:func:`storable_features`). What the estimator itself can say stays in
the estimator: sparse input in scikit-learn's tags, LIBLINEAR use in
``_uses_liblinear()`` (read by :mod:`dimbsvm.svm._native_rng`).
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from typing import Callable

from sklearn.base import BaseEstimator
from sklearn.svm import SVC, LinearSVC

from ._params import InvalidParameterError, check_declared_params
from .exceptions import JobSpecError

__all__ = [
    "register_estimator", "make_estimator", "estimator_names", "describe_estimators",
    "register_feature", "make_feature", "feature_names", "describe_features",
    "FoldRows", "fold_rows_needed", "storable_features", "trusted_types",
]


@dataclass(frozen=True)
class FoldRows:
    """The fewest training rows a method's parameters need, and what to change when a fold has fewer.

    Attributes
    ----------
    rows : int
        A training fold needs at least this many rows.
    asks : str
        What the parameters ask for, e.g. ``"references=50 rows"``.
    fix : str
        The change to suggest, with ``{key}`` for the job key of the
        parameters and ``{rows}`` for the rows there are, e.g.
        ``"set {key}.references to at most {rows}"``.
    """

    rows: int
    asks: str
    fix: str


@dataclass(frozen=True)
class _Entry:
    factory: Callable[[], BaseEstimator]
    description: str
    trusted_types: tuple[str, ...] = ()
    fold_rows: Callable[[dict], FoldRows | None] | None = None
    storable: bool = False


_REGISTRY: dict[str, _Entry] = {}
_FEATURES: dict[str, _Entry] = {}


def register_feature(name: str, factory: Callable[[], BaseEstimator], description: str, *,
                     trusted_types=(), fold_rows=None, storable: bool = False) -> None:
    """Make a feature stage (a transformer) available to jobs under ``name``.

    Parameters are those of :func:`register_estimator`, and

    storable : bool, default=False
        The stage can be computed once over a whole store and kept there
        (``stored: true`` in a job; built by :mod:`dimbsvm.model_selection.stages`).
    """
    if name in _FEATURES:
        raise ValueError(f"feature stage {name!r} is already registered")
    _FEATURES[name] = _Entry(factory, description, tuple(trusted_types), fold_rows, bool(storable))


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


def register_estimator(name: str, factory: Callable[[], BaseEstimator], description: str, *,
                       trusted_types=(), fold_rows=None) -> None:
    """Make an estimator available to jobs under ``name``.

    Parameters
    ----------
    name : str
        The name used in job specs.
    factory : callable
        Returns a new, unfitted estimator with the registry's defaults.
    description : str
        One line shown by ``dimbsvm estimators`` and in error messages.
    trusted_types : sequence of str, default=()
        Full import names of the package's classes a fitted model of this
        method may contain (scikit-learn's own are always trusted). A saved
        model is loaded only if every type in it is trusted.
    fold_rows : callable, default=None
        ``fold_rows(params) -> FoldRows or None``: the fewest training rows the
        parameters (``get_params()`` of the built estimator) need; checked
        against the smallest training fold before any work starts.
    """
    if name in _REGISTRY:
        raise ValueError(f"estimator {name!r} is already registered")
    _REGISTRY[name] = _Entry(factory, description, tuple(trusted_types), fold_rows)


def trusted_types() -> list[str]:
    """Every class a saved model may contain besides scikit-learn's, from all registered methods, sorted."""
    return sorted({t for registry in (_REGISTRY, _FEATURES) for entry in registry.values()
                   for t in entry.trusted_types})


def fold_rows_needed(kind: str, name: str, params: dict) -> FoldRows | None:
    """What the registered ``kind`` (``"estimator"`` or ``"feature"``) ``name`` with ``params`` needs of a fold."""
    entry = (_REGISTRY if kind == "estimator" else _FEATURES)[name]
    return entry.fold_rows(params) if entry.fold_rows is not None else None


def storable_features() -> list[str]:
    """Feature stages that can be kept in a store (``stored: true``), sorted."""
    return sorted(name for name, entry in _FEATURES.items() if entry.storable)


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


#: Parameters that say where an estimator's own fit runs (a client, processes): a job places its tasks itself.
_PLACEMENT_PARAMS = frozenset({"client", "n_jobs"})


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
    placed = sorted(set(params) & _PLACEMENT_PARAMS)
    if placed:
        raise JobSpecError(f"{kind} {name!r}: {', '.join(placed)} cannot be set in a job: its tasks run on the "
                           "job's workers (execution.workers or --scheduler)")
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise JobSpecError(
            f"{kind} {name!r} has no parameter(s) {', '.join(unknown)}; "
            f"accepted: {', '.join(sorted(k for k in valid if '__' not in k and k not in _PLACEMENT_PARAMS))}")
    estimator.set_params(**params)
    try:
        check_declared_params(estimator)
    except InvalidParameterError as exc:
        raise JobSpecError(f"{kind} {name!r}: {exc}") from exc
    return estimator


def _neighbors(params: dict) -> FoldRows | None:
    """A kNN graph over the training rows (each row's ``n_neighbors`` others): ``n_neighbors + 1`` rows."""
    k = params.get("n_neighbors")
    if not isinstance(k, Integral) or isinstance(k, bool):
        return None
    return FoldRows(int(k) + 1, f"n_neighbors={k}", "set {key}.n_neighbors below {rows}")


def _references(params: dict) -> FoldRows | None:
    """A count of reference rows drawn from the training rows (a fraction always fits)."""
    refs = params.get("references")
    if not isinstance(refs, Integral) or isinstance(refs, bool):
        return None
    return FoldRows(int(refs), f"references={refs} rows",
                    "set {key}.references to at most {rows}, or to a fraction such as 0.5")


_OTHR = ("dimbsvm.svm.othr.OTHRClassifier",)
_THR = ("dimbsvm.svm.othr.THRClassifier",)
_ENSEMBLE = ("dimbsvm.svm.ensemble.EnsembleOTHRClassifier", "dimbsvm.svm.members.OTHRMember",
             "dimbsvm.svm.ensemble.OTHRMember")  # the member's module in the models of tests/data/models-0.1.0

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
                 "distances to a reference set, normalised per reference (Fisher similarity kernel, eq. 10)",
                 trusted_types=("dimbsvm.features.similarity.SimilarityFeatures",), fold_rows=_references,
                 storable=True)


def _svm(**params):
    """The base SVM of ``recommended``, whose grid sets its ``C`` and ``gamma``."""
    return SVC(kernel="rbf", C=1.0, gamma="scale", **params)


# The threshold methods are built with their own defaults (estimator=None: the RBF SVC up to LARGE_N training
# rows, then what dimbsvm.svm.scaled_defaults says), so a job gets the defaults that scale; a job that sets
# estimator__C (or any base parameter) gets an explicit RBF SVC at every size.
def _othr():
    from .svm import OTHRClassifier

    return OTHRClassifier()


def _thr():
    from .svm import THRClassifier

    return THRClassifier()


def _ensemble_othr():
    from .svm import EnsembleOTHRClassifier

    return EnsembleOTHRClassifier()


register_estimator("othr", _othr, "SVM-OTHR: SVC with the threshold shift of best training G-mean (Yu et al.); "
                   "LinearSVC above 20,000 training rows",
                   trusted_types=_OTHR, fold_rows=_neighbors)
register_estimator("thr", _thr, "SVM-THR: SVC shifted by Lin & Chen's closed form (OTHR paper eq. 16); "
                   "LinearSVC above 20,000 training rows",
                   trusted_types=_THR)
register_estimator("ensemble_othr", _ensemble_othr, "EnSVM-OTHR: bagged OTHR members (RBF SVC) with one "
                   "shared shift; bags capped at 20,000 rows; members fan out as Dask tasks",
                   trusted_types=_ENSEMBLE, fold_rows=_neighbors)


def _recommended():
    from .recommended import recommended

    model = recommended()
    return model.set_params(estimator=_svm())


register_estimator("recommended", _recommended, "the quality-first configuration (dimbsvm.recommended()): "
                   "EnSVM-OTHR over a (C, gamma, class_weight) grid screened by one member per setting, the 3 "
                   "settings of best out-of-bag ROC-AUC among the 8 best screened averaged", trusted_types=_ENSEMBLE,
                   fold_rows=_neighbors)


def _act():
    from .svm import ACTClassifier

    return ACTClassifier()


register_estimator("act", _act, "ACT: adaptive conformal transformation of the RBF kernel, rounds stopped on "
                   "an internal validation split (Wu & Chang)",
                   trusted_types=("dimbsvm.svm.act.ACTClassifier", "dimbsvm.svm._conformal.ConformalTransform"))


def _bagged_act():
    from .svm import BaggedACTClassifier

    return BaggedACTClassifier()


register_estimator("bagged_act", _bagged_act, "ACT members on class-balanced bags of at most max_samples rows, "
                   "averaged: ACT past the rows one kernel holds; members fan out as tasks over a store",
                   trusted_types=("dimbsvm.svm.bagged_act.BaggedACTClassifier", "dimbsvm.svm.act.ACTClassifier",
                                  "dimbsvm.svm._conformal.ConformalTransform"))


def _structural():
    from .features import StructuralFeatures

    return StructuralFeatures()


def _hik():
    from .features import HIKEncoder

    return HIKEncoder()


register_feature("structural", _structural,
                 "[x, weight * n(x)]: kNN neighbourhood vector over the training rows appended (structural "
                 "similarity); base: hik with weight: 10 gives the paper's hik+str",
                 # (its index keeps the training rows: CSR ones for sparse data, which skops saves as .npz arrays)
                 trusted_types=("dimbsvm.features.structural.StructuralFeatures", "dimbsvm.graph.knn.KNNIndex",
                                "scipy.sparse._csr.csr_matrix"),
                 fold_rows=_neighbors, storable=True)
register_feature("hik", _hik, "unary code of [0, 1] features in `levels` steps: a linear SVM on it is a "
                 "histogram-intersection-kernel SVM", trusted_types=("dimbsvm.features.hik.HIKEncoder",))


def _hpc():
    from .svm import HPCClassifier

    # The paper's HPC-SVM has no imbalance handling: its plain hinge loss (the class's default
    # class_weight=None) is minimised, on a rare overlapping minority, by putting every row on the
    # majority side (held-back G-mean 0 on 1 % minority data, as an unweighted LinearSVC; 45.9 mean
    # G-mean over 20 KEEL sets against 81.8 weighted, benchmarks/RESULTS.md). The other four methods
    # handle the imbalance themselves; here it is scikit-learn's "balanced" cost, whose weights
    # n / (2 n_c) sum to n, so C and c1 keep the balance against the hypergraph term the paper tuned.
    return HPCClassifier(class_weight="balanced")


register_estimator("hpc", _hpc, "HPC-SVM: hinge SVM with hypergraph pairwise constraints, class_weight='balanced' "
                   "(linear; rbf/laplacian exact for small n, Nystroem above)",
                   trusted_types=("dimbsvm.svm.hpc.HPCClassifier",), fold_rows=_neighbors)
