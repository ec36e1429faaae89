"""SVM models for imbalanced data: arrays in, fitted models out.

* :class:`OTHRClassifier` -- SVM-OTHR, the threshold shift with the best training G-mean.
* :class:`THRClassifier` -- SVM-THR, Lin & Chen's closed-form shift.
* :class:`EnsembleOTHRClassifier` -- EnSVM-OTHR, bagged OTHR members fanned out on Dask.
* :class:`ACTClassifier` -- adaptive conformal transformation of the SVM kernel.
* :class:`HPCClassifier` -- HPC-SVM, hinge SVM regularised by hypergraph pairwise constraints.

The numeric kernels of the threshold search are in :mod:`dimbsvm.svm.threshold`.
"""

from dimbsvm.svm.act import ACTClassifier
from dimbsvm.svm.hpc import HPCClassifier
from dimbsvm.svm.ensemble import EnsembleOTHRClassifier, OTHRMember, fit_member
from dimbsvm.svm.othr import OTHRClassifier, THRClassifier

__all__ = [
    "ACTClassifier",
    "EnsembleOTHRClassifier",
    "HPCClassifier",
    "OTHRClassifier",
    "OTHRMember",
    "THRClassifier",
    "fit_member",
]
