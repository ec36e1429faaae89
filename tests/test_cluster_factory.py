"""``--cluster MODULE:CALLABLE`` and scale from zero (issue 53, items 1 and 2), on real clusters started here.

The truth for a job's records is the same job run in this process; for the
version gate, a real ``dask worker`` process importing a copy of dimbsvm whose
sources differ (another build), which the first check refuses as it is.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from dimbsvm.cli import main
from dimbsvm.distributed import NoWorkersError, cluster_client, worker_versions
from dimbsvm.jobs.registry import ModelRegistry
from dimbsvm.parallel import TaskPlan, run_plan

REPO = Path(__file__).resolve().parents[1]

FACTORIES = textwrap.dedent('''
    made = []

    def adaptive():
        """An adaptive cluster with no worker until it sees work."""
        from distributed import LocalCluster
        cluster = LocalCluster(n_workers=0, threads_per_worker=1, processes=True, dashboard_address=None)
        cluster.adapt(minimum=0, maximum=2, interval="200ms", wait_count=5)
        made.append(cluster)
        return cluster

    def never():
        from distributed import LocalCluster
        cluster = LocalCluster(n_workers=0, threads_per_worker=1, processes=False, dashboard_address=None)
        made.append(cluster)
        return cluster

    def client():
        from distributed import Client, LocalCluster
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None)
        made.extend([Client(cluster), cluster])  # (the client's cluster is the factory's to close: here, the test's)
        return made[0]

    def raises():
        raise RuntimeError("no quota left")

    def wrong():
        return 42

    number = 7
''')

JOB = textwrap.dedent("""
    name: factory
    data: {source: ecoli1}
    estimator: {name: othr}
    cv: {n_splits: 3, n_repeats: 1, random_state: 0}
    metrics: [g_mean, f_measure]
""")


@pytest.fixture
def factories(tmp_path, monkeypatch):
    """A module of cluster factories in the working directory, as a user's would be; forgotten afterwards."""
    (tmp_path / "my_clusters.py").write_text(FACTORIES)
    (tmp_path / "job.yaml").write_text(JOB)
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    module = sys.modules.pop("my_clusters", None)
    for thing in getattr(module, "made", []):
        thing.close()


def _records(run_dir):
    folds = json.loads((Path(run_dir) / "metrics.json").read_text())["folds"]
    return [{k: v for k, v in fold.items() if not k.endswith("_time")} for fold in folds]


def test_a_job_on_a_cluster_that_scales_from_zero_equals_the_job_run_here(factories, capsys):
    """The adaptive cluster has no worker when the job starts: the work is submitted, the cluster sees it and
    starts workers, and the records are those of the same job in this process. The cluster is closed after."""
    assert main(["run", "job.yaml", "--cluster", "my_clusters:adaptive", "--out", "on-factory"]) == 0
    import my_clusters

    [cluster] = my_clusters.made
    assert cluster.status.name == "closed"
    assert main(["run", "job.yaml", "--out", "here"]) == 0
    assert "running in this process" in capsys.readouterr().out  # the reference did run here
    assert _records("on-factory") == _records("here")
    versions = json.loads((factories / "on-factory" / "metrics.json").read_text())["worker_versions"]
    assert versions and all(v["dimbsvm_build"] for v in versions.values())  # those that joined, checked as they did


def test_a_factory_returning_a_client_is_used_and_closed(factories):
    with cluster_client(cluster="my_clusters:client") as client:
        plan = TaskPlan()
        refs = [plan.add(pow, {"base": k, "exp": 2}, watch=True) for k in range(4)]
        assert run_plan(plan, client=client) == {ref.id: k * k for k, ref in enumerate(refs)}
    import my_clusters

    assert my_clusters.made[0].status == "closed"


@pytest.mark.parametrize("spec, message", [
    ("my_clusters", "is not MODULE:CALLABLE"),
    ("no_such_module:make", "cannot import no_such_module (--cluster no_such_module:make): ModuleNotFoundError"),
    ("my_clusters:nope", "my_clusters has no nope"),
    ("my_clusters:number", "my_clusters:number (--cluster) is a int, not a function"),
])
def test_a_factory_that_cannot_be_loaded_is_one_line_before_anything_runs(factories, capsys, spec, message):
    assert main(["validate", "job.yaml", "--cluster", spec]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("spec, message", [
    ("my_clusters:raises", "the cluster factory my_clusters:raises raised RuntimeError: no quota left"),
    ("my_clusters:wrong", "the cluster factory my_clusters:wrong returned a int, not a Dask cluster"),
])
def test_a_factory_that_fails_is_one_line(factories, capsys, spec, message):
    assert main(["run", "job.yaml", "--cluster", spec, "--out", "run"]) != 0
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_a_cluster_that_never_gets_a_worker_ends_the_run_in_one_line(factories, capsys):
    start = time.monotonic()
    assert main(["run", "job.yaml", "--cluster", "my_clusters:never", "--worker-timeout", "2", "--out", "run"]) != 0
    assert time.monotonic() - start < 60
    err = capsys.readouterr().err
    assert "no worker joined my_clusters:never" in err and "within 2 s of the work being submitted" in err, err
    assert len(err.strip().splitlines()) == 1, err
    with pytest.raises(NoWorkersError):
        with cluster_client(cluster="my_clusters:never", worker_timeout=1) as client:
            plan = TaskPlan()
            plan.add(pow, {"base": 2, "exp": 2}, watch=True)
            run_plan(plan, client=client)


def test_cluster_flags_are_one_of_cluster_scheduler_and_scheduler_file(factories, capsys):
    assert main(["validate", "job.yaml", "--cluster", "my_clusters:adaptive", "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "give one of --cluster, --scheduler and --scheduler-file" in capsys.readouterr().err


def _other_build(tmp_path) -> Path:
    """A copy of dimbsvm whose sources differ from this one's by a comment: another build of the same version."""
    copy = tmp_path / "other-build"
    shutil.copytree(REPO / "dimbsvm", copy / "dimbsvm", ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "dimbsvm" / "_version.py", "a") as handle:
        handle.write("# another build\n")
    return copy


def test_a_worker_of_another_build_joining_late_is_refused_and_runs_no_task(tmp_path, caplog):
    """A job's cluster has one worker; a worker of another dimbsvm build joins while it runs. The gate refuses it
    with one line in the client's log, it leaves (its nanny too), and every task runs on the first worker."""
    from distributed import LocalCluster

    other = _other_build(tmp_path)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
                      protocol="tcp://", host="127.0.0.1") as cluster:
        with cluster_client(cluster.scheduler_address, worker_timeout=30) as client:
            [first] = client.scheduler_info()["workers"]
            joiner = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker",
                                       cluster.scheduler_address, "--nthreads", "1", "--nworkers", "1",
                                       "--name", "late"], env=dict(os.environ, PYTHONPATH=str(other)),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
            try:
                assert joiner.wait(timeout=90) is not None  # closed with its nanny: the process ends
            finally:
                if joiner.poll() is None:
                    joiner.kill()
            refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
            assert len(refused) == 1 and "(late) refused: it has dimbsvm" in refused[0], refused
            assert list(client.scheduler_info()["workers"]) == [first]
            plan = TaskPlan()
            for k in range(6):
                plan.add(_where, {"k": k}, watch=True)
            assert set(run_plan(plan, client=client).values()) == {first}
            assert [name for name in worker_versions(client)] == [str(cluster.workers[0].name)]
            assert "dimbsvm-version-gate" in cluster.scheduler.worker_plugins
        # the user's cluster is left as it was found: the gate is taken off its scheduler
        assert "dimbsvm-version-gate" not in cluster.scheduler.worker_plugins


def _where(*, k):
    from distributed import get_worker

    return get_worker().address


def _run_with_deploy_factory(name, out, tmp_path, monkeypatch, **settings) -> int:
    """``dimbsvm run`` of the test job with ``--cluster clusters:NAME`` from deploy/clusters.py, as its docstring
    tells a user to call it (``DIMBSVM_CLUSTER_<KEY>`` settings from ``settings``)."""
    monkeypatch.syspath_prepend(str(REPO / "deploy"))
    for key, value in dict(settings, MAX_WORKERS="2").items():
        monkeypatch.setenv(f"DIMBSVM_CLUSTER_{key}", value)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.yaml").write_text(JOB)
    try:
        return main(["run", "job.yaml", "--cluster", f"clusters:{name}", "--out", out])
    finally:
        sys.modules.pop("clusters", None)


def test_the_deploy_factory_of_an_adaptive_local_cluster_runs_a_job(tmp_path, monkeypatch):
    """deploy/clusters.py's own factory, from zero workers."""
    assert _run_with_deploy_factory("local_adaptive", "run", tmp_path, monkeypatch) == 0
    assert len(_records(tmp_path / "run")) == 3


GATEWAY_CONFIG = textwrap.dedent('''
    import sys
    c.DaskGateway.backend_class = "dask_gateway_server.backends.local.UnsafeLocalBackend"
    c.DaskGateway.address = "127.0.0.1:{api}"
    c.Proxy.address = "127.0.0.1:{proxy}"
    c.LocalBackend.clusters_directory = "{clusters}"
    c.ClusterConfig.scheduler_cmd = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    c.ClusterConfig.worker_cmd = [sys.executable, "-m", "distributed.cli.dask_worker"]
    c.ClusterConfig.worker_cores = 1
    c.ClusterConfig.worker_memory = "1 G"
    # the local backend starts workers with a clean environment: hand them this machine's BLAS settings (an
    # OPENBLAS_CORETYPE the workers lack picks other kernels, and decision values then differ in the last bit)
    import os
    c.ClusterConfig.environment = {{
        key: value for key, value in os.environ.items() if key.startswith(("OPENBLAS_", "OMP_", "MKL_", "KMP_"))}}
''')


@pytest.fixture
def gateway(tmp_path):
    """A real dask-gateway server on 127.0.0.1 with its local backend (workers are processes here)."""
    pytest.importorskip("dask_gateway_server", reason="dask-gateway-server is in the dev extra")
    pytest.importorskip("dask_gateway", reason="dask-gateway is in the dev extra")
    import socket

    ports = []
    for _ in range(2):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            ports.append(probe.getsockname()[1])
    config = tmp_path / "gateway_config.py"
    config.write_text(GATEWAY_CONFIG.format(api=ports[0], proxy=ports[1], clusters=tmp_path / "clusters"))
    server = subprocess.Popen([sys.executable, "-m", "dask_gateway_server", "-f", str(config)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    address = f"http://127.0.0.1:{ports[1]}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the proxy answers before it routes to the API: ask the API itself
        try:
            with urllib.request.urlopen(f"{address}/api/health", timeout=2) as answer:
                if answer.status == 200:
                    break
        except OSError:
            pass
        time.sleep(0.2)
    try:
        yield address
    finally:
        server.terminate()
        server.wait(timeout=30)


# dask-gateway's Gateway.__del__ asks for its stopped loop after close (dask-gateway 2026.3, distributed 2026.8)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_the_deploy_factory_of_dask_gateway_runs_a_job_from_zero_workers(gateway, tmp_path, monkeypatch):
    """deploy/clusters.py's gateway factory against a real gateway server: the cluster it asks for starts with
    no worker, scales with the job, and the records are those of the job run in this process."""
    assert _run_with_deploy_factory("gateway", "on-gateway", tmp_path, monkeypatch, GATEWAY=gateway) == 0
    assert main(["run", "job.yaml", "--out", "here"]) == 0
    assert _records("on-gateway") == _records("here")
    from dask_gateway import Gateway

    with Gateway(gateway) as server:
        assert server.list_clusters() == []  # closed at the end
    # dask-gateway's objects finalised here: their __del__ raises (see the mark), and run by a garbage collection
    # inside a later compile() it leaves CPython 3.11's AST recursion counter off ("AST constructor recursion depth
    # mismatch" in whatever is imported next)
    import gc

    gc.collect()


def test_a_schedule_on_a_cluster_that_scales_from_zero_runs_each_retraining(factories, tmp_path):
    """Between scheduled runs the adaptive cluster may have no worker: each run is not refused for it, its
    work brings workers, and the retraining is recorded (the first promotes, the second finds nothing changed)."""
    job = yaml.safe_load((REPO / "jobs" / "retrain.yaml").read_text())
    job["data"]["source"] = "ecoli1"
    job["estimator"] = {"name": "othr"}
    (factories / "retrain.yaml").write_text(yaml.safe_dump(job))
    assert main(["schedule", "retrain.yaml", "--cron", "* * * * * */2", "--registry", "reg", "--max-runs", "2",
                 "--cluster", "my_clusters:adaptive", "--worker-timeout", "30"]) == 0
    actions = [entry["action"] for entry in ModelRegistry(factories / "reg").history()]
    assert actions == ["promote", "unchanged"], actions
