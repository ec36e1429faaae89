"""Progress of long work on stderr: count, elapsed time and an estimate of the time left."""

from __future__ import annotations

import sys
import time

__all__ = ["Progress"]


class Progress:
    """``[#####.....] 12/40 folds  0:31 elapsed, ~1:17 left`` on stderr.

    On a terminal the line is redrawn in place (at most every 0.2 s); into a
    file or pipe (a batch log) a line is written every 30 s and at the end,
    so a 640-task run does not leave 640 lines.

    Parameters
    ----------
    total : int
        Tasks, as the line counts them.
    label : str
    enabled : bool, default=True
    stream : file, default=sys.stderr
    total_work : float, default=None
        The tasks' expected work, in any unit (:meth:`advance` says each
        one's): the time left is the work left at the rate work has been
        done. ``None``: every task is one unit.
    parallelism : int, default=1
        Tasks run at once (a cluster's threads). The rate was measured with
        them all busy, but the longest task left runs on one: the time left
        is at least its work at ``parallelism`` times the rate.
    """

    def __init__(self, total: int, label: str, *, enabled: bool = True, stream=None, clock=time.monotonic,
                 total_work: float | None = None, parallelism: int = 1):
        self.total, self.label = int(total), label
        self.total_work = float(self.total if total_work is None else total_work)
        self.parallelism = max(1, int(parallelism))
        self.longest_left = 0.0
        self.stream = stream or sys.stderr
        self.enabled = enabled and self.total > 0
        self.done, self.work_done = 0, 0.0
        self._clock = clock
        self.start = clock()
        self._first_done, self._first_count, self._first_work = None, 0, 0.0
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._every = 0.2 if self._tty else 30.0
        # a terminal's line is drawn at the first task; a log's first line comes after its interval (a job that
        # ends or fails sooner writes only its last line, or none)
        self._shown = float("-inf") if self._tty else self.start

    def advance(self, n: int = 1, work: float | None = None, longest_left: float = 0.0) -> None:
        """``n`` more tasks done, of ``work`` units (default ``n``); ``longest_left``: the most work of a task left."""
        now = self._clock()
        work = float(n if work is None else work)
        self.longest_left = float(longest_left)
        if self._first_done is None and n > 0:
            self._first_done, self._first_count, self._first_work = now, n, work
        self.done += n
        self.work_done += work
        if self.enabled and (now - self._shown >= self._every or self.done >= self.total):
            self._shown = now
            self._draw(now)

    def close(self) -> None:
        if self.enabled and self._tty and self.done:
            self.stream.write("\n")
            self.stream.flush()
        self.enabled = False

    def line(self, now: float | None = None) -> str:
        """The progress line as it is drawn.

        The time left is shown once a rate has been measured (two tasks
        finished after the first): before, the only rate is the start's,
        which holds a cluster's start and is no rate of the tasks.
        """
        now = self._clock() if now is None else now
        elapsed = now - self.start
        width = 30
        filled = int(width * self.done / self.total)
        text = f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} {self.label}  {_clock(elapsed)} elapsed"
        if 0 < self.done < self.total and self._rate_measured():
            text += f", ~{_clock(self.seconds_left(now))} left"
        return text

    def _rate_measured(self) -> bool:
        return self.done - self._first_count >= 2 and self.work_done > self._first_work

    def seconds_left(self, now: float | None = None) -> float:
        """The work left at the rate work has been done since the first task finished.

        At least the longest task left at one worker's share of that rate
        (see ``parallelism``): the last long task of a run is alone.

        The wait for the first task holds what is paid once (a cluster's
        workers importing and compiling, data read); counting it at every
        task's rate overstated the time left many times over early in a run.
        Until two more tasks have finished (workers finishing together make
        one interval look like none), the rate since the start is all there is.
        """
        now = self._clock() if now is None else now
        left = max(self.total_work - self.work_done, 0.0)
        since_first = self.work_done - self._first_work
        if self._rate_measured():
            rate = (now - self._first_done) / since_first
        elif self.work_done > 0:
            rate = (now - self.start) / self.work_done
        else:
            return (now - self.start) / max(self.done, 1) * (self.total - self.done)
        return rate * max(left, self.longest_left * self.parallelism)

    def _draw(self, now: float) -> None:
        text = self.line(now)
        self.stream.write(f"\r{text}" if self._tty else f"{text}\n")
        self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"
