"""A cluster that cannot run the job fails fast (issue 30, item 6), on real `dask` processes on 127.0.0.1.

* A worker with another dimbsvm (a real package directory reporting 0.0.1,
  first on that worker's PYTHONPATH), or one whose dimbsvm cannot be
  imported, is named in one line before any task is submitted.
* An older dimbsvm whose ``--preload-nanny`` module is missing never joins:
  one line says no worker joined within ``--worker-timeout``.
* The scheduler killed mid-run: one line naming it and the command that
  resumes, exit status 3, the partial run directory kept; that command
  resumes on a new scheduler.
* The workers' versions, from the check, for the run's record.

The scheduler, the good workers and the helpers are tests/test_cluster.py's.
"""

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster_helpers import load_cluster_helpers

pytestmark = pytest.mark.slow


_helpers = load_cluster_helpers("_dimbsvm_test_cluster_helpers")
DaskProcesses, _env, _wait_for, _dimbsvm, _write_job = (_helpers.DaskProcesses, _helpers._env, _helpers._wait_for,
                                                        _helpers._dimbsvm, _helpers._write_job)
cluster = _helpers.cluster  # a scheduler and two good workers (w0, w1), this module's own
synthetic_store = _helpers.synthetic_store  # folds of about a second each

#: A failure this test file is about must surface within this many seconds, CLI start-up included. Far
#: above what it takes on an idle machine: the tests' machine may be shared, and the point is "not forever".
FAST = 90

#: A Python without dimbsvm, however this checkout is installed (a sitecustomize runs as the interpreter starts).
MISSING = """import sys


class NoDimbsvm:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] == "dimbsvm":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoDimbsvm)
"""

#: An older dimbsvm, installed as a plain package. Where this checkout is installed in editable mode, its import
#: hook would still find this checkout's submodules below any package named dimbsvm: the older one takes it out.
OLDER = """import sys
sys.meta_path[:] = [finder for finder in sys.meta_path if "__editable__" not in getattr(finder, "__module__", "")]
__version__ = "0.0.1"
"""


def _package(directory: Path, init: str) -> Path:
    """A directory holding a package ``dimbsvm`` whose ``__init__`` is ``init``; to put first on PYTHONPATH."""
    (directory / "dimbsvm").mkdir(parents=True)
    (directory / "dimbsvm" / "__init__.py").write_text(init)
    return directory


def _start_worker(procs, name: str, shadow: Path, *args) -> subprocess.Popen:
    """A `dask worker --nanny` with ``shadow`` first on its PYTHONPATH (its dimbsvm, or its sitecustomize)."""
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(shadow), env["PYTHONPATH"]])
    log = open(procs.workdir / f"{name}.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "dask", "worker", procs.address, "--nanny", "--nthreads", "1",
                             "--host", "127.0.0.1", "--no-dashboard", "--memory-limit", "1GiB", "--name", name, *args],
                            cwd=procs.workdir, env=env, stdout=log, stderr=subprocess.STDOUT)
    procs.procs.append(proc)  # stopped with the others if the test fails half-way
    return proc


def _n_workers(address) -> int:
    from distributed import Client

    with Client(address, timeout=30) as client:
        return len(client.scheduler_info(n_workers=-1)["workers"])


def _wait_for_n_workers(address, n: int, timeout: float = 60) -> None:
    from distributed import Client

    with Client(address, timeout=30) as client:
        _wait_for(lambda: len(client.scheduler_info(n_workers=-1)["workers"]) == n, timeout, f"{n} workers")


def _stop(proc) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def _timed_cli(*args, **kwargs):
    tic = time.monotonic()
    proc = _dimbsvm(*args, **kwargs)
    return proc, time.monotonic() - tic


@pytest.mark.parametrize("case", ["older dimbsvm", "dimbsvm missing"])
def test_worker_with_another_dimbsvm_is_named_before_any_task(cluster, tmp_path, case):
    """A third worker among two good ones: the run fails in one line naming it, and no run directory is made."""
    from dimbsvm import __version__ as ours

    if case == "older dimbsvm":
        shadow = _package(tmp_path / "shadow", OLDER)
        expected = f"has dimbsvm 0.0.1 where this client has {ours}: every worker needs dimbsvm {ours}"
    else:
        shadow = tmp_path / "shadow"
        shadow.mkdir()
        (shadow / "sitecustomize.py").write_text(MISSING)
        expected = (f"cannot import dimbsvm (ModuleNotFoundError: No module named 'dimbsvm'): every worker needs "
                    f"dimbsvm {ours}")
    bad = _start_worker(cluster, "bad", shadow)
    try:
        _wait_for_n_workers(cluster.address, 3)
        job = _write_job(tmp_path / "y5.yaml", "yeast5")
        proc, seconds = _timed_cli("run", job, "--scheduler", cluster.address, "--out", tmp_path / "run",
                                   "--no-progress")
    finally:
        _stop(bad)
        _wait_for_n_workers(cluster.address, 2)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("dimbsvm: error: worker tcp://127.0.0.1:") and "(bad) " in lines[0], lines[0]
    assert expected in lines[0], lines[0]
    assert seconds < FAST
    assert "dashboard" not in proc.stdout  # failed before the client was handed to the job
    assert not (tmp_path / "run").exists() and not (tmp_path / ".run.partial").exists()


def test_older_dimbsvm_whose_preload_fails_never_joins(tmp_path):
    """As deploy/ starts workers (``--preload-nanny dimbsvm.distributed.worker_memory``) with a dimbsvm that has
    no such module: the worker never joins, and the run says so within --worker-timeout."""
    procs = DaskProcesses(tmp_path, n_workers=0)
    try:
        shadow = _package(tmp_path / "shadow", OLDER)
        _start_worker(procs, "old", shadow, "--preload-nanny", "dimbsvm.distributed.worker_memory")
        job = _write_job(tmp_path / "y5.yaml", "yeast5")
        proc, seconds = _timed_cli("run", job, "--scheduler-file", procs.scheduler_file, "--out", tmp_path / "run",
                                   "--worker-timeout", "10")
        assert _n_workers(procs.address) == 0
    finally:
        procs.stop()
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"dimbsvm: error: no worker joined scheduler {procs.address} within 10 s; "), lines[0]
    assert seconds < FAST
    assert not (tmp_path / "run").exists() and not (tmp_path / ".run.partial").exists()


def _autoscale_from_zero(procs, stop):
    """What an autoscaler with minimum 0 does (the Kubernetes operator's DaskAutoscaler polls the scheduler's
    ``adaptive_target``): no worker until the scheduler wants one, then one real ``dask worker``."""
    from distributed import Client

    with Client(procs.address, timeout=30) as client:
        while not stop.wait(0.2):
            if client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.adaptive_target()) > 0:
                procs.started_on_demand = time.monotonic()
                procs._start(["worker", procs.address, "--nanny", "--nthreads", "1", "--host", "127.0.0.1",
                              "--no-dashboard", "--memory-limit", "2GiB", "--name", "on-demand"], "on-demand")
                return


def test_a_scheduler_that_scales_from_zero_gets_the_work_first(tmp_path):
    """``--scale-from-zero``: a remote scheduler with no worker is given the work at once; the autoscaler sees it
    and starts a worker, and the records are those of the same job run in this process. Without a worker ever,
    the run ends in one line counted from the submission."""
    import threading

    job = _write_job(tmp_path / "y5.yaml", "yeast5")
    procs = DaskProcesses(tmp_path, n_workers=0)
    stop = threading.Event()
    scaler = threading.Thread(target=_autoscale_from_zero, args=(procs, stop), daemon=True)
    try:
        none = _dimbsvm("run", job, "--scheduler-file", procs.scheduler_file, "--out", tmp_path / "none",
                        "--scale-from-zero", "--worker-timeout", "3", "--no-progress")
        scaler.start()
        ran = _dimbsvm("run", job, "--scheduler-file", procs.scheduler_file, "--out", tmp_path / "scaled",
                       "--scale-from-zero", "--worker-timeout", "120", "--no-progress")
    finally:
        stop.set()
        procs.stop()
    [line] = [line for line in none.stderr.splitlines() if "error" in line]
    assert none.returncode == 2 and f"no worker joined {procs.address} within 3 s of the work being submitted" in line
    assert ran.returncode == 0, ran.stderr
    assert getattr(procs, "started_on_demand", None) is not None  # the worker came because the work was there
    here = _dimbsvm("run", job, "--out", tmp_path / "here", "--no-progress")
    assert here.returncode == 0 and "running in this process" in here.stdout, here.stderr
    assert _helpers._fold_metrics(tmp_path / "scaled") == _helpers._fold_metrics(tmp_path / "here")
    refused = _dimbsvm("run", job, "--out", tmp_path / "embedded", "--scale-from-zero")
    assert refused.returncode != 0 and "--scale-from-zero is for a remote scheduler" in refused.stderr


def test_scheduler_killed_mid_run_names_it_and_the_resume_command(tmp_path, synthetic_store):
    job = _write_job(tmp_path / "syn.yaml", synthetic_store, output="{model: false}")
    out, folds = tmp_path / "run", tmp_path / ".run.partial" / "folds"
    procs = DaskProcesses(tmp_path, n_workers=1)
    try:
        procs.wait_for_workers(1)
        proc = subprocess.Popen([sys.executable, "-m", "dimbsvm.cli", "run", str(job), "--scheduler-file",
                                 str(procs.scheduler_file), "--out", str(out), "--no-progress"],
                                cwd=_helpers.ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        _wait_for(lambda: folds.exists() and any(folds.glob("*.json")), 120, "the first saved fold")
        procs.procs[0].send_signal(signal.SIGKILL)  # the scheduler
        killed = time.monotonic()
        _, stderr = proc.communicate(timeout=300)
        seconds = time.monotonic() - killed
    finally:
        procs.stop()
    lines = stderr.splitlines()
    assert proc.returncode == 3 and len(lines) == 1, stderr
    assert lines[0].startswith(f"dimbsvm: error: lost the scheduler at {procs.address} "), lines[0]
    saved = len(list(folds.glob("*.json")))
    assert f": {saved} of 10 folds saved in {tmp_path / '.run.partial'}; resume with: dimbsvm run " in lines[0]
    assert seconds < FAST
    assert 1 <= saved < 10 and not out.exists()

    # the command the line gives resumes on a new scheduler (the same scheduler file)
    command = shlex.split(lines[0].split("resume with: ", 1)[1])
    assert command[:2] == ["dimbsvm", "run"] and command[-2:] == ["--out", str(out)]
    procs.scheduler_file.unlink()
    procs = DaskProcesses(tmp_path, n_workers=1)
    try:
        procs.wait_for_workers(1)
        rerun = _dimbsvm(*command[1:])
    finally:
        procs.stop()
    assert rerun.returncode == 0, rerun.stderr
    assert f"resumed: reused {saved} of 10 folds" in rerun.stdout
    assert len(json.loads((out / "metrics.json").read_text())["folds"]) == 10


def test_workers_versions_come_from_the_check(cluster):
    """What a run records about its workers: their answers to the check, by worker name."""
    import dimbsvm
    from dimbsvm.distributed import cluster_client, worker_versions
    from dimbsvm.environment import software_record, source_build

    ours = software_record()
    with cluster_client(cluster.address) as client:
        versions = worker_versions(client)
    assert sorted(versions) == ["w0", "w1"]
    for record in versions.values():
        assert record["dimbsvm"] == dimbsvm.__version__
        assert record["dimbsvm_build"] == source_build(os.path.dirname(dimbsvm.__file__))
        assert record["python"] == ours["python"]
        assert {name: record[name] for name in ours["packages"]} == ours["packages"]
