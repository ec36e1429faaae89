"""The cluster: starting or joining one, and checking its workers.

Only :func:`cluster_client` (used by the CLI, the job runner and the
benchmarks) may start an embedded ``LocalCluster``; library code never does.
How work runs on whatever client there is (in this process without one, as
tasks with one) is :mod:`dimbsvm.parallel`'s job.
"""

from .client import (
                     ClusterConnectionError,
                     NoWorkersError,
                     SchedulerLostError,
                     TLSSettings,
                     WorkerMismatchError,
                     check_cluster_options,
                     check_scheduler_address,
                     cluster_client,
)
from .compat import check_workers, worker_versions

__all__ = ["ClusterConnectionError", "NoWorkersError", "SchedulerLostError", "TLSSettings",
           "WorkerMismatchError", "check_cluster_options", "check_scheduler_address", "check_workers", "cluster_client",
           "worker_versions"]
