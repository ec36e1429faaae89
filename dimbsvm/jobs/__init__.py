"""Job specs, the job runner and (later) the model registry."""

from .runner import RunResult, check_job_data, load_job_data, run_job
from .spec import JOB_SCHEMA, load_job, validate_job

__all__ = ["JOB_SCHEMA", "RunResult", "check_job_data", "load_job", "load_job_data", "run_job", "validate_job"]
