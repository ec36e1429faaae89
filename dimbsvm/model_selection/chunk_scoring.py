"""Task bodies: a store fold's test rows scored a chunk at a time, its record made from counts.

No task holds the fold's test rows together. :func:`score_chunk` scores one
chunk's test rows and keeps them where it ran (writing them as a part of the
fold's out-of-fold file where it reaches the run directory); the small tasks
after it take what the record needs: :func:`tally_chunk` the chunk's
confusion matrix, positive rows' scores and summary, :func:`fold_positives`
the fold's positive scores, :func:`rank_chunk` how the chunk's negative rows
rank against them; :func:`record_from_tallies` adds those up into the
fold's metrics (:mod:`~dimbsvm.model_selection.counted_metrics`, the
computation an in-memory fold's metrics are made by) and writes the fold's
file over its parts. No Dask here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..parallel.sized import SizedResult
from ..fold_data.spans import chunk_rows, span_labels
from .bodies import handed_predictions, scoring_inputs
from .fold_result import AssembledFold, FoldPredictions, FoldResult
from .counted_metrics import RankCounts, confusion_counts, metrics_from_counts, rank_counts, sorted_positive_scores
from .scoring import predict_and_score_rows

__all__ = ["ChunkTally", "ScoredChunk", "fold_positives", "rank_chunk", "record_from_tallies", "score_chunk",
           "tally_chunk"]


@dataclass
class ScoredChunk(SizedResult):
    """One chunk's test rows scored, kept in the worker that scored them.

    Attributes
    ----------
    first : int
        Position of the chunk's first test row among the fold's test rows.
    rows, y_true, y_pred, values : ndarray
        The rows' numbers, labels, predictions and positive-class scores
        (``values`` None where no metric or file needs them).
    proba : ndarray or None
    predict_time : float
    summary : object or None
        The prediction sink's summary of the chunk.
    written : bool
        The sink wrote the rows as a part of the fold's file.
    """

    first: int
    rows: np.ndarray
    y_true: np.ndarray
    y_pred: np.ndarray
    values: np.ndarray | None
    proba: np.ndarray | None
    predict_time: float
    summary: object = None
    written: bool = False


@dataclass(frozen=True)
class ChunkTally(SizedResult):
    """What a fold's record takes of one scored chunk: a few numbers, and its positive rows' scores.

    ``handed``: the chunk's rows for the driver, only where the sink did not
    write them and the run keeps predictions.
    """

    first: int
    n_rows: int
    confusion: np.ndarray
    positives: np.ndarray | None
    predict_time: float
    summary: object
    written: bool
    handed: FoldPredictions | None


def score_chunk(X, assembled: AssembledFold, *, rows, span, y, pos_label, scores, probabilities=False, key=None,
                prediction_sink=None, place=None) -> ScoredChunk:
    """Task body: one chunk's test rows predicted and scored, read once; written as a part where the sink can.

    ``rows``, ``place``: as :func:`~dimbsvm.fold_data.spans.chunk_rows` takes them.
    """
    start = time.perf_counter()
    here = chunk_rows(rows, span, place)
    first, test = here.test_first, here.test
    predictor, data = scoring_inputs(X, assembled.prepared, rows, assembled.final, assembled.model)
    y_pred, values, proba = predict_and_score_rows(predictor, data, test, pos_label=pos_label, scores=scores,
                                                   probabilities=probabilities)
    predict_time = time.perf_counter() - start
    y_true = span_labels(y, span[0], span[1])[test - span[0]]
    chunk = ScoredChunk(first, test, y_true, y_pred, values, proba, predict_time)
    if prediction_sink is not None:
        chunk.summary = prediction_sink.summarise(y_true, y_pred, values, proba)
        chunk.written = bool(prediction_sink.write_part(key, first, test, y_true, y_pred, values, proba))
    return chunk


def tally_chunk(scored: ScoredChunk, *, classes, pos_label, score_metrics: bool, keep_predictions: bool) -> ChunkTally:
    """Task body: the chunk's confusion matrix over ``classes`` and, for ``score_metrics``, its positive rows'
    scores (increasing)."""
    positives = sorted_positive_scores(scored.y_true, scored.values, pos_label) if score_metrics else None
    handed = None
    if keep_predictions and not scored.written:
        handed = FoldPredictions(scored.rows, scored.y_pred, scored.values, scored.proba, y_true=scored.y_true)
    return ChunkTally(scored.first, int(scored.rows.size), confusion_counts(scored.y_true, scored.y_pred, classes),
                      positives, scored.predict_time, scored.summary, scored.written, handed)


def fold_positives(tallies) -> np.ndarray:
    """Task body: every positive test row's score of the fold, increasing."""
    return np.sort(np.concatenate([tally.positives for tally in tallies]))


def rank_chunk(scored: ScoredChunk, positives, *, pos_label, precision_curve: bool) -> RankCounts:
    """Task body: how the chunk's negative rows' scores rank against the fold's positive scores."""
    return rank_counts(scored.values[scored.y_true != pos_label], positives, precision_curve=precision_curve)


def record_from_tallies(assembled: AssembledFold, tallies, *, ranks=None, positives=None, key, n_train, n_test,
                        classes, metrics, pos_label, keep_model=False, keep_predictions=False,
                        prediction_sink=None) -> FoldResult:
    """Task body: the fold's record from its chunks' tallies (in test-row order); as :func:`~dimbsvm.model_selection.bodies.finish_fold`."""
    confusion = sum(tally.confusion for tally in tallies)
    ranked = None
    if ranks:
        ranked = ranks[0]
        for more in ranks[1:]:
            ranked = ranked + more
    record = {"seed": int(key[0]), "fold": int(key[1]), "n_train": int(n_train), "n_test": int(n_test)}
    record.update(metrics_from_counts(confusion, classes, metrics=metrics, pos_label=pos_label, positives=positives,
                                      ranks=ranked, predict_time=sum(tally.predict_time for tally in tallies)))
    if "fit_time" in metrics:
        record["fit_time"] = assembled.fit_time
    record.update(assembled.thresholds)
    model = assembled.model if keep_model else None
    if not keep_predictions:
        return FoldResult(record=record, model=model)
    summaries = [tally.summary for tally in tallies]
    summaries = summaries if tallies and all(s is not None for s in summaries) else None
    if tallies and all(tally.written for tally in tallies) and prediction_sink.finish_parts(
            key, [tally.first for tally in tallies], [tally.n_rows for tally in tallies], summaries):
        return FoldResult(record=record, model=model)
    if any(tally.written for tally in tallies):
        raise RuntimeError(f"fold {key}: some workers wrote their rows' predictions to the run directory and some "
                           "could not reach it; run the job where every worker sees the run directory, or none does")
    joined = FoldPredictions.joined(tally.handed for tally in tallies)
    kept = handed_predictions(prediction_sink, key, joined.rows, joined.y_true, joined.y_pred, joined.score,
                              joined.proba, summaries=summaries)
    return FoldResult(record=record, model=model, predictions=kept)
