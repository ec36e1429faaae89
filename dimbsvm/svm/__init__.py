"""SVM models for imbalanced data: arrays in, fitted models out.

* :class:`OTHRClassifier` -- SVM-OTHR, the threshold shift with the best training G-mean.
* :class:`THRClassifier` -- SVM-THR, Lin & Chen's closed-form shift.
* :class:`EnsembleOTHRClassifier` -- EnSVM-OTHR, bagged OTHR members fanned out on Dask.
* :class:`ACTClassifier` -- adaptive conformal transformation of the SVM kernel.
* :class:`BaggedACTClassifier` -- ACT members on class-balanced bags, averaged.
* :class:`HPCClassifier` -- HPC-SVM, hinge SVM regularised by hypergraph pairwise constraints.

Where the rest lives: threshold shifts as plain functions on arrays in
:mod:`dimbsvm.svm.candidates` (candidate shifts) and :mod:`dimbsvm.svm.threshold`
(scoring and choice); one ensemble member in :mod:`dimbsvm.svm.members`; what the
classifiers share in :mod:`dimbsvm.svm._base`; HPC-SVM's numeric kernels in
:mod:`dimbsvm.svm._hpc_kernels` and its path over Dask chunks in
:mod:`dimbsvm.svm._hpc_chunked`; what the defaults become above ``LARGE_N``
training rows in :mod:`dimbsvm.svm.scaled_defaults`.
"""

from .._lazy import lazy_names

#: Public name -> the submodule that defines it, imported when first used: the fold engine imports svm.members for
#: every job, and a job of scikit-learn's SVC needs none of the classifiers (nor the Dask and Zarr some of them
#: import).
_LAZY = {
    "ACTClassifier": ".act",
    "BaggedACTClassifier": ".bagged_act",
    "HPCClassifier": ".hpc",
    **dict.fromkeys(("EnsembleOTHRClassifier", "OTHRMember", "fit_member"), ".ensemble"),
    **dict.fromkeys(("MemberPlan", "MemberSpec"), ".members"),
    **dict.fromkeys(("OTHRClassifier", "THRClassifier"), ".othr"),
}

__all__ = [
    "ACTClassifier",
    "BaggedACTClassifier",
    "EnsembleOTHRClassifier",
    "HPCClassifier",
    "MemberPlan",
    "MemberSpec",
    "OTHRClassifier",
    "OTHRMember",
    "THRClassifier",
    "fit_member",
]


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
