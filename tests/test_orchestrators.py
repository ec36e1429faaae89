"""The orchestrator examples of deploy/orchestrators/ (issue 53, item 4), run for real.

The Prefect flow runs in Prefect's local ephemeral mode (a temporary server
Prefect starts itself); the Airflow DAG with ``airflow dags test`` against a
SQLite metadata database in the test's directory. Both against the bundled
retrain job: promoted (and, for Airflow, the downstream task runs), then
unchanged (Airflow: the task skipped, the downstream task not run), then a
failure that carries dimbsvm's one-line error. Prefect and Airflow pin
web-framework versions that differ from each other and from MLflow's in the
dev environment, so each runs in an environment of its own
(``.ci/orchestrators``); in the dev environment those tests skip and the DAG is
checked as text (its commands parse with dimbsvm's own parser, the statuses it
skips are those ``retrain --exit-code`` gives the routine outcomes).
"""

import ast
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "deploy" / "orchestrators"


def _parser():
    from dimbsvm.cli_parser import build_parser

    return build_parser({verb: None for verb in ("run", "validate", "predict", "retrain", "schedule", "models",
                                                  "promote", "rollback", "ingest", "datasets", "bench",
                                                  "estimators", "features", "status", "logs", "cancel")})


def _routine_statuses():
    from dimbsvm.cli_retrain import RETRAIN_EXIT

    return RETRAIN_EXIT


def test_the_airflow_dag_skips_the_routine_outcomes_and_its_commands_parse():
    tree = ast.parse((EXAMPLES / "airflow_retrain.py").read_text())
    constants = {node.targets[0].id: _constant(node.value) for node in tree.body
                 if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)}
    statuses = _routine_statuses()
    assert sorted(constants["NOT_PROMOTED"]) == sorted(code for action, code in statuses.items()
                                                       if action != "promoted")
    operators = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
                 and getattr(node.func, "id", None) == "BashOperator"]
    commands = {}
    for call in operators:
        keywords = {k.arg: k.value for k in call.keywords}
        text = "".join(part.value if isinstance(part, ast.Constant) else str(constants[part.value.id])
                       for part in (keywords["bash_command"].values if isinstance(keywords["bash_command"],
                                                                                  ast.JoinedStr)
                                    else [keywords["bash_command"]]))
        commands[ast.literal_eval(keywords["task_id"])] = (text.replace("{{ ds_nodash }}", "20260101"), keywords)
    retrain, keywords = commands["retrain"]
    assert ast.unparse(keywords["skip_on_exit_code"]) == "NOT_PROMOTED"
    args = _parser().parse_args(shlex.split(retrain)[1:])
    assert args.verb == "retrain" and args.exit_code and args.json and args.registry == constants["REGISTRY"]
    predict = _parser().parse_args(shlex.split(commands["publish"][0])[1:])
    assert predict.verb == "predict" and predict.model == f"{constants['REGISTRY']}@champion"


def _constant(value):
    """A literal, or ``os.environ.get(NAME, DEFAULT)``'s default."""
    if isinstance(value, ast.Call) and ast.unparse(value.func) == "os.environ.get":
        return ast.literal_eval(value.args[1])
    try:
        return ast.literal_eval(value)
    except ValueError:
        return None


def _airflow(tmp_path, logical_date, **settings):
    env = dict(os.environ, AIRFLOW_HOME=str(tmp_path / "airflow"), AIRFLOW__CORE__DAGS_FOLDER=str(EXAMPLES),
               AIRFLOW__CORE__LOAD_EXAMPLES="False", PYTHONWARNINGS="ignore", **settings)
    for command in (["db", "migrate"], ["dags", "test", "dimbsvm_retrain", logical_date]):
        done = subprocess.run([sys.executable, "-m", "airflow", *command], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=600)
        if done.returncode != 0 or command[0] == "dags":
            return done
    return done


def test_the_airflow_dag_promotes_skips_the_routine_outcomes_and_fails_on_errors(tmp_path):
    pytest.importorskip("airflow", reason="Airflow runs in an environment of its own: bash .ci/orchestrators")
    if shutil.which("dimbsvm") is None:
        pytest.skip("the DAG calls the dimbsvm command, which is not on PATH here")
    import numpy as np
    import pandas as pd

    from dimbsvm.datasets import load

    data = load("yeast5")
    pd.DataFrame(np.asarray(data.X), columns=data.meta()["feature_names"]).to_parquet(tmp_path / "rows.parquet")
    settings = dict(DIMBSVM_JOB=str(ROOT / "jobs" / "retrain.yaml"), DIMBSVM_REGISTRY=str(tmp_path / "reg"),
                    DIMBSVM_ROWS=str(tmp_path / "rows.parquet"), DIMBSVM_SCORES=str(tmp_path / "scores"))
    first = _airflow(tmp_path, "2026-01-01", **settings)
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    scores = pd.read_parquet(tmp_path / "scores-20260101.parquet")  # publish ran after the promotion
    assert len(scores) == len(data.y) and set(scores["prediction"]) <= {"positive", "negative"}
    second = _airflow(tmp_path, "2026-01-02", **settings)  # the same data again: unchanged, exit status 5
    log = second.stdout + second.stderr
    assert second.returncode == 0, log[-3000:]
    assert "returned exit code 5. Skipping." in log and not (tmp_path / "scores-20260102.parquet").exists()
    failed = _airflow(tmp_path, "2026-01-03", **dict(settings, DIMBSVM_JOB=str(tmp_path / "nope.yaml")))
    log = failed.stdout + failed.stderr
    assert failed.returncode != 0 and f"dimbsvm: error: cannot read job file {tmp_path / 'nope.yaml'}" in log


def _flow(tmp_path, *args):
    env = dict(os.environ, PREFECT_HOME=str(tmp_path / "prefect"), PYTHONWARNINGS="ignore")
    env.pop("PREFECT_API_URL", None)  # the local ephemeral mode
    return subprocess.run([sys.executable, str(EXAMPLES / "prefect_retrain.py"), *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)


def test_the_prefect_flow_retrains_and_tells_the_outcomes_from_failures(tmp_path):
    pytest.importorskip("prefect", reason="Prefect runs in an environment of its own: bash .ci/orchestrators")
    if shutil.which("dimbsvm") is None:
        pytest.skip("the flow calls the dimbsvm command, which is not on PATH here")
    registry = tmp_path / "reg"
    first = _flow(tmp_path, "jobs/retrain.yaml", "--registry", registry)
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads(first.stdout.splitlines()[-1])["action"] == "promoted"
    champion = json.loads((registry / "champion.json").read_text())
    # the same data and job again: nothing fitted, exit status 5, a routine outcome for the flow
    second = _flow(tmp_path, "jobs/retrain.yaml", "--registry", registry)
    assert second.returncode == 0, second.stderr[-3000:]
    assert json.loads(second.stdout.splitlines()[-1]) == {"action": "unchanged", "version": champion["version"],
                                                          "champion": champion["version"]}
    # a failure fails the flow, with dimbsvm's own line
    failed = _flow(tmp_path, "jobs/no-such-job.yaml", "--registry", registry)
    assert failed.returncode != 0
    assert "dimbsvm retrain exited 2:" in failed.stderr and "no-such-job.yaml" in failed.stderr, failed.stderr[-3000:]
