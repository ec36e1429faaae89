"""Workers that join while a job runs are checked as the first ones were, so a cluster may start with none.

:func:`~dimbsvm.distributed.compat.check_workers` checks the workers there
are before anything is submitted. A cluster that scales from zero (an
autoscaler with minimum 0, ``adapt(minimum=0)``) has none until it sees
work, and workers replaced or added later were never checked. So the client
registers :class:`VersionGate`, a worker plugin that every worker, present
or joining, runs when it registers: before it reads any task from the
scheduler it compares its software with the client's by
:data:`~dimbsvm.distributed.compat.RULES`. A worker that differs logs the
first difference as an event and closes with its nanny (so it is not
restarted), and a task that reached it meanwhile is rescheduled
(:func:`dimbsvm.parallel.policy.run_task`); one that agrees sends its record, which joins the
run's record of workers. :func:`gate_workers` logs each refusal in the
client's log as one line.

The plugin travels by value (as the first check does): a worker whose
dimbsvm is missing or another version can still run it.
"""

from __future__ import annotations

import logging

from distributed.diagnostics.plugin import WorkerPlugin

from .. import environment
from . import compat
from ..environment import software_record_in_thread
from ..parallel.policy import REFUSED_WORKER
from .compat import differences

__all__ = ["TOPIC", "VersionGate", "gate_workers", "ungate_workers"]

logger = logging.getLogger(__name__)

#: The event topic on which gated workers report (``Client.subscribe_topic``).
TOPIC = "dimbsvm-version-gate"


class VersionGate(WorkerPlugin):
    """A worker plugin that refuses a worker whose software differs from ``ours`` (a software record)."""

    name = "dimbsvm-version-gate"

    def __init__(self, ours: dict):
        self.ours = ours

    async def setup(self, worker):
        # (functions, not their modules: a module is pickled by name, and the worker may not import it)
        theirs = await software_record_in_thread(list(self.ours["packages"]))
        problems = differences(self.ours, theirs)
        who = {"worker": worker.address, "name": str(worker.name)}
        if not problems:
            worker.log_event(TOPIC, dict(who, record=theirs))
            return
        setattr(worker, REFUSED_WORKER, problems[0])
        worker.log_event(TOPIC, dict(who, refused=problems[0]))
        # closed once registered (closing inside its own registration would wait on itself); with its nanny,
        # so that it is not started again as it is
        worker.loop.add_callback(worker.close, nanny=True, reason="dimbsvm-version-mismatch")


def gate_workers(client, ours: dict) -> None:
    """Check every worker of ``client``'s cluster as it joins (see the module docstring).

    A refused worker is one WARNING line in this process's log; an accepted
    one is added to :func:`~dimbsvm.distributed.compat.worker_versions`.
    """
    def reported(event):
        _, message = event
        label = f"worker {message['worker']}" + (f" ({message['name']})" if message["name"] != message["worker"]
                                                 else "")
        if "refused" in message:
            logger.warning("%s refused: it %s", label, message["refused"])
        else:
            compat.record_worker(client, message["worker"], message["name"], message["record"])

    client.subscribe_topic(TOPIC, reported)
    with compat.sent_by_value(environment, compat, _this_module()):
        client.register_plugin(VersionGate(ours))


def ungate_workers(client) -> None:
    """Take the gate off ``client``'s cluster (a user's cluster is left as it was found)."""
    try:
        client.unsubscribe_topic(TOPIC)
        client.unregister_worker_plugin(VersionGate.name)
    except Exception:  # noqa: BLE001 - a cluster going away keeps nothing
        logger.debug("could not take the version gate off", exc_info=True)


def _this_module():
    import sys

    return sys.modules[__name__]
