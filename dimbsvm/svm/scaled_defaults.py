"""Defaults that scale: what the classifiers' defaults become above :data:`LARGE_N` training rows.

The default configurations come from the papers, whose data sets have at most a
few thousand rows (every KEEL set has fewer than 6,000). Two of them grow faster
than the rows: an RBF ``SVC`` fitted on all training rows (time about quadratic
in the rows), and an ensemble whose bags are as large as the training set
(``members x`` that fit, plus each member scoring every out-of-bag row against
support vectors whose number grows with its bag). Above :data:`LARGE_N`
training rows, and only where the parameter was left at its default:

* :class:`~dimbsvm.svm.othr.OTHRClassifier` and
  :class:`~dimbsvm.svm.othr.THRClassifier`: ``estimator=None`` is
  :func:`large_n_estimator` (``LinearSVC()``) instead of
  ``SVC(kernel="rbf", C=1.0, gamma="scale")``;
* :class:`~dimbsvm.svm.ensemble.EnsembleOTHRClassifier`: ``max_samples="auto"``
  is ``LARGE_N`` (bags of ``LARGE_N`` rows) instead of ``None`` (bags as large
  as the default bag of the ``bootstrap``: the training set, or twice the
  minority for ``"balanced"``), and ``estimator=None`` (without ``param_grid``,
  whose settings name the RBF default's parameters) is :func:`large_n_estimator`:
  an RBF member scores every row out of its bag against its support vectors,
  which at millions of rows is most of a job.

Up to :data:`LARGE_N` rows nothing changes (the same parameters, the same
results). A parameter given explicitly is used as given at every size. The
fitted model records what was replaced in ``scaled_defaults_`` (empty when
nothing was), and ``fit`` logs one INFO line when it replaces a default. The
measurements (fit time and G-mean at 10^4, 10^5 and 10^6 rows) are in
``benchmarks/RESULTS.md``, "Defaults that scale".
"""

from __future__ import annotations

import logging

from sklearn.base import clone
from sklearn.svm import LinearSVC

__all__ = ["LARGE_N", "large_n_estimator", "scaled_defaults", "with_scaled_defaults"]

logger = logging.getLogger(__name__)

#: Training rows above which the defaults that grow faster than the rows are replaced: more than three times
#: the largest KEEL data set, and where one RBF SVC fit of the default still takes seconds on one core.
LARGE_N = 20_000


def large_n_estimator():
    """The base classifier ``estimator=None`` stands for above :data:`LARGE_N` training rows.

    Returns
    -------
    estimator : LinearSVC
        ``LinearSVC()`` (``C=1.0``, squared hinge loss), unfitted: time
        linear in the rows, where an RBF ``SVC``'s grows about as their square.
    """
    return LinearSVC()


def scaled_defaults(estimator, n_samples, n_minority=None) -> dict:
    """The parameters ``estimator.fit`` replaces on ``n_samples`` training rows, and their values.

    Parameters
    ----------
    estimator : estimator object
        Any estimator; one of dimbsvm's classifiers answers for itself, any
        other replaces nothing.
    n_samples : int or float
        Training rows.
    n_minority : int or float, default=None
        Minority rows among them (decides a balanced ensemble's bags);
        ``None``: unknown, taken as half the rows.

    Returns
    -------
    dict
        ``{parameter: value used}``; empty when the defaults stay as they are.

    Examples
    --------
    >>> from dimbsvm.svm import EnsembleOTHRClassifier, OTHRClassifier
    >>> scaled_defaults(EnsembleOTHRClassifier(), 5_000), scaled_defaults(EnsembleOTHRClassifier(), 10**6)
    ({}, {'estimator': LinearSVC(), 'max_samples': 20000})
    >>> scaled_defaults(OTHRClassifier(), 10**6)
    {'estimator': LinearSVC()}
    """
    method = getattr(estimator, "_scaled_defaults", None)
    if method is None:
        return {}
    n_minority = n_samples / 2 if n_minority is None else n_minority
    return method(n_samples, n_minority)


def with_scaled_defaults(estimator, n_samples, n_minority=None):
    """``estimator`` as its ``fit`` on ``n_samples`` rows would configure itself: a clone with the replaced
    parameters set explicitly, or ``estimator`` itself when nothing is replaced."""
    scaled = scaled_defaults(estimator, n_samples, n_minority)
    return clone(estimator).set_params(**scaled) if scaled else estimator


def log_scaled(owner, n_samples, scaled: dict) -> None:
    """One INFO line saying which defaults ``owner`` replaced for ``n_samples`` rows (nothing when none)."""
    if scaled:
        logger.info("%s: %d training rows are above LARGE_N=%d: default replaced by %s (set it explicitly to "
                    "choose otherwise)", type(owner).__name__, n_samples, LARGE_N,
                    ", ".join(f"{name}={value!r}" for name, value in scaled.items()))
