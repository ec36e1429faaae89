"""Bags of training rows for EnSVM-OTHR members (:mod:`dimbsvm.svm.ensemble`).

:func:`draw_bag` draws one bag of row numbers from a seeded ``RandomState``:
plain bootstrap (the paper), per-class (stratified) bootstrap, or a balanced
subsample. Arrays in, arrays out: no estimators and no Dask here.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from numbers import Integral

import numpy as np

from .._sampling import PERMUTED_POPULATION, sample_without_replacement

__all__ = ["BOOTSTRAPS", "PERMUTED_POPULATION", "DrawnBag", "RankRange", "bag_rows", "draw_bag", "draw_seeded_bag",
           "sample_without_replacement", "set_random_states"]

logger = logging.getLogger(__name__)

#: How a bag is drawn: ``"plain"`` (the paper), ``"stratified"``, ``"balanced"``.
BOOTSTRAPS = ("plain", "stratified", "balanced")


def draw_bag(positive, random_state, *, bootstrap="plain", max_samples=None, max_draws=20, classes=None):
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
        drawn without replacement (:func:`sample_without_replacement`; with
        replacement if there are too few), so every bag is balanced and small.
    max_samples : int, float or None, default=None
        Bag size. ``None``: ``n_samples`` (plain), the class counts
        (stratified), twice the minority count (balanced). A float in (0, 1]
        scales that size (per class for stratified and balanced). An int is
        the total bag size (split across classes in proportion for
        stratified, in halves for balanced).
    max_draws : int, default=20
        Attempts before giving up (only ``"plain"`` can miss a class).
    classes : tuple of two ndarray or RankRange, default=None
        ``(np.flatnonzero(positive), np.flatnonzero(~positive))`` where the
        caller has them already (one pass over the labels for many bags), or
        two :class:`RankRange` to draw class ranks from class sizes alone
        (``positive`` may then be ``None``, except for a plain bag).

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
    if positive is None and (classes is None or bootstrap == "plain"):
        raise ValueError("a plain bag needs every row's class: positive is required")
    positive = None if positive is None else np.asarray(positive, dtype=bool)
    minority, majority = (np.flatnonzero(positive), np.flatnonzero(~positive)) if classes is None else classes
    n_minority = minority.size
    n_samples = n_minority + majority.size if positive is None else positive.size
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
        if size > majority.size:
            # (what random_state.choice(majority, size, replace=True) draws, also from rank ranges)
            from_majority = majority[random_state.randint(0, majority.size, size=size)]
        else:
            from_majority = majority[sample_without_replacement(majority.size, size, random_state)]
        return np.concatenate([from_minority, from_majority]).astype(np.int64), 1
    raise ValueError(f"bootstrap must be one of {BOOTSTRAPS}; got {bootstrap!r}.")


@dataclass(frozen=True)
class RankRange:
    """The numbers ``offset`` up to ``offset + size`` read as an index array, without the array.

    A class's rows stand for themselves by rank: ``RankRange(0, n_minority)``
    and ``RankRange(n_minority, n_majority)`` as :func:`draw_bag`'s
    ``classes`` draw a bag of ranks (the minority's first, then the
    majority's) that a caller maps to rows later, where the rows are read.

    Examples
    --------
    >>> RankRange(5, 3)[np.array([0, 2, 2])].tolist()
    [5, 7, 7]
    """

    offset: int
    size: int

    def __getitem__(self, positions):
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size and (positions.min() < 0 or positions.max() >= self.size):
            raise IndexError(f"ranks outside 0..{self.size - 1}")
        return self.offset + positions


def bag_rows(n_samples, n_minority, *, bootstrap="plain", max_samples=None) -> int:
    """The rows of a bag :func:`draw_bag` draws (repeats counted), from the class sizes alone.

    Examples
    --------
    >>> bag_rows(1000, 50), bag_rows(1000, 50, bootstrap="balanced"), bag_rows(1000, 50, max_samples=0.5)
    (1000, 100, 500)
    """
    n_majority = n_samples - n_minority
    if bootstrap == "plain":
        return int(max_samples) if isinstance(max_samples, Integral) else _scaled(max_samples, n_samples)
    if bootstrap == "stratified":
        if isinstance(max_samples, Integral):
            n_pos = max(1, round(max_samples * n_minority / n_samples))
            return n_pos + max(1, max_samples - n_pos)
        return _scaled(max_samples, n_minority) + _scaled(max_samples, n_majority)
    if bootstrap == "balanced":
        return 2 * (max(1, max_samples // 2) if isinstance(max_samples, Integral) else _scaled(max_samples, n_minority))
    raise ValueError(f"bootstrap must be one of {BOOTSTRAPS}; got {bootstrap!r}.")


@dataclass(frozen=True)
class DrawnBag:
    """A member's bag drawn from its seed, and its generator as the draw left it.

    A member draws its bag first from ``RandomState(seed)`` and then goes on
    drawing from the same generator (its perturbation ``u``), so a bag drawn
    elsewhere (one task per member, ahead of the members) can stand in for
    the member's own draw only together with that generator's state.

    Attributes
    ----------
    seed : int
    n_rows : int
        How many rows it was drawn from (``positive.size``).
    bag, n_draws
        As :func:`draw_bag` returns them.
    random_state : RandomState
        The generator after the draw; :meth:`generator` hands out copies.
    """

    seed: int
    n_rows: int
    bag: np.ndarray
    n_draws: int
    random_state: np.random.RandomState

    def generator(self):
        """A copy of the generator after the draw (the bag stays reusable, e.g. by a retried task)."""
        return copy.deepcopy(self.random_state)


def draw_seeded_bag(positive, seed, **options):
    """:func:`draw_bag` from ``RandomState(seed)``, kept with the generator's state after it.

    Examples
    --------
    >>> positive = np.array([True, True, False, False, False, False])
    >>> drawn = draw_seeded_bag(positive, 0, bootstrap="balanced")
    >>> drawn.bag.tolist() == draw_bag(positive, np.random.RandomState(0), bootstrap="balanced")[0].tolist()
    True
    """
    random_state = np.random.RandomState(int(seed))
    if positive is None:  # ranks drawn from the class sizes (options["classes"]) alone
        n_rows = sum(int(ranks.size) for ranks in options["classes"])
    else:
        positive = np.asarray(positive, dtype=bool)
        n_rows = positive.size
    bag, n_draws = draw_bag(positive, random_state, **options)
    return DrawnBag(int(seed), int(n_rows), bag, n_draws, random_state)


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
