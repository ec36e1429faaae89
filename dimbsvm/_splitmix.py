"""SplitMix64's output function: the counter-based hash behind dimbsvm's chunking-independent draws.

A value that depends only on a seed and a row's (or rank's) number, never on
how the rows are chunked, is SplitMix64's finaliser applied to a state made
from the two (:mod:`dimbsvm.features.references` ranks rows by it,
:mod:`dimbsvm.model_selection.splits` deals folds by it). No I/O here.
"""

from __future__ import annotations

import numpy as np

__all__ = ["GOLDEN", "MASK", "splitmix64", "splitmix64_int"]

#: SplitMix64's increment (the golden ratio in 64 bits).
GOLDEN = 0x9E3779B97F4A7C15
#: 64 bits.
MASK = (1 << 64) - 1


def splitmix64(states) -> np.ndarray:
    """SplitMix64's finaliser of uint64 ``states`` (wrap-around arithmetic).

    Examples
    --------
    >>> int(splitmix64(np.array([1], dtype=np.uint64))[0]) == splitmix64_int(1)
    True
    """
    with np.errstate(over="ignore"):  # the hash relies on wrap-around uint64 arithmetic
        z = np.asarray(states, dtype=np.uint64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def splitmix64_int(z: int) -> int:
    """:func:`splitmix64` of one Python int (taken modulo 2**64)."""
    z &= MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)
