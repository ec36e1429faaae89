"""dimbsvm: SVMs for class-imbalanced data, from a laptop to a Dask cluster.

Public API: the estimators and transformers re-exported here, the metrics in
:mod:`dimbsvm.metrics`, readers in :mod:`dimbsvm.datasets`, the Zarr layout
in :mod:`dimbsvm.store` and jobs in :mod:`dimbsvm.jobs`.

The names below are imported when first used, so that importing one
submodule (a worker unpickling a task body, ``dimbsvm.parallel``) does not
import every estimator.
"""

from ._lazy import lazy_names
from ._version import __version__
from .recommended import recommended  # imports its estimator when called

#: Public name -> the module that defines it.
_LAZY = {
    "HIKEncoder": "dimbsvm.features",
    "SimilarityFeatures": "dimbsvm.features",
    "StructuralFeatures": "dimbsvm.features",
    "ACTClassifier": "dimbsvm.svm",
    "BaggedACTClassifier": "dimbsvm.svm",
    "EnsembleOTHRClassifier": "dimbsvm.svm",
    "HPCClassifier": "dimbsvm.svm",
    "OTHRClassifier": "dimbsvm.svm",
    "THRClassifier": "dimbsvm.svm",
    "a_mean": "dimbsvm.metrics",
    "f_measure": "dimbsvm.metrics",
    "g_mean": "dimbsvm.metrics",
    "imbalance_report": "dimbsvm.metrics",
    "per_class_recall": "dimbsvm.metrics",
}

__all__ = [*_LAZY, "load_model", "recommended", "__version__"]


def load_model(path):
    """Load a saved model directory as a :class:`~dimbsvm.predict.DimbsvmModel` that scores raw rows.

    The files are checked against the directory's manifest and rebuilt from
    trusted types only. ``predict``, ``predict_proba`` and
    ``decision_function`` take a pandas DataFrame with the training columns
    (nominal ones encoded over the training categories) and ``predict``
    returns class names. Imported on first call, so ``import dimbsvm`` stays
    light.

    Parameters
    ----------
    path : str or path-like
        A model directory (a run directory's ``model/``).

    Returns
    -------
    dimbsvm.predict.DimbsvmModel
    """
    from .predict.model import load_model as _load_model

    return _load_model(path)


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
