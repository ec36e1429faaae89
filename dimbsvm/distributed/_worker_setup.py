"""Preloaded into every worker process of an embedded cluster (Dask's ``preload``).

Ctrl-C in a terminal sends SIGINT to the whole foreground process group, the
worker processes included. Each would raise ``KeyboardInterrupt`` in its
event loop and print tracebacks while the ``dimbsvm`` process shuts the
cluster down in order; the workers are the cluster's to stop, so they ignore
SIGINT. (SIGTERM keeps its default: a worker told to terminate goes.)
"""

from __future__ import annotations

import signal
import threading


def dask_setup(worker=None) -> None:
    """Ignore SIGINT in this worker process (called by Dask as the worker starts)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
