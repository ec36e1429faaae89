"""dimbsvm: SVMs for class-imbalanced data, from a laptop to a Dask cluster.

Public API: the estimators and transformers re-exported here, the metrics in
:mod:`dimbsvm.metrics`, readers in :mod:`dimbsvm.datasets`, the Zarr layout
in :mod:`dimbsvm.store` and jobs in :mod:`dimbsvm.jobs`.

The names below are imported when first used, so that importing one
submodule (a worker unpickling a task body, ``dimbsvm.parallel``) does not
import every estimator.
"""

import importlib

from ._version import __version__
from .recommended import recommended  # imports its estimator when called

#: Public name -> the module that defines it.
_LAZY = {
    "HIKEncoder": "dimbsvm.features",
    "SimilarityFeatures": "dimbsvm.features",
    "StructuralFeatures": "dimbsvm.features",
    "ACTClassifier": "dimbsvm.svm",
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

__all__ = [*_LAZY, "recommended", "__version__"]


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'dimbsvm' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
