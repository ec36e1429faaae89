"""Where estimators, stage builders and the fold engine hand out work.

The bottom layer of the package's work: it imports nothing of dimbsvm's, so
numeric code (``svm/``, ``features/``, ``graph/``) can fan out without
importing the job layer or the cluster's set-up (:mod:`dimbsvm.distributed`).

- :func:`current_client` - the client to run on: the one given, the active
  one, else ``None`` (this process); it never starts a cluster;
- :func:`map_tasks` - independent calls of one function;
- :class:`TaskPlan` + :func:`run_plan` - calls that depend on each other's
  results, submitted in one go;
- :func:`compute` - ``dask.compute`` on the client, else with local threads;
- :func:`effective_n_jobs` - the processes an estimator's ``n_jobs`` asks for
  (:mod:`.processes` runs a plan on them);
- :mod:`.policy` - how every task runs on a worker (thread limits, which
  errors are final); :class:`ClientParamMixin` - the ``client=None``
  parameter of estimators that fan out.
"""

from .client_param import ClientParamMixin
from .clients import current_client, worker_memory_limits
from .processes import effective_n_jobs
from .tasks import TaskPlan, TaskRef, compute, map_tasks, run_plan, share

__all__ = ["ClientParamMixin", "TaskPlan", "TaskRef", "compute", "current_client", "effective_n_jobs", "map_tasks",
           "run_plan", "share", "worker_memory_limits"]
