"""Champion/challenger retraining against a real registry directory and a real cluster."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import SVC

from dimbsvm.datasets import load_keel
from dimbsvm.exceptions import StoreError
from dimbsvm.jobs import validate_job
from dimbsvm.jobs.registry import ModelRegistry
from dimbsvm.jobs.retrain import gate_decision, retrain

ROOT = Path(__file__).resolve().parents[1]


def _job(estimator, gates=None):
    spec = {"name": "rt", "data": {"source": "yeast5"}, "estimator": {"name": estimator},
            "retrain": {"holdout": {"fraction": 0.3, "random_state": 1},
                        "gates": gates or {"g_mean": {"tolerance": 0.0}}}}
    return validate_job(spec)


def _holdout_g_mean(class_weight):
    """Independent computation of the holdout G-mean a retraining run must report."""
    data = load_keel("yeast5")
    train, test = train_test_split(np.arange(len(data.y)), test_size=0.3, random_state=1, stratify=data.y)
    scaler = MinMaxScaler().fit(data.X[train])
    pred = SVC(class_weight=class_weight).fit(scaler.transform(data.X[train]), data.y[train]).predict(
        scaler.transform(data.X[test]))
    y = data.y[test]
    return np.sqrt(np.mean(pred[y == 1] == 1) * np.mean(pred[y == 0] == 0))


def test_first_run_promotes_then_better_challenger_wins(client, tmp_path):
    reg = tmp_path / "reg"
    first = retrain(_job("svc"), client, reg, job_text="svc")
    assert first.promoted and first.reason == "first model in the registry"
    assert first.challenger_metrics["g_mean"] == pytest.approx(_holdout_g_mean(None))

    second = retrain(_job("svc_balanced"), client, reg, job_text="balanced")
    assert second.challenger_metrics["g_mean"] == pytest.approx(_holdout_g_mean("balanced"))
    assert second.champion_metrics["g_mean"] == pytest.approx(_holdout_g_mean(None))
    assert second.challenger_metrics["g_mean"] > second.champion_metrics["g_mean"]
    assert second.promoted
    registry = ModelRegistry(reg)
    assert registry.champion() == second.version
    assert [e["action"] for e in registry.history()] == ["promote", "promote"]
    assert registry.history()[1]["previous"] == first.version


def test_worse_challenger_is_kept_out(client, tmp_path):
    reg = tmp_path / "reg"
    champion = retrain(_job("svc_balanced"), client, reg, job_text="balanced")
    worse = retrain(_job("svc", gates={"g_mean": {}, "f_measure": {"tolerance": 1.0}}), client, reg,
                    job_text="svc")
    assert not worse.promoted and worse.reason.startswith("gate failed: g_mean")
    registry = ModelRegistry(reg)
    assert registry.champion() == champion.version
    assert [v["champion"] for v in registry.versions()] == [True, False]  # the challenger is kept, unpromoted
    assert registry.history()[-1]["action"] == "keep_champion"


def test_gate_tolerance():
    assert gate_decision({"g_mean": 0.79}, {"g_mean": 0.80}, {"g_mean": {"tolerance": 0.02}})[0]
    ok, reason = gate_decision({"g_mean": 0.9, "f_measure": 0.5}, {"g_mean": 0.8, "f_measure": 0.6},
                               {"g_mean": {}, "f_measure": {"tolerance": 0.05}})
    assert not ok and "f_measure 0.5000 < 0.6000 - 0.05" in reason


def test_tampered_champion_is_refused(client, tmp_path):
    reg = tmp_path / "reg"
    first = retrain(_job("svc_balanced"), client, reg, job_text="x")
    model_file = reg / "versions" / first.version / "model" / "model.skops"
    blob = bytearray(model_file.read_bytes())
    blob[100] ^= 0x01
    model_file.write_bytes(bytes(blob))
    with pytest.raises(StoreError, match=f"version {first.version} is not loadable: .*SHA-256"):
        retrain(_job("svc_balanced"), client, reg, job_text="x")
    assert len(ModelRegistry(reg).versions()) == 1  # nothing was written


def test_pointer_swap_is_compare_and_swap(client, tmp_path):
    reg = tmp_path / "reg"
    registry = ModelRegistry(reg)
    retrain(_job("svc"), client, reg, job_text="x")
    a = retrain(_job("svc"), client, reg, job_text="x")  # promoted over the first
    # two challengers both compared against the same champion: only one may win
    model, _ = registry.load(a.version)
    v1 = registry.add_version(model, job_text="x", info={}, model_meta={"n_features": 8})
    v2 = registry.add_version(model, job_text="x", info={}, model_meta={"n_features": 8})
    assert registry.promote(v1, reason="test", expected_champion=a.version)
    assert not registry.promote(v2, reason="test", expected_champion=a.version)
    assert registry.champion() == v1
    assert registry.history()[-1]["action"] == "not_promoted"


def test_process_killed_between_version_and_pointer(client, tmp_path):
    reg = tmp_path / "reg"
    first = retrain(_job("svc_balanced"), client, reg, job_text="x")
    script = textwrap.dedent(f"""
        import os, signal
        from dimbsvm.jobs.registry import ModelRegistry
        registry = ModelRegistry({str(reg)!r})
        model, meta = registry.load({first.version!r})
        registry.add_version(model, job_text="x", info={{}}, model_meta=meta)
        os.kill(os.getpid(), signal.SIGKILL)  # dies before moving the pointer
        registry.promote("never", reason="never", expected_champion=None)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == -signal.SIGKILL
    registry = ModelRegistry(reg)
    assert registry.champion() == first.version
    versions = registry.versions()
    assert len(versions) == 2 and versions[1]["champion"] is False
    registry.load(registry.champion())  # the champion is still served


def test_manual_promote_and_rollback(client, tmp_path):
    reg = tmp_path / "reg"
    a = retrain(_job("svc_balanced"), client, reg, job_text="x")
    b = retrain(_job("svc", gates={"g_mean": {"tolerance": 1.0}}), client, reg, job_text="x")
    registry = ModelRegistry(reg)
    assert registry.champion() == b.version
    assert registry.rollback(reason="b misbehaves in production") == a.version
    assert registry.champion() == a.version
    assert registry.history()[-1] == {**registry.history()[-1], "action": "rollback", "previous": b.version}
    with pytest.raises(StoreError, match="reason is required"):
        registry.set_champion(b.version, reason="")
    registry.set_champion(b.version, reason="fixed upstream")
    assert registry.champion() == b.version


def _cli(*args, **kwargs):
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "dimbsvm.cli", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, **kwargs)


def test_cron_errors_are_named(cli, tmp_path):
    proc = cli("schedule", ROOT / "jobs" / "retrain.yaml", "--cron", "61 * * * *", "--registry", tmp_path)
    assert proc.returncode == 2 and "invalid cron expression '61 * * * *'" in proc.stderr


@pytest.mark.slow
def test_schedule_runs_twice_then_stops_on_sigterm(tmp_path):
    reg = tmp_path / "reg"
    proc = _cli("schedule", ROOT / "jobs" / "retrain.yaml", "--cron", "* * * * * */2", "--registry", reg,
                "--max-runs", "2", "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    assert "schedule stopped after 2 run(s)" in proc.stdout
    actions = [e["action"] for e in ModelRegistry(reg).history()]
    # first run; then the same data and parameters: recorded, no second version of the same model
    assert actions == ["promote", "unchanged"] and len(ModelRegistry(reg).versions()) == 1

    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    daemon = subprocess.Popen([sys.executable, "-m", "dimbsvm.cli", "schedule", str(ROOT / "jobs" / "retrain.yaml"),
                               "--cron", "* * * * * */2", "--registry", str(reg), "--workers", "1"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(ModelRegistry(reg).history()) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    daemon.send_signal(signal.SIGTERM)
    stdout, stderr = daemon.communicate(timeout=120)
    assert daemon.returncode == 0, stderr
    assert "schedule stopped after" in stdout
    history = ModelRegistry(reg).history()
    assert len(history) >= 3 and history[-1]["action"] == "unchanged"  # the daemon ran and retrained nothing
    promoted_from = [e.get("previous") for e in history if e["action"] == "promote"]
    assert len(promoted_from) == len(set(promoted_from))  # never two promotions over the same champion


@pytest.mark.slow
def test_two_retrainers_on_one_registry_never_both_promote_over_one_champion(tmp_path):
    reg = tmp_path / "reg"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    args = [sys.executable, "-m", "dimbsvm.cli", "retrain", str(ROOT / "jobs" / "retrain.yaml"),
            "--registry", str(reg), "--workers", "1"]
    procs = [subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for proc in procs:
        proc.communicate(timeout=300)
        assert proc.returncode == 0
    history = ModelRegistry(reg).history()
    assert len(history) == 2
    promoted_from = [e.get("previous") for e in history if e["action"] == "promote"]
    assert len(promoted_from) == len(set(promoted_from))
    assert ModelRegistry(reg).champion() in {e["version"] for e in history if e["action"] == "promote"}
    json.dumps(history)  # history stays plain JSON


def test_retrain_identical_to_the_champion_adds_no_version_unless_forced(client, tmp_path):
    reg = tmp_path / "reg"
    registry = ModelRegistry(reg)
    first = retrain(_job("svc_balanced"), client, reg, job_text="x")
    again = retrain(_job("svc_balanced"), client, reg, job_text="x")  # same data, same parameters
    assert again.version == first.version and not again.promoted and "same data" in again.reason
    assert [v["id"] for v in registry.versions()] == [first.version]
    assert registry.history()[-1]["action"] == "unchanged" and registry.champion() == first.version
    forced = retrain(_job("svc_balanced"), client, reg, job_text="x", force=True)
    assert forced.version != first.version and len(registry.versions()) == 2
    other = retrain(_job("svc"), client, reg, job_text="x")  # other parameters: a challenger as always
    assert other.version not in (first.version, forced.version) and len(registry.versions()) == 3


def test_a_challenger_the_gates_kept_out_is_not_fitted_again_on_the_same_data(client, tmp_path):
    """Retraining on data and a job already tried and kept out against this champion stores no duplicate version
    (issue 51, item 3); a new champion, or --force, fits it again."""
    reg = tmp_path / "reg"
    registry = ModelRegistry(reg)
    champion = retrain(_job("svc_balanced"), client, reg, job_text="x")
    worse = retrain(_job("svc"), client, reg, job_text="x")  # unweighted on imbalanced data: below the gates
    assert champion.promoted and not worse.promoted, worse.reason
    again = retrain(_job("svc"), client, reg, job_text="x")
    assert again.unchanged and again.version == worse.version and again.champion == champion.version
    assert f"{worse.version} was fitted on the same data with the same parameters" in again.reason
    assert again.summary().startswith(f"champion {champion.version} unchanged, no challenger fitted")
    assert [v["id"] for v in registry.versions()] == [champion.version, worse.version]
    assert registry.history()[-1]["action"] == "unchanged"
    forced = retrain(_job("svc"), client, reg, job_text="x", force=True)
    assert forced.version not in (champion.version, worse.version) and len(registry.versions()) == 3
