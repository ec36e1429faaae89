"""Job specs, the job runner, run artifacts (models, out-of-fold predictions) and the model registry."""

from ..artifacts import load_artifact, save_model, verify_model
from .data import JobData, check_job_data, load_job_data
from .job_spec import JobSpec
from .oof import load_oof
from .runner import RunResult, run_checked, run_job
from .spec import JOB_SCHEMA, load_job, validate_job

__all__ = ["JOB_SCHEMA", "JobData", "JobSpec", "RunResult", "check_job_data", "load_job", "load_job_data", "load_artifact",
           "load_oof", "run_checked", "run_job", "save_model", "validate_job", "verify_model"]
