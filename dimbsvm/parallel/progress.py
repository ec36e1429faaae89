"""Progress of long work on stderr: count, elapsed time and an estimate of the time left."""

from __future__ import annotations

import sys
import time

__all__ = ["Progress"]


class Progress:
    """``[#####.....] 12/40 folds  0:31 elapsed, ~1:17 left`` on stderr.

    On a terminal the line is redrawn in place (at most every 0.2 s); into a
    file or pipe (a batch log) a line is written at most every 30 s and at the
    end, so a 640-task run does not leave 640 lines.

    Parameters
    ----------
    total : int
    label : str
    enabled : bool, default=True
    stream : file, default=sys.stderr
    """

    def __init__(self, total: int, label: str, *, enabled: bool = True, stream=None, clock=time.monotonic):
        self.total, self.label = int(total), label
        self.stream = stream or sys.stderr
        self.enabled = enabled and self.total > 0
        self.done = 0
        self._clock = clock
        self.start = clock()
        self._first_done, self._first_count = None, 0
        self._shown = 0.0
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._every = 0.2 if self._tty else 30.0

    def advance(self, n: int = 1) -> None:
        now = self._clock()
        if self._first_done is None and n > 0:
            self._first_done, self._first_count = now, n
        self.done += n
        if self.enabled and (now - self._shown >= self._every or self.done >= self.total):
            self._shown = now
            self._draw(now)

    def close(self) -> None:
        if self.enabled and self._tty and self.done:
            self.stream.write("\n")
            self.stream.flush()
        self.enabled = False

    def line(self, now: float | None = None) -> str:
        """The progress line as it is drawn."""
        now = self._clock() if now is None else now
        elapsed = now - self.start
        width = 30
        filled = int(width * self.done / self.total)
        text = f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} {self.label}  {_clock(elapsed)} elapsed"
        if 0 < self.done < self.total:
            text += f", ~{_clock(self.seconds_left(now))} left"
        return text

    def seconds_left(self, now: float | None = None) -> float:
        """The time left at the rate tasks have finished since the first one did.

        The wait for the first task holds what is paid once (a cluster's
        workers importing and compiling, data read); counting it at every
        task's rate overstated the time left many times over early in a run.
        Until two more tasks have finished (workers finishing together make
        one interval look like none), the rate since the start is all there is.
        """
        now = self._clock() if now is None else now
        left = self.total - self.done
        since_first = self.done - self._first_count
        if since_first >= 2:
            return (now - self._first_done) / since_first * left
        return (now - self.start) / max(self.done, 1) * left

    def _draw(self, now: float) -> None:
        text = self.line(now)
        self.stream.write(f"\r{text}" if self._tty else f"{text}\n")
        self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"
