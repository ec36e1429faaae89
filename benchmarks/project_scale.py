"""A cost model fitted to serial-fraction runs, projecting the ensemble job to N rows on W workers.

Usage (from the repository root)::

    python -m benchmarks.project_scale benchmarks/results/serial-fraction/summary.json \\
        --rows 100000000 --workers 32 128 [--inflation 1.9] [--out benchmarks/results/project-scale]

The input is one or more ``summary.json`` files of ``benchmarks.serial_fraction``
(the ensemble job on two single-threaded workers). Every run there gives, at its
size ``n``, the client's seconds before the first task (``first_task``) and after
the last (``after_last_task``), and per task kind its task count and busy seconds.

**Fit.** Each of these terms is fitted over the runs as ``a + b * n`` by least
squares with ``a, b >= 0`` (:func:`fit_line`; repeats of a size are separate
points). With a single size the data cannot separate a constant from a slope:
then ``b = value / n`` and ``a = 0`` (every second proportional to n, which
overstates fixed costs such as Python's start), and the output says so.

**Classes of task kinds** (:func:`classify`), read from the task counts:

- *one per fold*: the count equals the number of folds plus the final model
  (``F``) in every run, e.g. ``rows``, ``prepare``, ``assemble``, ``finish``.
  They are serial within a fold, but the folds run side by side.
  ``F`` is the job's, not in ``summary.json``: a run's ``folds`` if it has
  one, else ``serial_fraction.job_spec``'s splits x repeats + 1
  (``--folds`` overrides).
- *per chunk*: the rest whose count is the same multiple ``k`` of the run's
  chunk count in every run (``read``, ``oob``, ``score``): at N rows there
  are ``k * ceil(N / chunk_rows)`` tasks, ``chunk_rows`` being the rows per
  chunk of the largest run (``--chunk-rows`` overrides).
- *fixed count*: the rest (``bag``, ``member``: per member and fold; the
  store's shared keys): as many tasks at N as measured (the largest count seen).

If every run has the same chunk count and a count is a multiple of the chunks
that could also be one task per member and fold (a multiple of the members, at
most members x F), the data cannot tell the two apart; such a kind is taken as
per chunk and the output names it.

**Projection** (:func:`project`) of the wall time at N rows on W workers:
client (before + after) + the fold chain (the one-per-fold kinds' busy seconds
/ ``min(W, F)``: the longest fold's chain when ``F`` equal folds run side by
side) + for each other kind, busy seconds / ``min(W, its tasks at N)``, the
per-chunk kinds' multiplied by ``--inflation`` (memory bandwidth: chunk passes
took x1.9 the CPU with 16 concurrent tasks per host on the 16-core machine,
``scaling_notes.md``, "Cost model"; 1.0 keeps the two-worker seconds).
The same projection at each measured size on the run's two workers (its own
chunk count, no inflation) is printed beside the measured T.

The arithmetic (:func:`fit_line`, :func:`classify`, :func:`fit_terms`,
:func:`project`, :func:`project_scale`) is pure: summaries in, numbers out.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dimbsvm.environment import machine_info, package_versions, utc_now

#: The two-worker runs of ``benchmarks.serial_fraction`` (its cluster has two single-threaded workers).
MEASURED_WORKERS = 2
#: CPU inflation of chunk passes with 16 concurrent tasks per host (16-core machine; scaling_notes.md, "Cost model").
MEASURED_INFLATION = 1.9
CLIENT_TERMS = (("client before first task", "first_task"), ("client after last task", "after_last_task"))
TITLE = "Fitted projection of the ensemble job to {rows} rows on {workers} workers (issue 34, item 5)"


def default_folds() -> int:
    """Folds plus the final model of the serial-fraction job (its CV's splits x repeats, + 1)."""
    from benchmarks.serial_fraction import job_spec

    cv = job_spec(Path("store"), 16, 20_000)["cv"]
    return cv["n_splits"] * cv.get("n_repeats", 1) + 1


def busy_seconds(entry: dict) -> float:
    """A kind's busy seconds (``serial_fraction`` records them as ``seconds``; ``busy`` is accepted too)."""
    return float(entry["busy"] if "busy" in entry else entry["seconds"])


# --- the arithmetic: summaries in, numbers out --------------------------------------------------------------------

def fit_line(sizes: Sequence[float], values: Sequence[float]) -> dict:
    """Least-squares ``value = a + b * n`` with ``a, b >= 0``.

    Parameters
    ----------
    sizes, values : sequence of float
        One point per run (repeats of a size are separate points).

    Returns
    -------
    dict
        ``a`` (seconds), ``b`` (seconds per row), ``one_size`` (True when all
        points share one size: then ``b = mean(value) / n`` and ``a = 0``) and
        ``max_residual`` (seconds, largest ``|fit - value|`` over the points).

    Examples
    --------
    >>> fit = fit_line([1e6, 3e6], [3.0, 7.0])
    >>> round(fit["a"], 6), round(fit["b"] * 1e6, 6), fit["one_size"]
    (1.0, 2.0, False)
    >>> fit_line([4e6, 4e6], [2.0, 4.0])["b"] * 4e6
    3.0
    """
    n = np.asarray(sizes, dtype=float)
    y = np.asarray(values, dtype=float)
    if len(np.unique(n)) < 2:
        a, b, one_size = 0.0, max(float(y.mean()), 0.0) / float(n[0]), True
    else:
        one_size = False
        a, b = np.linalg.lstsq(np.column_stack([np.ones_like(n), n]), y, rcond=None)[0]
        if a < 0 or b < 0:
            # the problem is convex, so the constrained optimum lies on the boundary a = 0 or b = 0: the better
            # of the two one-parameter fits (each clipped at 0)
            through_origin = (0.0, max(float(n @ y / (n @ n)), 0.0))
            constant = (max(float(y.mean()), 0.0), 0.0)
            a, b = min((through_origin, constant), key=lambda ab: float(np.sum((ab[0] + ab[1] * n - y) ** 2)))
    a, b = float(a), float(b)
    return {"a": a, "b": b, "one_size": one_size, "max_residual": float(np.max(np.abs(a + b * n - y)))}


def classify(runs: Sequence[dict], folds: int) -> dict[str, dict]:
    """Each task kind's class, from its task counts in the runs.

    Parameters
    ----------
    runs : sequence of dict
        ``serial_fraction`` runs (``kinds``, ``chunks`` and, if present, ``members``).
    folds : int
        Folds plus the final model (the number of one-per-fold tasks of a kind).

    Returns
    -------
    dict
        ``{kind: {"class": "fold" | "chunk" | "fixed", "tasks": int, "per_chunk": int or None,
        "ambiguous": bool}}``; ``tasks`` is the largest count seen, ``per_chunk``
        the tasks per chunk of a per-chunk kind, ``ambiguous`` True when the
        count could be per member as well (see the module's docstring).

    Examples
    --------
    >>> runs = [{"chunks": 64, "members": 16, "kinds": {"rows": {"tasks": 3}, "read": {"tasks": 192},
    ...          "member": {"tasks": 48}}}]
    >>> {k: v["class"] for k, v in classify(runs, 3).items()}
    {'rows': 'fold', 'read': 'chunk', 'member': 'fixed'}
    """
    counts: dict[str, list[tuple[int, int, int | None]]] = {}
    for run in runs:
        for kind, entry in run["kinds"].items():
            counts.setdefault(kind, []).append((int(entry["tasks"]), int(run["chunks"]), run.get("members")))
    one_chunk_count = len({run["chunks"] for run in runs}) == 1
    out = {}
    for kind, seen in counts.items():
        tasks = max(t for t, _, _ in seen)
        ratios = {t // c if c and t % c == 0 else None for t, c, _ in seen}
        if all(t == folds for t, _, _ in seen):
            entry = {"class": "fold", "per_chunk": None, "ambiguous": False}
        elif len(ratios) == 1 and None not in ratios and 0 not in ratios:
            # a per-member kind has at most one task per member and fold (bag, member: members x folds)
            ambiguous = one_chunk_count and all(m and t % m == 0 and t <= m * folds for t, _, m in seen)
            entry = {"class": "chunk", "per_chunk": ratios.pop(), "ambiguous": bool(ambiguous)}
        else:
            entry = {"class": "fixed", "per_chunk": None, "ambiguous": False}
        out[kind] = dict(entry, tasks=tasks)
    return out


def fit_terms(runs: Sequence[dict], folds: int) -> list[dict]:
    """The fitted terms: the client's two, then every task kind's busy seconds (a kind absent from a run: 0 s).

    Returns
    -------
    list of dict
        ``name``, ``class`` (``"client"``, ``"fold"``, ``"chunk"``, ``"fixed"``), ``tasks``,
        ``per_chunk``, ``ambiguous`` and :func:`fit_line`'s ``a``, ``b``, ``one_size``,
        ``max_residual``.
    """
    sizes = [run["n"] for run in runs]
    terms = [dict(name=name, **{"class": "client", "tasks": None, "per_chunk": None, "ambiguous": False},
                  **fit_line(sizes, [run[key] for run in runs])) for name, key in CLIENT_TERMS]
    for kind, info in classify(runs, folds).items():
        values = [busy_seconds(run["kinds"][kind]) if kind in run["kinds"] else 0.0 for run in runs]
        terms.append(dict(name=kind, **info, **fit_line(sizes, values)))
    return terms


def tasks_at(term: dict, chunks: int) -> int | None:
    """A kind's task count with ``chunks`` chunks (None for the client's terms)."""
    if term["class"] == "chunk":
        return term["per_chunk"] * chunks
    return term["tasks"]


def project(terms: Sequence[dict], rows: float, workers: int, *, folds: int, chunks: int,
            inflation: float = 1.0) -> dict:
    """Projected wall seconds of each term, their total and the largest, at ``rows`` rows on ``workers`` workers.

    Parameters
    ----------
    terms : sequence of dict
        :func:`fit_terms`'s.
    rows : float
    workers : int
    folds : int
        Folds plus the final model, run side by side.
    chunks : int
        Chunks of the store at ``rows`` (per-chunk kinds have ``per_chunk * chunks`` tasks).
    inflation : float, default=1.0
        Factor on the per-chunk kinds' busy seconds (memory bandwidth).

    Returns
    -------
    dict
        ``seconds`` ({term: seconds}), ``tasks`` ({term: tasks at ``rows``}), ``total``
        and ``dominant`` (the term with the most seconds).

    Examples
    --------
    >>> terms = [{"name": "c", "class": "client", "tasks": None, "a": 1.0, "b": 0.0},
    ...          {"name": "f", "class": "fold", "tasks": 3, "a": 0.0, "b": 3e-6},
    ...          {"name": "r", "class": "chunk", "tasks": 128, "per_chunk": 2, "a": 0.0, "b": 8e-6}]
    >>> p = project(terms, 1e6, 4, folds=3, chunks=64, inflation=2.0)
    >>> p["seconds"], p["total"], p["dominant"]
    ({'c': 1.0, 'f': 1.0, 'r': 4.0}, 6.0, 'r')
    """
    seconds, counts = {}, {}
    for term in terms:
        busy = term["a"] + term["b"] * rows
        tasks = tasks_at(term, chunks)
        if term["class"] == "client":
            value = busy
        elif term["class"] == "fold":
            # a fold's chain of one-per-fold tasks is serial; the folds run side by side on separate workers
            value = busy / min(workers, folds)
        else:
            # as if a kind's tasks spread evenly over the workers it can use, with no gap between them
            value = busy * (inflation if term["class"] == "chunk" else 1.0) / max(min(workers, tasks), 1)
        seconds[term["name"]], counts[term["name"]] = value, tasks
    total = sum(seconds.values())
    return {"seconds": seconds, "tasks": counts, "total": total,
            "dominant": max(seconds, key=seconds.get) if seconds else None}


def assumptions(*, one_size: bool, rows: float, largest: float, chunk_rows: int, folds: int,
                inflation: float, ambiguous: Sequence[str]) -> list[str]:
    """The projection's assumptions, as sentences for the output."""
    out = [
        "Terms add up: the client's time, the fold chain and each other kind's share run one after another "
        "(no overlap between kinds, so an upper bound in that respect), and a kind's tasks spread evenly over "
        "min(W, tasks) workers with no gap between them (a lower bound in that respect: no scheduling, "
        "transfers or stragglers; the client's work between tasks inside the task window is not a term).",
        f"One-per-fold kinds: {folds} chains (folds + final model) side by side, each the same length, so "
        f"their busy seconds / min(W, {folds}).",
        f"Chunks at N: N / {chunk_rows:,} rows per chunk (the largest run's), so per-chunk kinds have "
        "tasks per chunk x that; fixed-count kinds (per member and fold) keep their measured count; members and "
        "bag size as measured.",
        f"Busy seconds as on the two-worker machine; per-chunk kinds x{inflation:g} for memory bandwidth "
        f"(x{MEASURED_INFLATION:g} measured for chunk passes with 16 concurrent tasks per host on the 16-core "
        "machine: `--inflation 1.9`; one-per-fold and fixed-count kinds not inflated).",
        f"Every term linear in n, extrapolated x{rows / largest:.0f} beyond the largest run ({largest:,.0f} rows): "
        "a term growing faster (the threshold search's sorts, n log n) is underestimated; memory is not modelled "
        "(whether a fold's row indices, the labels and the pooled margins fit a worker at N).",
    ]
    if one_size:
        out.append("One size only: every term fitted as b = value / n, a = 0, so fixed costs (Python's start and "
                   "imports, the report's setup) are scaled with n as well; the projection overstates them.")
    if ambiguous:
        out.append(f"Taken as per chunk though every run has one chunk count and their counts are multiples of the "
                   f"members as well: {', '.join(ambiguous)}.")
    return out


def project_scale(summaries: Sequence[dict], rows: float, workers: Sequence[int], *, folds: int | None = None,
                  chunk_rows: int | None = None, inflation: float = 1.0) -> dict:
    """Fit the runs of ``serial_fraction`` summaries and project them to ``rows`` rows on each of ``workers``.

    Returns
    -------
    dict
        ``rows``, ``workers``, ``folds``, ``chunk_rows``, ``chunks`` (at ``rows``),
        ``inflation``, ``sizes``, ``one_size``, ``terms`` (:func:`fit_terms`),
        ``projections`` ({str(W): :func:`project`}), ``checks`` (per run: ``n``,
        ``repeat``, measured ``T``, ``projected`` on the run's workers and chunks
        without inflation, ``off`` = projected / T - 1) and ``assumptions``.
    """
    runs = [run for summary in summaries for run in summary["runs"]]
    if not runs:
        raise ValueError("no runs in the summaries")
    if folds is None:
        stated = {run["folds"] for run in runs if "folds" in run}
        if len(stated) > 1:
            raise ValueError(f"the runs have different folds: {sorted(stated)}")
        folds = stated.pop() if stated else default_folds()
    largest = max(runs, key=lambda run: run["n"])
    if chunk_rows is None:
        chunk_rows = math.ceil(largest["n"] / largest["chunks"])
    chunks = math.ceil(rows / chunk_rows)
    terms = fit_terms(runs, folds)
    one_size = len({run["n"] for run in runs}) == 1
    projections = {str(w): project(terms, rows, w, folds=folds, chunks=chunks, inflation=inflation)
                   for w in workers}
    checks = []
    for run in runs:
        projected = project(terms, run["n"], run.get("workers", MEASURED_WORKERS), folds=folds,
                            chunks=run["chunks"])["total"]
        checks.append({"n": run["n"], "repeat": run.get("repeat", 0), "T": run["T"], "projected": projected,
                       "off": projected / run["T"] - 1})
    return {"rows": rows, "workers": list(workers), "folds": folds, "chunk_rows": chunk_rows, "chunks": chunks,
            "inflation": inflation, "sizes": sorted({run["n"] for run in runs}), "one_size": one_size,
            "terms": terms, "projections": projections, "checks": checks,
            "assumptions": assumptions(one_size=one_size, rows=rows, largest=largest["n"], chunk_rows=chunk_rows,
                                       folds=folds, inflation=inflation,
                                       ambiguous=[t["name"] for t in terms if t["ambiguous"]])}


# --- report ------------------------------------------------------------------------------------------------------

CLASS_LABELS = {"client": "client", "fold": "one per fold", "chunk": "per chunk", "fixed": "fixed count"}


def render_markdown(summary: dict) -> list[str]:
    """The fitted terms with their projected seconds per worker count, the check at the measured sizes, the assumptions."""
    workers = summary["workers"]
    projections = [summary["projections"][str(w)] for w in workers]
    fit_note = ("one size: a = 0, b = value / n" if summary["one_size"] else
                f"least squares over {len(summary['sizes'])} sizes, a, b >= 0")
    lines = [f"Projection to {summary['rows']:,.0f} rows ({summary['chunks']:,} chunks of {summary['chunk_rows']:,} "
             f"rows; {summary['folds']} folds incl. the final model; per-chunk inflation x{summary['inflation']:g}); "
             f"terms fitted as a + b*n ({fit_note}) on n = "
             + ", ".join(f"{n:,.0f}" for n in summary["sizes"]) + ":", "",
             "| term | class | tasks at N | a s | b us/row | max residual s | "
             + " | ".join(f"W={w} s" for w in workers) + " |",
             "|---" * (6 + len(workers)) + "|"]
    for term in summary["terms"]:
        tasks = projections[0]["tasks"][term["name"]] if projections else None
        lines.append(f"| {term['name']} | {CLASS_LABELS[term['class']]} | {'' if tasks is None else f'{tasks:,}'} "
                     f"| {term['a']:.3g} | {term['b'] * 1e6:.3g} | {term['max_residual']:.2f} | "
                     + " | ".join(f"{p['seconds'][term['name']]:.1f}" for p in projections) + " |")
    for cls, label in CLASS_LABELS.items():
        names = [t["name"] for t in summary["terms"] if t["class"] == cls]
        if names:
            lines.append(f"| subtotal: {label} | | | | | | " + " | ".join(
                f"{sum(p['seconds'][name] for name in names):.1f}" for p in projections) + " |")
    lines.append("| **total** | | | | | | " + " | ".join(f"**{p['total']:.1f}**" for p in projections) + " |")
    lines.append("| dominant term | | | | | | " + " | ".join(
        f"{p['dominant']} ({p['seconds'][p['dominant']] / p['total']:.0%})" for p in projections) + " |")
    checks = summary["checks"]
    worst = max(checks, key=lambda c: abs(c["off"]))
    lines += ["", "The same projection at the measured sizes, on the runs' two workers and chunk counts, without "
              f"inflation, against the measured T (largest difference {worst['off']:+.0%} at n = {worst['n']:,.0f}):",
              "", "| n | repeat | measured T s | projected s | off |", "|---|---|---|---|---|"]
    lines += [f"| {c['n']:,.0f} | {c['repeat']} | {c['T']:.1f} | {c['projected']:.1f} | {c['off']:+.0%} |"
              for c in checks]
    lines += ["", "Assumptions:", ""] + [f"- {a}" for a in summary["assumptions"]]
    return lines


def command_line(argv: Sequence[str]) -> str:
    """``argv`` as a shell would take it (as ``serial_fraction`` records its command)."""
    from benchmarks.serial_fraction import command_line as quoted

    return quoted(argv)


def main(argv=None) -> int:
    """Entry point of ``python -m benchmarks.project_scale``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.project_scale",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("summaries", nargs="+", help="summary.json files of benchmarks.serial_fraction")
    parser.add_argument("--rows", type=float, default=1e8)
    parser.add_argument("--workers", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--inflation", type=float, default=1.0,
                        help=f"factor on per-chunk kinds' busy seconds (memory bandwidth; {MEASURED_INFLATION} "
                        "measured with 16 concurrent chunk passes per host)")
    parser.add_argument("--folds", type=int, help="folds plus the final model (default: the serial-fraction job's)")
    parser.add_argument("--chunk-rows", type=int, help="rows per chunk at N (default: the largest run's)")
    parser.add_argument("--out", help="directory for summary.json and report.md")
    args = parser.parse_args(argv)
    summaries = [json.loads(Path(path).read_text()) for path in args.summaries]
    result = project_scale(summaries, args.rows, args.workers, folds=args.folds, chunk_rows=args.chunk_rows,
                           inflation=args.inflation)
    summary = {"kind": "project_scale", "command": "python -m benchmarks.project_scale " + command_line(
        sys.argv[1:] if argv is None else argv), "date": utc_now(), "machine": machine_info(),
        "packages": package_versions(),
        "title": TITLE.format(rows=f"{args.rows:,.0f}", workers=" and ".join(map(str, args.workers))),
        "description": "Fitted to the runs of " + ", ".join(
            f"`{s.get('command', '?')}` ({s.get('date', '?')})" for s in summaries) + "; see the module's docstring.",
        **result}
    text = "\n".join(render_markdown(summary))
    if args.out:
        from benchmarks.results import write_summary

        write_summary(args.out, summary, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
