"""SVM models for imbalanced data: arrays in, fitted models out.

* :class:`OTHRClassifier` -- SVM-OTHR, the threshold shift with the best training G-mean.
* :class:`THRClassifier` -- SVM-THR, Lin & Chen's closed-form shift.
* :class:`EnsembleOTHRClassifier` -- EnSVM-OTHR, bagged OTHR members fanned out on Dask.
* :class:`ACTClassifier` -- adaptive conformal transformation of the SVM kernel.
* :class:`HPCClassifier` -- HPC-SVM, hinge SVM regularised by hypergraph pairwise constraints.

Where the rest lives: threshold shifts as plain functions on arrays in
:mod:`dimbsvm.svm.candidates` (candidate shifts) and :mod:`dimbsvm.svm.threshold`
(scoring and choice); one ensemble member in :mod:`dimbsvm.svm.members`; what the
classifiers share in :mod:`dimbsvm.svm._base`; HPC-SVM's numeric kernels in
:mod:`dimbsvm.svm._hpc_kernels` and its path over Dask chunks in
:mod:`dimbsvm.svm._hpc_chunked`.
"""

from dimbsvm.svm.act import ACTClassifier
from dimbsvm.svm.hpc import HPCClassifier
from dimbsvm.svm.ensemble import EnsembleOTHRClassifier, OTHRMember, fit_member
from dimbsvm.svm.members import MemberPlan, MemberSpec
from dimbsvm.svm.othr import OTHRClassifier, THRClassifier

__all__ = [
    "ACTClassifier",
    "EnsembleOTHRClassifier",
    "HPCClassifier",
    "MemberPlan",
    "MemberSpec",
    "OTHRClassifier",
    "OTHRMember",
    "THRClassifier",
    "fit_member",
]
