"""What a user of the CLI meets: predictions as CSV with class names, models from a registry,
registry verbs that step back and name what is wrong, listings with parameters, ``--version``.

Predictions are checked against the loaded model's own ``predict`` in this
process (the CLI scores on an embedded cluster, chunk by chunk).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dimbsvm import __version__
from dimbsvm.cli import main
from dimbsvm.datasets import load_keel
from dimbsvm.estimators import make_estimator
from dimbsvm.jobs import load_artifact
from dimbsvm.jobs.registry import ModelRegistry
from dimbsvm.model_selection.pipeline import build_pipeline

ROOT = Path(__file__).resolve().parents[1]


def _dimbsvm(*args, timeout=300):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "dimbsvm.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=timeout)


def _fitted(name, params=None):
    data = load_keel("yeast5")
    model = build_pipeline(make_estimator(name, params), scaler="minmax").fit(data.X, data.y)
    meta = {"job": "t", "estimator": {"name": name, "params": params or {}}, "n_features": int(data.X.shape[1]),
            "feature_names": None, "class_map": {str(k): int(v) for k, v in data.class_map.items()},
            "positive_label": 1, "data_fingerprint": None}
    return model, meta


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """Three versions, promoted in the order a, b, c."""
    root = tmp_path_factory.mktemp("reg") / "registry"
    reg = ModelRegistry(root)
    versions = []
    for name, params in (("svc_balanced", {"C": 1.0}), ("svc_balanced", {"C": 10.0}), ("svc", {})):
        model, meta = _fitted(name, params)
        versions.append(reg.add_version(model, job_text="x", info={"job": "t"}, model_meta=meta))
        reg.promote(versions[-1], reason="test", expected_champion=reg.champion())
    return root, versions


def _unlabelled_csv(path):
    data = load_keel("yeast5")
    names = [f"x{i}" for i in range(data.X.shape[1])]
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(names)
        writer.writerows(data.X.tolist())
    return data


def _read_predictions(path):
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    return rows


def test_predict_writes_csv_with_class_names_from_unlabelled_input(tmp_path):
    model, meta = _fitted("svc_balanced")
    from dimbsvm.jobs import save_model

    save_model(model, tmp_path / "model", meta=meta)
    data = _unlabelled_csv(tmp_path / "new.csv")
    proc = _dimbsvm("predict", tmp_path / "model", tmp_path / "new.csv", "--out", tmp_path / "pred.csv",
                    "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    rows = _read_predictions(tmp_path / "pred.csv")
    loaded, _ = load_artifact(tmp_path / "model")
    expected = loaded.predict(data.X)
    names = {code: name for name, code in meta["class_map"].items()}
    assert [int(r["row"]) for r in rows] == list(range(len(data.y)))
    assert [r["prediction"] for r in rows] == [names[int(c)] for c in expected]
    np.testing.assert_allclose([float(r["decision"]) for r in rows], loaded.decision_function(data.X), rtol=1e-12)
    assert {r["prediction"] for r in rows} <= {"positive", "negative"}
    assert not list(tmp_path.glob(".pred.csv*"))  # no partial file left


def test_predict_of_a_few_rows_runs_in_this_process_and_a_flag_still_starts_a_cluster(tmp_path):
    model, meta = _fitted("svc_balanced")
    from dimbsvm.jobs import save_model

    save_model(model, tmp_path / "model", meta=meta)
    data = _unlabelled_csv(tmp_path / "new.csv")
    here = _dimbsvm("predict", tmp_path / "model", tmp_path / "new.csv", "--out", tmp_path / "here.csv")
    assert here.returncode == 0, here.stderr
    assert "running in this process: 1 partition(s) (1,484 rows);" in here.stdout and "dashboard:" not in here.stdout
    loaded, _ = load_artifact(tmp_path / "model")
    rows = _read_predictions(tmp_path / "here.csv")
    np.testing.assert_allclose([float(r["decision"]) for r in rows], loaded.decision_function(data.X), rtol=1e-12)
    # more partitions than PREDICT_IN_PROCESS_PARTS: the embedded cluster, as before
    many = _dimbsvm("predict", tmp_path / "model", tmp_path / "new.csv", "--out", tmp_path / "many.csv",
                    "--chunk-rows", "400")
    assert many.returncode == 0, many.stderr
    assert "dashboard:" in many.stdout and "running in this process" not in many.stdout
    assert _read_predictions(tmp_path / "many.csv") == rows


def test_predict_writes_the_probability_of_a_model_that_has_one(tmp_path):
    import dask.array as da
    import zarr

    from dimbsvm.predict import write_predictions
    from dimbsvm.jobs import save_model

    model, meta = _fitted("othr", {"probability": True})
    save_model(model, tmp_path / "model", meta=meta)
    data = _unlabelled_csv(tmp_path / "new.csv")
    proc = _dimbsvm("predict", tmp_path / "model", tmp_path / "new.csv", "--out", tmp_path / "pred.csv",
                    "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    assert "decision, proba_positive" in proc.stdout  # the probability column is named for its class
    loaded, _ = load_artifact(tmp_path / "model")
    expected = loaded.predict_proba(data.X)[:, list(loaded.classes_).index(1)]
    rows = _read_predictions(tmp_path / "pred.csv")
    np.testing.assert_allclose([float(r["proba_positive"]) for r in rows], expected, rtol=1e-12)
    # the same column in a Zarr output (scored here on dask's local scheduler)
    X = da.from_array(data.X, chunks=(500, -1))
    group = zarr.open_group(str(write_predictions(loaded, X, tmp_path / "pred.zarr", pos_label=1, meta={})), mode="r")
    np.testing.assert_allclose(group["probability"][:], expected, rtol=1e-12)
    assert "probability" not in _read_predictions_header(tmp_path, "svc_balanced")


def _read_predictions_header(tmp_path, name):
    from dimbsvm.predict import write_prediction_csv

    import dask.array as da

    model, _ = _fitted(name)
    X = da.from_array(load_keel("yeast5").X[:50], chunks=(25, -1))
    with open(write_prediction_csv(model, X, tmp_path / f"{name}.csv", pos_label=1, class_names={})) as handle:
        return handle.readline().strip().split(",")


def test_predict_with_registry_champion_and_version_prefix(registry, cli, tmp_path):
    root, versions = registry
    data = _unlabelled_csv(tmp_path / "new.csv")
    champion = ModelRegistry(root).champion()
    for ref, version in (("champion", champion), ("v0001", versions[0])):
        out = tmp_path / f"{ref}.csv"
        proc = _dimbsvm("predict", f"{root}@{ref}", tmp_path / "new.csv", "--out", out, "--workers", "1")
        assert proc.returncode == 0, proc.stderr
        model, meta = ModelRegistry(root).load(version)
        names = {code: name for name, code in meta["class_map"].items()}
        assert [r["prediction"] for r in _read_predictions(out)] == [names[int(c)] for c in model.predict(data.X)]
    proc = cli("predict", f"{root}@v0009", tmp_path / "new.csv", "--out", tmp_path / "x.csv")  # refused: no cluster
    assert proc.returncode == 2 and "no version 'v0009'" in proc.stderr and not (tmp_path / "x.csv").exists()


def test_rollback_steps_back_through_the_promotions(registry, tmp_path):
    import shutil

    root = tmp_path / "registry"
    shutil.copytree(registry[0], root)
    a, b, c = registry[1]
    reg = ModelRegistry(root)
    assert reg.champion() == c and reg.lineage() == [a, b, c]
    assert main(["rollback", str(root), "--reason", "c misbehaves"]) == 0 and reg.champion() == b
    assert main(["rollback", str(root), "--reason", "b too"]) == 0 and reg.champion() == a  # not back to c
    assert main(["rollback", str(root), "--reason", "again"]) == 2 and reg.champion() == a  # nothing before a
    assert main(["promote", str(root), "v0003", "--reason", "fixed"]) == 0 and reg.champion() == c  # a prefix
    assert reg.lineage() == [a, c]
    # promoting the champion again changes nothing: a rollback still steps back, not "back" to the same version
    assert main(["promote", str(root), "v0003", "--reason", "re-promoted"]) == 0 and reg.lineage() == [a, c]
    assert main(["rollback", str(root), "--reason", "once more"]) == 0 and reg.champion() == a


def test_registry_verbs_refuse_a_directory_that_is_no_registry(tmp_path, capsys):
    assert main(["models", str(tmp_path / "nothing")]) == 2
    assert "is not a model registry" in capsys.readouterr().err
    assert main(["promote", str(tmp_path), "v0001", "--reason", "x"]) == 2


def test_ambiguous_version_prefix_is_refused(registry, capsys):
    root, _ = registry
    assert main(["promote", str(root), "v000", "--reason", "x"]) == 2
    assert "matches 3 versions" in capsys.readouterr().err


def test_listings_show_every_parameter_with_its_default(capsys):
    from dimbsvm.estimators import describe_estimators, describe_features, make_estimator, make_feature

    assert main(["estimators", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert set(listing) == set(describe_estimators())
    for name, entry in listing.items():
        assert set(entry["params"]) == set(make_estimator(name).get_params(deep=False))
    assert listing["othr"]["params"]["objective"] == make_estimator("othr").objective
    assert main(["features", "--json"]) == 0
    features = json.loads(capsys.readouterr().out)
    assert set(features) == set(describe_features())
    assert features["structural"]["params"]["n_neighbors"] == make_feature("structural").n_neighbors
    assert main(["estimators"]) == 0
    assert "    C = 1.0" in capsys.readouterr().out


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.strip() == f"dimbsvm {__version__}"


def test_embedded_dashboard_serves_its_status_page():
    """The link the CLI prints works: bokeh is installed, the page is Dask's status, not its install hint."""
    import socket
    import urllib.request

    from dimbsvm.distributed import cluster_client

    with socket.socket() as probe:  # a free port on 127.0.0.1
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with cluster_client(n_workers=1, dashboard_address=f"127.0.0.1:{port}") as client:
        assert client.dashboard_link.startswith(f"http://127.0.0.1:{port}/")
        with urllib.request.urlopen(client.dashboard_link, timeout=30) as page:
            body = page.read().decode()
        assert page.status == 200 and "bokeh" in body.lower() and "needs bokeh" not in body.lower()
