"""Where a job runs when nobody said (dimbsvm.jobs.placement): the size estimate, the choice, and the invariant
that a job run in this process writes the same records as on an embedded cluster."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dimbsvm.jobs import validate_job
from dimbsvm.jobs.placement import CLUSTER_THRESHOLD, FEATURE_UNIT, KERNEL_ROWS, estimate_work, place_job

ROOT = Path(__file__).resolve().parents[1]
Y = np.r_[np.zeros(900), np.ones(100)]  # 1000 rows, 100 minority


def _job(**sections):
    return validate_job({"data": {"source": "yeast5"}, **sections})


def test_linear_job_counts_its_training_rows():
    job = _job(estimator={"name": "linear_svc"}, cv={"n_splits": 4, "n_repeats": 3})
    work = estimate_work(job, Y)
    assert work.n_fits == 12 + 1  # every fold, then the final model
    assert work.row_fits == 12 * 750 + 1000


def test_without_a_final_model_only_folds_count():
    job = _job(estimator={"name": "linear_svc"}, cv={"n_splits": 5}, output={"model": False})
    assert estimate_work(job, Y).n_fits == 5


def test_kernel_fits_grow_with_the_square_of_their_rows():
    job = _job(estimator={"name": "svc"}, cv={"n_splits": 2}, output={"model": False})
    assert estimate_work(job, Y).row_fits == 2 * 500 * 500 / KERNEL_ROWS
    small = np.r_[np.zeros(90), np.ones(10)]  # 50 training rows: below KERNEL_ROWS, counted once each
    assert estimate_work(job, small).row_fits == 2 * 50


def test_ensemble_members_count_their_bags():
    job = _job(estimator={"name": "ensemble_othr", "params": {"estimator": "linear_svc", "n_estimators": 4,
                                                                "max_samples": 100}},
               cv={"n_splits": 2}, output={"model": False})
    work = estimate_work(job, Y)
    assert (work.n_fits, work.row_fits) == (2 * 4, 2 * 4 * 100)
    balanced = _job(estimator={"name": "ensemble_othr", "params": {"estimator": "linear_svc", "n_estimators": 3,
                                                                     "bootstrap": "balanced"}},
                    cv={"n_splits": 2}, output={"model": False})
    # a balanced bag: the training fold's minority rows, and as many majority rows
    assert estimate_work(balanced, Y).row_fits == 2 * 3 * (2 * 50)


def test_a_screening_grid_counts_the_members_it_fits():
    grid = {"C": [1.0, 10.0], "gamma": [0.3, 1.0, 3.0]}  # 6 settings
    screened = _job(estimator={"name": "recommended", "params": {"n_estimators": 4, "param_grid": grid,
                                                                  "screen_members": 1, "screen_survivors": 2}},
                    cv={"n_splits": 2}, output={"model": False})
    assert estimate_work(screened, Y).n_fits == 2 * (6 * 1 + 2 * 3)
    full = _job(estimator={"name": "recommended", "params": {"n_estimators": 4, "param_grid": grid}},
                cv={"n_splits": 2}, output={"model": False})
    assert estimate_work(full, Y).n_fits == 2 * 6 * 4


def test_a_search_adds_its_inner_fits():
    job = _job(estimator={"name": "linear_svc"}, cv={"n_splits": 2}, output={"model": False},
               search={"params": {"C": [0.1, 1.0, 10.0]}, "cv": 3})
    work = estimate_work(job, Y)
    assert work.n_fits == 2 * (1 + 3 * 3)
    assert work.row_fits == pytest.approx(2 * (500 + 9 * 500 * 2 / 3))


def test_small_jobs_run_here_large_ones_start_a_cluster():
    small = place_job(_job(estimator={"name": "svc_balanced"}), Y)
    assert small.in_process
    assert small.reason.startswith("running in this process: ~") and "--workers N" in small.reason
    big_y = np.r_[np.zeros(90_000), np.ones(10_000)]
    large = place_job(_job(estimator={"name": "svc_balanced"}), big_y)
    assert not large.in_process and large.work.row_fits > CLUSTER_THRESHOLD
    assert large.reason.startswith("starting an embedded cluster: ~")


def test_few_row_fits_with_millions_of_rows_to_score_start_a_cluster():
    """An ensemble on capped bags trains on few rows but scores every out-of-bag one: its cost model estimate decides."""
    from dimbsvm.jobs.cost import load_cost_model
    from dimbsvm.jobs.placement import CLUSTER_SECONDS

    job = _job(estimator={"name": "ensemble_othr", "params": {"estimator": "linear_svc", "n_estimators": 10,
                                                               "max_samples": 20_000, "random_state": 0}},
               cv={"n_splits": 3})
    model = load_cost_model()
    for n, here in ((200_000, True), (10_000_000, False)):
        y = np.r_[np.zeros(n - n // 20), np.ones(n // 20)]
        placed = place_job(job, y, n_features=20)
        assert placed.work.row_fits < CLUSTER_THRESHOLD  # the same members' training rows at both sizes
        assert placed.in_process is here
        assert (model.seconds(placed.work) < CLUSTER_SECONDS) is here
    assert placed.reason.startswith("starting an embedded cluster: ~") and "of one core's work" in placed.reason


@pytest.mark.parametrize("how, expected", [
    ({"workers": 2}, "--workers"), ({"scheduler": "tcp://127.0.0.1:8786"}, "--scheduler"),
    ({"scheduler_file": "s.json"}, "--scheduler-file"),
])
def test_a_named_cluster_is_always_used(how, expected):
    placement = place_job(_job(estimator={"name": "linear_svc"}), Y, **how)
    assert not placement.in_process and expected in placement.reason and placement.work is None


@pytest.mark.parametrize("execution", [{"n_workers": 1}, {"require_encryption": True}])
def test_execution_settings_that_ask_for_a_cluster_are_obeyed(execution):
    assert not place_job(_job(estimator={"name": "linear_svc"}, execution=execution), Y).in_process


def test_the_scheduler_from_the_environment_is_obeyed(monkeypatch):
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:8786")
    assert "DASK_SCHEDULER_ADDRESS" in place_job(_job(estimator={"name": "linear_svc"}), Y).reason


# -- the invariant: records do not depend on where the job ran ------------------------------------------------

JOB = """\
name: placed
data: {source: yeast5}
estimator:
  name: ensemble_othr
  params: {estimator: linear_svc, n_estimators: 3, random_state: 0}
cv: {n_splits: 3, n_repeats: 2, random_state: 1}
metrics: [g_mean, f_measure, auc, a_mean, average_precision, mcc, fit_time]
"""

#: Timings differ from run to run; everything else in a fold's record is compared exactly.
TIMES = ("fit_time", "predict_time")


def _dimbsvm(*args, cwd):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return subprocess.run([sys.executable, "-m", "dimbsvm.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


@pytest.mark.slow
def test_records_are_the_same_in_this_process_and_on_an_embedded_cluster(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    here = _dimbsvm("run", job, "--out", tmp_path / "here", "--no-progress", cwd=tmp_path)
    assert here.returncode == 0, here.stderr
    first = here.stdout.splitlines()[0]
    assert first.startswith("running in this process: ~") and "cluster threshold" in first, here.stdout
    assert "dashboard" not in here.stdout + here.stderr  # no cluster was started
    cluster = _dimbsvm("run", job, "--out", tmp_path / "cluster", "--no-progress", "--workers", "2", cwd=tmp_path)
    assert cluster.returncode == 0, cluster.stderr
    assert "dashboard: " in cluster.stdout and "running in this process" not in cluster.stdout

    a, b = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("here", "cluster"))
    strip = lambda folds: [{k: v for k, v in fold.items() if k not in TIMES} for fold in folds]  # noqa: E731
    assert len(a["folds"]) == 6 and "member_thresholds" in a["folds"][0]
    assert strip(a["folds"]) == strip(b["folds"])  # bit for bit: metrics, thresholds, members' thresholds
    assert a["summary"] == b["summary"]
    assert a["worker_versions"] == {} and b["worker_versions"]  # it did run in two places
    for name in sorted(p.name for p in (tmp_path / "here" / "oof").iterdir()):
        x, y = (np.load(tmp_path / d / "oof" / name) for d in ("here", "cluster"))
        assert sorted(x.files) == sorted(y.files)
        for key in x.files:
            np.testing.assert_array_equal(x[key], y[key], err_msg=f"{name}: {key}")
    assert (tmp_path / "here" / "report.html").is_file() and (tmp_path / "here" / "model").is_dir()


def test_validate_says_where_the_job_would_run(cli, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    proc = cli("validate", job, cwd=tmp_path)  # no cluster: a child of the fork server (conftest.py)
    assert proc.returncode == 0, proc.stderr
    assert "  runs on: this process (~" in proc.stdout, proc.stdout
    proc = cli("validate", job, "--workers", "2", cwd=tmp_path)
    assert "  runs on: embedded LocalCluster" in proc.stdout, proc.stdout


@pytest.mark.slow
def test_retrain_of_a_small_job_runs_in_this_process_and_promotes(tmp_path):
    proc = _dimbsvm("retrain", ROOT / "jobs" / "retrain.yaml", "--registry", tmp_path / "reg", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("running in this process: ~") and "over 1 fit is below" in lines[0], proc.stdout
    assert lines[1].startswith("estimated ") and "in this process (1 fit, " in lines[1], proc.stdout
    assert "dashboard" not in proc.stdout and "promoted (first model in the registry)" in lines[2], proc.stdout


def test_wide_rows_count_in_proportion_to_their_width():
    job = _job(estimator={"name": "linear_svc"}, cv={"n_splits": 2}, output={"model": False})
    narrow = estimate_work(job, Y, n_features=FEATURE_UNIT // 2).row_fits
    assert narrow == estimate_work(job, Y, n_features=FEATURE_UNIT).row_fits == 2 * 500
    assert estimate_work(job, Y, n_features=4 * FEATURE_UNIT).row_fits == 4 * narrow
