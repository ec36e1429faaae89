"""The mark of a task result that Dask's memory manager counts by its fields (no Dask here).

A Dask worker sizes the results it keeps with ``dask.sizeof``, which knows
arrays, sparse matrices and Python collections and sizes any other object
by ``sys.getsizeof``: a few dozen bytes for a dataclass holding a chunk's
scored rows or a fitted model. A dataclass that subclasses
:class:`SizedResult` is counted as the sum of its fields instead
(:mod:`dimbsvm.parallel.result_sizes` registers that in every worker), so
that the worker's managed memory, its spilling and its dashboard see what
the results hold.
"""

from __future__ import annotations

__all__ = ["SizedResult"]


class SizedResult:
    """Base of a dataclass task result whose size is the sum of its fields' (see the module docstring)."""

    __slots__ = ()
