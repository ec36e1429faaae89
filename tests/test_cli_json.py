"""``--json`` on ``run``, ``validate``, ``retrain`` and ``models`` (issue 53, item 4): one document an orchestrator reads.

Real command lines in a subprocess (stdout as a program sees it); every
document is checked against its published schema (``dimbsvm.cli_json.SCHEMAS``)
and against what the run wrote (``metrics.json``, the registry).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema

from dimbsvm.cli_json import SCHEMAS
from dimbsvm.jobs.registry import ModelRegistry

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "jobs" / "quickstart.yaml"


def _json_cli(verb, *args, timeout=300):
    """``(exit status, the one document on stdout, stderr)`` of ``dimbsvm VERB ... --json``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    done = subprocess.run([sys.executable, "-m", "dimbsvm.cli", verb, *map(str, args), "--json"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout  # exactly one document, nothing else
    document = json.loads(lines[0])
    jsonschema.validate(document, SCHEMAS[verb])
    assert document["exit_code"] == done.returncode
    return done.returncode, document, done.stderr


def test_every_schema_is_a_valid_json_schema():
    for schema in SCHEMAS.values():
        jsonschema.Draft202012Validator.check_schema(schema)


def test_validate_and_run_documents_say_what_the_run_did(tmp_path):
    status, checked, _ = _json_cli("validate", JOB, "--out", tmp_path / "run")
    assert status == 0 and checked["ok"] and checked["rows"] == 1484 and checked["features"] == 8
    assert checked["class_counts"] == {"negative": 1440, "positive": 44} and checked["folds"] == 10
    assert checked["run_directory"] == str(tmp_path / "run") and checked["resumes"] is False
    assert 0 < checked["estimate"]["seconds_low"] <= checked["estimate"]["seconds_high"]

    status, ran, stderr = _json_cli("run", JOB, "--out", tmp_path / "run")
    assert status == 0 and ran["ok"] and ran["run_directory"] == str(tmp_path / "run")
    assert "run directory:" in stderr  # the usual lines, on stderr
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert ran["summary"] == written["summary"]


def test_a_failure_is_a_document_too_with_the_error_line_and_exit_code(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "mine.txt").write_text("not dimbsvm's")
    status, document, stderr = _json_cli("run", JOB, "--out", tmp_path / "run")
    assert status == 2 and document["ok"] is False
    assert f"dimbsvm: error: {document['error']}" == stderr.strip().splitlines()[-1]
    assert "summary" not in document


def test_retrain_documents_name_the_outcome_as_the_registry_records_it(tmp_path):
    job = ROOT / "jobs" / "retrain.yaml"
    registry = tmp_path / "reg"
    status, first, _ = _json_cli("retrain", job, "--registry", registry, "--workers", "1", "--exit-code")
    assert status == 0 and first["ok"] and first["action"] == "promoted" and first["promoted"] is True
    assert first["version"] == ModelRegistry(registry).champion()
    assert set(first["challenger_metrics"]) >= {"g_mean"}
    status, again, _ = _json_cli("retrain", job, "--registry", registry, "--workers", "1", "--exit-code")
    assert status == 5 and again["ok"] and again["action"] == "unchanged"  # an outcome, not a failure
    assert again["champion"] == first["version"]
    # the registry as an orchestrator reads it: its versions as their files record them, and the champion
    status, listed, _ = _json_cli("models", registry)
    versions = ModelRegistry(registry).versions()
    assert status == 0 and listed["ok"] and listed["champion"] == first["version"]
    assert [v["id"] for v in listed["versions"]] == [v["id"] for v in versions] == [first["version"]]
    assert listed["versions"][0]["holdout_metrics"] == versions[0]["holdout_metrics"]
    assert listed["versions"][0]["champion"] is True
    for not_one in (tmp_path / "none-yet", JOB):  # nothing there, a file: not a registry, said in the document
        status, failed, _ = _json_cli("models", not_one)
        assert status == 2 and not failed["ok"] and str(not_one) in failed["error"]
