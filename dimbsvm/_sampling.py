"""Uniform samples of rows without replacement whose cost is the sample's, not the population's.

Shared by the ensemble's bags (:mod:`dimbsvm.svm.bagging`) and the samples of
the kNN builds: a client that draws a few thousand rows out of 10^8 must not
permute all 10^8 (800 MB and seconds in the driver).
"""

from __future__ import annotations

import numpy as np

__all__ = ["PERMUTED_POPULATION", "sample_without_replacement", "sorted_sample"]


#: Populations up to this size are sampled without replacement by ``RandomState.choice``
#: (a permutation of the whole population); larger ones by rejection, in time of the sample.
PERMUTED_POPULATION = 1_000_000


def sample_without_replacement(n_population, size, random_state, *, permuted_up_to=PERMUTED_POPULATION):
    """``size`` distinct positions of ``range(n_population)``, uniformly, in random order.

    Up to ``permuted_up_to`` rows this is ``random_state.choice(n_population,
    size, replace=False)``, which permutes the whole population: bags of data
    of that size are the ones earlier versions drew. Above, it keeps the first
    ``size`` distinct values of i.i.d. uniform draws (sequential rejection,
    an exact uniform sample without replacement), so a balanced bag of
    10,000 majority rows out of 8 million costs a millisecond, not the 0.4 s
    (and 64 MB of scattered memory traffic) of permuting 8 million rows in
    every member.

    Examples
    --------
    >>> rng = np.random.RandomState(0)
    >>> picked = sample_without_replacement(5_000_000, 4, rng)
    >>> picked.size, np.unique(picked).size
    (4, 4)
    """
    if not 0 <= size <= n_population:
        raise ValueError(f"cannot draw {size} distinct rows out of {n_population}")
    if n_population <= permuted_up_to:
        return np.asarray(random_state.choice(n_population, size=size, replace=False), dtype=np.int64)
    chosen = np.empty(0, dtype=np.int64)
    while chosen.size < size:
        missing = size - chosen.size
        # a few more than missing: duplicates are rare when size << n_population
        draws = random_state.randint(0, n_population, size=missing + missing // 64 + 8).astype(np.int64)
        sequence = np.concatenate([chosen, draws])
        _, first = np.unique(sequence, return_index=True)
        chosen = sequence[np.sort(first)][:size]  # first occurrences, in the order drawn
    return chosen


def sorted_sample(n_population, size, seed) -> np.ndarray:
    """``min(size, n_population)`` distinct rows of ``range(n_population)`` in ascending order, drawn with
    ``RandomState(seed)`` (:func:`sample_without_replacement`: the rows earlier versions drew up to
    :data:`PERMUTED_POPULATION`).

    Examples
    --------
    >>> sorted_sample(10, 4, 0).tolist()
    [2, 4, 8, 9]
    """
    rng = np.random.RandomState(int(seed))
    return np.sort(sample_without_replacement(int(n_population), min(int(size), int(n_population)), rng))
