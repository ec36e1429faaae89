"""The estimators on sparse input (issue 52): CSR in memory, and Dask arrays of CSR chunks with and without a client.

Truth: the same estimator fitted on the CSR matrix in memory, and on its dense copy.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.svm import SVC, LinearSVC

from dimbsvm import EnsembleOTHRClassifier, OTHRClassifier, THRClassifier
from dimbsvm.datasets import make_text_like


@pytest.fixture(scope="module")
def text():
    X, y = make_text_like(1500, 2000, random_state=1)
    return X, y


def _lazy(X, rows=400):
    return da.from_array(X, chunks=(rows, -1), asarray=False, meta=sp.csr_matrix((0, X.shape[1])))


ESTIMATORS = [
    pytest.param(lambda: EnsembleOTHRClassifier(LinearSVC(random_state=0), n_estimators=3, random_state=0),
                 id="ensemble-linear"),
    pytest.param(lambda: EnsembleOTHRClassifier(SVC(), n_estimators=2, max_samples=400, random_state=0),
                 id="ensemble-rbf"),
    pytest.param(lambda: OTHRClassifier(LinearSVC(random_state=0), random_state=0), id="othr"),
    pytest.param(lambda: THRClassifier(SVC()), id="thr"),
]


@pytest.mark.parametrize("make", ESTIMATORS)
def test_sparse_and_dense_copies_give_the_same_model(text, make):
    X, y = text
    sparse, dense = make().fit(X, y), make().fit(X.toarray(), y)
    np.testing.assert_allclose(sparse.decision_function(X), dense.decision_function(X.toarray()), rtol=1e-9,
                               atol=1e-9)
    np.testing.assert_array_equal(sparse.predict(X), dense.predict(X.toarray()))


@pytest.mark.parametrize("with_client", [False, True], ids=["here", "client"])
def test_a_dask_array_of_csr_chunks_fits_as_the_matrix_does(text, with_client, request):
    X, y = text
    client = request.getfixturevalue("client") if with_client else None
    make = lambda: EnsembleOTHRClassifier(LinearSVC(random_state=0), n_estimators=3, random_state=0,  # noqa: E731
                                          client=client)
    lazy = make().fit(_lazy(X), da.from_array(y, chunks=400))  # over the chunks on the workers, with a client
    np.testing.assert_array_equal(lazy.decision_function(X), make().fit(X, y).decision_function(X))
    assert lazy.predict(_lazy(X)).tolist() == lazy.predict(X).tolist()
