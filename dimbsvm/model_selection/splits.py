"""Cross-validation splits and the one positive-label rule.

A fold is identified by its repeat seed and fold number; the split is computed
once, on the client, for all folds of a repeat (shuffled stratified k-fold
is deterministic given the seed), so every method evaluated on the same
(seed, fold) sees exactly the same rows.

The split is scikit-learn's ``StratifiedKFold(n_splits, shuffle=True,
random_state=seed)``, bit for bit. :func:`stratified_test_folds` computes it
in O(n) for integer-valued labels (dimbsvm's coded labels): scikit-learn's own
code spends almost all its time in ``np.unique`` and ``np.sort`` of the
labels (O(n log n): 0.75 s at 4x10^6 labels, on the client before a run
starts, and again in every fold's ``rows`` task). Any other labels go to
scikit-learn itself.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.model_selection import StratifiedKFold
from sklearn.utils import check_random_state

from .._counts import unique_counts

__all__ = ["chunk_class_counts", "chunk_fold_counts", "fold_indices", "fold_of_rows", "minority_class", "repeat_seeds",
           "repeat_splits", "stratified_test_folds"]

#: The fast path counts labels with ``np.bincount`` over ``max - min + 1`` bins: wider label ranges (sparse,
#: identifier-like values) go to scikit-learn.
MAX_LABEL_RANGE = 1 << 20
#: Up to this many classes, each class's rows are found with a comparison pass over the labels; more classes
#: are grouped by one stable (radix) argsort instead, which costs the same whatever the number of classes.
MASK_CLASSES = 4


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
    test_folds = stratified_test_folds(y, n_splits=n_splits, seed=seed)
    if test_folds is None:  # labels of the slow path: scikit-learn's own split
        splitter = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)
        for i, (train, test) in enumerate(splitter.split(np.zeros(len(y)), y)):
            if i == fold:
                return train, test
    elif 0 <= fold < n_splits:  # only this fold's masks: a task that needs one fold does not build them all
        return _fold_of(test_folds, fold)
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
    labels, counts = unique_counts(y if hasattr(y, "counted_classes") else np.asarray(y))
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
    test_folds = stratified_test_folds(y, n_splits=n_splits, seed=seed)
    if test_folds is None:  # labels of the slow path: scikit-learn's own split
        splitter = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)
        return [(train, test) for train, test in splitter.split(np.zeros(len(y)), y)]
    return [_fold_of(test_folds, fold) for fold in range(n_splits)]


def chunk_fold_counts(y, *, n_splits: int, seed: int, block_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of each class in each fold of one repeat, per stored chunk: a fold's layout, without its rows.

    The folds are :func:`repeat_splits`' (the same rows, bit for bit); only
    their counts leave this function, so a driver can plan the tasks of
    every chunk of a store's folds from a few numbers per chunk and never
    hold a fold's index arrays (a task computes this where the labels are).

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        The labels.
    n_splits, seed : int
        The repeat's split.
    block_rows : int
        Rows per stored chunk: chunk ``c`` holds rows ``c * block_rows`` up to
        the next chunk's first.

    Returns
    -------
    classes : ndarray
        The classes of ``y``, increasing.
    counts : ndarray of int64 of shape (n_chunks, n_splits, n_classes)
        ``counts[c, f, k]``: test rows of fold ``f`` in chunk ``c`` of class
        ``classes[k]`` (its training rows are those of the other folds).

    Examples
    --------
    >>> y = np.array([0] * 8 + [1] * 4)
    >>> classes, counts = chunk_fold_counts(y, n_splits=2, seed=0, block_rows=5)
    >>> counts.shape, counts.sum(axis=(0, 1)).tolist()  # 3 chunks, 2 folds, 2 classes
    ((3, 2, 2), [8, 4])
    >>> [(y[test] == 1).sum() for _, test in repeat_splits(y, n_splits=2, seed=0)] == counts[:, :, 1].sum(0).tolist()
    True
    """
    y = np.asarray(y)
    n_splits, block_rows = int(n_splits), int(block_rows)
    classes = unique_counts(y)[0]
    test_folds = fold_of_rows(y, n_splits=n_splits, seed=seed)
    n_chunks = -(-y.size // block_rows)
    cells = n_splits * classes.size
    counts = np.empty((n_chunks, cells), dtype=np.int64)
    for chunk in range(n_chunks):  # a chunk at a time: no temporary of the labels' size
        rows = slice(chunk * block_rows, (chunk + 1) * block_rows)
        codes = np.searchsorted(classes, y[rows])
        counts[chunk] = np.bincount(test_folds[rows].astype(np.int64) * classes.size + codes, minlength=cells)
    return classes, counts.reshape(n_chunks, n_splits, classes.size)


def fold_of_rows(y, *, n_splits: int, seed) -> np.ndarray:
    """The fold each row of ``y`` is tested in under :func:`repeat_splits` (any labels).

    :func:`stratified_test_folds` where it applies, else the folds of
    scikit-learn's own split, numbered.

    Examples
    --------
    >>> fold_of_rows(np.array(["a", "b"] * 3), n_splits=3, seed=0).tolist()
    [2, 2, 1, 0, 0, 1]
    """
    test_folds = stratified_test_folds(y, n_splits=n_splits, seed=seed)
    if test_folds is None:  # labels of the slow path: the folds of scikit-learn's own split
        test_folds = np.empty(len(y), dtype=np.int32)
        for fold, (_, test) in enumerate(repeat_splits(y, n_splits=n_splits, seed=seed)):
            test_folds[test] = fold
    return test_folds


def chunk_class_counts(y, *, block_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """``(classes, counts)``: rows of each class per stored chunk, ``counts`` of shape (n_chunks, n_classes).

    Examples
    --------
    >>> classes, counts = chunk_class_counts(np.array([0, 1, 1, 0, 0]), block_rows=2)
    >>> classes.tolist(), counts.tolist()
    ([0, 1], [[1, 1], [1, 1], [1, 0]])
    """
    y = np.asarray(y)
    classes, block_rows = unique_counts(y)[0], int(block_rows)
    n_chunks = -(-y.size // block_rows)
    counts = np.empty((n_chunks, classes.size), dtype=np.int64)
    for chunk in range(n_chunks):
        counts[chunk] = np.bincount(np.searchsorted(classes, y[chunk * block_rows:(chunk + 1) * block_rows]),
                                    minlength=classes.size)
    return classes, counts


def _fold_of(test_folds: np.ndarray, fold: int) -> tuple[np.ndarray, np.ndarray]:
    """``(train, test)`` row indices of ``fold``, as scikit-learn's ``split`` builds them from the fold labels."""
    test = test_folds == fold
    return np.flatnonzero(~test), np.flatnonzero(test)


def stratified_test_folds(y, *, n_splits: int, seed) -> np.ndarray | None:
    """The fold of each row under ``StratifiedKFold(n_splits, shuffle=True, random_state=seed)``, or None.

    The same folds as scikit-learn's ``_make_test_folds``, bit for bit, in
    O(n) for integer-valued labels: classes are numbered by first appearance,
    counted with ``np.bincount`` instead of ``np.unique``; each class's
    share of each fold (scikit-learn deals the sorted labels round robin,
    ``bincount(y_sorted[i::n_splits])``) follows in closed form from the
    class counts; and the random state shuffles each class's fold labels in
    class order, the same calls on arrays of the same lengths.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Class labels.
    n_splits : int
        Number of folds (at least 2).
    seed : int, RandomState instance or None
        ``random_state`` of the shuffle.

    Returns
    -------
    test_folds : ndarray of shape (n_samples,) or None
        ``test_folds[j]`` is the fold row ``j`` is tested in (int8 for fewer
        than 128 folds). None where the fast path does not apply (labels that
        are not 1-D integer values in a range of at most
        :data:`MAX_LABEL_RANGE`, fewer rows than folds): the caller then
        asks scikit-learn, which also raises its own errors for such labels.

    Raises
    ------
    ValueError
        ``n_splits`` is not an integer of at least 2 (scikit-learn's
        messages), or every class has fewer than ``n_splits`` rows.

    Warns
    -----
    UserWarning
        Some class has fewer than ``n_splits`` rows (scikit-learn's warning).

    Examples
    --------
    >>> stratified_test_folds(np.array([1, 1, 1, 0, 0, 0]), n_splits=3, seed=0).tolist()
    [2, 1, 0, 2, 0, 1]
    >>> stratified_test_folds(np.array(["a", "b"] * 3), n_splits=3, seed=0) is None  # scikit-learn's
    True
    """
    StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)  # scikit-learn's parameter errors
    codes = _integer_codes(y, n_splits)
    if codes is None:
        return None
    codes, by_value, first_seen = codes
    n_splits = int(n_splits)
    counts = by_value[first_seen]  # per class, in order of appearance
    _check_class_counts(counts, n_splits)
    # scikit-learn sorts the class numbers and deals them round robin: fold i receives positions i, i + k,
    # i + 2k, ... of the sorted labels, and class c holds positions [ends[c - 1], ends[c]). Positions below x
    # that fold i receives: ceil((x - i) / k) = (x - i + k - 1) // k, so its share of class c is a difference.
    ends = np.concatenate(([0], np.cumsum(counts)))
    dealt = (ends[None, :] - np.arange(n_splits)[:, None] + n_splits - 1) // n_splits
    allocation = np.diff(dealt, axis=1)  # (n_splits, n_classes), scikit-learn's ``allocation``
    rng = check_random_state(seed)
    dtype = np.int8 if n_splits < 128 else np.int32
    test_folds = np.empty(codes.size, dtype=dtype)
    # RandomState.shuffle draws the same numbers for any dtype of a 1-D array (one per position, Fisher-Yates),
    # and swaps int8 twice as fast as scikit-learn's int64: the shuffles are most of the remaining time
    fold_numbers = np.arange(n_splits, dtype=dtype)
    if first_seen.size <= MASK_CLASSES:
        for k, value in enumerate(first_seen):
            folds_for_class = fold_numbers.repeat(allocation[:, k])
            rng.shuffle(folds_for_class)  # one shuffle per class, in class order: the same random draws
            test_folds[codes == value] = folds_for_class
        return test_folds
    # many classes: one stable grouping of the rows by label value (a radix sort for 16-bit codes) replaces a
    # comparison pass per class; each class's shuffled folds go to its rows in row order, as a mask assigns them
    shuffled = []
    for k in range(first_seen.size):  # the same shuffles, in the same class order
        shuffled.append(fold_numbers.repeat(allocation[:, k]))
        rng.shuffle(shuffled[-1])
    small = codes.astype(np.uint16) if int(first_seen.max()) < 1 << 16 else codes
    value_order = np.argsort(first_seen)  # classes in increasing label value: the order the sort groups them in
    test_folds[np.argsort(small, kind="stable")] = np.concatenate([shuffled[k] for k in value_order])
    return test_folds


def _integer_codes(y, n_splits) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(codes, by_value, first_seen)``: non-negative integer labels, their bincount, the classes by first appearance.

    None for labels the fast path leaves to scikit-learn: not 1-D, not
    integer-valued (strings, objects, fractional or non-finite floats), a range
    wider than :data:`MAX_LABEL_RANGE`, or fewer rows than folds.
    """
    if isinstance(y, (list, tuple)) or not hasattr(y, "__array__"):
        return None  # e.g. a list of strings or mixed values: scikit-learn's checks apply as they are
    y = np.asarray(y)
    if y.ndim != 1 or y.size < max(int(n_splits), 1) or y.dtype.kind not in "biuf":
        return None
    if y.dtype.kind == "b":
        codes = y.view(np.uint8)
    else:
        low, high = y.min(), y.max()
        if y.dtype.kind == "f":
            # beyond 2**52 a float's integer value and its difference from the lowest are no longer exact
            if not (-2.0 ** 52 <= low and high <= 2.0 ** 52) or high - low > MAX_LABEL_RANGE:
                return None
            codes = (y - low).astype(np.int64)  # -0.0 and 0.0 are one class, as for np.unique
            if not np.array_equal(codes + low, y):  # fractional labels: not a class code (scikit-learn refuses)
                return None
        else:
            if int(high) - int(low) > MAX_LABEL_RANGE:
                return None
            # np.bincount takes non-negative values castable to intp: shift to 0 in int64 (no overflow)
            codes = y if low == 0 and y.dtype.kind == "i" else np.subtract(y, low, dtype=np.int64)
    by_value = np.bincount(codes)
    return codes, by_value, _first_seen(codes, by_value)


def _first_seen(codes: np.ndarray, by_value: np.ndarray) -> np.ndarray:
    """The distinct values of ``codes`` in order of first appearance (``by_value``: their bincount).

    Looks at a prefix that grows until it holds every value present (the
    bincount says how many there are), so labels whose classes all appear
    early cost one short ``np.unique``.
    """
    n_present = int(np.count_nonzero(by_value))
    size = 1024
    while True:
        values, first = np.unique(codes[:size], return_index=True)  # first: the index of each first occurrence
        if values.size == n_present or size >= codes.size:
            return values[np.argsort(first)]
        size *= 4


def _check_class_counts(counts: np.ndarray, n_splits: int) -> None:
    """scikit-learn's refusal and warning about classes with fewer rows than folds, word for word."""
    min_groups = np.min(counts)
    if np.all(n_splits > counts):
        raise ValueError("n_splits=%d cannot be greater than the number of members in each class." % n_splits)
    if n_splits > min_groups:
        warnings.warn("The least populated class in y has only %d members, which is less than n_splits=%d."
                      % (min_groups, n_splits), UserWarning, stacklevel=3)
