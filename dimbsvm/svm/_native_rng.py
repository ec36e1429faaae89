"""Serialise fits that share scikit-learn's process-global LIBLINEAR random generator.

scikit-learn's liblinear wrapper seeds one C-level generator per *process*
(``sklearn.svm._newrand.set_seed``) and then trains without the GIL. Two
``LinearSVC`` fits running in threads of the same process (a Dask worker with
several threads, or an in-process cluster) therefore draw from one stream and
their results depend on timing. Ensemble members and fold fits must be identical
wherever they run, so fits whose estimator uses LIBLINEAR take this lock
(``fit_member``, the fold engine's ``fit_part``). Fits in
separate processes are unaffected, and other estimators never wait. Where
the execution policy knows that no other fit can run in this process at the
same time (a single-threaded Dask worker), it says so with
:func:`dimbsvm.parallel.policy.concurrent_fits` and the lock is skipped.
"""

from __future__ import annotations

import contextlib
import threading

from ..parallel.policy import fits_may_overlap

__all__ = ["fit_guard", "liblinear_guard", "uses_liblinear"]

_LOCK = threading.RLock()


def uses_liblinear(estimator) -> bool:
    """True if ``estimator``, or an estimator nested in it (a pipeline step, a base), trains with LIBLINEAR."""
    if _trains_with_liblinear(estimator):
        return True
    get_params = getattr(estimator, "get_params", None)
    if get_params is None:
        return False
    return any(_trains_with_liblinear(value) for value in get_params(deep=True).values())


def _trains_with_liblinear(estimator) -> bool:
    """scikit-learn's LIBLINEAR estimators, and any estimator that says so with ``_uses_liblinear()``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC, LinearSVR

    declared = getattr(estimator, "_uses_liblinear", None)
    if callable(declared):
        return bool(declared())
    if isinstance(estimator, (LinearSVC, LinearSVR)):
        return True
    return isinstance(estimator, LogisticRegression) and estimator.solver == "liblinear"


def liblinear_guard(estimator):
    """A context that holds the process-wide LIBLINEAR lock if ``estimator`` needs it (and others may fit)."""
    return _LOCK if fits_may_overlap() and uses_liblinear(estimator) else contextlib.nullcontext()


def fit_guard(model):
    """The lock for fitting ``model`` whole in this thread, if it needs one.

    None when ``model`` holds an estimator that fits its parts as tasks and
    takes the lock per part itself (``_locks_liblinear_per_task = True``, the
    ensemble): holding the lock across such a fit would block its tasks on the
    worker threads of an in-process cluster, a deadlock.
    """
    nested = model.get_params(deep=True).values() if hasattr(model, "get_params") else ()
    if any(getattr(est, "_locks_liblinear_per_task", False) for est in (model, *nested)):
        return contextlib.nullcontext()
    return liblinear_guard(model)
