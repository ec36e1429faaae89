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

__all__ = ["ACTClassifier", "EnsembleOTHRClassifier", "HPCClassifier", "HIKEncoder", "OTHRClassifier", "SimilarityFeatures", "StructuralFeatures", "THRClassifier", "a_mean", "f_measure", "g_mean", "imbalance_report", "per_class_recall", "recommended", "__version__"]
