"""A validated job as frozen, typed values: what every layer below the YAML reads.

:func:`dimbsvm.jobs.spec.validate_job` checks a job mapping and returns a
:class:`JobSpec`: one frozen dataclass per section (``data``,
``preprocessing``, ``features``, ``estimator``, ``cv``, ``search``,
``metrics``, ``output``, ``retrain``, ``execution``, ``tracking``), every default filled in.
Nothing after validation reads a YAML key: the runner, the fold engine, the
report and the CLI read attributes.

The job as validated is also the job's identity: a run directory and a
registry version carry the SHA-256 of its canonical mapping (the job as
written, with the schema's defaults), and resuming or skipping a retraining
compares them. :meth:`JobSpec.to_dict` gives that mapping back exactly, so
each section remembers which of its keys with a default the job wrote
(``written``): a default filled in for the typed value is not a key the job
wrote, and adding it would change every fingerprint.

Mappings given whole (an estimator's or a stage's ``params``, a search's
``params`` and ``floor``, the retraining gates) are read-only views of a
private copy, their lists tuples.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

__all__ = ["CVSpec", "DataSpec", "EstimatorSpec", "ExecutionSpec", "FeatureStageSpec", "GateSpec", "HoldoutSpec",
           "JobSpec", "OutputSpec", "PreprocessingSpec", "RetrainSpec", "SearchSpec", "TrackingSpec", "freeze", "thaw"]


def freeze(value):
    """A read-only deep copy of a YAML value: mappings as :class:`~types.MappingProxyType`, lists as tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({key: freeze(item) for key, item in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(item) for item in value)
    return copy.deepcopy(value)


def thaw(value):
    """The plain (mutable, JSON-like) copy of a :func:`freeze` d value: dicts and lists."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(item) for item in value]
    return copy.deepcopy(value)


def _frozen_mapping(value) -> Mapping:
    return value if isinstance(value, MappingProxyType) else freeze(value or {})


def _written(section: Mapping, keys) -> frozenset:
    return frozenset(key for key in keys if key in section)


@dataclass(frozen=True)
class DataSpec:
    """``data``: where the rows come from and which class is positive.

    Attributes
    ----------
    source : str
        A bundled name, a data file, a Zarr store (path or URL).
    nominal : tuple of str
        CSV columns one-hot encoded although they hold numbers.
    positive : str, number or None
        The positive class as the data names it; ``None``: the minority.
    unknown_categories : {"error", "ignore"} or None
        What predict does with a nominal value training never saw (``None``:
        not written, which means ``"error"``).
    written : frozenset of str
        Keys with a default that the job wrote (``nominal``).
    """

    source: str
    nominal: tuple = ()
    positive: object = None
    unknown_categories: str | None = None
    written: frozenset = frozenset()

    def to_dict(self) -> dict:
        out = {"source": self.source}
        if "nominal" in self.written:
            out["nominal"] = list(self.nominal)
        if self.positive is not None:
            out["positive"] = self.positive
        if self.unknown_categories is not None:
            out["unknown_categories"] = self.unknown_categories
        return out

    @classmethod
    def from_dict(cls, section: Mapping) -> DataSpec:
        return cls(source=section["source"], nominal=tuple(section.get("nominal", ())),
                   positive=section.get("positive"), unknown_categories=section.get("unknown_categories"),
                   written=_written(section, ("nominal",)))


@dataclass(frozen=True)
class PreprocessingSpec:
    """``preprocessing``: the scaler and the imputation fitted per training fold."""

    scaler: str = "minmax"
    impute: str = "none"

    def to_dict(self) -> dict:
        return {"scaler": self.scaler, "impute": self.impute}


@dataclass(frozen=True)
class FeatureStageSpec:
    """One entry of ``features``: a feature stage, fitted per fold or (``stored``) computed once in the store.

    Attributes
    ----------
    name : str
    params : Mapping
    stored : bool
    k_store, max_partition_rows : int or None
        A stored structural stage's neighbours kept per row, and the rows one
        graph-build task holds; ``None`` where the job gives none.
    written : frozenset of str
        Keys with a default that the job wrote (``stored``).
    """

    name: str
    params: Mapping = field(default_factory=lambda: MappingProxyType({}))
    stored: bool = False
    k_store: int | None = None
    max_partition_rows: int | None = None
    written: frozenset = frozenset()

    def __post_init__(self):
        object.__setattr__(self, "params", _frozen_mapping(self.params))

    def plain_params(self) -> dict:
        """A mutable copy of ``params`` (dicts and lists), for the stage's constructor."""
        return thaw(self.params)

    def to_dict(self) -> dict:
        out = {"name": self.name, "params": thaw(self.params)}
        if "stored" in self.written:
            out["stored"] = self.stored
        for key in ("k_store", "max_partition_rows"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    @classmethod
    def from_dict(cls, section: Mapping) -> FeatureStageSpec:
        return cls(name=section["name"], params=section.get("params") or {}, stored=bool(section.get("stored", False)),
                   k_store=section.get("k_store"), max_partition_rows=section.get("max_partition_rows"),
                   written=_written(section, ("stored",)))


@dataclass(frozen=True)
class EstimatorSpec:
    """``estimator``: a name of :func:`dimbsvm.estimators.estimator_names` and its parameters."""

    name: str
    params: Mapping = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self):
        object.__setattr__(self, "params", _frozen_mapping(self.params))

    def plain_params(self) -> dict:
        """A mutable copy of ``params`` (dicts and lists), for the estimator's constructor."""
        return thaw(self.params)

    def to_dict(self) -> dict:
        # the key order of the validated mapping (defaults first), which run records and model metadata keep
        return {"params": thaw(self.params), "name": self.name}


@dataclass(frozen=True)
class CVSpec:
    """``cv``: the outer stratified folds; repeat ``r`` shuffles with seed ``random_state + r``."""

    n_splits: int = 5
    n_repeats: int = 1
    random_state: int = 0

    @property
    def n_folds(self) -> int:
        """Fold tasks of the outer CV: ``n_splits * n_repeats``."""
        return self.n_splits * self.n_repeats

    def to_dict(self) -> dict:
        return {"n_splits": self.n_splits, "n_repeats": self.n_repeats, "random_state": self.random_state}


#: A job's ``search`` keys left out, and their values.
SEARCH_DEFAULTS = MappingProxyType({"method": "grid", "random_state": 0, "cv": 3, "scoring": "g_mean", "floor": {},
                                    "error_score": "nan"})


@dataclass(frozen=True)
class SearchSpec:
    """``search``: the parameter space of nested CV and how a candidate is chosen, as the job gives it.

    :func:`dimbsvm.jobs.spec.job_search` turns it into the fold engine's
    :class:`~dimbsvm.model_selection.search.Search` (the candidates drawn).

    Attributes
    ----------
    params : Mapping
        ``{parameter: values or distribution}``.
    method : {"grid", "random"}
    n_candidates : int or None
        Candidates drawn by ``method: random``.
    random_state : int
    cv : int
        Inner stratified folds.
    scoring : str
    floor : Mapping
        ``{metric: minimum}``.
    error_score : number or {"nan", "raise"}
        As written (``"nan"``: NaN).
    written : frozenset of str
        Keys with a default that the job wrote.
    """

    params: Mapping
    method: str = SEARCH_DEFAULTS["method"]
    n_candidates: int | None = None
    random_state: int = SEARCH_DEFAULTS["random_state"]
    cv: int = SEARCH_DEFAULTS["cv"]
    scoring: str = SEARCH_DEFAULTS["scoring"]
    floor: Mapping = field(default_factory=lambda: MappingProxyType({}))
    error_score: object = SEARCH_DEFAULTS["error_score"]
    written: frozenset = frozenset()

    def __post_init__(self):
        object.__setattr__(self, "params", _frozen_mapping(self.params))
        object.__setattr__(self, "floor", _frozen_mapping(self.floor))

    def to_dict(self) -> dict:
        """The ``search`` mapping as the job wrote it (no default added)."""
        out = {"params": thaw(self.params)}
        out.update({key: thaw(getattr(self, key)) for key in SEARCH_DEFAULTS if key in self.written})
        if self.n_candidates is not None:
            out["n_candidates"] = self.n_candidates
        return out

    def with_defaults(self) -> dict:
        """The ``search`` mapping with every default filled in (what a run records)."""
        return {**thaw(dict(SEARCH_DEFAULTS)), **self.to_dict()}

    @classmethod
    def from_dict(cls, section: Mapping) -> SearchSpec:
        filled = {**SEARCH_DEFAULTS, **section}
        return cls(params=section["params"], n_candidates=section.get("n_candidates"),
                   written=_written(section, SEARCH_DEFAULTS), **{key: filled[key] for key in SEARCH_DEFAULTS})


@dataclass(frozen=True)
class OutputSpec:
    """``output``: whether a run fits and saves a final model on every row."""

    model: bool = True

    def to_dict(self) -> dict:
        return {"model": self.model}


@dataclass(frozen=True)
class HoldoutSpec:
    """``retrain.holdout``: a stratified fraction held out (seeded), or a separate ``source``."""

    fraction: float = 0.25
    random_state: int = 0
    source: str | None = None

    def to_dict(self) -> dict:
        out = {"fraction": self.fraction, "random_state": self.random_state}
        if self.source is not None:
            out["source"] = self.source
        return out


@dataclass(frozen=True)
class GateSpec:
    """One gate of ``retrain.gates``: the challenger may be at most ``tolerance`` below the champion."""

    tolerance: float = 0.0
    written: frozenset = frozenset({"tolerance"})

    def to_dict(self) -> dict:
        return {"tolerance": self.tolerance} if "tolerance" in self.written else {}


@dataclass(frozen=True)
class RetrainSpec:
    """``retrain``: the holdout both models are scored on, and the gates a challenger must pass."""

    holdout: HoldoutSpec = field(default_factory=HoldoutSpec)
    gates: Mapping = field(default_factory=lambda: MappingProxyType({"g_mean": GateSpec()}))

    def __post_init__(self):
        object.__setattr__(self, "gates", MappingProxyType(dict(self.gates)))

    def to_dict(self) -> dict:
        return {"holdout": self.holdout.to_dict(), "gates": {m: gate.to_dict() for m, gate in self.gates.items()}}

    @classmethod
    def from_dict(cls, section: Mapping) -> RetrainSpec:
        holdout = section["holdout"]
        gates = {metric: GateSpec(tolerance=gate.get("tolerance", 0.0), written=_written(gate, ("tolerance",)))
                 for metric, gate in section["gates"].items()}
        return cls(holdout=HoldoutSpec(fraction=holdout["fraction"], random_state=holdout["random_state"],
                                       source=holdout.get("source")), gates=gates)


@dataclass(frozen=True)
class ExecutionSpec:
    """``execution``: task retries, an embedded cluster's workers, whether encryption is required, and the
    function that makes the cluster (``MODULE:CALLABLE``, as ``--cluster``)."""

    retries: int = 2
    require_encryption: bool = False
    n_workers: int | None = None
    cluster: str | None = None

    def to_dict(self) -> dict:
        out = {"retries": self.retries, "require_encryption": self.require_encryption}
        if self.n_workers is not None:
            out["n_workers"] = self.n_workers
        if self.cluster is not None:
            out["cluster"] = self.cluster
        return out


@dataclass(frozen=True)
class TrackingSpec:
    """``tracking``: where a run and a retraining are logged (optional; see :mod:`dimbsvm.jobs.tracking`).

    Not part of the job's identity: :func:`~dimbsvm.jobs.run_dir.job_fingerprint`
    leaves it out, since where results are logged does not change them.

    Attributes
    ----------
    mlflow : str
        An MLflow tracking URI (``sqlite:///mlflow.db``, ``http://host:5000``).
    """

    mlflow: str

    def to_dict(self) -> dict:
        return {"mlflow": self.mlflow}


@dataclass(frozen=True)
class JobSpec:
    """A validated job: every section typed and frozen, every default filled in.

    Built by :func:`dimbsvm.jobs.spec.validate_job` (or, for values checked
    elsewhere such as a benchmark suite's protocol, directly). Read its
    attributes; :meth:`to_dict` gives the canonical mapping back for what
    identifies the job (fingerprints) or writes it out.

    Examples
    --------
    >>> from dimbsvm.jobs import validate_job
    >>> job = validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "svc"}})
    >>> job.cv
    CVSpec(n_splits=5, n_repeats=1, random_state=0)
    >>> job.estimator.name, dict(job.estimator.params), job.preprocessing.scaler
    ('svc', {}, 'minmax')
    >>> JobSpec.from_dict(job.to_dict()) == job
    True
    """

    data: DataSpec
    estimator: EstimatorSpec
    name: str = "job"
    description: str | None = None
    preprocessing: PreprocessingSpec = field(default_factory=PreprocessingSpec)
    features: tuple = ()
    cv: CVSpec = field(default_factory=CVSpec)
    search: SearchSpec | None = None
    metrics: tuple = ("g_mean", "f_measure", "auc", "a_mean")
    output: OutputSpec = field(default_factory=OutputSpec)
    retrain: RetrainSpec = field(default_factory=RetrainSpec)
    execution: ExecutionSpec = field(default_factory=ExecutionSpec)
    tracking: TrackingSpec | None = None

    def __post_init__(self):
        object.__setattr__(self, "features", tuple(self.features))
        object.__setattr__(self, "metrics", tuple(self.metrics))

    @property
    def fitted_features(self) -> tuple:
        """The feature stages fitted per fold (every stage but a stored one)."""
        return tuple(stage for stage in self.features if not stage.stored)

    @property
    def stored_features(self) -> tuple:
        """The feature stages computed once and kept in the store."""
        return tuple(stage for stage in self.features if stage.stored)

    def to_dict(self) -> dict:
        """The canonical job mapping: as written, with the schema's defaults (what fingerprints hash)."""
        out = {"name": self.name, "data": self.data.to_dict(), "preprocessing": self.preprocessing.to_dict(),
               "features": [stage.to_dict() for stage in self.features], "estimator": self.estimator.to_dict(),
               "cv": self.cv.to_dict(), "metrics": list(self.metrics), "output": self.output.to_dict(),
               "retrain": self.retrain.to_dict(), "execution": self.execution.to_dict()}
        if self.description is not None:
            out["description"] = self.description
        if self.search is not None:
            out["search"] = self.search.to_dict()
        if self.tracking is not None:  # only when written: the mapping of a job without it is unchanged
            out["tracking"] = self.tracking.to_dict()
        return out

    def __reduce__(self):
        # pickled (to a task, to the report's side process) as its canonical mapping: the frozen sections'
        # read-only mappings do not pickle themselves
        return JobSpec.from_dict, (self.to_dict(),)

    @classmethod
    def from_dict(cls, job: Mapping) -> JobSpec:
        """The spec of a job mapping whose defaults are filled in (as validation leaves it); not validated here."""
        search = job.get("search")
        return cls(name=job["name"], description=job.get("description"), data=DataSpec.from_dict(job["data"]),
                   preprocessing=PreprocessingSpec(**job["preprocessing"]),
                   features=tuple(FeatureStageSpec.from_dict(stage) for stage in job["features"]),
                   estimator=EstimatorSpec(name=job["estimator"]["name"], params=job["estimator"]["params"]),
                   cv=CVSpec(**job["cv"]), search=None if search is None else SearchSpec.from_dict(search),
                   metrics=tuple(job["metrics"]), output=OutputSpec(**job["output"]),
                   retrain=RetrainSpec.from_dict(job["retrain"]), execution=ExecutionSpec(**job["execution"]),
                   tracking=TrackingSpec(**job["tracking"]) if job.get("tracking") else None)
