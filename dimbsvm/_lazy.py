"""A package's names imported from their modules when first used (PEP 562's module ``__getattr__``).

Importing a package then costs only its ``__init__``: ``dimbsvm validate``
and a job on in-memory data do not pay for Zarr, Dask DataFrame or the
modules of features they do not use (``tests/test_import_cost.py``).
"""

from __future__ import annotations

import importlib

__all__ = ["lazy_names"]


def lazy_names(package: str, names: dict, namespace: dict):
    """``__getattr__`` and ``__dir__`` for a package whose ``names`` load on first use.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    names : dict
        Name -> module that defines it (relative to ``package``, or absolute).
    namespace : dict
        The package's ``globals()``: a name, once loaded, is kept there.

    Examples
    --------
    >>> getattr_, dir_ = lazy_names("json", {"loads_again": "json"}, {})
    >>> "loads_again" in dir_()
    True
    """
    def __getattr__(name):
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(names[name], package), name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
