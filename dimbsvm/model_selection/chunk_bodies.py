"""A fold's steps cut into one task per stored chunk, for data in a store (row handles).

A fold of a large store is then not two long single tasks around its fit:
the scaler's statistics (:func:`minmax_block_range`, merged exactly by
:func:`prepare_from_ranges`) and the scoring of the test rows
(:mod:`~dimbsvm.model_selection.chunk_scoring`) run as one task per chunk,
around :func:`assemble_fold`. No Dask here.
"""

from __future__ import annotations

import functools
import time

import numpy as np
import scipy.sparse as sp

from ..fold_data.prepared import FoldRows, PreparedFold
from ..fold_data.spans import ChunkPlace, block_range, chunk_rows
from ..rows import take_rows
from .bodies import fold_pipeline
from .fold_result import AssembledFold, FoldResult
from .scoring import fitted_thresholds

__all__ = ["MERGED_SCALERS", "assemble_fold", "minmax_block_range", "model_of", "prepare_from_ranges"]


def minmax_block_range(X, *, rows, span, place: ChunkPlace | None = None):
    """Task body: per-feature minimum and maximum of the fold's training rows in one chunk (NaN ignored).

    ``rows``, ``place``: as :func:`~dimbsvm.fold_data.spans.chunk_rows` takes them.
    """
    return block_range(take_rows(X, chunk_rows(rows, span, place).train))

#: Scalers that are functions of the per-feature extremes alone, and so merged exactly from chunks' ranges.
MERGED_SCALERS = ("minmax", "maxabs")


def prepare_from_ranges(ranges, *, scaler, rows: FoldRows = None, stage=None) -> PreparedFold:
    """Task body: the fold's ``MinMaxScaler`` or ``MaxAbsScaler`` from per-chunk ranges (exactly as fitted on all
    rows).

    The minimum and maximum of the union are the minimum of the minima and the
    maximum of the maxima; a min-max scaler is a function of them alone, and a
    max-abs scaler of ``max(|minimum|, |maximum|)``. Sparse ranges (of CSR
    chunks) are merged sparse.
    """
    from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler

    if scaler not in MERGED_SCALERS:
        raise ValueError(f"only {' and '.join(MERGED_SCALERS)} scalers are merged from chunk ranges, not {scaler!r}")
    start = time.perf_counter()
    ranges = [getattr(r, "range", r) for r in ranges]  # (a ChunkPass carries its chunk's range)
    ranges = [r.read() if hasattr(r, "read") else r for r in ranges]  # (a large one kept on disk by the read)
    if sp.issparse(ranges[0][0]):
        low = functools.reduce(lambda a, b: a.minimum(b), [r[0] for r in ranges]).toarray().ravel()
        high = functools.reduce(lambda a, b: a.maximum(b), [r[1] for r in ranges]).toarray().ravel()
    else:
        low = np.min(np.stack([r[0] for r in ranges]), axis=0)
        high = np.max(np.stack([r[1] for r in ranges]), axis=0)
    if scaler == "minmax":
        fitted = MinMaxScaler().partial_fit(np.stack([low, high]))
    else:
        fitted = MaxAbsScaler().partial_fit(np.maximum(np.abs(low), np.abs(high))[None, :])
    fitted.n_samples_seen_ = int(sum(r[2] for r in ranges))
    if stage is not None:
        stage = stage.for_fold(rows.train)
    return PreparedFold(steps=[fitted], train_features=None, fit_time=time.perf_counter() - start, stage=stage)


def assemble_fold(prepared: PreparedFold, fitted) -> AssembledFold:
    """Task body: the fold's fitted model from its fitted estimator (:func:`finish_fold` without the scoring).

    ``fitted``: ``(fitted estimator, seconds)``, from the fold's fit task or
    an estimator's own fit tasks (:class:`~dimbsvm.fold_data.context.FoldFit`).
    """
    final, seconds = fitted
    model = fold_pipeline(prepared, final)
    return AssembledFold(model=model, prepared=prepared, fit_time=prepared.fit_time + seconds,
                         thresholds=fitted_thresholds(final), final_alone=final if model is None else None)


def model_of(assembled: AssembledFold) -> FoldResult:
    """Task body: the result of a fold without test rows (a final model): its model alone."""
    return FoldResult(model=assembled.model)
