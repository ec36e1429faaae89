"""Platt scaling: a sigmoid from decision values to probabilities (Platt 1999), fitted by maximum likelihood.

``P(positive | s) = 1 / (1 + exp(a s + b))``, with Platt's smoothed targets
``(N+ + 1) / (N+ + 2)`` for positive rows and ``1 / (N- + 2)`` for negative
ones, which keep the fit finite on separable scores. Plain numpy/scipy: the
caller decides which scores are honest to fit on (never the training rows'
own margins of an SVM, which are biased towards confident).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

__all__ = ["platt_fit", "platt_probability"]


def platt_fit(scores, positive, sample_weight=None) -> tuple[float, float]:
    """The ``(a, b)`` of Platt's sigmoid for ``scores`` and boolean labels ``positive``.

    With ``sample_weight``, every row's log-loss term and the class sizes of
    Platt's targets are weighted (an integer weight acts as that many copies).

    Examples
    --------
    >>> a, b = platt_fit([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], [False, False, True, False, True, True])
    >>> a < 0
    True
    """
    s = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    w = np.ones(s.size) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    n_pos = float(w[positive].sum())
    n_neg = float(w[~positive].sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"Platt scaling needs both classes; got {n_pos} positive and {n_neg} negative scores")
    target = np.where(positive, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
    scale = max(1.0, float(np.abs(s).max()))  # the fit is invariant to it; it keeps L-BFGS well conditioned
    f = s / scale

    def loss_and_gradient(params):
        z = params[0] * f + params[1]
        loss = w @ (target * np.logaddexp(0.0, z) + (1.0 - target) * np.logaddexp(0.0, -z))
        residual = w * (0.5 * (1.0 + np.tanh(0.5 * z)) - (1.0 - target))  # w (sigmoid(z) - (1 - t)), stable
        return loss, np.array([residual @ f, residual.sum()])

    start = np.array([0.0, np.log((n_neg + 1.0) / (n_pos + 1.0))])
    result = minimize(loss_and_gradient, start, jac=True, method="L-BFGS-B")
    a, b = result.x
    return float(a / scale), float(b)


def platt_probability(scores, a: float, b: float) -> np.ndarray:
    """``1 / (1 + exp(a s + b))`` for every score, computed without overflow."""
    z = a * np.asarray(scores, dtype=np.float64) + b
    return 0.5 * (1.0 - np.tanh(0.5 * z))
