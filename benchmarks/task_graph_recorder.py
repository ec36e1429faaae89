"""A scheduler preload that records a job's task graph as it runs: what :mod:`benchmarks.task_graph_replay` replays.

Started as ``dask scheduler --preload benchmarks.task_graph_recorder`` with
``DIMBSVM_TASK_GRAPH`` naming the file it appends to, one JSON object a line:

- ``{"event": "graph", "time": t, "tasks": [key, ...]}``: the tasks one
  ``update_graph`` call (a submission by a client) brought, at wall time ``t``;
- ``{"event": "task", "key": key, "deps": [key, ...], "worker": address,
  "priority": [...], "startstops": [{"action", "start", "stop"}, ...]}``: a
  task that finished (in memory or erred), its dependencies, the priority
  the scheduler ranked it by, and how its worker spent its time.

Keys are written as ``str(key)``.
"""

from __future__ import annotations

import json
import os
import time

from distributed.diagnostics.plugin import SchedulerPlugin

#: The environment variable that names the file the records are appended to.
LOG_VARIABLE = "DIMBSVM_TASK_GRAPH"


class TaskGraphRecorder(SchedulerPlugin):
    """Append every submission and every finished task of the scheduler to a JSON-lines file."""

    name = "dimbsvm-task-graph-recorder"

    def __init__(self, scheduler, path):
        self.scheduler = scheduler
        self.file = open(path, "a", buffering=1)  # a line at a time: complete lines whatever stops the scheduler

    def update_graph(self, scheduler, *, tasks=(), **kwargs):
        self._write({"event": "graph", "time": time.time(), "tasks": [str(key) for key in tasks]})

    def transition(self, key, start, finish, *args, stimulus_id=None, **kwargs):
        if start == "processing" and finish in ("memory", "erred"):
            state = self.scheduler.tasks.get(key)
            deps = [str(dep.key) for dep in state.dependencies] if state is not None else []
            startstops = [{"action": part["action"], "start": part["start"], "stop": part["stop"]}
                          for part in kwargs.get("startstops") or ()]
            priority = list(state.priority) if state is not None and state.priority is not None else None
            self._write({"event": "task", "key": str(key), "deps": deps, "worker": kwargs.get("worker"),
                         "priority": priority, "startstops": startstops})

    def _write(self, record):
        self.file.write(json.dumps(record) + "\n")

    async def close(self):
        self.file.close()


def dask_setup(scheduler):
    """The preload's entry point: register the recorder where ``DIMBSVM_TASK_GRAPH`` names a file."""
    path = os.environ.get(LOG_VARIABLE)
    if path:
        scheduler.add_plugin(TaskGraphRecorder(scheduler, path))
