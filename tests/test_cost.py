"""The cost model quoted before a job runs: its fit, its arithmetic and the lines validate and run print."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from dimbsvm.cli import main
from dimbsvm.jobs import validate_job
from dimbsvm.jobs.cost import HOUR, MIN_SPREAD, CostModel, TimeRange, fit_cost_model, load_cost_model
from dimbsvm.jobs.data import JobData
from dimbsvm.jobs.placement import place_job
from dimbsvm.jobs.plan_price import PlanPrice, price_job


def _data(y, n_features):
    """Rows of no memory (a broadcast zero): a price reads the data's shape and labels, never its values."""
    return JobData(np.broadcast_to(np.zeros(1), (len(y), n_features)), np.asarray(y), {"name": "priced"})


def test_the_fit_recovers_the_constants_of_runs_a_known_model_made():
    # the truth: seconds = 0.7 + 0.4 x priced seconds, exactly
    rng = np.random.default_rng(0)
    runs = [(work, 0.7 + 0.4 * work) for work in rng.uniform(0.01, 500.0, 12)]
    model = fit_cost_model(runs)
    assert model.overhead_seconds == pytest.approx(0.7, rel=1e-6)
    assert model.scale == pytest.approx(0.4, rel=1e-6)
    assert model.spread == MIN_SPREAD  # no miss: the least spread


def test_with_noise_every_fitted_run_is_inside_its_range_and_the_spread_is_the_largest_miss():
    rng = np.random.default_rng(1)
    runs = [(x, (1.0 + 0.5 * x) * rng.uniform(0.3, 1.6)) for x in rng.uniform(0.1, 100.0, 20)]
    model = fit_cost_model(runs)
    misses = []
    for work, seconds in runs:
        price = PlanPrice(10, work, work / 10)
        quoted = model.estimate(price)
        assert quoted.low <= seconds * (1 + 1e-9) and seconds <= quoted.high * (1 + 1e-9)
        point = model.seconds(price)
        misses.append(max(point / seconds, seconds / point))
    assert model.spread == pytest.approx(max(misses)) and model.spread > MIN_SPREAD
    assert model.spread < 1.6 / 0.3  # no miss beyond the noise's own range


def test_cores_divide_the_work_but_not_the_fixed_cost_nor_below_the_longest_chain():
    model = CostModel(scale=0.5, overhead_seconds=2.0, spread=2.0)
    price = PlanPrice(n_tasks=30, work=16.0, span=4.0)  # 2 s fixed + 8 s of work on one core
    assert model.estimate(price, cores=1) == TimeRange(5.0, 20.0)
    assert model.estimate(price, cores=2) == TimeRange(3.0, 12.0)  # 2 + 8/2
    assert model.estimate(price, cores=16) == model.estimate(price, cores=4)  # its longest chain: 4 x 0.5 s


def test_a_kernel_ensembles_scoring_of_millions_of_rows_is_quoted_past_an_hour():
    # the new user's case: ten RBF members (bags of 20,000) over 2x10^6 rows, 3-fold CV, was quoted at 1 to
    # 6 minutes (fits only) and ran for hours; each member scores every row against its support vectors
    # (the defaults; the default members are LinearSVC above LARGE_N rows now, so SVC is named)
    y = np.r_[np.zeros(1_980_000), np.ones(20_000)]
    spec = {"data": {"source": "yeast5"},
            "estimator": {"name": "ensemble_othr", "params": {"n_estimators": 10, "estimator": "svc"}},
            "cv": {"n_splits": 3, "n_repeats": 1}}
    kernel = place_job(validate_job(spec), _data(y, 32))
    assert kernel.time.over_an_hour and "linear members (estimator: linear_svc" in kernel.cost_line()
    for params in ({"n_estimators": 10, "estimator": "linear_svc"}, {"n_estimators": 10}):  # the default: linear
        spec["estimator"]["params"] = params
        assert not place_job(validate_job(spec), _data(y, 32)).time.over_an_hour


def test_the_shipped_cost_model_loads_and_quotes_a_range():
    model = load_cost_model()
    assert model.spread >= MIN_SPREAD and model.overhead_seconds >= 0 and model.scale > 0
    job = validate_job({"data": {"source": "yeast5"}, "estimator": {"name": "svc_balanced"}})
    data = _data(np.r_[np.zeros(1_440), np.ones(44)], 8)
    placement = place_job(job, data)
    assert placement.in_process and placement.time.low < placement.time.high
    assert placement.seconds == pytest.approx(model.seconds(price_job(job, data)))
    tasks = price_job(job, data).n_tasks
    assert placement.cost_line().startswith("estimated ") and f"in {tasks} tasks)" in placement.cost_line()


@pytest.mark.parametrize("params, over_an_hour", [
    # the case: EnsembleOTHRClassifier's old defaults (RBF members on bags as large as the training set),
    # now set explicitly
    ({"estimator": "svc", "max_samples": None}, True),
    # the defaults that scale: bags of LARGE_N rows above LARGE_N training rows (dimbsvm.svm.scaled_defaults)
    ({}, False),
])
def test_validate_quotes_the_cost_and_warns_of_a_job_past_an_hour(tmp_path, capsys, params, over_an_hour):
    from dimbsvm.datasets import make_imbalanced
    from dimbsvm.jobs.data import load_job_data

    X, y = make_imbalanced(200_000, n_features=8, minority_fraction=0.05, random_state=0)
    np.savez(tmp_path / "rows.npz", X=np.asarray(X), y=np.asarray(y))
    spec = {"data": {"source": str(tmp_path / "rows.npz")}, "estimator": {"name": "ensemble_othr", "params": params},
            "cv": {"n_splits": 3, "n_repeats": 1}}
    job = tmp_path / "big.yaml"
    job.write_text(json.dumps(spec))  # YAML reads JSON
    assert main(["validate", str(job), "--out", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    cost = [line.strip() for line in out.splitlines() if line.strip().startswith("cost: ")]
    assert len(cost) == 1 and ("this job may run for over an hour" in cost[0]) == over_an_hour, out
    in_process = "in this process" in cost[0]  # (the default's linear members: below the cluster threshold)
    price = price_job(validate_job(spec), load_job_data(str(tmp_path / "rows.npz")))
    expected = load_cost_model().estimate(price, cores=1 if in_process else os.cpu_count())
    assert expected.over_an_hour == over_an_hour
    where = "in this process" if in_process else f"on {os.cpu_count()} cores"
    assert f"estimated {expected.describe()} {where}" in cost[0]


def test_time_ranges_read_as_people_say_them():
    assert TimeRange(0.3, 4.2).describe() == "about 1 s to 4 s"
    assert TimeRange(90, 3 * HOUR).describe() == "about 2 min to 3.0 h"
    assert not TimeRange(10, HOUR).over_an_hour and TimeRange(10, HOUR + 1).over_an_hour


def _progress_after(total, finish_times, at):
    """The time left a Progress says after the tasks finishing at ``finish_times`` (a scripted clock)."""
    import io

    from dimbsvm.parallel.progress import Progress

    now = [0.0]
    bar = Progress(total, "tasks", stream=io.StringIO(), clock=lambda: now[0])
    for t in finish_times:
        now[0] = t
        bar.advance()
    now[0] = at
    return bar.seconds_left()


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_the_time_left_is_within_2x_once_a_tenth_of_the_tasks_finished_after_a_long_start(workers):
    # the case: 10 s before the first task finishes (a cluster starting), then 60 tasks of 0.4 s each
    # on `workers` workers finishing together; the truth is the last finish time less now
    start, duration, total = 10.0, 0.4, 60
    finish = [start + duration * (k // workers) for k in range(total)]
    for done in range(max(3, total // 10), total - 1):
        now = finish[done - 1]
        left = _progress_after(total, finish[:done], now)
        truth = finish[-1] - now
        if truth < duration:  # the rest finish with the last burst: nothing left to estimate
            continue
        assert truth / 2 <= left <= truth * 2, (done, left, truth)
    # the rate since the start, as before, is off many times over at a tenth of the tasks
    now = finish[total // 10 - 1]
    assert now / (total // 10) * (total - total // 10) > 4 * (finish[-1] - now)


def test_the_time_left_counts_work_not_tasks_when_the_long_tasks_come_last():
    # 40 short tasks (0.1 s, cost 1) then 8 long ones (1 s, cost 10): counting tasks says ~0.8 s left where 8 s are
    import io

    from dimbsvm.parallel.progress import Progress

    durations = [(0.1, 1.0)] * 40 + [(1.0, 10.0)] * 8
    now = [0.0]
    by_work = Progress(48, "tasks", stream=io.StringIO(), clock=lambda: now[0], total_work=120.0)
    by_count = Progress(48, "tasks", stream=io.StringIO(), clock=lambda: now[0])
    finish = np.cumsum([d for d, _ in durations])
    worst_by_work = worst_by_count = 1.0
    for k, (t, (_, cost)) in enumerate(zip(finish, durations)):
        now[0] = t
        by_work.advance(1, cost)
        by_count.advance(1)
        if 5 <= k + 1 < 48:
            truth = finish[-1] - t
            for bar, name in ((by_work, "work"), (by_count, "count")):
                ratio = bar.seconds_left() / truth
                factor = max(ratio, 1 / ratio)
                if name == "work":
                    worst_by_work = max(worst_by_work, factor)
                else:
                    worst_by_count = max(worst_by_count, factor)
    assert worst_by_work < 1.01  # costs proportional to the durations: the estimate is the truth
    assert worst_by_count > 5


def test_the_line_says_no_time_left_until_a_rate_is_measured_and_counts_the_longest_task_left():
    import io

    from dimbsvm.parallel.progress import Progress

    now = [0.0]
    bar = Progress(10, "tasks", stream=io.StringIO(), clock=lambda: now[0], total_work=100.0, parallelism=2)
    now[0] = 30.0  # a cluster's start, then a first task of little work: no rate of the tasks yet
    bar.advance(1, 1.0, longest_left=40.0)
    assert "left" not in bar.line()
    for t in (31.0, 32.0):
        now[0] = t
        bar.advance(1, 2.0, longest_left=40.0)
    assert bar.seconds_left() == (32.0 - 30.0) / 4.0 * 95.0  # work left at the rate since the first task
    assert "~0:48 left" in bar.line()
    for t in (33.0, 34.0, 35.0):
        now[0] = t
        bar.advance(1, 4.0, longest_left=50.0)
    # 83 units left, but one task of 50 runs alone: 50 units at one of the 2 workers' share of the rate
    assert bar.seconds_left() == (35.0 - 30.0) / 16.0 * 50.0 * 2


def test_a_log_gets_a_line_every_30_s_and_the_last_a_terminal_one_at_once():
    import io

    from dimbsvm.parallel.progress import Progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    now = [0.0]
    log, terminal = io.StringIO(), Terminal()
    bars = [Progress(5, "tasks", stream=stream, clock=lambda: now[0]) for stream in (log, terminal)]
    for t in (1.0, 2.0, 31.0, 32.0, 33.0):
        now[0] = t
        for bar in bars:
            bar.advance()
        if t == 2.0:
            assert log.getvalue() == ""  # a job that fails here leaves its error as the log's only line
            assert terminal.getvalue().startswith("\r[")
    lines = log.getvalue().splitlines()
    assert [line.split("]")[1].split()[0] for line in lines] == ["3/5", "5/5"]  # at 31 s (30 s in), and the end
