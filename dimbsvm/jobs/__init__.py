"""Job specs, the job runner, run artifacts (models, out-of-fold predictions) and the model registry."""

from .._lazy import lazy_names

#: Public name -> the module that defines it, imported when first used: the CLI reads a job file
#: (:mod:`dimbsvm.jobs.yaml_load`) before it imports scikit-learn, the runner and the report.
_LAZY = {
    **dict.fromkeys(("load_artifact", "save_model", "verify_model"), "..artifacts"),
    **dict.fromkeys(("JobData", "check_job_data", "load_job_data"), ".data"),
    "JobSpec": ".job_spec",
    "load_oof": ".oof",
    **dict.fromkeys(("RunResult", "run_checked", "run_job"), ".runner"),
    **dict.fromkeys(("JOB_SCHEMA", "load_job", "validate_job"), ".spec"),
}

__all__ = ["JOB_SCHEMA", "JobData", "JobSpec", "RunResult", "check_job_data", "load_job", "load_job_data", "load_artifact",
           "load_oof", "run_checked", "run_job", "save_model", "validate_job", "verify_model"]


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
