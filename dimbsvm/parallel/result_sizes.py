"""``dask.sizeof`` for dimbsvm's task results and scikit-learn's estimators, registered in a worker.

Dask sizes an object it has no rule for by ``sys.getsizeof``: a fitted
estimator with a million coefficients, or a dataclass holding a chunk's
scored rows, counts a few dozen bytes, so a worker's managed memory, its
spilling to disk and the dashboard miss most of what dimbsvm's tasks keep.
:func:`register` adds two rules: a :class:`~dimbsvm.parallel.sized.SizedResult`
dataclass is its fields' sizes summed, and a scikit-learn estimator its
attributes' (its fitted arrays, a pipeline's steps, an ensemble's members).
:func:`~dimbsvm.parallel.policy.run_task` registers them in each worker
process before its first task.
"""

from __future__ import annotations

import sys
from dataclasses import fields

from dask.sizeof import sizeof

from .sized import SizedResult

__all__ = ["register"]

_registered = False


def register() -> None:
    """Add the rules to ``dask.sizeof`` in this process (once)."""
    global _registered
    if _registered:
        return

    @sizeof.register(SizedResult)
    def _sizeof_fields(result) -> int:
        return sys.getsizeof(result) + sum(sizeof(getattr(result, field.name)) for field in fields(result))

    @sizeof.register_lazy("sklearn")
    def _register_estimators():
        from sklearn.base import BaseEstimator

        @sizeof.register(BaseEstimator)
        def _sizeof_estimator(estimator) -> int:
            # every attribute: Dask's rule for a dict samples ten values, and misses a model's coefficients
            return sys.getsizeof(estimator) + sum(sizeof(value) for value in vars(estimator).values())

    _registered = True
