"""Stored feature stages of a job: the expensive part computed once per dataset, kept in the store.

Two stages can be stored: ``structural`` (its kNN graph) and ``similarity``
(the distances of every row to the reference rows). Both are computed on the
rows min-max scaled with the ranges of all rows (no labels), so that every
fold shares them, and found again by fingerprint (the data's and the stage's
parameters) on a second run, which logs that it reuses them.


A job's structural stage (``features: [{name: structural, stored: true}]``)
needs every row's k nearest rows. Refitting it per fold searches the fold's
whole training set in one task. A *stored* stage instead builds one kNN graph
of all rows, ``k_store`` neighbours each, into the store (by fingerprint:
the data's and the stage's parameters; a second run finds it and reuses it),
and each fold keeps, of every row's stored neighbours, the first k that are
training rows of that fold (:func:`~dimbsvm.features.structural.neighbors_among`).
Nothing about a test row's label is used; test rows' *features* are, as a
transductive graph over all rows needs.

The graph is built on the rows min-max scaled with the ranges of all rows
(no labels), so that every fold shares it; the x part of a row is scaled with
the fold's own scaler, as without a stored stage. With ``k_store`` at least
the number of other rows the fold's neighbours are exactly its kNN graph
(tested); with fewer, a row may keep fewer than k training neighbours, which
costs recall (``benchmarks/stored_stage_recall.py`` measures it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..exceptions import JobSpecError
from ..rows import block_rows_of, take_rows

__all__ = ["FoldStageRows", "StoredSimilarity", "StoredStructural", "build_stored_stage", "stored_stage_of"]

logger = logging.getLogger(__name__)

#: ``k_store`` when a job does not give it: three times ``n_neighbors``. With 80 % of the rows in a
#: fold's training set, a row's first 3k stored neighbours hold k training rows unless more than
#: 2k of them fall in the test fold.
K_STORE_FACTOR = 3


@dataclass(frozen=True)
class StoredStructural:
    """A structural stage read from a kNN graph stored in the job's store.

    Attributes
    ----------
    graph_path : str
        The stage group (its ``indices`` array: ``k_store`` neighbours of every row).
    n_neighbors, weight, base, levels, normalize
        As :class:`~dimbsvm.features.StructuralFeatures` (``normalize`` "none" or "l2").
    """

    graph_path: str
    n_neighbors: int
    weight: float
    base: str
    levels: int
    normalize: str
    reads_rows = True  # the x part is the fold-scaled row

    def for_fold(self, train_rows):
        """The stage as one fold uses it (nothing fold-specific to compute)."""
        return self

    def model_steps(self):
        """Steps of a standalone model for new rows: none (they would need a kNN index over every row)."""
        return None

    def row_view(self, X, steps, train_rows):
        """A fold's rows as its estimator sees them: the fold's ``steps``, then this stage (:class:`FoldStageRows`)."""
        return FoldStageRows(X, steps, self, train_rows)

    def features(self, X_scaled, rows, train_rows):
        """``[x, lambda * n(x)]`` of ``rows`` (dataset row numbers) for the fold with ``train_rows``."""
        from ..features.hik import encode
        from ..features.structural import neighbors_among, structural_rows
        from ..store import open_group

        rows = np.asarray(rows, dtype=np.int64)
        order = np.argsort(rows, kind="stable")
        stored = np.empty((rows.size, 0), dtype=np.int64)
        if rows.size:
            indices = open_group(self.graph_path, mode="r")["indices"]
            stored = np.empty((rows.size, indices.shape[1]), dtype=np.int64)
            stored[order] = indices.get_orthogonal_selection((rows[order], slice(None)))
        positions, _ = neighbors_among(stored, train_rows, self.n_neighbors)
        weight = self.weight / np.sqrt(self.n_neighbors) if self.normalize == "l2" else self.weight
        x_part = encode(X_scaled, self.levels) if self.base == "hik" else X_scaled
        return structural_rows(x_part, positions, len(train_rows), weight=weight)


@dataclass(frozen=True)
class StoredSimilarity:
    """A similarity stage read from the distances to its references stored in the job's store.

    A fold's Fisher features (eq. 10 of the similarity-kernel paper) are
    ``(mu - d(x)) / sigma`` with ``mu``, ``sigma`` the mean and spread of each
    distance over the fold's training rows: :meth:`for_fold` takes them from
    the stored distances of those rows, a chunk at a time.

    Attributes
    ----------
    group_path : str
        The stage group (``distances``: n x (modalities x references); ``mu``,
        ``sigma``: over every row).
    references : ndarray
        The reference rows, min-max scaled over all rows.
    modalities : list of dict
        The parsed distances.
    low, high : ndarray
        The all-rows ranges the rows were scaled with.
    mu, sigma : ndarray or None
        The fold's moments (set by :meth:`for_fold`).
    """

    group_path: str
    references: np.ndarray
    modalities: list
    low: np.ndarray
    high: np.ndarray
    mu: np.ndarray | None = None
    sigma: np.ndarray | None = None
    reads_rows = False  # the features are the stored distances alone

    def for_fold(self, train_rows):
        """The stage with the moments of the fold's training rows (read a chunk of distances at a time)."""
        from dataclasses import replace

        from ..features.moments import block_moments, check_spread, mean_and_spread, merge_moments
        from ..store import open_group

        distances = open_group(self.group_path, mode="r")["distances"]
        step = int(distances.chunks[0])
        train_rows = np.asarray(train_rows, dtype=np.int64)
        parts = []
        for start in range(0, distances.shape[0], step):
            first, stop = np.searchsorted(train_rows, [start, start + step])
            if stop > first:
                parts.append(block_moments(distances.get_orthogonal_selection(
                    (train_rows[first:stop], slice(None))), overwrite=True))
        mu, sigma = mean_and_spread(merge_moments(parts))
        shape = (len(self.modalities), self.references.shape[0])
        mu, sigma = mu.reshape(shape), sigma.reshape(shape)
        check_spread(mu, sigma, self.modalities)
        return replace(self, mu=mu, sigma=sigma)

    def features(self, X_scaled, rows, train_rows):
        """Fisher features of ``rows`` (dataset row numbers) from their stored distances."""
        from ..features.moments import fisher_vectors
        from ..store import open_group

        rows = np.asarray(rows, dtype=np.int64)
        distances = open_group(self.group_path, mode="r")["distances"]
        order = np.argsort(rows, kind="stable")
        D = np.empty((rows.size, distances.shape[1]))
        if rows.size:
            D[order] = distances.get_orthogonal_selection((rows[order], slice(None)))
        return fisher_vectors(D, self.mu, self.sigma)

    def model_steps(self):
        """``[scaler, similarity]`` fitted as the stage is: a standalone model for new rows.

        The scaler holds the all-rows ranges; the similarity features the
        stored references and this fold's moments (for a final model, the
        moments of every row).
        """
        from sklearn.preprocessing import MinMaxScaler

        from ..features import SimilarityFeatures

        scaler = MinMaxScaler().partial_fit(np.stack([self.low, self.high]))
        features = SimilarityFeatures.from_moments(self.references, self.modalities, self.mu, self.sigma)
        return [scaler, features]

    def row_view(self, X, steps, train_rows):
        """A fold's rows as its estimator sees them: the fold's ``steps``, then this stage (:class:`FoldStageRows`)."""
        return FoldStageRows(X, steps, self, train_rows)


class FoldStageRows:
    """A fold's rows as the estimator sees them with a stored stage: the fold's scaler, then the stage.

    ``rows[ids]`` reads those rows of the data (a store is read a chunk at a
    time by the caller's blocks), scales them with the fold's fitted steps and
    appends the stage's features, which look the rows up by number.
    """

    def __init__(self, X, steps, stage: StoredStructural, train_rows):
        self.X, self.steps, self.stage = X, list(steps), stage
        self.train_rows = np.asarray(train_rows, dtype=np.int64)
        if isinstance(stage, StoredStructural):
            width = int(X.shape[1]) * (stage.levels if stage.base == "hik" else 1) + self.train_rows.size
        else:
            width = len(stage.modalities) * stage.references.shape[0]
        self.shape = (int(X.shape[0]), width)
        self.block_rows = block_rows_of(X)

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, rows):
        rows = np.asarray(rows, dtype=np.int64)
        block = None
        if self.stage.reads_rows:
            block = take_rows(self.X, rows)
            for step in self.steps:
                block = step.transform(block)
        return self.stage.features(block, rows, self.train_rows)


def stored_stage_of(features, *, scaler: str, impute: str, final_model: bool):
    """The job's stored feature stage, or None; checks what stored stages allow.

    Parameters
    ----------
    features : sequence of FeatureStageSpec
        The job's feature stages (``name``, ``params``, ``stored``).
    scaler, impute : str
        The job's preprocessing.
    final_model : bool
        Whether the job fits a final model (``output.model``).
    """
    stored = [stage for stage in features if stage.stored]
    if not stored:
        return None
    if len(features) != 1:
        raise JobSpecError("a stored feature stage must be the job's only feature stage")
    stage = stored[0]
    from ..estimators import storable_features

    storable = storable_features()
    if stage.name not in storable:
        raise JobSpecError(f"'features.0.stored' is true for {stage.name!r}; only {' and '.join(storable)} "
                           "can be stored (their expensive part is computed once per dataset)")
    params = stage.plain_params()
    if impute != "none" or scaler != "minmax":
        raise JobSpecError(f"a stored {stage.name} stage needs preprocessing.scaler: minmax and impute: none "
                           "(it is computed on rows min-max scaled over all rows)")
    if stage.name == "similarity":
        if params.get("reference_selection", "random") != "random":
            raise JobSpecError("a stored similarity stage chooses its references at random from all rows: "
                               "reference_selection 'stratified' would use the labels of test rows, 'kmeans' "
                               "is not supported stored")
        if not isinstance(params.get("references", 100), (int, float)) or isinstance(params.get("references"), bool):
            raise JobSpecError("a stored similarity stage takes references as a count or a fraction of the rows")
        return stage
    if params.get("normalize", "none") not in ("none", "l2"):
        raise JobSpecError("a stored structural stage takes normalize 'none' or 'l2' ('degree' needs every "
                           "training row's in-degree, which depends on the fold)")
    if final_model:
        raise JobSpecError("a job with a stored structural stage makes no final model yet (new rows would "
                           "need a kNN index over every row): set output.model: false")
    return stage


def build_stored_stage(stage, data, *, client):
    """Build (or find) the stage's stored part in the job's store; return the stage to read it by.

    Parameters
    ----------
    stage : FeatureStageSpec
        The job's stored stage (``name``, ``params``, ``k_store``, ``max_partition_rows``).
    data : JobData
        Its ``X`` must be a store's rows (:class:`~dimbsvm.store.StoreRows`).
    client : distributed.Client or None
    """
    from .graph_build import knn_graph
    from ..store import StoreRows, stage_is_complete
    from ..parallel import compute

    if not isinstance(data.X, StoreRows):
        raise JobSpecError("a stored feature stage needs a dimbsvm Zarr store as data.source; ingest the data "
                           "first (dimbsvm ingest FILE STORE.zarr)")
    X = data.lazy_X
    low, high = compute(X.min(axis=0), X.max(axis=0), client=client)
    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    span = np.where(high > low, high - low, 1.0)
    if stage.name == "similarity":
        return _build_similarity(stage, data, low=low, high=high, span=span, client=client)
    params = stage.plain_params()
    k = int(params.get("n_neighbors", 10))
    k_store = int(stage.k_store or K_STORE_FACTOR * k)
    n = len(data.y)
    k_store = min(k_store, n - 1)
    if k_store < k:
        raise JobSpecError(f"'features.0.k_store' is {k_store}; it must be at least n_neighbors={k}")
    graph = {"n_neighbors": k_store, "metric": params.get("metric", "euclidean"),
             "method": params.get("method", "auto"), "build_neighbors": params.get("build_neighbors"),
             "random_state": params.get("random_state", 0)}
    if stage.max_partition_rows is not None:  # the rows one build task holds: below a worker's memory
        graph["max_partition_rows"] = int(stage.max_partition_rows)
    from ..store.stages import stage_fingerprint  # Zarr and Dask: for jobs on a store only

    store = Path(data.X.path)
    fingerprint = stage_fingerprint("stored-structural-graph", data.meta.get("fingerprint"), np.empty(0),
                                    dict(graph, scaling="minmax-all-rows"))
    name = f"stages/knn-{fingerprint[:16]}"
    if stage_is_complete(store, name, fingerprint):
        logger.info("stored stage %s of %s reused (fingerprint %s)", name, store, fingerprint[:12])
    else:
        logger.info("building stored stage %s of %s: %d neighbours of every row", name, store, k_store)
        scaled = ((X - low) / span).astype(np.float32)
        knn_graph(scaled, n_neighbors=k_store, store=store, stage=name, fingerprint=fingerprint, client=client,
                  **{key: value for key, value in graph.items() if key != "n_neighbors" and value is not None})
    return StoredStructural(graph_path=str(store / name), n_neighbors=k, weight=float(params.get("weight", 1.0)),
                            base=params.get("base", "linear"), levels=int(params.get("levels", 100)),
                            normalize=params.get("normalize", "none"))


def _build_similarity(stage, data, *, low, high, span, client) -> StoredSimilarity:
    """The similarity stage: references drawn from all rows, distances of every row to them, in the store."""
    from ..features.distance_blocks import write_distance_blocks
    from ..features.modalities import parse_modalities
    from ..parallel import compute

    params = stage.plain_params()
    n = len(data.y)
    references = params.get("references", 100)
    m = int(references) if isinstance(references, int) else max(1, int(round(float(references) * n)))
    if m > n:
        raise JobSpecError(f"'features.0.params.references' asks for {m} reference rows; the data has {n}")
    seed = params.get("random_state")
    seed = 0 if seed is None else int(seed)  # a stored stage must be found again: its draw is seeded
    rows = np.sort(np.random.default_rng(seed).choice(n, size=m, replace=False))
    X = data.lazy_X
    modalities = parse_modalities(params.get("distances", "euclidean"), tuple(X.shape[1:]))
    params_key = {"references": m, "rows_seed": seed, "distances": params.get("distances", "euclidean"),
                  "scaling": "minmax-all-rows"}
    from ..store.stages import stage_fingerprint

    fingerprint = stage_fingerprint("stored-similarity", data.meta.get("fingerprint"), np.empty(0), params_key)
    name = f"stored-{fingerprint[:16]}"
    scaled = (X - low) / span
    (S,) = compute(scaled[rows], client=client)
    from ..store import stage_is_complete

    store = Path(data.X.path)
    if stage_is_complete(store, f"similarity/{name}", fingerprint):
        logger.info("stored stage similarity/%s of %s reused (fingerprint %s)", name, store, fingerprint[:12])
    else:
        logger.info("building stored stage similarity/%s of %s: distances of every row to %d references",
                    name, store, m)
    blocks = write_distance_blocks(scaled, np.asarray(S, dtype=np.float64), modalities, store=store, name=name,
                                   fingerprint=fingerprint, client=client)
    return StoredSimilarity(group_path=str(store / "similarity" / name), references=np.asarray(S, dtype=np.float64),
                            modalities=modalities, low=low, high=high, mu=blocks.mu, sigma=blocks.sigma)
