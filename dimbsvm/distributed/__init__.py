"""Where work runs: client handling and task fan-out.

Library code takes ``client=None`` and uses the current ``distributed`` client
when there is one; only :func:`cluster_client` (used by the CLI and the job
runner) may start an embedded ``LocalCluster``.
"""

from .client import (ClusterConnectionError, TLSSettings, check_cluster_options, check_scheduler_address,
                     cluster_client, current_client)
from .fanout import run_tasks
from .predict import predict_chunks, write_predictions

__all__ = ["ClusterConnectionError", "TLSSettings", "check_cluster_options", "check_scheduler_address", "cluster_client", "current_client", "predict_chunks",
           "run_tasks", "write_predictions"]
