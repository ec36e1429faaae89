"""Retrain a dimbsvm job nightly from Airflow, telling "promoted" from "kept" and "unchanged".

Copy this file into Airflow's ``dags/`` folder (Airflow 2.6 or later, the standard provider's
``BashOperator``), with dimbsvm installed where the task runs, and set the paths below (or the
``DIMBSVM_*`` environment variables they read).

``dimbsvm retrain --exit-code`` exits 0 when the challenger was promoted, 4 when the champion was kept
(a gate failed), 5 when nothing changed (the data and parameters were tried already), and 2, 3, 130 or 1
when the retraining failed (see deploy/README.md). Airflow counts every status but 0 as a failure unless
told: ``skip_on_exit_code=[4, 5]`` marks the task *skipped* for the two routine outcomes, so the
``publish`` task after it runs only when a new champion was promoted, and a real failure still fails (and
alerts). ``--json`` puts the outcome's document in the task's XCom (its last line on stdout).
"""

from __future__ import annotations

import datetime as dt
import os

from airflow import DAG

try:  # Airflow 3 moved the operator to the standard provider
    from airflow.providers.standard.operators.bash import BashOperator
except ImportError:  # Airflow 2
    from airflow.operators.bash import BashOperator

# where the job, the registry and tonight's rows are (the environment of Airflow's workers, or edit here)
JOB = os.environ.get("DIMBSVM_JOB", "/opt/dimbsvm/jobs/retrain.yaml")
REGISTRY = os.environ.get("DIMBSVM_REGISTRY", "/srv/dimbsvm/registry")
ROWS = os.environ.get("DIMBSVM_ROWS", "/srv/dimbsvm/tonight.parquet")
SCORES = os.environ.get("DIMBSVM_SCORES", "/srv/dimbsvm/scores")
#: The routine outcomes that are not a promotion (``dimbsvm.cli_retrain.RETRAIN_EXIT``): skipped, not failed.
NOT_PROMOTED = [4, 5]

with DAG(dag_id="dimbsvm_retrain", schedule="0 3 * * *", start_date=dt.datetime(2026, 1, 1), catchup=False,
         max_active_runs=1, tags=["dimbsvm"]) as dag:
    retrain = BashOperator(
        task_id="retrain",
        bash_command=f"dimbsvm retrain {JOB} --registry {REGISTRY} --exit-code --json --no-progress",
        skip_on_exit_code=NOT_PROMOTED,
        do_xcom_push=True,
    )
    publish = BashOperator(
        task_id="publish",  # only after a promotion: e.g. score tonight's rows with the new champion
        bash_command=f"dimbsvm predict {REGISTRY}@champion {ROWS} --out {SCORES}-{{{{ ds_nodash }}}}.parquet",
    )
    retrain >> publish
