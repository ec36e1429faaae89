"""The report of a run: ``report.md`` (figures in ``report/``) and a self-contained ``report.html``.

What a person evaluating an imbalanced classifier wants to look at: the data
(class counts, imbalance ratio), the metrics with their spread over folds,
the ROC and precision-recall curves and the confusion matrix of the
out-of-fold predictions, where the decision threshold sits (the final
model's threshold search; an ensemble's member thresholds), and what the run
cost (time and peak memory).

A report is a list of sections of blocks (text, table, figure), rendered
twice: Markdown with the figures as PNG files beside it, and HTML with the
same PNGs embedded as ``data:`` URIs, so the HTML file alone is the report
(no network, no other file).
"""

from __future__ import annotations

import base64
import html
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import figures

__all__ = ["Section", "oof_curves_png", "run_report_sections", "render_html", "render_markdown", "write_run_report"]

logger = logging.getLogger(__name__)

#: The directory of the Markdown report's figures, beside it.
FIGURE_DIR = "report"


@dataclass
class Section:
    """A titled part of a report: blocks of ``("text", str)``, ``("table", headers, rows)`` or
    ``("figure", name, png_bytes, caption)``."""

    title: str
    blocks: list = field(default_factory=list)

    def text(self, value):
        self.blocks.append(("text", value))

    def table(self, headers, rows):
        self.blocks.append(("table", list(headers), [list(row) for row in rows]))

    def figure(self, name, fig, caption):
        self.figure_png(name, figures.png(fig), caption)

    def figure_png(self, name, png: bytes, caption):
        self.blocks.append(("figure", name, png, caption))


def write_run_report(directory, *, job, data, metrics, resources, oof, final_estimator=None,
                     oof_curves=None) -> Path:
    """Write ``report.md``, its figures and ``report.html`` into a run directory; return the HTML's path.

    Parameters
    ----------
    directory : path
        The run directory.
    job : JobSpec
        The validated job (:class:`~dimbsvm.jobs.job_spec.JobSpec`): its
        name, estimator, data source, CV and scaler are read.
    data : JobData
        The job's data (labels, class names, shape).
    metrics, resources : dict
        What the run writes to ``metrics.json`` and ``resources.json``.
    oof : dict of ndarray
        The out-of-fold predictions (:func:`dimbsvm.jobs.oof.load_oof`).
    final_estimator : estimator, default=None
        The final model's estimator, for its threshold search; ``None`` when
        the job saves no final model.
    oof_curves : bytes or concurrent.futures.Future, default=None
        :func:`oof_curves_png` of these out-of-fold predictions, drawn
        beforehand (e.g. while the final model was fitting), or a future of
        it; ``None`` draws it here.
    """
    directory = Path(directory)
    title, sections = run_report_sections(job=job, data=data, metrics=metrics, resources=resources,
                                          oof=oof, final_estimator=final_estimator, oof_curves=oof_curves)
    (directory / "report.md").write_text(render_markdown(title, sections, directory / FIGURE_DIR))
    path = directory / "report.html"
    path.write_text(render_html(title, sections))
    logger.info("report written to %s", path)
    return path


def _class_names(data) -> dict:
    """``{label code: class name}`` (the code itself where the data names no classes)."""
    names = {int(code): str(name) for name, code in (data.meta.get("class_map") or {}).items()}
    return {int(code): names.get(int(code), str(code)) for code in np.unique(data.y)}


def _fmt(value, digits=4):
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        return f"{value:.{digits}g}" if abs(value) >= 1e4 or (value and abs(value) < 1e-3) else f"{value:.{digits}f}"
    return str(value)


def run_report_sections(*, job, data, metrics, resources, oof, final_estimator=None, oof_curves=None):
    """The report's title and sections (see :class:`Section`) from a run's outputs.

    ``oof_curves`` as :func:`write_run_report` takes it.
    """
    if hasattr(oof_curves, "result"):  # a future: drawn in another thread; no figure is drawn before it is done
        oof_curves = oof_curves.result()
    names = _class_names(data)
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

    labels, counts = np.unique(data.y, return_counts=True)
    about = Section("Data")
    about.table(["class", "rows", "share", "role"],
                [[names[int(c)], int(n), f"{n / counts.sum():.2%}", "positive (minority)" if c == pos_label else ""]
                 for c, n in zip(labels, counts)])
    about.text(f"{len(data.y)} rows, {data.X.shape[1]} features; imbalance ratio (largest class / smallest) "
               f"{counts.max() / counts.min():.2f}.")
    sections.append(about)

    quality = Section("Metrics")
    summary = metrics["summary"]
    quality.table(["metric", "mean", "std", "min", "max", "folds"],
                  [[name, _fmt(s["mean"]), _fmt(s["std"]), _fmt(s["min"]), _fmt(s["max"]), s["n"]]
                   for name, s in summary.items()])
    folds = metrics["folds"]
    if summary and len(folds) > 1:
        quality.figure("fold_spread", figures.fold_spread_figure({name: [r[name] for r in folds] for name in summary}),
                       "Each fold's value (points) over the box of all folds and repeats.")
    sections.append(quality)
    if metrics.get("search"):
        sections.append(_search_section(metrics["search"]))
    sections.append(_oof_section(oof, names, pos_label, n_repeats=cv.n_repeats, curves=oof_curves))
    threshold = _threshold_section(folds, final_estimator)
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


def oof_curves_png(oof, n_classes, pos_label):
    """The ROC and precision-recall figure of out-of-fold predictions as PNG bytes.

    ``None`` where it has none: more than two classes, or scores that are
    not all finite. Safe in a thread of its own while nothing else draws
    (matplotlib's object API, one figure).
    """
    if n_classes != 2 or not np.isfinite(oof["score"]).all():
        return None
    positive = oof["y_true"] == pos_label
    return figures.png(figures.roc_pr_figure(positive, oof["score"], oof["seed"]))


def _oof_section(oof, names, pos_label, *, n_repeats, curves=None):
    from sklearn.metrics import confusion_matrix

    section = Section("Out-of-fold predictions")
    section.text(f"Every row is a test row once per repeat ({n_repeats} repeat(s)); the predictions are in the "
                 "run directory's `oof/` files (one `.npz` per fold: row, y_true, y_pred, score).")
    codes = sorted(names)
    if curves is None:
        curves = oof_curves_png(oof, len(codes), pos_label)
    if curves is not None:
        section.figure_png("roc_pr", curves,
                           "ROC and precision-recall curves of the out-of-fold scores, one curve per repeat "
                           "(AUC and average precision in the legends); dotted: chance.")
    matrix = confusion_matrix(oof["y_true"], oof["y_pred"], labels=codes)
    section.figure("confusion", figures.confusion_figure(
        matrix, [names[c] for c in codes],
        title=f"Out-of-fold predictions, {n_repeats} repeat(s) summed (rows: true class)"),
        "Confusion matrix of the out-of-fold predictions; each row counted once per repeat.")
    return section


def _threshold_section(folds, final_estimator):
    section = Section("Decision threshold")
    shifts = [r["threshold"] for r in folds if "threshold" in r]
    if shifts:
        section.text(f"Shift chosen per fold: mean {np.mean(shifts):.4g}, min {np.min(shifts):.4g}, "
                     f"max {np.max(shifts):.4g} over {len(shifts)} folds.")
    candidates = getattr(final_estimator, "candidates_", None)
    if candidates is not None and "theta" in candidates and "score" in candidates:
        objective = getattr(final_estimator, "objective", "objective")
        section.figure("threshold", figures.threshold_figure(
            candidates["theta"], candidates["score"], final_estimator.threshold_,
            objective_name=str(objective)),
            f"The objective ({objective}) each candidate shift gives on the margins the final model searched; "
            "dashed: the shift it chose.")
    members = {f"s{r['seed']} f{r['fold']}": r["member_thresholds"] for r in folds if "member_thresholds" in r}
    if members:
        section.figure("member_thresholds", figures.member_thresholds_figure(members),
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
            else:
                _, name, data, caption = block
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


def render_html(title, sections) -> str:
    """The report as one HTML page, figures embedded as base64 PNG ``data:`` URIs."""
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        for block in section.blocks:
            if block[0] == "text":
                parts.append(f"<p>{html.escape(block[1])}</p>")
            elif block[0] == "table":
                headers, rows = block[1], block[2]
                head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
                body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
                               for row in rows)
                parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
            else:
                _, name, data, caption = block
                encoded = base64.b64encode(data).decode("ascii")
                parts.append(f'<figure id="{html.escape(name)}"><img alt="{html.escape(caption)}" '
                             f'src="data:image/png;base64,{encoded}"><figcaption>{html.escape(caption)}'
                             "</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts)
