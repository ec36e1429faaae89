"""The peers dimbsvm is compared with, all built on one base SVM.

Every peer wraps (or is) ``SVC(kernel="rbf", C=1.0, gamma="scale")``, so a
difference between two rows of a report comes from how the method treats the
imbalance, not from the SVM underneath. The benchmark pipeline puts a
``MinMaxScaler`` fitted on the training fold in front of each of them
(:func:`dimbsvm.model_selection.pipeline.build_pipeline`).

Peers
-----
svc
    The base SVM as is.
svc_balanced
    ``class_weight="balanced"``: per-class C inversely proportional to class size.
tuned_threshold
    scikit-learn ``TunedThresholdClassifierCV`` maximising G-mean over
    thresholds on ``decision_function``. A custom metric is passed as a
    scorer, ``make_scorer(g_mean)``: the classifier turns it into a curve
    scorer that thresholds the response named by its own
    ``response_method`` (the scorer's ``predict`` is not used). scikit-learn
    defaults kept: ``cv=None`` (stratified 5-fold *without* shuffling, so
    deterministic), ``thresholds=100`` (evenly spaced between the smallest and
    largest out-of-fold decision value), ``refit=True`` (the SVC is refitted on
    the whole training fold and the tuned threshold applied to it).
smote_svc
    imbalanced-learn ``Pipeline(SMOTE(k_neighbors=3), SVC)``: the minority
    class is oversampled to the majority size on the training fold only.
balanced_bagging
    imbalanced-learn ``BalancedBaggingClassifier(SVC, n_estimators=10)``:
    each bag is a bootstrap with the majority randomly undersampled to the
    minority size; members vote by averaged probabilities/decisions
    (imbalanced-learn defaults).

Seeds
-----
Peers with randomness (``smote_svc``, ``balanced_bagging``) take the
``random_state`` the suite's protocol gives them
(:func:`dimbsvm.bench.suite.estimator_random_state`): by default the constant 0
for every fold, as a user would write it, or, with
``estimator_random_state: per_fold``, a seed derived from the fold's repeat
seed and fold number (:func:`fold_random_state`). Either way reruns are
identical. ``tuned_threshold`` is deterministic with its default ``cv``.

Known limitation: ``BalancedBaggingClassifier`` bootstraps the training fold
*before* undersampling, so with very few minority rows a bag can hold none
and its fit fails ("needs to have more than 1 class"). On shuttle-c2-vs-c4
(6 minority rows) this happens for one fold in ten with per-fold seeds, not
with the constant seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.metrics import make_scorer
from sklearn.model_selection import TunedThresholdClassifierCV
from sklearn.svm import SVC
from sklearn.utils._param_validation import InvalidParameterError

from dimbsvm.exceptions import JobSpecError
from dimbsvm.metrics import g_mean

__all__ = ["BASE_SVC_PARAMS", "PEERS", "base_svc", "fold_random_state", "make_peer", "peer_names"]

#: The one base SVM of every peer (and the default of dimbsvm's wrappers).
BASE_SVC_PARAMS = {"kernel": "rbf", "C": 1.0, "gamma": "scale"}


def base_svc(**params) -> SVC:
    """The shared base SVM, with ``params`` (e.g. ``class_weight``) on top.

    Examples
    --------
    >>> base_svc(class_weight="balanced")
    SVC(class_weight='balanced')
    """
    return SVC(**{**BASE_SVC_PARAMS, **params})


def fold_random_state(seed: int, fold: int) -> int:
    """A reproducible ``random_state`` for the estimator fitted on one fold.

    Derived with :class:`numpy.random.SeedSequence` from ``(seed, fold)`` so
    that every (repeat, fold) pair gets its own stream and no two pairs
    collide, whatever the number of folds.

    Examples
    --------
    >>> fold_random_state(0, 1) == fold_random_state(0, 1) != fold_random_state(1, 0)
    True
    """
    return int(np.random.SeedSequence([int(seed), int(fold)]).generate_state(1)[0])


def _svc(random_state):
    return base_svc()


def _svc_balanced(random_state):
    return base_svc(class_weight="balanced")


def _tuned_threshold(random_state):
    # random_state only matters for a float cv (one shuffle split); the
    # default cv is a deterministic StratifiedKFold(5).
    return TunedThresholdClassifierCV(
        base_svc(), scoring=make_scorer(g_mean), response_method="decision_function")


def _smote_svc(random_state):
    from imblearn.over_sampling import SMOTE
    from imblearn.pipeline import Pipeline

    return Pipeline([("smote", SMOTE(k_neighbors=3, random_state=random_state)), ("svc", base_svc())])


def _balanced_bagging(random_state):
    from imblearn.ensemble import BalancedBaggingClassifier

    return BalancedBaggingClassifier(estimator=base_svc(), n_estimators=10, random_state=random_state)


@dataclass(frozen=True)
class Peer:
    """A peer method: ``factory(random_state)`` returns a new unfitted estimator."""

    factory: Callable[[int], BaseEstimator]
    description: str


PEERS: dict[str, Peer] = {
    "svc": Peer(_svc, "scikit-learn SVC(kernel='rbf', C=1, gamma='scale')"),
    "svc_balanced": Peer(_svc_balanced, "SVC with class_weight='balanced'"),
    "tuned_threshold": Peer(_tuned_threshold, "TunedThresholdClassifierCV(SVC), G-mean on decision_function, cv=5"),
    "smote_svc": Peer(_smote_svc, "imbalanced-learn Pipeline(SMOTE(k_neighbors=3), SVC)"),
    "balanced_bagging": Peer(_balanced_bagging, "imbalanced-learn BalancedBaggingClassifier(SVC, n_estimators=10)"),
}


def peer_names() -> list[str]:
    """Names a suite may use with ``kind: peer``, sorted."""
    return sorted(PEERS)


def make_peer(name: str, params: dict | None = None, *, random_state: int = 0) -> BaseEstimator:
    """A new peer estimator with ``params`` set and validated.

    Parameters
    ----------
    name : str
        One of :func:`peer_names`.
    params : dict, default=None
        ``set_params`` keywords, nested ones with ``__`` as in scikit-learn
        (``smote__k_neighbors``, ``estimator__C``). They override the seed.
    random_state : int, default=0
        Seed of the peer's own randomness, if it has any.

    Raises
    ------
    JobSpecError
        Unknown peer, unknown parameter, or a value the estimator rejects.

    Examples
    --------
    >>> make_peer("svc_balanced", {"C": 10.0})
    SVC(C=10.0, class_weight='balanced')
    """
    if name not in PEERS:
        raise JobSpecError(f"unknown peer {name!r}; accepted: {', '.join(peer_names())}")
    estimator = PEERS[name].factory(random_state)
    params = dict(params or {})
    valid = estimator.get_params(deep=True)
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise JobSpecError(f"peer {name!r} has no parameter(s) {', '.join(unknown)}; "
                           f"accepted: {', '.join(sorted(valid))}")
    estimator.set_params(**params)
    try:
        _validate_nested(estimator)
    except InvalidParameterError as exc:
        raise JobSpecError(f"peer {name!r}: {exc}") from exc
    return estimator


def _validate_nested(estimator) -> None:
    """Run scikit-learn's declared parameter checks on the estimator and every sub-estimator."""
    estimator._validate_params()
    for value in estimator.get_params(deep=True).values():
        if isinstance(value, BaseEstimator) and hasattr(value, "_validate_params"):
            value._validate_params()
