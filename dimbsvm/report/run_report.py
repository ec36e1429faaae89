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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._counts import unique_counts
from .._forked import ForkedCallError, start_in_fork
from ..svm.objectives import objective_name
from . import figures, interactive
from .blocks import PendingFigure, Section
from .blocks import fmt as _fmt
from .blocks import pending_png as _png
from .oof_sections import brier_scores, chosen_cutoff, class_counts, out_of_fold_sections, threshold_rows

# (the out-of-fold sections' functions are here too, where they were before :mod:`.oof_sections` held them)
__all__ = ["DataSummary", "PendingFigure", "Section", "ThresholdSearch", "brier_scores", "chosen_cutoff",
           "class_counts", "class_names_by_code", "draw_sections", "fold_figures", "out_of_fold_sections",
           "run_report_sections", "render_html", "render_markdown", "threshold_rows", "write_run_report"]

logger = logging.getLogger(__name__)

#: The directory of the Markdown report's figures, beside it.
FIGURE_DIR = "report"

#: How long the side process waits for the interactive figures drawn in its forked copy before it draws them
#: itself: their curves are thinned to MAX_POINTS vertices, so this is far more than drawing them takes.
FORKED_DRAWING_SECONDS = 120


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
                   objective=objective_name(getattr(estimator, "objective", "objective")))


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
    oof : dict, default=None
        Each fold's summary of its out-of-fold predictions
        (:func:`dimbsvm.jobs.oof.load_fold_summaries`), or the predictions
        (:func:`dimbsvm.jobs.oof.load_oof`); needed only where
        ``oof_sections`` is not given.
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
    timings = list(metrics.get("timings") or {})
    quality.text("Each metric over the folds of every repeat: its mean, standard deviation, least and greatest "
                 "value, each fold scored on its own test rows"
                 + (" (the curves below pool a repeat's rows: their AUC and average precision differ)"
                    if {"auc", "average_precision"} & set(summary) else "")
                 + (f". Times ({', '.join(timings)}) are under Time and memory." if timings else "."))
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
    if members and not _all_zero(members.values()):  # a plot of zeros says less than the sentence that replaces it
        drawn["member_thresholds"] = _png(figures.member_thresholds_figure(members))
    return drawn


def _all_zero(shifts) -> bool:
    return all(not np.any(np.asarray(values, dtype=float)) for values in shifts)


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
    elif any("member_thresholds" in r for r in folds) and _all_zero(r["member_thresholds"] for r in folds
                                                                   if "member_thresholds" in r):
        section.text("Every ensemble member's shift is 0 in every fold: no member moved its threshold.")
    return section


def _cost_section(metrics, resources):
    section = Section("Time and memory")
    phases = resources.get("phase_seconds") or {}
    if phases:
        section.text("The run's wall time by phase, in order: before the run (the process's start-up, the job's "
                     "checks, the cluster's start) where `dimbsvm run` measured it, then the run. This report's "
                     "own drawing comes after; `dimbsvm run` prints it, and `resources.json` records it.")
        section.table(["phase", "wall time (s)"], [[name, f"{seconds:.2f}"] for name, seconds in phases.items()]
                      + [["total so far", f"{sum(phases.values()):.2f}"]])
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
