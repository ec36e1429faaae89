"""Write the saved-model fixtures of ``tests/test_saved_models.py``.

Run once, by the dimbsvm version whose files they are (0.1.0, before
``OTHRMember`` and ``fit_member`` moved from ``dimbsvm.svm.ensemble`` to
``dimbsvm.svm.members`` and before ``HPCClassifier`` and
``SimilarityFeatures`` took a ``client`` parameter)::

    PYTHONPATH=. python tests/data/make_saved_models.py

Each model is saved as a model directory (``dimbsvm.artifacts.save_model``)
under ``tests/data/models-0.1.0/``, with the rows it is checked on and what it
answered on them in ``expected.npz``. Do not rerun it with a later version:
the point of the files is that they were written by this one.
"""

from pathlib import Path

import numpy as np
from sklearn.datasets import make_classification
from sklearn.svm import LinearSVC

from dimbsvm.features.similarity import SimilarityFeatures
from dimbsvm.artifacts import save_model
from dimbsvm.svm.ensemble import PAPER_PARAMS, EnsembleOTHRClassifier
from dimbsvm.svm.hpc import HPCClassifier

OUT = Path(__file__).resolve().parent / "models-0.1.0"


def main():
    X, y = make_classification(n_samples=120, n_features=4, n_informative=3, n_redundant=0,
                               weights=[0.85], flip_y=0.02, random_state=0)
    X_test = np.random.default_rng(1).normal(size=(25, 4))
    models = {
        "ensemble-pooled": EnsembleOTHRClassifier(LinearSVC(), n_estimators=3, random_state=0),
        "ensemble-member": EnsembleOTHRClassifier(
            LinearSVC(), n_estimators=3, random_state=0, **PAPER_PARAMS),
        "hpc": HPCClassifier(c1=0.5, random_state=0),
        "similarity": SimilarityFeatures(references=6, random_state=0),
    }
    OUT.mkdir()
    expected = {"X_test": X_test}
    for name, model in models.items():
        model.fit(X, y)
        save_model(model, OUT / name, meta={"fixture": name})
        if hasattr(model, "predict"):
            expected[f"{name}-predict"] = model.predict(X_test)
            expected[f"{name}-decision"] = model.decision_function(X_test)
        else:
            expected[f"{name}-transform"] = model.transform(X_test)
    np.savez(OUT / "expected.npz", **expected)


if __name__ == "__main__":
    main()
