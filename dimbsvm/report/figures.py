"""The figures of a run report, drawn from plain arrays into PNG bytes.

Matplotlib's object API (``Figure`` with the Agg canvas), never ``pyplot``:
no global state, no display needed, safe in a worker or a batch job. The ROC
and precision-recall curves are drawn as scikit-learn's displays draw them,
from curves computed here: a report's figures import matplotlib, not
scikit-learn, so a process that only draws them starts quickly
(:mod:`dimbsvm.jobs.report_drawing`).
"""

from __future__ import annotations

import io

import numpy as np

from .curves import precision_recall_from_sorted, roc_from_sorted, spaced_vertices

__all__ = ["average_precision", "calibration_bins", "confusion_repeats_figure", "curve_of_counts", "curves_figure",
           "fold_spread_figure", "member_thresholds_figure", "operating_point", "operating_point_of_counts", "png",
           "precision_recall_and_average", "probability_bins", "reliability_figure", "reliability_figure_of_bins", "repeat_curves",
           "roc_area", "roc_pr_figure", "rows_by_score", "score_orders", "stable_argsort", "step_vertices",
           "threshold_figure"]

#: Figure size in inches for one panel; 100 dpi.
PANEL = (4.6, 3.8)


def _figure(n_panels=1):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(PANEL[0] * n_panels, PANEL[1]), dpi=100, layout="constrained")
    axes = [fig.add_subplot(1, n_panels, i + 1) for i in range(n_panels)]
    return fig, axes


def png(fig) -> bytes:
    """The figure as PNG bytes (Agg canvas)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def roc_pr_figure(positive, score, repeat, predicted=None, curves=None):
    """ROC and precision-recall curves of out-of-fold scores, one curve per CV repeat.

    Parameters
    ----------
    positive : ndarray of bool
        Whether each out-of-fold row is of the positive (minority) class.
    score : ndarray of float
        Its positive-class score.
    repeat : ndarray
        The CV repeat (seed) of each row: every row is scored once per repeat.
    predicted : ndarray of bool, default=None
        Whether each row was predicted positive (at the threshold each fold
        chose): that operating point is marked on both curves of its repeat.
    curves : dict, default=None
        :func:`repeat_curves` of these scores where the caller has them;
        computed here where it has not.
    """
    curves = curves if curves is not None else repeat_curves(positive, score, repeat)
    points = None
    if predicted is not None:
        points = {seed: operating_point(positive[repeat == seed], predicted[repeat == seed]) for seed in curves}
    return curves_figure(curves, points, positive_share=float(np.mean(positive)))


def curves_figure(curves, points=None, *, positive_share):
    """ROC and precision-recall curves, one per CV repeat (:func:`roc_pr_figure`, from the curves).

    Parameters
    ----------
    curves : dict
        ``{repeat: curve}``, as :func:`repeat_curves` gives them.
    points : dict, default=None
        ``{repeat: (TPR, FPR, precision)}`` of each repeat's predictions
        (:func:`operating_point`), marked on its curves.
    positive_share : float
        The positive class's share of the rows: the precision of chance.
    """
    fig, (roc, pr) = _figure(2)
    for i, seed in enumerate(curves):  # every repeat, in order (np.unique of millions of rows, done once)
        if points is not None:  # the point the predictions sit at: what the chosen threshold gives
            tpr, fpr, precision = points[seed]
            label = "chosen threshold" if i == 0 else None
            roc.plot([fpr], [tpr], "o", color=f"C{i}", markeredgecolor="k", markersize=7, zorder=5, label=label)
            pr.plot([tpr], [precision], "o", color=f"C{i}", markeredgecolor="k", markersize=7, zorder=5, label=label)
        curve = curves[seed]
        # what scikit-learn's RocCurveDisplay and PrecisionRecallDisplay draw: the line and its legend label;
        # a curve of more than MAX_POINTS vertices (millions of out-of-fold rows) from MAX_POINTS of them, as the
        # page draws it: the same path at this size, for a fraction of the drawing
        kept = spaced_vertices(curve["fpr"], curve["tpr"])
        roc.plot(curve["fpr"][kept], curve["tpr"][kept], label=f"repeat {seed} (AUC = {curve['roc_auc']:0.2f})")
        drawn = step_vertices(curve["recall"])  # the same step path from ~2 vertices per recall value, not ~1 per row
        drawn = drawn[spaced_vertices(curve["recall"][drawn], curve["precision"][drawn])]
        pr.plot(curve["recall"][drawn], curve["precision"][drawn], drawstyle="steps-post",
                label=f"repeat {seed} (AP = {curve['average_precision']:0.2f})")
    for ax in (roc, pr):  # the displays' axes: a unit square with a margin
        ax.set(xlim=(-0.01, 1.01), ylim=(-0.01, 1.01), aspect="equal")
    roc.plot([0, 1], [0, 1], color="0.7", linestyle=":", linewidth=1)
    pr.axhline(positive_share, color="0.7", linestyle=":", linewidth=1, label="chance")
    roc.set_title("ROC (out-of-fold)")
    pr.set_title("Precision-recall (out-of-fold)")
    # scikit-learn's labels name the positive class by its code ("Positive label: 1"): the report names classes
    roc.set_xlabel("false positive rate")
    roc.set_ylabel("true positive rate (recall)")
    pr.set_xlabel("recall (true positive rate)")
    pr.set_ylabel("precision")
    for ax in (roc, pr):
        ax.legend(fontsize=7, loc="lower right" if ax is roc else "upper right")
    return fig


def operating_point(positive, predicted):
    """``(TPR, FPR, precision)`` of boolean predictions (precision 1 where nothing is predicted positive).

    Examples
    --------
    >>> operating_point(np.array([True, True, False, False]), np.array([True, False, True, False]))
    (0.5, 0.5, 0.5)
    """
    positive, predicted = np.asarray(positive, dtype=bool), np.asarray(predicted, dtype=bool)
    return operating_point_of_counts(int(np.sum(positive & predicted)), int(np.sum(~positive & predicted)),
                                     int(positive.sum()), int((~positive).sum()))


def operating_point_of_counts(tp, fp, n_pos, n_neg):
    """:func:`operating_point` of counts: true and false positives among ``n_pos`` positive and ``n_neg`` negative rows."""
    # scikit-learn's precision_recall_curve ends at (recall 0, precision 1): the same convention
    return tp / max(n_pos, 1), fp / max(n_neg, 1), tp / (tp + fp) if tp + fp else 1.0


def precision_recall_and_average(positive, score):
    """``precision_recall_curve`` and ``average_precision_score`` of the same scores, from one sort.

    ``PrecisionRecallDisplay.from_predictions`` computes the curve and then
    the average precision, which computes the curve again: seconds each at
    millions of out-of-fold scores. The average precision is scikit-learn's
    step integral of that same curve (its ``_binary_uninterpolated_average_precision``).
    """
    from sklearn.metrics import precision_recall_curve

    precision, recall, _ = precision_recall_curve(positive, score)
    return precision, recall, average_precision(precision, recall)


def average_precision(precision, recall) -> float:
    """scikit-learn's average precision: the step integral of a ``precision_recall_curve`` (recall decreasing)."""
    return float(max(0.0, -np.sum(np.diff(recall) * precision[:-1])))


def rows_by_score(score, repeat, seed):
    """The positions of one repeat's rows, sorted by score (stable).

    Both curves depend only on the (score, label) pairs, not their order
    (integer counts at each distinct score), so they are computed on the rows
    sorted once by score: scikit-learn's own stable sort of presorted scores
    is then a linear pass (python -m benchmarks.report_curves; the numbers in
    benchmarks/scaling_notes.md).
    """
    here = np.flatnonzero(repeat == seed)
    return here[stable_argsort(score[here])]


def stable_argsort(values):
    """``np.argsort(values, kind="stable")`` of a 1-d array, from numpy's faster unstable sort.

    The unstable sort orders all but the rows of equal values the same way;
    those alone are sorted again by position. Where more than a tenth of the
    rows are tied, or a value is NaN, the stable sort runs as it is.

    Examples
    --------
    >>> stable_argsort(np.array([2.0, 1.0, 2.0, 1.0, 0.5])).tolist()
    [4, 1, 3, 0, 2]
    """
    values = np.asarray(values)
    order = np.argsort(values)
    ordered = values[order]
    tied_after = np.flatnonzero(ordered[1:] == ordered[:-1])
    if tied_after.size > values.size // 10 or (values.size and np.isnan(ordered[-1])):  # NaN sorts last
        return np.argsort(values, kind="stable")
    if tied_after.size:
        tied = np.zeros(values.size, dtype=bool)
        tied[tied_after] = tied[tied_after + 1] = True
        positions = np.flatnonzero(tied)
        # within each run of equal values, by row: lexsort's last key (the value) is the primary one
        order[positions] = order[positions][np.lexsort((order[positions], ordered[positions]))]
    return order


def score_orders(score, repeat) -> dict:
    """``{repeat: rows_by_score(score, repeat, repeat)}`` for every repeat: the one sort each repeat's curves need."""
    return {seed: rows_by_score(score, repeat, seed) for seed in np.unique(repeat)}


def repeat_curves(positive, score, repeat, orders=None) -> dict:
    """scikit-learn's ROC and precision-recall curves of each repeat's scores, computed once for every drawing.

    Parameters
    ----------
    positive, score, repeat : ndarray
        As :func:`roc_pr_figure` takes them.
    orders : dict, default=None
        :func:`score_orders` of these scores where the caller has them.

    Returns
    -------
    dict
        ``{repeat: curve}``, each ``curve`` a dict of ``roc_curve``'s
        ``fpr``, ``tpr``, ``roc_thresholds`` (``drop_intermediate=True``) and
        their ``roc_auc``; ``precision_recall_curve``'s ``precision``,
        ``recall``, ``pr_thresholds`` and their ``average_precision``; and
        the repeat's ``n_pos`` and ``n_neg``.
    """
    orders = orders if orders is not None else score_orders(score, repeat)
    curves = {}
    for seed, rows in orders.items():
        here_positive, here_score = positive[rows], score[rows]  # sorted by score: the curves are counts
        n_pos = int(here_positive.sum())
        curves[seed] = _curve(*roc_from_sorted(here_score, here_positive),
                              *precision_recall_from_sorted(here_score, here_positive), n_pos, int(rows.size) - n_pos)
    return curves


def curve_of_counts(counts) -> dict:
    """One repeat's curve (an entry of :func:`repeat_curves`) from its :class:`~.fold_summary.ScoreCounts`."""
    from .curves import precision_recall_from_counts, roc_from_counts

    at_thresholds = (counts.fp, counts.tp, counts.thresholds)
    return _curve(*roc_from_counts(*at_thresholds), *precision_recall_from_counts(*at_thresholds), counts.n_pos,
                  counts.n_neg)


def _curve(fpr, tpr, roc_thresholds, precision, recall, pr_thresholds, n_pos, n_neg) -> dict:
    return {"fpr": fpr, "tpr": tpr, "roc_thresholds": roc_thresholds, "roc_auc": roc_area(fpr, tpr),
            "precision": precision, "recall": recall, "pr_thresholds": pr_thresholds,
            "average_precision": average_precision(precision, recall), "n_pos": n_pos, "n_neg": n_neg}


def roc_area(fpr, tpr) -> float:
    """The area under a ROC curve (``fpr`` non-decreasing): scikit-learn's ``auc``, the trapezoidal rule.

    Examples
    --------
    >>> roc_area(np.array([0.0, 0.0, 1.0]), np.array([0.0, 1.0, 1.0]))
    1.0
    """
    return float(np.trapezoid(tpr, fpr))


def calibration_bins(positive, proba, n_bins=10):
    """scikit-learn's ``calibration_curve(positive, proba, n_bins=n_bins, strategy="uniform")``.

    Returns ``(observed positive rate, mean predicted probability)`` of each
    non-empty bin of equal width on [0, 1].

    Examples
    --------
    >>> calibration_bins(np.array([0, 1, 1]), np.array([0.1, 0.8, 0.9]), n_bins=2)
    (array([0., 1.]), array([0.1 , 0.85]))
    """
    bins = probability_bins(positive, proba, n_bins)
    kept = bins["rows"] != 0
    return bins["positives"][kept] / bins["rows"][kept], bins["proba_sum"][kept] / bins["rows"][kept]


def probability_bins(positive, proba, n_bins=10) -> dict:
    """The rows, the positive rows and the sum of the probabilities in each bin of equal width on [0, 1].

    The bins of scikit-learn's ``calibration_curve`` (``strategy="uniform"``):
    counts, so that the bins of folds add up.
    """
    proba = np.asarray(proba, dtype=float)
    bins = np.searchsorted(np.linspace(0.0, 1.0, n_bins + 1)[1:-1], proba)
    return {"rows": np.bincount(bins, minlength=n_bins).astype(np.int64),
            "positives": np.bincount(bins, weights=np.asarray(positive, dtype=float), minlength=n_bins),
            "proba_sum": np.bincount(bins, weights=proba, minlength=n_bins)}


def step_vertices(recall):
    """Positions of the precision-recall curve's vertices its drawn path needs: each equal-recall run's ends.

    Along a run of equal recall only false positives change, so precision
    moves one way and the points between the run's ends lie on the
    segment joining them (the display draws ``steps-post``): the same path
    from at most two vertices per distinct recall. Out-of-fold scores of
    10^7 rows have ~10^7 vertices and ~10^5 distinct recalls; matplotlib's
    data limits and rendering pass over every vertex.

    Examples
    --------
    >>> step_vertices(np.array([1.0, 1.0, 1.0, 0.5, 0.5, 0.0])).tolist()
    [0, 2, 3, 4, 5]
    """
    recall = np.asarray(recall)
    if recall.size < 3:
        return np.arange(recall.size)
    same_before = np.concatenate([[False], recall[1:] == recall[:-1]])
    same_after = np.concatenate([recall[:-1] == recall[1:], [False]])
    return np.flatnonzero(~(same_before & same_after))


def confusion_repeats_figure(matrices, class_names, repeats):
    """One confusion matrix per CV repeat (rows: true class), each cell its count and its share of the row."""
    matrices = [np.asarray(m) for m in matrices]
    fig, axes = _figure(len(matrices))
    for ax, matrix, seed in zip(axes, matrices, repeats):
        rates = matrix / np.maximum(matrix.sum(axis=1, keepdims=True), 1)
        ax.imshow(rates, cmap="Blues", vmin=0, vmax=1)
        for (i, j), count in np.ndenumerate(matrix):
            ax.text(j, i, f"{count}\n{rates[i, j]:.1%}", ha="center", va="center", fontsize=9,
                    color="white" if rates[i, j] > 0.5 else "black")
        ticks = range(len(class_names))
        ax.set_xticks(ticks, class_names, fontsize=8)
        ax.set_yticks(ticks, class_names, fontsize=8)
        ax.set_xlabel("predicted class")
        ax.set_ylabel("true class")
        ax.set_title(f"repeat {seed}", fontsize=9)
    return fig


def reliability_figure(positive, proba, repeat, *, n_bins=10):
    """Reliability diagram: per repeat, the observed positive rate against the mean predicted probability.

    Bins of equal width on [0, 1] (scikit-learn's ``calibration_curve``,
    ``strategy="uniform"``); empty bins are left out. Below: how many rows
    fall in each bin, pooled over repeats.
    """
    positive, proba = np.asarray(positive, dtype=float), np.asarray(proba, dtype=float)
    by_repeat = {seed: probability_bins(positive[repeat == seed], proba[repeat == seed], n_bins)
                 for seed in np.unique(repeat)}
    return reliability_figure_of_bins(by_repeat, np.histogram(proba, bins=np.linspace(0.0, 1.0, n_bins + 1))[0])


def reliability_figure_of_bins(by_repeat, histogram):
    """:func:`reliability_figure` from each repeat's bins and the pooled histogram of the probabilities.

    ``by_repeat``: ``{repeat: {"rows", "positives", "proba_sum"}}``, each an
    array over the equal-width bins; ``histogram``: the rows in each bin
    (numpy's ``histogram``), every repeat pooled.
    """
    from matplotlib.figure import Figure

    edges = np.linspace(0.0, 1.0, len(histogram) + 1)
    fig = Figure(figsize=(PANEL[0], PANEL[1] * 1.3), dpi=100, layout="constrained")
    curve, counts = fig.subplots(2, 1, height_ratios=[3, 1], sharex=True)
    curve.plot([0, 1], [0, 1], color="0.7", linestyle=":", linewidth=1, label="perfectly calibrated")
    for i, (seed, bins) in enumerate(by_repeat.items()):
        kept = bins["rows"] != 0
        observed, predicted = (bins[name][kept] / bins["rows"][kept] for name in ("positives", "proba_sum"))
        curve.plot(predicted, observed, "o-", color=f"C{i}", markersize=4, linewidth=1, label=f"repeat {seed}")
    curve.set_ylabel("observed positive rate")
    curve.set_title("Reliability (out-of-fold probabilities)", fontsize=9)
    curve.legend(fontsize=7, loc="upper left")
    counts.stairs(histogram, edges, fill=True, color="0.5")
    counts.set_yscale("log")
    counts.set_xlabel("predicted probability of the positive class")
    counts.set_ylabel("rows")
    return fig


def fold_spread_figure(values: dict):
    """Each metric's fold values (points) over its box: the spread over folds and repeats.

    ``values`` maps a metric's name to its per-fold values.
    """
    names = list(values)
    fig, (ax,) = _figure(1)
    fig.set_size_inches(max(PANEL[0], 1.1 * len(names) + 1.5), PANEL[1])
    data = [np.asarray(values[name], dtype=float) for name in names]
    ax.boxplot(data, widths=0.5, showfliers=False)
    jitter = np.random.RandomState(0)  # fixed: the same run draws the same picture
    for i, column in enumerate(data, start=1):
        ax.plot(i + jitter.uniform(-0.12, 0.12, column.size), column, "o", markersize=3, alpha=0.6, color="C0")
    ax.set_xticks(range(1, len(names) + 1), names, rotation=30, ha="right", fontsize=8)
    ax.set_title("Metrics over folds", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    return fig


def threshold_figure(theta, objective, chosen, *, objective_name):
    """The threshold search: the objective against the shift, the chosen shift marked.

    Parameters
    ----------
    theta, objective : ndarray
        Each candidate shift and the objective it gave on the searched margins.
    chosen : float
        The shift the estimator chose.
    """
    theta, objective = np.asarray(theta, dtype=float), np.asarray(objective, dtype=float)
    order = np.argsort(theta, kind="stable")
    theta, objective = theta[order], objective[order]
    # the vertices the page draws too: an ensemble's search scores as many candidates as rows, whose markers
    # would cost more than every other figure of the report, in a panel a few hundred pixels wide
    drawn = spaced_vertices(theta, objective)
    fig, (ax,) = _figure(1)
    ax.plot(theta[drawn], objective[drawn], ".-", markersize=3, linewidth=0.8, label="candidates")
    ax.axvline(chosen, color="C3", linestyle="--", linewidth=1, label=f"chosen shift {chosen:.4g}")
    ax.axvline(0.0, color="0.6", linestyle=":", linewidth=1, label="no shift")
    ax.set_xlabel("shift of the decision value (theta)")
    ax.set_ylabel(objective_name)
    ax.set_title("Threshold search of the final model", fontsize=9)
    ax.legend(fontsize=7)
    return fig


def member_thresholds_figure(per_fold: dict):
    """An ensemble's member shifts in each fold (``{fold label: shifts}``), the fold's shared shift apart."""
    labels = list(per_fold)
    fig, (ax,) = _figure(1)
    fig.set_size_inches(max(PANEL[0], 0.45 * len(labels) + 1.5), PANEL[1])
    for i, label in enumerate(labels):
        shifts = np.asarray(per_fold[label], dtype=float)
        ax.plot(np.full(shifts.size, i), shifts, "o", markersize=3, alpha=0.6, color="C0")
    ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("member shift (theta)")
    ax.set_title("Ensemble member thresholds per fold", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    return fig
