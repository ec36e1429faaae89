"""A run's wall time by phase: when this process started, and the one line ``dimbsvm run`` prints.

The run records its phases (``resources.json``'s ``phase_seconds``: the plan,
the stored stage, the folds and final model, the records, the report); the
CLI adds what came before the run (the process's start-up, the job's checks,
the cluster's start), so that the seconds a user waited add up.
"""

from __future__ import annotations

import os
import time

__all__ = ["phase_line", "process_started"]


def process_started() -> float:
    """When this process started, in seconds since the epoch (``time.time()``'s clock).

    On Linux from the kernel's own counts (the process's start and the
    uptime, both in hundredths of a second); psutil's ``create_time`` adds the
    boot time in whole seconds, up to a second off. Elsewhere, psutil's.
    """
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            # the command name (field 2) may hold spaces: the fields after it start past its closing parenthesis
            started_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
            up = float(uptime.read().split()[0])
        return time.time() - (up - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        import psutil

        return psutil.Process().create_time()


def phase_line(phases: dict, total: float) -> str:
    """``time: T s (start-up a, checks b, ...)``: the phases in order, and what they leave out as ``other``.

    Examples
    --------
    >>> phase_line({"start-up": 1.25, "folds": 3.0}, 4.5)
    'time: 4.5 s (start-up 1.2, folds 3.0, other 0.2)'
    """
    parts = [f"{name} {seconds:.1f}" for name, seconds in phases.items()]
    rest = total - sum(phases.values())
    if rest >= 0.05:
        parts.append(f"other {rest:.1f}")
    return f"time: {total:.1f} s ({', '.join(parts)})"
