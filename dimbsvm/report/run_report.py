"""The report of a run: ``report.md`` (figures in ``report/``) and a self-contained ``report.html``.

What a person evaluating an imbalanced classifier wants to look at: the data
(class counts, imbalance ratio), the metrics with their spread over folds,
the ROC and precision-recall curves and the confusion matrix of the
out-of-fold predictions, where the decision threshold sits (the final
model's threshold search; an ensemble's member thresholds), and what the run
cost (time and peak memory).

A report is a list of sections of blocks (text, table, figure, interactive
figure), rendered twice: Markdown with the figures as PNG files beside it,
and HTML with the same PNGs embedded as ``data:`` URIs and the interactive
figures (the ROC, precision-recall and threshold-search curves, whose hover
gives the threshold and rates at each point) as Bokeh documents drawn by
BokehJS carried inline, so the HTML file alone is the report (no network, no
other file). The interactive figures' PNGs are in the Markdown only.

A section's figures are drawn when its sections are (:func:`draw_sections`),
not when they are built: a process with no other thread (the report's side
process) then draws the Bokeh documents in a forked copy of itself while it
draws the PNGs.
"""

from __future__ import annotations

import base64
import html
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._counts import unique_counts
from .._forked import ForkedCallError, start_in_fork
from . import figures, interactive
from .curves import run_starts

__all__ = ["DataSummary", "PendingFigure", "Section", "ThresholdSearch", "brier_scores", "chosen_cutoff",
           "class_counts", "class_names_by_code", "draw_sections", "fold_figures", "out_of_fold_sections", "run_report_sections",
           "render_html", "render_markdown", "threshold_rows", "write_run_report"]

logger = logging.getLogger(__name__)

#: The directory of the Markdown report's figures, beside it.
FIGURE_DIR = "report"

#: How long the side process waits for the interactive figures drawn in its forked copy before it draws them
#: itself: their curves are thinned to MAX_POINTS vertices, so this is far more than drawing them takes.
FORKED_DRAWING_SECONDS = 120


@dataclass(frozen=True)
class PendingFigure:
    """A block's figure, drawn when the report's sections are (:func:`draw_sections`).

    Attributes
    ----------
    kind : {"png", "bokeh"}
        What ``draw()`` returns: PNG bytes (matplotlib) or a Bokeh
        document's JSON (:func:`.interactive.document_json`).
    draw : callable
    """

    kind: str
    draw: Callable


@dataclass
class Section:
    """A titled part of a report: blocks of ``("text", str)``, ``("table", headers, rows)``,
    ``("figure", name, png_bytes, caption)`` or ``("interactive", name, bokeh_json, png_bytes, caption)``
    (:func:`.interactive.document_json`; the PNG is the same figure for the Markdown). A figure is a
    :class:`PendingFigure` until :func:`draw_sections` draws it."""

    title: str
    blocks: list = field(default_factory=list)

    def text(self, value):
        self.blocks.append(("text", value))

    def table(self, headers, rows):
        self.blocks.append(("table", list(headers), [list(row) for row in rows]))

    def figure(self, name, fig, caption):
        """A matplotlib figure, drawn as PNG (or its PNG, drawn already)."""
        self.blocks.append(("figure", name, _png(fig), caption))

    def interactive(self, name, model, fig, caption):
        """A Bokeh model for the HTML page (``model()`` builds it), ``fig`` (the same figure drawn by matplotlib) for
        the Markdown."""
        document = PendingFigure("bokeh", lambda: interactive.document_json(model(), f"{name}-plot"))
        self.blocks.append(("interactive", name, document, _png(fig), caption))


def _png(fig):
    """A matplotlib figure as a pending PNG; PNG bytes, or a pending figure, as they are."""
    if isinstance(fig, (bytes, PendingFigure)):
        return fig
    return PendingFigure("png", lambda: figures.png(fig))


def draw_sections(sections, *, split=False):
    """Draw every :class:`PendingFigure` of ``sections`` in place (each block then holds what it drew); return them.

    ``split``: the Bokeh documents, and PNGs enough to even the work
    (:func:`_drawn_in_copy`), are drawn in a forked copy of this process
    while this one draws the other PNGs, on two cores instead of one; only
    for a process that no other thread runs in (the report's side process;
    where it cannot fork, everything is drawn here). The pages are the same
    bytes either way: every document is drawn in the order of the blocks, in
    one process, and Bokeh's model ids go on here from where the copy left
    them; a PNG is the same bytes wherever it is drawn.
    """
    places = [(section, b, f) for section in sections for b, block in enumerate(section.blocks)
              for f, part in enumerate(block) if isinstance(part, PendingFigure)]
    pending = [section.blocks[b][f] for section, b, f in places]
    in_copy = _drawn_in_copy(pending) if split else []
    forked = None
    if in_copy and len(in_copy) < len(pending):
        forked = start_in_fork(lambda: ([pending[i].draw() for i in in_copy], interactive.last_model_id()))
    elsewhere = set(in_copy) if forked is not None else set()
    drawn = [None if i in elsewhere else figure.draw() for i, figure in enumerate(pending)]
    if forked is not None:
        try:
            values, last_id = forked.result(timeout=FORKED_DRAWING_SECONDS)
            interactive.continue_model_ids(last_id)
        except ForkedCallError as exc:
            logger.warning("part of the report's figures could not be drawn in a forked copy (%s): drawn here",
                           exc)
            values = [pending[i].draw() for i in in_copy]
        for i, value in zip(in_copy, values, strict=True):
            drawn[i] = value
    for (section, b, f), value in zip(places, drawn):
        block = list(section.blocks[b])
        block[f] = value
        section.blocks[b] = tuple(block)
    return sections


#: What drawing a figure costs, roughly, in PNG figures: a Bokeh document is built and serialised by Python.
_DRAWING_COST = {"png": 1, "bokeh": 2}


def _drawn_in_copy(pending) -> list:
    """The positions of ``pending`` that a forked copy draws: every Bokeh document (their ids are numbered in
    one process), then each PNG, in order, wherever less is drawn so far (the copy on a tie).

    Examples
    --------
    >>> kinds = ["bokeh", "png", "png", "png"]
    >>> _drawn_in_copy([PendingFigure(kind, None) for kind in kinds])
    [0, 3]
    """
    in_copy = [i for i, figure in enumerate(pending) if figure.kind == "bokeh"]
    copy_load, here_load = _DRAWING_COST["bokeh"] * len(in_copy), 0
    for i, figure in enumerate(pending):
        if figure.kind == "png":
            if here_load < copy_load:
                here_load += _DRAWING_COST["png"]
            else:
                in_copy.append(i)
                copy_load += _DRAWING_COST["png"]
    return sorted(in_copy)


@dataclass(frozen=True)
class DataSummary:
    """What a report says of a run's data, without its rows (small enough to send to another process).

    Attributes
    ----------
    class_rows : dict
        ``{label code: rows}``.
    class_names : dict
        ``{label code: class name}`` (:func:`class_names_by_code`).
    n_features : int
    """

    class_rows: dict
    class_names: dict
    n_features: int

    @classmethod
    def of(cls, data) -> "DataSummary":
        """The summary of a :class:`~dimbsvm.jobs.JobData` (labels, class map, shape)."""
        codes, rows = unique_counts(data.y)
        return cls(class_rows={int(c): int(n) for c, n in zip(codes, rows)}, class_names=class_names_by_code(data),
                   n_features=int(data.X.shape[1]))


@dataclass(frozen=True)
class ThresholdSearch:
    """A fitted model's threshold search as the report draws it: each candidate shift and its objective.

    Attributes
    ----------
    theta, objective_values : ndarray
        Each candidate shift and the objective it gave on the searched margins.
    chosen : float
        The shift the estimator chose.
    objective : str
        The objective's name.
    """

    theta: np.ndarray
    objective_values: np.ndarray
    chosen: float
    objective: str

    @classmethod
    def of(cls, estimator):
        """The search of a fitted estimator with ``candidates_`` (theta and score) and ``threshold_``, else None.

        Only the candidates the search scored are kept: a score of ``-inf``
        marks one it could not choose (left out by smoothing, or below the
        minimal precision), which has no objective value to draw.
        """
        candidates = getattr(estimator, "candidates_", None)
        if candidates is None or "theta" not in candidates or "score" not in candidates:
            return None
        theta, score = np.asarray(candidates["theta"], dtype=float), np.asarray(candidates["score"], dtype=float)
        scored = np.isfinite(score)
        if not scored.any():
            return None
        return cls(theta=theta[scored], objective_values=score[scored], chosen=float(estimator.threshold_),
                   objective=str(getattr(estimator, "objective", "objective")))


def write_run_report(directory, *, job, data, metrics, resources, oof=None, final_estimator=None,
                     oof_sections=None, drawn_folds=None, split=False) -> Path:
    """Write ``report.md``, its figures and ``report.html`` into a run directory; return the HTML's path.

    Parameters
    ----------
    directory : path
        The run directory.
    job : JobSpec
        The validated job (:class:`~dimbsvm.jobs.job_spec.JobSpec`): its
        name, estimator, data source, CV and scaler are read.
    data : JobData or DataSummary
        The job's data (labels, class names, shape), or its summary.
    metrics, resources : dict
        What the run writes to ``metrics.json`` and ``resources.json``.
    oof : dict of ndarray, default=None
        The out-of-fold predictions (:func:`dimbsvm.jobs.oof.load_oof`);
        needed only where ``oof_sections`` is not given.
    final_estimator : estimator or ThresholdSearch, default=None
        The final model's estimator, for its threshold search (or that
        search, :meth:`ThresholdSearch.of`); ``None`` when the job saves no
        final model.
    oof_sections : list of Section or concurrent.futures.Future, default=None
        :func:`out_of_fold_sections` of the run's out-of-fold predictions,
        drawn beforehand (e.g. while the final model was fitting), or a
        future of them; ``None`` draws them here from ``oof``.
    drawn_folds : dict, default=None
        :func:`fold_figures` of the run's fold records, drawn beforehand;
        ``None`` draws them here from ``metrics["folds"]``.
    split : bool, default=False
        Draw the interactive figures in a forked copy of this process beside
        the PNGs (:func:`draw_sections`).
    """
    directory = Path(directory)
    title, sections = run_report_sections(job=job, data=data, metrics=metrics, resources=resources,
                                          oof=oof, final_estimator=final_estimator, oof_sections=oof_sections,
                                          drawn_folds=drawn_folds)
    draw_sections(sections, split=split)
    (directory / "report.md").write_text(render_markdown(title, sections, directory / FIGURE_DIR))
    path = directory / "report.html"
    path.write_text(render_html(title, sections))
    logger.info("report written to %s", path)
    return path


def class_names_by_code(data) -> dict:
    """``{label code: class name}`` (the code itself where the data names no classes)."""
    names = {int(code): str(name) for name, code in (data.meta.get("class_map") or {}).items()}
    return {int(code): names.get(int(code), str(code)) for code in unique_counts(data.y)[0]}


def _fmt(value, digits=4):
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        return f"{value:.{digits}g}" if abs(value) >= 1e4 or (value and abs(value) < 1e-3) else f"{value:.{digits}f}"
    return str(value)


def run_report_sections(*, job, data, metrics, resources, oof, final_estimator=None, oof_sections=None,
                        drawn_folds=None):
    """The report's title and sections (see :class:`Section`) from a run's outputs.

    ``oof``, ``oof_sections`` and ``drawn_folds`` as :func:`write_run_report` takes them.
    """
    if hasattr(oof_sections, "result"):  # a future: drawn in another thread; no figure is drawn before it is done
        oof_sections = oof_sections.result()
    data = data if isinstance(data, DataSummary) else DataSummary.of(data)
    threshold_search = (final_estimator if final_estimator is None or isinstance(final_estimator, ThresholdSearch)
                        else ThresholdSearch.of(final_estimator))
    names = data.class_names
    pos_label = metrics["positive_label"]
    sections = []

    run = Section("Run")
    estimator, cv = job.estimator, job.cv
    run.table(["", "value"], [
        ["job", job.name],
        ["estimator", f"{estimator.name} {estimator.plain_params() or ''}".strip()],
        ["data", str(metrics.get("data_source", job.data.source))],
        ["protocol", f"stratified {cv.n_splits}-fold CV x {cv.n_repeats} repeat(s), "
                     f"seeds from {cv.random_state}; {job.preprocessing.scaler} scaling "
                     "fitted per training fold"],
        ["started / finished (UTC)", f"{metrics.get('started_at', '')} / {metrics.get('finished_at', '')}"],
        ["duration", f"{metrics.get('duration_s', 0):.1f} s"],
        ["versions", ", ".join(f"{k} {v}" for k, v in (metrics.get("versions") or {}).items() if v)],
    ])
    sections.append(run)

    labels, counts = np.array(list(data.class_rows)), np.array(list(data.class_rows.values()))
    about = Section("Data")
    about.table(["class", "rows", "share", "role"],
                [[names[int(c)], int(n), f"{n / counts.sum():.2%}",
                  ("positive (minority)" if n == counts.min() else "positive") if c == pos_label else ""]
                 for c, n in zip(labels, counts)])
    about.text(f"{counts.sum()} rows, {data.n_features} features; imbalance ratio (largest class / smallest) "
               f"{counts.max() / counts.min():.2f}.")
    sections.append(about)

    quality = Section("Metrics")
    summary = metrics["summary"]
    quality.table(["metric", "mean", "std", "min", "max", "folds"],
                  [[name, _fmt(s["mean"]), _fmt(s["std"]), _fmt(s["min"]), _fmt(s["max"]), s["n"]]
                   for name, s in summary.items()])
    folds = metrics["folds"]
    drawn_folds = fold_figures(folds, list(summary)) if drawn_folds is None else drawn_folds
    if "fold_spread" in drawn_folds:
        quality.figure("fold_spread", drawn_folds["fold_spread"],
                       "Each fold's value (points) over the box of all folds and repeats.")
    sections.append(quality)
    if len(folds) > 0:
        sections.append(_folds_section(folds, list(summary), list(metrics.get("timings") or {})))
    if metrics.get("search"):
        sections.append(_search_section(metrics["search"]))
    if oof_sections is None:
        oof_sections = out_of_fold_sections(oof, names, pos_label, n_repeats=cv.n_repeats)
    sections += oof_sections
    threshold = _threshold_section(folds, threshold_search, drawn_folds.get("member_thresholds"))
    if threshold.blocks:
        sections.append(threshold)
    sections.append(_cost_section(metrics, resources))
    return f"dimbsvm run report: {job.name}", sections


#: The repeats whose confusion matrices are drawn (the table lists every repeat).
MATRICES_DRAWN = 4

#: The candidates listed in a report's search table (best first); ``search_summary.csv`` has them all.
SEARCH_ROWS_SHOWN = 20


def _search_section(search):
    import json

    section = Section("Parameter search")
    scoring, space = search["scoring"], search["space"]
    section.text(f"Each outer training fold chose among {search['n_candidates']} candidates ({space['method']} over "
                 f"{', '.join(space['params'])}) by the mean {scoring} of {space['cv']} inner folds, then refitted "
                 "the chosen one on the whole training fold: the metrics above are nested cross-validation. "
                 "Every (fold, candidate, inner fold) is in `search.csv`, every (fold, candidate) in "
                 "`search_summary.csv`.")
    floors = space.get("floor") or {}
    section.table(["outer fold", "parameters chosen", f"inner {scoring}"] + (["floor met"] if floors else []),
                  [[f"s{c['seed']} f{c['fold']}" if c["fold"] != "final" else "final model",
                    json.dumps(c["params"], sort_keys=True), _fmt(c[f"mean_{scoring}"])]
                   + ([c["floor_met"]] if floors else []) for c in search["chosen"]])
    if floors:
        section.text(f"Floors: {', '.join(f'{m} >= {v}' for m, v in floors.items())} (mean over the inner folds); "
                     "a fold whose floor is not met chose the candidate closest to it.")
    ranked = sorted(search["candidates"], key=lambda c: -np.nan_to_num(c[f"mean_{scoring}"] or 0.0, nan=-1.0))
    section.table(["parameters", f"inner {scoring} (mean over outer folds)", "folds that chose it",
                   "seconds (every inner fit and prediction)"],
                  [[json.dumps(c["params"], sort_keys=True), _fmt(c[f"mean_{scoring}"]), c["times_chosen"],
                    f"{c['seconds']:.2f}"] for c in ranked[:SEARCH_ROWS_SHOWN]])
    if len(ranked) > SEARCH_ROWS_SHOWN:
        section.text(f"The best {SEARCH_ROWS_SHOWN} of {len(ranked)} candidates are shown.")
    failed = [c for c in search["candidates"] if c.get("failed_inner_fits")]
    if failed:
        section.text(f"{len(failed)} candidate(s) raised on inner folds and were scored "
                     f"{space.get('error_score', 'nan')} there (the error of each is in `search.csv`, its traceback "
                     "in `search/`): "
                     + "; ".join(f"{json.dumps(c['params'], sort_keys=True)} on {c['failed_inner_fits']} inner fit(s)"
                                 for c in failed[:SEARCH_ROWS_SHOWN]) + ".")
    return section


def _folds_section(folds, metric_names, timing_names):
    section = Section("Folds")
    extra = [name for name in ("threshold",) if any(name in r for r in folds)]
    names = metric_names + extra + timing_names
    section.text("Each (repeat, fold) of the cross-validation: its sizes and its test rows' metrics"
                 + (" and the decision threshold (shift) it chose" if extra else "") + ".")
    section.table(["repeat", "fold", "train rows", "test rows"] + names,
                  [[r["seed"], r["fold"], r.get("n_train", ""), r.get("n_test", "")]
                   + [_fmt(r.get(name)) for name in names] for r in folds])
    return section


def out_of_fold_sections(oof, names, pos_label, *, n_repeats):
    """The report's sections drawn from the out-of-fold predictions alone (curves, confusion, thresholds, calibration).

    They need neither the final model nor the run's records, so a run draws
    them in a thread of its own once every fold is saved, while the final
    model fits. Each repeat's rows are sorted by score once, for every curve
    and table. Safe in a thread of its own while nothing else draws
    (matplotlib's object API; Bokeh models of their own document).

    Parameters
    ----------
    oof : dict of ndarray
        The out-of-fold predictions (:func:`dimbsvm.jobs.oof.load_oof`).
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
    ranked = len(names) == 2 and bool(np.isfinite(oof["score"]).all())
    orders = figures.score_orders(oof["score"], oof["seed"]) if ranked else None
    repeat_curves = (figures.repeat_curves(oof["y_true"] == pos_label, oof["score"], oof["seed"], orders)
                     if ranked else None)
    cutoffs = _repeat_cutoffs(oof, pos_label, orders) if ranked else None
    sections = [_oof_section(oof, names, pos_label, n_repeats=n_repeats, orders=orders, curves=repeat_curves,
                             cutoffs=cutoffs)]
    if ranked:
        # every repeat pooled: one repeat's order, and its cutoff, are the pooled ones (rows_by_score of every row)
        if len(orders) == 1:
            sections.append(_thresholds_section(oof, names, pos_label, order=next(iter(orders.values())),
                                                chosen=next(iter(cutoffs.values()))))
        else:
            sections.append(_thresholds_section(oof, names, pos_label, order=figures.stable_argsort(oof["score"])))
    if len(names) == 2 and "proba" in oof:
        sections.append(_calibration_section(oof, names, pos_label))
    return sections


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
    cutoffs, first = _distinct_sorted(s)
    negatives_below = np.concatenate([[0], np.cumsum(~p)])[first]  # predicted negative, and below the cutoff
    positives_below = np.concatenate([[0], np.cumsum(p)])[first]
    agree = negatives_below + (p.sum() - positives_below)
    best = int(np.argmax(agree))
    if (~p).sum() > agree[best]:  # predicting nothing positive agrees more: a cutoff above every score
        return float("inf"), float((~p).sum() / len(p))
    return float(cutoffs[best]), float(agree[best] / len(p))


def _distinct_sorted(s):
    """``np.unique(s, return_index=True)`` of increasing ``s``: one pass instead of a sort (NaN: the sort)."""
    if s.size and np.isnan(s[-1]):
        return np.unique(s, return_index=True)
    first = run_starts(s)
    return s[first], first


def threshold_rows(positive, score, cutoff, *, around=2, steps=50, order=None):
    """TPR, FPR, precision, G-mean and F-measure at thresholds around ``cutoff``, every repeat pooled.

    The thresholds are the distinct scores (a row is positive when its score is
    at least the threshold); ``around`` of them on each side of ``cutoff``,
    about ``1/steps`` of the distinct scores apart, so that the rows show a
    visible change.

    ``order``: the rows' stable sort by score, as :func:`chosen_cutoff` takes it.

    Returns
    -------
    rows : list of dict
        ``threshold``, ``tpr``, ``fpr``, ``precision``, ``g_mean``,
        ``f_measure``, ``chosen``, by decreasing threshold.
    """
    positive, score = np.asarray(positive, dtype=bool), np.asarray(score, dtype=float)
    order = np.argsort(score, kind="stable") if order is None else order
    s, positive_sorted = score[order], positive[order]
    scored = len(s) - int(np.isnan(s).sum())  # NaN sorts last: below every threshold, and none itself
    thresholds = _distinct_sorted(s[:scored])[0][::-1]  # decreasing, as roc_curve lists them
    at = int(np.searchsorted(-thresholds, -cutoff, side="left")) if np.isfinite(cutoff) else 0
    at = min(at, len(thresholds) - 1)
    step = max(1, len(thresholds) // steps)
    picks = sorted({min(max(at + k * step, 0), len(thresholds) - 1) for k in range(-around, around + 1)})
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    positives_below = np.concatenate([[0], np.cumsum(positive_sorted)])
    rows = []
    for i in picks:
        below = int(np.searchsorted(s[:scored], thresholds[i], side="left"))  # the rows predicted negative
        tp = int(positives_below[scored] - positives_below[below])
        fp = (scored - below) - tp
        tpr, fpr = tp / max(n_pos, 1), fp / max(n_neg, 1)
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


def _thresholds_section(oof, names, pos_label, order=None, chosen=None):
    """``chosen``: :func:`chosen_cutoff` of every row where the caller has it."""
    section = Section("Thresholds")
    positive, predicted = oof["y_true"] == pos_label, oof["y_pred"] == pos_label
    order = figures.stable_argsort(oof["score"]) if order is None else order
    cutoff, share = chosen_cutoff(oof["score"], predicted, order=order) if chosen is None else chosen
    below = oof["score"][~predicted]
    if share == 1 and (below.size == 0 or below.max() < 0) and cutoff >= 0:
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
    rows = threshold_rows(positive, oof["score"], cutoff, order=order)
    table = [[_fmt(r["threshold"]), _fmt(r["tpr"]), _fmt(r["fpr"]), _fmt(r["precision"]), _fmt(r["g_mean"]),
              _fmt(r["f_measure"]), "chosen" if r["chosen"] else ""] for r in rows]
    if share < 1:
        tpr, fpr, precision = figures.operating_point(positive, predicted)
        f_measure = 2 * precision * tpr / (precision + tpr) if precision + tpr else 0.0
        table.append(["each fold's own", _fmt(tpr), _fmt(fpr), _fmt(precision), _fmt(float(np.sqrt(tpr * (1 - fpr)))),
                      _fmt(f_measure), "the predictions"])
    section.table(["threshold (score >=)", "TPR (recall)", "FPR", "precision", "G-mean", "F-measure", ""], table)
    return section


def _calibration_section(oof, names, pos_label):
    section = Section("Calibration")
    positive = oof["y_true"] == pos_label
    brier = brier_scores(positive, oof["proba"], oof["seed"])
    section.text(f"The out-of-fold probabilities of {names[pos_label]}: the Brier score (mean squared error of the "
                 f"probability; 0 is perfect, {positive.mean() * (1 - positive.mean()):.4f} is predicting the class "
                 "share for every row) and the reliability diagram.")
    section.table(["repeat", "Brier score", "rows"],
                  [[seed, _fmt(value), int(np.sum(oof["seed"] == seed))]
                   for seed, value in brier.items() if seed != "all"]
                  + [["all repeats", _fmt(brier["all"]), len(positive)]])
    section.figure("reliability", figures.reliability_figure(positive, oof["proba"], oof["seed"]),
                   f"Observed share of {names[pos_label]} against the mean predicted probability, in ten bins of "
                   "equal width, per repeat; below, how many rows fall in each bin (log scale).")
    return section


def _oof_section(oof, names, pos_label, *, n_repeats, orders=None, curves=None, cutoffs=None):
    section = Section("Out-of-fold predictions")
    section.text(f"Every row is a test row once per repeat ({n_repeats} repeat(s)); the predictions are in the "
                 "run directory's `oof/` files (one `.npz` per fold: row, y_true, y_pred, score).")
    codes = sorted(names)
    if len(codes) == 2 and np.isfinite(oof["score"]).all():  # (curves of two classes and finite scores only)
        positive, predicted = oof["y_true"] == pos_label, oof["y_pred"] == pos_label
        section.interactive("roc_pr", lambda: _roc_pr_plots(oof, pos_label, orders=orders, curves=curves,
                                                            cutoffs=cutoffs),
                            figures.roc_pr_figure(positive, oof["score"], oof["seed"], predicted=predicted,
                                                  curves=curves),
                            "ROC and precision-recall curves of the out-of-fold scores, one curve per repeat "
                            "(AUC and average precision in the legends); dotted: chance; circles: where each "
                            "repeat's predictions sit, at the threshold its folds chose (the Thresholds table "
                            "gives the rates around it). On the page, hovering a curve gives the threshold and "
                            "the rates at that point; a legend entry hides its curve.")
    repeats = [int(seed) for seed in (orders if orders is not None else np.unique(oof["seed"]))]
    matrices = [class_counts(oof["y_true"][oof["seed"] == seed], oof["y_pred"][oof["seed"] == seed], codes)
                for seed in repeats]
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


def _repeat_cutoffs(oof, pos_label, orders):
    """``{repeat: chosen_cutoff(...)}`` of each repeat's rows (``orders``: :func:`.figures.score_orders`)."""
    predicted = oof["y_pred"] == pos_label
    # a repeat's rows sorted by score: their stable order by score
    return {seed: chosen_cutoff(oof["score"][rows], predicted[rows], order=np.arange(rows.size))
            for seed, rows in orders.items()}


def _roc_pr_plots(oof, pos_label, orders=None, curves=None, cutoffs=None):
    """The interactive ROC and precision-recall plots, each repeat's operating point with its score cutoff.

    ``cutoffs``: :func:`_repeat_cutoffs` where the caller has them.
    """
    positive, predicted = oof["y_true"] == pos_label, oof["y_pred"] == pos_label
    orders = orders if orders is not None else figures.score_orders(oof["score"], oof["seed"])
    cutoffs = cutoffs if cutoffs is not None else _repeat_cutoffs(oof, pos_label, orders)
    # no one cutoff gives a repeat's predictions (share < 1): none is shown
    shown = {seed: cutoff if share == 1 else np.nan for seed, (cutoff, share) in cutoffs.items()}
    if curves is None:
        curves = figures.repeat_curves(positive, oof["score"], oof["seed"], orders)
    return interactive.roc_pr_plots(positive, oof["score"], oof["seed"], predicted=predicted, cutoffs=shown,
                                    curves=curves)


def fold_figures(folds, metric_names) -> dict:
    """The report's figures that need only the folds' records: ``{name: PendingFigure}``.

    ``"fold_spread"``: each of ``metric_names`` (the summary's) over the
    folds, where there are two folds or more; ``"member_thresholds"``: an
    ensemble's member shifts per fold. A run draws them with the
    out-of-fold sections, once every fold is saved, while the final model
    fits.
    """
    drawn = {}
    if metric_names and len(folds) > 1:
        drawn["fold_spread"] = _png(figures.fold_spread_figure({name: [r[name] for r in folds]
                                                                for name in metric_names}))
    members = {f"s{r['seed']} f{r['fold']}": r["member_thresholds"] for r in folds if "member_thresholds" in r}
    if members:
        drawn["member_thresholds"] = _png(figures.member_thresholds_figure(members))
    return drawn


def _threshold_section(folds, search, member_thresholds=None):
    section = Section("Decision threshold")
    shifts = [r["threshold"] for r in folds if "threshold" in r]
    if shifts:
        section.text(f"Shift chosen per fold: mean {np.mean(shifts):.4g}, min {np.min(shifts):.4g}, "
                     f"max {np.max(shifts):.4g} over {len(shifts)} folds.")
    if search is not None:
        objective = search.objective
        drawn = [search.theta, search.objective_values, search.chosen]
        section.interactive("threshold", lambda: interactive.threshold_plot(*drawn, objective_name=objective),
                            figures.threshold_figure(*drawn, objective_name=objective),
                            f"The objective ({objective}) each candidate shift the final model's search scored gives "
                            "on the margins it searched; dashed: the shift it chose; dotted: no shift. On the page, hovering a "
                            "candidate gives its shift and objective.")
    if member_thresholds is not None:
        section.figure("member_thresholds", member_thresholds,
                       "Each ensemble member's shift (after perturbation) in each fold.")
    return section


def _cost_section(metrics, resources):
    section = Section("Time and memory")
    phases = resources.get("phase_seconds") or {}
    if phases:
        section.table(["phase", "wall time (s)"], [[name, f"{seconds:.2f}"] for name, seconds in phases.items()])
    timings = metrics.get("timings") or {}
    if timings:
        section.table(["per fold", "mean (s)", "min (s)", "max (s)"],
                      [[name, _fmt(s["mean"]), _fmt(s["min"]), _fmt(s["max"])] for name, s in timings.items()])
    memory = resources.get("peak_worker_memory_bytes") or {}
    if memory:
        section.table(["process", "peak resident memory (MiB)"],
                      [[name, f"{value / 2**20:.0f}"] for name, value in sorted(memory.items())])
    return section


def render_markdown(title, sections, figure_dir: Path) -> str:
    """The report as Markdown; figures written as PNG files into ``figure_dir`` and linked relatively."""
    draw_sections(sections)
    figure_dir = Path(figure_dir)
    lines = [f"# {title}", ""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        for block in section.blocks:
            if block[0] == "text":
                lines += [block[1], ""]
            elif block[0] == "table":
                headers, rows = block[1], block[2]
                lines.append("| " + " | ".join(map(str, headers)) + " |")
                lines.append("|" + "---|" * len(headers))
                lines += ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]
                lines.append("")
            else:  # a figure, or an interactive one: its PNG
                name, data, caption = block[1], block[-2], block[-1]
                figure_dir.mkdir(parents=True, exist_ok=True)
                (figure_dir / f"{name}.png").write_bytes(data)
                lines += [f"![{caption}]({figure_dir.name}/{name}.png)", "", f"*{caption}*", ""]
    return "\n".join(lines)


_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1000px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ddd; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; }
th { background: #f3f3f3; } figure { margin: 1em 0; } figcaption { font-size: .85em; color: #555; }
img { max-width: 100%; }
"""


#: Draws each interactive figure's Bokeh document into its element once BokehJS is loaded, and marks the
#: figure ``data-rendered="yes"`` (or ``"failed"``, the error on the console): what a headless browser test reads.
_EMBED = """<script>
Bokeh.set_log_level("warn");  // its info lines ("document idle") would read as page errors in a browser's log
document.querySelectorAll("script.bokeh-document").forEach(function (data) {
  var figure = data.closest("figure");
  Bokeh.embed.embed_item(JSON.parse(data.textContent)).then(
    function () { figure.dataset.rendered = "yes"; },
    function (error) { figure.dataset.rendered = "failed"; console.error("plot " + figure.id + ": " + error); });
});
</script>"""


def render_html(title, sections) -> str:
    """The report as one HTML page: figures as base64 PNG ``data:`` URIs, interactive ones drawn by inline BokehJS."""
    draw_sections(sections)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    plots = 0
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        for block in section.blocks:
            if block[0] == "text":
                parts.append(f"<p>{html.escape(block[1])}</p>")
            elif block[0] == "table":
                parts.append(_html_table(block[1], block[2]))
            elif block[0] == "interactive":
                plots += 1
                parts.append(_html_interactive(block[1], block[2], block[4]))
            else:
                _, name, data, caption = block
                encoded = base64.b64encode(data).decode("ascii")
                parts.append(f'<figure id="{html.escape(name)}"><img alt="{html.escape(caption)}" '
                             f'src="data:image/png;base64,{encoded}"><figcaption>{html.escape(caption)}'
                             "</figcaption></figure>")
    if plots:  # last: the text and tables show while the browser parses the library (~1.3 MB)
        parts += [interactive.bokehjs(), _EMBED]
    parts.append("</body></html>")
    return "\n".join(parts)


def _html_table(headers, rows):
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _html_interactive(name, document, caption):
    """A figure whose plot BokehJS draws from the JSON document beside it (``document`` escapes ``</``)."""
    name = html.escape(name)
    return (f'<figure id="{name}" class="interactive"><div id="{name}-plot"></div>'
            f'<script type="application/json" class="bokeh-document">{document}</script>'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")
