"""Cross-validation splits and the one positive-label rule.

A fold is identified by its repeat seed and fold number, so every method
evaluated on the same (seed, fold) sees exactly the same rows. The split is
stratified and shuffled, and defined row by row (:func:`class_folds`): a
row's fold depends on the seed, the number of folds, its class, the class's
size and the row's rank among the rows of its class, nothing else. So the
folds of a stored data set are computed by tasks, a chunk at a time, from
the counts of each class in the chunks before it, and are the same whatever
the chunking, the number of workers, or whether the rows are in memory.
:class:`StratifiedBlockKFold` gives these folds to scikit-learn.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.model_selection import BaseCrossValidator, StratifiedKFold
from sklearn.utils import check_random_state, column_or_1d
from sklearn.utils.multiclass import type_of_target

from .._counts import unique_counts
from .._splitmix import GOLDEN, splitmix64, splitmix64_int

__all__ = ["StratifiedBlockKFold", "chunk_class_counts", "chunk_fold_counts", "class_codes", "class_folds",
           "fold_class_counts", "fold_indices", "fold_of_rows", "folds_of_codes", "minority_class", "repeat_seeds",
           "repeat_splits"]

#: A class's rows are dealt to the folds in blocks of about this many (a multiple of the number of folds):
#: each block's rows are spread evenly over the folds, in an order drawn by hash.
FOLD_BLOCK = 1024
#: Blocks of a class whose folds are computed at once (a few MiB of keys and ranks), however large the class.
RANKS_AT_ONCE = 256
#: Up to this many classes, each class's rows are found with a comparison pass over the labels; more classes
#: are grouped by one stable argsort instead, which costs the same whatever the number of classes.
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
    """Train and test row indices of one fold of :func:`repeat_splits`.

    Examples
    --------
    >>> y = np.array([0] * 8 + [1] * 4)
    >>> train, test = fold_indices(y, n_splits=4, seed=0, fold=0)
    >>> len(train), len(test), int(y[test].sum())
    (9, 3, 1)
    """
    test_folds = fold_of_rows(y, n_splits=n_splits, seed=seed)
    if not 0 <= fold < n_splits:
        raise ValueError(f"fold {fold} does not exist with n_splits={n_splits}")
    return _fold_of(test_folds, fold)  # only this fold's masks: a task that needs one fold does not build them all


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
    test_folds = fold_of_rows(y, n_splits=n_splits, seed=seed)
    return [_fold_of(test_folds, fold) for fold in range(n_splits)]


def fold_of_rows(y, *, n_splits: int, seed) -> np.ndarray:
    """The fold each row of ``y`` is tested in: :func:`folds_of_codes` over every row.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Class labels (any values :func:`numpy.unique` orders).
    n_splits : int
        Number of folds (at least 2).
    seed : int, RandomState instance or None
        The shuffle's seed; a RandomState (or None: numpy's global one) gives
        one integer seed, as scikit-learn's estimators draw theirs.

    Returns
    -------
    test_folds : ndarray of int8 (int32 for 128 folds or more) of shape (n_samples,)

    Raises
    ------
    ValueError
        ``n_splits`` is not an integer of at least 2, ``y`` is not 1-D, or
        every class has fewer than ``n_splits`` rows (scikit-learn's
        messages).

    Warns
    -----
    UserWarning
        Some class has fewer than ``n_splits`` rows (scikit-learn's warning).

    Examples
    --------
    >>> fold_of_rows(np.array(["a", "b"] * 3), n_splits=3, seed=0).tolist()
    [0, 1, 2, 0, 1, 2]
    """
    StratifiedKFold(n_splits=n_splits)  # scikit-learn's parameter errors
    y = column_or_1d(y)
    if y.dtype.kind not in "iub":  # integer labels are classes; others as scikit-learn's splitter checks them
        kind = type_of_target(y, input_name="y")
        if kind not in ("binary", "multiclass"):
            raise ValueError(f"Supported target types are: ('binary', 'multiclass'). Got {kind!r} instead.")
    if y.size < n_splits:
        raise ValueError(f"Cannot have number of splits n_splits={n_splits} greater than the number of samples: "
                         f"n_samples={y.size}.")
    classes, counts = unique_counts(y)
    _check_class_counts(counts, n_splits)
    codes = class_codes(y, classes)
    return folds_of_codes(codes, np.zeros(classes.size, dtype=np.int64), counts, n_splits=n_splits,
                     seed=_integer_seed(seed))


def chunk_fold_counts(y, *, n_splits: int, seed: int, block_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of each class in each fold of one repeat, per stored chunk: a fold's layout, without its rows.

    The folds are :func:`repeat_splits`' (the same rows, bit for bit); only
    their counts leave this function.

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
    counts = np.empty((n_chunks, n_splits, classes.size), dtype=np.int64)
    for chunk in range(n_chunks):  # a chunk at a time: no temporary of the labels' size
        rows = slice(chunk * block_rows, (chunk + 1) * block_rows)
        counts[chunk] = fold_class_counts(test_folds[rows], class_codes(y[rows], classes), n_splits, classes.size)
    return classes, counts


def fold_class_counts(folds, codes, n_splits: int, n_classes: int) -> np.ndarray:
    """``counts[f, k]``: rows of class ``k`` (a position in the classes) in fold ``f``, of int64.

    Examples
    --------
    >>> fold_class_counts(np.array([0, 1, 1]), np.array([1, 1, 0]), 2, 2).tolist()
    [[0, 1], [1, 1]]
    """
    cells = int(n_splits) * int(n_classes)
    flat = np.bincount(np.asarray(folds).astype(np.int64) * int(n_classes) + codes, minlength=cells)
    return flat.reshape(int(n_splits), int(n_classes))


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
        counts[chunk] = np.bincount(class_codes(y[chunk * block_rows:(chunk + 1) * block_rows], classes),
                                    minlength=classes.size)
    return classes, counts


class StratifiedBlockKFold(BaseCrossValidator):
    """dimbsvm's folds as a scikit-learn splitter: stratified, shuffled, and the same for any chunking.

    ``cross_validate(estimator, X, y, cv=StratifiedBlockKFold(5, random_state=0))``
    tests on exactly the rows a dimbsvm job with ``cv: {n_splits: 5}`` and
    repeat seed 0 tests on (:func:`repeat_splits`), so results can be
    compared fold by fold with plain scikit-learn.

    Parameters
    ----------
    n_splits : int, default=5
        Number of folds (at least 2).
    random_state : int, RandomState instance or None, default=None
        The seed of the folds (see :func:`fold_of_rows`).

    Examples
    --------
    >>> y = np.array([0] * 8 + [1] * 4)
    >>> [test.tolist() for _, test in StratifiedBlockKFold(2, random_state=0).split(np.zeros((12, 1)), y)]
    [[2, 5, 6, 7, 9, 10], [0, 1, 3, 4, 8, 11]]
    """

    def __init__(self, n_splits=5, random_state=None):
        self.n_splits = n_splits
        self.random_state = random_state

    def split(self, X, y, groups=None):
        """Yield ``(train, test)`` index arrays of each fold, in fold order."""
        yield from repeat_splits(y, n_splits=self.n_splits, seed=self.random_state)

    def get_n_splits(self, X=None, y=None, groups=None):
        """The number of folds."""
        return self.n_splits

    def _iter_test_indices(self, X=None, y=None, groups=None):  # BaseCrossValidator's abstract method
        for _, test in self.split(X, y, groups):
            yield test


def class_codes(y: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Each label's position in the increasing ``classes`` (a label not among them gets a wrong one: callers check).

    Examples
    --------
    >>> class_codes(np.array([7, 3, 7]), np.array([3, 7])).tolist()
    [1, 0, 1]
    """
    if (y.dtype.kind in "iub" and classes.size and classes[0] >= 0 and classes[-1] < 1 << 20
            and (not y.size or (y.min() >= 0 and y.max() <= classes[-1]))):
        lookup = np.zeros(int(classes[-1]) + 1, dtype=np.int64)
        lookup[classes.astype(np.int64)] = np.arange(classes.size)
        return lookup[y.astype(np.int64, copy=False)] if y.dtype.kind == "b" else lookup[y]
    return np.minimum(np.searchsorted(classes, y), max(classes.size - 1, 0))


def _integer_seed(seed) -> int:
    """``seed`` as the integer the folds are drawn from (scikit-learn's ``random_state`` values)."""
    if isinstance(seed, numbers.Integral):
        return int(seed)
    return int(check_random_state(seed).randint(np.iinfo(np.int32).max))


def _fold_of(test_folds: np.ndarray, fold: int) -> tuple[np.ndarray, np.ndarray]:
    """``(train, test)`` row indices of ``fold``, as scikit-learn's ``split`` builds them from the fold labels."""
    test = test_folds == fold
    return np.flatnonzero(~test), np.flatnonzero(test)


def class_folds(start: int, stop: int, total: int, *, klass: int, n_splits: int, seed: int) -> np.ndarray:
    """The folds of the rows of rank ``start`` up to ``stop`` of one class of ``total`` rows (the definition).

    A class's rows, by their rank among its rows in row order, are cut into
    blocks of :func:`fold_block` rows; in each block every row draws a key
    from a counter-based hash of (``seed``, ``n_splits``, ``klass``, its
    rank), and the block's rows, ordered by key, are dealt to the folds in
    turn from a fold drawn for the block. Every fold so receives exactly a
    block's share of each whole block and the class's last block is dealt
    as evenly as it can be: each class's rows in each fold differ by at most
    one. A row's fold depends on nothing but those four numbers and the
    class's size, so any run of rows (a stored chunk) is assigned alone,
    and the same way whatever the chunking.

    Examples
    --------
    >>> class_folds(0, 10, 10, klass=0, n_splits=5, seed=0).tolist()
    [4, 2, 3, 0, 2, 3, 1, 1, 4, 0]
    >>> np.array_equal(class_folds(3, 7, 10, klass=0, n_splits=5, seed=0), _[3:7])
    True
    """
    start, stop, total, n_splits = int(start), int(stop), int(total), int(n_splits)
    if not 0 <= start <= stop <= total:
        raise ValueError(f"ranks {start}..{stop} are not within a class of {total} rows")
    if start == stop:
        return np.empty(0, dtype=np.int8)
    block = fold_block(n_splits)
    low = start // block * block
    high = min(((stop - 1) // block + 1) * block, total)  # whole blocks around the ranks asked for
    keys = _hashed(_stream(seed, n_splits, klass, 0), np.arange(low, high, dtype=np.uint64))
    ranks = np.empty(high - low, dtype=np.int64)
    whole = (high - low) // block * block  # every block but the class's last is whole
    if whole:
        order = np.argsort(keys[:whole].reshape(-1, block), axis=1, kind="stable")
        np.put_along_axis(ranks[:whole].reshape(-1, block), order, np.arange(block), axis=1)
    if whole < high - low:  # the class's last block: dealt among the rows it has
        order = np.argsort(keys[whole:], kind="stable")
        ranks[whole + order] = np.arange(order.size)
    blocks = np.arange(low // block, -(-high // block), dtype=np.uint64)
    firsts = (_hashed(_stream(seed, n_splits, klass, 1), blocks) % np.uint64(n_splits)).astype(np.int64)
    folds = (ranks + np.repeat(firsts, block)[:high - low]) % n_splits
    return folds[start - low:stop - low].astype(np.int8 if n_splits < 128 else np.int32)


def fold_block(n_splits: int) -> int:
    """Rows of a class dealt together to the folds: a multiple of ``n_splits`` of about :data:`FOLD_BLOCK`."""
    return int(n_splits) * -(-FOLD_BLOCK // int(n_splits))


def folds_of_codes(codes, first_ranks, class_totals, *, n_splits: int, seed: int) -> np.ndarray:
    """The fold of each row of a run of rows (a stored chunk, or all rows): :func:`class_folds` per class.

    Parameters
    ----------
    codes : ndarray of int of shape (n_rows,)
        Each row's class, as its position in the increasing classes.
    first_ranks : array-like of int of shape (n_classes,)
        The rank of the run's first row of each class among all the rows of
        that class (the rows of that class before the run).
    class_totals : array-like of int of shape (n_classes,)
        Rows of each class in the whole data.
    n_splits, seed : int

    Returns
    -------
    ndarray of int8 (int32 for 128 folds or more) of shape (n_rows,)

    Examples
    --------
    >>> codes = np.array([0, 1, 0, 0, 1, 0])
    >>> whole = folds_of_codes(codes, [0, 0], [4, 2], n_splits=2, seed=3)
    >>> halves = [folds_of_codes(codes[:3], [0, 0], [4, 2], n_splits=2, seed=3),
    ...           folds_of_codes(codes[3:], [2, 1], [4, 2], n_splits=2, seed=3)]
    >>> np.array_equal(whole, np.concatenate(halves))
    True
    """
    codes = np.asarray(codes)
    n_classes = len(class_totals)
    folds = np.empty(codes.size, dtype=np.int8 if int(n_splits) < 128 else np.int32)
    if n_classes <= MASK_CLASSES:
        members = (np.flatnonzero(codes == k) for k in range(n_classes))
    else:  # many classes: one stable grouping of the rows by class replaces a comparison pass per class
        order = np.argsort(codes, kind="stable")
        members = np.split(order, np.searchsorted(codes[order], np.arange(1, n_classes)))
    step = fold_block(n_splits) * RANKS_AT_ONCE  # a class's keys made a slice at a time: bounded temporaries
    for k, rows in enumerate(members):
        first = int(first_ranks[k])
        for at in range(0, rows.size, step):
            piece = rows[at:at + step]
            folds[piece] = class_folds(first + at, first + at + piece.size, int(class_totals[k]), klass=k,
                                       n_splits=n_splits, seed=seed)
    return folds


def _stream(seed: int, n_splits: int, klass: int, salt: int) -> int:
    """The hash's starting point for one class of one split (``salt`` 0: the rows' keys, 1: the blocks' folds)."""
    state = splitmix64_int(int(seed))
    state = splitmix64_int(state + int(n_splits))
    return splitmix64_int(state + 2 * int(klass) + int(salt))


def _hashed(stream: int, counters: np.ndarray) -> np.ndarray:
    """SplitMix64 output number ``counter + 1`` of the generator started at ``stream`` (uint64 arithmetic wraps)."""
    return splitmix64(np.uint64(stream) + (counters + np.uint64(1)) * np.uint64(GOLDEN))


def _check_class_counts(counts: np.ndarray, n_splits: int) -> None:
    """scikit-learn's refusal and warning about classes with fewer rows than folds, word for word."""
    min_groups = np.min(counts)
    if np.all(n_splits > counts):
        raise ValueError("n_splits=%d cannot be greater than the number of members in each class." % n_splits)
    if n_splits > min_groups:
        warnings.warn("The least populated class in y has only %d members, which is less than n_splits=%d."
                      % (min_groups, n_splits), UserWarning, stacklevel=3)
