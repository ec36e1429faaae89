"""Input checks shared by estimators, beyond scikit-learn's ``validate_data``."""

from __future__ import annotations

import scipy.sparse as sp

__all__ = ["refuse_sparse"]


def refuse_sparse(estimator, X) -> None:
    """Raise a ``TypeError`` naming ``estimator`` when ``X`` is a sparse matrix or array.

    scikit-learn's own message does not say which estimator refused; in a
    pipeline or a job that is the first thing a user needs to know.
    """
    if sp.issparse(X):
        raise TypeError(f"{type(estimator).__name__} needs dense input: sparse data was passed for X "
                        f"({X.format} matrix of shape {X.shape}); use X.toarray(), or an estimator that accepts "
                        "sparse input (OTHRClassifier, THRClassifier, EnsembleOTHRClassifier)")
