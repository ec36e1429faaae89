"""binary_classes counts integer labels without sorting them: the same classes and counts as np.unique."""

import numpy as np
import pytest

from dimbsvm.svm._base import binary_classes


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64])
def test_integer_labels_give_np_uniques_classes_and_counts(dtype):
    rng = np.random.default_rng(0)
    for low, high, n in ((0, 2, 1_000), (3, 5, 997), (0, 2, 2), (100, 102, 50)):
        y = rng.integers(low, high, n).astype(dtype)
        if np.unique(y).size != 2:
            continue
        classes, counts = binary_classes(y, "X")
        truth = np.unique(y, return_counts=True)
        for mine, theirs in zip((classes, counts), truth):
            assert mine.dtype == theirs.dtype
            np.testing.assert_array_equal(mine, theirs)


@pytest.mark.parametrize("y", [np.array([-1, 1, 1, -1]), np.array(["a", "b", "a"]), np.array([0.0, 1.0, 1.0]),
                               np.array([0, 2**21, 0])])
def test_other_labels_go_through_np_unique(y):
    classes, counts = binary_classes(y, "X")
    truth = np.unique(y, return_counts=True)
    np.testing.assert_array_equal(classes, truth[0])
    np.testing.assert_array_equal(counts, truth[1])


def test_errors_are_unchanged():
    with pytest.raises(ValueError, match="got 3 classes"):
        binary_classes(np.array([0, 1, 2]), "X")
    with pytest.raises(ValueError, match="needs samples of 2 classes; got 1 class"):
        binary_classes(np.array([1, 1, 1]), "X")
    with pytest.raises(ValueError, match="Unknown label type"):
        binary_classes(np.array([0.5, 1.5]), "X")
