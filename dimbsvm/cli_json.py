"""``--json``: one JSON document on standard output for an orchestrator (Airflow, Prefect, cron and ``jq``).

With ``--json``, ``run``, ``validate`` and ``retrain`` print their usual
lines to standard error instead and end with exactly one JSON document on
standard output, also when they fail (``"ok": false`` with the one-line error
and the exit code). :data:`SCHEMAS` holds each verb's JSON Schema (draft
2020-12); ``"schema"`` in a document names it, with a version that changes
only when a field is removed or changes meaning.

Exit codes stay as without ``--json``: 0 done, 2 a user error (bad job,
data, cluster option), 3 the scheduler was lost, 130 interrupted; ``retrain
--exit-code``: 0 promoted, 4 kept the champion, 5 unchanged.
"""

from __future__ import annotations

import contextlib
import json
import sys

__all__ = ["JSON_VERBS", "SCHEMAS", "json_output"]

_SUMMARY = {"type": "object", "additionalProperties": {
    "type": "object", "required": ["mean", "std", "n"],
    "properties": {"mean": {"type": ["number", "null"]}, "std": {"type": ["number", "null"]},
                   "n": {"type": "integer"}}}}
_FAILED = {"properties": {"ok": {"const": False}, "error": {"type": "string"}}, "required": ["error"]}


def _schema(name: str, done: dict, required: list) -> dict:
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": f"dimbsvm {name} --json",
            "type": "object", "required": ["schema", "ok", "exit_code"],
            "properties": {"schema": {"const": f"dimbsvm-{name}/1"}, "ok": {"type": "boolean"},
                           "exit_code": {"type": "integer"}, "error": {"type": "string"}, **done},
            "if": {"properties": {"ok": {"const": True}}},
            "then": {"required": required}, "else": _FAILED}


#: Each verb's document, as a JSON Schema.
SCHEMAS = {
    "run": _schema("run", {
        "job": {"type": "string"}, "estimator": {"type": "string"}, "data": {"type": "string"},
        "run_directory": {"type": "string"}, "report": {"type": "string"}, "summary": _SUMMARY,
        "reused_folds": {"type": "integer"}, "reused_members": {"type": "integer"},
        "search": {"type": ["object", "null"]}, "timings": _SUMMARY,
        # the run's wall time by phase, in order (resources.json's phase_seconds)
        "phase_seconds": {"type": "object", "additionalProperties": {"type": "number"}},
        # --detach: the driver's state when the submitter left (the summary is then empty)
        "detached": {"type": "object", "required": ["state"], "properties": {"state": {"type": "string"}}}},
        ["job", "run_directory", "summary"]),
    "status": _schema("status", {
        "run_directory": {"type": "string"},
        "state": {"enum": ["submitted", "running", "finished", "failed", "cancelled", "interrupted"]},
        "detached": {"type": "boolean"}, "finished": {"type": "boolean"},
        "folds_saved": {"type": "integer"}, "folds_total": {"type": "integer"},
        "members_saved": {"type": "integer"}, "attempt": {"type": "integer"},
        "worker": {"type": ["string", "null"]}, "reason": {"type": ["string", "null"]},
        "seconds_left_estimate": {"type": "integer"}, "summary": _SUMMARY},
        ["run_directory", "state", "folds_saved"]),
    "validate": _schema("validate", {
        "job": {"type": "string"}, "estimator": {"type": "string"}, "data": {"type": "string"},
        "rows": {"type": "integer"}, "features": {"type": "integer"},
        "class_counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "folds": {"type": "integer"}, "metrics": {"type": "array", "items": {"type": "string"}},
        "runs_on": {"type": "string"},
        "estimate": {"type": ["object", "null"], "properties": {
            "seconds_low": {"type": "number"}, "seconds_high": {"type": "number"}, "in_process": {"type": "boolean"},
            "tasks": {"type": "integer"}, "work_seconds": {"type": "number"}}},
        "run_directory": {"type": ["string", "null"]}, "resumes": {"type": "boolean"}},
        ["job", "rows", "runs_on"]),
    "retrain": _schema("retrain", {
        "action": {"enum": ["promoted", "kept", "unchanged"]}, "version": {"type": ["string", "null"]},
        "champion": {"type": ["string", "null"]}, "promoted": {"type": "boolean"}, "reason": {"type": "string"},
        "challenger_metrics": {"type": "object", "additionalProperties": {"type": ["number", "null"]}},
        "champion_metrics": {"type": ["object", "null"], "additionalProperties": {"type": ["number", "null"]}},
        "search_params": {"type": ["object", "null"]}}, ["action", "promoted", "reason"]),
    "models": _schema("models", {
        "registry": {"type": "string"}, "champion": {"type": ["string", "null"]},
        "versions": {"type": "array", "items": {
            "type": "object", "required": ["id", "champion"],
            "properties": {"id": {"type": "string"}, "champion": {"type": "boolean"}, "job": {"type": "string"},
                           "created_at": {"type": "string"}, "data_fingerprint": {"type": ["string", "null"]},
                           "n_train": {"type": "integer"}, "n_holdout": {"type": "integer"},
                           "holdout_metrics": {"type": "object",
                                               "additionalProperties": {"type": ["number", "null"]}}}}}},
        ["registry", "champion", "versions"]),
}

#: The verbs that take ``--json`` this way (``estimators`` and ``features`` print JSON listings of their own).
JSON_VERBS = tuple(SCHEMAS)


@contextlib.contextmanager
def json_output(args):
    """While the block runs, the verb's lines go to standard error; then its document goes to standard output.

    The verb puts its fields in ``args.json_document`` (a dict); :func:`finish` adds ``ok``, ``exit_code`` and
    ``error``. Yields a callable ``finish(status, error=None)`` that prints the document.
    """
    stdout = sys.stdout
    args.json_document = {}
    # (ok: the verb did its work; retrain --exit-code's 4 and 5 are outcomes, not failures)

    def finish(status: int, error: str | None = None) -> int:
        document = {"schema": f"dimbsvm-{args.verb}/1", "ok": error is None,
                    "exit_code": int(status), **({} if error is None else {"error": error.removeprefix("error: ")}),
                    **(args.json_document if error is None else {})}
        print(json.dumps(document, default=_plain), file=stdout, flush=True)
        return status

    with contextlib.redirect_stdout(sys.stderr):
        yield finish


def _plain(value):
    """numpy scalars and paths as JSON values."""
    if hasattr(value, "item"):
        return value.item()
    return str(value)
