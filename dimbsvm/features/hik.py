"""The histogram intersection kernel (HIK) as an exact linear kernel on sparse unary codes.

A value ``v`` in [0, 1] is quantised to ``q = round(v * L)`` in ``{0, ..., L}``
and written as ``q`` ones followed by ``L - q`` zeros. For two such codes
the dot product is ``min(q, q')``, so for rows of d features::

    <u(x), u(x')> = sum_j min(q_j, q'_j)      (HIK on the quantised values)

and a linear SVM on the codes is exactly a HIK SVM (the structural-similarity
paper quantises to [0, 100], i.e. ``L = 100``, and uses lambda = 10 on that
scale). The codes are CSR matrices with ``sum_j q_j`` stored entries per row.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._params import Interval, ValidatedParams, fit_context

__all__ = ["HIKEncoder", "histogram_intersection", "quantize", "unary_code"]


def quantize(X, levels, *, clip=True):
    """Integer levels ``round(x * levels)`` of values in [0, 1] (halves round up).

    Parameters
    ----------
    X : ndarray
        Values, expected in [0, 1].
    levels : int
    clip : bool, default=True
        Values below 0 count as 0 and above 1 as 1. With ``False`` such a
        value raises ``ValueError``.

    Returns
    -------
    ndarray of int32, same shape as ``X``

    Examples
    --------
    >>> quantize(np.array([0.0, 0.244, 0.245, 1.3, -0.2]), 100)
    array([  0,  24,  25, 100,   0], dtype=int32)
    """
    X = np.asarray(X, dtype=np.float64)
    if np.isnan(X).any():
        raise ValueError("the histogram intersection code needs values in [0, 1]; got NaN")
    if not clip:
        outside = (X < 0) | (X > 1)
        if outside.any():
            where = np.argwhere(outside)[0]
            raise ValueError(f"value {float(X[tuple(where)])!r} at position {tuple(int(i) for i in where)} is outside "
                             "[0, 1]; scale the features first (MinMaxScaler) or pass clip=True")
    # + 0.5 then floor: halves round up, so the rule does not depend on float parity (np.round is half-even)
    return np.clip(np.floor(X * levels + 0.5), 0, levels).astype(np.int32)


def unary_code(rows, cols, q, n_rows, n_features, levels):
    """CSR unary code from (row, column, level) triples, sorted by row then column.

    Row ``r`` gets ones in columns ``c * levels + [0, q)`` for each of its
    triples; triples with ``q = 0`` add nothing.
    """
    q = np.asarray(q, dtype=np.int64)
    counts = np.bincount(rows, weights=q, minlength=n_rows).astype(np.int64)
    indptr = np.concatenate([[0], np.cumsum(counts)])
    total = int(indptr[-1])
    # Entry t of a triple's run is column c * levels + t: the run starts repeated, plus a ramp reset per run.
    run_start = np.repeat(np.cumsum(q) - q, q)
    indices = np.repeat(np.asarray(cols, dtype=np.int64) * levels, q) + (np.arange(total) - run_start)
    index_dtype = np.int32 if max(total, n_features * levels) < np.iinfo(np.int32).max else np.int64
    return sp.csr_matrix((np.ones(total), indices.astype(index_dtype), indptr.astype(index_dtype)),
                         shape=(n_rows, n_features * levels))


def _input_names(estimator, input_features):
    """A fitted transformer's input feature names, checked as scikit-learn checks them.

    ``feature_names_in_`` where ``fit`` saw column names, else ``x0, x1, ...``;
    ``input_features`` given must have ``n_features_in_`` names (and equal
    ``feature_names_in_`` where that is set). The rules, their errors and the
    ``NotFittedError`` before ``fit`` are those of scikit-learn's public
    :meth:`sklearn.base.OneToOneFeatureMixin.get_feature_names_out`, whose
    output names are its input names.
    """
    return OneToOneFeatureMixin.get_feature_names_out(estimator, input_features)


def _code_names(input_names, levels):
    """Names of the unary code's columns: ``<feature>_hik<j>``, j = 1..levels, in column order.

    Column ``<feature>_hik<j>`` is 1 where the feature's level ``round(v * levels)``
    is at least ``j``.
    """
    return np.asarray([f"{name}_hik{j}" for name in input_names for j in range(1, int(levels) + 1)], dtype=object)


def histogram_intersection(A, B):
    """The HIK matrix ``K[i, j] = sum_f min(A[i, f], B[j, f])`` of two dense arrays (for checks)."""
    A, B = np.asarray(A), np.asarray(B)
    return np.minimum(A[:, None, :], B[None, :, :]).sum(axis=2)


def encode(X, levels, *, clip=True):
    """The unary HIK code of dense or CSR ``X`` with values in [0, 1] (see :class:`HIKEncoder`)."""
    n, d = X.shape
    if sp.issparse(X):
        X = X.tocoo()
        rows, cols, q = X.row, X.col, quantize(X.data, levels, clip=clip)
        order = np.lexsort((cols, rows))
        rows, cols, q = rows[order], cols[order], q[order]
    else:
        q = quantize(X, levels, clip=clip).ravel()
        rows, cols = np.repeat(np.arange(n), d), np.tile(np.arange(d), n)
    return unary_code(rows, cols, q, n, d, levels)


class HIKEncoder(ValidatedParams, TransformerMixin, BaseEstimator):
    """Unary code of quantised features: a linear kernel on it is the histogram intersection kernel.

    Each feature value ``v`` (expected in [0, 1], e.g. after ``MinMaxScaler``)
    becomes ``q = round(v * levels)`` ones in that feature's block of
    ``levels`` columns, so ``transform(A) @ transform(B).T`` equals
    ``sum_f min(q_A[f], q_B[f])`` exactly. A linear SVM (``LinearSVC``) on
    the output is a HIK SVM on the quantised values.

    Parameters
    ----------
    levels : int, default=100
        Quantisation levels per feature (the paper's 100).
    clip : bool, default=True
        Values outside [0, 1] are clipped: below 0 codes as 0 and above 1 as
        ``levels``. This is what test rows scaled with a scaler fitted on the
        training rows need (they can fall slightly outside the training
        range, and are then as extreme as the most extreme training value).
        With ``False`` such a value raises ``ValueError``. NaN always raises.
    sparse_output : bool, default=True
        Return the codes as a CSR matrix. ``False`` returns a dense ndarray
        (``levels`` times as many columns as the input, mostly zeros where
        values are small): what pandas output
        (``set_output(transform="pandas")``, alone or in a ``Pipeline``)
        needs, since scikit-learn wraps only dense output in a DataFrame.

    Attributes
    ----------
    n_features_in_ : int

    Examples
    --------
    >>> X = np.array([[0.2, 1.0], [0.5, 0.3]])
    >>> codes = HIKEncoder(levels=10).fit_transform(X)
    >>> codes.shape, codes.nnz
    ((2, 20), 20)
    >>> (codes @ codes.T).toarray()          # min(2, 5) + min(10, 3) = 5
    array([[12.,  5.],
           [ 5.,  8.]])

    Column ``<feature>_hik<j>`` is 1 where ``round(v * levels) >= j``:

    >>> encoder = HIKEncoder(levels=2, sparse_output=False).fit(X)
    >>> encoder.get_feature_names_out().tolist()
    ['x0_hik1', 'x0_hik2', 'x1_hik1', 'x1_hik2']
    >>> encoder.transform(np.array([[0.5, 1.0]]))
    array([[1., 0., 1., 1.]])
    """

    _parameter_constraints: dict = {
        "levels": [Interval(Integral, 1, None, closed="left")],
        "clip": ["boolean"],
        "sparse_output": ["boolean"],
    }

    def __init__(self, levels=100, *, clip=True, sparse_output=True):
        self.levels = levels
        self.clip = clip
        self.sparse_output = sparse_output

    def __setstate__(self, state):
        super().__setstate__({"sparse_output": True, **state})  # saved before the parameter existed

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Record the number of features (the code has no fitted state beyond it).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self : HIKEncoder
        """
        X = validate_data(self, X, accept_sparse="csr")
        if not self.clip:
            quantize(X.data if sp.issparse(X) else X, self.levels, clip=False)  # report bad values at fit
        return self

    def transform(self, X):
        """The unary codes.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        codes : scipy.sparse.csr_matrix of shape (n_samples, n_features * levels)
            An ndarray with ``sparse_output=False``.
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", reset=False)
        codes = encode(X, self.levels, clip=self.clip)
        return codes if self.sparse_output else codes.toarray()

    def get_feature_names_out(self, input_features=None):
        """Names of the code's columns: ``<feature>_hik<j>`` for j = 1..levels, per input feature.

        Column ``<feature>_hik<j>`` is 1 where the feature's quantised level
        ``round(v * levels)`` is at least ``j`` (so the block of a feature
        holds ``q`` ones, then zeros).

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Input feature names: ``feature_names_in_`` when None (or
            ``x0, x1, ...`` where ``fit`` saw no column names); given, they
            must match those.

        Returns
        -------
        feature_names_out : ndarray of str objects, shape (``n_features_in_ * levels``,)
        """
        return _code_names(_input_names(self, input_features), self.levels)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
