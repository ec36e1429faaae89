"""Errors raised by dimbsvm for bad input, bad jobs and damaged stores.

Each is a ``ValueError`` subclass so that callers that already catch
``ValueError`` (as scikit-learn users do) keep working; the CLI turns them
into a one-line message and a non-zero exit code.
"""

__all__ = ["DataError", "DimbsvmError", "JobSpecError", "StoreError", "one_line"]


class DimbsvmError(ValueError):
    """Base class of every error dimbsvm raises on purpose."""


class DataError(DimbsvmError):
    """A data file or array cannot be used: unreadable, malformed or invalid values."""


class StoreError(DimbsvmError):
    """A Zarr store is incomplete, damaged or not a dimbsvm store."""


class JobSpecError(DimbsvmError):
    """A job specification is invalid; raised before any work starts."""


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (its whitespace runs joined), or its type's name when it has none.

    Examples
    --------
    >>> one_line(ValueError("first\\n  second"))
    'first second'
    >>> one_line(KeyError())
    'KeyError'
    """
    return " ".join(str(exc).split()) or type(exc).__name__
