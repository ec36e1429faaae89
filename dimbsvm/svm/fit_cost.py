"""How much work a fit is, in *row-fits*, before it runs: from its rows and its solver alone.

One row-fit is what a LIBLINEAR fit spends on one training row. A kernel
fit (LIBSVM, and every estimator that is not LIBLINEAR's) of ``n`` rows
counts ``n * max(1, n / KERNEL_ROWS)``: its time grows about as the square
of the rows.

:func:`margin_fits` says how one fit of a threshold rule splits into the
inner cross-validation fits that give it out-of-fold margins, read from its
parameters here, beside the estimators.

Its reader is the fold engine's task costs (:mod:`dimbsvm.svm.task_costs`),
which price a job's plan (:mod:`dimbsvm.jobs.plan_price`). Plain
arithmetic, no Dask, no I/O.
"""

from __future__ import annotations

from numbers import Integral

from ._native_rng import uses_liblinear

__all__ = ["KERNEL_ROWS", "fit_row_cost", "margin_fits", "uses_linear_solver"]

#: Rows from which a kernel fit (LIBSVM) counts ``rows / KERNEL_ROWS`` row-fits per row: an RBF SVC's cost
#: over LinearSVC's on the same rows grows about in proportion to the rows (benchmarks/scaling_notes.md).
KERNEL_ROWS = 100


def uses_linear_solver(estimator) -> bool:
    """Whether ``estimator`` (or an ensemble's or a wrapper's base estimator) fits with LIBLINEAR.

    Examples
    --------
    >>> from sklearn.svm import SVC, LinearSVC
    >>> uses_linear_solver(LinearSVC()), uses_linear_solver(SVC()), uses_linear_solver(None)
    (True, False, False)
    """
    base = getattr(estimator, "estimator", None)
    base = estimator if base is None else base
    return base is not None and uses_liblinear(base)


def fit_row_cost(rows: float, estimator) -> float:
    """Row-fits of one fit of ``estimator`` on ``rows`` rows: linear for LIBLINEAR, about quadratic otherwise.

    Examples
    --------
    >>> from sklearn.svm import SVC, LinearSVC
    >>> fit_row_cost(1000, LinearSVC()), fit_row_cost(1000, SVC()), fit_row_cost(50, SVC())
    (1000.0, 10000.0, 50.0)
    """
    if uses_linear_solver(estimator):
        return float(rows)
    return float(rows) * max(1.0, rows / KERNEL_ROWS)


def margin_fits(estimator, rows: float) -> list:
    """``[(fits, rows of each)]`` of one model of ``rows`` rows: the model, and the inner cross-validation
    fits that give a threshold rule its out-of-fold margins (``margins="cv"``, ``member_margins="cv"``)."""
    margins = getattr(estimator, "margins", None) or getattr(estimator, "member_margins", None)
    k = getattr(estimator, "cv", None)
    if margins == "cv" and isinstance(k, Integral) and k > 1:
        return [(1, rows), (int(k), rows * (k - 1) / k)]
    return [(1, rows)]
