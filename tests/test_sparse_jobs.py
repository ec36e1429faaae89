"""Jobs and predictions over sparse stores (issue 52): CSR rows end to end, refused where a step would densify.

Truths: the sequential scikit-learn pipeline on the CSR rows themselves
(``MaxAbsScaler`` -> estimator, :func:`conftest.reference_fold`); the same job
over a dense store of the same rows; the fitted model's own ``decision_function``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file
from sklearn.preprocessing import MaxAbsScaler

from dimbsvm import load_model
from dimbsvm.estimators import make_estimator
from dimbsvm.exceptions import DataError
from dimbsvm.jobs import run_job, validate_job
from dimbsvm.jobs.data import check_job_data, load_job_data
from dimbsvm.jobs.oof import load_oof
from dimbsvm.predict.tables import predict_to
from dimbsvm.store import ingest

METRICS = ["g_mean", "f_measure", "auc"]


def _separable_text(n_rows=1800, n_features=400, seed=0):
    """Sparse rows whose minority (about 10 %) is a noisy linear function of them."""
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(n_rows), 8)
    columns = np.minimum(rng.zipf(1.4, size=rows.size) - 1, n_features - 1)
    X = sp.csr_matrix((rng.random(rows.size) + 0.1, (rows, columns)), shape=(n_rows, n_features))
    w = rng.normal(size=n_features) * (rng.random(n_features) < 0.3)
    score = X @ w + 0.3 * rng.normal(size=n_rows)
    return X, (score > np.quantile(score, 0.9)).astype(np.int64)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    X, y = _separable_text()
    root = tmp_path_factory.mktemp("sparse")
    sparse = ingest((X, y), root / "sparse.zarr", chunk_rows=300)
    dense = ingest((X.toarray(), y), root / "dense.zarr", chunk_rows=300)
    return X, y, sparse, dense


def _job(source, estimator, params, scaler="maxabs", **extra):
    return validate_job({"name": "sparse", "data": {"source": str(source)},
                         "estimator": {"name": estimator, "params": params},
                         "preprocessing": {"scaler": scaler}, "cv": {"n_splits": 3, "random_state": 0},
                         "metrics": METRICS, **extra})


@pytest.mark.parametrize("estimator, params", [
    ("othr", {"estimator": "linear_svc", "random_state": 0}),
    ("ensemble_othr", {"estimator": "linear_svc", "n_estimators": 3, "random_state": 2}),
])
def test_sparse_store_job_equals_the_sequential_pipeline_on_csr(stores, estimator, params, client, tmp_path,
                                                                sequential_fold):
    X, y, sparse, _ = stores
    result = run_job(_job(sparse.path, estimator, params), client, out=tmp_path / "run", progress=False)
    reference = make_estimator(estimator, params)
    for record in result.folds:
        expected = sequential_fold(X, y, reference, n_splits=3, seed=record["seed"], fold=record["fold"],
                                   scaler=MaxAbsScaler())
        for key in METRICS:
            assert record[key] == pytest.approx(expected[key], rel=1e-12, abs=1e-12), key
        assert record["threshold"] == pytest.approx(expected["threshold"], rel=1e-12)


def test_sparse_and_dense_stores_of_the_same_rows_give_the_same_run(stores, tmp_path):
    # Without scaling the same rows reach the members, CSR or dense, and liblinear solves the same problem.
    _, _, sparse, dense = stores
    params = {"estimator": "linear_svc", "n_estimators": 3, "random_state": 1}
    runs = [run_job(_job(store.path, "ensemble_othr", params, scaler="none"), None, out=tmp_path / name,
                    progress=False) for name, store in (("sparse", sparse), ("dense", dense))]
    for got, expected in zip(*(run.folds for run in runs)):
        for key in (*METRICS, "threshold"):
            assert got[key] == pytest.approx(expected[key], rel=1e-12, abs=1e-12), key
    oof = [load_oof(run.run_dir) for run in runs]
    np.testing.assert_array_equal(oof[0]["y_pred"], oof[1]["y_pred"])
    np.testing.assert_allclose(oof[0]["score"], oof[1]["score"], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("change, message", [
    ({"scaler": "minmax"}, "preprocessing.scaler minmax would turn every zero into a value"),
    ({"scaler": "standard"}, "use maxabs"),
    ({"estimator": "act"}, "estimator 'act' builds dense kernel or distance matrices"),
    ({"features": [{"name": "hik"}]}, "feature stage 'hik' reads dense rows .*structural \\(not stored\\) takes CSR"),
])
def test_what_would_densify_is_refused_in_one_line(stores, change, message):
    _, _, sparse, _ = stores
    job = _job(sparse.path, change.get("estimator", "othr"), {}, scaler=change.get("scaler", "maxabs"),
               **({"features": change["features"]} if "features" in change else {}))
    data = load_job_data(str(sparse.path))
    with pytest.raises(DataError, match=message) as caught:
        check_job_data(data, job)
    assert "\n" not in str(caught.value) and "sparse store" in str(caught.value)


@pytest.mark.parametrize("estimator, params, metric", [
    # liblinear's coordinate descent visits rows in a random order: seeded, so that the folds can equal the truth
    ("othr", {"estimator": "linear_svc", "estimator__random_state": 0, "random_state": 0}, "cosine"),
    ("ensemble_othr", {"estimator": "linear_svc", "n_estimators": 3, "random_state": 2}, "euclidean"),
])
def test_a_structural_stage_on_sparse_rows_equals_the_sequential_pipeline(stores, estimator, params, metric, client,
                                                                         tmp_path, sequential_fold):
    """Each fold's kNN graph built on its CSR training rows (scikit-learn's exact search below 20,000 rows), the
    neighbourhood columns appended as CSR: the store's job and the same rows as an svmlight file in memory give the
    sequential pipeline ``MaxAbsScaler -> StructuralFeatures -> estimator`` on the CSR rows."""
    from dimbsvm.features import StructuralFeatures

    X, y, sparse, _ = stores
    stage = {"name": "structural", "params": {"n_neighbors": 5, "metric": metric, "weight": 0.5}}
    dump_svmlight_file(X, y, str(tmp_path / "rows.svm"))
    runs = [run_job(_job(source, estimator, params, features=[stage]), client, out=tmp_path / name, progress=False)
            for name, source in (("store", sparse.path), ("file", tmp_path / "rows.svm"))]
    reference = make_estimator(estimator, params)
    features = [StructuralFeatures(n_neighbors=5, metric=metric, weight=0.5)]
    for record, in_memory in zip(runs[0].folds, runs[1].folds):
        expected = sequential_fold(X, y, reference, n_splits=3, seed=record["seed"], fold=record["fold"],
                                   scaler=MaxAbsScaler(), features=features)
        for key in (*METRICS, "threshold"):
            assert record[key] == pytest.approx(expected[key], rel=1e-12, abs=1e-12), key
            assert in_memory[key] == pytest.approx(expected[key], rel=1e-12, abs=1e-12), key


def test_predictions_on_sparse_stores_and_svmlight_files_match_the_model(stores, tmp_path):
    X, y, sparse, _ = stores
    run = run_job(_job(sparse.path, "othr", {"estimator": "linear_svc"}), None, out=tmp_path / "run",
                  progress=False)
    model = load_model(run.run_dir / "model")
    truth = model.decision_function(X)  # the model on the CSR rows, in memory
    np.testing.assert_allclose(truth, model.decision_function(X.toarray()), rtol=1e-12, atol=1e-12)

    predict_to(model, sparse.path, tmp_path / "store.csv")
    dump_svmlight_file(X, y, str(tmp_path / "rows.svm"))
    predict_to(model, tmp_path / "rows.svm", tmp_path / "file.csv")
    for out in ("store.csv", "file.csv"):
        scored = pd.read_csv(tmp_path / out)
        np.testing.assert_allclose(scored["decision"], truth, rtol=1e-9, atol=1e-12)  # (the text's precision)

    # a store with fewer columns is widened with zero columns, as svmlight means them; more are refused
    narrow = X[:, :300]
    ingest((narrow, y), tmp_path / "narrow.zarr", chunk_rows=500)
    predict_to(model, tmp_path / "narrow.zarr", tmp_path / "narrow.csv")
    widened = sp.hstack([narrow, sp.csr_matrix((X.shape[0], 100))]).tocsr()
    np.testing.assert_allclose(pd.read_csv(tmp_path / "narrow.csv")["decision"], model.decision_function(widened),
                               rtol=1e-12, atol=1e-12)
    ingest((sp.hstack([X, X]).tocsr(), y), tmp_path / "wide.zarr")
    with pytest.raises(DataError, match="has 800 features per row \\(sparse, by index\\); the model was trained "
                                        "on 400"):
        predict_to(model, tmp_path / "wide.zarr", tmp_path / "wide.csv")


def test_the_sparse_example_job_reads_the_file_and_its_store_alike(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[1]
    spec = yaml.safe_load((root / "jobs" / "sparse.yaml").read_text())
    source = root / "jobs" / "data" / "textlike.svm"
    proc = subprocess.run([sys.executable, "-m", "dimbsvm.cli", "ingest", str(source), str(tmp_path / "t.zarr"),
                           "--chunk-rows", "400"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "X (1500, 5000) float64 sparse CSR (" in proc.stdout and "in chunks of 400 rows" in proc.stdout
    runs = [run_job(validate_job(dict(spec, data={"source": str(where)})), None, out=tmp_path / name,
                    progress=False) for name, where in (("file", source), ("store", tmp_path / "t.zarr"))]
    assert runs[0].folds == runs[1].folds  # in memory (CSR) and over the store: the same records
    assert runs[0].summary["g_mean"]["mean"] > 0.8  # the topic words separate the minority


def test_a_search_over_a_sparse_store_equals_the_search_over_its_rows_in_memory(stores, tmp_path):
    X, y, _, _ = stores
    spec = {"name": "search", "estimator": {"name": "othr", "params": {"estimator": "linear_svc"}},
            "preprocessing": {"scaler": "maxabs"}, "cv": {"n_splits": 3, "random_state": 0}, "metrics": METRICS,
            "search": {"params": {"estimator__C": [0.1, 10.0]}, "cv": 2, "scoring": "g_mean"}}
    dump_svmlight_file(X, y, str(tmp_path / "rows.svm"))
    store = ingest(tmp_path / "rows.svm", tmp_path / "rows.zarr", chunk_rows=400)
    runs = [run_job(validate_job(dict(spec, data={"source": str(source)})), None, out=tmp_path / name,
                    progress=False) for name, source in (("store", store.path), ("file", tmp_path / "rows.svm"))]
    assert runs[0].folds == runs[1].folds
    untimed = [[{k: v for k, v in c.items() if k != "seconds"} for c in run.search["candidates"]] for run in runs]
    assert untimed[0] == untimed[1] and len(untimed[0]) == 2
    assert {record["params"]["estimator__C"] for record in runs[0].folds} <= {0.1, 10.0}


def test_a_retraining_on_a_batch_of_other_width_or_column_order_is_one_line(tmp_path, monkeypatch, capsys):
    """The champion scores the holdout's rows as they are: an svmlight batch with a higher index than the
    champion saw, or a CSV with the champion's columns in another order, is refused in one line and the
    registry gets no version; a narrower svmlight batch ingested with --n-features retrains."""
    import shutil
    from pathlib import Path

    import yaml

    from dimbsvm.cli import main
    from dimbsvm.datasets.text_like import make_text_like
    from dimbsvm.jobs.registry import ModelRegistry

    monkeypatch.chdir(tmp_path)
    for name, width, seed in (("first", 300, 0), ("wider", 320, 1), ("narrower", 280, 2)):
        X, y = make_text_like(600, width, nnz_per_row=15, minority_fraction=0.1, random_state=seed)
        dump_svmlight_file(X, y, f"{name}.svm", zero_based=False)
    job = {"name": "rs", "data": {"source": "first.svm"}, "preprocessing": {"scaler": "maxabs"},
           "estimator": {"name": "linear_svc"}, "cv": {"n_splits": 3}, "metrics": ["g_mean"],
           "retrain": {"holdout": {"fraction": 0.25, "random_state": 0}, "gates": {"g_mean": {"tolerance": 0.0}}}}

    def retrain(source):
        Path("job.yaml").write_text(yaml.safe_dump({**job, "data": {"source": source}}))
        capsys.readouterr()
        status = main(["retrain", "job.yaml", "--registry", "reg"])
        return status, [line for line in capsys.readouterr().err.splitlines() if line.startswith("dimbsvm: ")]

    assert retrain("first.svm")[0] == 0
    champion = ModelRegistry("reg").champion()
    status, lines = retrain("wider.svm")
    assert status == 2 and len(lines) == 1, lines
    assert f"(for the champion {champion}) has (320,) features per row; the model was trained on 300" in lines[0]
    assert len(ModelRegistry("reg").versions()) == 1
    assert main(["ingest", "narrower.svm", "narrower.zarr", "--n-features", "300"]) == 0
    assert retrain("narrower.zarr")[0] == 0 and len(ModelRegistry("reg").versions()) == 2

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=200), "b": rng.normal(size=200),
                          "class": ["neg"] * 170 + ["pos"] * 30})
    frame.to_csv("in_order.csv", index=False)
    frame[["b", "a", "class"]].to_csv("reordered.csv", index=False)
    job = {**job, "preprocessing": {"scaler": "minmax"}, "estimator": {"name": "svc_balanced"}}
    shutil.rmtree("reg")
    assert retrain("in_order.csv")[0] == 0
    status, lines = retrain("reordered.csv")
    assert status == 2 and len(lines) == 1 and "its columns are the champion's in another order" in lines[0], lines
    assert len(ModelRegistry("reg").versions()) == 1
