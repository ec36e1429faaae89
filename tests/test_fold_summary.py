"""The report's fold summaries (dimbsvm.report.fold_summary) against the same numbers from every row.

Exact where a fold's classes have at most ``steps`` rows (scikit-learn's curves, bit for bit); above that every
count lies between the true count less the stated error and the true count.
"""

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, confusion_matrix, precision_recall_curve, roc_curve

from dimbsvm.report.fold_summary import FoldSummary, ScoreCounts, merge_summaries
from dimbsvm.report.oof_sections import chosen_cutoff, fold_summaries_of_rows, out_of_fold_sections
from dimbsvm.report.figures import curve_of_counts


def _folds(rng, n, n_folds, ties=False):
    y = (rng.random(n) < 0.15).astype(np.int64)
    score = rng.normal(size=n) + 1.5 * y
    if ties:
        score = np.round(score, 1)
    fold = rng.integers(0, n_folds, size=n)
    return y, score, fold


def _counts_at(score, positive, predicted, thresholds):
    """The exact counts at or above each threshold, by brute force."""
    above = score[None, :] >= thresholds[:, None]
    return ((above & positive).sum(1), (above & ~positive).sum(1), (above & predicted).sum(1))


@pytest.mark.parametrize("ties", [False, True])
def test_merged_small_folds_give_scikit_learns_curves_cutoff_and_confusion(ties):
    rng = np.random.default_rng(3)
    y, score, fold = _folds(rng, 3000, 5, ties)
    y_pred = (score >= 0.7).astype(np.int64)
    proba = 1 / (1 + np.exp(-score))
    parts = [FoldSummary.of(y[fold == f], y_pred[fold == f], score[fold == f], 1, proba[fold == f])
             for f in range(5)]
    pooled = merge_summaries(parts)
    assert pooled.scores.exact
    curve = curve_of_counts(pooled.scores)
    fpr, tpr, thresholds = roc_curve(y, score)
    np.testing.assert_array_equal(curve["fpr"], fpr)
    np.testing.assert_array_equal(curve["tpr"], tpr)
    np.testing.assert_array_equal(curve["roc_thresholds"], thresholds)
    precision, recall, pr_thresholds = precision_recall_curve(y, score)
    np.testing.assert_array_equal(curve["precision"], precision)
    np.testing.assert_array_equal(curve["recall"], recall)
    np.testing.assert_array_equal(curve["pr_thresholds"], pr_thresholds)
    assert pooled.scores.cutoff() == chosen_cutoff(score, y_pred == 1)
    matrix = confusion_matrix(y, y_pred, labels=[0, 1])
    assert pooled.confusion == {(t, p): int(matrix[t, p]) for t in (0, 1) for p in (0, 1) if matrix[t, p]}
    assert pooled.calibration["brier_sum"][0] / pooled.rows == pytest.approx(brier_score_loss(y, proba), rel=1e-12)
    assert pooled.highest_unpredicted == score[y_pred == 0].max()


@pytest.mark.parametrize("ties", [False, True])
def test_thinned_counts_are_within_their_stated_error_of_the_exact_ones(ties):
    rng = np.random.default_rng(7)
    y, score, fold = _folds(rng, 40_000, 4, ties)
    positive, predicted = y == 1, score >= 0.9
    parts = [ScoreCounts.of(score[fold == f], positive[fold == f], predicted[fold == f], steps=40) for f in range(4)]
    assert not any(part.exact for part in parts)
    assert all(part.thresholds.size <= 3 * 40 + 4 for part in parts)  # a size set by steps, not by rows
    pooled = ScoreCounts.merged(parts)
    probes = np.concatenate([pooled.thresholds, np.quantile(score, np.linspace(0, 1, 101)), [score.max() + 1]])
    for got, exact, error in zip(pooled.at(probes), _counts_at(score, positive, predicted, probes), pooled.errors):
        assert np.all(got <= exact) and np.all(got >= exact - error)
    assert pooled.errors[0] < positive.sum() / 40 + 4 and pooled.errors[1] < (~positive).sum() / 40 + 4
    # predictions made at one score cutoff are found exactly, however thinned
    assert pooled.cutoff() == chosen_cutoff(score, predicted) == (float(score[predicted].min()), 1.0)


def test_a_summary_survives_its_arrays():
    rng = np.random.default_rng(0)
    y, score, _ = _folds(rng, 500, 1)
    summary = FoldSummary.of(y, (score > 0).astype(int), score, 1, proba=rng.random(500), steps=20)
    again = FoldSummary.from_arrays(summary.to_arrays())
    assert again.confusion == summary.confusion and again.rows == summary.rows
    assert again.scores.errors == summary.scores.errors
    for name in ("thresholds", "tp", "fp", "pp"):
        np.testing.assert_array_equal(getattr(again.scores, name), getattr(summary.scores, name))
    for name, values in summary.calibration.items():
        np.testing.assert_array_equal(again.calibration[name], values)


def _oof(rng, n, repeats=(0, 1), n_folds=3):
    rows = []
    for seed in repeats:
        y, score, fold = _folds(rng, n, n_folds)
        rows.append({"seed": np.full(y.size, seed), "fold": fold, "row": np.arange(y.size), "y_true": y,
                     "y_pred": (score > 0.5).astype(np.int64), "score": score, "proba": 1 / (1 + np.exp(-score))})
    return {name: np.concatenate([r[name] for r in rows]) for name in rows[0]}


def test_thinned_sections_state_their_bound_and_keep_within_it():
    """Folds larger than the summary's steps: the page says how far a rate may be off, and its rates are that close
    to the rates counted from every row at the same thresholds."""
    from dimbsvm.report.fold_summary import merge_summaries

    oof = _oof(np.random.default_rng(11), 30_000)
    summaries = fold_summaries_of_rows(oof, 1, steps=30)
    sections = out_of_fold_sections(summaries, {0: "neg", 1: "pos"}, 1, n_repeats=2)
    pooled = merge_summaries(summaries.values()).scores
    text = " ".join(block[1] for s in sections if s.title == "Out-of-fold predictions" for block in s.blocks
                    if block[0] == "text")
    assert "may be low by up to" in text
    [table] = [block for s in sections if s.title == "Thresholds" for block in s.blocks if block[0] == "table"]
    positive = oof["y_true"] == 1
    for row in table[2]:
        above = oof["score"] >= float(row[0])
        tpr, fpr = (above & positive).sum() / positive.sum(), (above & ~positive).sum() / (~positive).sum()
        assert tpr - pooled.errors[0] / pooled.n_pos - 1e-4 <= float(row[1]) <= tpr + 1e-4
        assert fpr - pooled.errors[1] / pooled.n_neg - 1e-4 <= float(row[2]) <= fpr + 1e-4
    # the confusion and calibration tables are exact however thinned
    brier = [block for s in sections if s.title == "Calibration" for block in s.blocks if block[0] == "table"][0]
    assert float(brier[2][-1][1]) == pytest.approx(brier_score_loss(positive, oof["proba"]), abs=5e-5)


def test_small_folds_draw_no_bound():
    oof = _oof(np.random.default_rng(5), 900)
    sections = out_of_fold_sections(oof, {0: "neg", 1: "pos"}, 1, n_repeats=2)
    assert not any("may be low" in block[1] for s in sections for block in s.blocks if block[0] == "text")


def test_many_parts_merged_then_thinned_keep_within_their_stated_error():
    """Chunks summarised exactly, merged (one sort of their steps), then thinned to a fold's size: every count
    within the merged errors of the exact count, the cutoff of predictions made at one score still exact."""
    rng = np.random.default_rng(4)
    y, score, chunk = _folds(rng, 60_000, 40, ties=True)
    positive, predicted = y == 1, score >= 1.1
    parts = [ScoreCounts.of(score[chunk == c], positive[chunk == c], predicted[chunk == c], steps=10**6)
             for c in range(40)]
    merged = ScoreCounts.merged(parts)
    assert merged.exact
    exact = _counts_at(score, positive, predicted, merged.thresholds)
    for got, truth in zip((merged.tp, merged.fp, merged.pp), exact):
        np.testing.assert_array_equal(got, truth)
    thinned = merged.thinned(steps=25)
    assert thinned.thresholds.size < 4 * 25 + 4 and not thinned.exact
    probes = np.quantile(score, np.linspace(0, 1, 57))
    for got, truth, error in zip(thinned.at(probes), _counts_at(score, positive, predicted, probes),
                                 thinned.errors):
        assert np.all(got <= truth) and np.all(got >= truth - error)
    assert thinned.cutoff() == chosen_cutoff(score, predicted)
