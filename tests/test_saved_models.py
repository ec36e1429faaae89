"""Models saved by an earlier dimbsvm still load, through the trusted loader, and answer the same.

The files in ``tests/data/models-0.1.0/`` were written by dimbsvm 0.1.0
(``tests/data/make_saved_models.py``), when ``OTHRMember`` lived in
``dimbsvm.svm.ensemble`` (its skops type name is ``dimbsvm.svm.ensemble.OTHRMember``)
and ``HPCClassifier`` and ``SimilarityFeatures`` had no ``client`` parameter.
"""

from pathlib import Path

import numpy as np
import pytest
import skops.io as sio
from sklearn.base import clone

from dimbsvm.artifacts import load_artifact
from dimbsvm.estimators import trusted_types

SAVED = Path(__file__).resolve().parent / "data" / "models-0.1.0"
EXPECTED = np.load(SAVED / "expected.npz")
NAMES = ["ensemble-pooled", "ensemble-member", "hpc", "similarity"]


@pytest.mark.parametrize("name", NAMES)
def test_a_model_saved_by_0_1_0_loads_and_answers_the_same(name):
    model, meta = load_artifact(SAVED / name)
    assert meta["fixture"] == name
    X_test = EXPECTED["X_test"]
    if name == "similarity":
        np.testing.assert_array_equal(model.transform(X_test), EXPECTED[f"{name}-transform"])
    else:
        np.testing.assert_array_equal(model.predict(X_test), EXPECTED[f"{name}-predict"])
        np.testing.assert_array_equal(model.decision_function(X_test), EXPECTED[f"{name}-decision"])
    # the loaded estimator is a whole estimator again: its parameters read and it clones
    clone(model).set_params(**model.get_params(deep=False))


@pytest.mark.parametrize("name", ["ensemble-pooled", "ensemble-member"])
def test_saved_members_keep_their_old_type_name(name):
    # what the 0.1.0 files ask for; the loader must keep trusting it
    asked = sio.get_untrusted_types(file=SAVED / name / "model.skops")
    assert "dimbsvm.svm.ensemble.OTHRMember" in asked
    assert set(asked) <= set(trusted_types())


def test_a_model_saved_now_names_the_members_module_and_loads(tmp_path):
    from sklearn.svm import LinearSVC

    from dimbsvm.artifacts import save_model
    from dimbsvm.svm.ensemble import EnsembleOTHRClassifier

    X_test = EXPECTED["X_test"]
    old, _ = load_artifact(SAVED / "ensemble-pooled")
    rng = np.random.default_rng(2)
    X = rng.normal(size=(60, 4))
    y = (X[:, 0] + 0.3 * rng.normal(size=60) > 1.0).astype(int)
    model = EnsembleOTHRClassifier(LinearSVC(), n_estimators=2, random_state=0).fit(X, y)
    save_model(model, tmp_path / "m", meta={})
    assert "dimbsvm.svm.members.OTHRMember" in sio.get_untrusted_types(file=tmp_path / "m" / "model.skops")
    loaded, _ = load_artifact(tmp_path / "m")
    np.testing.assert_array_equal(loaded.decision_function(X_test), model.decision_function(X_test))
    assert type(loaded.members_[0]) is type(old.members_[0])  # one class under both names
