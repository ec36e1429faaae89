"""Input checks shared by estimators, beyond scikit-learn's ``validate_data``."""

from __future__ import annotations

import sys

import scipy.sparse as sp

__all__ = ["in_memory_sparse", "is_dask_array", "refuse_sparse"]


def is_dask_array(a) -> bool:
    """Whether ``a`` is a Dask array, without importing Dask.

    A Dask array can exist only once ``dask.array`` was imported, so code
    that also takes NumPy arrays can ask without importing it (and what it
    imports) for jobs on in-memory data.
    """
    da = sys.modules.get("dask.array")
    return da is not None and isinstance(a, da.Array)


def in_memory_sparse(X):
    """A Dask array of sparse chunks computed into one CSR matrix; anything else as it is.

    scikit-learn's checks turn a Dask array into an ndarray with
    ``np.asarray``, which for chunks of ``scipy.sparse`` matrices gives an
    object scalar, not rows. An estimator fitted in this process on such an
    array (no client to fit over its chunks) takes its CSR rows instead.
    """
    if is_dask_array(X) and sp.issparse(X._meta):
        return sp.csr_matrix(X.compute())
    return X


def refuse_sparse(estimator, X) -> None:
    """Raise a ``TypeError`` naming ``estimator`` when ``X`` is a sparse matrix or array.

    scikit-learn's own message does not say which estimator refused; in a
    pipeline or a job that is the first thing a user needs to know.
    """
    if sp.issparse(X):
        raise TypeError(f"{type(estimator).__name__} needs dense input: sparse data was passed for X "
                        f"({X.format} matrix of shape {X.shape}); use X.toarray(), or an estimator that accepts "
                        "sparse input (OTHRClassifier, THRClassifier, EnsembleOTHRClassifier)")
