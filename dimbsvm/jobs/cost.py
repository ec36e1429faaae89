"""Seconds a job's fitting takes, said before it runs: a cost model over row-fits, fitted on measured runs.

A job's work is counted in row-fits by kind (:func:`~dimbsvm.jobs.placement.estimate_work`):
LIBLINEAR fits, kernel fits (weighted about quadratically in their rows),
feature stages and an ensemble's out-of-bag scoring (a kernel member's rows
weighted by its bag's). The model gives each kind its seconds per row-fit on one
core, plus a fixed cost per job, and says a range rather than a number: the
point estimate divided and multiplied by the largest factor by which the
model missed a run it was fitted on, and by at least :data:`MIN_SPREAD`
(another machine, another load), so every calibration run falls inside its
own range.

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
#: The kinds of fit a cost model prices (:meth:`dimbsvm.jobs.placement.WorkEstimate.kind_row_fits`).
KINDS = ("linear", "kernel", "features", "scoring", "kernel_scoring")


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
    """Seconds per row-fit by kind, on one core, and the spread of the fit.

    Attributes
    ----------
    seconds_per_row_fit : dict
        Kind (``"linear"``, ``"kernel"``, ``"features"``, ``"scoring"``, ``"kernel_scoring"``) -> seconds per
        row-fit on one core.
    overhead_seconds : float
        Seconds every job costs whatever its size (planning, scoring, writing its records).
    spread : float
        The factor either side of the point estimate: the largest by which the
        model missed a run it was fitted on, at least :data:`MIN_SPREAD`.
    """

    seconds_per_row_fit: dict
    overhead_seconds: float
    spread: float

    def seconds(self, work) -> float:
        """The point estimate of ``work`` (a :class:`~dimbsvm.jobs.placement.WorkEstimate`) on one core."""
        per_kind = work.kind_row_fits()
        return self.overhead_seconds + sum(self.seconds_per_row_fit.get(kind, 0.0) * rows
                                           for kind, rows in per_kind.items())

    def estimate(self, work, *, cores: int = 1) -> TimeRange:
        """The wall time of ``work`` on ``cores`` single-threaded workers.

        Fits are whole tasks, so at most ``work.n_fits`` cores share them;
        the division by the cores is the best case (every core busy).
        """
        parallel = max(1, min(int(cores), int(work.n_fits) or 1))
        point = self.overhead_seconds + (self.seconds(work) - self.overhead_seconds) / parallel
        return TimeRange(point / self.spread, point * self.spread)


def fit_cost_model(runs) -> CostModel:
    """The cost model of measured runs: non-negative least squares on relative errors.

    Parameters
    ----------
    runs : iterable of (dict, float)
        For each run, its row-fits by kind and the seconds it took on one core.

    Returns
    -------
    CostModel
        Constants minimising the sum of squared relative errors
        ``(predicted - measured) / measured`` (no run outweighs the others
        by its size), and the largest miss, at least :data:`MIN_SPREAD`, as
        the spread.

    Examples
    --------
    >>> runs = [({"linear": 1e6}, 1 + 2e-6 * 1e6), ({"linear": 4e6}, 1 + 2e-6 * 4e6), ({"kernel": 1e5}, 1 + 0.5)]
    >>> model = fit_cost_model(runs)
    >>> round(model.overhead_seconds, 6), round(model.seconds_per_row_fit["linear"] * 1e6, 6), round(model.spread, 6)
    (1.0, 2.0, 2.0)
    """
    from scipy.optimize import nnls

    runs = [(dict(kinds), float(seconds)) for kinds, seconds in runs]
    if not runs:
        raise ValueError("no runs to fit a cost model on")
    A = np.array([[1.0] + [kinds.get(kind, 0.0) for kind in KINDS] for kinds, _ in runs])
    t = np.array([seconds for _, seconds in runs])
    scale = A.max(axis=0)
    scale[scale == 0] = 1.0
    coef, _ = nnls(A / scale / t[:, None], np.ones(len(t)))
    coef = coef / scale
    predicted = A @ coef
    misses = np.maximum(predicted / t, t / np.maximum(predicted, 1e-12))
    return CostModel(seconds_per_row_fit={kind: float(c) for kind, c in zip(KINDS, coef[1:])},
                     overhead_seconds=float(coef[0]), spread=max(MIN_SPREAD, float(misses.max())))


def load_cost_model(path=COST_MODEL_FILE) -> CostModel:
    """The cost model written by ``python -m benchmarks.cost_model``."""
    data = json.loads(Path(path).read_text())
    return CostModel(seconds_per_row_fit=dict(data["seconds_per_row_fit"]),
                     overhead_seconds=float(data["overhead_seconds"]), spread=float(data["spread"]))


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
