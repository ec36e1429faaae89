"""Run directories under concurrent writers and kills (issue 30), with real processes.

One process writes a run directory: a second asking for the same ``--out``
(or resuming the same interrupted run) is refused with one line naming the
holder; runs started in the same second get names of their own; a killed
run's lock is free for the next; a run killed at any point resumes to a run
directory whose records, out-of-fold files and metrics agree.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from dimbsvm._locks import LockHeld, exclusive_lock
from dimbsvm.exceptions import DimbsvmError
from dimbsvm.jobs import load_oof, validate_job
from dimbsvm.jobs.run_dir import (claim_run_dir, job_fingerprint, lock_file, open_partial, partial_dir, plan_run_dir,
                                  release_run_dir, write_json)
from process_drivers import drive

ROOT = Path(__file__).resolve().parents[1]
SPEC = {"data": {"source": "yeast5"}, "estimator": {"name": "svc_balanced"},
        "cv": {"n_splits": 3, "n_repeats": 2, "random_state": 0}}
DATA_FP = "d" * 64

PRELUDE = """
import datetime, json, os, random, shutil, signal, sys, time
from dimbsvm._locks import LockHeld
from dimbsvm.exceptions import DimbsvmError
from dimbsvm.jobs import validate_job
from dimbsvm.jobs.run_dir import job_fingerprint, open_partial, plan_run_dir
from process_drivers import race_two
JOB = validate_job(json.loads(os.environ["DIMBSVM_TEST_JOB"]))
"""


def _drive(script, *args, timeout=240, spec=SPEC):
    return drive(PRELUDE, script, *args, env={"DIMBSVM_TEST_JOB": json.dumps(spec)}, timeout=timeout)


# -- two writers at once ------------------------------------------------------

RACE_DRIVER = """
mode, where, hold = sys.argv[1], sys.argv[2], float(sys.argv[3])
now = datetime.datetime(2025, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)


def claim(k):
    if mode == "out":
        plan = plan_run_dir(JOB, "d" * 64, out=where)
    else:
        plan = plan_run_dir(JOB, "d" * 64, runs_root=where, now=now)
    open_partial(plan.partial, job_fingerprint(JOB), "d" * 64, "", JOB)
    return {"run_dir": str(plan.run_dir)}


# the winner holds its claim while the other tries, then leaves without releasing it (as after a kill)
lines = race_two(claim, os.path.join(os.path.dirname(where), "results.jsonl"), hold=hold)
print(json.dumps([dict(line["outcome"], pid=line["pid"]) for line in lines]))
"""


def test_two_processes_on_one_out_one_wins_the_other_is_refused_in_one_line(tmp_path):
    out = tmp_path / "run"
    outcomes = _drive(RACE_DRIVER, "out", out, 1.0)
    winners = [o for o in outcomes if "run_dir" in o]
    losers = [o for o in outcomes if "error" in o]
    assert len(winners) == 1 and len(losers) == 1, outcomes
    assert losers[0]["type"] == "LockHeld"
    assert losers[0]["error"] == (f"run directory {out} is being written by another dimbsvm process "
                                  f"(pid {winners[0]['pid']}); wait for it or choose another --out")
    # the winner died without releasing: its lock file is left, and free
    assert lock_file(out).exists() and partial_dir(out).is_dir()
    plan = plan_run_dir(validate_job(SPEC), DATA_FP, out=out)
    try:
        assert plan.resuming and plan.claimed
    finally:
        release_run_dir(out)
    assert not lock_file(out).exists()


def test_two_runs_started_in_the_same_second_get_two_directories(tmp_path):
    runs = tmp_path / "runs"
    outcomes = _drive(RACE_DRIVER, "default", runs, 0.5)
    assert sorted(Path(o["run_dir"]).name for o in outcomes) == ["job-20250102-030405", "job-20250102-030405-2"]
    # a third, later: neither partial is resumed twice at once; both are free now, so the newest is resumed
    plan = plan_run_dir(validate_job(SPEC), DATA_FP, runs_root=runs)
    try:
        assert plan.resuming and plan.run_dir.name == "job-20250102-030405-2"
    finally:
        release_run_dir(plan.run_dir)


HOLD_DRIVER = """
where, ready = sys.argv[1], sys.argv[2]
plan = plan_run_dir(JOB, "d" * 64, runs_root=where)
open_partial(plan.partial, job_fingerprint(JOB), "d" * 64, "", JOB)
with open(ready, "w") as handle:
    handle.write(str(plan.run_dir))
time.sleep(60)
"""


def test_a_run_being_written_is_not_resumed_by_another_process(tmp_path):
    runs, ready = tmp_path / "runs", tmp_path / "ready"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
               DIMBSVM_TEST_JOB=json.dumps(SPEC))  # the prelude imports process_drivers
    holder = subprocess.Popen([sys.executable, "-c", PRELUDE + textwrap.dedent(HOLD_DRIVER), str(runs), str(ready)],
                              cwd=ROOT, env=env)
    try:
        for _ in range(1200):
            if ready.exists() and ready.read_text():
                break
            assert holder.poll() is None, "the holding process died"
            threading.Event().wait(0.05)
        busy = Path(ready.read_text())
        job = validate_job(SPEC)
        with pytest.raises(DimbsvmError, match="--resume: no interrupted run"):
            plan_run_dir(job, DATA_FP, runs_root=runs, resume=True)
        plan = plan_run_dir(job, DATA_FP, runs_root=runs)  # a new run beside it, not the same partial twice
        try:
            assert not plan.resuming and plan.run_dir != busy
        finally:
            release_run_dir(plan.run_dir)
        with pytest.raises(LockHeld, match=re.escape(f"(pid {holder.pid}); wait for it or choose another --out")):
            plan_run_dir(job, DATA_FP, out=busy)
        with pytest.raises(LockHeld):
            plan_run_dir(job, DATA_FP, out=busy, fresh=True)  # --fresh deletes nothing another process writes
        assert partial_dir(busy).is_dir()
    finally:
        holder.kill()
        holder.wait()
    plan = plan_run_dir(validate_job(SPEC), DATA_FP, out=busy)  # killed: its lock is free
    release_run_dir(busy)
    assert plan.resuming


def test_fresh_removes_only_a_partial_directory_dimbsvm_wrote(tmp_path):
    job = validate_job(SPEC)
    out = tmp_path / "run"
    partial = partial_dir(out)
    (partial / "data").mkdir(parents=True)
    (partial / "data" / "precious.csv").write_text("a,b\n")
    with pytest.raises(DimbsvmError, match=re.escape(f"--fresh: {partial} has no job-fingerprint file, so dimbsvm "
                                                     "did not write it and will not delete it")) as info:
        plan_run_dir(job, DATA_FP, out=out, fresh=True)
    assert "\n" not in str(info.value) and (partial / "data" / "precious.csv").exists()
    assert not lock_file(out).exists()  # a refused plan gives its claim back
    (partial / "data" / "precious.csv").unlink()
    (partial / "data").rmdir()
    partial.rmdir()
    open_partial(partial, job_fingerprint(job), DATA_FP, "", job)
    plan = plan_run_dir(job, DATA_FP, out=out, fresh=True)
    release_run_dir(out)
    assert not plan.resuming and not partial.exists()


def test_a_claim_is_per_process_and_released_with_its_lock_file(tmp_path):
    out = tmp_path / "run"
    assert claim_run_dir(out) is True and claim_run_dir(out) is False  # this process may claim again
    with pytest.raises(LockHeld, match=re.escape(f"(pid {os.getpid()})")):
        exclusive_lock(lock_file(out), f"run directory {out}")  # anyone else is refused
    release_run_dir(out)
    assert not lock_file(out).exists()
    with exclusive_lock(lock_file(out), "x"):
        pass


def test_a_refusal_names_the_holder_that_has_not_yet_written_its_pid(tmp_path):
    # the holder takes the flock, then writes its pid: a refusal in between used to say "pid unknown"
    import fcntl
    path = tmp_path / ".x.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    writer = threading.Timer(0.1, lambda: os.pwrite(fd, b"4242\n", 0))
    writer.start()
    try:
        with pytest.raises(LockHeld, match=re.escape("(pid 4242)")):
            exclusive_lock(path, "x")
    finally:
        writer.join()
        os.close(fd)


def test_write_json_from_two_threads_never_fails_or_tears(tmp_path):
    # the fixed temporary name of before made one writer's rename take the other's file away
    path = tmp_path / "folds" / "x.json"
    errors = []

    def write(k):
        try:
            for n in range(150):
                write_json(path, {"writer": k, "n": n, "pad": "z" * (n * 61 % 3000)})
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(2)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        if path.exists():
            assert json.loads(path.read_text())["writer"] in (0, 1)
    for thread in threads:
        thread.join()
    assert errors == [] and [p.name for p in path.parent.iterdir()] == ["x.json"]


# -- dimbsvm runs killed and racing -------------------------------------------

RUN_DRIVER = """
from dimbsvm.jobs import run_job
from dimbsvm.jobs.data import load_job_data
import dimbsvm.report.run_report  # imported once here, not by every child
base, iterations, budget, seed = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
work, out = os.path.join(base, "work"), os.path.join(base, "work", "run")
outcomes = os.path.join(base, "outcomes.jsonl")
rng = random.Random(seed)


def child(tag):
    try:
        # the data opened in the child: a store's reader (zarr's I/O thread) does not survive a fork
        run_job(JOB, None, out=out, progress=False, data=load_job_data(JOB.data.source))
        outcome = "done"
    except LockHeld as exc:
        outcome = f"refused: {exc}"
    except BaseException as exc:
        outcome = f"error: {exc!r}"
    with open(outcomes, "a") as handle:
        handle.write("\\n" + json.dumps({"tag": tag, "pid": os.getpid(), "outcome": outcome}) + "\\n")
    os._exit(0)


def start(tag):
    pid = os.fork()
    if pid == 0:
        child(tag)
    return pid


os.makedirs(work)
if iterations == 0:  # two at once on one --out
    pids = [start("racer"), start("racer")]
    for pid in pids:
        os.waitpid(pid, 0)
    print(json.dumps({"iterations": 0}))
    sys.exit()
deadline, done = time.monotonic() + budget, 0
for i in range(iterations):
    if time.monotonic() > deadline:
        break
    pid = start(f"kill-{i}")
    end = time.monotonic() + rng.uniform(0.02, 2.5)
    while time.monotonic() < end and os.waitpid(pid, os.WNOHANG) == (0, 0):
        time.sleep(0.01)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass  # finished before the kill
    shutil.copytree(work, os.path.join(base, "snapshots", f"{i:03d}"), symlinks=True)
    if os.path.exists(out):  # a finished run: the next starts over
        shutil.move(out, os.path.join(base, "finished", f"{i:03d}"))
    done += 1
pid = start("last")  # not killed: resumes whatever the last kill left and finishes
os.waitpid(pid, 0)
print(json.dumps({"iterations": done}))
"""


def _check_complete(run_dir, spec=SPEC):
    """A finished run directory whose metrics, fold records and out-of-fold files agree."""
    metrics = json.loads((run_dir / "metrics.json").read_text())
    records = {(r["seed"], r["fold"]): r for r in metrics["folds"]}
    saved = {}
    for path in (run_dir / "folds").glob("*.json"):
        record = json.loads(path.read_text())["record"]
        saved[(record["seed"], record["fold"])] = record
    assert saved == records and len(records) == spec["cv"]["n_splits"] * spec["cv"]["n_repeats"]
    oof = load_oof(run_dir)
    for (seed, fold), record in records.items():
        assert np.sum((oof["seed"] == seed) & (oof["fold"] == fold)) == record["n_test"]
    assert metrics["summary"]["g_mean"]["mean"] == pytest.approx(np.mean([r["g_mean"] for r in records.values()]))
    assert (run_dir / "model" / "manifest.json").exists()
    assert not [p for p in run_dir.rglob("*") if p.name.endswith(".tmp") or ".tmp-" in p.name]  # no writer's litter


def _check_partial(partial):
    """What a killed run left to resume: every fold record whole, with its out-of-fold file (and parts) beside it."""
    records = [json.loads(path.read_text())["record"] for path in (partial / "folds").glob("*.json")]
    if records:
        oof = load_oof(partial)  # a fold's file, and every part it lists: complete, or an error
        for record in records:
            assert np.sum((oof["seed"] == record["seed"]) & (oof["fold"] == record["fold"])) == record["n_test"]
    for path in partial.rglob("*.json"):
        json.loads(path.read_text())


def _outcomes(base):
    lines = [line for line in (base / "outcomes.jsonl").read_text().splitlines() if line.strip()]
    return [json.loads(line) for line in lines if line.startswith("{") and line.endswith("}")]


def test_runs_killed_at_random_points_resume_to_a_consistent_run_directory(tmp_path):
    result = _drive(RUN_DRIVER, tmp_path, 20, 25.0, 7)
    assert result["iterations"] >= 12
    outcomes = _outcomes(tmp_path)
    assert not [o for o in outcomes if o["outcome"] != "done"], outcomes  # never refused by a dead run's lock
    seen = {"finished": 0, "partial": 0, "nothing yet": 0}
    for snapshot in sorted((tmp_path / "snapshots").iterdir()):
        run, partial = snapshot / "run", snapshot / ".run.partial"
        assert not (run.exists() and partial.exists())
        if run.exists():
            _check_complete(run)
            seen["finished"] += 1
        elif partial.exists():
            _check_partial(partial)
            seen["partial"] += 1
        else:
            seen["nothing yet"] += 1
    print(f"{result['iterations']} kills: {seen}")
    finished = sorted((tmp_path / "finished").iterdir()) if (tmp_path / "finished").exists() else []
    for run_dir in [*finished, tmp_path / "work" / "run"]:
        _check_complete(run_dir)
    assert [p.name for p in (tmp_path / "work").iterdir()] == ["run"]  # no lock file, no partial left


def test_store_runs_killed_at_random_points_resume_to_a_consistent_run_directory(tmp_path):
    """The same over a store of 15 chunks: each fold's out-of-fold rows are written a chunk at a time by the tasks
    that score them, its file last; a kill between parts leaves a fold that is not finished, never a torn one."""
    from dimbsvm.datasets import load_keel
    from dimbsvm.store import ingest

    data = load_keel("yeast5")
    store = tmp_path / "yeast5.zarr"
    ingest(data, store, chunk_rows=100)
    spec = dict(SPEC, data={"source": str(store)})
    base = tmp_path / "base"
    base.mkdir()
    result = _drive(RUN_DRIVER, base, 20, 25.0, 11, spec=spec)
    assert result["iterations"] >= 10
    outcomes = _outcomes(base)
    assert not [o for o in outcomes if o["outcome"] != "done"], outcomes
    with_parts = 0
    for snapshot in sorted((base / "snapshots").iterdir()):
        run, partial = snapshot / "run", snapshot / ".run.partial"
        if run.exists():
            _check_complete(run, spec)
        elif partial.exists():
            _check_partial(partial)
            with_parts += any((partial / "oof").glob("*.parts"))
    finished = sorted((base / "finished").iterdir()) if (base / "finished").exists() else []
    for run_dir in [*finished, base / "work" / "run"]:
        _check_complete(run_dir, spec)
        assert any((run_dir / "oof").glob("*.parts"))  # the store's folds were written in parts
    assert with_parts  # some kill left parts behind, and the run resumed past them


def test_two_runs_on_one_out_at_once_one_finishes_the_other_is_refused(tmp_path):
    _drive(RUN_DRIVER, tmp_path, 0, 0, 0)
    out = tmp_path / "work" / "run"
    outcomes = sorted((o["outcome"] for o in _outcomes(tmp_path)), key=lambda o: o != "done")
    assert len(outcomes) == 2 and outcomes[0] == "done", outcomes
    assert re.fullmatch(rf"refused: run directory {re.escape(str(out))} is being written by another dimbsvm "
                        r"process \(pid \d+\); wait for it or choose another --out", outcomes[1]), outcomes
    _check_complete(out)
    assert [p.name for p in out.parent.iterdir()] == ["run"]
