"""Features by name at predict time (issue 30, item 2).

A model trained on the bundled KEEL set ecoli1 scores the same rows written
with their columns in another order, as a KEEL ``.dat`` file, an ``.npz``
archive with ``feature_names`` and a dimbsvm store: the decision values must
be those of ``model.decision_function`` on the rows in their original order.
A missing or an extra named column is one line; formats without names are
positional, checked by count.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

from dimbsvm.datasets import Dataset, load_keel
from dimbsvm.datasets.registry import BUNDLED_DIR
from dimbsvm.predict import write_predictions
from dimbsvm.predict import align_features, prediction_features
from dimbsvm.estimators import make_estimator
from dimbsvm.exceptions import DataError
from dimbsvm.jobs import save_model
from dimbsvm.model_selection.pipeline import build_pipeline
from dimbsvm.store import ingest

ROOT = Path(__file__).resolve().parents[1]
#: A column order that moves every column.
ORDER = [6, 3, 0, 5, 1, 4, 2]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """ecoli1, a model fitted on it (meta with its feature names) and the model's directory."""
    data = load_keel("ecoli1")
    model = build_pipeline(make_estimator("svc_balanced", {}), scaler="minmax").fit(data.X, data.y)
    meta = {"job": "t", "estimator": {"name": "svc_balanced", "params": {}}, "n_features": data.X.shape[1],
            "feature_names": list(data.feature_names), "class_map": dict(data.class_map), "positive_label": 1,
            "data_fingerprint": None}
    directory = save_model(model, tmp_path_factory.mktemp("model") / "model", meta=meta)
    return data, model, meta, directory


def _keel_columns(path: Path, columns: list[int], extra: bool = False) -> Path:
    """ecoli1.dat with its input attributes (and values) in the order ``columns``; ``extra`` adds one."""
    lines = (BUNDLED_DIR / "ecoli1.dat").read_text().splitlines()
    attributes = [line for line in lines if line.startswith("@attribute")]
    start = lines.index("@data") + 1
    inputs, output = attributes[:-1], attributes[-1]
    header = ["@relation moved"] + [inputs[j] for j in columns]
    header += ["@attribute Extra real [0.0, 1.0]"] if extra else []
    rows = []
    for line in lines[start:]:
        values = [v.strip() for v in line.split(",")]
        rows.append(", ".join([values[j] for j in columns] + (["0.5"] if extra else []) + [values[-1]]))
    path.write_text("\n".join(header + [output, "@data"] + rows) + "\n")
    return path


def _decision(model, X, out: Path) -> np.ndarray:
    """The decision column written by the prediction path (dask's local scheduler) for ``X``."""
    return zarr.open_group(str(write_predictions(model, X, out, pos_label=1, meta={})), mode="r")["decision"][:]


def test_keel_dat_with_moved_columns_scores_as_the_original(trained, tmp_path):
    data, model, meta, _ = trained
    moved = _keel_columns(tmp_path / "moved.dat", ORDER)
    assert load_keel(moved).feature_names == [data.feature_names[j] for j in ORDER]
    X = prediction_features(moved, meta, chunk_rows=100)
    np.testing.assert_array_equal(X.compute(), data.X)
    np.testing.assert_allclose(_decision(model, X, tmp_path / "p.zarr"), model.decision_function(data.X),
                               rtol=1e-12)


def test_npz_with_feature_names_is_matched_by_name(trained, tmp_path):
    data, model, meta, _ = trained
    path = tmp_path / "moved.npz"
    np.savez(path, X=data.X[:, ORDER], y=data.y, feature_names=np.array(data.feature_names)[ORDER])
    X = prediction_features(path, meta, chunk_rows=100)
    np.testing.assert_allclose(_decision(model, X, tmp_path / "p.zarr"), model.decision_function(data.X),
                               rtol=1e-12)


def test_an_unlabelled_npz_is_scored_as_the_labelled_one(trained, tmp_path):
    """New rows come without labels: an ``.npz`` of ``X`` (and names) alone is scored (issue 51, item 8)."""
    data, model, meta, _ = trained
    named, plain = tmp_path / "named.npz", tmp_path / "plain.npz"
    np.savez(named, X=data.X[:, ORDER], feature_names=np.array(data.feature_names)[ORDER])
    np.savez(plain, X=data.X)
    for path in (named, plain):
        np.testing.assert_allclose(_decision(model, prediction_features(path, meta), tmp_path / f"{path.stem}.zarr"),
                                   model.decision_function(data.X), rtol=1e-12)
    np.savez(plain, features=data.X)
    with pytest.raises(DataError, match=r"plain\.npz: missing array\(s\) \['X'\]; found \['features'\]$"):
        prediction_features(plain, meta)


def test_store_with_moved_columns_is_matched_by_name(trained, tmp_path):
    data, model, meta, _ = trained
    moved = Dataset(X=data.X[:, ORDER], y=data.y, feature_names=[data.feature_names[j] for j in ORDER],
                    class_map=dict(data.class_map), name="moved", source="ecoli1, columns moved")
    store = ingest(moved, tmp_path / "moved.zarr", chunk_rows=64)
    X = prediction_features(store.path, meta)
    assert X.chunks[0][0] == 64  # the store's chunks are kept
    np.testing.assert_allclose(_decision(model, X, tmp_path / "p.zarr"), model.decision_function(data.X),
                               rtol=1e-12)


def test_npz_without_names_is_positional_and_checked_by_count(trained, tmp_path):
    data, model, meta, _ = trained
    path = tmp_path / "plain.npz"
    np.savez(path, X=data.X, y=data.y)
    np.testing.assert_array_equal(prediction_features(path, meta).compute(), data.X)
    np.savez(path, X=data.X[:, :6], y=data.y)
    with pytest.raises(DataError, match=r"plain\.npz has \(6,\) features per row; the model was trained on 7$"):
        prediction_features(path, meta)


def test_names_a_reader_made_up_on_either_side_are_positional():
    from dimbsvm.predict import column_names

    X = np.arange(6.0).reshape(2, 3)
    made_up = column_names({"feature_names": ["x0", "x1", "x2"], "named_columns": False})
    assert made_up is None
    assert align_features(X, made_up, feature_names=["c", "a", "b"], n_features=3, source="s") is X
    assert align_features(X, ["c", "a", "b"], feature_names=made_up, n_features=3, source="s") is X
    # meta an earlier dimbsvm wrote (no named_columns): x0, x1, ... were made up, as it took them
    assert column_names({"feature_names": ["x0", "x1", "x2"]}) is None
    with pytest.raises(DataError, match=r"^s: feature column\(s\) 'c' the model was trained on are missing; "
                                        r"column\(s\) 'b' occur more than once$"):
        align_features(X, ["a", "b", "b"], feature_names=["a", "b", "c"], n_features=3, source="s")


@pytest.mark.parametrize("as_store", [False, True], ids=["npz", "store"])
def test_names_that_read_x0_x1_are_names_when_the_data_carries_them(tmp_path, as_store):
    """An ``.npz`` (or a store) whose ``feature_names`` are ``x0, x1, ...``, its columns moved: scored by name, as
    the original order scores (issue 50, item 2: before, by position, every decision value was wrong)."""
    from dimbsvm.datasets import load
    from dimbsvm.jobs.runner import model_meta
    from dimbsvm.jobs.spec import validate_job
    from dimbsvm.jobs.data import JobData

    data = load_keel("ecoli1")
    names = [f"x{j}" for j in range(data.X.shape[1])]
    np.savez(tmp_path / "train.npz", X=data.X, y=data.y, feature_names=np.array(names))
    train = load(tmp_path / "train.npz")
    assert train.named_columns and train.feature_names == names
    model = build_pipeline(make_estimator("svc_balanced", {}), scaler="minmax").fit(train.X, train.y)
    job = validate_job({"data": {"source": "unused"}, "estimator": {"name": "svc_balanced"}})
    meta = model_meta(model, job, JobData(X=train.X, y=train.y, meta=train.meta()), 1)
    assert meta["named_columns"] is True
    moved = tmp_path / "moved.npz"
    np.savez(moved, X=data.X[:, ORDER], y=data.y, feature_names=np.array(names)[ORDER])
    source = moved
    if as_store:
        source = ingest(load(moved), tmp_path / "moved.zarr", chunk_rows=64).path
    X = prediction_features(source, meta, chunk_rows=100)
    np.testing.assert_array_equal(X.compute(), data.X)
    np.testing.assert_allclose(_decision(model, X, tmp_path / "p.zarr"), model.decision_function(data.X),
                               rtol=1e-12)


def _predict(*args):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "dimbsvm.cli", "predict", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=300)


def test_cli_predict_on_a_moved_keel_file(trained, tmp_path):
    import csv

    data, model, _, directory = trained
    moved = _keel_columns(tmp_path / "moved.dat", ORDER)
    proc = _predict(directory, moved, "--out", tmp_path / "p.csv", "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "p.csv", newline="") as handle:
        decision = [float(row["decision"]) for row in csv.DictReader(handle)]
    np.testing.assert_allclose(decision, model.decision_function(data.X), rtol=1e-12)


def test_cli_predict_refuses_a_missing_and_an_extra_column_in_one_line(trained, tmp_path):
    _, _, _, directory = trained
    missing = _keel_columns(tmp_path / "missing.dat", [j for j in ORDER if j != 3])
    proc = _predict(directory, missing, "--out", tmp_path / "p.csv")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"dimbsvm: error: {missing}: feature column(s) 'Chg' the model was trained "
                                        "on are missing"]
    extra = _keel_columns(tmp_path / "extra.dat", ORDER, extra=True)
    proc = _predict(directory, extra, "--out", tmp_path / "p.csv")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"dimbsvm: error: {extra}: column(s) 'Extra' are not among the model's "
                                        "features (columns are matched to them by name): drop them"]
    assert not (tmp_path / "p.csv").exists()
