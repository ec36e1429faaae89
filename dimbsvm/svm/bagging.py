"""Bags of training rows for EnSVM-OTHR members (:mod:`dimbsvm.svm.ensemble`).

:func:`draw_bag` draws one bag of row numbers from a seeded ``RandomState``:
plain bootstrap (the paper), per-class (stratified) bootstrap, or a balanced
subsample. Arrays in, arrays out: no estimators and no Dask here.
"""

from __future__ import annotations

import logging
from numbers import Integral

import numpy as np

__all__ = ["BOOTSTRAPS", "draw_bag", "set_random_states"]

logger = logging.getLogger(__name__)

#: How a bag is drawn: ``"plain"`` (the paper), ``"stratified"``, ``"balanced"``.
BOOTSTRAPS = ("plain", "stratified", "balanced")


def draw_bag(positive, random_state, *, bootstrap="plain", max_samples=None, max_draws=20):
    """Draw one bag of row numbers that holds both classes.

    Parameters
    ----------
    positive : ndarray of bool of shape (n_samples,)
        True for minority rows.
    random_state : RandomState
        Consumed in a fixed order, so a seed gives one bag.
    bootstrap : {"plain", "stratified", "balanced"}, default="plain"
        ``"plain"``: rows drawn with replacement regardless of class (the
        paper); a bag that misses a class is redrawn. ``"stratified"``: each
        class bootstrapped separately, keeping the class counts.
        ``"balanced"``: the minority bootstrapped and as many majority rows
        drawn without replacement (with replacement if there are too few), so
        every bag is balanced and small.
    max_samples : int, float or None, default=None
        Bag size. ``None``: ``n_samples`` (plain), the class counts
        (stratified), twice the minority count (balanced). A float in (0, 1]
        scales that size (per class for stratified and balanced). An int is
        the total bag size (split across classes in proportion for
        stratified, in halves for balanced).
    max_draws : int, default=20
        Attempts before giving up (only ``"plain"`` can miss a class).

    Returns
    -------
    bag : ndarray of shape (n_bag,), dtype int64
        Row numbers, possibly repeated.
    n_draws : int
        Attempts used.

    Raises
    ------
    ValueError
        If ``max_draws`` bags all missed a class, or ``positive`` lacks a class.

    Examples
    --------
    >>> import numpy as np
    >>> positive = np.array([True, True, False, False, False, False])
    >>> bag, n_draws = draw_bag(positive, np.random.RandomState(0), bootstrap="balanced")
    >>> positive[bag].tolist()
    [True, True, False, False]
    """
    positive = np.asarray(positive, dtype=bool)
    minority, majority = np.flatnonzero(positive), np.flatnonzero(~positive)
    n_samples, n_minority = positive.size, minority.size
    if n_minority == 0 or n_minority == n_samples:
        raise ValueError("Bags need training rows of both classes.")
    if bootstrap == "plain":
        if isinstance(max_samples, Integral):
            size = int(max_samples)
        else:
            size = _scaled(max_samples, n_samples)
        for attempt in range(1, max_draws + 1):
            bag = random_state.randint(0, n_samples, size=size).astype(np.int64)
            n_positive = int(positive[bag].sum())
            if 0 < n_positive < size:
                return bag, attempt
            logger.debug(
                "bag %d of %d rows has %d minority rows; redrawing", attempt, size, n_positive
            )
        raise ValueError(
            f"No bag of {size} rows drawn with bootstrap='plain' held both classes in "
            f"{max_draws} attempts ({n_minority} minority rows of {n_samples}); use "
            "bootstrap='stratified' or 'balanced', a larger max_samples, or more max_bag_draws."
        )
    if bootstrap == "stratified":
        if isinstance(max_samples, Integral):
            n_pos = max(1, round(max_samples * n_minority / n_samples))
            sizes = (n_pos, max(1, max_samples - n_pos))
        else:
            sizes = (_scaled(max_samples, n_minority), _scaled(max_samples, majority.size))
        from_minority = minority[random_state.randint(0, n_minority, size=sizes[0])]
        from_majority = majority[random_state.randint(0, majority.size, size=sizes[1])]
        return np.concatenate([from_minority, from_majority]), 1
    if bootstrap == "balanced":
        if isinstance(max_samples, Integral):
            size = max(1, max_samples // 2)
        else:
            size = _scaled(max_samples, n_minority)
        from_minority = minority[random_state.randint(0, n_minority, size=size)]
        replace = size > majority.size
        from_majority = random_state.choice(majority, size=size, replace=replace)
        return np.concatenate([from_minority, from_majority]).astype(np.int64), 1
    raise ValueError(f"bootstrap must be one of {BOOTSTRAPS}; got {bootstrap!r}.")


def _scaled(max_samples, default):
    """A bag (or per-class) size: ``default``, or ``default`` scaled by a float."""
    if max_samples is None:
        return default
    return max(1, round(float(max_samples) * default))


def set_random_states(estimator, seed):
    """Set every ``random_state`` parameter of ``estimator`` (nested ones too) to ``seed``."""
    names = [
        name
        for name in estimator.get_params(deep=True)
        if name == "random_state" or name.endswith("__random_state")
    ]
    if names:
        estimator.set_params(**dict.fromkeys(names, int(seed)))
