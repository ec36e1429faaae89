"""Job specifications: the YAML schema and its validation.

A job is validated completely before any work starts: structure and types by
JSON Schema (``jsonschema``), then the rules a schema cannot express (an
estimator's own parameter constraints, metric/label compatibility). Every
message names the offending key and, where there is a closed set, the
accepted values.

Example job::

    name: quickstart
    data:
      source: yeast5            # bundled name, data file, or a dimbsvm Zarr store
      nominal: []               # CSV columns to one-hot encode although they hold numbers
    preprocessing:
      scaler: minmax            # minmax | standard | none (fitted per training fold)
      impute: none              # none | mean | median (NaN is rejected with none)
    features:                   # optional stages fitted per training fold, after scaling
      - name: similarity
        params: {references: 50, distances: euclidean}
    # or, on a Zarr store, a structural stage whose kNN graph is built once and kept in the store:
    #   - {name: structural, params: {n_neighbors: 10}, stored: true, k_store: 30}
    # (max_partition_rows: N caps the rows one graph-build task holds, for workers of little memory)
    estimator:
      name: svc_balanced
      params: {C: 1.0}
    search:                     # optional: nested CV, the parameters chosen per training fold
      params: {C: [0.1, 1, 10], gamma: [0.3, scale]}   # or features.0.references; random: {log_uniform: [lo, hi]}
      method: grid              # grid | random (with n_candidates)
      cv: 3                     # inner stratified folds
      scoring: g_mean           # the objective; floor: {f_measure: 0.5} to require a minimum
      error_score: nan          # a candidate that raises on an inner fold scores this (a number, nan) or: raise
    cv:
      n_splits: 5
      n_repeats: 2
      random_state: 0           # repeat r shuffles with seed random_state + r
    metrics: [g_mean, f_measure, auc, a_mean]
"""

from __future__ import annotations

import copy
from pathlib import Path

import jsonschema
import yaml

from ..estimators import estimator_names, feature_names, make_estimator, make_feature
from ..model_selection.pipeline import IMPUTERS, SCALERS
from ..model_selection.stages import stored_stage_of
from ..model_selection.scoring import METRICS, QUALITY_METRICS
from ..model_selection.search import Search, candidate_params, estimator_params, stage_params
from ..exceptions import JobSpecError

__all__ = ["JOB_SCHEMA", "build_search", "describe_schema_error", "job_search", "load_job", "validate_job"]

JOB_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["data", "estimator"],
    "properties": {
        "name": {"type": "string", "pattern": r"^[A-Za-z0-9_.-]+$"},
        "description": {"type": "string"},
        "data": {
            "type": "object",
            "additionalProperties": False,
            "required": ["source"],
            "properties": {
                "source": {"type": "string", "minLength": 1},
                "nominal": {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True},
            },
        },
        "preprocessing": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "scaler": {"enum": list(SCALERS)},
                "impute": {"enum": list(IMPUTERS)},
            },
        },
        "features": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "params": {"type": "object"},
                    "stored": {"type": "boolean"},
                    "k_store": {"type": "integer", "minimum": 1},
                    "max_partition_rows": {"type": "integer", "minimum": 2},
                },
            },
        },
        "estimator": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name"],
            "properties": {
                "name": {"type": "string"},
                "params": {"type": "object"},
            },
        },
        "cv": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "n_splits": {"type": "integer", "minimum": 2},
                "n_repeats": {"type": "integer", "minimum": 1},
                "random_state": {"type": "integer", "minimum": 0},
            },
        },
        "search": {
            "type": "object",
            "additionalProperties": False,
            "required": ["params"],
            "properties": {
                "params": {"type": "object", "minProperties": 1},
                "method": {"enum": ["grid", "random"]},
                "n_candidates": {"type": "integer", "minimum": 1},
                "random_state": {"type": "integer", "minimum": 0},
                "cv": {"type": "integer", "minimum": 2},
                "scoring": {"enum": list(QUALITY_METRICS)},
                "floor": {
                    "type": "object",
                    "propertyNames": {"enum": list(QUALITY_METRICS)},
                    "additionalProperties": {"type": "number"},
                },
                "error_score": {"anyOf": [{"type": "number"}, {"enum": ["nan", "raise"]}]},
            },
        },
        "metrics": {
            "type": "array",
            "minItems": 1,
            "uniqueItems": True,
            "items": {"enum": list(METRICS)},
        },
        "output": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "model": {"type": "boolean"},
            },
        },
        "retrain": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "holdout": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "fraction": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                        "random_state": {"type": "integer", "minimum": 0},
                        "source": {"type": "string", "minLength": 1},
                    },
                },
                "gates": {
                    "type": "object",
                    "minProperties": 1,
                    "propertyNames": {"enum": ["g_mean", "f_measure", "auc", "a_mean"]},
                    "additionalProperties": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {"tolerance": {"type": "number", "minimum": 0}},
                    },
                },
            },
        },
        "execution": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "retries": {"type": "integer", "minimum": 0},
                "n_workers": {"type": "integer", "minimum": 1},
                "require_encryption": {"type": "boolean"},
            },
        },
    },
}

DEFAULTS = {
    "name": "job",
    "preprocessing": {"scaler": "minmax", "impute": "none"},
    "features": [],
    "estimator": {"params": {}},
    "cv": {"n_splits": 5, "n_repeats": 1, "random_state": 0},
    "metrics": ["g_mean", "f_measure", "auc", "a_mean"],
    "output": {"model": True},
    "retrain": {"holdout": {"fraction": 0.25, "random_state": 0}, "gates": {"g_mean": {"tolerance": 0.0}}},
    "execution": {"retries": 2, "require_encryption": False},
}


def read_yaml(path, what: str):
    """The YAML document in ``path``; a :class:`JobSpecError` naming ``what`` ("job", "suite") if unreadable.

    The one loader of job and suite files.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise JobSpecError(f"cannot read {what} file {path}: {exc.strerror or exc}") from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise JobSpecError(f"{what} file {path} is not valid YAML: {exc}") from exc


def check_schema(spec, schema: dict, *, what: str, where: str) -> None:
    """Raise a :class:`JobSpecError` on the first schema error of ``spec`` (shallowest key first)."""
    if not isinstance(spec, dict):
        raise JobSpecError(f"{where}: a {what} must be a mapping of keys to values, got {type(spec).__name__}")
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(spec),
                    key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        raise JobSpecError(f"{where}: {describe_schema_error(errors[0])}")


def load_job(path) -> dict:
    """Read a YAML job file and validate it (see :func:`validate_job`).

    Relative data paths are resolved against the job file's directory when
    they exist there, so a job runs the same from any working directory.
    """
    path = Path(path)
    job = validate_job(read_yaml(path, "job"), where=str(path))
    source = Path(job["data"]["source"])
    if not source.is_absolute() and (path.parent / source).exists():
        job["data"]["source"] = str((path.parent / source).resolve())
    return job


def validate_job(spec, *, where="job") -> dict:
    """Validate a job mapping and return it with defaults filled in.

    Raises
    ------
    JobSpecError
        Naming the key (as a dotted path) and the accepted values.

    Examples
    --------
    >>> job = validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "svc"}})
    >>> job["cv"]
    {'n_splits': 5, 'n_repeats': 1, 'random_state': 0}
    >>> validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "svc"}, "cv": {"folds": 3}})
    Traceback (most recent call last):
    ...
    dimbsvm.exceptions.JobSpecError: job: unknown key 'cv.folds'; accepted keys under 'cv': n_repeats, n_splits, random_state
    """
    check_schema(spec, JOB_SCHEMA, what="job", where=where)
    job = _with_defaults(spec)
    est = job["estimator"]
    if est["name"] not in estimator_names():
        raise JobSpecError(f"{where}: 'estimator.name' is {est['name']!r}; accepted: {', '.join(estimator_names())}")
    try:
        make_estimator(est["name"], est["params"])
    except JobSpecError as exc:
        raise JobSpecError(f"{where}: 'estimator.params': {exc}") from None
    for i, stage in enumerate(job["features"]):
        stage.setdefault("params", {})
        if stage["name"] not in feature_names():
            raise JobSpecError(f"{where}: 'features.{i}.name' is {stage['name']!r}; "
                               f"accepted: {', '.join(feature_names())}")
        try:
            make_feature(stage["name"], stage["params"])
        except JobSpecError as exc:
            raise JobSpecError(f"{where}: 'features.{i}.params': {exc}") from None
        for key in ("k_store", "max_partition_rows"):
            if key in stage and not stage.get("stored"):
                raise JobSpecError(f"{where}: 'features.{i}.{key}' applies to a stored stage; add 'stored: true'")
    try:
        stored_stage_of(job)  # what a stored stage allows
        job_search(job, check=True)  # every candidate a valid estimator
    except JobSpecError as exc:
        raise JobSpecError(f"{where}: {exc}") from None
    return job


#: A job's ``search`` keys left out, and their values.
SEARCH_DEFAULTS = {"method": "grid", "random_state": 0, "cv": 3, "scoring": "g_mean", "floor": {},
                   "error_score": "nan"}


def job_search(job: dict, *, check: bool = False) -> Search | None:
    """The job's parameter search (``None`` without a ``search`` key), its defaults filled in.

    ``check=True`` (what :func:`validate_job` does) also sets each
    candidate's parameters on the job's estimator and stages and validates
    them as ``estimator.params`` are, so an impossible value fails before
    work starts, naming the candidate; a validated job need not pay that again.

    Examples
    --------
    >>> job = validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "svc_balanced"},
    ...                     "search": {"params": {"C": [1, 10], "gamma": [0.1, "scale"]}}})
    >>> search = job_search(job)
    >>> len(search.candidates), search.n_splits, search.scoring
    (4, 3, 'g_mean')
    """
    if job.get("search") is None:
        return None
    return build_search(job["search"], (lambda params: _candidate_pipeline(job, params)) if check else None)


def _candidate_pipeline(job: dict, params: dict):
    """The estimator and feature stages of one candidate, validated (a JobSpecError names what is wrong)."""
    estimator = job["estimator"]
    built = make_estimator(estimator["name"], {**estimator["params"], **estimator_params(params)})
    stages = []
    for index, override in stage_params(params).items():
        if index >= len(job["features"]):
            raise JobSpecError(f"'search.params.features.{index}.*': the job has {len(job['features'])} feature "
                               "stage(s), numbered from 0")
        stage = job["features"][index]
        if stage.get("stored"):
            raise JobSpecError(f"'search.params.features.{index}.*': stage {index} is stored (computed once for "
                               "the whole store); only stages fitted per fold can be searched")
        stages.append(make_feature(stage["name"], {**(stage.get("params") or {}), **override}))
    return built, stages


def build_search(spec: dict, build=None) -> Search:
    """A :class:`Search` from a job's (or a suite method's) ``search`` mapping.

    ``build(params)``, if given, makes the estimator with a candidate's
    parameters, raising :class:`JobSpecError` for an invalid one.
    """
    spec = {**SEARCH_DEFAULTS, **spec}
    if "estimator" in spec["params"]:
        raise JobSpecError("'search.params.estimator': the base estimator is chosen in the estimator's params; "
                           "search its parameters instead (e.g. estimator__C)")
    if spec["method"] == "grid" and "n_candidates" in spec:
        raise JobSpecError("'search.n_candidates' applies to 'method: random'; a grid tries every combination")
    candidates = candidate_params(spec["params"], method=spec["method"], n_candidates=spec.get("n_candidates"),
                                  random_state=spec["random_state"])
    for i, params in enumerate(candidates if build is not None else ()):
        try:
            build(params)
        except JobSpecError as exc:
            raise JobSpecError(f"'search' candidate {i} {params}: {exc}") from None
    error_score = spec["error_score"]
    error_score = error_score if error_score == "raise" else float(error_score)  # "nan" (the default) too
    return Search(candidates, n_splits=spec["cv"], scoring=spec["scoring"], floor=dict(spec["floor"]),
                  error_score=error_score)


#: Mappings a job gives whole: they replace the default instead of merging into it.
_REPLACED = {"params", "gates"}


def _with_defaults(spec: dict, defaults: dict = DEFAULTS) -> dict:
    job = copy.deepcopy(defaults)
    for key, value in spec.items():
        if isinstance(value, dict) and isinstance(job.get(key), dict) and key not in _REPLACED:
            job[key] = _with_defaults(value, job[key])
        else:
            job[key] = copy.deepcopy(value)
    return job


def describe_schema_error(error) -> str:
    """One readable sentence for a JSON-Schema error."""
    key = ".".join(str(p) for p in error.absolute_path)
    schema = error.schema
    if error.validator == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        parent = f" under '{key}'" if key else ""
        full = ".".join(filter(None, [key, extra[0]]))
        return f"unknown key '{full}'; accepted keys{parent}: {', '.join(allowed)}"
    if error.validator == "required":
        missing = error.message.split("'")[1]
        full = ".".join(filter(None, [key, missing]))
        return f"missing required key '{full}'"
    if error.validator == "enum":
        return f"'{key}' is {error.instance!r}; accepted: {', '.join(map(str, schema['enum']))}"
    if error.validator == "type":
        return f"'{key}' must be of type {schema['type']}, got {type(error.instance).__name__} {error.instance!r}"
    if error.validator in ("minimum", "minItems", "minLength"):
        return f"'{key}' is {error.instance!r}; it must be at least {error.validator_value}"
    if error.validator in ("exclusiveMinimum", "exclusiveMaximum"):
        side = "greater" if error.validator == "exclusiveMinimum" else "less"
        return f"'{key}' is {error.instance!r}; it must be {side} than {error.validator_value}"
    if error.validator == "propertyNames":
        return f"'{key}' has key {error.instance!r}; accepted: {', '.join(schema['propertyNames']['enum'])}"
    return f"'{key or '(top level)'}': {error.message}"
