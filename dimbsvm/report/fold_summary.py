"""What the report needs of a fold's out-of-fold predictions, in a size that does not grow with the fold's rows.

The report's curves, thresholds table, confusion matrices and calibration
are all counts: of the rows at or above a score threshold that are positive,
negative or predicted positive; of (true class, predicted class) pairs; of
rows and positives per probability bin. Counts of folds add up, so the task
that scores a fold summarises its rows (:meth:`FoldSummary.of`) and the
report merges the summaries of a repeat's folds (:func:`merge_summaries`),
without any process holding every row's score.

The score counts are kept at every distinct score of the fold while a class
has at most :data:`SUMMARY_STEPS` rows in it (then every count is exact, and
the curves are scikit-learn's); above that, at the distinct scores where a
count crosses a multiple of its class's rows over ``SUMMARY_STEPS``. Between
two kept thresholds a count is taken at the kept one above: it misses at most
``*_error`` rows (:class:`ScoreCounts`), so a pooled rate is within about
``1 / SUMMARY_STEPS`` of the exact one, and the report says so on the page.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .curves import threshold_counts
from .figures import probability_bins, stable_argsort

__all__ = ["SUMMARY_STEPS", "FoldSummary", "ScoreCounts", "merge_summaries"]

#: Rows of a class per kept threshold are at most that class's rows / SUMMARY_STEPS: a fold's summary holds at
#: most ~3 x SUMMARY_STEPS thresholds (~150 kB), and a curve's rate is within ~1/SUMMARY_STEPS of exact.
SUMMARY_STEPS = 2000

#: Equal-width bins of the positive class's probability on [0, 1], as the reliability diagram draws them.
PROBABILITY_BINS = 10


@dataclass(frozen=True)
class ScoreCounts:
    """Rows with a score at least each of some thresholds: positive, negative, and predicted positive.

    Attributes
    ----------
    thresholds : ndarray of float64
        Distinct scores, decreasing.
    tp, fp, pp : ndarray of int64
        At each threshold, the positive rows, the negative rows and the rows
        predicted positive whose score is at least it.
    n_pos, n_neg, n_pp : int
        Those counts over every row.
    errors : tuple of int
        For ``tp``, ``fp`` and ``pp``: the most rows the count at a score
        between two thresholds misses when taken at the threshold above
        (0: every distinct score is a threshold, and every count exact).
    """

    thresholds: np.ndarray
    tp: np.ndarray
    fp: np.ndarray
    pp: np.ndarray
    n_pos: int
    n_neg: int
    n_pp: int
    errors: tuple = (0, 0, 0)

    @classmethod
    def of(cls, score, positive, predicted, steps=SUMMARY_STEPS) -> "ScoreCounts":
        """The counts of finite scores, kept at enough thresholds that a count misses under ``1/steps`` of its rows.

        Examples
        --------
        >>> counts = ScoreCounts.of(np.array([0.2, 0.9, 0.5]), np.array([0, 1, 1], bool), np.array([0, 1, 1], bool))
        >>> counts.thresholds.tolist(), counts.tp.tolist(), counts.fp.tolist(), counts.errors
        ([0.9, 0.5, 0.2], [1, 2, 2], [0, 0, 1], (0, 0, 0))
        """
        score = np.asarray(score, dtype=np.float64)
        order = stable_argsort(score)
        s = score[order]
        p = np.asarray(positive, dtype=bool)[order]
        q = np.asarray(predicted, dtype=bool)[order]
        del order
        n, n_pos, n_pp = s.size, int(p.sum()), int(q.sum())
        sizes = (n_pos, n - n_pos, n_pp)
        widths = [max(1, -(-size // steps)) for size in sizes]  # ceil(size / steps) rows per kept threshold
        if max(widths) == 1:  # a fold of at most 2 x steps rows: every distinct score, the exact counts
            return cls._every_threshold(s, p, q)
        # the rows from the top (highest score) down at which a count reaches a multiple of its width: a distinct
        # score whose count crosses a multiple is one whose run of equal scores holds such a row. Counts of the
        # top rows in the narrowest integers they fit: a fold of 10^8 rows is sorted and counted in one task
        dtype = np.int32 if n < 2**31 else np.int64
        top = {"tp": np.cumsum(p[::-1], dtype=dtype), "pp": np.cumsum(q[::-1], dtype=dtype)}
        top["fp"] = np.arange(1, n + 1, dtype=dtype) - top["tp"]
        marked = [np.searchsorted(top[name], np.arange(width, size + 1, width), side="left")
                  for name, width, size in zip(("tp", "fp", "pp"), widths, sizes)]
        rows = n - 1 - np.concatenate(marked)  # the marked rows' positions in increasing score
        # the runs at the ends, and where the predictions change class (a cutoff that reproduces them is exact)
        ends = [0, n - 1]
        if 0 < n_pp < n:
            ends += [int(np.argmax(q)), n - 1 - int(np.argmax(~q[::-1]))]
        values = np.unique(s[np.concatenate([rows, ends])])[::-1]  # the kept thresholds, decreasing
        first = np.searchsorted(s, values, side="left")  # each kept run's first row
        last = np.searchsorted(s, values, side="right") - 1
        above = n - first  # rows at or above each threshold
        tp, pp = (top[name][above - 1].astype(np.int64) for name in ("tp", "pp"))
        return cls(s[last], tp, above - tp, pp, *sizes, errors=tuple(width - 1 for width in widths))

    @classmethod
    def _every_threshold(cls, s, p, q) -> "ScoreCounts":
        """The exact counts at every distinct score of rows sorted by increasing score ``s`` (the report's
        :func:`~.curves.threshold_counts`, of the positives and of the rows predicted positive)."""
        if s.size == 0:
            empty = np.empty(0, dtype=np.int64)
            return cls(np.empty(0), empty, empty, empty, 0, 0, 0)
        fp, tp, thresholds = threshold_counts(s, p)
        pp = threshold_counts(s, q)[1]
        n_pos, n_pp = int(p.sum()), int(q.sum())
        return cls(thresholds.astype(np.float64), tp.astype(np.int64), fp.astype(np.int64), pp.astype(np.int64),
                   n_pos, s.size - n_pos, n_pp)

    def at(self, thresholds) -> tuple:
        """``(tp, fp, pp)`` at each of ``thresholds``, each taken at the smallest kept threshold at least it."""
        # the kept thresholds are decreasing: those at least t are the first searchsorted(-kept, -t, "right")
        above = np.searchsorted(-self.thresholds, -np.asarray(thresholds, dtype=np.float64), side="right")
        return tuple(np.concatenate([[0], values])[above] for values in (self.tp, self.fp, self.pp))

    @property
    def exact(self) -> bool:
        return not any(self.errors)

    def cutoff(self):
        """The score cutoff whose predictions (score at least it) agree with the most rows' predictions.

        Returns ``(cutoff, share of rows agreeing)``; ``inf`` where
        predicting no row positive agrees more. Ties: the lowest cutoff (as
        :func:`~dimbsvm.report.run_report.chosen_cutoff`).
        """
        n = self.n_pos + self.n_neg
        # agreeing: predicted positive at or above the cutoff, plus predicted negative below it
        agree = self.pp + (n - self.n_pp) - (self.tp + self.fp - self.pp)
        if agree.size == 0 or (n - self.n_pp) > agree.max():
            return float("inf"), float((n - self.n_pp) / max(n, 1))
        best = agree.size - 1 - int(np.argmax(agree[::-1]))  # of equal agreement, the lowest threshold
        return float(self.thresholds[best]), float(agree[best] / n)

    def to_arrays(self) -> dict:
        return {"thresholds": self.thresholds, "tp": self.tp, "fp": self.fp, "pp": self.pp,
                "sizes": np.array([self.n_pos, self.n_neg, self.n_pp], dtype=np.int64),
                "errors": np.array(self.errors, dtype=np.int64)}

    @classmethod
    def from_arrays(cls, arrays) -> "ScoreCounts":
        return cls(np.asarray(arrays["thresholds"], dtype=np.float64),
                   *(np.asarray(arrays[name], dtype=np.int64) for name in ("tp", "fp", "pp")),
                   *map(int, arrays["sizes"]), errors=tuple(map(int, arrays["errors"])))

    @classmethod
    def merged(cls, parts) -> "ScoreCounts":
        """The counts of every part's rows together, at every part's thresholds; the parts' errors add up.

        A part's count at a threshold is its count at its smallest kept
        threshold at least it: the sum of the steps its count takes at its
        kept thresholds from the top down to there. So the parts' steps,
        sorted together by threshold and summed from the top, are the merged
        counts (one sort of every part's thresholds, however many parts).
        """
        parts = list(parts)
        values = np.concatenate([part.thresholds for part in parts])
        order = np.argsort(-values, kind="stable")
        values = values[order]
        # the last of each run of equal thresholds carries every step taken down to it
        last = np.flatnonzero(np.append(values[1:] != values[:-1], True)) if values.size else np.empty(0, int)
        counts = []
        for name in ("tp", "fp", "pp"):
            steps = np.concatenate([np.diff(getattr(part, name), prepend=0) for part in parts])
            counts.append(np.cumsum(steps[order])[last] if values.size else np.empty(0, np.int64))
        return cls(values[last], *counts, *(sum(getattr(p, name) for p in parts) for name in ("n_pos", "n_neg", "n_pp")),
                   errors=tuple(sum(e) for e in zip(*(part.errors for part in parts))))

    def thinned(self, steps=SUMMARY_STEPS) -> "ScoreCounts":
        """These counts kept at the thresholds where a count crosses a multiple of its class's rows / ``steps``.

        The rule of :meth:`of`, applied to counts already summarised: each
        count's error grows by the width it is thinned to (nothing is
        dropped where every width is one row).
        """
        sizes = (self.n_pos, self.n_neg, self.n_pp)
        widths = [max(1, -(-size // steps)) for size in sizes]
        if max(widths) == 1 or self.thresholds.size <= 2:
            return self
        kept = np.zeros(self.thresholds.size, dtype=bool)
        kept[[0, -1]] = True
        for values, width in zip((self.tp, self.fp, self.pp), widths):
            level = values // width
            kept[1:] |= level[1:] != level[:-1]
        # where the predictions change class: the highest threshold with every predicted row at or above it, and
        # the next below it, so that predictions made at one cutoff are still found exactly
        whole = np.flatnonzero(self.pp == self.n_pp)
        if whole.size:
            kept[int(whole[0]):int(whole[0]) + 2] = True
        return ScoreCounts(self.thresholds[kept], self.tp[kept], self.fp[kept], self.pp[kept], *sizes,
                           errors=tuple(e + w - 1 for e, w in zip(self.errors, widths)))


@dataclass(frozen=True)
class FoldSummary:
    """One fold's (or several folds') out-of-fold predictions as the report uses them.

    Attributes
    ----------
    rows : int
    confusion : dict
        ``{(true code, predicted code): rows}``.
    scores : ScoreCounts or None
        None where a score is not finite (the report then draws no curve).
    highest_unpredicted : float
        The highest score of a row predicted negative (``-inf`` if none).
    calibration : dict of ndarray or None
        Per probability bin (:data:`PROBABILITY_BINS` of equal width):
        ``rows``, ``positives`` and ``proba_sum`` (the bins of scikit-learn's
        ``calibration_curve``), ``histogram`` (numpy's), and ``brier_sum``
        (the squared errors' sum, one value); None without probabilities.
    """

    rows: int
    confusion: dict
    scores: ScoreCounts | None
    highest_unpredicted: float
    calibration: dict | None = None

    @classmethod
    def of(cls, y_true, y_pred, score, pos_label, proba=None, steps=SUMMARY_STEPS) -> "FoldSummary":
        """The summary of a fold's test rows: their label codes, score and (optionally) positive-class probability."""
        y_true, y_pred, score = np.asarray(y_true), np.asarray(y_pred), np.asarray(score, dtype=np.float64)
        positive, predicted = y_true == pos_label, y_pred == pos_label
        confusion = _pair_counts(y_true, y_pred)
        finite = bool(np.isfinite(score).all())
        scores = ScoreCounts.of(score, positive, predicted, steps) if finite else None
        unpredicted = score[~predicted]
        calibration = None
        if proba is not None:
            proba = np.asarray(proba, dtype=np.float64)
            calibration = probability_bins(positive, proba, PROBABILITY_BINS) | {
                "histogram": np.histogram(proba, bins=np.linspace(0.0, 1.0, PROBABILITY_BINS + 1))[0].astype(np.int64),
                "brier_sum": np.array([np.sum((proba - positive) ** 2)])}
        return cls(rows=int(y_true.size), confusion=confusion, scores=scores,
                   highest_unpredicted=float(unpredicted.max()) if unpredicted.size else float("-inf"),
                   calibration=calibration)

    def thinned(self, steps=SUMMARY_STEPS) -> "FoldSummary":
        """This summary with its score counts thinned (:meth:`ScoreCounts.thinned`); everything else exact."""
        if self.scores is None:
            return self
        return dataclasses.replace(self, scores=self.scores.thinned(steps))

    def to_arrays(self, prefix="summary_") -> dict:
        """The summary as named arrays (what a ``.npz`` file holds), every name starting with ``prefix``."""
        pairs = np.array([[t, p, n] for (t, p), n in sorted(self.confusion.items())], dtype=np.int64).reshape(-1, 3)
        arrays = {"rows": np.array(self.rows, dtype=np.int64), "confusion": pairs,
                  "highest_unpredicted": np.array(self.highest_unpredicted)}
        if self.scores is not None:
            arrays |= {f"scores_{name}": values for name, values in self.scores.to_arrays().items()}
        if self.calibration is not None:
            arrays |= {f"calibration_{name}": values for name, values in self.calibration.items()}
        return {prefix + name: values for name, values in arrays.items()}

    @classmethod
    def from_arrays(cls, arrays, prefix="summary_") -> "FoldSummary":
        """The summary :meth:`to_arrays` wrote (``arrays``: a mapping such as an open ``.npz`` file)."""
        names = [name[len(prefix):] for name in arrays if name.startswith(prefix)]
        read = {name: np.asarray(arrays[prefix + name]) for name in names}
        scores = {name[len("scores_"):]: v for name, v in read.items() if name.startswith("scores_")}
        calibration = {name[len("calibration_"):]: v for name, v in read.items() if name.startswith("calibration_")}
        return cls(rows=int(read["rows"]), confusion={(int(t), int(p)): int(n) for t, p, n in read["confusion"]},
                   scores=ScoreCounts.from_arrays(scores) if scores else None,
                   highest_unpredicted=float(read["highest_unpredicted"]), calibration=calibration or None)


def _pair_counts(y_true, y_pred) -> dict:
    """``{(true code, predicted code): rows}`` of two arrays of class codes, without sorting the rows."""
    low, high = min(y_true.min(initial=0), y_pred.min(initial=0)), max(y_true.max(initial=0), y_pred.max(initial=0))
    if np.issubdtype(np.result_type(y_true, y_pred), np.integer) and low >= 0 and high < 2**10:
        codes = np.arange(high + 1)  # label codes: counted in place, no sort
    else:
        codes = np.union1d(np.unique(y_true), np.unique(y_pred))
    k = codes.size
    pairs = np.bincount(np.searchsorted(codes, y_true) * k + np.searchsorted(codes, y_pred), minlength=k * k)
    return {(int(codes[i // k]), int(codes[i % k])): int(rows) for i, rows in enumerate(pairs) if rows}


def merge_summaries(summaries) -> FoldSummary:
    """The summary of every given fold's rows together (a repeat's folds, or every repeat pooled)."""
    summaries = list(summaries)
    confusion = {}
    for summary in summaries:
        for pair, rows in summary.confusion.items():
            confusion[pair] = confusion.get(pair, 0) + rows
    scored = [summary.scores for summary in summaries]
    calibrated = [summary.calibration for summary in summaries]
    calibration = None
    if all(c is not None for c in calibrated):
        calibration = {name: sum(c[name] for c in calibrated) for name in calibrated[0]}
    return FoldSummary(rows=sum(summary.rows for summary in summaries), confusion=confusion,
                       scores=ScoreCounts.merged(scored) if all(s is not None for s in scored) else None,
                       highest_unpredicted=max(summary.highest_unpredicted for summary in summaries),
                       calibration=calibration)
