"""The report's sections of out-of-fold predictions: curves, confusion, thresholds and calibration.

They are drawn from each fold's :class:`~.fold_summary.FoldSummary`, counts
whose size does not grow with the fold's rows, merged per repeat and over
every repeat: the process drawing a report of 10^8 rows holds what it holds
for 10^4. A summary whose classes have at most
:data:`~.fold_summary.SUMMARY_STEPS` rows in a fold is exact (the curves
are scikit-learn's); above that the page states how far a rate may be off.

The row-level functions here (:func:`chosen_cutoff`, :func:`brier_scores`,
:func:`class_counts`, :func:`threshold_rows`) compute the same numbers from
every row: what the summaries are tested against.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import figures, interactive
from .blocks import Section
from .blocks import fmt as _fmt
from .curves import run_starts
from .fold_summary import SUMMARY_STEPS, FoldSummary, ScoreCounts, merge_summaries

__all__ = ["MATRICES_DRAWN", "brier_scores", "chosen_cutoff", "class_counts", "fold_summaries_of_rows",
           "out_of_fold_sections", "threshold_rows", "threshold_rows_of_counts"]

#: The repeats whose confusion matrices are drawn (the table lists every repeat).
MATRICES_DRAWN = 4


def out_of_fold_sections(oof, names, pos_label, *, n_repeats):
    """The report's sections drawn from the out-of-fold predictions alone (curves, confusion, thresholds, calibration).

    They need neither the final model nor the run's records, so a run draws
    them once every fold is saved, while the final model fits. Safe in a
    thread of its own while nothing else draws (matplotlib's object API;
    Bokeh models of their own document).

    Parameters
    ----------
    oof : dict
        Each fold's summary, ``{(seed, fold): FoldSummary}``
        (:func:`dimbsvm.jobs.oof.load_fold_summaries`), or the rows
        themselves, as :func:`dimbsvm.jobs.oof.load_oof` gives them
        (summarised here, fold by fold).
    names : dict
        ``{label code: class name}`` of every class.
    pos_label : int
        The positive class's code.
    n_repeats : int
        The CV repeats (every row is a test row once per repeat).

    Returns
    -------
    list of Section
    """
    summaries = oof if "score" not in oof else fold_summaries_of_rows(oof, pos_label)
    seeds = sorted({seed for seed, _ in summaries})
    by_repeat = {seed: merge_summaries(summary for (s, _), summary in sorted(summaries.items()) if s == seed)
                 for seed in seeds}
    pooled = merge_summaries(by_repeat.values())
    ranked = len(names) == 2 and pooled.scores is not None
    sections = [_oof_section(by_repeat, pooled, names, pos_label, n_repeats=n_repeats, ranked=ranked)]
    if ranked:
        sections.append(_thresholds_section(by_repeat, pooled, names, pos_label))
    if len(names) == 2 and pooled.calibration is not None:
        sections.append(_calibration_section(by_repeat, pooled, names, pos_label))
    return sections


def fold_summaries_of_rows(oof, pos_label, steps=SUMMARY_STEPS) -> dict:
    """``{(seed, fold): FoldSummary}`` of out-of-fold rows (:func:`dimbsvm.jobs.oof.load_oof`'s columns)."""
    keys = np.stack([np.asarray(oof["seed"]), np.asarray(oof["fold"])], axis=1)
    order = np.lexsort((keys[:, 1], keys[:, 0]))
    pairs, starts = np.unique(keys[order], axis=0, return_index=True)
    summaries = {}
    for (seed, fold), start, stop in zip(pairs, starts, np.append(starts[1:], order.size)):
        rows = order[start:stop]
        summaries[int(seed), int(fold)] = FoldSummary.of(
            oof["y_true"][rows], oof["y_pred"][rows], oof["score"][rows], pos_label,
            proba=oof["proba"][rows] if "proba" in oof else None, steps=steps)
    return summaries


def _positives(summary, pos_label):
    """``(tp, fp, n_pos, n_neg)`` of a summary's predictions."""
    tp = summary.confusion.get((pos_label, pos_label), 0)
    fp = sum(rows for (true, predicted), rows in summary.confusion.items() if predicted == pos_label and true != pos_label)
    n_pos = sum(rows for (true, _), rows in summary.confusion.items() if true == pos_label)
    return tp, fp, n_pos, summary.rows - n_pos


def _confusion_matrix(summary, codes):
    matrix = np.zeros((len(codes), len(codes)), dtype=np.int64)
    at = {code: i for i, code in enumerate(codes)}
    for (true, predicted), rows in summary.confusion.items():
        if true not in at or predicted not in at:
            raise ValueError("a label is not one of the class codes")
        matrix[at[true], at[predicted]] += rows
    return matrix


def _error_note(by_repeat, pooled) -> str:
    """What the page says of counts kept at some thresholds only (nothing where they are exact)."""
    parts = [*by_repeat.values(), pooled]
    if all(part.scores.exact for part in parts):
        return ""
    tpr = max(part.scores.errors[0] / max(part.scores.n_pos, 1) for part in parts)
    fpr = max(part.scores.errors[1] / max(part.scores.n_neg, 1) for part in parts)
    return (f" The curves and the thresholds table are computed from each fold's scores kept at the distinct scores "
            f"where a class's count passes a multiple of 1/{SUMMARY_STEPS} of its rows: a TPR may be low by up to "
            f"{tpr:.2g} and an FPR by up to {fpr:.2g} (the confusion matrices, the predictions' own rates and the "
            "calibration are exact).")


def _oof_section(by_repeat, pooled, names, pos_label, *, n_repeats, ranked):
    section = Section("Out-of-fold predictions")
    section.text(f"Every row is a test row once per repeat ({n_repeats} repeat(s)); the predictions are in the "
                 "run directory's `oof/` files (one `.npz` per fold: row, y_true, y_pred, score)."
                 + (_error_note(by_repeat, pooled) if ranked else ""))
    codes = sorted(names)
    if ranked:  # (curves of two classes and finite scores only)
        curves = {seed: figures.curve_of_counts(summary.scores) for seed, summary in by_repeat.items()}
        points = {seed: figures.operating_point_of_counts(*_positives(summary, pos_label))
                  for seed, summary in by_repeat.items()}
        # no one cutoff gives a repeat's predictions (share < 1): none is shown
        cutoffs = {seed: cutoff if share == 1 else np.nan
                   for seed, (cutoff, share) in ((seed, s.scores.cutoff()) for seed, s in by_repeat.items())}
        share = _positives(pooled, pos_label)[2] / max(pooled.rows, 1)
        section.interactive("roc_pr", lambda: interactive.curves_plots(curves, points, cutoffs, positive_share=share),
                            figures.curves_figure(curves, points, positive_share=share),
                            "ROC and precision-recall curves of the out-of-fold scores, one curve per repeat, "
                            "every out-of-fold row of the repeat pooled (the legends' AUC and average precision are "
                            "those of the pooled rows; the Metrics table's are means over folds, and differ from "
                            "them); dotted: chance; circles: where each "
                            "repeat's predictions sit, at the threshold its folds chose (the Thresholds table "
                            "gives the rates around it). On the page, hovering a curve gives the threshold and "
                            "the rates at that point; a legend entry hides its curve.")
    repeats = [int(seed) for seed in by_repeat]
    matrices = [_confusion_matrix(summary, codes) for summary in by_repeat.values()]
    class_names = [names[c] for c in codes]
    rows = []
    for seed, matrix in zip(repeats, matrices):  # each repeat on its own: every row once, not once per repeat
        totals = np.maximum(matrix.sum(axis=1), 1)
        rows += [[seed, class_names[i]] + [f"{count} ({count / totals[i]:.1%})" for count in matrix[i]]
                 + [int(matrix[i].sum())] for i in range(len(codes))]
    section.table(["repeat", "true class"] + [f"predicted {name}" for name in class_names] + ["rows"], rows)
    shown = repeats[:MATRICES_DRAWN]
    section.figure("confusion", figures.confusion_repeats_figure(matrices[:MATRICES_DRAWN], class_names, shown),
                   "Confusion matrix of each repeat's out-of-fold predictions (rows: true class): the count, and "
                   "its share of the true class's rows."
                   + (f" The first {MATRICES_DRAWN} of {len(repeats)} repeats are drawn; the table has them all."
                      if len(repeats) > MATRICES_DRAWN else ""))
    return section


def _thresholds_section(by_repeat, pooled, names, pos_label):
    section = Section("Thresholds")
    cutoff, share = pooled.scores.cutoff()
    if share == 1 and pooled.highest_unpredicted < 0 and cutoff >= 0:
        where = ("Every fold predicted positive from score 0: the scores are decision values already shifted by "
                 "the threshold each fold chose (see Folds); the chosen row's threshold is the lowest score "
                 "predicted positive")
    elif share == 1:
        where = f"The predictions are the rows whose score is at least {_fmt(cutoff)}"
    else:
        where = (f"The folds chose thresholds of their own: the score cutoff {_fmt(cutoff)} reproduces {share:.2%} "
                 "of the predictions, and the last row is the predictions themselves")
    section.text(f"Positive class: {names[pos_label]}. TPR (recall), FPR, precision, G-mean and F-measure of the "
                 "out-of-fold scores at thresholds around the chosen one (a row is predicted "
                 f"{names[pos_label]} when its score is at least the threshold), every repeat pooled. {where}.")
    rows = threshold_rows_of_counts(pooled.scores, cutoff)
    table = [[_fmt(r["threshold"]), _fmt(r["tpr"]), _fmt(r["fpr"]), _fmt(r["precision"]), _fmt(r["g_mean"]),
              _fmt(r["f_measure"]), "chosen" if r["chosen"] else ""] for r in rows]
    if share < 1:
        tpr, fpr, precision = figures.operating_point_of_counts(*_positives(pooled, pos_label))
        f_measure = 2 * precision * tpr / (precision + tpr) if precision + tpr else 0.0
        table.append(["each fold's own", _fmt(tpr), _fmt(fpr), _fmt(precision), _fmt(float(np.sqrt(tpr * (1 - fpr)))),
                      _fmt(f_measure), "the predictions"])
    section.table(["threshold (score >=)", "TPR (recall)", "FPR", "precision", "G-mean", "F-measure", ""], table)
    return section


def _calibration_section(by_repeat, pooled, names, pos_label):
    section = Section("Calibration")
    share = _positives(pooled, pos_label)[2] / max(pooled.rows, 1)
    brier = {seed: float(summary.calibration["brier_sum"][0] / summary.rows) for seed, summary in by_repeat.items()}
    section.text(f"The out-of-fold probabilities of {names[pos_label]}: the Brier score (mean squared error of the "
                 f"probability; 0 is perfect, {share * (1 - share):.4f} is predicting the class "
                 "share for every row) and the reliability diagram.")
    section.table(["repeat", "Brier score", "rows"],
                  [[seed, _fmt(value), by_repeat[seed].rows] for seed, value in brier.items()]
                  + [["all repeats", _fmt(float(pooled.calibration["brier_sum"][0] / pooled.rows)), pooled.rows]])
    section.figure("reliability",
                   figures.reliability_figure_of_bins({seed: s.calibration for seed, s in by_repeat.items()},
                                                      pooled.calibration["histogram"]),
                   f"Observed share of {names[pos_label]} against the mean predicted probability, in ten bins of "
                   "equal width, per repeat; below, how many rows fall in each bin (log scale).")
    return section


def chosen_cutoff(score, predicted, order=None):
    """The score cutoff that reproduces the predictions best, and the share of rows it reproduces.

    A row is predicted positive at cutoff ``t`` when ``score >= t`` (scikit-learn's
    ``roc_curve`` convention). Where every fold predicted with the same
    threshold on the score (a decision value shifted by the chosen threshold
    is positive from 0), the share is 1; where folds chose thresholds of their
    own on an unshifted score, it is the cutoff closest to all of them.
    ``order``: the rows' stable sort by score (``np.argsort(score,
    kind="stable")``) where the caller has it; computed here where not.

    Examples
    --------
    >>> chosen_cutoff(np.array([-1.0, -0.2, 0.1, 0.5]), np.array([False, False, True, True]))
    (0.1, 1.0)
    """
    score, predicted = np.asarray(score, dtype=float), np.asarray(predicted, dtype=bool)
    order = np.argsort(score, kind="stable") if order is None else order
    s, p = score[order], predicted[order]
    if s.size and np.isnan(s[-1]):
        cutoffs, first = np.unique(s, return_index=True)
    else:
        first = run_starts(s)
        cutoffs = s[first]
    negatives_below = np.concatenate([[0], np.cumsum(~p)])[first]  # predicted negative, and below the cutoff
    positives_below = np.concatenate([[0], np.cumsum(p)])[first]
    agree = negatives_below + (p.sum() - positives_below)
    best = int(np.argmax(agree))
    if (~p).sum() > agree[best]:  # predicting nothing positive agrees more: a cutoff above every score
        return float("inf"), float((~p).sum() / len(p))
    return float(cutoffs[best]), float(agree[best] / len(p))


def threshold_rows(positive, score, cutoff, *, around=2, steps=50):
    """TPR, FPR, precision, G-mean and F-measure at thresholds around ``cutoff``, every repeat pooled.

    The thresholds are the distinct scores (a row is positive when its score is
    at least the threshold); ``around`` of them on each side of ``cutoff``,
    about ``1/steps`` of the distinct scores apart, so that the rows show a
    visible change. A NaN score is below every threshold.

    Returns
    -------
    rows : list of dict
        ``threshold``, ``tpr``, ``fpr``, ``precision``, ``g_mean``,
        ``f_measure``, ``chosen``, by decreasing threshold.
    """
    positive, score = np.asarray(positive, dtype=bool), np.asarray(score, dtype=float)
    scored = ~np.isnan(score)
    counts = ScoreCounts.of(score[scored], positive[scored], np.zeros(int(scored.sum()), dtype=bool),
                            steps=max(score.size, 1))  # a step of one row: every distinct score, exact
    counts = replace(counts, n_pos=int(positive.sum()), n_neg=int((~positive).sum()))
    return threshold_rows_of_counts(counts, cutoff, around=around, steps=steps)


def threshold_rows_of_counts(counts, cutoff, *, around=2, steps=50):
    """:func:`threshold_rows` at the thresholds of a :class:`~.fold_summary.ScoreCounts`."""
    thresholds = counts.thresholds
    at = int(np.searchsorted(-thresholds, -cutoff, side="left")) if np.isfinite(cutoff) else 0
    at = min(at, len(thresholds) - 1)
    step = max(1, len(thresholds) // steps)
    picks = sorted({min(max(at + k * step, 0), len(thresholds) - 1) for k in range(-around, around + 1)})
    rows = []
    for i in picks:
        tp, fp = int(counts.tp[i]), int(counts.fp[i])
        tpr, fpr = tp / max(counts.n_pos, 1), fp / max(counts.n_neg, 1)
        precision = tp / (tp + fp)  # a threshold is a score: at least one row is predicted positive
        f_measure = 2 * precision * tpr / (precision + tpr) if precision + tpr else 0.0
        rows.append({"threshold": float(thresholds[i]), "tpr": tpr, "fpr": fpr, "precision": precision,
                     "g_mean": float(np.sqrt(tpr * (1 - fpr))), "f_measure": f_measure, "chosen": i == at})
    return rows


def brier_scores(positive, proba, repeat) -> dict:
    """The Brier score (mean squared error of the positive class's probability) per repeat, and ``"all"`` pooled."""
    positive, proba = np.asarray(positive, dtype=float), np.asarray(proba, dtype=float)
    out = {int(seed): float(np.mean((proba[repeat == seed] - positive[repeat == seed]) ** 2))
           for seed in np.unique(repeat)}
    out["all"] = float(np.mean((proba - positive) ** 2))
    return out


def class_counts(y_true, y_pred, codes):
    """scikit-learn's ``confusion_matrix(y_true, y_pred, labels=codes)`` of integer class codes, by one ``bincount``.

    Examples
    --------
    >>> class_counts(np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1]), [0, 1]).tolist()
    [[1, 1], [0, 2]]
    """
    codes = np.asarray(codes)
    true_at, pred_at = np.searchsorted(codes, y_true), np.searchsorted(codes, y_pred)
    if not (np.array_equal(codes[np.minimum(true_at, codes.size - 1)], y_true)
            and np.array_equal(codes[np.minimum(pred_at, codes.size - 1)], y_pred)):
        raise ValueError("a label is not one of the class codes")
    return np.bincount(true_at * codes.size + pred_at, minlength=codes.size ** 2).reshape(codes.size, codes.size)
