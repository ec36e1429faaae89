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

Tuned peers
-----------
What a careful user of the peers would run: the SVM's ``C`` and ``gamma``
chosen by an inner grid search on the training fold. One grid for all of
them, :data:`TUNED_GRID` (``C`` in {0.1, 1, 10, 100} times ``gamma`` in
{0.3, 1, 3, "scale"}, 16 candidates), scored by 3-fold stratified CV without
shuffling (scikit-learn's ``cv=3``, deterministic), refitted on the whole
training fold: 49 SVM fits per training fold.

svc_balanced_grid
    ``GridSearchCV(SVC(class_weight="balanced"), TUNED_GRID, scoring=G-mean)``.
smote_svc_grid
    ``GridSearchCV(Pipeline(SMOTE, SVC), TUNED_GRID, scoring=G-mean)``, where
    SMOTE uses ``k_neighbors=3`` or, when a training set has fewer than 4
    minority rows (an inner fold of shuttle-c2-vs-c4), one less than its
    minority count (:class:`SmallSampleSMOTE`; no oversampling at all with a
    single minority row).
ensemble_grid_cv
    Not a peer but the baseline of dimbsvm's own search: dimbsvm's
    ``EnsembleOTHRClassifier()`` (10 members) inside the same
    ``GridSearchCV`` (G-mean, ``cv=3``), ``estimator__C`` and
    ``estimator__gamma`` over the grid: 490 member fits per training fold,
    against which :func:`dimbsvm.recommended`'s out-of-bag selection is measured.
auc_tuned_threshold
    ``(C, gamma)`` chosen by ROC-AUC with the same grid search, then
    ``TunedThresholdClassifierCV`` (as ``tuned_threshold``) around the SVC with
    those parameters (:class:`AucTunedThreshold`): 48 + 6 SVM fits.

Gradient boosting
-----------------
What most people would pick for imbalanced tabular data instead of an SVM
(LightGBM, the ``bench`` extra installs it). Not built on the base SVM: these
rows answer how dimbsvm compares with the usual alternative, not how it
treats the imbalance. One configuration, :data:`LIGHTGBM_PARAMS`: 200 trees
of at most 15 leaves, learning rate 0.05, 80 % of the rows per tree,
``class_weight="balanced"``, one thread (a fold is one task already).

lightgbm
    ``LGBMClassifier(**LIGHTGBM_PARAMS)``, its default threshold (probability 0.5).
lightgbm_tuned_threshold
    The same inside ``TunedThresholdClassifierCV`` for G-mean (as
    ``tuned_threshold``: 5-fold out-of-fold probabilities, 100 thresholds, refit).

Linear peers
------------
For sparse, high-dimensional data (text, hashed crosses), where a kernel SVM
is the wrong tool and LIBLINEAR the usual one; both take CSR rows as they are.

linear_svc_balanced
    ``LinearSVC(class_weight="balanced")``.
linear_tuned_threshold
    ``TunedThresholdClassifierCV(LinearSVC())`` maximising G-mean on
    ``decision_function`` (as ``tuned_threshold``).

Seeds
-----
Peers with randomness (``smote_svc``, ``balanced_bagging``, the LightGBM rows) take the
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
from numbers import Integral
from typing import Callable

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV, TunedThresholdClassifierCV
from sklearn.svm import SVC, LinearSVC

from dimbsvm._params import HasMethods, Interval, InvalidParameterError, ValidatedParams, check_declared_params
from dimbsvm.exceptions import JobSpecError
from dimbsvm.recommended import SVM_GRID
from dimbsvm.metrics import g_mean

__all__ = ["AucTunedThreshold", "BASE_SVC_PARAMS", "LIGHTGBM_PARAMS", "PEERS", "SmallSampleSMOTE", "TUNED_GRID",
           "base_svc", "fold_random_state", "make_peer", "peer_names"]

#: The one base SVM of every peer (and the default of dimbsvm's wrappers).
BASE_SVC_PARAMS = {"kernel": "rbf", "C": 1.0, "gamma": "scale"}


#: The inner grid of every tuned peer, as ``GridSearchCV`` parameters of a bare SVC.
TUNED_GRID = SVM_GRID

#: Inner folds of the tuned peers' grid search.
TUNED_CV = 3

#: The gradient-boosting peers' configuration (LightGBM's ``LGBMClassifier`` parameters): ``subsample`` acts only
#: with ``subsample_freq``; ``verbose=-1`` keeps LightGBM's per-fit notes off the suite's output.
LIGHTGBM_PARAMS = {"n_estimators": 200, "num_leaves": 15, "learning_rate": 0.05, "subsample": 0.8,
                   "subsample_freq": 1, "class_weight": "balanced", "n_jobs": 1, "verbose": -1}


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


def _grid(prefix: str = "") -> dict:
    return {f"{prefix}{name}": list(values) for name, values in TUNED_GRID.items()}


def _svc_balanced_grid(random_state):
    return GridSearchCV(base_svc(class_weight="balanced"), _grid(), scoring=make_scorer(g_mean), cv=TUNED_CV)


def _smote_svc_grid(random_state):
    from imblearn.pipeline import Pipeline

    pipeline = Pipeline([("smote", SmallSampleSMOTE(k_neighbors=3, random_state=random_state)),
                         ("svc", base_svc())])
    return GridSearchCV(pipeline, _grid("svc__"), scoring=make_scorer(g_mean), cv=TUNED_CV)


def _ensemble_grid_cv(random_state):
    from dimbsvm.svm import EnsembleOTHRClassifier

    return GridSearchCV(EnsembleOTHRClassifier(random_state=random_state), _grid("estimator__"),
                        scoring=make_scorer(g_mean), cv=TUNED_CV)


def _auc_tuned_threshold(random_state):
    return AucTunedThreshold()


def _linear_svc_balanced(random_state):
    return LinearSVC(class_weight="balanced", random_state=random_state)


def _linear_tuned_threshold(random_state):
    return TunedThresholdClassifierCV(LinearSVC(random_state=random_state), scoring=make_scorer(g_mean),
                                      response_method="decision_function")


def _lightgbm(random_state):
    from lightgbm import LGBMClassifier

    return LGBMClassifier(**LIGHTGBM_PARAMS, random_state=random_state)


def _lightgbm_tuned_threshold(random_state):
    return TunedThresholdClassifierCV(_lightgbm(random_state), scoring=make_scorer(g_mean),
                                      response_method="predict_proba")


class SmallSampleSMOTE(ValidatedParams, BaseEstimator):
    """SMOTE that lowers ``k_neighbors`` to what a small minority class allows.

    imbalanced-learn's ``SMOTE(k_neighbors=k)`` refuses a training set with
    ``k`` or fewer minority rows; an inner CV fold of a dataset with 6
    minority rows has 3 or 4. Here ``k`` becomes ``min(k, n_minority - 1)``
    for that fit, and a minority class of a single row is left as it is.
    Binary problems only, as every benchmark suite of dimbsvm.

    Parameters
    ----------
    k_neighbors : int, default=3
        Neighbours SMOTE interpolates towards, when the minority class allows.
    random_state : int, default=None
        Seed of SMOTE.
    """

    _parameter_constraints = {"k_neighbors": [Interval(Integral, 1, None, closed="left")],
                              "random_state": ["random_state"]}

    def __init__(self, k_neighbors=3, random_state=None):
        self.k_neighbors = k_neighbors
        self.random_state = random_state

    def fit_resample(self, X, y):
        """Oversample the minority class of ``(X, y)`` to the majority's size."""
        from imblearn.over_sampling import SMOTE

        _, counts = np.unique(y, return_counts=True)
        k = min(int(self.k_neighbors), int(counts.min()) - 1)
        if k < 1 or len(counts) < 2:
            return X, y
        return SMOTE(k_neighbors=k, random_state=self.random_state).fit_resample(X, y)

    def fit(self, X, y):
        """Nothing to learn; present so that pipelines accept the step."""
        return self


class AucTunedThreshold(ValidatedParams, ClassifierMixin, BaseEstimator):
    """An SVC whose ``(C, gamma)`` maximise ROC-AUC, then a G-mean-tuned threshold.

    The grid search (:data:`TUNED_GRID`, ``cv=3``, scoring ``roc_auc``) picks
    the SVM that ranks best; ``TunedThresholdClassifierCV`` with scikit-learn's
    defaults (5-fold out-of-fold decision values, 100 thresholds, refit) then
    places its threshold for G-mean, as the ``tuned_threshold`` peer does for
    the untuned SVC.

    Parameters
    ----------
    estimator : estimator, default=None
        The SVM searched over; ``SVC(kernel="rbf", C=1, gamma="scale")`` when None.
    param_grid : dict, default=None
        Grid of ``estimator`` parameters; :data:`TUNED_GRID` when None.
    cv : int, default=3
        Inner folds of the grid search.

    Attributes
    ----------
    best_params_ : dict
        The ``(C, gamma)`` chosen by ROC-AUC.
    classifier_ : TunedThresholdClassifierCV
        The fitted threshold tuner around the chosen SVM.
    classes_ : ndarray
        Class labels.
    """

    _parameter_constraints = {"estimator": [HasMethods(["fit", "decision_function"]), None],
                              "param_grid": [dict, None], "cv": [Interval(Integral, 2, None, closed="left")]}

    def __init__(self, estimator=None, param_grid=None, cv=TUNED_CV):
        self.estimator = estimator
        self.param_grid = param_grid
        self.cv = cv

    def fit(self, X, y):
        """Search ``(C, gamma)`` by ROC-AUC, then tune the threshold of the chosen SVM."""
        estimator = base_svc() if self.estimator is None else clone(self.estimator)
        grid = _grid() if self.param_grid is None else self.param_grid
        search = GridSearchCV(estimator, grid, scoring="roc_auc", cv=self.cv, refit=False).fit(X, y)
        self.best_params_ = search.best_params_
        chosen = clone(estimator).set_params(**self.best_params_)
        self.classifier_ = TunedThresholdClassifierCV(
            chosen, scoring=make_scorer(g_mean), response_method="decision_function").fit(X, y)
        self.classes_ = self.classifier_.classes_
        return self

    def predict(self, X):
        """Class labels at the tuned threshold."""
        return self.classifier_.predict(X)

    def decision_function(self, X):
        """The chosen SVM's decision values (the threshold is not subtracted)."""
        return self.classifier_.estimator_.decision_function(X)


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
    "svc_balanced_grid": Peer(_svc_balanced_grid, "GridSearchCV(SVC(class_weight='balanced')) over C x gamma "
                                                  "(16 candidates), G-mean, inner cv=3"),
    "smote_svc_grid": Peer(_smote_svc_grid, "GridSearchCV(Pipeline(SMOTE(k_neighbors=3, fewer for tiny "
                                            "minorities), SVC)) over C x gamma, G-mean, inner cv=3"),
    "ensemble_grid_cv": Peer(_ensemble_grid_cv, "dimbsvm EnsembleOTHRClassifier() in GridSearchCV over C x gamma, "
                                                "G-mean, inner cv=3 (490 member fits)"),
    "auc_tuned_threshold": Peer(_auc_tuned_threshold, "SVC with (C, gamma) chosen by ROC-AUC (grid, inner cv=3), "
                                                      "then TunedThresholdClassifierCV(G-mean)"),
    "lightgbm": Peer(_lightgbm, "LightGBM LGBMClassifier, 200 trees of 15 leaves, learning rate 0.05, "
                                "subsample 0.8, class_weight='balanced'"),
    "lightgbm_tuned_threshold": Peer(_lightgbm_tuned_threshold, "the lightgbm peer in TunedThresholdClassifierCV "
                                                                "(G-mean on predict_proba, cv=5)"),
    "linear_svc_balanced": Peer(_linear_svc_balanced, "scikit-learn LinearSVC(class_weight='balanced') (sparse "
                                                      "input as it is)"),
    "linear_tuned_threshold": Peer(_linear_tuned_threshold, "TunedThresholdClassifierCV(LinearSVC), G-mean on "
                                                            "decision_function, cv=5"),
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
        check_declared_params(estimator)  # (LightGBM's estimators declare none: checked when fitted)
    except InvalidParameterError as exc:
        raise JobSpecError(f"peer {name!r}: {exc}") from exc
    return estimator
