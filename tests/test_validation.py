"""Sparse input to the estimators that need dense rows: an error naming the estimator, in fit and after."""

import numpy as np
import pytest
import scipy.sparse as sp

from dimbsvm import ACTClassifier, HPCClassifier
from dimbsvm.features import SimilarityFeatures


@pytest.mark.parametrize("make", [lambda: HPCClassifier(), lambda: ACTClassifier(random_state=0),
                                  lambda: SimilarityFeatures(references=5, random_state=0)])
def test_sparse_input_is_refused_by_name(make):
    rng = np.random.RandomState(0)
    X, y = rng.rand(80, 4), np.r_[np.zeros(64), np.ones(16)].astype(int)
    estimator = make()
    with pytest.raises(TypeError, match=f"{type(estimator).__name__} needs dense input: sparse data was passed"):
        estimator.fit(sp.csr_matrix(X), y)
    fitted = make().fit(X, y)
    method = fitted.transform if hasattr(fitted, "transform") else fitted.predict
    with pytest.raises(TypeError, match=f"{type(estimator).__name__} needs dense input"):
        method(sp.csr_matrix(X))
