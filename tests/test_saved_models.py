"""Models saved by an earlier dimbsvm still load, through the trusted loader, and answer the same.

The files in ``tests/data/models-0.1.0/`` were written by dimbsvm 0.1.0
(``tests/data/make_saved_models.py``), when ``OTHRMember`` lived in
``dimbsvm.svm.ensemble`` (its skops type name is ``dimbsvm.svm.ensemble.OTHRMember``)
and ``HPCClassifier`` and ``SimilarityFeatures`` had no ``client`` parameter.
"""

import os
import subprocess
import sys
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


def test_a_model_with_an_exact_structural_stage_saves_loads_and_answers_the_same(tmp_path):
    """An exact kNN index is saved without scikit-learn's KDTree (not a trusted type) and built again when loaded:
    the model loads with only trusted types and its decision values are the fitted model's."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler
    from sklearn.svm import LinearSVC

    from dimbsvm.artifacts import save_model
    from dimbsvm.features.structural import StructuralFeatures

    rng = np.random.default_rng(0)
    X, X_new = rng.normal(size=(80, 3)), rng.normal(size=(30, 3))
    y = (X[:, 0] > 0.8).astype(int)
    model = make_pipeline(MinMaxScaler(), StructuralFeatures(), LinearSVC()).fit(X, y)
    assert model[1].index_.method_ == "exact"
    save_model(model, tmp_path / "m", meta={})
    assert set(sio.get_untrusted_types(file=tmp_path / "m" / "model.skops")) <= set(trusted_types())
    loaded, _ = load_artifact(tmp_path / "m")
    np.testing.assert_array_equal(loaded.decision_function(X_new), model.decision_function(X_new))


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_a_model_with_an_approximate_structural_stage_saves_loads_and_answers_the_same(tmp_path, sparse):
    """An NN-descent index (pynndescent: 20,000 training rows and more by default) could not be saved at all (its
    NNDescent holds generators: "cannot pickle 'generator' object", a job's final model lost at the end). It is
    saved without it and built again from the same rows and seed: new rows get the same neighbours and the same
    decision values, dense and CSR (cosine)."""
    import scipy.sparse as sp
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import LinearSVC

    from dimbsvm.artifacts import save_model
    from dimbsvm.features.structural import StructuralFeatures

    rng = np.random.default_rng(1)
    if sparse:
        X, X_new = (sp.random(n, 200, density=0.05, format="csr", random_state=seed) for n, seed in ((3000, 1),
                                                                                                     (200, 2)))
    else:
        X, X_new = rng.normal(size=(3000, 6)), rng.normal(size=(200, 6))
    y = (np.asarray(X[:, 0].todense()).ravel() > 0.5 if sparse else X[:, 0] > 0.8).astype(int)
    stage = StructuralFeatures(n_neighbors=5, method="pynndescent", metric="cosine" if sparse else "euclidean")
    model = make_pipeline(stage, LinearSVC(random_state=0)).fit(X, y)
    assert model[0].index_.method_ == "pynndescent"
    from dimbsvm._model_file import writing_model_file

    assert "_nnd" in model[0].index_.__getstate__()  # a pickle (a Dask transfer) keeps the built index
    with writing_model_file():
        assert "_nnd" not in model[0].index_.__getstate__()
    save_model(model, tmp_path / "m", meta={})
    assert set(sio.get_untrusted_types(file=tmp_path / "m" / "model.skops")) <= set(trusted_types())
    loaded, _ = load_artifact(tmp_path / "m")
    np.testing.assert_array_equal(loaded[0].index_.query(X_new, 5)[0], model[0].index_.query(X_new, 5)[0])
    np.testing.assert_array_equal(loaded.decision_function(X_new), model.decision_function(X_new))


def test_the_model_formats_a_release_reads_are_its_promise(tmp_path, caplog):
    """A model of a format this release does not read is refused in one line; one of a format it reads but written
    by another release loads, with a warning naming both releases (the promise in CHANGELOG.md)."""
    import json
    import shutil

    from dimbsvm import __version__
    from dimbsvm.artifacts import MODEL_FORMAT, READABLE_MODEL_FORMATS, _sha256
    from dimbsvm.exceptions import StoreError

    assert json.loads((SAVED / "hpc" / "manifest.json").read_text())["format"] in READABLE_MODEL_FORMATS
    newer = tmp_path / "newer"
    shutil.copytree(SAVED / "hpc", newer)
    manifest = json.loads((newer / "manifest.json").read_text())
    (newer / "manifest.json").write_text(json.dumps(dict(manifest, format="dimbsvm-model-2")))
    with pytest.raises(StoreError, match=rf"format 'dimbsvm-model-2' is not one dimbsvm {__version__} reads "
                                         rf"\({MODEL_FORMAT}\); load it with the release that wrote it") as caught:
        load_artifact(newer)
    assert "\n" not in str(caught.value)

    other = tmp_path / "other"
    shutil.copytree(SAVED / "hpc", other)
    meta = json.loads((other / "meta.json").read_text())
    (other / "meta.json").write_text(json.dumps(dict(meta, dimbsvm_version="0.0.9")))
    (other / "manifest.json").write_text(json.dumps(dict(manifest, files=dict(
        manifest["files"], **{"meta.json": _sha256(other / "meta.json")}))))
    with caplog.at_level("WARNING", logger="dimbsvm.artifacts"):
        model, _ = load_artifact(other)
    assert f"written by dimbsvm 0.0.9; this is {__version__}" in caplog.text
    np.testing.assert_array_equal(model.predict(EXPECTED["X_test"]), EXPECTED["hpc-predict"])


#: In a fresh interpreter: models written by dimbsvm's writer before ``skops.io`` is imported (without skops' list of
#: trusted types), then by ``skops.io.dump``; prints what was imported when, and whether the files are the same.
_WRITER_PROBE = """
import re, sys, zipfile
import numpy as np
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import SVC, LinearSVC
from dimbsvm.artifacts import load_object, save_object
from dimbsvm.svm.ensemble import EnsembleOTHRClassifier

rng = np.random.default_rng(0)
X = rng.normal(size=(120, 4))
y = (X[:, 0] > 0.8).astype(int)
models = [make_pipeline(MinMaxScaler(), SVC(class_weight="balanced")).fit(X, y),
          make_pipeline(MinMaxScaler(), EnsembleOTHRClassifier(LinearSVC(), n_estimators=3, random_state=0)).fit(X, y)]
out = sys.argv[1]
for i, model in enumerate(models):
    save_object(model, f"{out}/ours{i}.skops")
print("AFTER_SAVE", sorted(m for m in ("skops.io", "skops.io._trusted_types", "sklearn.utils._testing")
                           if m in sys.modules))
import skops.io

def canonical(data):  # __id__ is an object's id() in the writing process (for shared references): numbered in order
    seen = {}
    return re.sub(rb'"__id__": ([0-9]+)', lambda m: b'"__id__": %d' % seen.setdefault(m.group(1), len(seen)), data)

for i, model in enumerate(models):
    skops.io.dump(model, f"{out}/skops{i}.skops")
    ours, theirs = zipfile.ZipFile(f"{out}/ours{i}.skops"), zipfile.ZipFile(f"{out}/skops{i}.skops")
    same = ours.namelist() == theirs.namelist() and all(
        canonical(ours.read(name)) == canonical(theirs.read(name)) for name in ours.namelist())
    loaded = load_object(f"{out}/ours{i}.skops")
    print("MODEL", i, same, bool(np.array_equal(loaded.decision_function(X), model.decision_function(X))))
print("TRUSTED", len(skops.io._trusted_types.SKLEARN_ESTIMATOR_TYPE_NAMES))
"""


def test_the_writer_skips_skops_trusted_types_and_writes_skops_own_files(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]), PYTHONWARNINGS="ignore")
    result = subprocess.run([sys.executable, "-c", _WRITER_PROBE, str(tmp_path)], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # nothing of skops.io stays imported after a save, and its trusted-type list was never built
    assert lines[0] == "AFTER_SAVE []", lines
    # the files are skops.dump's (object ids aside), and load through the trust check to the same model
    assert lines[1:3] == ["MODEL 0 True True", "MODEL 1 True True"], lines
    # a load after a save imports the real skops.io: its loaders trust scikit-learn's estimators by default
    assert int(lines[3].split()[1]) > 100, lines
