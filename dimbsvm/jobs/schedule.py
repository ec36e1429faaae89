"""Run retraining on a cron schedule, in the foreground, one run at a time."""

from __future__ import annotations

import datetime as _dt
import logging
import signal
import threading

from croniter import croniter
from croniter.croniter import CroniterBadDateError, CroniterError

from ..exceptions import JobSpecError

__all__ = ["CRON_FIELDS", "MAX_YEARS_BETWEEN_RUNS", "parse_cron", "run_schedule"]

logger = logging.getLogger(__name__)

#: A cron expression must name a time within this many years of now. Some valid expressions never match
#: (``0 0 30 2 *``: February 30th); leap days (every 4 years, 8 across a skipped century year) still pass.
MAX_YEARS_BETWEEN_RUNS = 8


#: The field orders croniter reads (UTC). A sixth field is seconds and comes LAST, not first as in Quartz or
#: Spring: ``*/20 * * * * *`` is every second of minutes 0, 20 and 40; every 20 seconds is ``* * * * * */20``.
CRON_FIELDS = ("5 fields: MINUTE HOUR DAY-OF-MONTH MONTH DAY-OF-WEEK (\"0 3 * * *\": 03:00 every day); "
               "6 fields: the same, then SECOND, last (not first as in Quartz/Spring: \"* * * * * */20\" is every "
               "20 s, \"*/20 * * * * *\" every second of minutes 0, 20 and 40)")


def parse_cron(expression: str, start: _dt.datetime | None = None) -> croniter:
    """A cron iterator, with a clear error.

    Five fields are ``MINUTE HOUR DAY-OF-MONTH MONTH DAY-OF-WEEK``; croniter
    reads a sixth as SECOND, after the five (``MINUTE HOUR DOM MONTH DOW
    SECOND``), not before them as Quartz and Spring do (and a seventh as
    YEAR). An expression that names no time within :data:`MAX_YEARS_BETWEEN_RUNS`
    years of ``start`` is refused too: a schedule that would never run.

    Examples
    --------
    >>> it = parse_cron("0 3 * * *", _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC))
    >>> it.get_next(_dt.datetime).isoformat()
    '2026-01-01T03:00:00+00:00'
    >>> parse_cron("61 * * * *")
    Traceback (most recent call last):
    ...
    dimbsvm.exceptions.JobSpecError: invalid cron expression '61 * * * *': [61 * * * *] is not acceptable, out of range
    >>> parse_cron("0 0 30 2 *")
    Traceback (most recent call last):
    ...
    dimbsvm.exceptions.JobSpecError: cron expression '0 0 30 2 *' never matches: no time within 8 years names it
    """
    start = start or _dt.datetime.now(_dt.UTC)
    try:
        schedule = croniter(expression, start)
        # a copy looks ahead, bounded, so the schedule returned still starts at ``start``
        croniter(expression, start, max_years_between_matches=MAX_YEARS_BETWEEN_RUNS).get_next(_dt.datetime)
    except CroniterBadDateError:
        raise JobSpecError(f"cron expression {expression!r} never matches: no time within "
                           f"{MAX_YEARS_BETWEEN_RUNS} years names it") from None
    except (CroniterError, ValueError, KeyError) as exc:
        raise JobSpecError(f"invalid cron expression {expression!r}: {exc}") from exc
    return schedule


def run_schedule(run_once, cron: str, *, max_runs: int | None = None, stop: threading.Event | None = None,
                 now=lambda: _dt.datetime.now(_dt.UTC), install_signal_handlers: bool = True) -> int:
    """Call ``run_once()`` at every time ``cron`` names until stopped.

    Runs happen in this thread, so a run still going when the next is due is
    never started twice: due times that pass during a run are skipped (and
    logged). A run that raises is logged and the schedule goes on.

    Parameters
    ----------
    run_once : callable
        One retraining; its return value is logged.
    cron : str
        Cron expression, evaluated in UTC.
    max_runs : int, default=None
        Stop after this many runs (for tests and one-off catch-ups).
    stop : threading.Event, default=None
        Set it to stop; SIGTERM and SIGINT set it when handlers are installed.
    now : callable
        The clock.
    install_signal_handlers : bool, default=True
        Stop cleanly on SIGTERM/SIGINT (only possible in the main thread).

    Returns
    -------
    runs : int
        How many runs were started.
    """
    stop = stop or threading.Event()
    if install_signal_handlers and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: (logger.info("signal %d: stopping after the current run",
                                                                  signum), stop.set()))
    schedule = parse_cron(cron, now())
    _warn_if_frequent(cron, now())
    runs = 0
    while not stop.is_set() and (max_runs is None or runs < max_runs):
        due = schedule.get_next(_dt.datetime)
        wait = (due - now()).total_seconds()
        logger.info("next run at %s", due.isoformat())
        if wait > 0 and stop.wait(wait):
            break
        runs += 1
        try:
            outcome = run_once()
            logger.info("run %d at %s: %s", runs, due.isoformat(), outcome)  # routine: a promotion or not
        except Exception as exc:  # one failed run must not end the schedule
            logger.error("run %d at %s failed: %s", runs, due.isoformat(), exc)
        skipped = 0
        schedule = parse_cron(cron, now())
        while (nxt := croniter(cron, due).get_next(_dt.datetime)) <= now():
            due, skipped = nxt, skipped + 1
        if skipped:  # runs longer than the schedule's interval: worth a look
            logger.warning("skipped %d due run(s) while run %d was going", skipped, runs)
    logger.info("schedule stopped after %d run(s)", runs)
    return runs


def _warn_if_frequent(cron: str, start: _dt.datetime) -> None:
    """A warning when runs are due less than a minute apart: a sixth field is seconds, and comes last."""
    it = croniter(cron, start)
    first, second = it.get_next(_dt.datetime), it.get_next(_dt.datetime)
    gap = (second - first).total_seconds()
    if gap < 60:
        logger.warning("cron %r: runs due %g s apart (a sixth field is SECOND and comes last: %s)",
                       cron, gap, CRON_FIELDS)
