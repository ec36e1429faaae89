"""A report's parts: sections of text, tables and figures drawn later, and the report's one number format."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import figures, interactive

__all__ = ["PendingFigure", "Section", "fmt", "pending_png"]


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
        self.blocks.append(("figure", name, pending_png(fig), caption))

    def interactive(self, name, model, fig, caption):
        """A Bokeh model for the HTML page (``model()`` builds it), ``fig`` (the same figure drawn by matplotlib) for
        the Markdown."""
        document = PendingFigure("bokeh", lambda: interactive.document_json(model(), f"{name}-plot"))
        self.blocks.append(("interactive", name, document, pending_png(fig), caption))


def pending_png(fig):
    """A matplotlib figure as a pending PNG; PNG bytes, or a pending figure, as they are."""
    if isinstance(fig, (bytes, PendingFigure)):
        return fig
    return PendingFigure("png", lambda: figures.png(fig))


def fmt(value, digits=4):
    """A value as the report prints it: 4 decimals (one format for a table's means, spreads and extremes), or 4
    significant digits where 4 decimals would show no digit (below 0.00005) or too many (10^4 and above).

    Examples
    --------
    >>> fmt(0.84071), fmt(0.0008318), fmt(0.00001234), fmt(0.0), fmt(123456.7)
    ('0.8407', '0.0008', '1.234e-05', '0.0000', '1.235e+05')
    """
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        tiny = value and abs(value) < 0.5 * 10.0 ** -digits
        return f"{value:.{digits}g}" if abs(value) >= 1e4 or tiny else f"{value:.{digits}f}"
    return str(value)
