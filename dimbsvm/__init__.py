"""dimbsvm: SVMs for class-imbalanced data, from a laptop to a Dask cluster.

Public API: the estimators and transformers re-exported here, the metrics in
:mod:`dimbsvm.metrics`, readers in :mod:`dimbsvm.datasets`, the Zarr layout
in :mod:`dimbsvm.store` and jobs in :mod:`dimbsvm.jobs`.
"""

from .features import HIKEncoder, SimilarityFeatures, StructuralFeatures
from .svm import ACTClassifier, EnsembleOTHRClassifier, HPCClassifier, OTHRClassifier, THRClassifier
from .metrics import a_mean, f_measure, g_mean, imbalance_report, per_class_recall
from .recommended import recommended

__version__ = "0.1.0"


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

__all__ = ["ACTClassifier", "EnsembleOTHRClassifier", "HPCClassifier", "HIKEncoder", "OTHRClassifier", "SimilarityFeatures", "StructuralFeatures", "THRClassifier", "a_mean", "f_measure", "g_mean", "imbalance_report", "per_class_recall", "recommended", "load_model", "__version__"]
