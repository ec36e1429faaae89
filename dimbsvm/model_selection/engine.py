"""The engine's face for estimators and stage builders: where their fan-out runs.

``svm/``, ``graph/`` and ``features/`` never import a scheduler. An estimator
that fans out (an ensemble's members, HPC's chunked passes, a stage's
blocks) takes ``client=None`` and hands its work here; ``client=None`` means
the current ``distributed`` client when there is one, else this process.
The work itself is submitted by :mod:`dimbsvm.distributed`.
"""

from __future__ import annotations

from ..distributed.client import current_client, worker_memory_limits
from ..distributed.tasks import TaskPlan, map_tasks, run_plan
from ..distributed.tasks import compute as _compute

__all__ = ["TaskPlan", "compute", "map_tasks", "resolve_client", "run_plan", "worker_memory_limits"]


def resolve_client(client=None):
    """The client to run on: the one given, else the current one, else ``None`` (this process)."""
    return current_client(client)


def compute(*collections, client=None):
    """``dask.compute`` of Dask collections on ``client`` or the current client, else with threads here."""
    return _compute(*collections, client=resolve_client(client))
