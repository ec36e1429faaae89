"""The one rule that turns source class labels into integers.

Every reader calls :func:`encode_labels`, so a class map means the same thing
whatever file it came from:

* two classes named ``positive`` and ``negative`` (the KEEL convention):
  ``positive`` -> 1, ``negative`` -> 0, with a warning when ``positive`` is
  not the smaller class (``ecoli-0_vs_1`` is such a file);
* any other two classes: the minority (by count) -> 1; on a tie the second
  class in order (declared order, else sorted order) -> 1;
* more than two classes: declared order, else sorted order -> 0..k-1;
* numbers that are not all whole (``0.25``, ``3.7``) are a continuous
  target, not class labels, and are refused (unless the classes are declared).

Sorted order is numeric when every label is a number (so ``"10"`` follows
``"9"``), otherwise lexicographic.

The binary rule depends on the class balance, so two batches of the same
data may be coded differently. Where codes must not drift (a job that names
its positive class, a retraining scored against its champion), the labels are
re-coded by class name: :func:`positive_class_map` builds the map that names
the positive class, :func:`recode_labels` applies a fixed map to labels coded
by another.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from ..exceptions import DataError

__all__ = ["encode_labels", "label_key", "positive_class_map", "recode_labels"]

logger = logging.getLogger(__name__)


def label_key(value) -> str:
    """Source label as the string used in a class map.

    Integral numbers lose their decimal part (``1.0`` -> ``"1"``, ``+1`` ->
    ``"1"``) so that svmlight's float labels and text labels agree.
    """
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text)
        except ValueError:
            return text
        return _number_key(number) if np.isfinite(number) else text
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return _number_key(float(value)) if np.isfinite(value) else str(value)
    return str(value)


def _label_keys(labels) -> np.ndarray:
    """:func:`label_key` of every label, as an object array.

    Numeric labels are keyed once per distinct value (a column of 10^5 labels
    holds a handful), the same keys as label by label.
    """
    values = np.asarray(labels)
    if values.dtype.kind in "iuf" and values.size:
        distinct, inverse = np.unique(values.ravel(), return_inverse=True)
        return np.asarray([label_key(v) for v in distinct], dtype=object)[inverse.ravel()]
    return np.asarray([label_key(v) for v in np.asarray(labels, dtype=object).ravel()], dtype=object)


def _number_key(number: float) -> str:
    return str(int(number)) if number.is_integer() else repr(number)


def _sorted_classes(keys: Sequence[str]) -> list[str]:
    try:
        return sorted(keys, key=float)
    except ValueError:
        return sorted(keys)


def encode_labels(
    labels,
    *,
    source: str,
    declared: Sequence[str] | None = None,
    binary_minority: bool = True,
) -> tuple[np.ndarray, dict[str, int]]:
    """Map source labels to integer labels and return the class map.

    Parameters
    ----------
    labels : sequence or ndarray of shape (n_samples,)
        Source labels (strings or numbers); converted with :func:`label_key`.
    source : str
        File (or description) named in error and warning messages.
    declared : sequence of str, default=None
        Classes declared by the file header, in order. Every label must be
        one of them. When omitted the classes are the observed labels.
    binary_minority : bool, default=True
        Apply the binary rules above. When False the class order (declared,
        else sorted) gives 0..k-1 for any number of classes.

    Returns
    -------
    y : ndarray of shape (n_samples,), dtype int64
    class_map : dict
        Source label string -> integer label.

    Examples
    --------
    >>> y, class_map = encode_labels(["a", "b", "b", "b"], source="demo")
    >>> y.tolist(), class_map
    ([1, 0, 0, 0], {'b': 0, 'a': 1})
    >>> encode_labels([-1.0, 1.0, -1.0], source="demo")[1]
    {'-1': 0, '1': 1}
    >>> encode_labels([0.5, 1.25, 3.0], source="demo")
    Traceback (most recent call last):
    ...
    dimbsvm.exceptions.DataError: demo: the target is continuous (3 distinct numbers, 2 of them not whole, e.g. 0.5, 1.25), not a class label; dimbsvm classifies, so choose a column of class labels as the target, or bin the values into classes
    """
    keys = _label_keys(labels)
    if keys.size == 0:
        raise DataError(f"{source}: no class labels")
    present, counts = np.unique(keys.astype(str), return_counts=True)
    count_of = dict(zip(present.tolist(), counts.tolist()))

    if declared is not None:
        order = [label_key(c) for c in declared]
        unknown = sorted(set(count_of) - set(order))
        if unknown:
            raise DataError(
                f"{source}: class label(s) {unknown} not among the declared classes {order}"
            )
    else:
        _check_not_continuous(list(count_of), source)
        order = _sorted_classes(list(count_of))

    if binary_minority and len(order) == 2:
        class_map = _binary_map(order, count_of, source)
    else:
        class_map = {c: i for i, c in enumerate(order)}

    y = np.fromiter((class_map[k] for k in keys), dtype=np.int64, count=keys.size)
    return y, class_map


def _check_not_continuous(keys: list[str], source: str) -> None:
    """Refuse labels that are numbers and not all whole: a regression target, not classes."""
    values = []
    for key in keys:
        try:
            values.append(float(key))
        except ValueError:
            return  # a text label: categories
    fractional = sorted(v for v in values if np.isfinite(v) and not float(v).is_integer())
    if fractional:
        shown = ", ".join(f"{v:g}" for v in fractional[:3])
        raise DataError(
            f"{source}: the target is continuous ({len(keys)} distinct numbers, {len(fractional)} of them not "
            f"whole, e.g. {shown}), not a class label; dimbsvm classifies, so choose a column of class labels "
            "as the target, or bin the values into classes")


def _binary_map(order: list[str], count_of: dict[str, int], source: str) -> dict[str, int]:
    if set(order) == {"positive", "negative"}:
        n_pos, n_neg = count_of.get("positive", 0), count_of.get("negative", 0)
        if n_pos > n_neg:
            # Kept as 1 because the file says so; minority-aware code needs to know.
            logger.warning(
                "%s: the class 'positive' is not the minority (%d positive vs %d negative "
                "rows); it is still mapped to 1",
                source,
                n_pos,
                n_neg,
            )
        return {"negative": 0, "positive": 1}
    first, second = order
    minority = first if count_of.get(first, 0) < count_of.get(second, 0) else second
    majority = second if minority == first else first
    return {majority: 0, minority: 1}


def positive_class_map(classes: Sequence[str], positive, *, source: str) -> dict[str, int]:
    """The class map of two classes that codes ``positive`` as 1 and the other class as 0.

    Parameters
    ----------
    classes : sequence of str
        The class names of the data (keys of its class map).
    positive : str or number
        The positive class as it appears in the data; compared by
        :func:`label_key` (``1``, ``1.0`` and ``"+1"`` name the same class).
    source : str
        The data named in error messages.

    Returns
    -------
    class_map : dict
        Class name -> 0 or 1.

    Raises
    ------
    DataError
        ``positive`` is not one of ``classes``, or there are not two classes.

    Examples
    --------
    >>> positive_class_map(["no", "yes"], "no", source="demo")
    {'yes': 0, 'no': 1}
    >>> positive_class_map(["-1", "1"], 1.0, source="demo")
    {'-1': 0, '1': 1}
    >>> positive_class_map(["no", "yes"], "maybe", source="demo")
    Traceback (most recent call last):
    ...
    dimbsvm.exceptions.DataError: demo: the positive class 'maybe' does not occur in the data; its classes are 'no', 'yes'
    """
    names = _sorted_classes([str(c) for c in classes])
    wanted = label_key(positive)
    if wanted not in names:
        raise DataError(f"{source}: the positive class {wanted!r} does not occur in the data; its classes are "
                        f"{_quoted(names)}")
    if len(names) != 2:
        raise DataError(f"{source}: a positive class is named ({wanted!r}), but the data has {len(names)} classes "
                        f"({_quoted(names)}); a positive class applies to two")
    other = next(name for name in names if name != wanted)
    return {other: 0, wanted: 1}


def recode_labels(y, class_map: dict[str, int], target: dict[str, int], *, source: str,
                  reference: str = "the model") -> np.ndarray:
    """Labels coded by ``class_map``, coded by ``target`` instead: the same classes, by name.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Integer labels coded by ``class_map``.
    class_map : dict
        Class name -> code in ``y``.
    target : dict
        Class name -> the code wanted; its classes must be the classes
        present in ``y``, no more and no fewer.
    source : str
        The data named in error messages.
    reference : str, default="the model"
        What ``target`` comes from, named in error messages.

    Returns
    -------
    y : ndarray of shape (n_samples,), dtype int64

    Raises
    ------
    DataError
        A class of ``y`` that ``target`` lacks, or a class of ``target``
        absent from ``y``: scoring either would compare different problems.

    Examples
    --------
    >>> recode_labels(np.array([1, 0, 0]), {"a": 1, "b": 0}, {"a": 0, "b": 1}, source="demo").tolist()
    [0, 1, 1]
    >>> recode_labels(np.array([1, 0]), {"a": 1, "c": 0}, {"a": 0, "b": 1}, source="demo")
    Traceback (most recent call last):
    ...
    dimbsvm.exceptions.DataError: demo: its classes are 'a', 'c', those of the model 'a', 'b' (new: 'c'; missing: 'b'); the labels cannot be coded as the model codes them
    """
    y = np.asarray(y)
    present = set(np.unique(y).tolist())
    names = {name: int(code) for name, code in class_map.items() if int(code) in present}
    if len(names) != len(present):
        unnamed = sorted(present - set(names.values()))
        raise DataError(f"{source}: label code(s) {unnamed} have no class name in its class map")
    if set(names) != set(target):
        new, missing = sorted(set(names) - set(target)), sorted(set(target) - set(names))
        detail = "; ".join(f"{what}: {_quoted(found)}" for what, found in (("new", new), ("missing", missing))
                           if found)
        raise DataError(f"{source}: its classes are {_quoted(_sorted_classes(list(names)))}, those of {reference} "
                        f"{_quoted(_sorted_classes(list(target)))} ({detail}); the labels cannot be coded as "
                        f"{reference} codes them")
    return _apply_codes(y, {code: int(target[name]) for name, code in names.items()})


def _apply_codes(y: np.ndarray, mapping: dict[int, int]) -> np.ndarray:
    out = np.empty(y.shape, dtype=np.int64)
    for old, new in mapping.items():
        out[y == old] = new
    return out


def _quoted(names) -> str:
    return ", ".join(repr(str(n)) for n in names)
