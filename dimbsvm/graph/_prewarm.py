"""Importing this module compiles pynndescent's numba code (the forkserver preload of
``prewarm_forkserver`` in the distributed layer's ``warmup`` module).

The metrics come from the ``DIMBSVM_PREWARM_METRICS`` environment variable
(comma-separated, default ``euclidean``). Processes forked from the importing
process inherit the compiled code.
"""

from __future__ import annotations

import logging
import os
import time

from .knn import warm_up

logger = logging.getLogger(__name__)

#: Seconds spent compiling, per metric, in this process.
SECONDS = {}

for _metric in filter(None, os.environ.get("DIMBSVM_PREWARM_METRICS", "euclidean").split(",")):
    _tic = time.perf_counter()
    warm_up(_metric.strip())
    SECONDS[_metric.strip()] = time.perf_counter() - _tic
