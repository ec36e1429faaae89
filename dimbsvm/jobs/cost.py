"""Seconds a job takes, said before it runs: a cost model over the price of its plan, fitted on measured runs.

A job's plan of tasks is priced before it runs
(:func:`~dimbsvm.jobs.plan_price.price_job`): every task's cost in seconds
of one core, from sizes alone (:mod:`dimbsvm.svm.task_costs`), summed
(the *work*), and its longest chain of dependent tasks (the *span*). The
model turns a price into seconds on this machine: a factor on the priced
seconds (the task costs' constants are rough and measured elsewhere) and a
fixed cost per job, and says a range rather than a number: the point
estimate divided and multiplied by the largest factor by which the model
missed a run it was fitted on, and by at least :data:`MIN_SPREAD` (another
machine, another load), so every calibration run falls inside its own range.

The constants live in ``cost_model.json`` beside this module, written by
``python -m benchmarks.cost_model`` (which runs the calibration jobs,
fits the constants with :func:`fit_cost_model` and records the runs, so a
refit on another machine is one command).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["COST_MODEL_FILE", "HOUR", "MIN_SPREAD", "CostModel", "TimeRange", "fit_cost_model", "load_cost_model"]

#: The fitted constants (package data).
COST_MODEL_FILE = Path(__file__).with_name("cost_model.json")
#: Seconds in an hour: a job whose range reaches past it says so before it starts.
HOUR = 3600.0
#: The least factor a quoted range spans either side of its point estimate.
MIN_SPREAD = 2.0


@dataclass(frozen=True)
class TimeRange:
    """An estimated wall time: ``low`` to ``high`` seconds.

    Examples
    --------
    >>> TimeRange(40.0, 250.0).describe(), TimeRange(0.6, 1.3).describe(), TimeRange(0.2, 0.8).describe()
    ('about 40 s to 4 min', 'about 1 s', 'under a second')
    >>> TimeRange(5000.0, 20000.0).over_an_hour
    True
    """

    low: float
    high: float

    @property
    def over_an_hour(self) -> bool:
        """Whether the range reaches past an hour."""
        return self.high > HOUR

    def describe(self) -> str:
        if self.high < 1:
            return "under a second"
        low, high = _duration(self.low), _duration(self.high)
        return f"about {low}" if low == high else f"about {low} to {high}"


@dataclass(frozen=True)
class CostModel:
    """Seconds on this machine per priced second of a plan, a fixed cost per job, and the spread of the fit.

    Attributes
    ----------
    scale : float
        Measured seconds of one core per second of a plan's price
        (:class:`~dimbsvm.jobs.plan_price.PlanPrice`).
    overhead_seconds : float
        Seconds every job costs whatever its size (planning, writing its records and report).
    spread : float
        The factor either side of the point estimate: the largest by which the
        model missed a run it was fitted on, at least :data:`MIN_SPREAD`.
    """

    scale: float
    overhead_seconds: float
    spread: float

    def seconds(self, price) -> float:
        """The point estimate of a plan of price ``price`` on one core."""
        return self.overhead_seconds + self.scale * price.work

    def estimate(self, price, *, cores: int = 1) -> TimeRange:
        """The wall time of a plan of price ``price`` on ``cores`` single-threaded workers.

        The plan's least wall time on that many cores
        (:meth:`~dimbsvm.jobs.plan_price.PlanPrice.wall_seconds`: every core
        busy, or its longest chain of tasks) is the best case.
        """
        point = self.overhead_seconds + self.scale * price.wall_seconds(cores)
        return TimeRange(point / self.spread, point * self.spread)


def fit_cost_model(runs) -> CostModel:
    """The cost model of measured runs: non-negative least squares on relative errors.

    Parameters
    ----------
    runs : iterable of (float, float)
        For each run, its plan's priced work (seconds of one core) and the
        seconds it took on one core.

    Returns
    -------
    CostModel
        ``scale`` and ``overhead_seconds`` minimising the sum of squared
        relative errors ``(predicted - measured) / measured`` (no run
        outweighs the others by its size), and the largest miss, at least
        :data:`MIN_SPREAD`, as the spread.

    Examples
    --------
    >>> model = fit_cost_model([(10.0, 1 + 2 * 10.0), (40.0, 1 + 2 * 40.0), (1.0, 1 + 2 * 1.0)])
    >>> round(model.overhead_seconds, 6), round(model.scale, 6), model.spread
    (1.0, 2.0, 2.0)
    """
    from scipy.optimize import nnls

    runs = [(float(work), float(seconds)) for work, seconds in runs]
    if not runs:
        raise ValueError("no runs to fit a cost model on")
    A = np.array([[1.0, work] for work, _ in runs])
    t = np.array([seconds for _, seconds in runs])
    scale = A.max(axis=0)
    scale[scale == 0] = 1.0
    coef, _ = nnls(A / scale / t[:, None], np.ones(len(t)))
    coef = coef / scale
    predicted = A @ coef
    misses = np.maximum(predicted / t, t / np.maximum(predicted, 1e-12))
    return CostModel(scale=float(coef[1]), overhead_seconds=float(coef[0]),
                     spread=max(MIN_SPREAD, float(misses.max())))


def load_cost_model(path=COST_MODEL_FILE) -> CostModel:
    """The cost model written by ``python -m benchmarks.cost_model``."""
    data = json.loads(Path(path).read_text())
    return CostModel(scale=float(data["scale"]), overhead_seconds=float(data["overhead_seconds"]),
                     spread=float(data["spread"]))


def _duration(seconds: float) -> str:
    """``"12 s"``, ``"4 min"``, ``"2.5 h"``: a duration to two significant figures at most.

    Examples
    --------
    >>> _duration(0.4), _duration(12.3), _duration(250), _duration(9000)
    ('1 s', '12 s', '4 min', '2.5 h')
    """
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    if seconds < HOUR:
        return f"{round(seconds / 60)} min"
    hours = seconds / HOUR
    return f"{hours:.1f} h" if hours < 10 else f"{math.floor(hours + 0.5)} h"
