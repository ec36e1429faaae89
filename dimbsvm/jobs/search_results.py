"""A searched run's record of its search: saved per fold as it finishes, tabled at the end.

In the run directory:

* ``search/<fold>.json``: one outer fold's (or the final model's, ``final.json``)
  selection, saved with the fold so a resumed run keeps it;
* ``search.csv``: one row per (outer fold, candidate, inner fold) with the
  candidate's parameters, its inner-fold metrics and fit time, and ``error``
  where the candidate raised on that inner fold (its traceback is in the
  fold's JSON);
* ``search_summary.csv``: one row per (outer fold, candidate): mean and spread
  over the inner folds, fit time, rank, failed inner folds, and whether it was chosen.

``metrics.json`` gets :func:`search_overview`: the parameters chosen per outer
fold and for the final model, and each candidate's inner score averaged over
the outer folds.
"""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path

import numpy as np

from .._locks import atomic_file
from .run_dir import fold_file, write_json

__all__ = ["SEARCH_DIR", "fold_search_path", "load_fold_search", "save_fold_search", "search_overview",
           "warn_failed_fits", "write_search_tables"]

logger = logging.getLogger(__name__)

#: Where each fold's selection is saved, in the (partial) run directory.
SEARCH_DIR = "search"

#: The final model's key in the saved selections and tables.
FINAL = "final"


def fold_search_path(directory, key) -> Path:
    """``search/seed<S>-fold<F>.json`` for a CV fold, ``search/final.json`` for the final model."""
    name = fold_file(*key) if len(key) == 2 else f"{FINAL}.json"
    return Path(directory) / SEARCH_DIR / name


def save_fold_search(directory, key, selection: dict) -> None:
    write_json(fold_search_path(directory, key), selection)


def load_fold_search(directory, key) -> dict | None:
    path = fold_search_path(directory, key)
    return json.loads(path.read_text()) if path.exists() else None


def _outer(key) -> dict:
    return {"seed": key[0], "fold": key[1]} if len(key) == 2 else {"seed": FINAL, "fold": FINAL}


def write_search_tables(directory, selections: dict, *, scoring: str) -> None:
    """Write ``search.csv`` and ``search_summary.csv`` from ``{outer key: selection}``."""
    directory = Path(directory)
    inner_rows, summary_rows = [], []
    for key, selection in selections.items():
        params = {c: json.dumps(row["params"], sort_keys=True) for c, row in enumerate(selection["candidates"])}
        for record in sorted(selection["inner"], key=lambda r: (r["candidate"], r["inner_fold"])):
            values = {k: v for k, v in record.items() if k not in ("candidate", "inner_fold")
                      and isinstance(v, (int, float))}
            inner_rows.append({**_outer(key), "candidate": record["candidate"], "params": params[record["candidate"]],
                               "inner_fold": record["inner_fold"], **values, "error": record.get("error", "")})
        for row in selection["candidates"]:
            summary_rows.append({**_outer(key), **{k: v for k, v in row.items() if k != "params"},
                                 "params": params[row["candidate"]],
                                 "chosen": row["candidate"] == selection["index"]})
    _write_csv(directory / "search.csv", inner_rows)
    _write_csv(directory / "search_summary.csv", summary_rows)


def _write_csv(path: Path, rows: list) -> None:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with atomic_file(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def warn_failed_fits(key, selection: dict, error_score) -> None:
    """Log a warning naming the candidates of one outer fold's search that raised on inner folds."""
    failures = selection.get("failures") or []
    if not failures:
        return
    candidates = sorted({f["candidate"] for f in failures})
    first = failures[0]
    logger.warning("search of %s: %d of %d inner fits failed and were scored %s (candidate(s) %s); the first, "
                   "candidate %d %s on inner fold %d: %s. Every error is in search.csv and its traceback in %s/",
                   "the final model" if len(key) != 2 else f"fold {tuple(key)}", len(failures),
                   len(selection["inner"]), error_score, ", ".join(map(str, candidates)), first["candidate"],
                   selection["candidates"][first["candidate"]]["params"], first["inner_fold"], first["error"],
                   SEARCH_DIR)


def search_overview(selections: dict, *, search: dict, scoring: str) -> dict:
    """What ``metrics.json`` records of the search.

    ``chosen``: per outer fold (and ``final``), the parameters chosen and their
    inner score; ``candidates``: per candidate, its inner score averaged over
    the outer folds (not the final model's search), how many outer folds
    chose it, and its seconds (fit and predict) summed over every inner fold.
    """
    chosen = []
    for key, selection in selections.items():
        best = selection["candidates"][selection["index"]]
        chosen.append({**_outer(key), "candidate": selection["index"], "params": selection["params"],
                       f"mean_{scoring}": best[f"mean_{scoring}"], "floor_met": selection["floor_met"]})
    folds = [s for key, s in selections.items() if len(key) == 2]
    first = next(iter(selections.values()))
    candidates = []
    for c, row in enumerate(first["candidates"]):
        scores = [s["candidates"][c][f"mean_{scoring}"] for s in folds]
        candidates.append({"candidate": c, "params": row["params"],
                           f"mean_{scoring}": float(np.mean(scores)) if scores else None,
                           "times_chosen": sum(s["index"] == c for s in folds),
                           "failed_inner_fits": int(sum(s["candidates"][c].get("n_failed", 0)
                                                        for s in selections.values())),
                           "seconds": float(sum(s["candidates"][c].get("fit_time", 0.0)
                                                + s["candidates"][c].get("predict_time", 0.0)
                                                for s in selections.values()))})
    return {"space": search, "scoring": scoring, "n_candidates": len(first["candidates"]),
            "chosen": chosen, "candidates": candidates}
