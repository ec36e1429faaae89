"""Benchmark suites: the YAML schema, validation and method construction.

A suite is validated completely before a cluster starts: structure and types
by JSON Schema, then what a schema cannot express (unique names, that every
method can be built with its parameters). Messages name the offending key and
the accepted values, as job specs do (:mod:`dimbsvm.jobs.spec`).

Example suite::

    name: smoke
    datasets: [yeast5, ecoli1]          # bundled/KEEL names or data files
    methods:
      - {name: svc_balanced, kind: registry, estimator: svc_balanced}
      - {name: smote_svc, kind: peer, estimator: smote_svc, params: {smote__k_neighbors: 5}}
    protocol: {n_splits: 3, n_repeats: 1, random_state: 0, scaler: minmax}
    # estimator_random_state: 0          # seed of the methods' own randomness, or per_fold
    metrics: [g_mean, f_measure, auc]

``kind: registry`` names an estimator of :mod:`dimbsvm.estimators` (dimbsvm's
own methods, e.g. ``othr`` once registered); ``kind: peer`` one of
:data:`dimbsvm.bench.peers.PEERS`. A method may carry ``reference`` values (in
percent, e.g. the peer rows of a published table) that the report sets beside
the measured means.
"""

from __future__ import annotations

import copy
from pathlib import Path

from ..estimators import estimator_names, make_estimator
from ..exceptions import JobSpecError
from ..jobs.spec import JOB_SCHEMA, build_search, check_schema, read_yaml  # one loader and wording for jobs and suites
from ..model_selection.pipeline import IMPUTERS, SCALERS
from ..model_selection.scoring import METRICS
from ..model_selection.search import stage_params
from .peers import fold_random_state, make_peer, peer_names

__all__ = ["SUITE_SCHEMA", "KINDS", "ON_ERROR", "SUITE_METRICS", "load_suite", "validate_suite",
           "estimator_random_state", "build_method", "method_search"]

KINDS = ("registry", "peer")
#: What a fold task that raises does: ``record`` the error in its record (the
#: report lists failed folds and averages over the others) or ``raise`` it and
#: stop the suite.
ON_ERROR = ("record", "raise")
#: The quality metrics a suite's published reference scores may give and its report ranks methods on
#: (a subset of :data:`dimbsvm.model_selection.scoring.QUALITY_METRICS`).
SUITE_METRICS = ("g_mean", "f_measure", "auc", "a_mean")

_NAME = {"type": "string", "pattern": r"^[A-Za-z0-9_.+-]+$"}

SUITE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["datasets", "methods"],
    "properties": {
        "name": _NAME,
        "description": {"type": "string"},
        "datasets": {
            "type": "array", "minItems": 1, "uniqueItems": True,
            "items": {"type": "string", "minLength": 1},
        },
        "methods": {
            "type": "array", "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "kind", "estimator"],
                "properties": {
                    "name": _NAME,
                    "kind": {"enum": list(KINDS)},
                    "estimator": {"type": "string", "minLength": 1},
                    "params": {"type": "object"},
                    # nested CV: the method's parameters chosen per fold, as a job's 'search'
                    "search": JOB_SCHEMA["properties"]["search"],
                    "reference": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {m: {"type": "number"} for m in SUITE_METRICS},
                    },
                },
            },
        },
        "protocol": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "n_splits": {"type": "integer", "minimum": 2},
                "n_repeats": {"type": "integer", "minimum": 1},
                "random_state": {"type": "integer", "minimum": 0},
                "scaler": {"enum": list(SCALERS)},
                "impute": {"enum": list(IMPUTERS)},
                "estimator_random_state": {"anyOf": [{"type": "integer", "minimum": 0}, {"const": "per_fold"}]},
                # every dataset held as CSR rows (scipy.sparse), as svmlight files are: every method sees them sparse
                "sparse": {"type": "boolean"},
            },
        },
        "metrics": {
            "type": "array", "minItems": 1, "uniqueItems": True,
            "items": {"enum": list(METRICS)},
        },
        "reference_source": {"type": "string"},
        # the methods the Wilcoxon tests' control is chosen among (best average rank); default: the peers
        "control": {"type": "array", "minItems": 1, "uniqueItems": True, "items": _NAME},
        "execution": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "retries": {"type": "integer", "minimum": 0},
                "n_workers": {"type": "integer", "minimum": 1},
                "on_error": {"enum": list(ON_ERROR)},
            },
        },
    },
}

DEFAULTS = {
    "name": "suite",
    "protocol": {"n_splits": 5, "n_repeats": 1, "random_state": 0, "scaler": "minmax", "impute": "none",
                 "estimator_random_state": 0, "sparse": False},
    "metrics": list(METRICS),
    # Fold tasks are deterministic: a retry only helps with a lost worker,
    # which Dask recomputes anyway, so one retry is plenty.
    "execution": {"retries": 1, "on_error": "record"},
}


def load_suite(path) -> dict:
    """Read a YAML suite file and validate it (see :func:`validate_suite`).

    Dataset entries that are paths relative to the suite file's directory are
    resolved against it, so a suite runs the same from any working directory.
    """
    path = Path(path)
    suite = validate_suite(read_yaml(path, "suite"), where=str(path))
    for i, source in enumerate(suite["datasets"]):
        local = path.parent / source
        if not Path(source).is_absolute() and local.is_file():
            suite["datasets"][i] = str(local.resolve())
    return suite


def validate_suite(spec, *, where="suite") -> dict:
    """Validate a suite mapping and return it with defaults filled in.

    Raises
    ------
    JobSpecError
        Naming the key (as a dotted path) and the accepted values.

    Examples
    --------
    >>> suite = validate_suite({"datasets": ["yeast5"],
    ...                         "methods": [{"name": "svc", "kind": "peer", "estimator": "svc"}]})
    >>> suite["protocol"]["n_splits"], suite["metrics"][:2]
    (5, ['g_mean', 'f_measure'])
    >>> validate_suite({"datasets": ["yeast5"], "method": []})
    Traceback (most recent call last):
    ...
    dimbsvm.exceptions.JobSpecError: suite: unknown key 'method'; accepted keys: control, datasets, ...
    """
    check_schema(spec, SUITE_SCHEMA, what="suite", where=where)
    suite = _with_defaults(spec)
    names = [m["name"] for m in suite["methods"]]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise JobSpecError(f"{where}: method name(s) {', '.join(duplicates)} used more than once; "
                           "each method needs its own 'name'")
    unknown = sorted(set(suite.get("control", [])) - set(names))
    if unknown:
        raise JobSpecError(f"{where}: 'control' names {', '.join(unknown)}, not method(s) of this suite; "
                           f"methods: {', '.join(names)}")
    for i, method in enumerate(suite["methods"]):
        method.setdefault("params", {})
        try:
            build_method(method, random_state=0)
            method_search(method)
        except JobSpecError as exc:
            raise JobSpecError(f"{where}: 'methods.{i}' ({method['name']}): {exc}") from None
    return suite


def estimator_random_state(protocol: dict, *, seed: int, fold: int) -> int:
    """The ``random_state`` of the estimators fitted on one (repeat seed, fold).

    ``protocol["estimator_random_state"]`` is an integer used for every fold
    (default 0, what a user of these estimators typically writes), or
    ``"per_fold"`` for a seed derived from ``(seed, fold)`` with
    :func:`dimbsvm.bench.peers.fold_random_state`. The folds themselves differ
    either way; the choice only decides whether two folds draw the same
    stream of random numbers.

    Examples
    --------
    >>> estimator_random_state({"estimator_random_state": 0}, seed=1, fold=3)
    0
    """
    policy = protocol.get("estimator_random_state", 0)
    return fold_random_state(seed, fold) if policy == "per_fold" else int(policy)


def build_method(method: dict, *, random_state: int):
    """A new unfitted estimator for one method.

    Peers receive ``random_state`` as their seed (see :mod:`dimbsvm.bench.peers`);
    a registry estimator with a ``random_state`` parameter gets it too. A
    ``random_state`` set in the method's ``params`` wins in both cases.

    Parameters
    ----------
    method : dict
        One validated ``methods`` entry.
    random_state : int
        From :func:`estimator_random_state`.

    Raises
    ------
    JobSpecError
        Unknown estimator name or parameter.
    """
    params = dict(method.get("params") or {})
    if method["kind"] == "peer":
        return make_peer(method["estimator"], params, random_state=random_state)
    names = estimator_names()
    if method["estimator"] not in names:
        raise JobSpecError(f"'estimator' is {method['estimator']!r}, not a registered dimbsvm estimator; "
                           f"accepted: {', '.join(names)} (or kind: peer with {', '.join(peer_names())})")
    estimator = make_estimator(method["estimator"], params)
    if "random_state" in estimator.get_params() and "random_state" not in params:
        estimator.set_params(random_state=random_state)
    return estimator


def method_search(method: dict):
    """The method's :class:`~dimbsvm.model_selection.search.Search`, or ``None`` without ``search``."""
    if not method.get("search"):
        return None
    def build(params):
        if stage_params(params):
            raise JobSpecError("'search.params': a suite's methods have no feature stages to search")
        return build_method(dict(method, params={**method.get("params", {}), **params}), random_state=0)

    return build_search(method["search"], build)


def _with_defaults(spec: dict) -> dict:
    suite = copy.deepcopy(DEFAULTS)
    for key, value in spec.items():
        if isinstance(value, dict) and isinstance(suite.get(key), dict):
            suite[key].update(copy.deepcopy(value))
        else:
            suite[key] = copy.deepcopy(value)
    return suite
