"""`dimbsvm retrain` and `dimbsvm schedule` as a user and a cron/CI job see them (issue 35, item 5).

Real runs of the command line on the bundled yeast5 data: the exit statuses of
the three decisions, the one line that names champion and challenger as what
they are, and the schedule's log (levels, visible without -v).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from dimbsvm.jobs.registry import ModelRegistry

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "jobs" / "retrain.yaml"


def _cli(*args, timeout=300):
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    env.pop("DASK_LOGGING__DISTRIBUTED", None)
    return subprocess.run([sys.executable, "-m", "dimbsvm.cli", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _worse_job(tmp_path):
    """jobs/retrain.yaml with an unbalanced SVC: a worse G-mean on yeast5 than the balanced champion's."""
    spec = yaml.safe_load(JOB.read_text())
    spec["estimator"] = {"name": "svc", "params": {"C": 1.0}}
    path = tmp_path / "worse.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_retrain_exit_codes_and_messages_name_champion_and_challenger(tmp_path):
    reg = tmp_path / "reg"
    first = _cli("retrain", JOB, "--registry", reg, "--workers", "1", "--no-progress", "--exit-code")
    assert first.returncode == 0, first.stderr
    assert re.search(r"^challenger v0001-\S+ promoted \(first model in the registry\)$", first.stdout, re.M), first.stdout
    v1 = ModelRegistry(reg).champion()

    same = _cli("retrain", JOB, "--registry", reg, "--workers", "1", "--no-progress", "--exit-code")
    assert same.returncode == 5, same.stderr
    assert f"champion {v1} unchanged, no challenger fitted" in same.stdout
    assert "challenger" not in same.stdout.replace("no challenger fitted", "")  # the champion is not called one
    assert re.search(rf"^  g_mean +champion {v1}: \d\.\d{{4}}$", same.stdout, re.M), same.stdout

    worse = _cli("retrain", _worse_job(tmp_path), "--registry", reg, "--workers", "1", "--no-progress",
                 "--exit-code")
    assert worse.returncode == 4, worse.stderr
    registry = ModelRegistry(reg)
    challenger = registry.versions()[-1]["id"]
    assert registry.champion() == v1 and challenger != v1
    line = next(line for line in worse.stdout.splitlines() if line.startswith("challenger "))
    assert line.startswith(f"challenger {challenger} not promoted, champion {v1} kept (gate failed: ")
    assert "g_mean 0.5222 < 0.9775" in line
    assert re.search(rf"^  g_mean +challenger {challenger}: 0\.5222  champion {v1}: 0\.9775$", worse.stdout, re.M)
    assert registry.history()[-1]["action"] == "keep_champion"

    # without --exit-code every routine decision exits 0 (cron, systemd, Kubernetes count others as failures)
    again = _cli("retrain", _worse_job(tmp_path), "--registry", reg, "--workers", "1", "--no-progress", "--force")
    assert again.returncode == 0, again.stderr
    assert f"champion {v1} kept (gate failed" in again.stdout
    assert " WARNING " not in again.stderr  # a kept champion is routine


def test_schedule_logs_next_run_and_outcomes_at_info_without_verbose(tmp_path):
    reg = tmp_path / "reg"
    proc = _cli("schedule", JOB, "--cron", "* * * * * */2", "--registry", reg, "--max-runs", "2",
                "--workers", "1", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert any(re.search(r" dimbsvm\.jobs\.schedule INFO next run at \d{4}-\d\d-\d\dT", line) for line in lines), \
        proc.stderr
    outcomes = [line for line in lines if re.search(r" INFO run \d at ", line)]
    assert len(outcomes) == 2, proc.stderr
    v1 = ModelRegistry(reg).champion()
    assert outcomes[0].endswith(f": challenger {v1} promoted (first model in the registry)"), outcomes[0]
    assert f": champion {v1} unchanged, no challenger fitted (" in outcomes[1], outcomes[1]
    # warnings only for what needs a look: runs due 2 s apart (with the order of a sixth field), and due runs
    # skipped while a run (longer than 2 s) was going
    warnings = [line for line in lines if " WARNING " in line]
    assert "runs due 2 s apart" in warnings[0] and "SECOND and comes last" in warnings[0], proc.stderr
    assert all(re.search(r"WARNING skipped \d+ due run\(s\) while run \d was going$", w) for w in warnings[1:]), \
        proc.stderr
    assert "schedule stopped after 2 run(s)" in proc.stdout


def test_a_small_schedule_runs_in_this_process_as_retrain_does(tmp_path):
    """Placement for every verb (issue 51): the schedule's retrainings of a small job start no cluster."""
    reg = tmp_path / "reg"
    proc = _cli("schedule", JOB, "--cron", "* * * * * */2", "--registry", reg, "--max-runs", "1", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("running in this process") and "dashboard:" not in proc.stdout, proc.stdout
    assert ModelRegistry(reg).champion() is not None


def test_cron_help_names_both_field_orders_as_croniter_reads_them():
    import datetime as dt

    from dimbsvm.cli_parser import CRON_FIELDS as _CRON_FIELDS
    from dimbsvm.jobs.schedule import CRON_FIELDS, parse_cron

    assert _CRON_FIELDS == CRON_FIELDS
    proc = _cli("schedule", "-h", timeout=60)
    assert proc.returncode == 0 and "SECOND, last" in " ".join(proc.stdout.split())
    # what the help says is what croniter does
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    every_20s = parse_cron("* * * * * */20", start)
    assert [every_20s.get_next(dt.datetime).second for _ in range(3)] == [20, 40, 0]
    quartz_like = parse_cron("*/20 * * * * *", start)
    assert [(t.minute, t.second) for t in (quartz_like.get_next(dt.datetime) for _ in range(2))] == [(0, 1), (0, 2)]
    daily = parse_cron("0 3 * * *", start)
    assert daily.get_next(dt.datetime) == start.replace(hour=3)
