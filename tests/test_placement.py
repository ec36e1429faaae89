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
from dimbsvm.jobs.data import JobData
from dimbsvm.jobs.placement import CLUSTER_SECONDS, place_job
from dimbsvm.jobs.plan_price import FEATURE_UNIT, price_job
from dimbsvm.svm.task_costs import TASK_SECONDS

ROOT = Path(__file__).resolve().parents[1]
Y = np.r_[np.zeros(900), np.ones(100)]  # 1000 rows, 100 minority


def _job(**sections):
    return validate_job({"data": {"source": "yeast5"}, **sections})


def _data(y, n_features=8):
    """Rows of no memory (a broadcast zero): a price reads the data's shape and labels, never its values."""
    return JobData(np.broadcast_to(np.zeros(1), (len(y), n_features)), np.asarray(y), {"name": "priced"})


def _submitted(job, data, monkeypatch, tmp_path):
    """The plan a real in-process run of ``job`` submits: its tasks and their costs, caught on the way to run_plan."""
    import dimbsvm.model_selection.folds as folds
    from dimbsvm.jobs import run_job

    plans, run_plan = [], folds.run_plan

    def caught(plan, **kwargs):
        plans.append(plan)
        return run_plan(plan, **kwargs)

    monkeypatch.setattr(folds, "run_plan", caught)
    run_job(job, None, out=tmp_path / "run", progress=False)
    [plan] = plans
    return plan


@pytest.mark.parametrize("estimator", [
    {"name": "linear_svc"}, {"name": "othr"},
    {"name": "ensemble_othr", "params": {"estimator": "linear_svc", "n_estimators": 4, "random_state": 0}},
    {"name": "recommended", "params": {"n_estimators": 3, "param_grid": {"C": [1.0, 10.0]}, "screen_members": 1,
                                       "screen_survivors": 1}},
])
def test_the_price_is_the_plan_a_run_submits(estimator, monkeypatch, tmp_path):
    """Priced before anything runs: the same tasks as the run submits, and the sum of their costs."""
    from dimbsvm.jobs.data import load_job_data

    job = _job(estimator=estimator, cv={"n_splits": 3, "random_state": 0})
    data = load_job_data("yeast5")
    price = price_job(job, data)
    plan = _submitted(job, data, monkeypatch, tmp_path)
    costs = [TASK_SECONDS if task.cost is None else task.cost for task in plan.tasks if not task.shared]
    assert price.n_tasks == len(costs)
    assert price.work == pytest.approx(sum(costs), rel=1e-12)
    assert 0 < price.span < price.work


def test_a_search_prices_every_inner_fit(monkeypatch, tmp_path):
    from dimbsvm.jobs.data import load_job_data

    job = _job(estimator={"name": "linear_svc"}, cv={"n_splits": 2}, output={"model": False},
               search={"params": {"C": [0.1, 1.0, 10.0]}, "cv": 3})
    data = load_job_data("yeast5")
    price = price_job(job, data)
    plan = _submitted(job, data, monkeypatch, tmp_path)
    inner = [task for task in plan.tasks if task.name == "inner-score"]
    assert len(inner) == 2 * 3 * 3 and all(task.cost is not None and task.cost > TASK_SECONDS for task in inner)
    costs = [TASK_SECONDS if task.cost is None else task.cost for task in plan.tasks if not task.shared]
    assert price.n_tasks == len(costs) and price.work == pytest.approx(sum(costs), rel=1e-12)


def test_a_stores_price_lays_its_folds_out_from_class_totals(tmp_path, monkeypatch):
    """A store's folds are priced from the class totals it records, without a task; the run's exact counts
    give the same tasks and nearly the same work."""
    from dimbsvm.datasets import make_imbalanced
    from dimbsvm.jobs.data import load_job_data
    from dimbsvm.store import ingest

    X, y = make_imbalanced(6_000, n_features=6, minority_fraction=0.05, random_state=0)
    ingest((X, y), tmp_path / "s.zarr", chunk_rows=1_000)
    job = validate_job({"data": {"source": str(tmp_path / "s.zarr")},
                        "estimator": {"name": "ensemble_othr", "params": {"estimator": "linear_svc",
                                                                          "n_estimators": 3, "random_state": 0}},
                        "cv": {"n_splits": 3, "random_state": 0}})
    data = load_job_data(job.data.source)
    price = price_job(job, data)
    plan = _submitted(job, data, monkeypatch, tmp_path)
    costs = [TASK_SECONDS if task.cost is None else task.cost for task in plan.tasks if not task.shared]
    assert price.n_tasks == len(costs)
    assert price.work == pytest.approx(sum(costs), rel=0.01)


def test_kernel_fits_cost_about_the_square_of_their_rows():
    job = _job(estimator={"name": "svc"}, cv={"n_splits": 2}, output={"model": False})
    small, large = (price_job(job, _data(np.r_[np.zeros(n - n // 10), np.ones(n // 10)])) for n in (4_000, 8_000))
    assert 3.5 < (large.work - large.n_tasks * TASK_SECONDS) / (small.work - small.n_tasks * TASK_SECONDS) < 4.1


def test_wide_rows_cost_in_proportion_to_their_width():
    job = _job(estimator={"name": "linear_svc"}, cv={"n_splits": 2}, output={"model": False})
    narrow, unit, wide = (price_job(job, _data(Y, n)) for n in (FEATURE_UNIT // 2, FEATURE_UNIT, 4 * FEATURE_UNIT))
    assert narrow == unit
    fixed = unit.n_tasks * TASK_SECONDS
    assert wide.work - fixed == pytest.approx(4 * (unit.work - fixed))


def test_a_retrainings_challenger_is_one_fit_of_its_rows():
    job = _job(estimator={"name": "linear_svc"})
    price = price_job(job, _data(Y), challenger_rows=800)
    assert price.n_tasks == 3  # prepare, fit, finish (no test rows)
    assert price_job(job, _data(Y), challenger_rows=400).work < price.work


def test_small_jobs_run_here_large_ones_start_a_cluster():
    small = place_job(_job(estimator={"name": "svc_balanced"}), _data(Y))
    assert small.in_process and small.decided
    assert small.reason.startswith("running in this process: about ") and "--workers N" in small.reason
    big_y = np.r_[np.zeros(90_000), np.ones(10_000)]
    large = place_job(_job(estimator={"name": "svc_balanced"}), _data(big_y))
    assert not large.in_process and large.seconds >= CLUSTER_SECONDS
    assert large.reason.startswith("starting an embedded cluster: about ") and "of one core's work" in large.reason


def test_few_training_rows_with_millions_of_rows_to_score_start_a_cluster():
    """An ensemble on capped bags trains on few rows but scores every out-of-bag one: its scoring tasks decide."""
    job = _job(estimator={"name": "ensemble_othr", "params": {"estimator": "linear_svc", "n_estimators": 10,
                                                               "max_samples": 20_000, "random_state": 0}},
               cv={"n_splits": 3})
    for n, here in ((200_000, True), (10_000_000, False)):
        y = np.r_[np.zeros(n - n // 20), np.ones(n // 20)]
        placed = place_job(job, _data(y, 20))
        assert placed.in_process is here
        assert (placed.seconds < CLUSTER_SECONDS) is here
    assert placed.reason.startswith("starting an embedded cluster: about ") and "of one core's work" in placed.reason


@pytest.mark.parametrize("how, expected", [
    ({"workers": 2}, "--workers"), ({"scheduler": "tcp://127.0.0.1:8786"}, "--scheduler"),
    ({"scheduler_file": "s.json"}, "--scheduler-file"),
])
def test_a_named_cluster_is_always_used(how, expected):
    placement = place_job(_job(estimator={"name": "linear_svc"}), _data(Y), **how)
    assert not placement.in_process and expected in placement.reason and not placement.decided


@pytest.mark.parametrize("execution", [{"n_workers": 1}, {"require_encryption": True}])
def test_execution_settings_that_ask_for_a_cluster_are_obeyed(execution):
    assert not place_job(_job(estimator={"name": "linear_svc"}, execution=execution), _data(Y)).in_process


def test_the_scheduler_from_the_environment_is_obeyed(monkeypatch):
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:8786")
    assert "DASK_SCHEDULER_ADDRESS" in place_job(_job(estimator={"name": "linear_svc"}), _data(Y)).reason


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
    assert first.startswith("running in this process: about ") and "cluster threshold" in first, here.stdout
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
    assert "  runs on: this process (about " in proc.stdout, proc.stdout
    proc = cli("validate", job, "--workers", "2", cwd=tmp_path)
    assert "  runs on: embedded LocalCluster" in proc.stdout, proc.stdout


@pytest.mark.slow
def test_retrain_of_a_small_job_runs_in_this_process_and_promotes(tmp_path):
    proc = _dimbsvm("retrain", ROOT / "jobs" / "retrain.yaml", "--registry", tmp_path / "reg", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("running in this process: about ") and "in 3 tasks is below" in lines[0], proc.stdout
    assert lines[1].startswith("estimated ") and "in this process (about " in lines[1], proc.stdout
    assert "dashboard" not in proc.stdout and "promoted (first model in the registry)" in lines[2], proc.stdout
