"""Run directories and models at URLs (issue 32 item 4), against a real S3 API server on 127.0.0.1.

A run to ``--out s3://...`` is written in a local staging directory and
published whole, its completion marker last; the truth is the same job run to
a local directory. Publishers are killed at random points: what the URL holds
is then a complete run (every listed file, at its size) or no completion
marker, and running the command again completes it.
"""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import dimbsvm
from dimbsvm.cli import main
from dimbsvm.exceptions import DimbsvmError, StoreError
from dimbsvm.jobs.remote_run_dir import CLAIM_MARKER, COMPLETE_MARKER, publish_run_dir, staging_dir

ROOT = Path(__file__).resolve().parents[1]
JOB = """\
name: remote
data: {source: ecoli1}
estimator: {name: svc_balanced}
cv: {n_splits: 3, n_repeats: 1, random_state: 0}
metrics: [g_mean, f_measure, auc]
"""


@pytest.fixture
def job(tmp_path, monkeypatch):
    monkeypatch.setenv("DIMBSVM_STAGING_DIR", str(tmp_path / "staging"))
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    return path


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """The same job run to a local directory: what a published run must hold."""
    root = tmp_path_factory.mktemp("local")
    (root / "job.yaml").write_text(JOB)
    assert main(["run", str(root / "job.yaml"), "--out", str(root / "run"), "--no-progress", "--workers", "1"]) == 0
    return root / "run"


def _listing(fs, url):
    return json.loads(fs.cat_file(f"{url}/{COMPLETE_MARKER}"))["files"]


def test_a_run_published_to_s3_holds_the_local_runs_results_and_its_model_loads(job, local_run, s3_bucket,
                                                                                tmp_path, capsys):
    import s3fs

    fs = s3fs.S3FileSystem()
    url = f"s3://{s3_bucket}/runs/x"
    assert main(["run", str(job), "--out", url, "--no-progress", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert f"run directory: {url}\n" in out and f"report: {url}/report.html" in out
    listing = _listing(fs, url)
    local_files = {p.relative_to(local_run).as_posix() for p in local_run.rglob("*") if p.is_file()}
    assert set(listing) == local_files  # the same files as a local run
    for name, size in listing.items():
        assert fs.size(f"{url}/{name}") == size
    assert fs.exists(f"{url}/{CLAIM_MARKER}")
    published = json.loads(fs.cat_file(f"{url}/metrics.json"))
    assert published["folds"] == json.loads((local_run / "metrics.json").read_text())["folds"]
    assert not staging_dir(url).exists()  # the staging copy is gone once the URL holds the run

    # the model at the URL loads (verified against its manifest) and predicts as the local one
    X = np.random.default_rng(0).uniform(size=(20, 7))
    remote, local = dimbsvm.load_model(f"{url}/model"), dimbsvm.load_model(local_run / "model")
    np.testing.assert_array_equal(remote.predict(X), local.predict(X))

    # a finished run is never published over, and a model file changed at the URL is refused
    assert main(["run", str(job), "--out", url, "--no-progress"]) == 2
    assert "holds a finished run; choose another --out" in capsys.readouterr().err
    fs.pipe_file(f"{url}/model/meta.json", b"{}")
    with pytest.raises(StoreError, match=rf"model {url}/model: meta.json does not match"):
        dimbsvm.load_model(f"{url}/model")


def test_a_prefix_holding_objects_dimbsvm_did_not_write_is_refused_before_anything_runs(job, s3_bucket, capsys):
    import s3fs

    fs = s3fs.S3FileSystem()
    fs.pipe_file(f"{s3_bucket}/theirs/data.csv", b"a,b\n1,2\n")
    assert main(["run", str(job), "--out", f"s3://{s3_bucket}/theirs", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds 1 object(s) dimbsvm did not write" in err
    assert fs.cat_file(f"{s3_bucket}/theirs/data.csv") == b"a,b\n1,2\n"
    assert not (Path(os.environ["DIMBSVM_STAGING_DIR"])).exists()  # nothing was staged


def test_validate_checks_a_url_out_and_run_publishes_a_model_that_predict_reads(job, s3_bucket, tmp_path, capsys):
    url = f"s3://{s3_bucket}/runs/v"
    assert main(["validate", str(job), "--out", url]) == 0
    assert main(["run", str(job), "--out", url, "--no-progress", "--workers", "1"]) == 0
    names = dimbsvm.load_model(f"{url}/model").meta["feature_names"]
    rows = tmp_path / "rows.csv"
    rows.write_text(",".join(names) + "\n" + "\n".join(",".join(["0.5"] * len(names)) for _ in range(3)) + "\n")
    capsys.readouterr()
    assert main(["predict", f"{url}/model", str(rows), "--out", f"s3://{s3_bucket}/pred.csv"]) == 0
    import s3fs

    text = s3fs.S3FileSystem().cat_file(f"{s3_bucket}/pred.csv").decode()
    assert len(text.strip().splitlines()) == 4  # a header and one line per row


PUBLISHER = """
import sys
from pathlib import Path
from dimbsvm.jobs.remote_run_dir import publish_run_dir
from dimbsvm.store.location import filesystem
filesystem(sys.argv[2])  # s3fs imported and its client made: the kill lands in the publication itself
Path(sys.argv[3]).touch()
publish_run_dir(Path(sys.argv[1]), sys.argv[2])
"""


def test_publishers_killed_at_random_points_leave_a_complete_run_or_none_and_a_rerun_completes(
        job, local_run, s3_bucket, s3_server):
    import s3fs

    fs = s3fs.S3FileSystem()
    rng = random.Random(7)
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def publisher(url):
        staging = staging_dir(url)
        staging.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(local_run, staging)  # a finished run waiting to be published
        ready = staging.parent / "ready"
        proc = subprocess.Popen([sys.executable, "-c", PUBLISHER, str(staging), url, str(ready)], env=env)
        while not ready.exists() and proc.poll() is None:
            time.sleep(0.01)
        ready.unlink()
        return proc, staging

    proc, _ = publisher(f"s3://{s3_bucket}/killed/timed")  # how long a publication takes here
    start = time.monotonic()
    assert proc.wait() == 0
    duration = time.monotonic() - start
    outcomes = []
    for i in range(6):
        url = f"s3://{s3_bucket}/killed/{i}"
        proc, staging = publisher(url)
        time.sleep(rng.uniform(0.1, 0.9) * duration)  # somewhere in the upload
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if fs.exists(f"{url}/{COMPLETE_MARKER}"):
            outcomes.append("complete")
            for name, size in _listing(fs, url).items():  # complete means every file, whole
                assert fs.size(f"{url}/{name}") == size
            continue
        outcomes.append("incomplete" if fs.exists(f"{url}/{CLAIM_MARKER}") else "untouched")
        assert staging.is_dir()  # kept until the URL holds the run
        assert main(["run", str(job), "--out", url, "--no-progress"]) == 0  # publishes, runs nothing
        assert set(_listing(fs, url)) == {p.relative_to(local_run).as_posix()
                                          for p in local_run.rglob("*") if p.is_file()}
        assert not staging.exists()
    assert "incomplete" in outcomes, outcomes  # some kills landed inside an upload


def test_publishing_refuses_to_replace_a_finished_run(local_run, s3_bucket, tmp_path, monkeypatch):
    monkeypatch.setenv("DIMBSVM_STAGING_DIR", str(tmp_path / "staging"))
    url = f"s3://{s3_bucket}/done"
    staging = staging_dir(url)
    staging.parent.mkdir(parents=True)
    shutil.copytree(local_run, staging)
    publish_run_dir(staging, url)
    shutil.copytree(local_run, staging)
    with pytest.raises(DimbsvmError, match="holds a finished run"):
        publish_run_dir(staging, url)
    assert staging.is_dir()  # not removed: it was not published


def test_a_staged_run_of_another_job_is_never_published_for_this_one(job, local_run, s3_bucket, tmp_path, capsys):
    import s3fs

    url = f"s3://{s3_bucket}/other"
    staging = staging_dir(url)
    staging.parent.mkdir(parents=True)
    shutil.copytree(local_run, staging)  # a finished run of JOB whose publication was interrupted
    other = tmp_path / "other.yaml"
    other.write_text(JOB.replace("svc_balanced", "othr"))
    assert main(["run", str(other), "--out", url, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "was made from another job" in err and str(staging) in err
    assert staging.is_dir() and not s3fs.S3FileSystem().exists(f"{s3_bucket}/other")
    assert main(["run", str(job), "--out", url, "--no-progress"]) == 0  # the job that made it publishes it
    assert s3fs.S3FileSystem().exists(f"{s3_bucket}/other/{COMPLETE_MARKER}")


def test_a_run_killed_on_one_machine_resumes_on_another_from_its_mirror_at_the_url(s3_bucket, tmp_path, monkeypatch,
                                                                                    capsys):
    """The staging directory is lost with its machine; the folds mirrored under the URL are reused elsewhere."""
    import s3fs

    rng = np.random.default_rng(0)
    y = (rng.random(3000) < 0.1).astype(int)
    X = rng.normal(size=(3000, 8)) + 0.8 * y[:, None]
    rows = "\n".join(",".join(f"{v:.6f}" for v in x) + f",{'pn'[label]}" for x, label in zip(X, y))
    (tmp_path / "rows.csv").write_text(",".join(f"x{j}" for j in range(8)) + ",class\n" + rows + "\n")
    job = tmp_path / "job.yaml"
    job.write_text(JOB.replace("ecoli1", str(tmp_path / "rows.csv")).replace("n_splits: 3, n_repeats: 1",
                                                                              "n_splits: 5, n_repeats: 2"))
    url = f"s3://{s3_bucket}/moved"
    fs = s3fs.S3FileSystem()
    folds = f"{url}/.partial/folds"

    def mirrored_folds():
        fs.invalidate_cache()
        return fs.find(folds) if fs.exists(folds) else []

    first = dict(os.environ, PYTHONPATH=str(ROOT), DIMBSVM_STAGING_DIR=str(tmp_path / "machine-1"))
    # mirrored every quarter second, not every CHECKPOINT_EVERY, and each fold saved at least 0.3 s after the
    # last: the kill, soon after the first fold is mirrored, comes while some but not all of them are (the folds
    # themselves can all finish within a quarter second)
    mirrored_often = ("import sys, time; import dimbsvm.jobs.remote_run_dir as mirror; mirror.CHECKPOINT_EVERY = 0.25; "
                      "import dimbsvm.jobs.runner as runner; save = runner.save_fold; "
                      "runner.save_fold = lambda *args: (save(*args), time.sleep(0.3)); "
                      "from dimbsvm.cli import main; sys.exit(main())")
    proc = subprocess.Popen([sys.executable, "-c", mirrored_often, "run", str(job), "--out", url, "--no-progress"],
                            env=first, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not mirrored_folds() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)  # the machine is lost, its staging directory with it
    proc.wait()
    mirrored = len(mirrored_folds())
    assert 1 <= mirrored < 10, (mirrored, proc.stderr.read().decode()[-2000:])
    assert not fs.exists(f"{url}/{COMPLETE_MARKER}")

    monkeypatch.setenv("DIMBSVM_STAGING_DIR", str(tmp_path / "machine-2"))
    assert main(["run", str(job), "--out", url, "--no-progress"]) == 0
    out = capsys.readouterr()
    assert "restored into" in out.err
    assert f"resumed: reused {mirrored} of 10 folds" in out.out
    fs.invalidate_cache()
    assert not fs.exists(f"{url}/.partial")  # the finished run's mirror is removed
    published = {name for name in _listing(fs, url)}
    assert not any(name.startswith(".partial") for name in published)

    whole = tmp_path / "whole"  # the truth: the same job, never interrupted, to a local directory
    assert main(["run", str(job), "--out", str(whole), "--no-progress"]) == 0
    capsys.readouterr()
    remote_metrics = json.loads(fs.cat_file(f"{url}/metrics.json"))
    local_metrics = json.loads((whole / "metrics.json").read_text())
    assert remote_metrics["folds"] == local_metrics["folds"]
    assert published == {p.relative_to(whole).as_posix() for p in whole.rglob("*") if p.is_file()}


def test_the_mirror_sends_new_and_changed_files_skips_temporaries_and_follows_removals(s3_bucket, tmp_path, caplog):
    import s3fs

    from dimbsvm.jobs.remote_run_dir import CHECKPOINT_PREFIX, Checkpoints

    fs = s3fs.S3FileSystem()
    url = f"s3://{s3_bucket}/mirror"
    partial = tmp_path / ".run.partial"
    (partial / "folds").mkdir(parents=True)
    (partial / "job.yaml").write_text("name: x\n")
    (partial / "folds" / "seed0-fold0.json").write_text("{}\n")
    (partial / "folds" / ".seed0-fold1.json.99-ab12.tmp").write_text("{half")  # a file being written

    def mirrored():
        fs.invalidate_cache()
        return {p.split(f"{CHECKPOINT_PREFIX}/", 1)[1]: fs.cat_file(p).decode()
                for p in fs.find(f"{url}/{CHECKPOINT_PREFIX}")}

    with caplog.at_level("WARNING"), Checkpoints(url, partial) as checkpoints:
        checkpoints.sync()
        assert fs.exists(f"{url}/{CLAIM_MARKER}")
        assert mirrored() == {"job.yaml": "name: x\n", "folds/seed0-fold0.json": "{}\n"}
        (partial / "folds" / "seed0-fold0.json").write_text('{"record": 1}\n')
        (partial / "job.yaml").unlink()
        checkpoints.sync()
        assert mirrored() == {"folds/seed0-fold0.json": '{"record": 1}\n'}
        partial.rename(tmp_path / "run")  # the finished run: its partial directory is gone, the mirror kept
        assert checkpoints.sync() == 0
        assert mirrored() == {"folds/seed0-fold0.json": '{"record": 1}\n'}
    assert not caplog.records
