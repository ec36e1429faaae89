"""Experiment tracking in MLflow (issue 35, item 2), against a real local MLflow store.

The command line runs for real (subprocesses, an embedded cluster of one
worker, the bundled yeast5 data); MLflow is a ``sqlite:///`` tracking and
registry store in the test's directory, read back with ``mlflow.MlflowClient``.
No mocks: what a team's MLflow would hold is what is checked.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
RETRAIN_JOB = ROOT / "jobs" / "retrain.yaml"

#: A small run: yeast5, 3 folds, two repeats (the fold index as the metrics' step covers repeats).
RUN_JOB = {"name": "tracked", "data": {"source": "yeast5"},
           "estimator": {"name": "svc_balanced", "params": {"C": 1.0}},
           "cv": {"n_splits": 3, "n_repeats": 2, "random_state": 0}, "metrics": ["g_mean", "f_measure", "auc"]}


def _cli(*args, cwd, timeout=300, warnings="ignore"):
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS=warnings)
    env.pop("DASK_LOGGING__DISTRIBUTED", None)
    return subprocess.run([sys.executable, "-m", "dimbsvm.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _job(tmp_path, spec, name="job.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_a_job_with_tracking_without_mlflow_is_one_line_before_any_cluster(tmp_path):
    # a Python whose mlflow cannot be imported, installed or not
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "sitecustomize.py").write_text("import sys\nsys.modules['mlflow'] = None  # import mlflow fails\n")
    env = dict(os.environ, PYTHONPATH=f"{shadow}{os.pathsep}{ROOT}", PYTHONWARNINGS="ignore")
    job = _job(tmp_path, dict(RUN_JOB, tracking={"mlflow": f"sqlite:///{tmp_path}/m.db"}))
    for args in (["run", job, "--out", tmp_path / "run"], ["run", _job(tmp_path, RUN_JOB, "plain.yaml"),
                                                          "--mlflow", "sqlite:///m.db", "--out", tmp_path / "r2"],
                 ["retrain", job, "--registry", tmp_path / "reg"], ["validate", job]):
        proc = subprocess.run([sys.executable, "-m", "dimbsvm.cli", *map(str, args)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and 'needs the mlflow package: pip install "dimbsvm[mlflow]"' in lines[0], lines
        assert "dashboard" not in proc.stdout  # no cluster was started
    assert not (tmp_path / "run").exists() and not (tmp_path / "reg").exists()


def test_tracking_in_a_job_is_schema_checked_and_leaves_the_fingerprint_alone():
    from dimbsvm.exceptions import JobSpecError
    from dimbsvm.jobs import validate_job
    from dimbsvm.jobs.job_spec import JobSpec
    from dimbsvm.jobs.run_dir import job_fingerprint

    plain = validate_job(dict(RUN_JOB))
    tracked = validate_job(dict(RUN_JOB, tracking={"mlflow": "sqlite:///mlflow.db"}))
    assert tracked.tracking.mlflow == "sqlite:///mlflow.db" and plain.tracking is None
    assert "tracking" not in plain.to_dict() and tracked.to_dict()["tracking"] == {"mlflow": "sqlite:///mlflow.db"}
    assert JobSpec.from_dict(tracked.to_dict()) == tracked
    assert job_fingerprint(tracked) == job_fingerprint(plain)  # where results are logged is not the job
    with pytest.raises(JobSpecError, match="unknown key 'tracking.uri'; accepted keys under 'tracking': mlflow"):
        validate_job(dict(RUN_JOB, tracking={"uri": "x"}))
    with pytest.raises(JobSpecError, match="missing required key 'tracking.mlflow'"):
        validate_job(dict(RUN_JOB, tracking={}))


@pytest.mark.slow
def test_a_tracked_run_logs_params_fold_metrics_artifacts_and_a_model_that_predicts_the_same(tmp_path):
    mlflow = pytest.importorskip("mlflow", reason="tracking needs the extra: pip install 'dimbsvm[mlflow]'")
    from dimbsvm.artifacts import load_artifact
    from dimbsvm.datasets import load
    from dimbsvm.jobs import validate_job
    from dimbsvm.jobs.run_dir import job_fingerprint

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    job = _job(tmp_path, dict(RUN_JOB, tracking={"mlflow": uri}))
    out = tmp_path / "run"
    proc = _cli("run", job, "--out", out, "--workers", "1", "--no-progress", cwd=tmp_path, warnings="default")
    assert proc.returncode == 0, proc.stderr
    assert " WARNING " not in proc.stderr, proc.stderr
    # MLflow has nothing to tell the user about the logged model (its input example and type hint are given);
    # deprecations inside MLflow's own code are its to fix
    assert "UserWarning" not in proc.stderr, proc.stderr
    run_id = next(line.split()[2] for line in proc.stdout.splitlines() if line.startswith("mlflow: run "))
    assert (tmp_path / "mlartifacts").is_dir() and not (tmp_path / "mlruns").exists()  # beside the database

    client = mlflow.MlflowClient(tracking_uri=uri)
    run = client.get_run(run_id)
    assert client.get_experiment(run.info.experiment_id).name == "tracked"
    params = run.data.params
    spec = validate_job(dict(RUN_JOB, tracking={"mlflow": uri}))
    assert params["estimator"] == "svc_balanced" and params["estimator.C"] == "1.0"
    assert params["data.source"] == "yeast5" and params["preprocessing.scaler"] == "minmax"
    assert (params["cv.n_splits"], params["cv.n_repeats"], params["cv.random_state"]) == ("3", "2", "0")
    assert params["job_fingerprint"] == job_fingerprint(spec) == (out / "job-fingerprint").read_text().strip()
    assert params["dimbsvm_version"] == json.loads((out / "metrics.json").read_text())["dimbsvm_version"]

    # every fold's metrics, stepped by fold index (repeat * n_splits + fold), equal the run directory's records
    records = json.loads((out / "metrics.json").read_text())
    assert len(records["folds"]) == 6
    for metric in ("g_mean", "f_measure", "auc"):
        history = {m.step: m.value for m in client.get_metric_history(run_id, f"fold_{metric}")}
        expected = {r["seed"] * 3 + r["fold"]: r[metric] for r in records["folds"]}
        assert history == pytest.approx(expected, rel=0, abs=0), metric
        assert run.data.metrics[metric] == pytest.approx(records["summary"][metric]["mean"], abs=1e-12)
        assert run.data.metrics[f"{metric}_std"] == pytest.approx(records["summary"][metric]["std"], abs=1e-12)

    # the report and the run's records, byte for byte
    logged = tmp_path / "logged"
    mlflow.artifacts.download_artifacts(run_id=run_id, dst_path=str(logged), tracking_uri=uri)
    for name in ("report.html", "summary.md", "metrics.json", "resources.json", "job.yaml", "job-fingerprint",
                 "data-fingerprint", "report.md"):
        assert (logged / name).read_bytes() == (out / name).read_bytes(), name
    folds = sorted(p.name for p in (out / "folds").iterdir())
    assert sorted(p.name for p in (logged / "folds").iterdir()) == folds and len(folds) == 6

    # the model: loaded back through MLflow in a fresh process (as a user would), raw rows in, class names out:
    # the same as the run's own estimator on the encoded rows, its codes named by the data's class map
    estimator, meta = load_artifact(out / "model")
    data = load("yeast5")
    rows = tmp_path / "rows.parquet"
    pd.DataFrame(np.asarray(data.X), columns=data.meta()["feature_names"]).to_parquet(rows)
    model_uri = run.data.tags["dimbsvm.model_uri"]
    script = ("import sys, mlflow, pandas as pd, numpy as np\n"
              f"mlflow.set_tracking_uri({uri!r})\n"
              f"model = mlflow.pyfunc.load_model({model_uri!r})\n"
              f"rows = pd.read_parquet({str(rows)!r})\n"
              "np.save(sys.argv[1], np.asarray(model.predict(rows), dtype=str))\n"
              "np.save(sys.argv[2], model.unwrap_python_model().unwrap().decision_function(rows))\n"
              "np.save(sys.argv[3], model.predict(rows, params={'predict_method': 'decision_function'}))\n"
              "try:\n"
              "    model.predict(rows, params={'predict_method': 'predict_proba'})\n"
              "except mlflow.exceptions.MlflowException as exc:\n"
              "    open(sys.argv[4], 'w').write(exc.message)\n"
              "example = mlflow.models.Model.load(" + repr(model_uri) + ").load_input_example()\n"
              "np.save(sys.argv[5], np.asarray(model.predict(example), dtype=str))\n"
              "example.to_csv(sys.argv[6], index=False)\n")
    names, decisions = tmp_path / "names.npy", tmp_path / "decisions.npy"
    by_param, refused = tmp_path / "by_param.npy", tmp_path / "refused.txt"
    example_names, example = tmp_path / "example.npy", tmp_path / "example.csv"
    loaded = subprocess.run([sys.executable, "-c", script, str(names), str(decisions), str(by_param), str(refused),
                             str(example_names), str(example)], capture_output=True, text=True, cwd=tmp_path,
                            timeout=300)
    assert loaded.returncode == 0, loaded.stderr
    by_code = {code: name for name, code in meta["class_map"].items()}
    expected = np.array([by_code[code] for code in estimator.predict(np.asarray(data.X))])
    assert set(expected) == {"positive", "negative"}
    np.testing.assert_array_equal(np.load(names), expected)
    np.testing.assert_array_equal(np.load(decisions), estimator.decision_function(np.asarray(data.X)))
    # params={"predict_method": ...}: the estimator's decision values; probabilities refused by name here
    np.testing.assert_array_equal(np.load(by_param), estimator.decision_function(np.asarray(data.X)))
    assert "gives no probabilities (train it with probability=True)" in refused.read_text()
    # the logged input example: one row of the training columns (not a training row), scored like any other
    shown = pd.read_csv(example)
    assert list(shown.columns) == data.meta()["feature_names"] and len(shown) == 1
    assert (shown.to_numpy() == 0).all()
    np.testing.assert_array_equal(np.load(example_names), [by_code[code] for code in estimator.predict(np.zeros((1, data.X.shape[1])))])


@pytest.mark.slow
def test_a_tracking_failure_keeps_the_run_and_its_exit_status(tmp_path):
    pytest.importorskip("mlflow", reason="tracking needs the extra: pip install 'dimbsvm[mlflow]'")
    (tmp_path / "not-a-dir").write_text("a file where the database's directory should be\n")
    uri = f"sqlite:///{tmp_path}/not-a-dir/mlflow.db"
    out = tmp_path / "run"
    proc = _cli("run", _job(tmp_path, RUN_JOB), "--mlflow", uri, "--out", out, "--workers", "1", "--no-progress",
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (out / "metrics.json").is_file() and (out / "model").is_dir()  # the run is complete on disk
    warnings = [line for line in proc.stderr.splitlines() if " WARNING " in line]
    assert len(warnings) == 1, proc.stderr
    assert f"MLflow tracking at {uri} failed, run {out} was not logged" in warnings[0]
    assert "mlflow: run" not in proc.stdout


def _serve(model_uri, tracking_uri, cwd):
    """``mlflow models serve`` of ``model_uri`` on a free port of 127.0.0.1, stopped at the test's end; returns
    a function posting rows (and params) to its ``/invocations`` and answering its predictions."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ, MLFLOW_TRACKING_URI=tracking_uri)
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "models", "serve", "-m", model_uri, "--env-manager",
                               "local", "--host", "127.0.0.1", "-p", str(port)], cwd=cwd, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    _SERVERS.append(server)
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2):
                break
        except OSError:
            assert server.poll() is None and time.monotonic() < deadline, "mlflow models serve did not start"
            time.sleep(0.3)

    def served(frame, **params):
        body = {"dataframe_split": frame.to_dict(orient="split"), **({"params": params} if params else {})}
        request = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.loads(answer.read())["predictions"]

    return served


_SERVERS = []


@pytest.fixture(autouse=True)
def _stop_servers():
    yield
    while _SERVERS:
        server = _SERVERS.pop()
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def _aliases(client, name):
    model = client.get_registered_model(name)
    return {alias: client.get_model_version(name, number).tags["dimbsvm.version"]
            for alias, number in model.aliases.items()}


@pytest.mark.slow
def test_retrain_registers_versions_and_the_champion_alias_follows_the_registry(tmp_path, monkeypatch, capsys):
    mlflow = pytest.importorskip("mlflow", reason="tracking needs the extra: pip install 'dimbsvm[mlflow]'")
    from dimbsvm.datasets import load
    from dimbsvm.jobs.registry import ModelRegistry

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    reg = tmp_path / "reg"
    name = yaml.safe_load(RETRAIN_JOB.read_text())["name"]
    first = _cli("retrain", RETRAIN_JOB, "--registry", reg, "--workers", "1", "--no-progress", "--mlflow", uri,
                 cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert " WARNING " not in first.stderr, first.stderr
    registry = ModelRegistry(reg)
    v1 = registry.champion()
    assert registry.tracking() == {"mlflow": uri, "model_name": name}
    client = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
    assert _aliases(client, name) == {"champion": v1, "challenger": v1}

    # a worse challenger (an unbalanced SVC): registered, the challenger alias on it, the champion alias stays
    worse = yaml.safe_load(RETRAIN_JOB.read_text())
    worse["estimator"] = {"name": "svc", "params": {"C": 1.0, "probability": True}}
    second = _cli("retrain", _job(tmp_path, worse, "worse.yaml"), "--registry", reg, "--workers", "1",
                  "--no-progress", "--mlflow", uri, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    v2 = ModelRegistry(reg).versions()[-1]["id"]
    assert ModelRegistry(reg).champion() == v1 != v2
    versions = client.search_model_versions(f"name = '{name}'")
    assert sorted(v.tags["dimbsvm.version"] for v in versions) == sorted([v1, v2])
    assert _aliases(client, name) == {"champion": v1, "challenger": v2}
    # the registered version is the registry's model: the same predictions, as class names from raw rows
    data = load("yeast5")
    kept, kept_meta = ModelRegistry(reg).load(v2)
    mlflow.set_registry_uri(uri)
    try:
        back = mlflow.pyfunc.load_model(f"models:/{name}@challenger")
    finally:
        mlflow.set_registry_uri(None)
    by_code = {code: label for label, code in kept_meta["class_map"].items()}
    rows = pd.DataFrame(np.asarray(data.X), columns=data.meta()["feature_names"])
    np.testing.assert_array_equal(np.asarray(back.predict(rows), dtype=str),
                                  [by_code[code] for code in kept.predict(np.asarray(data.X))])
    # and its probabilities, one column per class name in the estimator's order
    proba = back.predict(rows, params={"predict_method": "predict_proba"})
    assert list(proba.columns) == [by_code[code] for code in kept.classes_]
    np.testing.assert_array_equal(proba.to_numpy(), kept.predict_proba(np.asarray(data.X)))
    runs = client.search_runs([client.get_experiment_by_name(name).experiment_id],
                              filter_string=f"tags.`dimbsvm.version` = '{v2}'")
    [run] = runs
    assert run.data.tags["dimbsvm.decision"] == "kept"
    recorded = next(v for v in ModelRegistry(reg).versions() if v["id"] == v2)["holdout_metrics"]
    assert run.data.metrics["holdout_g_mean"] == pytest.approx(recorded["g_mean"], abs=1e-12)

    # promote and rollback (no --mlflow: the registry remembers where it is tracked) move the champion alias
    promote = _cli("promote", reg, v2, "--reason", "test", cwd=tmp_path)
    assert promote.returncode == 0, promote.stderr
    assert _aliases(client, name)["champion"] == v2 == ModelRegistry(reg).champion()
    rollback = _cli("rollback", reg, "--reason", "test", cwd=tmp_path)
    assert rollback.returncode == 0, rollback.stderr
    assert _aliases(client, name)["champion"] == v1 == ModelRegistry(reg).champion()
    assert " WARNING " not in promote.stderr + rollback.stderr

    # served by MLflow's own scoring server, the parameter chooses the answer; an unknown one is a 400
    served = _serve(f"models:/{name}@challenger", uri, tmp_path)
    head = rows.head(3)
    assert served(head) == [by_code[code] for code in kept.predict(np.asarray(data.X)[:3])]
    np.testing.assert_array_equal(served(head, predict_method="decision_function"),
                                  kept.decision_function(np.asarray(data.X)[:3]))
    with pytest.raises(urllib.error.HTTPError) as refused:
        served(head, predict_method="margins")
    assert refused.value.code == 400 and "predict_method must be one of" in refused.value.read().decode()

    # dimbsvm predict reads a registered model by alias or version number: the registry's own predictions
    # (in this process: a subprocess each would double the test's time)
    from dimbsvm.cli import main

    monkeypatch.chdir(tmp_path)
    rows.to_csv("rows.csv", index=False)
    number = next(v.version for v in versions if v.tags["dimbsvm.version"] == v2)
    for ref, out in ((f"models:/{name}@champion", "champion.csv"), (f"models:/{name}/{number}", "v2.csv"),
                     (f"{reg}@champion", "reg-champion.csv"), (f"{reg}@{v2}", "reg-v2.csv")):
        assert main(["predict", ref, "rows.csv", "--out", out, "--mlflow", uri]) == 0
    assert (tmp_path / "champion.csv").read_bytes() == (tmp_path / "reg-champion.csv").read_bytes()
    assert (tmp_path / "v2.csv").read_bytes() == (tmp_path / "reg-v2.csv").read_bytes()
    assert (tmp_path / "v2.csv").read_bytes() != (tmp_path / "champion.csv").read_bytes()
    capsys.readouterr()
    for ref, message in ((f"models:/{name}@nobody", "nobody"), ("models:/no-such-model/1", "no-such-model"),
                         (f"models:/{name}", "models:/NAME@ALIAS or models:/NAME/VERSION")):
        assert main(["predict", ref, "rows.csv", "--out", "refused.csv", "--mlflow", uri]) != 0
        assert not (tmp_path / "refused.csv").exists()
        [line] = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert line.startswith("dimbsvm: error: ") and ref in line and message in line, line
