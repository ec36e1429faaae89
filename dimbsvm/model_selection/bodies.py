"""The plain task bodies of a fold: prepare, fit one part, finish.

No Dask here (:mod:`dimbsvm.model_selection.folds` builds the tasks,
:mod:`dimbsvm.distributed` runs them). A fold's estimator is fitted in
*parts* (:mod:`dimbsvm.model_selection.parts`): an ensemble's members, or,
for any other estimator, one part that is the whole estimator. Every body receives the data (an array
or a row handle on a store), the labels and the fold's rows, and reads only
the rows it needs.

1. :func:`prepare_fold` fits the preprocessing and feature stages on the
   fold's training rows, once, for all its parts;
2. :func:`fit_part` fits one part;
3. :func:`finish_fold` assembles the model from its parts and, when the fold
   has test rows, predicts and scores them in one pass over those rows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone
from sklearn.pipeline import make_pipeline

from ..rows import RowSubset, TransformedRows, block_rows_of, cache_blocks, row_blocks, take_rows
from ..store.rows import StoreRows
from ..svm._native_rng import fit_guard
from .parts import Part
from .pipeline import preprocessing_steps
from .scoring import fitted_thresholds, metrics_from_predictions, needs_scores, predict_and_score_rows

__all__ = ["ChunkPass", "FoldRows", "GatheredRows", "MemberBag", "PooledChunk", "PreparedFold",
           "assemble_fold", "chunk_spans", "finish_fold", "fit_part", "fold_rows", "gather_block", "member_bag",
           "minmax_block_range", "model_of", "pooled_oob_block", "prepare_fold", "prepare_from_ranges",
           "range_and_gather_block", "record_fold", "score_block"]


@dataclass(frozen=True)
class FoldRows:
    """The rows of one fold: ``train`` (fitted on) and ``test`` (scored; empty for a final model)."""

    train: np.ndarray
    test: np.ndarray


def fold_rows(y, *, n_splits=None, seed=None, fold=None, test_from=None) -> FoldRows:
    """Task body: the rows of CV fold ``(seed, fold)`` (``fold=None``: every row, for training).

    ``test_from``: a holdout instead, rows before it for training, the rest for testing.

    Computed where the tasks run, from the labels (a store's labels handle
    reads them there), so a fold's index arrays never travel in the task
    graph; the split is deterministic, the same as the client's.
    """
    from .splits import repeat_splits

    if test_from is not None:
        return FoldRows(np.arange(int(test_from)), np.arange(int(test_from), len(y)))
    if fold is None:
        return FoldRows(np.arange(len(y)), np.empty(0, dtype=np.int64))
    return FoldRows(*repeat_splits(np.asarray(y), n_splits=n_splits, seed=seed)[fold])


@dataclass
class PreparedFold:
    """The fitted steps before the estimator, for one fold.

    Attributes
    ----------
    steps : list of transformers
        Imputer, scaler and feature stages, fitted on the training rows.
    train_features : array or None
        With feature stages: the training rows as the stages output them at
        fit time (``fit_transform``; e.g. structural features leave each
        training row out of its own neighbourhood). ``None`` without feature
        stages: parts read raw rows and apply ``steps`` themselves.
    fit_time : float
        Seconds spent fitting the steps.
    stage : StoredStructural or None
        A stored feature stage (:mod:`dimbsvm.model_selection.stages`): the
        estimator sees ``steps`` then the stage, looked up by row number.
    """

    steps: list
    train_features: object
    fit_time: float
    stage: object = None

    def transformer(self):
        return make_pipeline(*self.steps) if self.steps else None


def prepare_fold(X, y, rows: FoldRows, *, scaler, impute, features, stage=None) -> PreparedFold:
    """Task body: fit the fold's preprocessing and feature stages on its training rows.

    Without imputation and feature stages the scaler is fitted with
    ``partial_fit`` a block of rows at a time (exact for min-max scaling; one
    block, i.e. ``fit``, for in-memory data that fits in one), so a store
    larger than memory is never held whole. Otherwise the training rows are
    read at once.
    """
    start = time.perf_counter()
    steps = preprocessing_steps(scaler=scaler, impute=impute, features=features)
    train_features = None
    if not features and impute == "none":
        for step in steps:  # at most one scaler
            for block in row_blocks(rows.train, block_rows_of(X)):
                step.partial_fit(take_rows(X, block))
    else:
        Xt = take_rows(X, rows.train)
        for step in steps:
            Xt = step.fit_transform(Xt, y[rows.train])
        train_features = Xt if features else None
    if stage is not None:
        stage = stage.for_fold(rows.train)  # e.g. the moments of a stored similarity stage over these rows
    return PreparedFold(steps=steps, train_features=train_features, fit_time=time.perf_counter() - start,
                        stage=stage)


def _row_view(X, prepared: PreparedFold, rows: FoldRows):
    """The data as the fold's estimator sees it, read by row number: steps applied (and a stored stage)."""
    if prepared.stage is not None:
        from .stages import FoldStageRows

        return FoldStageRows(X, prepared.steps, prepared.stage, rows.train)
    return TransformedRows(X, prepared.transformer())


def _training_data(X, y, prepared: PreparedFold, rows: FoldRows):
    """``(X, y, rows)`` a part draws from: the stages' output, or raw rows transformed as they are read."""
    if prepared.train_features is not None:
        return prepared.train_features, np.asarray(y)[rows.train], None
    return _row_view(X, prepared, rows), y, rows.train


def _pipeline(prepared: PreparedFold, final):
    """The fold's fitted pipeline; with a stored stage, its standalone steps for new rows, or ``None``."""
    if prepared.stage is None:
        return make_pipeline(*prepared.steps, final)
    steps = prepared.stage.model_steps()
    return make_pipeline(*steps, final) if steps is not None else None


def _scoring(X, prepared: PreparedFold, rows: FoldRows, final, model):
    """``(predictor, data)`` that scores rows of the data: the fitted pipeline on raw rows, or, with a
    stored stage (which looks rows up by number), the final estimator on the fold's row view."""
    if prepared.stage is not None:
        return final, _row_view(X, prepared, rows)
    return model, X


def fit_part(X, y, prepared: PreparedFold, rows: FoldRows, *, estimator, part: Part, gathered=None, bag=None):
    """Task body: fit one part of the fold's estimator; return ``(fitted part, seconds)``.

    An ensemble member (:func:`~dimbsvm.svm.ensemble.fit_member`) reads only
    its bag (and its out-of-bag rows a block at a time); a whole estimator
    reads the fold's training rows. ``gathered``: the member's bag rows, one
    piece per chunk (:func:`gather_block`), so that it reads no store;
    ``bag``: its :func:`member_bag`, so that it does not draw the bag again.
    """
    start = time.perf_counter()
    X_train, y_train, train = _training_data(X, y, prepared, rows)
    if gathered is not None:
        X_train = GatheredRows([getattr(pieces, "pieces", pieces)[part.index] for pieces in gathered],
                               prepared.transformer(), X.shape[0])
    if part.member is not None:
        fitted = part.member.fit(X_train, y_train, part.seed, rows=train, drawn=None if bag is None else bag.drawn)
    else:
        if train is not None:
            X_train, y_train = take_rows(X_train, train), np.asarray(y_train)[train]
        fitted = clone(estimator)
        with fit_guard(fitted):  # threads of one process share LIBLINEAR's generator
            fitted.fit(X_train, y_train)
    return fitted, time.perf_counter() - start


def finish_fold(X, y, prepared: PreparedFold, rows: FoldRows, parts, *, estimator, seeds, key, metrics,
                pos_label, keep_model=False, keep_predictions=False):
    """Task body: the fold's model from its parts, then its test rows predicted and scored in one pass.

    Parameters
    ----------
    parts : list of (fitted part, seconds)
        In part order.
    seeds : ndarray or None
        Member seeds of an ensemble (:func:`parts_of`).
    key : tuple
        ``(seed, fold)`` of a CV fold, written into the record.
    keep_model : bool, default=False
        Also return the fitted model.
    keep_predictions : bool, default=False
        Also return the test rows' predictions and positive-class scores
        (out-of-fold predictions, in test-row order).

    Returns
    -------
    dict
        ``{"record": {...}}`` for a fold with test rows (``seed``, ``fold``,
        ``n_train``, ``n_test``, the metrics, ``fit_time`` if asked, the
        chosen thresholds), ``"model"`` (the fitted pipeline) when
        ``keep_model`` or the fold has no test rows, and ``"predictions"``
        (``{"y_pred": ..., "score": ...}``) when ``keep_predictions``.
    """
    start = time.perf_counter()
    fitted = [part for part, _ in parts]
    if seeds is not None:
        X_train, y_train, train = _training_data(X, y, prepared, rows)
        if train is not None:  # raw rows: the ensemble sees the training rows in fold order
            X_train, y_train = RowSubset(X_train, train), np.asarray(y_train)[train]
        final = clone(estimator).fit_from_members(X_train, y_train, fitted, seeds)
    else:
        [final] = fitted
    model = _pipeline(prepared, final)
    fit_time = prepared.fit_time + sum(seconds for _, seconds in parts) + time.perf_counter() - start
    out = {"model": model} if keep_model or not len(rows.test) else {}
    if not len(rows.test):
        return out
    start = time.perf_counter()
    predictor, data = _scoring(X, prepared, rows, final, model)
    y_pred, scores = predict_and_score_rows(predictor, data, rows.test, pos_label=pos_label,
                                            scores=needs_scores(metrics) or keep_predictions,
                                            block_rows=getattr(X, "block_rows", None))
    predict_time = time.perf_counter() - start
    record = {"seed": int(key[0]), "fold": int(key[1]), "n_train": int(len(rows.train)),
              "n_test": int(len(rows.test))}
    record.update(metrics_from_predictions(np.asarray(y)[rows.test], y_pred, scores, metrics=metrics,
                                           pos_label=pos_label, predict_time=predict_time))
    if "fit_time" in metrics:
        record["fit_time"] = fit_time
    record.update(fitted_thresholds(final))
    out["record"] = record
    if keep_predictions:
        out["predictions"] = {"y_pred": y_pred, "score": scores}
    return out


# --- The same steps cut into one task per stored chunk, for data in a store (row handles).
# A fold of a large store is then not two long single tasks around its members: the
# scaler's statistics and the scoring of the test rows run as one task per chunk.


def chunk_spans(rows, block_rows: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` of the stored chunks that hold some of ``rows``.

    A task gets a span and takes its rows from the fold's shared rows
    (:func:`rows_within`), so no index array travels in the task graph.

    Examples
    --------
    >>> chunk_spans(np.array([0, 3, 4, 9, 10]), 5)
    [(0, 5), (5, 10), (10, 15)]
    """
    chunks = np.unique(np.asarray(rows, dtype=np.int64) // int(block_rows))
    return [(int(c) * int(block_rows), (int(c) + 1) * int(block_rows)) for c in chunks]


def rows_within(rows, span):
    """``(first, stop)`` positions of the sorted ``rows`` that lie in ``span = (start, stop)``."""
    return int(np.searchsorted(rows, span[0])), int(np.searchsorted(rows, span[1]))


def minmax_block_range(X, *, rows: FoldRows, span):
    """Task body: per-feature minimum and maximum of the fold's training rows in one chunk (NaN ignored)."""
    first, stop = rows_within(rows.train, span)
    return _range_of(take_rows(X, rows.train[first:stop]))


def _range_of(block):
    """Per-feature minimum and maximum of a block (NaN ignored) as float64, and its number of rows.

    (The extremes of float32 values, converted, are the extremes of the converted values.)
    """
    return (np.nanmin(block, axis=0).astype(np.float64, copy=False),
            np.nanmax(block, axis=0).astype(np.float64, copy=False), block.shape[0])


def prepare_from_ranges(ranges, *, scaler, rows: FoldRows = None, stage=None) -> PreparedFold:
    """Task body: the fold's ``MinMaxScaler`` from per-chunk ranges (exactly as fitted on all rows).

    The minimum and maximum of the union are the minimum of the minima and the
    maximum of the maxima, and a min-max scaler is a function of them alone.
    """
    from sklearn.preprocessing import MinMaxScaler

    if scaler != "minmax":
        raise ValueError(f"only a min-max scaler is merged from chunk ranges, not {scaler!r}")
    start = time.perf_counter()
    ranges = [getattr(r, "range", r) for r in ranges]  # (a ChunkPass carries its chunk's range)
    low = np.min(np.stack([r[0] for r in ranges]), axis=0)
    high = np.max(np.stack([r[1] for r in ranges]), axis=0)
    fitted = MinMaxScaler().partial_fit(np.stack([low, high]))
    fitted.n_samples_seen_ = int(sum(r[2] for r in ranges))
    if stage is not None:
        stage = stage.for_fold(rows.train)
    return PreparedFold(steps=[fitted], train_features=None, fit_time=time.perf_counter() - start, stage=stage)


@dataclass(frozen=True)
class PooledChunk:
    """The pooled out-of-bag margins of one chunk's training rows (:func:`pooled_oob_block`).

    Attributes
    ----------
    first : int
        Position in ``rows.train`` of the chunk's first training row; the
        arrays cover the positions ``first, first + 1, ...``.
    margins : ndarray of float64
        Each row's mean margin over the members it is out of bag for (NaN: none).
    counts : ndarray of int64
        How many members each row is out of bag for.
    order : ndarray of int64
        ``np.argsort(margins, kind="stable")``: the chunk's sorted run, merged
        with the others' into the fold's order for the threshold search.
    """

    first: int
    margins: np.ndarray
    counts: np.ndarray
    order: np.ndarray


def pooled_oob_block(X, prepared: PreparedFold, rows: FoldRows, parts, *, span) -> PooledChunk:
    """Task body: the pooled out-of-bag margins of one chunk's training rows over an ensemble's members.

    The members were fitted with ``keep_oob="bag"`` and carry their bag's
    rows (``in_bag``, numbered within the fold's training rows); each row of
    the chunk adds the margin of every member whose bag does not hold it, in
    member order, as :func:`~dimbsvm.svm.members.pooled_oob_margins` does,
    and the sum is divided by their number there too. The chunk is read once
    for all members, and its margins are sorted here, in parallel with the
    other chunks, so that the threshold search only merges sorted runs.

    Parameters
    ----------
    span : (int, int)
        The chunk's rows ``start:stop``.

    Returns
    -------
    PooledChunk
    """
    from sklearn import config_context

    from ..svm._base import signed_margins

    first, stop = rows_within(rows.train, span)
    block = _row_view(X, prepared, rows)[rows.train[first:stop]]
    total = np.zeros(stop - first)
    counts = np.zeros(stop - first, dtype=np.int64)
    # every member would check the same block for NaN and infinity: checked once here (a block that
    # fails is left to each member, which raises or, e.g. behind an imputer, handles it as before)
    # (a member saved by an interrupted run before members kept their bags lists its out-of-bag rows)
    outs = [_outside(member.in_bag, first, stop) if member.in_bag is not None
            else ~_outside(member.oob_rows, first, stop) for member, _ in parts]
    with config_context(assume_finite=_all_finite(block)):
        for lo, hi in cache_blocks(block):  # every member's pass over one cache-sized piece at a time
            piece = block[lo:hi]
            for (member, _), out in zip(parts, outs):
                out = out[lo:hi]
                if out.any():  # (margins are row by row: computed on the whole piece, kept where out of bag)
                    total[lo:hi][out] += signed_margins(member.estimator, piece, member.margin_sign)[out]
                    counts[lo:hi][out] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        margins = np.where(counts > 0, total / np.maximum(counts, 1), np.nan)
    return PooledChunk(int(first), margins, counts, np.argsort(margins, kind="stable"))


def _all_finite(block):
    """Whether a dense block holds no NaN or infinity (sparse and other blocks: not known, ``False``)."""
    return isinstance(block, np.ndarray) and block.dtype.kind == "f" and bool(np.isfinite(block).all())


def _outside(sorted_positions, first, stop):
    """Mask over positions ``first:stop``: True where the position is not in ``sorted_positions``."""
    lo, hi = np.searchsorted(sorted_positions, [first, stop])
    outside = np.ones(stop - first, dtype=bool)
    outside[np.asarray(sorted_positions[lo:hi], dtype=np.int64) - first] = False
    return outside


def assemble_fold(X, y, prepared: PreparedFold, rows: FoldRows, parts, *, estimator, seeds, pooled=None):
    """Task body: the fold's fitted model from its parts (:func:`finish_fold` without the scoring).

    ``pooled`` are the :func:`pooled_oob_block` results of every chunk of the
    training rows, for an ensemble whose members kept only their bags.

    Returns
    -------
    dict
        ``{"model", "final", "prepared", "fit_time", "thresholds"}``.
    """
    start = time.perf_counter()
    fitted = [part for part, _ in parts]
    if seeds is not None:
        X_train, y_train, train = _training_data(X, y, prepared, rows)
        if train is not None:
            X_train, y_train = RowSubset(X_train, train), np.asarray(y_train)[train]
        pooled_margins = None
        if pooled is not None:
            pooled_margins = _pooled_margins(pooled, len(rows.train))
        final = clone(estimator).fit_from_members(X_train, y_train, fitted, seeds, pooled_margins=pooled_margins)
    else:
        [final] = fitted
    fit_time = prepared.fit_time + sum(seconds for _, seconds in parts) + time.perf_counter() - start
    return {"model": _pipeline(prepared, final), "final": final, "prepared": prepared, "fit_time": fit_time,
            "thresholds": fitted_thresholds(final)}


def _pooled_margins(chunks, n_rows):
    """``(margins, counts, order)`` of a fold's training rows from its :class:`PooledChunk` results.

    ``order`` is the stable sort order of all margins, merged from the
    chunks' sorted runs (chunks in row order, so equal margins stay in row
    order); it is left out when a row the members scored has a NaN margin.
    """
    from ..svm.margin_order import merged_stable_order

    margins, counts = np.full(n_rows, np.nan), np.zeros(n_rows, dtype=np.int64)
    for chunk in chunks:
        margins[chunk.first:chunk.first + chunk.margins.size] = chunk.margins
        counts[chunk.first:chunk.first + chunk.counts.size] = chunk.counts
    if np.isnan(margins[counts > 0]).any():
        return margins, counts
    chunks = sorted(chunks, key=lambda chunk: chunk.first)
    return margins, counts, merged_stable_order([(chunk.first + chunk.order, chunk.margins[chunk.order])
                                                 for chunk in chunks])


def score_block(X, assembled, *, rows: FoldRows, span, pos_label, scores):
    """Task body: predictions (and positive-class scores) of one chunk's test rows, read once."""
    start = time.perf_counter()
    first, stop = rows_within(rows.test, span)
    predictor, data = _scoring(X, assembled["prepared"], rows, assembled["final"], assembled["model"])
    y_pred, values = predict_and_score_rows(predictor, data, rows.test[first:stop], pos_label=pos_label,
                                            scores=scores)
    return y_pred, values, time.perf_counter() - start


def model_of(assembled):
    """Task body: the result of a fold without test rows (a final model): ``{"model": ...}``."""
    return {"model": assembled["model"]}


def record_fold(y, assembled, rows: FoldRows, scored, *, key, metrics, pos_label, keep_model=False,
                keep_predictions=False):
    """Task body: the fold's record from its scored chunks (in test-row order); as :func:`finish_fold`."""
    y_pred = np.concatenate([part[0] for part in scored])
    values = np.concatenate([part[1] for part in scored]) if needs_scores(metrics) or keep_predictions else None
    record = {"seed": int(key[0]), "fold": int(key[1]), "n_train": int(len(rows.train)),
              "n_test": int(len(rows.test))}
    record.update(metrics_from_predictions(np.asarray(y)[rows.test], y_pred, values, metrics=metrics,
                                           pos_label=pos_label, predict_time=sum(part[2] for part in scored)))
    if "fit_time" in metrics:
        record["fit_time"] = assembled["fit_time"]
    record.update(assembled["thresholds"])
    out = {"record": record}
    if keep_model:
        out["model"] = assembled["model"]
    if keep_predictions:
        out["predictions"] = {"y_pred": y_pred, "score": values}
    return out


# --- Members' bags gathered in one pass over the chunks. A bag of a few thousand rows drawn from a
# large store touches every chunk, so a member reading its own bag decompresses the whole store:
# 16 members, 16 full reads (at 10^7 rows memory bandwidth, not the SVMs, bounded the member stage).
# Instead one task per chunk slices every member's rows out of that chunk, read once.


@dataclass(frozen=True)
class MemberBag:
    """A member's bag drawn ahead of it: the draw (handed to the member) and its distinct dataset rows."""

    drawn: object  # DrawnBag
    rows: np.ndarray


def member_bag(y, rows: FoldRows, *, part: Part) -> MemberBag:
    """Task body: one member's bag, drawn as the member draws it, and its distinct rows (dataset row numbers, sorted).

    :func:`~dimbsvm.svm.members.fit_member` draws its bag first from
    ``RandomState(seed)`` over the positive labels of the fold's training
    rows; this draws the same bag (one task per member: a draw without
    replacement from millions of rows takes a fraction of a second), the
    gather tasks cut its rows out of the chunks and the member task fits on
    it without drawing again.
    """
    train = rows.train
    drawn = part.member.draw_bag(np.asarray(y)[train], part.seed)
    return MemberBag(drawn, train[np.unique(drawn.bag)])


def gather_block(X, bags, *, span):
    """Task body: every member's bag rows that lie in one chunk, read once: ``[(ids, rows), ...]`` per member."""
    in_chunk = _bag_rows_in(bags, span)
    wanted = np.unique(np.concatenate(in_chunk)) if in_chunk else np.empty(0, dtype=np.int64)
    if wanted.size == 0:
        return [(ids, np.empty((0, *X.shape[1:]))) for ids in in_chunk]
    block = take_rows(X, wanted)
    return [(ids, block[np.searchsorted(wanted, ids)]) for ids in in_chunk]


def _bag_rows_in(bags, span):
    """Each :class:`MemberBag`'s rows (dataset row numbers, sorted) that lie in the chunk ``span``."""
    return [bag.rows[slice(*rows_within(bag.rows, span))] for bag in bags]


@dataclass(frozen=True)
class ChunkPass:
    """One read of a training chunk: its rows' min-max range and every member's bag rows in it."""

    range: tuple  # as minmax_block_range returns it
    pieces: list  # as gather_block returns them


def range_and_gather_block(X, bags, *, rows: FoldRows, span) -> ChunkPass:
    """Task body: :func:`minmax_block_range` and :func:`gather_block` of one chunk from a single read.

    The bags are cheap to draw, so waiting for them costs less than reading
    every chunk a second time (a read is most of either task).
    """
    first, stop = rows_within(rows.train, span)
    train_rows = rows.train[first:stop]
    # as stored (float32 stores: half the bytes read, converted and sent); members convert their rows
    block = X.take(train_rows, dtype=None) if isinstance(X, StoreRows) else take_rows(X, train_rows)
    pieces = []
    for ids in _bag_rows_in(bags, span):
        where = np.searchsorted(train_rows, ids)
        if ids.size and (where[-1] >= train_rows.size or np.any(train_rows[where] != ids)):
            raise ValueError(f"bag rows {ids[:5].tolist()}... are not training rows of this fold's chunk {span}")
        pieces.append((ids, block[where]))
    return ChunkPass(_range_of(block), pieces)


class GatheredRows:
    """A member's bag rows gathered from the chunks, read as a row handle (only these rows exist).

    ``rows[ids]`` returns the rows with those dataset row numbers, passed
    through the fold's fitted steps, as ``TransformedRows(store_rows, steps)``
    would, without reading the store.
    """

    def __init__(self, pieces, transformer, n_rows):
        ids = [p[0] for p in pieces if len(p[0])]
        data = [p[1] for p in pieces if len(p[0])]
        self.ids = np.concatenate(ids) if ids else np.empty(0, dtype=np.int64)
        self.data = np.concatenate(data).astype(np.float64) if data else np.empty((0, 0))
        self.transformer = transformer
        self.shape = (int(n_rows), *self.data.shape[1:])

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, ids):
        ids = np.asarray(ids, dtype=np.int64)
        where = np.searchsorted(self.ids, ids)
        if ids.size and (where.max() >= self.ids.size or np.any(self.ids[where] != ids)):
            raise IndexError("a row outside the member's bag was asked for")
        block = self.data[where]
        return block if self.transformer is None else self.transformer.transform(block)
