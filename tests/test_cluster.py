"""Jobs on a real cluster: `dask scheduler` and `dask worker --nanny` processes on 127.0.0.1.

Covers submitting to a scheduler, a worker killed with SIGKILL mid-job, an
interrupted job resumed, TLS, tampered models, and jobs that must fail before
any task runs.
"""

import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dask
import numpy as np
import pandas as pd
import pytest
import zarr

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _env():
    # Worker processes unpickle task functions by reference: they must import
    # this checkout's dimbsvm, installed or not.
    # (no MALLOC_* inherited from an embedded cluster of this process: workers get what their nanny sets)
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    return dict(inherited, PYTHONPATH=str(ROOT), DASK_LOGGING__DISTRIBUTED="warning",
                PYTHONWARNINGS="ignore")


def _wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


class DaskProcesses:
    """A scheduler and nanny-managed workers, started as real processes."""

    def __init__(self, workdir: Path, *, n_workers=2, memory_limit="2GiB", tls_args=(), worker_args=()):
        self.workdir = workdir
        self.scheduler_file = workdir / "scheduler.json"
        self.procs = []
        protocol = ["--protocol", "tls"] if tls_args else []
        self._start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                     "--scheduler-file", str(self.scheduler_file), *protocol, *tls_args], "scheduler")
        _wait_for(self.scheduler_file.exists, 60, "the scheduler file")
        self.address = json.loads(self.scheduler_file.read_text())["address"]
        for i in range(n_workers):
            self._start(["worker", "--scheduler-file", str(self.scheduler_file), "--nanny", "--nthreads", "1",
                         "--host", "127.0.0.1", "--no-dashboard", "--memory-limit", memory_limit,
                         "--name", f"w{i}", *tls_args, *worker_args], f"worker{i}")

    def _start(self, args, name):
        log = open(self.workdir / f"{name}.log", "w")
        self.procs.append(subprocess.Popen([sys.executable, "-m", "dask", *args], cwd=self.workdir,
                                           env=_env(), stdout=log, stderr=subprocess.STDOUT))

    def wait_for_workers(self, n, security=None):
        from distributed import Client

        with Client(self.address, security=security, timeout=30) as client:
            client.wait_for_workers(n, timeout=60)

    def stop(self):
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


WORKER_MEMORY_PRELOAD = ("--preload-nanny", "dimbsvm.distributed.worker_memory")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # as deploy/ starts workers: dimbsvm's malloc settings through a nanny preload
    procs = DaskProcesses(tmp_path_factory.mktemp("dask"), worker_args=WORKER_MEMORY_PRELOAD)
    try:
        procs.wait_for_workers(2)
        yield procs
    finally:
        procs.stop()


@pytest.fixture(scope="module")
def synthetic_store(tmp_path_factory):
    """A store whose folds take about a second each: long enough to interrupt."""
    from dimbsvm.datasets import make_imbalanced
    from dimbsvm.store import ingest

    X, y = make_imbalanced(9_000, n_features=10, minority_fraction=0.1, chunks=3_000, random_state=7)
    path = tmp_path_factory.mktemp("data") / "syn.zarr"
    ingest((X, y), path, chunk_rows=3_000)
    return path


def _dimbsvm(*args, timeout=600, **kwargs):
    return subprocess.run([sys.executable, "-m", "dimbsvm.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=_env(), timeout=timeout, **kwargs)


def _write_job(path, source, **extra):
    lines = [f"name: {path.stem}", f"data: {{source: {source}}}", "estimator: {name: svc_balanced}",
             "cv: {n_splits: 5, n_repeats: 2, random_state: 0}", "metrics: [g_mean, f_measure, auc]"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _fold_metrics(run_dir):
    folds = json.loads((Path(run_dir) / "metrics.json").read_text())["folds"]
    return [(f["seed"], f["fold"], f["g_mean"], f["f_measure"], f["auc"]) for f in folds]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, synthetic_store):
    """The synthetic job run undisturbed on an embedded cluster."""
    tmp = tmp_path_factory.mktemp("reference")
    job = _write_job(tmp / "syn.yaml", synthetic_store, output="{model: false}")
    proc = _dimbsvm("run", job, "--out", tmp / "run", "--workers", "2", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    return job, _fold_metrics(tmp / "run")


def test_job_on_scheduler_equals_embedded_run(cluster, reference, tmp_path):
    job, expected = reference
    proc = _dimbsvm("run", job, "--scheduler", cluster.address, "--out", tmp_path / "run")
    assert proc.returncode == 0, proc.stderr
    assert _fold_metrics(tmp_path / "run") == expected
    resources = json.loads((tmp_path / "run" / "resources.json").read_text())
    assert len(resources["peak_worker_memory_bytes"]) == 2


def test_worker_killed_mid_job_gives_identical_metrics(cluster, reference, tmp_path):
    from distributed import Client

    job, expected = reference
    out = tmp_path / "run"
    partial = tmp_path / ".run.partial" / "folds"
    proc = subprocess.Popen([sys.executable, "-m", "dimbsvm.cli", "run", str(job), "--scheduler-file",
                             str(cluster.scheduler_file), "--out", str(out), "--no-progress"],
                            cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: partial.exists() and len(list(partial.glob("*.json"))) >= 1, 120, "the first fold")
    with Client(cluster.address, timeout=30) as client:
        busy = [addr for addr, keys in client.processing().items() if keys]
        assert busy, "no worker was running a fold when the kill was due"
        pids = client.run(os.getpid, workers=busy[:1])
        os.kill(pids[busy[0]], signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
        client.wait_for_workers(2, timeout=60)  # the nanny restarted the killed worker
    assert _fold_metrics(out) == expected


def test_worker_killed_during_ensemble_members(cluster, synthetic_store, sequential_fold, tmp_path):
    """SIGKILL while (repeat, fold, member) tasks run: members are refitted, records equal in-process fits."""
    from distributed import Client

    from dimbsvm.estimators import make_estimator
    from dimbsvm.store import open_store

    params = {"estimator": "linear_svc", "n_estimators": 6, "random_state": 0}
    job = tmp_path / "ens.yaml"
    job.write_text(f"name: ens\ndata: {{source: {synthetic_store}}}\n"
                   f"estimator: {{name: ensemble_othr, params: {json.dumps(params)}}}\n"
                   "cv: {n_splits: 3, n_repeats: 2, random_state: 0}\nmetrics: [g_mean, f_measure, auc]\n"
                   "output: {model: false}\n")
    out, members = tmp_path / "run", tmp_path / ".run.partial" / "members"
    proc = subprocess.Popen([sys.executable, "-m", "dimbsvm.cli", "run", str(job), "--scheduler",
                             cluster.address, "--out", str(out), "--no-progress"],
                            cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(members.exists, 120, "the first finished member")
    with Client(cluster.address, timeout=30) as client:
        workers = list(client.scheduler_info()["workers"])
        pids = client.run(os.getpid, workers=workers[:1])
        os.kill(pids[workers[0]], signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
        client.wait_for_workers(2, timeout=60)
    folds = json.loads((out / "metrics.json").read_text())["folds"]
    stored = open_store(synthetic_store)
    X, y = np.asarray(stored.X[:], dtype=np.float64), np.asarray(stored.y[:])
    for record in folds:
        expected = sequential_fold(X, y, make_estimator("ensemble_othr", params), n_splits=3,
                                   seed=record["seed"], fold=record["fold"])
        for key in ("g_mean", "f_measure", "auc"):
            assert record[key] == pytest.approx(expected[key], rel=1e-12), key
        for key in ("threshold", "member_thresholds"):
            assert record[key] == expected[key], key


def test_interrupted_job_resumes_and_reuses_finished_folds(reference, tmp_path):
    job, expected = reference
    out = tmp_path / "run"
    partial = tmp_path / ".run.partial" / "folds"
    args = [sys.executable, "-m", "dimbsvm.cli", "run", str(job), "--out", str(out), "--workers", "2",
            "--no-progress"]
    proc = subprocess.Popen(args, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    _wait_for(lambda: partial.exists() and len(list(partial.glob("*.json"))) >= 3, 120, "three folds")
    os.killpg(proc.pid, signal.SIGKILL)  # the client and its embedded cluster die together
    proc.wait()
    finished = len(list(partial.glob("*.json")))
    assert not out.exists() and 3 <= finished < 10
    rerun = _dimbsvm("run", job, "--out", out, "--workers", "2", "--no-progress")
    assert rerun.returncode == 0, rerun.stderr
    reused = int(rerun.stdout.split("reused ")[1].split()[0])
    assert reused >= finished
    assert _fold_metrics(out) == expected


def test_predict_on_cluster_and_tampered_model(cluster, tmp_path):
    run = tmp_path / "run"
    job = _write_job(tmp_path / "y5.yaml", "yeast5")
    assert _dimbsvm("run", job, "--scheduler", cluster.address, "--out", run).returncode == 0
    pred = tmp_path / "pred.zarr"
    proc = _dimbsvm("predict", run / "model", "yeast5", "--out", pred, "--scheduler", cluster.address,
                    "--chunk-rows", "400")
    assert proc.returncode == 0, proc.stderr

    from dimbsvm.datasets import load_keel
    from dimbsvm.jobs import load_artifact

    model, meta = load_artifact(run / "model")
    X = load_keel("yeast5").X
    group = zarr.open_group(str(pred), mode="r")
    assert group.attrs["dimbsvm"]["complete"]
    np.testing.assert_array_equal(group["y_pred"][:], model.predict(X))
    np.testing.assert_allclose(group["decision"][:], model.decision_function(X))

    # a relative --out is this process's: the workers (started in another directory) write their parts there
    here = tmp_path / "client-cwd"
    here.mkdir()
    proc = subprocess.run([sys.executable, "-m", "dimbsvm.cli", "predict", str(run / "model"), "yeast5", "--out",
                           "rel.csv", "--scheduler", cluster.address, "--chunk-rows", "400"], capture_output=True,
                          text=True, cwd=here, env=_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr
    written = pd.read_csv(here / "rel.csv")
    np.testing.assert_array_equal(written["decision"].to_numpy(), model.decision_function(X))
    assert sorted(p.name for p in here.iterdir()) == ["rel.csv"]
    assert not list(cluster.workdir.glob(".rel.csv*")) and not (cluster.workdir / "rel.csv").exists()

    tampered = tmp_path / "tampered"
    shutil.copytree(run / "model", tampered)
    blob = bytearray((tampered / "model.skops").read_bytes())
    blob[len(blob) // 2] ^= 0x01
    (tampered / "model.skops").write_bytes(bytes(blob))
    proc = _dimbsvm("predict", tampered, "yeast5", "--out", tmp_path / "p2.zarr", "--workers", "1")
    assert proc.returncode == 2 and "does not match its SHA-256" in proc.stderr
    assert not (tmp_path / "p2.zarr").exists()


def test_workers_without_the_object_stores_credentials_are_found_before_any_row_is_scored(tmp_path, s3_bucket,
                                                                                         monkeypatch):
    """The client reaches the bucket; its workers, started without credentials, cannot: one line naming a
    worker, before any partition is scored (it failed after every partition was), and nothing is written."""
    import s3fs

    run = tmp_path / "run"
    job = _write_job(tmp_path / "y5.yaml", "yeast5")
    assert _dimbsvm("run", job, "--workers", "1", "--out", run).returncode == 0
    credentials = {key: os.environ[key] for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    for key in credentials:
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))  # no ~/.aws either
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    (tmp_path / "workers").mkdir()
    procs = DaskProcesses(tmp_path / "workers", n_workers=1)
    try:
        procs.wait_for_workers(1)
        for key, value in credentials.items():
            monkeypatch.setenv(key, value)  # this process and the CLI have them
        out = f"s3://{s3_bucket}/pred.csv"
        proc = _dimbsvm("predict", run / "model", "yeast5", "--out", out, "--scheduler", procs.address,
                        "--chunk-rows", "400")
    finally:
        procs.stop()
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert re.search(rf"prediction output {re.escape(out)}: worker tcp://127\.0\.0\.1:\d+ cannot write there: "
                     r"NoCredentialsError: Unable to locate credentials; each worker reads the object store's "
                     r"credentials", line), line
    assert s3fs.S3FileSystem().ls(s3_bucket) == []


@pytest.fixture(scope="module")
def forked_cli():
    """Like :func:`_dimbsvm` (same environment, cwd ROOT) for runs that fail before any cluster starts: each a
    process of its own, forked from one that imported scikit-learn, Dask and Zarr once (``cli_forkserver.py``)."""
    from cli_forkserver import serving

    with serving(_env(), ROOT, timeout=600) as run:
        yield run


def test_failures_before_any_task(tmp_path, synthetic_store, forked_cli):
    job = _write_job(tmp_path / "ok.yaml", synthetic_store)
    # nothing listens on this port: bind one, close it, and use its number
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = forked_cli("run", job, "--scheduler", f"tcp://127.0.0.1:{port}", "--out", tmp_path / "r1",
                      "--connect-timeout", "3")
    assert proc.returncode == 2 and "cannot connect to the scheduler" in proc.stderr, proc.stderr
    missing = _write_job(tmp_path / "missing.yaml", tmp_path / "nowhere.zarr")
    proc = forked_cli("run", missing, "--out", tmp_path / "r2", "--workers", "1")
    assert proc.returncode == 2 and "does not exist" in proc.stderr, proc.stderr
    assert "dashboard" not in proc.stdout + proc.stderr
    bad = _write_job(tmp_path / "bad.yaml", synthetic_store, execution="{retries: many}")
    proc = forked_cli("run", bad, "--out", tmp_path / "r3")
    assert proc.returncode == 2 and "'execution.retries' must be of type integer" in proc.stderr
    assert not any(p.name.startswith(("r1", "r2", "r3", ".r")) for p in tmp_path.iterdir())


def _make_certificates(directory: Path):
    """A throw-away CA and one certificate for 127.0.0.1 signed by it (openssl)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")

    def sh(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    sh("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
       "-subj", "/CN=dimbsvm-test-ca")
    sh("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "node.key", "-out", "node.csr", "-subj", "/CN=127.0.0.1")
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    sh("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
       "-out", "node.pem", "-days", "1", "-extfile", "san.ext")
    return directory / "ca.pem", directory / "node.pem", directory / "node.key"


def test_tls_cluster_accepts_tls_and_refuses_plain_tcp(tmp_path):
    from distributed.security import Security

    ca, cert, key = _make_certificates(tmp_path)
    tls_args = ["--tls-ca-file", str(ca), "--tls-cert", str(cert), "--tls-key", str(key)]
    procs = DaskProcesses(tmp_path, n_workers=1, tls_args=tls_args)
    try:
        assert procs.address.startswith("tls://")
        procs.wait_for_workers(1, security=Security(tls_ca_file=str(ca), tls_client_cert=str(cert),
                                                    tls_client_key=str(key), require_encryption=True))
        job = _write_job(tmp_path / "y5.yaml", "yeast5", execution="{require_encryption: true}")
        proc = _dimbsvm("run", job, "--scheduler", procs.address, *tls_args, "--out", tmp_path / "run")
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "run" / "metrics.json").exists()

        plain = procs.address.replace("tls://", "tcp://")
        proc = _dimbsvm("run", job.with_name("y5.yaml"), "--scheduler", plain, "--out", tmp_path / "plain")
        assert proc.returncode == 2 and "requires encryption" in proc.stderr
        open_job = _write_job(tmp_path / "open.yaml", "yeast5")
        proc = _dimbsvm("run", open_job, "--scheduler", plain, "--out", tmp_path / "plain",
                        "--connect-timeout", "3")
        assert proc.returncode == 2 and f"the server speaks TLS, so this scheduler wants {procs.address}" \
            in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "plain").exists()
    finally:
        procs.stop()


LARGE_JOB = """name: larger-than-a-worker
data: {{source: {source}}}
estimator:
  name: ensemble_othr
  params: {{estimator: linear_svc, n_estimators: 2, bootstrap: balanced, max_samples: 4000, smoothing: null,
           random_state: 0}}
cv: {{n_splits: 2, n_repeats: 1, random_state: 0}}
metrics: [g_mean, f_measure]
output: {{model: false}}
"""


@pytest.mark.timeout(1800)  # the run's own bound is its 900 s: under load the test may not end at pytest's default
def test_job_over_store_larger_than_worker_memory(tmp_path, sequential_fold):
    """A 1.6 GB store (float32; 3.3 GB as the float64 rows tasks compute on) through workers limited to 500 MiB.

    Every ensemble member reads only its bag and streams the out-of-bag rows a
    chunk at a time; the scaler is fitted chunk by chunk. The result equals
    the same pipeline fitted in this (unconstrained) test process, and no
    worker is restarted along the way.
    """
    from distributed import Client

    from dimbsvm.datasets import make_imbalanced
    from dimbsvm.estimators import make_estimator
    from dimbsvm.store import ingest, open_store

    n, d, limit = 1_600_000, 256, 500 * 2**20
    X, y = make_imbalanced(n, n_features=d, minority_fraction=0.02, chunks=40_000, random_state=3)
    store = tmp_path / "large.zarr"
    ingest((X, y), store, chunk_rows=8_000)
    assert n * d * 4 >= 3 * limit  # the stored features alone are three times a worker's limit

    procs = DaskProcesses(tmp_path, memory_limit=str(limit))
    try:
        procs.wait_for_workers(2)
        with Client(procs.address, timeout=30) as client:
            pids_before = client.run(os.getpid)
        job = tmp_path / "large.yaml"
        job.write_text(LARGE_JOB.format(source=store))
        proc = _dimbsvm("run", job, "--scheduler", procs.address, "--out", tmp_path / "run", "--no-progress",
                        timeout=900)
        assert proc.returncode == 0, proc.stderr
        with Client(procs.address, timeout=30) as client:
            assert client.run(os.getpid) == pids_before, "a worker was restarted (memory limit?)"
    finally:
        procs.stop()
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    resources = json.loads((tmp_path / "run" / "resources.json").read_text())
    assert 0 < resources["peak_worker_memory_max_bytes"] < limit

    # the independent truth: the same fold fitted in one process that holds all rows, generated again (the same
    # numbers as the store holds: its first and last chunks are compared; reading all of it back is slower)
    X_all, y_all = (np.asarray(a) for a in dask.compute(X, y))
    stored = open_store(store)
    for rows in (slice(0, 8_000), slice(n - 8_000, n)):
        np.testing.assert_array_equal(stored.X[rows], X_all[rows])
        np.testing.assert_array_equal(stored.y[rows], y_all[rows])
    X_all = X_all.astype(np.float64)  # 3.3 GB in this unconstrained process
    estimator = make_estimator("ensemble_othr", {"estimator": "linear_svc", "n_estimators": 2,
                                                 "bootstrap": "balanced", "max_samples": 4000,
                                                 "smoothing": None, "random_state": 0})
    expected = sequential_fold(X_all, y_all, estimator, n_splits=2, seed=0, fold=0, metrics=("g_mean", "f_measure"))
    actual = next(f for f in metrics["folds"] if (f["seed"], f["fold"]) == (0, 0))
    assert actual["threshold"] == pytest.approx(expected["threshold"], rel=1e-9)
    assert actual["g_mean"] == pytest.approx(expected["g_mean"], abs=1e-4)
    assert actual["g_mean"] > 0.7  # the members learned the minority class, not a constant


def test_hpc_disk_exchange_on_worker_processes(cluster, tmp_path):
    """Linear HPC (SGD) on worker processes, rows and neighbours read from Zarr a chunk at a time.

    The hyperedges' rows go through scratch files; J^T L' J equals the
    in-memory sum, the objective is within SGD's accuracy of the exact solve,
    and the scratch files are removed.
    """
    import dask.array as da
    from distributed import Client
    from sklearn.datasets import make_classification
    from sklearn.neighbors import NearestNeighbors

    from dimbsvm.graph.hypergraph import neighbors_excluding_self
    from dimbsvm.svm.hpc import HPCClassifier

    X, y = make_classification(n_samples=6000, n_features=8, weights=[0.9], random_state=7)
    found = NearestNeighbors(n_neighbors=6).fit(X).kneighbors(X, return_distance=False)
    nbrs = neighbors_excluding_self(found)
    zarr.create_array(str(tmp_path / "X.zarr"), data=X, chunks=(700, 8))
    zarr.create_array(str(tmp_path / "nbrs.zarr"), data=nbrs, chunks=(1000, 5))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    exact = HPCClassifier(tol=1e-10, max_iter=1_000_000, random_state=0).fit(X, y, neighbors=nbrs)
    with Client(cluster.address, timeout=30):
        clf = HPCClassifier(solver="sgd", exchange_dir=scratch, random_state=0).fit(
            da.from_zarr(str(tmp_path / "X.zarr")), da.from_array(y, chunks=700),
            neighbors=da.from_zarr(str(tmp_path / "nbrs.zarr")))
    np.testing.assert_allclose(clf.jlj_, exact.jlj_, rtol=1e-11, atol=1e-9)
    assert 0 <= (clf.objective_ - exact.objective_) / exact.objective_ < 2e-3
    assert list(scratch.iterdir()) == []


def test_screening_ensemble_job_on_worker_processes_equals_the_sequential_fold(cluster, tmp_path, sequential_fold):
    """recommended()'s two rounds of member tasks (screen task, second round reading it) on `dask worker`
    processes over a Zarr store: every fold's threshold and metrics equal the ensemble fitted in this process."""
    from dimbsvm.datasets import make_imbalanced
    from dimbsvm.estimators import make_estimator
    from dimbsvm.store import ingest

    X, y = make_imbalanced(1_200, n_features=5, minority_fraction=0.1, chunks=1_200, random_state=4)
    store = tmp_path / "syn.zarr"
    ingest((X, y), store, chunk_rows=300)
    params = {"n_estimators": 3, "param_grid": {"C": [0.5, 5.0], "gamma": [0.5, "scale"]}, "top_candidates": 1,
              "screen_members": 2, "screen_survivors": 2, "random_state": 3}
    job = _write_job(tmp_path / "screened.yaml", store, output="{model: false}",
                     estimator=json.dumps({"name": "recommended", "params": params}))
    job.write_text(job.read_text().replace("estimator: {name: svc_balanced}\n", "")
                   .replace("n_splits: 5, n_repeats: 2", "n_splits: 3, n_repeats: 1"))
    proc = _dimbsvm("run", job, "--scheduler", cluster.address, "--out", tmp_path / "run", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    folds = json.loads((tmp_path / "run" / "metrics.json").read_text())["folds"]
    X32 = np.asarray(X, dtype=np.float32).astype(np.float64)  # what the store holds
    for record in folds:
        expected = sequential_fold(X32, np.asarray(y), make_estimator("recommended", params), n_splits=3,
                                   seed=record["seed"], fold=record["fold"])
        assert record["threshold"] == pytest.approx(expected["threshold"], rel=1e-9)
        for metric in ("g_mean", "f_measure", "auc"):
            assert record[metric] == pytest.approx(expected[metric], abs=1e-9), metric


def test_searched_job_over_a_store_on_worker_processes_equals_gridsearchcv(cluster, tmp_path):
    """Nested CV as a job on `dask worker` processes, over a Zarr store: each outer fold's choice and its test
    metrics equal scikit-learn's GridSearchCV over the same pipeline on the same rows in this process."""
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler
    from sklearn.svm import SVC

    from dimbsvm.datasets import make_imbalanced
    from dimbsvm.metrics import g_mean
    from dimbsvm.model_selection.splits import repeat_splits
    from dimbsvm.store import ingest

    X, y = make_imbalanced(3_000, n_features=6, minority_fraction=0.08, chunks=3_000, random_state=11)
    X, y = np.asarray(X), np.asarray(y)
    store = tmp_path / "syn.zarr"
    ingest((X, y), store, chunk_rows=500)
    job = _write_job(tmp_path / "searched.yaml", store, output="{model: false}",
                     search="{params: {C: [0.5, 5.0], gamma: [0.5, scale]}}")
    job.write_text(job.read_text().replace("n_splits: 5, n_repeats: 2", "n_splits: 3, n_repeats: 1"))
    proc = _dimbsvm("run", job, "--scheduler", cluster.address, "--out", tmp_path / "run", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "search: 4 candidates by g_mean on 3 inner folds" in proc.stdout
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    X = X.astype(np.float32).astype(np.float64)  # the store keeps float32; tasks compute on float64
    for (train, test), record in zip(repeat_splits(y, n_splits=3, seed=0), metrics["folds"]):
        truth = GridSearchCV(make_pipeline(MinMaxScaler(), SVC(class_weight="balanced")),
                             {"svc__C": [0.5, 5.0], "svc__gamma": [0.5, "scale"]}, cv=3,
                             scoring=make_scorer(g_mean)).fit(X[train], y[train])
        assert {f"svc__{k}": v for k, v in record["params"].items()} == truth.best_params_
        assert record["g_mean"] == pytest.approx(g_mean(y[test], truth.predict(X[test])), abs=1e-12)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc tunables are glibc's")
def test_preloaded_nanny_starts_workers_that_keep_arrays_on_the_heap(cluster):
    """``--preload-nanny dimbsvm.distributed.worker_memory``: a 2 GiB worker keeps arrays up to 512 MiB on
    the heap (glibc's mallinfo2 shows no mmapped block for a 32 MiB array; see tests/test_worker_memory.py
    for the contrast under Dask's defaults)."""
    import importlib.util

    import cloudpickle
    from distributed import Client

    # the probe of tests/test_worker_memory.py, sent by value: the workers cannot import the tests
    name = "_dimbsvm_worker_memory_probe"
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("test_worker_memory.py"))
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    sys.modules[name] = probe
    cloudpickle.register_pickle_by_value(probe)
    try:
        with Client(cluster.address, timeout=30) as client:
            results = client.run(probe.mmapped_bytes_of_an_array)
    finally:
        cloudpickle.unregister_pickle_by_value(probe)
        del sys.modules[name]
    assert len(results) == 2
    for gained, environ in results.values():
        assert environ["MALLOC_MMAP_THRESHOLD_"] == environ["MALLOC_TRIM_THRESHOLD_"] == str(2**29)
        assert gained == 0
