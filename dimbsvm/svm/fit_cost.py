"""How much work a fit is, in *row-fits*, before it runs: from its rows and its solver alone.

One row-fit is what a LIBLINEAR fit spends on one training row. A kernel
fit (LIBSVM, and every estimator that is not LIBLINEAR's) of ``n`` rows
counts ``n * max(1, n / KERNEL_ROWS)``: its time grows about as the square
of the rows.

Two readers: the job's placement and cost estimate
(:mod:`dimbsvm.jobs.placement`), and the fold engine's task costs
(:mod:`dimbsvm.svm.task_costs`). Plain arithmetic, no Dask, no I/O.
"""

from __future__ import annotations

from ._native_rng import uses_liblinear

__all__ = ["KERNEL_ROWS", "fit_row_cost", "uses_linear_solver"]

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
