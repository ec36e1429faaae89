"""The stored chunks a fold's rows fall in: against the per-row definition."""

import numpy as np
import pytest

from dimbsvm.fold_data.spans import chunk_spans, rows_within


@pytest.mark.parametrize("seed", range(5))
def test_chunk_spans_are_the_chunks_of_the_rows(seed):
    rng = np.random.default_rng(seed)
    for _ in range(60):
        n = int(rng.integers(1, 3_000))
        block_rows = int(rng.integers(1, 400))
        rows = np.sort(rng.choice(3 * n, size=n, replace=False))
        truth = [(int(c) * block_rows, (int(c) + 1) * block_rows) for c in np.unique(rows // block_rows)]
        spans = chunk_spans(rows, block_rows)
        assert spans == truth
        # every row lies in exactly one span, and every span holds a row
        assert sum(stop - first for first, stop in (rows_within(rows, span) for span in spans)) == n
        assert all(stop > first for first, stop in (rows_within(rows, span) for span in spans))


def test_no_rows_no_spans():
    assert chunk_spans(np.empty(0, dtype=np.int64), 10) == []
