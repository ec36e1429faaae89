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
      positive: positive        # optional: the positive class as the data names it; default: the minority
      unknown_categories: error # error | ignore: a nominal value training never saw, at predict time
    preprocessing:
      scaler: minmax            # minmax | standard | maxabs | none (fitted per training fold)
      impute: none              # none | mean | median (NaN is rejected with none)
    features:                   # optional stages fitted per training fold, after scaling
      - name: similarity
        params: {references: 50, distances: euclidean}
    # or, on a Zarr store, a structural stage whose kNN graph is built once and kept in the store:
    #   - {name: structural, params: {n_neighbors: 10}, stored: true, k_store: 30}
    # (max_partition_rows: N caps the rows one graph-build task holds, for workers of little memory)
    estimator:
      name: svc_balanced
      params: {C: 1.0}          # a random_state left unset is cv.random_state: the same job, the same records
    search:                     # optional: nested CV, the parameters chosen per training fold
      params: {C: [0.1, 1, 10], gamma: [0.3, scale]}   # or features.0.references; random: {log_uniform: [lo, hi]}
      method: grid              # grid | random (with n_candidates)
      cv: 3                     # inner stratified folds
      scoring: g_mean           # the objective; floor: {f_measure: 0.5} to require a minimum
      error_score: nan          # a candidate that raises on an inner fold scores this (a number, nan) or: raise
    cv:
      n_splits: 5
      n_repeats: 2
      random_state: 0           # repeat r shuffles with seed random_state + r (below 2**32)
                                # at most 1000 splits, 1000 repeats, 10000 fold tasks in all
    metrics: [g_mean, f_measure, auc, a_mean]
"""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import jsonschema

from ..estimators import estimator_names, feature_names, make_estimator, make_feature
from ..model_selection.pipeline import IMPUTERS, SCALERS
from ..model_selection.stages import stored_stage_of
from ..model_selection.scoring import METRICS, QUALITY_METRICS
from ..model_selection.search import Search, candidate_params, estimator_params, stage_params
from ..exceptions import JobSpecError
from .job_spec import SEARCH_DEFAULTS, JobSpec
from .yaml_load import parse_yaml, read_text_file

__all__ = ["JOB_SCHEMA", "MAX_FOLD_TASKS", "JobSpec", "build_search", "describe_schema_error", "job_search",
           "load_job", "load_job_file", "validate_job"]

# Bounds on counts a job gives (also in the schema, which names them in its messages). Each is far above
# what a study uses and far below what would run for days or exhaust the client before the first result.
#: Largest seed: numpy's generators take seeds below 2**32.
MAX_SEED = 2**32 - 1
#: Most outer folds (k of k-fold CV); each class needs at least this many rows anyway.
MAX_SPLITS = 1000
#: Most CV repeats (papers use 1 to 100).
MAX_REPEATS = 1000
#: Most fold tasks, ``n_splits * n_repeats``: each is a task with a saved result.
MAX_FOLD_TASKS = 10_000
#: Most inner folds of a search, and most candidates it tries.
MAX_INNER_SPLITS = 100
MAX_CANDIDATES = 10_000
#: Most task retries, and most workers of an embedded cluster (processes on one machine).
MAX_RETRIES = 100
MAX_WORKERS = 1024

_SEED = {"type": "integer", "minimum": 0, "maximum": MAX_SEED, "$comment": "numpy seeds are below 2**32"}

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
                "positive": {"type": ["string", "number"]},
                "unknown_categories": {"enum": ["error", "ignore"],
                                       "$comment": "predict: refuse a nominal value training never saw, or "
                                                   "encode it as missing (default: error)"},
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
                "n_splits": {"type": "integer", "minimum": 2, "maximum": MAX_SPLITS,
                             "$comment": "each class needs at least n_splits rows"},
                "n_repeats": {"type": "integer", "minimum": 1, "maximum": MAX_REPEATS,
                              "$comment": "each repeat is n_splits more fold tasks"},
                "random_state": _SEED,
            },
        },
        "search": {
            "type": "object",
            "additionalProperties": False,
            "required": ["params"],
            "properties": {
                "params": {"type": "object", "minProperties": 1},
                "method": {"enum": ["grid", "random"]},
                "n_candidates": {"type": "integer", "minimum": 1, "maximum": MAX_CANDIDATES},
                "random_state": _SEED,
                "cv": {"type": "integer", "minimum": 2, "maximum": MAX_INNER_SPLITS},
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
                        "random_state": _SEED,
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
                "retries": {"type": "integer", "minimum": 0, "maximum": MAX_RETRIES},
                "n_workers": {"type": "integer", "minimum": 1, "maximum": MAX_WORKERS,
                              "$comment": "an embedded cluster's workers are processes on this machine"},
                "require_encryption": {"type": "boolean"},
                "cluster": {"type": "string", "pattern": r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$",
                            "$comment": "MODULE:CALLABLE, a function returning a Dask cluster or client "
                                        "(as --cluster; the flag wins)"},
            },
        },
        "tracking": {
            "type": "object",
            "additionalProperties": False,
            "required": ["mlflow"],
            "properties": {
                "mlflow": {"type": "string", "minLength": 1,
                           "$comment": "an MLflow tracking URI; needs the extra dimbsvm[mlflow]"},
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

    The one loader of job and suite files: a regular file of limited size,
    parsed with limits and without duplicate keys (see
    :mod:`dimbsvm.jobs.yaml_load`).
    """
    return _read_yaml_text(path, what)[0]


def _read_yaml_text(path, what: str):
    """``(document, text)`` of the YAML file ``path``."""
    text = read_text_file(path, what)
    return parse_yaml(text, f"{what} file {Path(path)}"), text


def _is_integer(checker, instance) -> bool:
    # JSON Schema counts 3.0 as an integer; a count written 3.0 is more likely a slip (or a computed value)
    # than meant, and numpy and Dask want ints, so only a YAML/Python int is one
    return isinstance(instance, int) and not isinstance(instance, bool)


#: Draft 2020-12, with "integer" meaning a Python int.
_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer))


def check_schema(spec, schema: dict, *, what: str, where: str) -> None:
    """Raise a :class:`JobSpecError` on the first schema error of ``spec`` (shallowest key first).

    Integers must be ints (``3.0`` is refused), and numbers finite (NaN and
    infinity pass a schema's ``minimum``; see :func:`check_finite`).
    """
    if not isinstance(spec, dict):
        raise JobSpecError(f"{where}: a {what} must be a mapping of keys to values, got {type(spec).__name__}")
    errors = sorted(_Validator(schema).iter_errors(spec),
                    key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        raise JobSpecError(f"{where}: {describe_schema_error(errors[0])}")
    check_finite(spec, where=where)


#: Keys (the last two parts of the path: a job's or a suite method's search) where a non-finite number means
#: something: a failed search candidate scores NaN, or -inf (never chosen).
_NON_FINITE_ALLOWED = {("search", "error_score"): (-math.inf,)}


def check_finite(spec, *, where: str = "job", path: tuple = ()) -> None:
    """Refuse NaN and infinity anywhere in ``spec``, except where they have a meaning.

    A schema's ``minimum: 0`` lets NaN through (every comparison with NaN is
    false), and a NaN tolerance or fraction then fails every run instead of
    the job.

    Raises
    ------
    JobSpecError
        ``'retrain.gates.g_mean.tolerance' is nan; it must be a finite number``.

    Examples
    --------
    >>> check_finite({"retrain": {"gates": {"g_mean": {"tolerance": float("nan")}}}})
    Traceback (most recent call last):
    ...
    dimbsvm.exceptions.JobSpecError: job: 'retrain.gates.g_mean.tolerance' is nan; it must be a finite number
    >>> check_finite({"search": {"error_score": float("nan")}})
    """
    if isinstance(spec, dict):
        for key, value in spec.items():
            check_finite(value, where=where, path=(*path, str(key)))
    elif isinstance(spec, (list, tuple)):
        for i, value in enumerate(spec):
            check_finite(value, where=where, path=(*path, str(i)))
    elif isinstance(spec, float) and not math.isfinite(spec):
        allowed = _NON_FINITE_ALLOWED.get(path[-2:])
        if allowed is not None and (math.isnan(spec) or spec in allowed):
            return
        raise JobSpecError(f"{where}: '{'.'.join(path)}' is {spec!r}; it must be a finite number")


def load_job(path) -> JobSpec:
    """Read a YAML job file and validate it (see :func:`validate_job`).

    Relative data paths are resolved against the job file's directory when
    they exist there, so a job runs the same from any working directory.
    """
    return load_job_file(path)[0]


def load_job_file(path) -> tuple[JobSpec, str]:
    """``(job, text)``: the job file validated as :func:`load_job` does, and its text as written.

    The file is read once (see :func:`read_yaml` for the limits).
    """
    path = Path(path)
    spec, text = _read_yaml_text(path, "job")
    job = validate_job(spec, where=str(path))
    source = Path(job.data.source)
    if not source.is_absolute() and (path.parent / source).exists():
        job = dataclasses.replace(job, data=dataclasses.replace(job.data, source=str((path.parent / source).resolve())))
    return job, text


def validate_job(spec, *, where="job") -> JobSpec:
    """Validate a job mapping and return it as a frozen :class:`~dimbsvm.jobs.job_spec.JobSpec`, defaults filled in.

    Raises
    ------
    JobSpecError
        Naming the key (as a dotted path) and the accepted values.

    Examples
    --------
    >>> job = validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "svc"}})
    >>> job.cv
    CVSpec(n_splits=5, n_repeats=1, random_state=0)
    >>> validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "svc"}, "cv": {"folds": 3}})
    Traceback (most recent call last):
    ...
    dimbsvm.exceptions.JobSpecError: job: unknown key 'cv.folds'; accepted keys under 'cv': n_repeats, n_splits, random_state
    """
    _refuse_ingest_keys(spec, where)
    check_schema(spec, JOB_SCHEMA, what="job", where=where)
    job = _with_defaults(spec)
    _check_cv_size(job["cv"], where)
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
    job = JobSpec.from_dict(job)
    try:
        stored_stage_of(job.features, scaler=job.preprocessing.scaler, impute=job.preprocessing.impute,
                        final_model=job.output.model)  # what a stored stage allows
        job_search(job, check=True)  # every candidate a valid estimator
    except JobSpecError as exc:
        raise JobSpecError(f"{where}: {exc}") from None
    return job


def _check_cv_size(cv: dict, where: str) -> None:
    """The outer CV's fold count and seeds, beyond what the schema's per-key bounds say."""
    folds = cv["n_splits"] * cv["n_repeats"]
    if folds > MAX_FOLD_TASKS:
        raise JobSpecError(f"{where}: cv.n_splits x cv.n_repeats is {cv['n_splits']} x {cv['n_repeats']} = {folds} "
                           f"fold tasks; at most {MAX_FOLD_TASKS} are allowed: lower cv.n_repeats")
    last = cv["random_state"] + cv["n_repeats"] - 1  # repeat r shuffles with seed random_state + r
    if last > MAX_SEED:
        raise JobSpecError(f"{where}: cv.random_state {cv['random_state']} + {cv['n_repeats']} repeats reaches seed "
                           f"{last}; numpy seeds are below 2**32: lower cv.random_state to at most "
                           f"{MAX_SEED - cv['n_repeats'] + 1}")


def job_search(job: JobSpec, *, check: bool = False) -> Search | None:
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
    if job.search is None:
        return None
    return build_search(job.search.to_dict(), (lambda params: _candidate_pipeline(job, params)) if check else None)


def _candidate_pipeline(job: JobSpec, params: dict):
    """The estimator and feature stages of one candidate, validated (a JobSpecError names what is wrong)."""
    estimator = job.estimator
    built = make_estimator(estimator.name, {**estimator.plain_params(), **estimator_params(params)})
    stages = []
    for index, override in stage_params(params).items():
        if index >= len(job.features):
            raise JobSpecError(f"'search.params.features.{index}.*': the job has {len(job.features)} feature "
                               "stage(s), numbered from 0")
        stage = job.features[index]
        if stage.stored:
            raise JobSpecError(f"'search.params.features.{index}.*': stage {index} is stored (computed once for "
                               "the whole store); only stages fitted per fold can be searched")
        stages.append(make_feature(stage.name, {**stage.plain_params(), **override}))
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


#: ``dimbsvm ingest``'s column options, which a job's ``data`` section does not take.
_INGEST_KEYS = ("target", "id", "drop")


def _refuse_ingest_keys(spec, where: str) -> None:
    """A job names a label, id or dropped column only through a store: one line giving the ingest command."""
    data = spec.get("data") if isinstance(spec, dict) else None
    if not isinstance(data, dict) or not any(key in data for key in _INGEST_KEYS):
        return
    from .ingest_hint import ingest_command

    given = [key for key in _INGEST_KEYS if key in data]
    raise JobSpecError(f"{where}: 'data.{given[0]}' is an ingest option: a job reads a file whose columns need "
                       f"naming through a store; run {ingest_command(str(data.get('source', 'SOURCE')), data)}, then "
                       "give the store as data.source")


def _with_defaults(spec: dict, defaults: dict = DEFAULTS) -> dict:
    job = copy.deepcopy(defaults)
    for key, value in spec.items():
        if isinstance(value, dict) and isinstance(job.get(key), dict) and key not in _REPLACED:
            job[key] = _with_defaults(value, job[key])
        else:
            job[key] = copy.deepcopy(value)
    return job


def _whole_float(value) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


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
        if _whole_float(error.instance) and "integer" in str(schema["type"]):
            return f"'{key}' must be an integer, got {error.instance!r}; write {int(error.instance)}"
        return f"'{key}' must be of type {schema['type']}, got {type(error.instance).__name__} {error.instance!r}"
    if error.validator in ("minimum", "minItems", "minLength"):
        return f"'{key}' is {error.instance!r}; it must be at least {error.validator_value}"
    if error.validator in ("maximum", "maxItems", "maxLength"):
        why = f" ({schema['$comment']})" if "$comment" in schema else ""
        return f"'{key}' is {error.instance!r}; it must be at most {error.validator_value}{why}"
    if error.validator in ("exclusiveMinimum", "exclusiveMaximum"):
        side = "greater" if error.validator == "exclusiveMinimum" else "less"
        return f"'{key}' is {error.instance!r}; it must be {side} than {error.validator_value}"
    if error.validator == "propertyNames":
        return f"'{key}' has key {error.instance!r}; accepted: {', '.join(schema['propertyNames']['enum'])}"
    return f"'{key or '(top level)'}': {error.message}"
