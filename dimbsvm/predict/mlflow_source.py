"""A model from an MLflow model registry: ``models:/NAME@ALIAS`` or ``models:/NAME/VERSION``.

``dimbsvm retrain`` with tracking registers each challenger's model there
(:mod:`dimbsvm.jobs.tracking`), its saved model directory kept as the logged
model's artifact. :func:`load_registered_model` downloads that directory into
a temporary one, loads it as a saved model (manifest checked, only trusted
types rebuilt), and removes the download. MLflow itself is imported only here
and only for such a reference (the ``mlflow`` extra).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from ..exceptions import DataError

__all__ = ["is_registered_model", "load_registered_model"]

_REFERENCE = re.compile(r"^models:/(?P<name>[^/@]+)(?:@(?P<alias>[^/@]+)|/(?P<version>\d+))$")
#: The name of the saved model directory among a logged dimbsvm model's artifacts
#: (``predict.mlflow_model.MODEL_ARTIFACT``, not imported: that module needs MLflow at import).
_MODEL_ARTIFACT = "dimbsvm_model"


def is_registered_model(ref: str) -> bool:
    """Whether ``ref`` names a model in an MLflow registry (``models:/...``)."""
    return str(ref).startswith("models:/")


def load_registered_model(ref: str, *, tracking_uri: str | None = None):
    """``(estimator, meta)`` of a dimbsvm model registered in MLflow.

    Parameters
    ----------
    ref : str
        ``models:/NAME@ALIAS`` (for example ``models:/retrain-yeast5@champion``)
        or ``models:/NAME/VERSION``.
    tracking_uri : str, optional
        The MLflow tracking and registry URI; by default MLflow's own
        (``MLFLOW_TRACKING_URI``).

    Raises
    ------
    DataError
        A malformed reference, MLflow not installed, a name, alias or version
        the registry does not have, or a registered model that is not a
        dimbsvm model; one line each.
    """
    from ..artifacts import load_artifact

    if _REFERENCE.match(ref) is None:
        raise DataError(f"{ref}: an MLflow model is models:/NAME@ALIAS or models:/NAME/VERSION")
    try:
        import mlflow
    except ImportError:
        raise DataError(f'{ref}: reading a model from MLflow needs the extra: pip install "dimbsvm[mlflow]"') from None
    where = tracking_uri or mlflow.get_tracking_uri()
    with tempfile.TemporaryDirectory(prefix="dimbsvm-mlflow-") as download:
        try:
            local = mlflow.artifacts.download_artifacts(artifact_uri=ref, dst_path=download,
                                                        tracking_uri=tracking_uri)
        except mlflow.exceptions.MlflowException as exc:
            reason = str(exc.message if hasattr(exc, "message") else exc).strip().splitlines()[0]
            raise DataError(f"{ref} at MLflow {where}: {reason}") from None
        model_dir = _saved_model_directory(Path(local))
        if model_dir is None:
            raise DataError(f"{ref} at MLflow {where} is not a dimbsvm model (its MLmodel names no "
                            f"{_MODEL_ARTIFACT} artifact)")
        return load_artifact(model_dir, shown=ref)


def _saved_model_directory(logged: Path) -> Path | None:
    """The saved model directory inside a downloaded pyfunc model, as its ``MLmodel`` file names it."""
    from mlflow.models import Model

    try:
        flavor = Model.load(str(logged)).flavors.get("python_function", {})
        path = flavor["artifacts"][_MODEL_ARTIFACT]["path"]
    except (OSError, KeyError, TypeError):
        return None
    model_dir = (logged / path).resolve()
    return model_dir if model_dir.is_dir() and model_dir.is_relative_to(logged.resolve()) else None
