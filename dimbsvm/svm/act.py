"""ACT: adaptive conformal transformation of an SVM kernel (Wu & Chang, Fig. 6).

:class:`ACTClassifier` trains an SVM on a precomputed base kernel, then
repeatedly magnifies the kernel around its support vectors,
``K~(x, x') = D(x) D(x') K(x, x')``, and retrains, until the error on an
internal validation split stops improving. The numbers are computed by the
plain functions of :mod:`dimbsvm.svm._conformal`; this module validates,
runs the rounds and keeps the fitted state.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections import namedtuple
from numbers import Integral, Real

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from dimbsvm._params import Interval, StrOptions, check_sample_weight, fit_context
from dimbsvm._validation import refuse_sparse
from dimbsvm.exceptions import DataError
from dimbsvm.features.kernels import kernel_block
from dimbsvm.metrics import g_mean
from dimbsvm.svm import _conformal as cf
from dimbsvm.svm._base import _SignedScoreClassifier, binary_classes, positive_label

__all__ = ["ACT_VARIANTS", "CONFORMAL_SCALES", "ACTClassifier"]

logger = logging.getLogger(__name__)

#: ``"act"``: tau from feature-space distances (ACT_F); ``"act_input"``: from
#: input-space distances (ACT_I); ``"ct"``: Wu & Amari's non-adaptive CT_I.
ACT_VARIANTS = ("act", "act_input", "ct")
#: ``"sum"``: eq. 13 as published; ``"mean"``: D divided by the number of centres;
#: ``"trace"``: D scaled so the training kernel keeps its trace (scale-neutral).
CONFORMAL_SCALES = ("sum", "mean", "trace")


class ACTClassifier(_SignedScoreClassifier):
    """SVM with an adaptive conformal transformation of its kernel (ACT).

    Follows Fig. 6 of the ACT paper. Round 0 is an SVC on the base kernel
    ``K``. Each further round takes the previous model's support vectors --
    without the outliers on the wrong side of the boundary (footnote 3; if
    that leaves a class with none, that class keeps all of its support
    vectors) -- and for each support vector ``x_k`` computes ``tau_k^2``: the
    mean squared distance to opposite-class support vectors within
    ``M_k``, the mean of the nearest and farthest support-vector distance
    (eq. 14; no opposite-class vector inside: the nearest one's squared
    distance). Minority ``tau_k^2`` are multiplied by
    ``eta_p = |SV-|/|SV+|`` and majority ones by ``eta_n = |SV+|/|SV-|``
    (eqs. 16-17). Then ``D(x) = sum_k exp(-||x - x_k||_n^n / tau~_k^2)``
    (eq. 13, ``n = conformal_norm``, input-space distance as in Fig. 6
    step 15), ``K <- D(x) D(x') K`` (step 16) and the SVC is retrained.

    The paper stops when the test accuracy stops improving; here a stratified
    split of the training rows (``validation_fraction``) plays the test set:
    rounds run while the validation error improves by more than ``tol``, at
    most ``max_iter`` of them, and the round with the lowest validation error
    is kept (ties: the earlier round). With ``refit=True`` the whole
    procedure is then rerun on all rows for that many rounds.

    Parameters
    ----------
    C : float, default=1.0
        SVC penalty.
    kernel : {"rbf", "laplacian", "linear"} or callable, default="rbf"
        Base kernel: ``exp(-gamma ||x - x'||^2)``, ``exp(-gamma ||x - x'||_1)``
        (the paper's experiments), ``x . x'``, or ``kernel(A, B) -> ndarray``,
        whose Gram matrix is checked to be positive semi-definite.
    gamma : "scale", "auto" or float, default="scale"
        Width of rbf and laplacian: ``1 / (n_features * X.var())``,
        ``1 / n_features`` or the value given.
    conformal_norm : {1, 2}, default=2
        ``n`` in ``D(x)``; the paper discusses ``n = 1``.
    max_iter : int, default=10
        Most transformation rounds (the paper's ``T``).
    tol : float or None, default=1e-3
        The stop threshold ``theta`` on the validation error. ``None`` runs
        all ``max_iter`` rounds (and still keeps the best).
    validation_fraction : float, default=0.25
        Share of the training rows held out to decide when to stop. Copies
        of a row stay on one side. When a class is too small to be split,
        the rounds are judged on the training rows themselves (logged).
    variant : {"act", "act_input", "ct"}, default="act"
        ``"act"`` (ACT_F): ``tau`` from feature-space distances of the current
        kernel (eq. 15). ``"act_input"`` (ACT_I): from squared input-space
        distances. ``"ct"`` (CT_I, Wu & Amari): ``tau_k^2`` the mean squared
        input distance to the 3 nearest support vectors, all support vectors
        used, no class scaling.
    conformal_scale : {"sum", "mean", "trace"}, default="sum"
        ``"sum"``: ``D`` as published, which grows ``K`` by up to ``|SV|^2``
        per round, like a larger ``C``. ``"mean"``: ``D / |SV|``.
        ``"trace"``: ``D`` times the constant that keeps the trace of the
        training kernel, so only the shape of ``K`` changes.
    conformal_distance : {"input", "feature"}, default="input"
        ``||x - x_k||`` in ``D(x)``: input space, as eq. 13 and Fig. 6 step 15
        write it, or the feature space of the current kernel, the space
        ``tau`` of ``variant="act"`` is measured in.
    cumulative : bool, default=True
        ``True``: ``K~_t = D_t D_t K~_{t-1}`` (step 16 updates ``K`` in place).
        ``False``: ``K~_t = D_t D_t K``, rebuilt from the base kernel.
    stopping_metric : {"g_mean", "error"}, default="g_mean"
        Validation error ``1 - G-mean``, or the misclassification rate (the
        paper's ``epsilon``).
    refit : bool, default=True
        Rerun the best number of rounds on all rows (True) or keep the model
        trained without the validation rows (False).
    class_weight : dict, "balanced" or None, default=None
        Passed to the SVC.
    solver_max_iter : int, default=100_000
        Bound on LIBSVM's iterations per fit (-1: none). A fit that hits it is
        logged and recorded in ``rounds_``, still judged on the validation
        split, and ends the rounds: the transformed kernel has grown too
        ill-conditioned to go on.
    max_kernel_size : int, default=5000
        Most training rows one fit accepts (the ``n x n`` kernel is held in
        memory, a few copies of it); bag larger data with
        ``EnsembleOTHRClassifier(ACTClassifier(), max_samples=...)``.
    random_state : int, RandomState instance or None, default=None
        Draws the validation split.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
    pos_label_ : object
        The minority class (least frequent; ``classes_[1]`` on a tie).
    rounds_ : list of dict
        One per round of the validation run: ``round``, ``n_support``,
        ``n_support_minority``, ``n_support_majority``, ``n_outliers``,
        ``n_tau_fallback``, ``eta_p``, ``eta_n``, ``tau2_min``, ``tau2_median``,
        ``tau2_max``, ``kernel_scale`` (mean diagonal of ``K~`` over that of
        ``K``), ``solver_iterations``, ``converged``, ``validation_g_mean``,
        ``validation_error``.
    best_round_ : int
        The round kept (0: the base SVC).
    n_iter_ : int
        Transformation rounds run on the validation split.
    stop_reason_ : str
        Why the rounds ended: ``"no improvement"``, ``"max_iter"``,
        ``"solver bound"`` or ``"non-finite kernel"``.
    validation_ : {"holdout", "train"}
        What the rounds were judged on.
    transforms_ : list of ConformalTransform
        The final model's conformal functions, round 1 first.
    support_vectors_ : ndarray of shape (n_SV, n_features)
    support_ : ndarray of shape (n_SV,)
        Their rows in the data given to ``fit``.
    support_factor_ : ndarray of shape (n_SV,)
        Their conformal factor (product of the ``D_t``).
    dual_coef_ : ndarray of shape (1, n_SV)
    intercept_ : ndarray of shape (1,)
    gamma_ : float or None
        The base kernel's width.
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> X, y = make_classification(n_samples=200, weights=[0.9], random_state=0)
    >>> clf = ACTClassifier(max_iter=3, random_state=0).fit(X, y)
    >>> [r["round"] for r in clf.rounds_][:2]
    [0, 1]
    >>> clf.best_round_ <= 3
    True
    >>> clf.predict(X[:3])
    array([0, 0, 0])
    """

    _parameter_constraints: dict = {
        "C": [Interval(Real, 0, None, closed="neither")],
        "kernel": [StrOptions({"rbf", "laplacian", "linear"}), callable],
        "gamma": [StrOptions({"scale", "auto"}), Interval(Real, 0, None, closed="neither")],
        "conformal_norm": [Interval(Integral, 1, 2, closed="both")],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left"), None],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "variant": [StrOptions(set(ACT_VARIANTS))],
        "conformal_scale": [StrOptions(set(CONFORMAL_SCALES))],
        "conformal_distance": [StrOptions({"input", "feature"})],
        "cumulative": ["boolean"],
        "stopping_metric": [StrOptions({"g_mean", "error"})],
        "refit": ["boolean"],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "solver_max_iter": [Interval(Integral, -1, None, closed="left")],
        "max_kernel_size": [Interval(Integral, 2, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, C=1.0, kernel="rbf", gamma="scale", conformal_norm=2, max_iter=10, tol=1e-3,
                 validation_fraction=0.25, *, variant="act", conformal_scale="sum", conformal_distance="input",
                 cumulative=True, stopping_metric="g_mean", refit=True, class_weight=None,
                 solver_max_iter=100_000, max_kernel_size=5000, random_state=None):
        self.C, self.kernel, self.gamma, self.conformal_norm = C, kernel, gamma, conformal_norm
        self.max_iter, self.tol, self.validation_fraction = max_iter, tol, validation_fraction
        self.variant, self.conformal_scale, self.conformal_distance = variant, conformal_scale, conformal_distance
        self.cumulative, self.stopping_metric, self.refit = cumulative, stopping_metric, refit
        self.class_weight, self.solver_max_iter = class_weight, solver_max_iter
        self.max_kernel_size, self.random_state = max_kernel_size, random_state

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Run the transformation rounds, judged on a validation split.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data, finite; scaled to [0, 1] as the paper assumes.
        y : array-like of shape (n_samples,)
            Two classes, of any label type.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative row weights, passed to every round's ``SVC`` (row
            ``i``'s box becomes ``C s_i``; rows of weight 0 are never support
            vectors, so they shape no conformal transformation) and counted in
            the validation G-mean and error that choose the round. The
            validation split is drawn from the unweighted rows.

        Returns
        -------
        self : ACTClassifier
        """
        refuse_sparse(self, X)
        X, y = validate_data(self, X, y, dtype=np.float64)
        if sample_weight is not None:
            sample_weight = check_sample_weight(sample_weight, X, ensure_non_negative=True)
        classes, counts = binary_classes(y, type(self).__name__)
        self.classes_ = classes
        self.pos_label_ = positive_label(classes, counts, None)
        n = X.shape[0]
        if n > self.max_kernel_size:
            raise DataError(
                f"ACTClassifier needs the {n} x {n} kernel of its training rows "
                f"(~{3 * 8 * n * n / 2**30:.1f} GiB with its copies): {n} rows exceed "
                f"max_kernel_size={self.max_kernel_size}. Raise max_kernel_size, or bag it: "
                f"EnsembleOTHRClassifier(ACTClassifier(), max_samples={self.max_kernel_size}) "
                "fits members of bounded size as separate (Dask) tasks."
            )
        self.gamma_ = self._resolve_gamma(X)
        minority = y == self.pos_label_
        train, val = _validation_split(X, minority, self.validation_fraction, self.random_state)
        self.validation_ = "train" if val is None else "holdout"
        self.validation_indices_ = np.empty(0, dtype=np.int64) if val is None else val
        if val is None:
            logger.warning("ACT: a class is too small to hold out; rounds are judged on the training rows")
            val = train

        self.rounds_, best, best_error, previous = [], None, np.inf, np.inf
        self.stop_reason_ = "max_iter"
        for state in self._rounds(X, y, minority, train, val, sample_weight=sample_weight):
            if state is None:
                self.stop_reason_ = "non-finite kernel"
                break
            self.rounds_.append(state.record)
            if not state.record["converged"]:  # the kernel has become too ill-conditioned to go on
                self.stop_reason_ = "solver bound"
            error = (state.record["validation_error"] if self.stopping_metric == "error"
                     else 1.0 - state.record["validation_g_mean"])
            if error < best_error:  # ties keep the earlier round
                best, best_error = state, error
            if self.stop_reason_ == "solver bound":
                break
            if self.tol is not None and previous - error <= self.tol:  # Fig. 6 step 5: gain <= theta
                self.stop_reason_ = "no improvement"
                break
            previous = error
        self.best_round_ = best.record["round"]
        self.n_iter_ = len(self.rounds_) - 1
        if self.refit and self.validation_ == "holdout":
            # Fig. 6 on all rows, for the number of rounds the validation split chose.
            for state in self._rounds(X, y, minority, np.arange(n), None, n_rounds=self.best_round_,
                                      sample_weight=sample_weight):
                if state is None:
                    break
                best = state
        self._keep(X, best)
        logger.debug("ACT kept round %d of %d (%s)", self.best_round_, len(self.rounds_) - 1, self.stop_reason_)
        return self

    def _resolve_gamma(self, X):
        if callable(self.kernel) or self.kernel == "linear":
            return None
        if self.gamma == "scale":
            variance = X.var()
            return 1.0 / (X.shape[1] * variance) if variance > 0 else 1.0
        if self.gamma == "auto":
            return 1.0 / X.shape[1]
        return float(self.gamma)

    def _base_diag(self, X):
        """``K(x, x)`` of the base kernel for every row."""
        if callable(self.kernel):
            return np.array([self._base_kernel(x[None, :], x[None, :])[0, 0] for x in X])
        return np.einsum("ij,ij->i", X, X) if self.kernel == "linear" else np.ones(X.shape[0])

    def _base_kernel(self, A, B):
        if callable(self.kernel):
            return np.asarray(self.kernel(A, B), dtype=np.float64)
        return kernel_block(A, B, self.kernel, gamma=self.gamma_)

    def _rounds(self, X, y, minority, rows, val, n_rounds=None, sample_weight=None):
        """Yield the fitted state of round 0, 1, ...; None when the kernel stops being finite."""
        n_rounds = self.max_iter if n_rounds is None else n_rounds
        K_rows = self._base_kernel(X[rows], X[rows])
        if callable(self.kernel):
            cf.check_positive_kernel(K_rows)
        K_val = None if val is None else self._base_kernel(X[val], X[rows])
        base_diag = np.diagonal(K_rows).copy()
        diag = self._base_diag(X) if self.conformal_distance == "feature" else None
        base_trace = float(base_diag.sum())
        factor = np.ones(X.shape[0])  # product of the D_t at every row of X
        K_cur, transforms, info, svc = K_rows, [], {}, None
        for t in range(n_rounds + 1):
            if t > 0:
                transform, info = self._transform(X, y, rows, minority, svc, K_cur, factor, diag)
                D = self._evaluate(transform, X, factor, diag)
                if self.conformal_scale == "trace":  # K~_t keeps the trace of K
                    kept = factor[rows] ** 2 * base_diag if self.cumulative else base_diag
                    scale = np.sqrt(base_diag.sum() / max(np.dot(D[rows] ** 2, kept), 1e-300))
                    transform = dataclasses.replace(transform, scale=scale)
                    D = D * scale
                factor = factor * D if self.cumulative else D
                K_cur = cf.conformal_kernel(K_rows, factor[rows])  # eq. 10, Fig. 6 step 16
                if not np.isfinite(K_cur).all():
                    logger.warning("ACT round %d: the transformed kernel is not finite; stopping", t)
                    yield None
                    return
                transforms = transforms + [transform]
            svc, converged = self._fit_svc(K_cur, y[rows], t,
                                           None if sample_weight is None else sample_weight[rows])
            record = {"round": t, **_support_counts(svc, minority[rows]), **info,
                      "kernel_scale": float(np.trace(K_cur) / base_trace) if base_trace > 0 else np.nan,
                      "solver_iterations": int(np.sum(svc.n_iter_)), "converged": converged}
            if val is not None:
                scores = svc.decision_function(cf.conformal_kernel(K_val, factor[val], factor[rows]))
                predicted = svc.classes_[(scores > 0).astype(int)]
                val_weights = None if sample_weight is None else sample_weight[val]
                if val_weights is not None and not val_weights.sum() > 0:
                    raise ValueError("ACTClassifier: every validation row has sample_weight 0, so no round can be "
                                     "judged; give those rows weight, or set validation_fraction to hold out more")
                record["validation_g_mean"] = float(g_mean(y[val], predicted, sample_weight=val_weights))
                record["validation_error"] = float(np.average(predicted != y[val], weights=val_weights))
            logger.debug("ACT round %d: %s", t, record)
            yield _RoundState(record, svc, rows, factor.copy(), transforms)

    def _fit_svc(self, K, y, t, sample_weight=None):
        svc = SVC(kernel="precomputed", C=self.C, class_weight=self.class_weight,
                  max_iter=self.solver_max_iter)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            svc.fit(K, y, sample_weight=sample_weight)
        converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
        if not converged:
            logger.warning("ACT round %d: LIBSVM stopped at solver_max_iter=%d before converging",
                           t, self.solver_max_iter)
        return svc, converged

    def _transform(self, X, y, rows, minority, svc, K_cur, factor, diag):
        """The next round's conformal function from the current model's support vectors."""
        local = svc.support_
        sign = np.where(y[rows][local] == svc.classes_[1], 1.0, -1.0)
        wrong_side = sign * svc.decision_function(K_cur[local]) < 0  # footnote 3: outliers
        return cf.support_vector_transform(
            X[rows][local], minority[rows][local], wrong_side, variant=self.variant,
            K_sv=K_cur[np.ix_(local, local)], norm=int(self.conformal_norm),
            mean=self.conformal_scale == "mean",
            **({"sv_factor": factor[rows][local], "sv_diag": diag[rows][local]}
               if diag is not None else {}))

    def _keep(self, X, state):
        svc = state.svc
        self.transforms_ = list(state.transforms)
        self.support_ = state.rows[svc.support_]
        self.support_vectors_ = X[self.support_]
        self.support_factor_ = state.factor[self.support_]
        self.dual_coef_ = np.asarray(svc.dual_coef_, dtype=np.float64).reshape(1, -1)
        self.intercept_ = np.asarray(svc.intercept_, dtype=np.float64).reshape(1)
        self.n_support_ = np.asarray(svc.n_support_)

    def conformal_factor(self, X):
        """The fitted conformal factor ``prod_t D_t(x)`` (or the last ``D_t``) on rows of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        factor : ndarray of shape (n_samples,)
            1 everywhere when the base SVC (round 0) was kept.
        """
        check_is_fitted(self)
        refuse_sparse(self, X)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self._factor(X)

    def _factor(self, X):
        factor = np.ones(X.shape[0])
        diag = self._base_diag(X) if self.conformal_distance == "feature" else None
        for transform in self.transforms_:
            D = self._evaluate(transform, X, factor, diag)
            factor = factor * D if self.cumulative else D
        return factor

    def _evaluate(self, transform, X, factor, diag):
        """``D_t`` on rows of ``X``; ``factor`` is that of the kernel round t started from."""
        if transform.center_factor is None:
            return transform.factor(X)
        return transform.factor(X, factor, self._base_kernel(X, transform.centers), diag)

    def decision_function(self, X):
        """Signed distance to the boundary in the transformed kernel's feature space.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,)
            Positive values mean ``classes_[1]``.
        """
        check_is_fitted(self)
        refuse_sparse(self, X)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        K = self._base_kernel(X, self.support_vectors_)
        K_tilde = cf.conformal_kernel(K, self._factor(X), self.support_factor_)
        return K_tilde @ self.dual_coef_[0] + self.intercept_[0]


#: What one round leaves: its record, model, rows, conformal factors and transforms.
_RoundState = namedtuple("_RoundState", "record svc rows factor transforms")


def _support_counts(svc, minority):
    """Support-vector counts of a fitted SVC, per class."""
    n_min = int(minority[svc.support_].sum())
    return {"n_support": int(svc.support_.size), "n_support_minority": n_min,
            "n_support_majority": int(svc.support_.size - n_min)}


def _validation_split(X, minority, fraction, random_state):
    """Stratified (train, validation) rows; copies of a row stay together; None if impossible.

    Bags drawn with replacement hold copies of rows: the split is drawn over
    distinct (row, class) pairs so that no copy of a validation row is
    trained on.
    """
    keys = np.column_stack([X, minority])
    _, group = np.unique(keys, axis=0, return_inverse=True)
    group = group.ravel()
    n_groups = group.max() + 1
    group_minority = np.zeros(n_groups, dtype=bool)
    group_minority[group] = minority
    try:
        _, val_groups = train_test_split(
            np.arange(n_groups), test_size=fraction, stratify=group_minority,
            random_state=check_random_state(random_state))
    except ValueError:  # a class with fewer than 2 distinct rows, or too few for the fraction
        return np.arange(X.shape[0]), None
    in_val = np.isin(group, val_groups)
    train, val = np.flatnonzero(~in_val), np.flatnonzero(in_val)
    for part in (train, val):
        if part.size == 0 or minority[part].all() or not minority[part].any():
            return np.arange(X.shape[0]), None
    return train, val

