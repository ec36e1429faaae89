"""One call run in a forked copy of this process, beside this process's own work: a second core for a moment.

The report's side process draws a page's matplotlib PNGs and its Bokeh
documents one after the other, while the job's process waits for them on
an idle core. Forked, the copy has the drawing libraries imported and the
figures' data in memory at no cost (copy-on-write), so it can draw one half
while the side process draws the other; only its answer, pickled, comes back
through a pipe.

Forking is safe only where no other thread runs (a thread holding a lock at
the fork leaves the copy that lock held forever): :func:`start_in_fork`
declines where another thread exists, or where the platform has no fork.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import threading
import time

__all__ = ["ForkedCallError", "start_in_fork"]


class ForkedCallError(RuntimeError):
    """The forked copy raised, or ended without an answer."""


class ForkedCall:
    """A call running in a forked copy of this process; :meth:`result` waits for its answer."""

    def __init__(self, pid: int, answers: int):
        self._pid, self._answers = pid, answers

    def result(self, timeout=None):
        """The call's return value (read once); :class:`ForkedCallError` where it raised, its copy died, or it
        did not answer within ``timeout`` seconds (the copy is then killed: a copy stuck on a lock that some
        library's own thread held at the fork must not hold this process too)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        parts = []
        with os.fdopen(self._answers, "rb", buffering=0) as answers:
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not select.select([answers], [], [], left)[0]:
                    os.kill(self._pid, signal.SIGKILL)
                    os.waitpid(self._pid, 0)
                    raise ForkedCallError(f"the forked process did not answer within {timeout} s")
                part = answers.read(1 << 20)
                if not part:
                    break
                parts.append(part)
        message = b"".join(parts)
        _, status = os.waitpid(self._pid, 0)
        if not message:
            raise ForkedCallError(f"the forked process ended without an answer (wait status {status})")
        ok, value = pickle.loads(message)
        if not ok:
            raise ForkedCallError(value)
        return value


def start_in_fork(func) -> ForkedCall | None:
    """Start ``func()`` in a forked copy of this process; None where this process should not fork.

    The copy runs ``func`` only: it sends back what ``func`` returns (or the
    text of what it raised) and leaves with ``os._exit``, running no exit
    handlers and flushing none of this process's buffers.
    """
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return None
    answers, out = os.pipe()
    pid = os.fork()
    if pid == 0:  # the copy
        try:
            os.close(answers)
            try:
                message = pickle.dumps((True, func()), protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException as exc:  # noqa: BLE001 - everything the copy meets is the caller's to hear
                message = pickle.dumps((False, f"{type(exc).__name__}: {exc}"))
            with os.fdopen(out, "wb") as stream:
                stream.write(message)
        finally:
            os._exit(0)
    os.close(out)
    return ForkedCall(pid, answers)
