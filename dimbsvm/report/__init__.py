"""Run reports: figures (:mod:`.figures`) and the Markdown/HTML report of a run (:mod:`.run_report`)."""

from .run_report import write_run_report

__all__ = ["write_run_report"]
