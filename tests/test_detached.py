"""Submit and walk away (issue 53, item 3), on real `dask` processes on 127.0.0.1.

``dimbsvm run --detach`` returns while the job's driver runs on a worker;
``status``, ``logs`` and ``cancel`` follow it from the files beside the run
directory. The truth for a detached run's records is the same job run
attached (tests/test_cluster.py's ``reference``, an embedded cluster); a
worker killed under the driver is a real SIGKILL of that worker's process.
"""

import json
import os
import signal
import sys
import time

import jsonschema
import numpy as np
import pytest
from cluster_helpers import load_cluster_helpers

from dimbsvm.cli_json import SCHEMAS

pytestmark = pytest.mark.slow


_helpers = load_cluster_helpers("_dimbsvm_test_cluster_helpers_detached")
DaskProcesses, _dimbsvm, _wait_for, _fold_metrics = (_helpers.DaskProcesses, _helpers._dimbsvm, _helpers._wait_for,
                                                     _helpers._fold_metrics)
synthetic_store, reference = _helpers.synthetic_store, _helpers.reference

#: The submitter returns within this many seconds (CLI start-up and the checks included; a loaded machine).
RETURNS_WITHIN = 60


@pytest.fixture
def procs(tmp_path):
    cluster = DaskProcesses(tmp_path, n_workers=2, worker_args=_helpers.WORKER_MEMORY_PRELOAD)
    try:
        cluster.wait_for_workers(2)
        yield cluster
    finally:
        cluster.stop()


def _state(run_dir) -> dict:
    return json.loads((run_dir.with_name(f".{run_dir.name}.detached") / "state.json").read_text())


def _status(run_dir) -> dict:
    proc = _dimbsvm("status", run_dir, "--json")
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    jsonschema.validate(document, SCHEMAS["status"])
    return document


def _submit(procs, job, out):
    started = time.monotonic()
    proc = _dimbsvm("run", job, "--scheduler-file", procs.scheduler_file, "--out", out, "--detach", "--json")
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < RETURNS_WITHIN
    assert f"run directory: {out}" in proc.stderr and f"dimbsvm status {out}" in proc.stderr
    document = json.loads(proc.stdout)
    jsonschema.validate(document, SCHEMAS["run"])
    assert document["run_directory"] == str(out) and document["detached"]["state"] in ("submitted", "running")
    return proc


def test_a_detached_run_survives_its_submitter_and_a_killed_worker(procs, reference, tmp_path):
    """The submitter exits at once; the driver's worker is killed after the first saved fold; the scheduler
    starts the driver again on the other worker, it resumes, and the records are the attached run's."""
    job, expected = reference
    out = tmp_path / "run"
    _submit(procs, job, out)
    _wait_for(lambda: _state(out)["state"] != "submitted", 120, "the driver to start")
    first = _state(out)
    assert first["state"] == "running" and first["attempt"] == 1, first
    partial = tmp_path / ".run.partial" / "folds"
    _wait_for(lambda: partial.is_dir() and any(partial.glob("*.json")), 180, "the first saved fold")
    running = _status(out)
    assert running["state"] == "running" and running["folds_total"] == 10 and running["folds_saved"] >= 1
    os.kill(first["worker_pid"], signal.SIGKILL)  # the worker process under the driver (its nanny restarts it)
    _wait_for(lambda: _state(out)["state"] in ("finished", "failed", "cancelled"), 600, "the run to end")
    final = _state(out)
    assert final["state"] == "finished" and final["attempt"] >= 2, final
    assert _fold_metrics(out) == expected
    done = _status(out)
    assert done["state"] == "finished" and done["folds_saved"] == 10 and set(done["summary"]) >= {"g_mean"}
    logs = _dimbsvm("logs", out)
    assert logs.returncode == 0 and "--- attempt 1 on worker" in logs.stdout and "--- attempt 2" in logs.stdout
    assert "resuming the interrupted run" in logs.stdout  # the second attempt reused the first one's folds


def test_cancel_stops_the_driver_and_keeps_the_partial_run(procs, reference, tmp_path):
    job, expected = reference
    out = tmp_path / "run"
    _submit(procs, job, out)
    partial = tmp_path / ".run.partial" / "folds"
    _wait_for(lambda: partial.is_dir() and any(partial.glob("*.json")), 180, "the first saved fold")
    cancel = _dimbsvm("cancel", out, "--wait", "120")
    assert cancel.returncode == 0, cancel.stderr
    assert _state(out)["state"] == "cancelled" and not out.exists() and any(partial.glob("*.json"))
    again = _dimbsvm("cancel", out)
    assert again.returncode == 2 and again.stderr.strip() == f"dimbsvm: error: {out} is cancelled already; " \
                                                               "nothing to cancel"
    # the partial run resumes attached, to the records of an undisturbed run
    resumed = _dimbsvm("run", job, "--scheduler-file", procs.scheduler_file, "--out", out, "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert _fold_metrics(out) == expected


def test_detach_refusals_are_one_line_before_anything_is_submitted(tmp_path, reference):
    job, _ = reference
    cases = [((), "--detach needs a remote scheduler"),
             (("--cluster", "nowhere:factory"), "--detach needs a cluster that outlives this process"),
             (("--scheduler", "tcp://127.0.0.1:9", "--out", "s3://bucket/run", "--fresh"),
              "--fresh with --detach --out s3://bucket/run")]
    for extra, message in cases:
        proc = _dimbsvm("run", job, "--detach", *extra, *(("--out", tmp_path / "x") if "--out" not in extra else ()))
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert not list(tmp_path.iterdir())
    for verb in ("status", "logs", "cancel"):
        proc = _dimbsvm(verb, tmp_path / "nothing")
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
        assert str(tmp_path / "nothing") in proc.stderr


def test_a_driver_on_a_worker_that_cannot_see_the_files_errs_in_one_line(procs, tmp_path):
    """The run directory and the working directory must be on a filesystem the workers share: the driver task
    refuses, by name, a directory its worker does not see (here one that does not exist anywhere)."""
    from distributed import Client

    from dimbsvm.jobs.detached import drive

    with Client(procs.address, timeout=30) as client:
        future = client.submit(drive, str(tmp_path / "run"), [sys.executable, "-c", "pass"], "/nonexistent/jobs",
                               pure=False)
        with pytest.raises(Exception) as raised:
            future.result(timeout=120)
    assert "cannot see /nonexistent/jobs: --detach needs a filesystem the workers share" in str(raised.value)


def test_a_detached_run_at_a_url_runs_in_a_workers_scratch_and_publishes_there(s3_bucket, tmp_path, monkeypatch):
    """``--out s3://...`` (a real S3 API server, moto): the driver needs no shared filesystem. The job travels
    with the task, the run is staged on the worker and published at the URL, the state and the driver's log
    sit beside it; the records equal the same job run attached to a local directory."""
    import s3fs

    monkeypatch.setenv("DIMBSVM_STAGING_DIR", str(tmp_path / "staging"))  # (the workers' staging, via their env)
    store = f"s3://{s3_bucket}/stores/yeast5.zarr"
    assert _dimbsvm("ingest", "yeast5", store).returncode == 0
    job = tmp_path / "y5.yaml"
    job.write_text(f"name: y5\ndata: {{source: '{store}'}}\nestimator: {{name: svc_balanced}}\n"
                   "cv: {n_splits: 3, n_repeats: 1, random_state: 0}\nmetrics: [g_mean, f_measure]\n")
    url = f"s3://{s3_bucket}/runs/y5"
    procs = DaskProcesses(tmp_path, n_workers=1)
    try:
        procs.wait_for_workers(1)
        submitted = _dimbsvm("run", job, "--scheduler-file", procs.scheduler_file, "--out", url, "--detach")
        assert submitted.returncode == 0, submitted.stderr
        _wait_for(lambda: _status(url)["state"] in ("finished", "failed", "cancelled"), 300, "the run to end")
        attached = _dimbsvm("run", job, "--scheduler-file", procs.scheduler_file, "--out", tmp_path / "attached")
        assert attached.returncode == 0, attached.stderr
    finally:
        procs.stop()
    done = _status(url)
    assert done["state"] == "finished" and done["folds_saved"] == 3, done
    fs = s3fs.S3FileSystem()
    published = json.loads(fs.cat_file(f"{s3_bucket}/runs/y5/metrics.json"))
    assert [f["g_mean"] for f in published["folds"]] == [f["g_mean"] for f in json.loads(
        (tmp_path / "attached" / "metrics.json").read_text())["folds"]]
    assert fs.exists(f"{s3_bucket}/runs/.y5.detached/state.json")
    logs = _dimbsvm("logs", url)
    assert logs.returncode == 0 and "--- attempt 1 on worker" in logs.stdout and "run directory: " in logs.stdout

    # a job whose data is a path relative to it cannot travel: refused before anything is submitted
    local = tmp_path / "local.yaml"
    local.write_text(job.read_text().replace(store, "data/y5.csv"))
    (tmp_path / "data").mkdir()
    rows = np.random.default_rng(0).normal(size=(60, 2))
    (tmp_path / "data" / "y5.csv").write_text("a,b,class\n" + "".join(
        f"{a},{b},{'pos' if i < 12 else 'neg'}\n" for i, (a, b) in enumerate(rows)))
    refused = _dimbsvm("run", local, "--scheduler", "tcp://127.0.0.1:9", "--out", f"s3://{s3_bucket}/runs/z",
                       "--detach")
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert "data.source data/y5.csv is a path relative to the job file" in lines[0], lines[0]
