"""The interactive curves of a run report: Bokeh plots whose hover gives the threshold and the rates at each point.

The ROC, precision-recall and threshold-search curves of ``report.html`` are
Bokeh documents serialised as JSON (:func:`document_json`) and drawn by
BokehJS, which the page carries inline (:func:`bokehjs`): the page stays one
file that opens without a network. ``report.md`` keeps the matplotlib PNGs of
:mod:`.figures` (Markdown has no scripts).

Every point of a curve carries its threshold and its TPR, FPR and
precision, so a person reads off what moving the threshold there would
give. Curves are thinned before they are embedded (every vertex is a column
of the page): the precision-recall path by :func:`.figures.step_vertices`
(the same path from fewer vertices), the ROC curve by scikit-learn's
``drop_intermediate``, and any curve still longer than :data:`MAX_POINTS` by
:func:`.curves.spaced_vertices`.
"""

from __future__ import annotations

import json
import logging

import numpy as np

from . import figures
from .curves import MAX_POINTS, spaced_vertices

__all__ = ["bokehjs", "continue_model_ids", "curves_plots", "document_json", "last_model_id", "pr_points", "roc_points", "roc_pr_plots",
           "threshold_plot"]

logger = logging.getLogger(__name__)

#: Plot size in pixels, as the PNG panels (4.6 x 3.8 inches at 100 dpi).
WIDTH, HEIGHT = 460, 380

#: matplotlib's default colour cycle ("C0", "C1", ...), so a repeat has the same colour in the PNGs.
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]

#: The hover text of a curve's point (columns of its data source).
CURVE_TOOLTIPS = [("repeat", "@repeat"), ("threshold (score >=)", "@threshold{%.4g}"),
                  ("TPR (recall)", "@tpr{0.0000}"), ("FPR", "@fpr{0.0000}"), ("precision", "@precision{0.0000}")]

#: The hover text of a repeat's chosen operating point.
CHOSEN_TOOLTIPS = [("chosen threshold, repeat", "@repeat"), ("threshold (score >=)", "@threshold_text"),
                   ("TPR (recall)", "@tpr{0.0000}"), ("FPR", "@fpr{0.0000}"), ("precision", "@precision{0.0000}")]


def _rates(tp, fp, n_pos, n_neg):
    """TPR, FPR and precision of integer counts (precision 1 where nothing is predicted positive, as scikit-learn)."""
    predicted = tp + fp
    precision = np.divide(tp, predicted, out=np.ones_like(tp, dtype=float), where=predicted > 0)
    return tp / max(n_pos, 1), fp / max(n_neg, 1), precision


def roc_points(curve):
    """The ROC curve's vertices as ``RocCurveDisplay`` draws them, each with its threshold and rates.

    ``curve``: one repeat's entry of :func:`.figures.repeat_curves`.

    Returns
    -------
    points : dict of ndarray
        ``threshold`` (``inf`` first: nothing predicted positive), ``tpr``,
        ``fpr`` (scikit-learn's ``roc_curve``, ``drop_intermediate=True``)
        and ``precision``.
    area : float
        The area under the curve.
    """
    fpr, tpr, n_pos, n_neg = curve["fpr"], curve["tpr"], curve["n_pos"], curve["n_neg"]
    # the counts behind the rates: integers, so the precision is exact and not a ratio of rounded rates
    tp, fp = np.rint(tpr * n_pos), np.rint(fpr * n_neg)
    return {"threshold": curve["roc_thresholds"], "tpr": tpr, "fpr": fpr,
            "precision": _rates(tp, fp, n_pos, n_neg)[2]}, float(curve["roc_auc"])


def pr_points(curve):
    """The precision-recall curve's vertices its drawn (steps-post) path needs, each with its threshold and rates.

    ``curve``: one repeat's entry of :func:`.figures.repeat_curves`.

    Returns
    -------
    points : dict of ndarray
        ``threshold`` (``inf`` for the last point, recall 0: nothing
        predicted positive), ``tpr`` (the recall), ``fpr`` and
        ``precision``: scikit-learn's ``precision_recall_curve`` at the
        vertices :func:`.figures.step_vertices` keeps.
    average_precision : float
    """
    precision, recall, n_pos, n_neg = curve["precision"], curve["recall"], curve["n_pos"], curve["n_neg"]
    kept = figures.step_vertices(recall)
    tp = np.rint(recall * n_pos)
    # precision = tp / (tp + fp), so fp = tp / precision - tp (precision is 1 at tp = 0: fp 0 there)
    fp = np.rint(np.divide(tp, precision, out=np.zeros_like(tp), where=tp > 0) - tp)
    points = {"threshold": np.append(curve["pr_thresholds"], np.inf), "tpr": recall, "fpr": fp / max(n_neg, 1),
              "precision": precision}
    return {name: values[kept] for name, values in points.items()}, curve["average_precision"]


def _spaced(points, x, y, max_points):
    kept = spaced_vertices(points[x], points[y], max_points)
    if kept.size < points[x].size:
        logger.debug("curve thinned from %d to %d vertices for the page", points[x].size, kept.size)
    return {name: values[kept] for name, values in points.items()}


def _figure(title, x_label, y_label, **ranges):
    from bokeh.plotting import figure

    fig = figure(title=title, width=WIDTH, height=HEIGHT, x_axis_label=x_label, y_axis_label=y_label,
                 tools="pan,box_zoom,wheel_zoom,reset,save", toolbar_location="above", **ranges)
    fig.title.text_font_size = "11pt"
    return fig


def _curve(fig, points, *, x, y, color, label, name, step=False):
    """Draw a curve and invisible markers at its vertices (what the hover finds); return the markers."""
    from bokeh.models import ColumnDataSource

    source = ColumnDataSource(points, name=name)
    if step:
        # scikit-learn's display draws the precision-recall curve "steps-post": Bokeh's mode="after"
        fig.step(x, y, source=source, mode="after", color=color, line_width=2, legend_label=label)
    else:
        fig.line(x, y, source=source, color=color, line_width=2, legend_label=label)
    return fig.scatter(x, y, source=source, size=9, fill_alpha=0, line_alpha=0, hover_fill_color=color,
                       hover_fill_alpha=1, hover_line_color="black", hover_line_alpha=1)


def _repeat_curve(fig, points, seed, *, name, **drawn):
    """One repeat's curve, its points' source named ``"{name} repeat {seed}"`` with a ``repeat`` column."""
    points = {**points, "repeat": np.full(points["tpr"].size, int(seed))}
    return _curve(fig, points, name=f"{name} repeat {seed}", **drawn)


def _hover(fig, renderers, tooltips):
    from bokeh.models import HoverTool

    # limit: of the vertices under the pointer (markers overlap where a curve is dense), the nearest alone
    fig.add_tools(HoverTool(renderers=renderers, tooltips=tooltips, formatters={"@threshold": "printf"},
                            mode="mouse", limit=1))


def roc_pr_plots(positive, score, repeat, predicted=None, cutoffs=None, max_points=MAX_POINTS, curves=None):
    """ROC and precision-recall plots of out-of-fold scores side by side, one curve per CV repeat.

    Parameters
    ----------
    positive : ndarray of bool
        Whether each out-of-fold row is of the positive (minority) class.
    score : ndarray of float
        Its positive-class score.
    repeat : ndarray
        The CV repeat (seed) of each row.
    predicted : ndarray of bool, default=None
        Whether each row was predicted positive: each repeat's operating
        point is marked on both plots.
    cutoffs : dict, default=None
        ``{repeat: score cutoff}`` that reproduces that repeat's predictions,
        for the operating point's hover (``nan`` where none does).
    max_points : int, default=MAX_POINTS
        The most vertices a curve keeps.
    curves : dict, default=None
        :func:`.figures.repeat_curves` of these scores where the caller has
        them; computed here where it has not.

    Returns
    -------
    bokeh.models.LayoutDOM
        The two plots in a row; their data sources are named ``"roc repeat
        {seed}"``, ``"pr repeat {seed}"`` and ``"chosen repeat {seed}"``.
    """
    positive, score, repeat = np.asarray(positive, dtype=bool), np.asarray(score, dtype=float), np.asarray(repeat)
    curves = curves if curves is not None else figures.repeat_curves(positive, score, repeat)
    points = None
    if predicted is not None:
        points = {seed: figures.operating_point(positive[repeat == seed], predicted[repeat == seed])
                  for seed in curves}
    return curves_plots(curves, points, cutoffs, positive_share=float(positive.mean()), max_points=max_points)


def curves_plots(curves, points=None, cutoffs=None, *, positive_share, max_points=MAX_POINTS):
    """:func:`roc_pr_plots` from each repeat's curves and operating point.

    Parameters
    ----------
    curves : dict
        ``{repeat: curve}``, as :func:`.figures.repeat_curves` gives them.
    points : dict, default=None
        ``{repeat: (TPR, FPR, precision)}`` of each repeat's predictions,
        marked on its curves.
    cutoffs : dict, default=None
        As :func:`roc_pr_plots` takes them.
    positive_share : float
        The positive class's share of the rows: the precision of chance.
    max_points : int, default=MAX_POINTS
    """
    from bokeh.layouts import row
    from bokeh.models import ColumnDataSource, LegendItem, Span

    roc = _figure("ROC (out-of-fold)", "false positive rate", "true positive rate (recall)")
    pr = _figure("Precision-recall (out-of-fold)", "recall (true positive rate)", "precision")
    renderers, chosen, marked = {roc: [], pr: []}, {roc: [], pr: []}, []
    for i, seed in enumerate(curves):  # every repeat, in order (np.unique of millions of rows, done once)
        color = PALETTE[i % len(PALETTE)]
        data, area = roc_points(curves[seed])
        renderers[roc].append(_repeat_curve(roc, _spaced(data, "fpr", "tpr", max_points), seed, x="fpr", y="tpr",
                                            color=color, label=f"repeat {seed} (AUC = {area:.2f})", name="roc"))
        data, average = pr_points(curves[seed])
        renderers[pr].append(_repeat_curve(pr, _spaced(data, "tpr", "precision", max_points), seed, x="tpr",
                                           y="precision", color=color, label=f"repeat {seed} (AP = {average:.2f})",
                                           name="pr", step=True))
        if points is not None:  # where the predictions sit: what the threshold the folds chose gives
            tpr, fpr, precision = points[seed]
            cutoff = (cutoffs or {}).get(seed, np.nan)
            marked.append((color, ColumnDataSource(
                {"repeat": [int(seed)], "tpr": [tpr], "fpr": [fpr], "precision": [precision],
                 "threshold_text": ["each fold's own" if np.isnan(cutoff) else f"{cutoff:.4g}"]},
                name=f"chosen repeat {seed}")))
    for color, source in marked:  # after every curve: on top of them
        for fig, axes in ((roc, ("fpr", "tpr")), (pr, ("tpr", "precision"))):
            chosen[fig].append(fig.scatter(*axes, source=source, size=11, color=color, line_color="black"))
    if marked:
        for fig in (roc, pr):
            # one legend entry for every repeat's marker (a click hides them all); the legend draws each of its
            # renderers' glyphs, the last on top: a circle of no repeat's colour, itself not drawn (NaN)
            neutral = fig.scatter([np.nan], [np.nan], size=11, fill_color="white", line_color="black")
            fig.legend.items.append(LegendItem(label="chosen threshold", renderers=[*chosen[fig], neutral]))
    roc.line([0, 1], [0, 1], color="#b3b3b3", line_dash="dotted", line_width=1)
    pr.add_layout(Span(location=positive_share, dimension="width", line_color="#b3b3b3",
                       line_dash="dotted", line_width=1))
    for fig, place in ((roc, "bottom_right"), (pr, "top_right")):
        _hover(fig, renderers[fig], CURVE_TOOLTIPS)
        if chosen[fig]:
            _hover(fig, chosen[fig], CHOSEN_TOOLTIPS)
        fig.legend.location = place
        fig.legend.label_text_font_size = "8pt"
        fig.legend.click_policy = "hide"  # a click on a repeat's entry hides its curve
    return row(roc, pr)


def threshold_plot(theta, objective, chosen, *, objective_name, max_points=MAX_POINTS):
    """The final model's threshold search: the objective against each candidate shift, the chosen shift marked.

    Parameters
    ----------
    theta, objective : ndarray
        Each candidate shift and the objective it gave on the searched margins.
    chosen : float
        The shift the estimator chose.
    objective_name : str
        The objective's name (the y axis and the hover).
    max_points : int, default=MAX_POINTS
        The most candidates drawn.

    Returns
    -------
    bokeh.plotting.figure
        Its data sources are named ``"candidates"`` (``theta``,
        ``objective``, by increasing shift) and ``"chosen"``.
    """
    from bokeh.models import ColumnDataSource, HoverTool, Span

    theta, objective = np.asarray(theta, dtype=float), np.asarray(objective, dtype=float)
    order = np.argsort(theta, kind="stable")
    points = _spaced({"theta": theta[order], "objective": objective[order]}, "theta", "objective", max_points)
    fig = _figure("Threshold search (final model)", "shift of the decision value (theta)", objective_name)
    dots = _curve(fig, points, x="theta", y="objective", color=PALETTE[0], label="candidates", name="candidates")
    nearest = int(np.argmin(np.abs(theta - chosen))) if theta.size else None
    at = [float(objective[nearest])] if nearest is not None else [np.nan]
    mark = fig.scatter("theta", "objective", source=ColumnDataSource({"theta": [float(chosen)], "objective": at},
                                                                     name="chosen"),
                       size=11, color=PALETTE[3], line_color="black", legend_label=f"chosen shift {chosen:.4g}")
    fig.add_layout(Span(location=float(chosen), dimension="height", line_color=PALETTE[3], line_dash="dashed"))
    fig.add_layout(Span(location=0.0, dimension="height", line_color="#999999", line_dash="dotted"))
    value = (objective_name, "@objective{0.0000}")
    fig.add_tools(HoverTool(renderers=[dots], tooltips=[("shift (theta)", "@theta{%.4g}"), value],
                            formatters={"@theta": "printf"}, mode="mouse", limit=1))
    fig.add_tools(HoverTool(renderers=[mark], tooltips=[("chosen shift", "@theta{%.4g}"), value],
                            formatters={"@theta": "printf"}))
    fig.legend.label_text_font_size = "8pt"
    fig.legend.location = "bottom_right"
    fig.legend.background_fill_alpha = 0.6  # the curve's tail may pass under it
    return fig


def document_json(model, target) -> str:
    """The model as a standalone Bokeh document (``bokeh.embed.json_item``) to draw into the element ``target``.

    JSON for a ``<script type="application/json">`` element: ``</`` is
    escaped so no string in it can close the element.
    """
    from bokeh.embed import json_item

    return json.dumps(json_item(model, target=target)).replace("</", "<\\/")


def last_model_id():
    """The count behind Bokeh's last model id in this process (``p<count>``), or None where Bokeh has no such count."""
    from bokeh.util import serialization

    return getattr(serialization, "_simple_id", None)


def continue_model_ids(count) -> None:
    """Go on from ``count`` (:func:`last_model_id` of a forked copy that drew documents), as if they were drawn here.

    The next model gets the id it would have got had this process drawn
    them, so a page is the same bytes however its documents were drawn.
    """
    from bokeh.util import serialization

    if count is not None and hasattr(serialization, "_simple_id"):
        with serialization._simple_id_lock:
            serialization._simple_id = max(serialization._simple_id, int(count))


def bokehjs() -> str:
    """BokehJS as inline ``<script>`` elements: the library only, no widgets, tables, WebGL or MathJax.

    Those bundles would more than triple the page (~3.9 MB against ~1.3 MB)
    and no plot of the report uses them.
    """
    from bokeh.resources import Resources

    return Resources(mode="inline", components=["bokeh"]).render_js()
