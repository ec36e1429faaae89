"""Experiment tracking in MLflow: a run's results, and a registry's versions and champion.

Optional: it needs the extra ``pip install "dimbsvm[mlflow]"``. A job asks for
it with ``tracking: {mlflow: URI}`` (or ``--mlflow URI`` on ``run``,
``retrain`` and ``schedule``), and a missing package is one line before any
cluster starts (:func:`require_mlflow`).

* :func:`track_run` (``dimbsvm run``): one MLflow run in the experiment named
  after the job, with the job's parameters, every fold's metrics (``fold_<metric>``,
  step = the fold's index ``repeat * n_splits + fold``), the summary
  (``<metric>`` the mean over folds, ``<metric>_std``), the run directory's
  records and report as artifacts, and the final model as a ``pyfunc``
  model that scores raw rows into class names
  (:class:`dimbsvm.predict.mlflow_model.DimbsvmPyfunc`: the model directory,
  loaded by :func:`dimbsvm.load_model` trusting only the registered types).
* :func:`track_retrain` (``dimbsvm retrain``): one MLflow run per fitted
  challenger, its model registered as a version of the registered model named
  after the job (tagged ``dimbsvm.version``), the ``challenger`` alias on it;
  the ``champion`` alias then follows the registry's champion
  (:func:`sync_champion`, also called by ``promote`` and ``rollback``).

The dimbsvm run directory and registry are the record; MLflow is a copy. Both
are written first, and tracking runs after: an MLflow error (a server down, a
locked database) is logged as one WARNING line and the command keeps its exit
status, since its results are safely on disk.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import replace
from pathlib import Path

from .._version import __version__
from ..environment import package_versions
from ..exceptions import DimbsvmError
from .job_spec import JobSpec, TrackingSpec
from .registry import ModelRegistry
from .run_dir import job_fingerprint

__all__ = ["INSTALL", "require_mlflow", "sync_champion", "track_retrain", "track_run", "with_tracking"]

logger = logging.getLogger(__name__)

#: The command that installs what tracking needs.
INSTALL = 'pip install "dimbsvm[mlflow]"'
#: The MLflow model registry's aliases that follow the dimbsvm registry.
CHAMPION, CHALLENGER = "champion", "challenger"
#: Tag of an MLflow model version naming its dimbsvm registry version.
VERSION_TAG = "dimbsvm.version"
#: Files of a run directory not logged as artifacts: the model is logged as an MLflow model, the out-of-fold
#: predictions (one value per row of the data) can be as large as the data, and members/ holds only what a
#: resumed run reuses.
_NOT_LOGGED = ("model", "oof", "members")


def require_mlflow(uri: str) -> None:
    """Raise one line naming the extra when ``mlflow`` cannot be imported (checked before a cluster starts).

    Imported, not only looked up: a broken install (a missing dependency) fails here too, not after the run.
    """
    try:
        import mlflow  # noqa: F401
    except ImportError as exc:
        reason = " ".join(str(exc).split())
        raise DimbsvmError(f"tracking in MLflow ({uri}) needs the mlflow package: {INSTALL} "
                           f"(import mlflow: {reason})") from None


def with_tracking(job: JobSpec, uri: str | None) -> JobSpec:
    """``job`` with ``--mlflow URI`` in place of its ``tracking`` (when given), the package checked when tracked.

    Examples
    --------
    >>> from dimbsvm.jobs import validate_job
    >>> job = validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "svc"}})
    >>> with_tracking(job, None) is job
    True
    """
    if uri is not None:
        if not uri.strip():
            raise DimbsvmError("--mlflow: an empty tracking URI; give one such as sqlite:///mlflow.db")
        job = replace(job, tracking=TrackingSpec(mlflow=uri))
    if job.tracking is not None:
        require_mlflow(job.tracking.mlflow)
    return job


def track_run(job: JobSpec, run_dir) -> str | None:
    """Log a finished run directory to MLflow; the MLflow run id, or None (no tracking, or it failed: a WARNING)."""
    if job.tracking is None:
        return None
    try:
        return _log_run(job, Path(run_dir))
    except Exception as exc:  # the run is on disk; tracking must not turn it into a failure
        _warn(job.tracking.mlflow, f"run {run_dir} was not logged", exc)
        return None


def track_retrain(job: JobSpec, registry_dir, outcome) -> None:
    """Register a retraining's challenger in MLflow and move the aliases; a failure is a WARNING only."""
    if job.tracking is None:
        return
    uri = job.tracking.mlflow
    try:
        registry = ModelRegistry(registry_dir)
        registry.set_tracking({"mlflow": uri, "model_name": job.name})
        with _tracking_uri(uri):
            if not outcome.unchanged:
                _log_challenger(job, registry, outcome)
            _sync(registry, uri, job.name)
    except Exception as exc:  # the registry decided and recorded; MLflow is a copy
        _warn(uri, f"version {outcome.version} of {registry_dir} was not registered", exc)


def sync_champion(registry_dir) -> None:
    """Point the MLflow ``champion`` alias at the registry's champion, where the registry is tracked."""
    registry = ModelRegistry(registry_dir)
    settings = registry.tracking()
    if not settings:
        return
    uri = settings["mlflow"]
    try:
        require_mlflow(uri)
        with _tracking_uri(uri):
            _sync(registry, uri, settings["model_name"])
    except Exception as exc:  # the champion changed in the registry, which is the record
        _warn(uri, f"the {CHAMPION} alias of {settings['model_name']!r} was not moved", exc)


# -- logging ----------------------------------------------------------------------------------------------
def _log_run(job: JobSpec, run_dir: Path) -> str:
    import mlflow

    metrics = json.loads((run_dir / "metrics.json").read_text())
    with _tracking_uri(job.tracking.mlflow):
        _experiment(job.name, job.tracking.mlflow)
        with mlflow.start_run(run_name=run_dir.name) as run:
            mlflow.set_tags({"dimbsvm.kind": "run", "dimbsvm.run_dir": str(run_dir.resolve())})
            mlflow.log_params(_params(job, job_fingerprint=job_fingerprint(job)))
            mlflow.log_metrics(_summary(metrics))
            for record in metrics["folds"]:
                step = (record["seed"] - job.cv.random_state) * job.cv.n_splits + record["fold"]
                mlflow.log_metrics({f"fold_{name}": float(value) for name, value in record.items()
                                    if name not in ("seed", "fold") and _is_number(value)}, step=step)
            for path in sorted(run_dir.iterdir()):
                if path.name in _NOT_LOGGED:
                    continue
                if path.is_dir():
                    mlflow.log_artifacts(str(path), artifact_path=path.name)
                else:
                    mlflow.log_artifact(str(path))
            if (run_dir / "model").is_dir():
                info = _log_model(run_dir / "model")
                mlflow.set_tag("dimbsvm.model_uri", info.model_uri)
            logger.info("logged run %s to MLflow %s (experiment %s, run %s)", run_dir, job.tracking.mlflow,
                        job.name, run.info.run_id)
            return run.info.run_id


def _log_challenger(job: JobSpec, registry: ModelRegistry, outcome) -> None:
    import mlflow

    version = outcome.version
    info = next(v for v in registry.versions() if v["id"] == version)
    _experiment(job.name, job.tracking.mlflow)
    with mlflow.start_run(run_name=f"retrain {version}"):
        mlflow.set_tags({"dimbsvm.kind": "retrain", "dimbsvm.registry": str(registry.root.resolve()),
                         VERSION_TAG: version, "dimbsvm.decision": outcome.action,
                         "dimbsvm.reason": outcome.reason[:5000]})
        mlflow.log_params(_params(job, model_fingerprint=info.get("model_fingerprint"),
                                  data_fingerprint=info.get("data_fingerprint"),
                                  n_train=info.get("n_train"), n_holdout=info.get("n_holdout")))
        mlflow.log_metrics({f"holdout_{k}": float(v) for k, v in outcome.challenger_metrics.items()
                            if _is_number(v)})
        if outcome.champion_metrics:
            mlflow.log_metrics({f"champion_holdout_{k}": float(v) for k, v in outcome.champion_metrics.items()
                                if _is_number(v)})
        directory = registry.root / "versions" / version
        for name in ("job.yaml", "version.json"):
            if (directory / name).is_file():
                mlflow.log_artifact(str(directory / name))
        model = _log_model(directory / "model", registered_model_name=job.name)
    client = mlflow.MlflowClient()
    number = model.registered_model_version
    client.set_model_version_tag(job.name, number, VERSION_TAG, version)
    client.set_registered_model_alias(job.name, CHALLENGER, number)


def _sync(registry: ModelRegistry, uri: str, name: str) -> None:
    """Move ``champion`` to the MLflow version of the registry's champion (removed if it has none)."""
    import mlflow

    client = mlflow.MlflowClient()
    champion = registry.champion()
    versions = client.search_model_versions(f"name = '{_quoted(name)}' and tags.`{VERSION_TAG}` = "
                                            f"'{_quoted(champion or '')}'")
    if champion and versions:
        number = max(int(v.version) for v in versions)
        client.set_registered_model_alias(name, CHAMPION, str(number))
        logger.info("MLflow %s: %s@%s is version %s (%s)", uri, name, CHAMPION, number, champion)
        return
    with contextlib.suppress(mlflow.exceptions.MlflowException):  # no alias, or no registered model yet
        client.delete_registered_model_alias(name, CHAMPION)
    if champion:
        logger.warning("MLflow %s: the champion %s was never registered there (it was trained without tracking); "
                       "%s has no %s alias until a tracked version is promoted", uri, champion, name, CHAMPION)


def _log_model(model_dir: Path, **kwargs):
    """Log a saved dimbsvm model as an MLflow pyfunc model that scores raw rows into class names.

    The model directory is verified and loaded first (trusting only the
    registered types), so a damaged one fails here, not in a user's
    ``mlflow.pyfunc.load_model``; MLflow then keeps the directory itself as
    the model's artifact (:mod:`dimbsvm.predict.mlflow_model`).
    """
    import mlflow.pyfunc

    from ..predict.mlflow_model import MODEL_ARTIFACT, MODEL_CODE, input_example, signature
    from ..predict.model import load_model

    model = load_model(model_dir)
    meta = model.meta
    versions = package_versions(("scikit-learn", "skops", "pandas"))
    # given, not inferred: inference loads the model again in a subprocess, and would miss dimbsvm itself
    requirements = [f"dimbsvm=={__version__}"] + [f"{name}=={v}" for name, v in versions.items()
                                      if v and v != "not installed"]
    return mlflow.pyfunc.log_model(name="model", python_model=str(MODEL_CODE),
                                   artifacts={MODEL_ARTIFACT: str(model_dir)}, signature=signature(model),
                                   input_example=input_example(model),
                                   pip_requirements=requirements,
                                   metadata={"dimbsvm": _json_safe(meta)}, **kwargs)


def _experiment(name: str, uri: str) -> None:
    """Make the experiment ``name`` the active one; a new one beside a local ``sqlite:///`` database keeps its
    artifacts next to it (MLflow's default is ``./mlruns`` under the current directory)."""
    import mlflow

    if mlflow.get_experiment_by_name(name) is None and uri.startswith("sqlite:///"):
        location = Path(uri[len("sqlite:///"):].split("?")[0]).parent.resolve() / "mlartifacts"
        mlflow.create_experiment(name, artifact_location=location.as_uri())
    mlflow.set_experiment(name)


@contextlib.contextmanager
def _tracking_uri(uri: str):
    """MLflow's tracking and registry URI set to ``uri`` for the block, then as they were."""
    import mlflow

    before = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(before[0])
        mlflow.set_registry_uri(before[1])


# -- values ---------------------------------------------------------------------------------------------
def _params(job: JobSpec, **extra) -> dict:
    """The job's parameters as MLflow params (flat keys, values as text)."""
    params = {"estimator": job.estimator.name, "data.source": job.data.source, "dimbsvm_version": __version__,
              "metrics": ",".join(job.metrics), "features": ",".join(stage.name for stage in job.features)}
    params.update({f"estimator.{k}": v for k, v in _flat(job.estimator.plain_params()).items()})
    params.update({f"cv.{k}": v for k, v in job.cv.to_dict().items()})
    params.update({f"preprocessing.{k}": v for k, v in job.preprocessing.to_dict().items()})
    if job.data.positive is not None:
        params["data.positive"] = job.data.positive
    if job.search is not None:
        params["search"] = json.dumps(job.search.with_defaults(), sort_keys=True, default=str)
    params.update({k: v for k, v in extra.items() if v is not None})
    # MLflow keeps a param's value as text of at most 6000 characters
    return {key: (value if isinstance(value, str) else json.dumps(value, default=str))[:6000]
            for key, value in params.items()}


def _flat(params: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in params.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _summary(metrics: dict) -> dict:
    """``<metric>``: the mean over folds, ``<metric>_std``; timings the same."""
    out = {}
    for section in ("summary", "timings"):
        for name, stats in (metrics.get(section) or {}).items():
            for key, suffix in (("mean", ""), ("std", "_std")):
                if _is_number(stats.get(key)):
                    out[f"{name}{suffix}"] = float(stats[key])
    return out


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_safe(value):
    return json.loads(json.dumps(value, default=str))


def _quoted(text: str) -> str:
    return text.replace("'", "\\'")


def _warn(uri: str, what: str, exc: BaseException) -> None:
    message = " ".join(str(exc).split()) or type(exc).__name__
    logger.warning("MLflow tracking at %s failed, %s (the dimbsvm results are on disk): %s: %s", uri, what,
                   type(exc).__name__, message[:300])
