"""Job specs, the job runner and (later) the model registry."""

from .artifacts import load_model, save_model, verify_model
from .data import JobData, check_job_data, load_job_data
from .runner import RunResult, run_job
from .spec import JOB_SCHEMA, load_job, validate_job

__all__ = ["JOB_SCHEMA", "JobData", "RunResult", "load_model", "save_model", "verify_model", "check_job_data", "load_job", "load_job_data", "run_job", "validate_job"]
