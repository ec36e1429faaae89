"""Where work runs: the only package that submits tasks.

Library code takes ``client=None`` and uses the current ``distributed`` client
when there is one; only :func:`cluster_client` (used by the CLI and the job
runner) may start an embedded ``LocalCluster``. :func:`map_tasks` and
:func:`run_plan` run task bodies in this process without a client and as
tasks with one, each under the execution policy of :mod:`.policy`.
"""

from .client import (ClusterConnectionError, NoWorkersError, SchedulerLostError, TLSSettings, WorkerMismatchError,
                     check_cluster_options, check_scheduler_address, cluster_client, current_client)
from .compat import check_workers, worker_versions
from .tasks import TaskPlan, compute, map_tasks, run_plan, share

__all__ = ["ClusterConnectionError", "NoWorkersError", "SchedulerLostError", "TLSSettings", "TaskPlan",
           "WorkerMismatchError", "check_cluster_options", "check_scheduler_address", "check_workers", "cluster_client",
           "compute", "current_client", "map_tasks", "run_plan", "share", "worker_versions"]
