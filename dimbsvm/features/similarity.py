"""The similarity (Fisher) kernel as a scikit-learn transformer.

A row x is represented by its distances to a reference set S, one block of
``|S|`` features per distance ("modality"), each normalised by the mean and
spread of that distance over the training rows (paper eq. (10))::

    phi_ik(x) = (mu_ik - dist_k(x, s_i)) / sigma_ik

A linear SVM on phi is the Fisher kernel of the Gibbs model of eqs. (1)-(3)
with the Fisher information approximated by its diagonal (eq. (9)).
"""

from __future__ import annotations

import functools
import logging
import numbers
import warnings
from numbers import Integral

import dask.array as da
import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array, check_is_fitted, column_or_1d, validate_data

from dimbsvm._params import Interval, RealNotInt, StrOptions, ValidatedParams, fit_context
from dimbsvm._validation import refuse_sparse
from ..parallel import ClientParamMixin, compute, current_client
from ..exceptions import DataError
from .distances import DISTANCE_METRICS
from .distance_blocks import lazy_distances, reference_moments
from .modalities import modality_distances, parse_modalities
from .moments import block_moments, check_spread, fisher_vectors, mean_and_spread
from .references import choose_rows, choose_rows_chunked

__all__ = ["SimilarityFeatures"]

logger = logging.getLogger(__name__)


class SimilarityFeatures(ClientParamMixin, ValidatedParams, TransformerMixin, BaseEstimator):
    """Normalised distances to a reference set: the similarity (Fisher) kernel features.

    ``fit`` chooses the reference set S and estimates, for every reference
    ``s_i`` and distance ``k``, the mean ``mu_ik`` and standard deviation
    ``sigma_ik`` of ``dist_k(x, s_i)`` over the training rows; ``transform``
    returns ``phi_ik(x) = (mu_ik - dist_k(x, s_i)) / sigma_ik`` (eq. (10) of
    the paper), one block of ``|S|`` columns per distance, side by side. A linear
    SVM on these features is the paper's similarity kernel SVM.

    Input may be a table ``(n, n_features)``, univariate series
    ``(n, length)`` or multivariate series ``(n, channels, length)`` as
    :func:`~dimbsvm.datasets.load_ts` returns them (NaN right-padding of
    shorter series is understood by ``"dtw"``), in memory or as a Dask
    array. With a Dask array, ``fit`` never holds all rows: references are
    drawn by index, the moments come from per-chunk partial moments, and
    ``transform`` returns a lazy Dask array.

    Parameters
    ----------
    references : int, float or array-like, default=100
        The reference set: a number of training rows (all of them, with a
        ``UserWarning``, where the training data has fewer); a fraction in (0, 1]
        of the training rows (``1.0`` = all of them, the paper's choice for
        the UCR data); or an explicit array of reference rows shaped like
        the input rows.
    distances : str, dict or list, default="euclidean"
        The modalities: a metric name (``"euclidean"``, ``"manhattan"``,
        ``"cosine"``, ``"jensenshannon"``, ``"hamming"``, ``"dtw"``), or a
        dict such as ``{"metric": "hamming", "columns": [3, 4, 5]}`` or
        ``{"metric": "dtw", "channel": 0}``, or a list of these (one block
        each). See :mod:`dimbsvm.features.modalities` for every key.
    reference_selection : {"random", "stratified", "kmeans"}, default="random"
        How a number of references is chosen: rows at random; rows at random
        within each class, keeping the class proportions with at least one
        row per class (needs ``y``); or k-means centres (``KMeans`` in memory,
        one pass of ``MiniBatchKMeans`` over the chunks of a Dask array).
        Random choices depend only on the seed and the row positions, so a
        Dask array and the same rows in memory get the same references.
    random_state : int, RandomState instance or None, default=None
        Seed of the reference choice.
    client : distributed.Client or None, default=None
        Dask input only: the client ``fit``'s passes over the chunks run on;
        ``None`` uses the active client if any, else Dask's threads in this
        process. Resolved once at the start of ``fit``; dropped when the
        transformer is pickled. ``transform`` of a Dask array stays lazy.

    Attributes
    ----------
    references_ : ndarray of shape (n_references, ...)
        The reference rows S.
    reference_indices_ : ndarray of shape (n_references,) or None
        Training row of each reference, when they were chosen from the
        training rows (``None`` for k-means centres or explicit references).
    modalities_ : list of dict
        The parsed distances, one per block (name, metric, columns, channels,
        window, base).
    mu_ : ndarray of shape (n_modalities, n_references)
        Mean training distance to each reference, per modality.
    sigma_ : ndarray of shape (n_modalities, n_references)
        Standard deviation (``ddof=0``, as eq. (10)) of the training
        distances to each reference, per modality.
    n_features_in_ : int
        Values per input row (``channels * length`` for 3-D input).
    input_shape_ : tuple of int
        Shape of one input row; ``transform`` requires the same.
    feature_names_in_ : ndarray of str
        Column names of a 2-D ``X`` that has them (e.g. a DataFrame).

    Raises
    ------
    DataError
        From ``fit``: a reference with
        ``sigma = 0`` (named with its modality), stratified selection
        without ``y``, invalid values for a distance. From ``transform``:
        rows of a different shape than the training rows.

    See Also
    --------
    dimbsvm.features.distance_blocks.write_distance_blocks : the same distances
        written chunk by chunk to the store.

    Examples
    --------
    >>> import numpy as np
    >>> from dimbsvm.features import SimilarityFeatures
    >>> rng = np.random.default_rng(0)
    >>> X = np.hstack([rng.normal(size=(40, 3)), np.eye(2)[rng.integers(0, 2, 40)]])
    >>> sim = SimilarityFeatures(references=5, random_state=0, distances=[
    ...     {"metric": "euclidean", "columns": [0, 1, 2]},
    ...     {"metric": "hamming", "columns": [3, 4]}])
    >>> sim.fit_transform(X).shape
    (40, 10)
    >>> sim.mu_.shape, sim.get_feature_names_out()[:2].tolist()
    ((2, 5), ['euclidean[0:3]_s0', 'euclidean[0:3]_s1'])
    """

    _parameter_constraints: dict = {
        "references": [Interval(Integral, 1, None, closed="left"),
                       Interval(RealNotInt, 0, 1, closed="right"), "array-like"],
        "distances": [StrOptions(set(DISTANCE_METRICS)), dict, list],
        "reference_selection": [StrOptions({"random", "stratified", "kmeans"})],
        "random_state": ["random_state"],
        "client": "no_validation",
    }

    def __init__(self, references=100, distances="euclidean", reference_selection="random",
                 random_state=None, client=None):
        self.references = references
        self.distances = distances
        self.reference_selection = reference_selection
        self.random_state = random_state
        self.client = client

    @classmethod
    def from_moments(cls, references, modalities, mu, sigma, *, distances=None):
        """A fitted transformer from references and moments computed elsewhere (a stored stage).

        Parameters
        ----------
        references : ndarray of shape (n_references, ...)
        modalities : list of dict
            Parsed distances (:func:`~dimbsvm.features.modalities.parse_modalities`).
        mu, sigma : ndarray of shape (n_modalities, n_references)
        distances : str, dict or list, default=None
            The ``distances`` parameter to record (default: the modalities' names).

        Returns
        -------
        SimilarityFeatures
            As if fitted: ``transform`` gives ``(mu - d(x, S)) / sigma``.
        """
        references = np.asarray(references, dtype=np.float64)
        features = cls(references=references,
                       distances=distances if distances is not None else [m["name"] for m in modalities])
        features.references_, features.reference_indices_ = references, None
        features.modalities_ = list(modalities)
        features.mu_, features.sigma_ = np.asarray(mu, dtype=np.float64), np.asarray(sigma, dtype=np.float64)
        features.input_shape_ = tuple(int(s) for s in references.shape[1:])
        features.n_features_in_ = int(np.prod(features.input_shape_))
        return features

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Choose the references and estimate the moments of the distances to them.

        Parameters
        ----------
        X : array-like or dask.array.Array of shape (n_samples, n_features) or (n_samples, channels, length)
        y : array-like of shape (n_samples,), default=None
            Class labels; needed only by ``reference_selection="stratified"``.

        Returns
        -------
        self : SimilarityFeatures
        """
        self._fit(X, y)
        return self

    @fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X, y=None):
        """Fit, then transform the training rows, computing their distances once.

        Returns
        -------
        ndarray or dask.array.Array of shape (n_samples, n_modalities * n_references)
        """
        D = self._fit(X, y)
        if D is None:  # Dask input: stays lazy
            return self.transform(X)
        return fisher_vectors(D, self.mu_, self.sigma_)

    def transform(self, X):
        """Similarity features of eq. (10).

        Parameters
        ----------
        X : array-like or dask.array.Array, shaped like the training rows

        Returns
        -------
        phi : ndarray or dask.array.Array of shape (n_samples, n_modalities * n_references)
            Lazy (Dask) when ``X`` is a Dask array.
        """
        check_is_fitted(self)
        X = self._check_X(X, reset=False)
        if _is_dask(X):
            D = lazy_distances(X, self.references_, self.modalities_)
            return D.map_blocks(fisher_vectors, mu=self.mu_, sigma=self.sigma_, dtype=np.float64)
        return fisher_vectors(modality_distances(X, self.references_, self.modalities_),
                              self.mu_, self.sigma_)

    def get_feature_names_out(self, input_features=None):
        """Names of the output columns: ``<modality name>_s<reference index>``.

        Returns
        -------
        ndarray of str objects
        """
        check_is_fitted(self)
        m = self.references_.shape[0]
        return np.asarray([f"{mod['name']}_s{i}" for mod in self.modalities_ for i in range(m)],
                          dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        metrics = _metric_names(self.distances)
        tags.input_tags.three_d_array = True
        tags.input_tags.allow_nan = "dtw" in metrics  # NaN right-padding of shorter series
        tags.input_tags.positive_only = "jensenshannon" in metrics
        tags.target_tags.required = self.reference_selection == "stratified"
        return tags

    # -- fitting -------------------------------------------------------------------------------

    def _fit(self, X, y):
        """Fit; return the training distances when they were computed in memory."""
        X = self._check_X(X, reset=True)
        lazy = _is_dask(X)
        # where the passes over Dask chunks run: resolved once, passed down
        client = current_client(self.client) if lazy else None
        compute_on_client = functools.partial(compute, client=client)
        n = X.shape[0]
        self.modalities_ = parse_modalities(self.distances, X.shape[1:])
        y = self._check_y(y, n)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        self.references_, self.reference_indices_ = self._choose_references(X, y, seed, compute_on_client)
        shape = (len(self.modalities_), self.references_.shape[0])
        if lazy:
            D = None
            mu, sigma = reference_moments(X, self.references_, self.modalities_, client=client)
        else:
            D = modality_distances(X, self.references_, self.modalities_)
            mu, sigma = mean_and_spread(block_moments(D))
        self.mu_, self.sigma_ = mu.reshape(shape), sigma.reshape(shape)
        check_spread(self.mu_, self.sigma_, self.modalities_, self.reference_indices_)
        logger.info("similarity features: %d references x %d modalities from %d training rows",
                    shape[1], shape[0], n)
        return D

    def _check_X(self, X, *, reset):
        if _is_dask(X):
            if X.ndim not in (2, 3):
                raise DataError(f"X must be 2-D (n, n_features) or 3-D (n, channels, length), "
                                f"got shape {X.shape}")
            if not np.issubdtype(X.dtype, np.number):
                raise DataError(f"X must be numeric, got dtype {X.dtype}")
            if reset and X.shape[0] < 2:
                raise DataError(f"fit needs at least 2 rows (sigma of eq. (10) is 0 for n_samples={X.shape[0]})")
            self._check_shape(X.shape[1:], reset=reset)
            return X
        ndim = getattr(X, "ndim", None)
        if ndim is None and isinstance(X, (list, tuple)):
            try:  # nested lists: 3-D series or a 2-D table
                ndim = np.asarray(X).ndim
            except ValueError:
                ndim = None  # ragged: let scikit-learn's validation explain
        if ndim == 3:
            X = check_array(X, allow_nd=True, dtype=np.float64, ensure_all_finite=False,
                            ensure_min_samples=2 if reset else 1, input_name="X", estimator=self)
            self._check_shape(X.shape[1:], reset=reset)
            if reset and hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
            return X
        # Finite values are checked per distance: NaN is right-padding for DTW, an error elsewhere.
        # Two rows at least: sigma of eq. (10) is 0 for a single training row.
        refuse_sparse(self, X)
        X = validate_data(self, X, reset=reset, dtype=np.float64, ensure_all_finite=False,
                          ensure_min_samples=2 if reset else 1)
        self._check_shape(X.shape[1:], reset=reset)
        return X

    def _check_shape(self, row_shape, *, reset):
        row_shape = tuple(int(s) for s in row_shape)
        if reset:
            self.input_shape_ = row_shape
            self.n_features_in_ = int(np.prod(row_shape))
        elif row_shape != self.input_shape_:
            raise DataError(f"X has rows of shape {row_shape}, but {type(self).__name__} was fitted "
                            f"on rows of shape {self.input_shape_}; series must keep the training "
                            "length (pad shorter ones with NaN) and tables their columns")

    def _check_y(self, y, n):
        if self.reference_selection != "stratified":
            return None
        if y is None:
            raise DataError("reference_selection='stratified' needs the class labels y")
        if not _is_dask(y):
            y = column_or_1d(y, warn=True)
        if y.shape != (n,):
            raise DataError(f"y must have one label per row of X ({n}), got shape {y.shape}")
        return y

    def _choose_references(self, X, y, seed, compute):
        n = X.shape[0]
        if not isinstance(self.references, numbers.Real):  # an explicit array
            S = np.asarray(self.references, dtype=np.float64)
            if S.ndim != X.ndim or S.shape[1:] != X.shape[1:] or S.shape[0] < 1:
                raise DataError(f"explicit references must be rows shaped like X's, (k,) + "
                                f"{tuple(X.shape[1:])}; got shape {S.shape}")
            return S, None
        if isinstance(self.references, numbers.Integral):
            k = int(self.references)
        else:
            k = max(1, int(round(self.references * n)))
        if k > n:  # as scikit-learn's Nystroem does with n_components: all the rows there are
            warnings.warn(f"references={self.references!r} asks for {k} reference rows but the training data "
                          f"has only {n}; using all {n}", UserWarning, stacklevel=3)
            k = n
        if self.reference_selection == "kmeans":
            return self._kmeans_centres(X, k, seed, compute), None
        if _is_dask(X):
            rows = choose_rows_chunked(X.chunks[0], k, seed=seed, y=y, compute=compute)
            S = np.asarray(compute(X[rows])[0], dtype=np.float64)
        else:
            rows = choose_rows(n, k, seed=seed, y=y)
            S = X[rows]
        return S, rows

    def _kmeans_centres(self, X, k, seed, compute):
        from sklearn.cluster import KMeans, MiniBatchKMeans

        if any(m["metric"] == "hamming" for m in self.modalities_):
            raise DataError("reference_selection='kmeans' makes fractional centres, which have no "
                            "meaning for the 'hamming' distance of one-hot columns; use 'random' "
                            "or 'stratified'")
        shape = X.shape[1:]
        if not _is_dask(X):
            if np.isnan(X).any():
                raise DataError("reference_selection='kmeans' needs complete rows of one length; X "
                                "holds NaN (padding of unequal series?): use 'random' or 'stratified'")
            model = KMeans(n_clusters=k, random_state=seed, n_init="auto").fit(X.reshape(len(X), -1))
            return model.cluster_centers_.reshape((k, *shape))
        # One pass over the chunks, started from k rows chosen at random, never all rows at once.
        init_rows = choose_rows_chunked(X.chunks[0], k, seed=seed, compute=compute)
        init = np.asarray(compute(X[init_rows])[0], dtype=np.float64).reshape(k, -1)
        model = MiniBatchKMeans(n_clusters=k, init=init, n_init=1, random_state=seed)
        X = X.rechunk({0: max(X.chunks[0][0], k)})  # partial_fit needs >= k rows per batch
        for block in X.blocks:
            rows = np.asarray(compute(block)[0], dtype=np.float64).reshape(block.shape[0], -1)
            if len(rows) >= k:
                model.partial_fit(rows)
        return model.cluster_centers_.reshape((k, *shape))


def _is_dask(X):
    return isinstance(X, da.Array)


def _metric_names(distances):
    specs = distances if isinstance(distances, (list, tuple)) else [distances]
    return {s if isinstance(s, str) else s.get("metric") for s in specs if isinstance(s, (str, dict))}


