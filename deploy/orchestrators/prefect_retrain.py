"""Retrain a dimbsvm job from a Prefect flow, telling "promoted", "kept" and "unchanged" apart from failures.

    pip install dimbsvm "prefect>=3"
    python deploy/orchestrators/prefect_retrain.py jobs/retrain.yaml --registry registry/ [-- dimbsvm flags]

The task runs ``dimbsvm retrain JOB --registry DIR --exit-code --json``: its one JSON document on stdout
(schema ``dimbsvm.cli_json.SCHEMAS["retrain"]``) says what happened, and its exit status says it too:

=====  =====================================================================
0      promoted: the challenger is the champion now (or the first model)
4      kept: the challenger failed a gate; the champion stays
5      unchanged: the data and parameters were tried already; nothing fitted
2      a user error (job, data, registry, cluster options): the task fails
3      the scheduler was lost mid-run: the task fails (rerun to resume)
130    interrupted; 1 a bug
=====  =====================================================================

0, 4 and 5 are routine outcomes: the task returns the document and the flow logs the decision; any other
status fails the task with dimbsvm's own one-line error. Flags after ``--`` go to ``dimbsvm retrain``
(``--scheduler tcp://...``, ``--mlflow URI``). Without a Prefect server configured, Prefect runs the flow
against a temporary local one (its ephemeral mode); with ``PREFECT_API_URL`` set, the run is recorded there.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from prefect import flow, get_run_logger, task

#: ``dimbsvm retrain --exit-code`` statuses of the routine outcomes (``dimbsvm.cli_retrain.RETRAIN_EXIT``).
ROUTINE = {0: "promoted", 4: "kept", 5: "unchanged"}


class RetrainFailed(RuntimeError):
    """dimbsvm retrain exited with a failure status; the message is its one-line error."""


@task(name="dimbsvm retrain", retries=0)
def retrain(job: str, registry: str, extra: list[str]) -> dict:
    command = ["dimbsvm", "retrain", job, "--registry", registry, "--exit-code", "--json", *extra]
    proc = subprocess.run(command, capture_output=True, text=True)
    logger = get_run_logger()
    for line in proc.stderr.splitlines():  # dimbsvm's usual lines (placement, progress, the decision)
        logger.info(line)
    try:
        document = json.loads(proc.stdout)
    except ValueError:
        raise RetrainFailed(f"dimbsvm retrain exited {proc.returncode} without its JSON document: "
                            f"{proc.stderr.strip()[-500:]}") from None
    if proc.returncode not in ROUTINE:
        raise RetrainFailed(f"dimbsvm retrain exited {proc.returncode}: {document.get('error')}")
    return document


@flow(name="dimbsvm-retrain")
def retrain_flow(job: str, registry: str, extra: list[str] | None = None) -> dict:
    """One retraining; returns ``dimbsvm retrain --json``'s document (``action``: promoted, kept, unchanged)."""
    document = retrain(job, registry, list(extra or []))
    get_run_logger().info("retrain %s: %s (%s)", job, document["action"], document["reason"])
    return document


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("job", help="the dimbsvm job file (YAML) with a retrain section")
    parser.add_argument("--registry", required=True, help="the model registry directory")
    parser.add_argument("extra", nargs="*", help="flags for dimbsvm retrain, after --")
    args = parser.parse_args(argv)
    document = retrain_flow(args.job, args.registry, args.extra)
    print(json.dumps({"action": document["action"], "version": document["version"],
                      "champion": document["champion"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
