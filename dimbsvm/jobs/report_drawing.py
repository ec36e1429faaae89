"""Where a run's report is drawn: in a side process, unless this process has the drawing libraries loaded.

A small job run in this process spends about a second importing matplotlib
and Bokeh and drawing after its last fit: as long as the fits themselves.
Drawn in a :class:`~dimbsvm._side_process.SideProcess` started with the run,
the imports happen on the other core while this process imports
scikit-learn and fits, and what needs only the folds (the out-of-fold
sections, the figures of the folds' records: :func:`draw_ahead`) is drawn
while the final model fits; the report's files are the same bytes either
way. Where this process already has matplotlib and Bokeh (a long-lived
process that drew before: a notebook, ``schedule``) and no side process
runs, it draws here, what needs only the folds in a thread beside the final
model.

The functions the side process runs are in this module, which imports only
numpy, the report and the out-of-fold files, so it starts quickly.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading

import numpy as np

from .._side_process import SideProcess, SideProcessError
from ..report import figures, interactive
from ..report.run_report import Section, draw_sections, fold_figures, out_of_fold_sections, write_run_report
from .oof import load_fold_summaries

__all__ = ["draw_ahead", "prepare_drawing", "report_process", "write_report"]

logger = logging.getLogger(__name__)

#: Loaded here, these make drawing in this process cheaper than starting a process that loads them.
DRAWING_LIBRARIES = ("matplotlib", "bokeh")

_lock = threading.Lock()
_process: SideProcess | None = None


def report_process() -> SideProcess | None:
    """The side process that draws reports, started on first call; None where this process draws.

    None where this process has the drawing libraries loaded and no side
    process runs, or where one cannot be started. Started once per process
    (again if it died): it imports the drawing libraries at once, is reused
    by every later run of this process, and ends with it.
    """
    global _process
    with _lock:
        if _process is not None and not _process.alive:  # it died (killed, out of memory): a new one is started
            logger.warning("the report's side process %d has ended; starting another", _process.pid)
            _process = None
        if _process is not None or any(name in sys.modules for name in DRAWING_LIBRARIES):
            return _process
        try:
            _process = SideProcess()
        except SideProcessError as exc:
            logger.info("the report is drawn in this process: %s", exc)
            return None
        atexit.register(_process.close)
        _process.submit(prepare_drawing)
        logger.debug("reports are drawn in side process %d", _process.pid)
        return _process


def prepare_drawing() -> None:
    """Import what the report draws with (matplotlib's object API and Bokeh) and draw one throw-away figure each.

    A process's first drawing also finds and loads its fonts and fills
    matplotlib's and Bokeh's first-use caches; done here, ahead of the
    run's first report, that is off the run's critical path.
    """
    import bokeh.embed  # noqa: F401
    import bokeh.layouts  # noqa: F401
    import bokeh.models  # noqa: F401
    import bokeh.plotting  # noqa: F401
    import matplotlib.backends.backend_agg  # noqa: F401
    import matplotlib.figure  # noqa: F401

    theta, objective = np.array([-1.0, 0.0, 1.0]), np.array([0.2, 0.5, 0.4])
    figures.png(figures.threshold_figure(theta, objective, 0.0, objective_name="g_mean"))
    interactive.document_json(interactive.threshold_plot(theta, objective, 0.0, objective_name="g_mean"), "warm-up")


def draw_ahead(partial, class_names, pos_label, n_repeats, folds, metric_names, split=False):
    """What the report can draw once every fold is saved, before the final model is: drawn.

    The out-of-fold sections (:func:`~dimbsvm.report.run_report.out_of_fold_sections`
    of the predictions saved in ``partial``) and the figures of the folds'
    ``records`` (:func:`~dimbsvm.report.run_report.fold_figures`), as
    ``(sections, figures)`` for :func:`write_report`. ``split`` in the side
    process only (:func:`~dimbsvm.report.run_report.draw_sections`).
    """
    sections = out_of_fold_sections(load_fold_summaries(partial, pos_label), class_names, pos_label,
                                    n_repeats=n_repeats)
    records = Section("the folds' figures", [("figure", name, figure, "")
                                              for name, figure in fold_figures(folds, metric_names).items()])
    draw_sections([*sections, records], split=split)
    return sections, {block[1]: block[2] for block in records.blocks}


def write_report(partial, *, ahead=None, **inputs):
    """Write the run report into ``partial`` (:func:`~dimbsvm.report.run_report.write_run_report`'s ``inputs``).

    In the side process where one runs, else here. ``ahead`` is a future of
    :func:`draw_ahead` (of either place), or None: drawn with the rest. The
    side process failing (it died, or could not be started) is a warning,
    and the report is drawn here; an error of the drawing itself is raised.
    """
    drawn = _drawn(ahead)
    process = report_process()
    if process is not None:
        try:
            path = process.submit(_write, partial, drawn, inputs, True).result()
            logger.info("report written to %s (drawn in side process %d)", path, process.pid)
            return path
        except SideProcessError as exc:
            logger.warning("the report's side process failed (%s): the report is drawn in this process", exc)
    return _write(partial, drawn, inputs)


def _drawn(future):
    if future is None:
        return None
    try:
        return future.result()
    except SideProcessError as exc:
        logger.warning("the report's side process failed (%s): the report is drawn in this process", exc)
        return None


def _write(partial, drawn, inputs, split=False):
    sections, figures_of_folds = drawn if drawn is not None else (None, None)
    oof = load_fold_summaries(partial, inputs["metrics"]["positive_label"]) if sections is None else None
    return write_run_report(partial, oof=oof, oof_sections=sections,
                            drawn_folds=figures_of_folds, split=split, **inputs)
