"""Cross-validation splits and the one positive-label rule.

A fold is identified by its repeat seed and fold number; the split is computed
once, on the client, for all folds of a repeat (shuffled stratified k-fold
is deterministic given the seed), so every method evaluated on the same
(seed, fold) sees exactly the same rows.
"""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import StratifiedKFold

__all__ = ["fold_indices", "minority_class", "repeat_seeds", "repeat_splits"]


def repeat_seeds(n_repeats: int, random_state: int) -> list[int]:
    """The shuffling seed of each CV repeat: ``random_state, random_state + 1, ...``.

    Consecutive seeds make the common protocol "5-fold CV repeated with seeds
    0 and 1" the setting ``n_repeats=2, random_state=0``.

    Examples
    --------
    >>> repeat_seeds(2, 0)
    [0, 1]
    """
    return [int(random_state) + r for r in range(int(n_repeats))]


def fold_indices(y, *, n_splits: int, seed: int, fold: int):
    """Train and test row indices of one fold of a shuffled stratified k-fold.

    Examples
    --------
    >>> y = np.array([0] * 8 + [1] * 4)
    >>> train, test = fold_indices(y, n_splits=4, seed=0, fold=0)
    >>> len(train), len(test), int(y[test].sum())
    (9, 3, 1)
    """
    splitter = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    for i, (train, test) in enumerate(splitter.split(np.zeros(len(y)), y)):
        if i == fold:
            return train, test
    raise ValueError(f"fold {fold} does not exist with n_splits={n_splits}")


def minority_class(y):
    """The least frequent label of ``y``, the positive class of binary metrics (ties: the larger label).

    The estimators pick the same class from their training labels
    (:func:`dimbsvm.svm._base.positive_label` with ``pos_label=None``).

    Examples
    --------
    >>> minority_class([0, 1, 1]), minority_class(["b", "a", "b"]), minority_class(["a", "b"])
    (0, 'a', 'b')
    """
    labels, counts = np.unique(np.asarray(y), return_counts=True)
    order = np.lexsort((-np.arange(labels.size), counts))  # labels are sorted: ties go to the larger
    return labels[order[0]].item()


def repeat_splits(y, *, n_splits: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``[(train, test), ...]`` of every fold of one repeat, in fold order (one split of the labels).

    Examples
    --------
    >>> y = np.array([0] * 8 + [1] * 4)
    >>> [len(test) for _, test in repeat_splits(y, n_splits=4, seed=0)]
    [3, 3, 3, 3]
    """
    splitter = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    return [(train, test) for train, test in splitter.split(np.zeros(len(y)), y)]
