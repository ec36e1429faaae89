"""A self-contained model scores raw rows, at scale, from Parquet or CSV (issue 32 items 3 and 5, issue 35 item 1).

A job trains on a store ingested from a real Parquet file with a nominal
column (``colour``), an id column (``uid``) and text class names
(``fraud``/``legit``). The truth every prediction is compared with is the
fitted estimator applied to a one-hot matrix built here independently
(pandas ``get_dummies`` over the training categories, columns in the
training feature order), so a wrong encoding, a wrong column order, a
reordering of rows or codes instead of names all fail.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dimbsvm
from dimbsvm.exceptions import DataError, DimbsvmError
from dimbsvm.jobs import run_job, validate_job
from dimbsvm.predict import COMPLETE_MARKER, DimbsvmModel, predict_to
from dimbsvm.store import ingest

ROOT = Path(__file__).resolve().parents[1]
N_ROWS = 600
COLOURS = ["blue", "green", "red"]


def _rows(seed: int, n: int = N_ROWS) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    colour = rng.choice(COLOURS, n)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    label = np.where(x1 + 1.5 * (colour == "red") + 0.3 * rng.normal(size=n) > 1.2, "fraud", "legit")
    return pd.DataFrame({"uid": rng.permutation(100_000)[:n], "x1": x1, "colour": colour, "x2": x2, "label": label})


def _train(root: Path, *, unknown: str | None = None) -> Path:
    """A run trained on a store ingested from a Parquet file; its model directory."""
    root.mkdir(parents=True, exist_ok=True)
    _rows(0).to_parquet(root / "train.parquet", index=False)
    ingest(str(root / "train.parquet"), root / "train.zarr", target="label", id="uid")
    data = {"source": str(root / "train.zarr")}
    if unknown is not None:
        data["unknown_categories"] = unknown
    job = validate_job({"name": "fraud", "data": data, "estimator": {"name": "othr", "params": {"probability": True}},
                        "cv": {"n_splits": 2}, "metrics": ["g_mean"]})
    return run_job(job, None, out=root / "run", progress=False).run_dir / "model"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("fraud"))


def _one_hot(frame: pd.DataFrame) -> np.ndarray:
    """The training encoding, built independently: x1, colour over the training categories, x2."""
    known = frame["colour"].where(frame["colour"].isin(COLOURS))  # another value: no training category
    dummies = pd.get_dummies(pd.Categorical(known, categories=COLOURS), dtype=np.float64).to_numpy()
    return np.column_stack([frame["x1"].to_numpy(np.float64), dummies, frame["x2"].to_numpy(np.float64)])


def _expected(model_dir: Path, frame: pd.DataFrame):
    """(class names, positive-class decision, positive-class probability) of the estimator on the one-hot rows."""
    from dimbsvm.jobs import load_artifact

    estimator, meta = load_artifact(model_dir)
    X = _one_hot(frame)
    names = {int(code): name for name, code in meta["class_map"].items()}
    classes = list(estimator.classes_)
    positive = classes.index(meta["positive_label"])
    decision = estimator.decision_function(X)
    return ([names[int(c)] for c in estimator.predict(X)], decision if positive == 1 else -decision,
            estimator.predict_proba(X)[:, positive])


def _new_rows(tmp_path: Path, *, parts: int = 3) -> tuple[pd.DataFrame, Path]:
    """Unlabelled rows, columns reordered, as a directory of ``parts`` Parquet files (several partitions)."""
    frame = _rows(1)[["x2", "colour", "uid", "x1"]]
    directory = tmp_path / "new"
    directory.mkdir()
    for k, piece in enumerate(np.array_split(np.arange(len(frame)), parts)):
        frame.iloc[piece].to_parquet(directory / f"part{k}.parquet", index=False)
    return frame, directory


def test_the_model_meta_records_its_columns_categories_and_class_names(trained):
    meta = json.loads((trained / "meta.json").read_text())
    assert meta["input"]["columns"] == [{"name": "x1"}, {"name": "colour", "categories": COLOURS}, {"name": "x2"}]
    assert (meta["input"]["id_column"], meta["input"]["target"]) == ("uid", "label")
    assert meta["input"]["unknown_categories"] == "error"
    assert meta["class_names"] == {"0": "legit", "1": "fraud"} and meta["positive_class"] == "fraud"
    assert meta["feature_names"] == ["x1", "colour=blue", "colour=green", "colour=red", "x2"]


def test_load_model_scores_raw_rows_as_the_estimator_scores_the_one_hot_matrix(trained):
    model = dimbsvm.load_model(trained)
    frame = _rows(1)[["colour", "x2", "uid", "x1", "label"]]  # any order; id and label may be there
    names, decision, probability = _expected(trained, frame)
    assert isinstance(model, DimbsvmModel)
    assert model.predict(frame).tolist() == names
    assert set(names) == {"fraud", "legit"}
    np.testing.assert_array_equal(model.decision(frame), decision)  # bit for bit
    np.testing.assert_array_equal(model.predict_proba(frame)[:, list(model.classes_).index("fraud")], probability)
    np.testing.assert_array_equal(model.decision_function(frame.drop(columns=["uid", "label"])),
                                  model.estimator.decision_function(_one_hot(frame)))


def test_load_model_refuses_an_unseen_category_and_a_missing_column_in_one_line(trained):
    model = dimbsvm.load_model(trained)
    frame = _rows(1).head(5).copy()
    frame.loc[3, "colour"] = "purple"
    with pytest.raises(DataError, match=r"row 4 \(counting data rows from 1\), column 'colour': category 'purple' "
                                         r"was not seen in training") as caught:
        model.predict(frame)
    assert "\n" not in str(caught.value)
    with pytest.raises(DataError, match=r"column\(s\) 'x2' the model was trained on are missing"):
        model.predict(frame.drop(columns=["x2"]))
    with pytest.raises(DataError, match=r"column\(s\) 'extra' are not among the model's input columns"):
        model.predict(frame.assign(extra=1.0))
    frame = _rows(1).head(5).copy()
    frame.loc[2, "x1"] = np.nan
    with pytest.raises(DataError, match=r"row 3 \(counting data rows from 1\), column 'x1' is empty \(NaN\)"):
        model.predict(frame)


def test_predict_parquet_to_parquet_on_a_cluster_keeps_ids_in_input_order(trained, tmp_path, client):
    frame, source = _new_rows(tmp_path)
    out = tmp_path / "pred.parquet"
    written = predict_to(dimbsvm.load_model(trained), str(source), str(out), chunk_rows=70)
    assert written.columns == ("uid", "prediction", "decision", "proba_fraud") and written.n_rows == len(frame)
    result = pd.read_parquet(out)
    names, decision, probability = _expected(trained, frame)
    assert result["uid"].tolist() == frame["uid"].tolist()
    assert result["prediction"].tolist() == names
    np.testing.assert_array_equal(result["decision"].to_numpy(), decision)
    np.testing.assert_array_equal(result["proba_fraud"].to_numpy(), probability)
    assert (out / COMPLETE_MARKER).is_file()
    assert json.loads((out / COMPLETE_MARKER).read_text())["rows"] == len(frame)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "pred.parquet"]  # no staging left


def test_predict_a_labelled_csv_in_chunk_rows_partitions_to_csv(trained, tmp_path, client):
    frame = _rows(1)[["label", "x1", "uid", "colour", "x2"]]
    frame.to_csv(tmp_path / "new.csv", index=False)
    out = tmp_path / "pred.csv"
    predict_to(dimbsvm.load_model(trained), str(tmp_path / "new.csv"), str(out), chunk_rows=100)
    result = pd.read_csv(out)
    names, decision, probability = _expected(trained, frame)
    assert list(result.columns) == ["uid", "prediction", "decision", "proba_fraud"]
    assert result["uid"].tolist() == frame["uid"].tolist() and result["prediction"].tolist() == names
    np.testing.assert_array_equal(result["decision"].to_numpy(), decision)  # CSV floats round-trip exactly
    np.testing.assert_array_equal(result["proba_fraud"].to_numpy(), probability)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.csv", "pred.csv"]


def test_chunk_rows_splits_a_single_csv_file_into_partitions(tmp_path):
    from dimbsvm.predict.tables import _csv_blocksize
    from dimbsvm.store.sources._frames import open_frame

    _rows(1, n=3000).to_csv(tmp_path / "new.csv", index=False)
    blocksize = _csv_blocksize(str(tmp_path / "new.csv"), 500, None)
    assert open_frame(str(tmp_path / "new.csv"), blocksize=blocksize).frame.npartitions >= 4


def test_without_ids_rows_are_numbered_across_partitions_and_an_unseen_category_names_its_row(trained, tmp_path,
                                                                                           client):
    frame = _rows(1).drop(columns=["uid"])
    bad = frame.copy()
    bad.loc[457, "colour"] = "purple"  # in a later partition than the first
    bad.to_csv(tmp_path / "bad.csv", index=False)
    model = dimbsvm.load_model(trained)
    with pytest.raises(DataError, match=r"bad\.csv: row 458 \(counting data rows from 1\), column 'colour': "
                                         r"category 'purple' was not seen in training"):
        predict_to(model, str(tmp_path / "bad.csv"), str(tmp_path / "bad.parquet"), chunk_rows=100)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]  # nothing half-written
    frame.to_csv(tmp_path / "new.csv", index=False)
    predict_to(model, str(tmp_path / "new.csv"), str(tmp_path / "pred.parquet"), chunk_rows=100)
    result = pd.read_parquet(tmp_path / "pred.parquet")
    assert result["row"].tolist() == list(range(len(frame)))
    assert result["prediction"].tolist() == _expected(trained, frame)[0]


def test_unknown_categories_ignore_scores_an_unseen_value_as_missing(tmp_path):
    model_dir = _train(tmp_path / "train", unknown="ignore")
    meta = json.loads((model_dir / "meta.json").read_text())
    assert meta["input"]["unknown_categories"] == "ignore"
    frame = _rows(1).head(40).copy()
    frame.loc[[5, 17], "colour"] = "purple"
    model = dimbsvm.load_model(model_dir)
    X = _one_hot(frame)  # purple is no training category: an all-zero block, as a missing cell
    assert X[5, 1:4].tolist() == [0.0, 0.0, 0.0]
    np.testing.assert_array_equal(model.decision_function(frame), model.estimator.decision_function(X))
    frame.to_parquet(tmp_path / "new.parquet", index=False)
    predict_to(model, str(tmp_path / "new.parquet"), str(tmp_path / "pred.csv"))
    np.testing.assert_array_equal(pd.read_csv(tmp_path / "pred.csv")["decision"].to_numpy(),
                                  _expected(model_dir, frame)[1])


def test_predict_from_and_to_s3_and_an_existing_output_is_refused(trained, tmp_path, s3_bucket, client):
    import s3fs

    frame, source = _new_rows(tmp_path, parts=2)
    fs = s3fs.S3FileSystem()
    for path in sorted(source.iterdir()):
        fs.put(str(path), f"{s3_bucket}/in/{path.name}")
    model = dimbsvm.load_model(trained)
    out = f"s3://{s3_bucket}/out/pred.parquet"
    predict_to(model, f"s3://{s3_bucket}/in/", out)
    assert fs.exists(f"{s3_bucket}/out/pred.parquet/{COMPLETE_MARKER}")
    result = pd.read_parquet(out)
    names, decision, _ = _expected(trained, frame)
    assert result["uid"].tolist() == frame["uid"].tolist() and result["prediction"].tolist() == names
    np.testing.assert_array_equal(result["decision"].to_numpy(), decision)
    assert fs.ls(f"{s3_bucket}/out") == [f"{s3_bucket}/out/pred.parquet"]  # no staging left
    predict_to(model, f"s3://{s3_bucket}/in/", f"s3://{s3_bucket}/out/pred.csv")
    with fs.open(f"{s3_bucket}/out/pred.csv") as handle:
        assert pd.read_csv(handle)["prediction"].tolist() == names
    before = fs.cat(f"{s3_bucket}/out/pred.csv")
    with pytest.raises(DimbsvmError, match=r"prediction output s3://.*/out/pred\.csv already exists; choose a new"):
        predict_to(model, str(source), f"s3://{s3_bucket}/out/pred.csv")
    assert fs.cat(f"{s3_bucket}/out/pred.csv") == before
    (tmp_path / "taken.parquet").mkdir()
    with pytest.raises(DimbsvmError, match=r"taken\.parquet already exists"):
        predict_to(model, str(source), str(tmp_path / "taken.parquet"))
    assert not any((tmp_path / "taken.parquet").iterdir())


def test_cli_predicts_parquet_to_parquet_with_class_names(trained, tmp_path):
    frame, source = _new_rows(tmp_path)
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-m", "dimbsvm.cli", "predict", str(trained), str(source), "--out",
                           str(tmp_path / "pred.parquet"), "--workers", "2"], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {len(frame)} predictions (uid, prediction, decision, proba_fraud)" in proc.stdout
    result = pd.read_parquet(tmp_path / "pred.parquet")
    assert result["uid"].tolist() == frame["uid"].tolist()
    assert result["prediction"].tolist() == _expected(trained, frame)[0]
    proc = subprocess.run([sys.executable, "-m", "dimbsvm.cli", "predict", str(trained), str(source), "--out",
                           str(tmp_path / "pred.parquet")], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=300, check=False)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert "already exists; choose a new --out" in proc.stderr


def test_cli_names_an_unseen_category_found_on_a_worker_process_in_one_line(trained, tmp_path):
    frame = _rows(1)[["x2", "colour", "uid", "x1"]]
    bad = frame.copy()
    bad.loc[450, "colour"] = "purple"  # past the first partitions of 100 rows
    bad.to_csv(tmp_path / "bad.csv", index=False)
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-m", "dimbsvm.cli", "predict", str(trained), str(tmp_path / "bad.csv"),
                           "--out", str(tmp_path / "pred.csv"), "--workers", "1", "--chunk-rows", "100"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0
    assert re.search(r"bad\.csv: row 451 \(counting data rows from 1\), column 'colour': category 'purple' was "
                     r"not seen in training", proc.stderr), proc.stderr
    assert not (tmp_path / "pred.csv").exists() and not list(tmp_path.glob(".pred.csv*"))


def test_a_retrained_version_scores_raw_rows_as_a_run_model_does(tmp_path):
    """A registry's models record the same input encoding and class names as a run's final model."""
    from dimbsvm.jobs.registry import ModelRegistry
    from dimbsvm.jobs.retrain import retrain

    root = tmp_path / "retrain"
    _train(root)  # also ingests the store
    job = validate_job({"name": "fraud", "data": {"source": str(root / "train.zarr")},
                        "estimator": {"name": "othr", "params": {"probability": True}},
                        "cv": {"n_splits": 2}, "metrics": ["g_mean"]})
    outcome = retrain(job, None, root / "registry", job_text="fraud")
    version_dir = root / "registry" / "versions" / outcome.version / "model"
    meta = json.loads((version_dir / "meta.json").read_text())
    run_meta = json.loads((root / "run" / "model" / "meta.json").read_text())
    for key in ("input", "class_names", "positive_class", "feature_names", "class_map", "preprocessing"):
        assert meta[key] == run_meta[key], key
    model = DimbsvmModel(*ModelRegistry(root / "registry").load(outcome.version))
    frame = _rows(1)[["x2", "colour", "uid", "x1"]]
    names, decision, _ = _expected(version_dir, frame)
    assert model.predict(frame).tolist() == names and set(names) == {"fraud", "legit"}
    np.testing.assert_array_equal(model.decision(frame), decision)


def test_ids_a_spreadsheet_would_run_are_written_to_csv_as_text(trained, tmp_path):
    """Formula-like ids (=, +, -, @, tab, CR first) are quoted with a leading ' in a CSV, as OWASP advises
    (issue 50, item 4); the Parquet output keeps them as given, and plain ids are untouched, plain signed
    numbers included (svmlight's class names -1 and +1 are values, not formulas)."""
    frame = _rows(1, n=10)[["uid", "x1", "colour", "x2"]]
    ids = ["=HYPERLINK(\"http://x\",\"y\")", "=cmd|' /C calc'!A0", "@SUM(A1:A2)", "+1+cmd", "-2+3", "\tx",
           "plain-1", "7", "-2", "+1.5e3"]
    frame["uid"] = ids
    frame.to_parquet(tmp_path / "new.parquet", index=False)
    model = dimbsvm.load_model(trained)
    predict_to(model, str(tmp_path / "new.parquet"), str(tmp_path / "pred.csv"))
    predict_to(model, str(tmp_path / "new.parquet"), str(tmp_path / "pred.parquet"))
    written = pd.read_csv(tmp_path / "pred.csv", dtype={"uid": str}, keep_default_na=False)["uid"].tolist()
    assert written == ["'" + i for i in ids[:6]] + ids[6:]
    assert pd.read_parquet(tmp_path / "pred.parquet")["uid"].tolist() == ids
    # the decision values, negative ones included, stay numbers
    assert pd.read_csv(tmp_path / "pred.csv")["decision"].dtype == np.float64


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
def test_a_prediction_output_in_a_bucket_that_does_not_exist_is_refused_and_not_created(trained, tmp_path,
                                                                                       s3_bucket, suffix):
    """A mistyped bucket is an error naming it, before any row is scored; no bucket is created (issue 50, item 3)."""
    import s3fs

    frame, source = _new_rows(tmp_path, parts=1)
    fs = s3fs.S3FileSystem()
    missing = f"{s3_bucket}-typo"
    with pytest.raises(DimbsvmError, match=rf"prediction output s3://{missing}/out/pred\.{suffix}: the bucket "
                                           rf"{missing} does not exist") as caught:
        predict_to(dimbsvm.load_model(trained), str(source), f"s3://{missing}/out/pred.{suffix}")
    assert "\n" not in str(caught.value)
    fs.invalidate_cache()
    assert not fs.exists(missing)


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
def test_a_second_writer_of_one_output_at_a_url_is_refused_and_replaces_nothing(trained, tmp_path, s3_bucket,
                                                                               suffix):
    """Two runs to one ``s3://`` output, the second checked before the first wrote (issue 50, item 3): the second
    is refused in one line when it would write, and the first's output is as it wrote it."""
    import s3fs

    from dimbsvm.predict.tables import plan_prediction

    frame, source = _new_rows(tmp_path, parts=2)
    model = dimbsvm.load_model(trained)
    out = f"s3://{s3_bucket}/race/pred.{suffix}"
    second = plan_prediction(model, str(source), out)  # checked while the output does not exist yet
    predict_to(model, str(source), out)  # the first writer finishes
    fs = s3fs.S3FileSystem()
    fs.invalidate_cache()
    before = {path: fs.cat(path) for path in fs.find(f"{s3_bucket}/race")}
    with pytest.raises(DimbsvmError, match=r"prediction output s3://.*/race/pred\.\w+ appeared while the "
                                           r"predictions were written") as caught:
        second.run()
    assert "\n" not in str(caught.value)
    fs.invalidate_cache()
    assert {path: fs.cat(path) for path in fs.find(f"{s3_bucket}/race")} == before
    names = _expected(trained, frame)[0]
    read = pd.read_parquet(out) if suffix == "parquet" else pd.read_csv(fs.open(f"{s3_bucket}/race/pred.csv"))
    assert read["prediction"].tolist() == names
    assert not any(path.endswith("/_CLAIMED") for path in before)  # the first writer's claim is gone
